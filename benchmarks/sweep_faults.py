"""Faults injected into sweeps on a fake Jetson AGX Orin: issue 37's "a number for nothing is lost".

Each trial runs one short sweep (``edgeattn sweep`` in a subprocess, tests/sweep/sweep_driver.py) on a fresh fake
board (tests/fakes) and injects one fault at a random moment of it. Trials of the benchmark faults run edgeattn's
own benchmark on prebuilt engines through the fake trtexec (a real benchmark subprocess); the others run the stub
benchmark of the sweep tests (tests/sweep/stubbench.py, in the sweep's process), which saves each sweep the onnx
import and a trtexec process per measurement. The faults:

* the benchmark subprocess (trtexec) crashing (SIGSEGV), hanging past its timeout, or printing garbage;
* tegrastats exiting or stalling after a random number of lines;
* nvpmodel or jetson_clocks failing once or hanging, at a random one of their calls;
* ENOSPC or EIO while a row is appended to rows.jsonl or sweep-state.json is written, at a random one of those
  writes;
* SIGINT, SIGTERM or SIGKILL at a random instant.

Then, as a user would, it runs ``edgeattn sweep --resume -o DIR`` until the sweep is complete (at most
``RESUMES`` times; a sweep killed before its resume file existed is started again). After each trial it checks:
the board's mode, clock lock and fan are the original ones; results.json parses and is complete; every planned
measurement is there exactly once (no row duplicated, none lost: a mode the sweep skipped must be listed with its
reason); the rows finished before the fault are kept, not measured again; the fault is named in the sweep's
output. Hung commands are killed by edgeattn's own timeouts, capped here at ``--timeout-cap-s`` so that a hang
costs seconds rather than the product's minutes (SWEEP_DRIVER_TIMEOUT_CAP_S).

    python benchmarks/sweep_faults.py --trials 230 --workers 3 --json benchmarks/results/sweep_faults.json
    python benchmarks/sweep_faults.py --trials 6 --kinds sigkill,enospc-row      # a quick look

Seeded: the same ``--seed`` gives the same trials (fault kinds, moments, board states, sweep options); the
timing of signals is wall-clock and depends on the machine's load.

Why one script of ~430 lines: the fault catalogue, the trial runner and the checks after each trial read the
same trial record; split apart, each file would only be imported by the others.
"""
import argparse
import collections
import concurrent.futures
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TESTS = os.path.join(REPO, "tests")
sys.path.insert(0, REPO)
sys.path.insert(0, TESTS)
sys.path.insert(0, os.path.join(TESTS, "bench"))
sys.path.insert(0, os.path.join(TESTS, "fakes", "nvpmodel"))

DRIVER = os.path.join(TESTS, "sweep", "sweep_driver.py")
BOARD = "agx-orin-64gb"
TRT_VERSION = "10.3.0"
SCHEMA = "edgeattn.sweep-faults/1"
RESUMES = 3
#: AGX Orin modes that need a reboot from the live group (their GPU power-gating masks differ)
REBOOT_MODES = (1, 2)
#: the sampling interval of these sweeps (the driver lowers the minimum as the tests do, tests/sweep_timing.py)
INTERVAL_MS = 100
#: a sweep process that runs longer than this is itself hung: killed and counted
SWEEP_TIMEOUT_S = 600

#: fault kind -> what the sweep's output must contain to have named it (any of)
NAMED = {
    "bench-crash": ("SIGSEGV",),
    "bench-hang": ("timed out",),
    "bench-garbage": ("--exportTimes",),
    "tegrastats-exit": ("tegrastats exited",),
    "tegrastats-stall": ("tegrastats printed no line", "tegrastats stopped printing"),
    "nvpmodel-fail": ("injected fault",),
    "nvpmodel-hang": ("timed out",),
    "clocks-fail": ("injected failure",),
    "clocks-hang": ("timed out",),
    "enospc-row": ("No space left on device",),
    "eio-row": ("Input/output error",),
    "enospc-state": ("No space left on device",),
    "eio-state": ("Input/output error",),
    "sigint": ("SIGINT",),
    "sigterm": ("SIGTERM",),
    "sigkill": ("did not finish",),
}
KINDS = tuple(NAMED)


