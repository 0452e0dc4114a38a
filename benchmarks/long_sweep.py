"""A long sweep on a fake Jetson AGX Orin with its memory and open file descriptors sampled: issue 37's "flat, not
growing with the measurement count".

``edgeattn sweep`` runs in a subprocess (tests/sweep/sweep_driver.py: the fake board tools of tests/fakes and the
stub benchmark of the sweep tests, so that a measurement costs milliseconds and a thousand of them fit in minutes)
over the live modes of the fake AGX Orin (0 and 3), ``--models`` models, fp32 and fp16, and ``--repeats`` repeats.
Every ``--every-s`` seconds this script reads the sweep process's resident set size (VmRSS), its open file
descriptors (/proc/PID/fd), its threads, and how many measurements the sweep's row journal (rows.jsonl) holds; it
then fits a least-squares line to RSS and descriptors against the measurement count (after the first tenth, the
start-up) and reports the slopes. The size of a row (as JSON, and as the Python objects a sweep would hold if it kept
its rows in memory) is reported beside them, to read the RSS slope against; the sweep appends each row to the
journal and keeps none.

    python benchmarks/long_sweep.py --json benchmarks/results/long_sweep.json        # 2 x 10 x 2 x 100 = 4000
    python benchmarks/long_sweep.py --models 2 --repeats 5 --json runs/long.json          # a quick look (40)

4000 measurements of 0.05 s take about four minutes: well past the minute of samples a sweep keeps
(runner.KEEP_SAMPLES_S), during which RSS rises for a reason that stops; the slope over the second half of the run
is reported apart for that reason.
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TESTS = os.path.join(REPO, "tests")
sys.path.insert(0, os.path.join(TESTS, "fakes", "nvpmodel"))

DRIVER = os.path.join(TESTS, "sweep", "sweep_driver.py")
BOARD = "agx-orin-64gb"
MODES = (0, 3)
INTERVAL_MS = 100
SCHEMA = "edgeattn.long-sweep/1"


def _status(pid):
    values = {}
    with open("/proc/{}/status".format(pid)) as handle:
        for line in handle:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "Threads"):
                values[key] = int(rest.split()[0])
    values["fds"] = len(os.listdir("/proc/{}/fd".format(pid)))
    return values


def _rows(path):
    try:
        with open(path) as handle:
            return json.load(handle).get("rows", [])
    except (OSError, ValueError):
        return None


def _journaled(path):
    """Rows in the journal so far: its complete lines after the header (None before it exists)."""
    try:
        with open(path, "rb") as handle:
            return max(0, handle.read().count(b"\n") - 1)
    except OSError:
        return None


def _deep_size(value, seen=None):
    """Bytes of ``value`` and everything it holds (sys.getsizeof summed over the containers' contents)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(_deep_size(k, seen) + _deep_size(v, seen) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        size += sum(_deep_size(v, seen) for v in value)
    return size


def _fit(points):
    """Least-squares slope and intercept of y against x."""
    n = len(points)
    if n < 2:
        return None, None
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    if sxx == 0:
        return None, None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sxx
    return slope, mean_y - slope * mean_x


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--duration-s", type=float, default=0.05, help="timed phase of each (stub) measurement")
    parser.add_argument("--every-s", type=float, default=0.5, help="sampling period of RSS and descriptors")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    import fakeharness

    base = tempfile.mkdtemp(prefix="edgeattn-long-sweep-")
    try:
        board = fakeharness.FakeBoard(os.path.join(base, "board"), BOARD, mode=MODES[0])
        models = []
        for index in range(args.models):
            path = os.path.join(base, "model{:02d}.onnx".format(index))
            with open(path, "wb") as handle:
                handle.write(b"placeholder for the stub benchmark")
            models.append(path)
        out_dir = os.path.join(base, "sweep")
        planned = len(MODES) * args.models * 2 * args.repeats
        argv = [sys.executable, DRIVER] + models + [
            "--profile", "auto", "--modes", ",".join(map(str, MODES)), "--precision", "fp32,fp16",
            "--repeats", str(args.repeats), "--duration-s", str(args.duration_s), "--warmup-s", "0",
            "--settle-s", "0", "--interval-ms", str(INTERVAL_MS), "--clocks", "max", "-o", out_dir]
        env = dict(os.environ, PYTHONPATH=REPO, SWEEP_DRIVER_MIN_INTERVAL_MS=str(INTERVAL_MS), **board.env)
        log = open(os.path.join(base, "sweep.log"), "w")
        started = time.time()
        process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        samples = []
        results = os.path.join(out_dir, "results.json")
        journal = os.path.join(out_dir, "rows.jsonl")
        while process.poll() is None:
            time.sleep(args.every_s)
            try:
                status = _status(process.pid)
            except OSError:
                break
            if "VmRSS" not in status:  # exited, not yet reaped
                break
            measured = _journaled(journal)
            if measured is None:
                continue
            samples.append({"t_s": round(time.time() - started, 2), "measurements": measured,
                            "rss_kib": status["VmRSS"], "fds": status["fds"], "threads": status["Threads"]})
        returncode = process.wait()
        log.close()
        elapsed = time.time() - started
        rows = _rows(results) or []
        with open(os.path.join(base, "sweep.log")) as handle:
            tail = handle.read()[-2000:]
        state = board.state()
        # the slopes are of the measuring: the samples after the last measurement (results.json written, the board
        # restored, the process exiting) are left out
        measuring = [s for s in samples if s["measurements"] < planned]
        steady = [s for s in measuring if s["measurements"] >= planned / 10.0]
        rss_slope, _ = _fit([(s["measurements"], s["rss_kib"]) for s in steady])
        # the sweep keeps the samples of the last minute (runner.KEEP_SAMPLES_S): RSS rises while that fills
        late_half = [s for s in measuring if s["measurements"] >= planned / 2.0]
        rss_late_slope, _ = _fit([(s["measurements"], s["rss_kib"]) for s in late_half])
        # within each mode (results.json and .csv are written between modes, a step of its own)
        per_mode = planned // len(MODES)
        within_modes = []
        for index in range(len(MODES)):
            inside = [s for s in measuring if index * per_mode < s["measurements"] < (index + 1) * per_mode]
            slope, _ = _fit([(s["measurements"], s["rss_kib"]) for s in inside])
            within_modes.append({"mode": MODES[index], "samples": len(inside),
                                 "rss_kib_min": min(s["rss_kib"] for s in inside) if inside else None,
                                 "rss_kib_max": max(s["rss_kib"] for s in inside) if inside else None,
                                 "rss_slope_kib_per_measurement": round(slope, 3) if slope is not None else None})
        fd_slope, _ = _fit([(s["measurements"], s["fds"]) for s in steady])
        rss_time_slope, _ = _fit([(s["t_s"], s["rss_kib"]) for s in steady])
        row_bytes = (len(json.dumps(rows)) / len(rows)) if rows else None
        row_objects = (_deep_size(rows) / len(rows)) if rows else None
        # seconds per measurement early and late: equal when a row costs the same at the end as at the start
        times = sorted(r["started_unix"] for r in rows)
        tenth = max(1, len(times) // 10)
        early = (times[tenth] - times[0]) / tenth if len(times) > tenth else None
        late = (times[-1] - times[-1 - tenth]) / tenth if len(times) > tenth else None
        record = {
            "schema": SCHEMA, "board": BOARD, "modes": list(MODES), "models": args.models,
            "precisions": ["fp32", "fp16"], "repeats": args.repeats, "duration_s": args.duration_s,
            "interval_ms": INTERVAL_MS, "planned_measurements": planned, "measurements": len(rows),
            "returncode": returncode, "elapsed_s": round(elapsed, 1), "python": platform.python_version(),
            "board_restored": state["mode"] == MODES[0] and state["locked"] is False,
            "samples_taken": len(samples),
            "rss_kib": {"first": samples[0]["rss_kib"] if samples else None,
                        "last": samples[-1]["rss_kib"] if samples else None,
                        "max": max(s["rss_kib"] for s in samples) if samples else None},
            "fds": {"min": min(s["fds"] for s in samples) if samples else None,
                    "max": max(s["fds"] for s in samples) if samples else None},
            "threads_max": max(s["threads"] for s in samples) if samples else None,
            "rss_slope_kib_per_measurement": round(rss_slope, 3) if rss_slope is not None else None,
            "rss_slope_kib_per_measurement_second_half": round(rss_late_slope, 3) if rss_late_slope is not None
            else None,
            "rss_within_modes": within_modes,
            "rss_slope_kib_per_minute": round(rss_time_slope * 60, 1) if rss_time_slope is not None else None,
            "fd_slope_per_1000_measurements": round(fd_slope * 1000, 3) if fd_slope is not None else None,
            "row_json_kib": round(row_bytes / 1024.0, 3) if row_bytes else None,
            # what one row would cost the sweep's memory as Python objects if it kept them (json.load builds the same)
            "row_python_kib": round(row_objects / 1024.0, 3) if row_objects else None,
            "seconds_per_measurement": {"first_tenth": round(early, 4) if early else None,
                                        "last_tenth": round(late, 4) if late else None},
            "samples": samples if len(samples) <= 400 else samples[::max(1, len(samples) // 400)],
            "sweep_output_tail": tail,
        }
        if args.json:
            os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
            with open(args.json, "w") as handle:
                json.dump(record, handle, indent=1)
                handle.write("\n")
        summary = {k: record[k] for k in ("measurements", "elapsed_s", "rss_kib", "fds",
                                          "rss_slope_kib_per_measurement",
                                          "rss_slope_kib_per_measurement_second_half", "rss_within_modes",
                                          "fd_slope_per_1000_measurements",
                                          "row_json_kib", "row_python_kib", "seconds_per_measurement",
                                          "board_restored")}
        print(json.dumps(summary, indent=1))
        return 0 if returncode == 0 and len(rows) == planned else 1
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