def _engines(base):
    """Two engines (and manifests) built once by `edgeattn build` with the fake trtexec."""
    from bench_helpers import install_trtexec, matmul_model

    trtexec = install_trtexec(os.path.join(base, "trt"), TRT_VERSION)
    engines = []
    for name, features in (("m1", 8), ("m2", 16)):
        onnx_path = os.path.join(base, "{}.onnx".format(name))
        with open(onnx_path, "wb") as handle:
            handle.write(matmul_model(batch=1, features=features))
        engine = os.path.join(base, "{}.engine".format(name))
        subprocess.run([sys.executable, "-c", "import sys; from edgeattn.cli import main; main(sys.argv[1:])", "build",
                        onnx_path, "--backend", "trtexec",
                        "--trtexec", trtexec, "--plugins", "off", "-o", engine], check=True, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=REPO))
        engines.append(engine)
    return trtexec, engines


def _placeholders(base):
    """Model files for the stub benchmark (it does not read them; the sweep builds placeholder engines)."""
    paths = []
    for name in ("s1", "s2"):
        path = os.path.join(base, "{}.onnx".format(name))
        with open(path, "wb") as handle:
            handle.write(b"placeholder for the stub benchmark")
        paths.append(path)
    return paths


def _plan_trial(rng, index, kind, engines, placeholders, live_modes, calls):
    """The seeded choices of one trial."""
    original = rng.choice(live_modes)
    modes = list(live_modes)
    if rng.random() < 0.3:  # a mode that needs a reboot from here: skipped, with its reason in results.json
        modes = sorted(modes + [rng.choice(REBOOT_MODES)])
    models = (engines if kind.startswith("bench") else placeholders)[:rng.choice([1, 2])]
    repeats = rng.choice([1, 1, 2])
    if kind.startswith("bench"):  # a trtexec process per measurement: the smallest sweep
        models, repeats = engines[:1], 1
    clocks = "max" if kind.startswith("clocks") else rng.choice(["default", "default", "max"])
    rows = len(modes) * len(models) * repeats
    if kind.startswith("bench"):
        moment = rng.randint(1, rows)
    elif kind.startswith("tegrastats"):
        moment = rng.randint(0, 6)
    elif kind.startswith(("nvpmodel", "clocks")):
        moment = rng.randint(1, calls["nvpmodel" if kind.startswith("nvpmodel") else "jetson_clocks"])
    elif kind.endswith("-row"):
        moment = rng.randint(1, rows)  # one append to rows.jsonl per row
    elif kind.endswith("-state"):
        moment = rng.randint(1, len(modes) + 2)
    else:
        # a fraction of the calibrated sweep time, counted from the start of the process (one trial in five: a
        # signal during start-up) or from the moment the sweep wrote its resume file
        moment = {"from": "start" if rng.random() < 0.2 else "resume-file", "fraction": round(rng.random(), 3)}
    return {"index": index, "kind": kind, "moment": moment, "original_mode": original,
            "locked_before": rng.random() < 0.25, "fan_pwm": rng.randint(0, 255), "modes": modes,
            "models": models, "repeats": repeats, "clocks": clocks}


def _sweep_argv(trial, out_dir):
    return [sys.executable, DRIVER] + trial["models"] + [
        "--profile", "auto", "--modes", ",".join(str(m) for m in trial["modes"]), "--repeats", str(trial["repeats"]),
        "--duration-s", "0.05", "--warmup-s", "0", "--settle-s", "0", "--interval-ms", str(INTERVAL_MS),
        "--clocks", trial["clocks"], "-o", out_dir]


def _run(argv, env, signal_at=None, signum=None, after_file=None):
    """Run a sweep process; with ``signal_at`` send ``signum`` that many seconds after the start (or after
    ``after_file`` appeared), if it still runs."""
    started = time.time()
    process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, universal_newlines=True)
    sent = False
    if signal_at is not None:
        while after_file and not os.path.exists(after_file) and process.poll() is None:
            time.sleep(0.02)
        try:
            process.wait(timeout=signal_at)
        except subprocess.TimeoutExpired:
            process.send_signal(signum)
            sent = True
    try:
        output, _ = process.communicate(timeout=SWEEP_TIMEOUT_S)
        hung = False
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        hung = True
    return {"returncode": process.returncode, "output": output, "seconds": time.time() - started, "sent": sent,
            "hung": hung}


def _results(out_dir):
    path = os.path.join(out_dir, "results.json")
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _key(row):
    return (row.get("model_key"), row.get("mode_id"), row.get("precision_requested"), row.get("repeat"))


def _fault_fired(kind, board, run):
    """Whether the fault really happened (a moment past the sweep's end injects nothing)."""
    if kind.startswith(("sigint", "sigterm", "sigkill")):
        return run["sent"]
    if kind.endswith(("-row", "-state")):
        return os.path.exists(os.path.join(board.state_dir, "fault-count-io"))
    tool = {"bench": "trtexec", "tegrastats": "tegrastats", "nvpmodel": "nvpmodel", "clocks": "jetson_clocks"}[
        kind.split("-")[0]]
    count_file = os.path.join(board.state_dir, "fault-count-{}".format(tool))
    if not os.path.exists(count_file):
        return False
    with open(count_file) as handle:
        calls = len(handle.read())
    if tool == "tegrastats":
        return calls >= 1  # its first run misbehaves after `moment` lines, if it ran that long
    with open(count_file) as handle:
        return calls >= int(board.fault.split(":")[2])


def _named(kind, output, rows):
    """(named, without_effect): whether the sweep named the fault where a user looks. A tegrastats fault costs the
    rows measured after it their power: each such row must say why in its own ``power.reason`` (results.csv's
    ``power_reason``) and the output must say it too. One that cost no row (it came after the last window) and
    went unmentioned had no effect to name: counted apart, not as named."""
    said = any(word in output for word in NAMED[kind])
    if not kind.startswith("tegrastats"):
        return said, False
    unpowered = [r for r in rows if (r.get("power") or {}).get("total_w") is None]
    if not unpowered:
        return (True, False) if said else (None, True)
    every_row = all(any(word in str((r.get("power") or {}).get("reason")) for word in NAMED[kind]) for r in unpowered)
    return said and every_row, False


def run_trial(trial, base, trtexec, calibrated_s, until=None):
    import fakeharness

    if until is not None and time.time() > until:
        return None  # the time budget is spent: not run

    board_dir = os.path.join(base, "trial-{:04d}".format(trial["index"]))
    board = fakeharness.FakeBoard(board_dir, BOARD, mode=trial["original_mode"], locked=trial["locked_before"],
                                  fan_pwm=trial["fan_pwm"])
    out_dir = os.path.join(board_dir, "sweep")
    kind, moment = trial["kind"], trial["moment"]
    env = dict(os.environ, PYTHONPATH=REPO, SWEEP_DRIVER_MIN_INTERVAL_MS=str(INTERVAL_MS),
               SWEEP_DRIVER_BENCH="real" if kind.startswith("bench") else "stub", **board.env)
    if trtexec:
        env["EDGEATTN_TRTEXEC"] = trtexec
    for name in ("FAKE_FAULT", "SWEEP_DRIVER_IO_FAULT"):
        env.pop(name, None)
    clean_env = dict(env)
    kind, moment = trial["kind"], trial["moment"]
    signal_at = signum = None
    board.fault = None
    if kind.startswith("sig"):
        signum = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM, "sigkill": signal.SIGKILL}[kind]
        signal_at = moment["fraction"] * calibrated_s * (1.0 if moment["from"] == "start" else 0.6)
    elif kind.endswith(("-row", "-state")):
        name = "rows.jsonl" if kind.endswith("-row") else "sweep-state.json"
        env["SWEEP_DRIVER_IO_FAULT"] = "{}:{}:{}".format(name, moment, "ENOSPC" if kind.startswith("enospc") else "EIO")
    else:
        tool = {"bench": "trtexec", "tegrastats": "tegrastats", "nvpmodel": "nvpmodel", "clocks": "jetson_clocks"}[
            kind.split("-")[0]]
        board.fault = "{}:{}:{}".format(tool, kind.split("-")[1], moment)
        env["FAKE_FAULT"] = board.fault
    argv = _sweep_argv(trial, out_dir)
    state_file = os.path.join(out_dir, "sweep-state.json")
    runs = [_run(argv, env, signal_at, signum, after_file=state_file if signum and moment["from"] != "start" else None)]
    started_sweep = os.path.exists(state_file)
    fired = _fault_fired(kind, board, runs[0])
    after_fault = _results(out_dir)
    kept_before = {_key(r): r.get("started_unix") for r in (after_fault or {}).get("rows", [])}
    data = after_fault
    while (data is None or data.get("status") != "complete") and len(runs) <= RESUMES:
        if os.path.exists(os.path.join(out_dir, "sweep-state.json")):
            runs.append(_run([sys.executable, DRIVER, "--resume", "-o", out_dir], clean_env))
        else:  # stopped before the sweep wrote anything to resume from: start it again
            runs.append(_run(argv, clean_env))
        data = _results(out_dir)
    state = board.state()
    precision = "as-built" if kind.startswith("bench") else "fp32"
    expected = {(os.path.abspath(m), mode, precision, r) for m in trial["models"] for mode in trial["modes"]
                for r in range(1, trial["repeats"] + 1)}
    rows = (data or {}).get("rows", [])
    keys = [_key(r) for r in rows]
    skipped_modes = {s.get("mode_id") for s in (data or {}).get("skipped", []) if s.get("reason")}
    present = set(keys)
    missing = expected - present
    lost = {k for k in missing if k[1] not in skipped_modes}
    redone = sum(1 for r in rows if _key(r) in kept_before and r.get("started_unix") != kept_before[_key(r)])
    first_output = runs[0]["output"]
    named_in = first_output + (runs[1]["output"] if kind == "sigkill" and len(runs) > 1 else "")
    result = {
        "index": trial["index"], "kind": kind, "moment": moment, "fired": fired, "runs": len(runs),
        "returncodes": [r["returncode"] for r in runs], "hung_runs": sum(r["hung"] for r in runs),
        "seconds": round(sum(r["seconds"] for r in runs), 1),
        "complete": bool(data and data.get("status") == "complete"),
        "board_restored": state["mode"] == trial["original_mode"] and state["locked"] == trial["locked_before"]
        and state.get("fan_pwm") == trial["fan_pwm"],
        "board": {"mode": state["mode"], "locked": state["locked"], "fan_pwm": state.get("fan_pwm")},
        "original": {"mode": trial["original_mode"], "locked": trial["locked_before"], "fan_pwm": trial["fan_pwm"]},
        "tegrastats_left": len(board.live_tegrastats()),
        "rows_expected": len(expected), "rows": len(rows), "rows_duplicated": len(keys) - len(present),
        "rows_lost": len(lost), "rows_skipped_with_reason": len(missing) - len(lost), "rows_redone": redone,
        # a fault before the sweep wrote its resume file changed nothing (the sweep is simply started again)
        "before_start": not started_sweep,
    }
    result["named"], result["without_effect"] = _named(kind, named_in, rows) if fired and started_sweep else (None,
                                                                                                             False)
    result["power_reasons"] = sorted({str((r.get("power") or {}).get("reason")) for r in rows
                                      if (r.get("power") or {}).get("total_w") is None})
    board.kill_leftovers()
    result["ok"] = bool(result["complete"] and result["board_restored"] and not result["rows_duplicated"]
                        and not result["rows_lost"] and not result["rows_redone"] and not result["hung_runs"]
                        and result["tegrastats_left"] == 0 and result["named"] is not False)
    result["output_tails"] = [r["output"][-1500:] for r in runs]
    if result["ok"]:
        shutil.rmtree(board_dir, ignore_errors=True)
    return result


def _calibrate(base, models, live_modes):
    """Seconds of one fault-free sweep of the largest shape (signals are sent at a fraction of it)."""
    trial = {"index": 9999, "kind": "sigkill", "moment": 1.0, "original_mode": live_modes[0], "locked_before": False,
             "fan_pwm": 88, "modes": live_modes, "models": models, "repeats": 1, "clocks": "max"}
    import fakeharness

    board = fakeharness.FakeBoard(os.path.join(base, "calibration"), BOARD, mode=live_modes[0])
    env = dict(os.environ, PYTHONPATH=REPO, SWEEP_DRIVER_MIN_INTERVAL_MS=str(INTERVAL_MS), SWEEP_DRIVER_BENCH="stub",
               **board.env)
    run = _run(_sweep_argv(trial, os.path.join(base, "calibration", "sweep")), env)
    if run["returncode"] != 0:
        raise SystemExit("the fault-free calibration sweep failed:\n" + run["output"][-3000:])
    calls = collections.Counter(call["tool"] for call in board.calls() if call["tool"] != "sudo")
    return run["seconds"], {tool: calls[tool] for tool in ("nvpmodel", "jetson_clocks")}


def _live_modes():
    """The modes of the board's largest group that switch live among themselves (AGX Orin: 0 and 3)."""
    from fakeboard import mask_of, parse_conf
    import fakeboard

    modes, _ = parse_conf(fakeboard.boards()[BOARD]["conf"])
    groups = collections.defaultdict(list)
    for mode_id in sorted(modes):
        groups[repr(mask_of(modes[mode_id]))].append(mode_id)
    return max(groups.values(), key=len)


def summarise(results, args, calibrated_s, elapsed):
    by_kind = collections.OrderedDict()
    for kind in KINDS:
        mine = [r for r in results if r["kind"] == kind]
        fired = [r for r in mine if r["fired"]]
        by_kind[kind] = {
            "trials": len(mine), "injected": len(fired), "survived": sum(r["ok"] for r in fired),
            "before_the_sweep_started": sum(r["before_start"] for r in fired),
            "to_name": sum(r["named"] is not None for r in fired), "named": sum(bool(r["named"]) for r in fired),
            "without_effect": sum(r["without_effect"] for r in fired), "boards_left_changed": sum(not r["board_restored"]
                                                                                      for r in mine),
            "rows_lost": sum(r["rows_lost"] for r in mine), "rows_duplicated": sum(r["rows_duplicated"] for r in mine),
            "rows_redone": sum(r["rows_redone"] for r in mine),
            "rows_skipped_with_reason": sum(r["rows_skipped_with_reason"] for r in mine),
            "resume_runs": sum(r["runs"] - 1 for r in mine)}
    injected = [r for r in results if r["fired"]]
    return {
        "schema": SCHEMA, "seed": args.seed, "trials_planned": args.trials, "trials": len(results), "board": BOARD,
        "trtexec": TRT_VERSION, "until": args.until, "workers": args.workers,
        "timeout_cap_s": args.timeout_cap_s, "interval_ms": INTERVAL_MS, "calibrated_sweep_s": round(calibrated_s, 1),
        "python": platform.python_version(), "elapsed_s": round(elapsed, 1),
        "faults_injected": len(injected), "faults_survived": sum(r["ok"] for r in injected),
        "faults_to_name": sum(r["named"] is not None for r in injected),
        "faults_named": sum(bool(r["named"]) for r in injected),
        "faults_without_effect": sum(r["without_effect"] for r in injected),
        "boards_left_changed": sum(not r["board_restored"] for r in results),
        "rows_expected": sum(r["rows_expected"] for r in results), "rows_lost": sum(r["rows_lost"] for r in results),
        "rows_duplicated": sum(r["rows_duplicated"] for r in results),
        "rows_redone": sum(r["rows_redone"] for r in results),
        "rows_skipped_with_reason": sum(r["rows_skipped_with_reason"] for r in results),
        "tegrastats_left_running": sum(r["tegrastats_left"] for r in results),
        "incomplete_sweeps": sum(not r["complete"] for r in results),
        "by_kind": by_kind,
        "failed_trials": [r for r in results if not r["ok"]],
        "example_outputs": {kind: next((r["output_tails"] for r in results if r["kind"] == kind and r["fired"]
                                        and r["ok"]), None) for kind in KINDS},
        "trial_results": [{k: r[k] for k in ("index", "kind", "moment", "fired", "ok", "runs", "seconds")}
                          for r in results],
    }


def main(argv=None):
    # the sweeps must get SIGINT as a terminal's Ctrl-C delivers it: this script started in the background by a
    # non-interactive shell (``script &``) inherits SIGINT ignored, exec keeps an ignored signal ignored, and Python
    # then installs no KeyboardInterrupt handler, so a SIGINT before the sweep's own handlers was lost (one trial of
    # the first run on the row journal). A handler here is reset to the default in every child by exec.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=230)
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--workers", type=int, default=2, help="trials run at once (each on its own fake board)")
    parser.add_argument("--kinds", default=None, help="comma list of fault kinds (default: all, in turn)")
    parser.add_argument("--timeout-cap-s", type=float, default=8.0,
                        help="cap on the timeout of every command the sweep runs (a hung fake is killed then)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the trial directories (for a look)")
    parser.add_argument("--until", default=None, metavar="HH:MM",
                        help="start no trial after this local time (the record says how many ran)")
    args = parser.parse_args(argv)
    os.environ["SWEEP_DRIVER_TIMEOUT_CAP_S"] = str(args.timeout_cap_s)
    until = None
    if args.until:
        hour, minute = (int(part) for part in args.until.split(":"))
        now = time.localtime()
        until = time.mktime(now[:3] + (hour, minute, 0) + now[6:])
    kinds = args.kinds.split(",") if args.kinds else list(KINDS)
    rng = random.Random(args.seed)
    base = tempfile.mkdtemp(prefix="edgeattn-sweep-faults-")
    started = time.time()
    try:
        trtexec, engines = _engines(base)
        live = _live_modes()
        calibrated, calls = _calibrate(base, _placeholders(base), live)
        print("calibrated sweep: {:.1f} s, calls {}; live modes of {}: {}".format(calibrated, calls, BOARD, live),
              flush=True)
        placeholders = _placeholders(base)
        trials = [_plan_trial(rng, i, kinds[i % len(kinds)], engines, placeholders, live, calls)
                  for i in range(args.trials)]
        results = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.workers) as pool:
            futures = [pool.submit(run_trial, t, base, trtexec, calibrated, until) for t in trials]
            for future in concurrent.futures.as_completed(futures):
                result = future.result()
                if result is None:
                    continue
                results.append(result)
                print("[{}/{}] {:<16} moment {:<6} fired {!s:<5} ok {!s:<5} runs {} {:.1f} s".format(
                    len(results), len(trials), result["kind"], str(result["moment"]), result["fired"], result["ok"],
                    result["runs"], result["seconds"]), flush=True)
                if args.json and len(results) % 10 == 0:
                    _write(args.json, summarise(sorted(results, key=lambda r: r["index"]), args, calibrated,
                                                time.time() - started))
        record = summarise(sorted(results, key=lambda r: r["index"]), args, calibrated, time.time() - started)
        record["complete"] = True
        _write(args.json, record)
        print(json.dumps({k: record[k] for k in ("faults_injected", "faults_survived", "faults_named",
                                                  "boards_left_changed", "rows_lost", "rows_duplicated",
                                                  "rows_redone", "incomplete_sweeps")}), flush=True)
        return 0 if not record["failed_trials"] else 1
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


def _write(path, record):
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as handle:
        json.dump(record, handle, indent=1)
        handle.write("\n")
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(main())
