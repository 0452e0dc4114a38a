"""Property-based fuzzing of every parser and loader, at length: issue 37's "10^4 examples each".

The targets, their inputs (mutations of real captures and of files the fake tools and edgeattn write) and the
properties are those of the CI sample (tests/fuzz/fuzz_targets.py): the call returns or raises EdgeAttnError with a
one-line message, a returned record is strict JSON, nothing outside the input is read and nothing is written. Here
each target runs ``--examples`` random examples (hypothesis, seeded); a failing example does not stop the run: it is
counted, and the smallest failing inputs of each distinct failure (exception type and where it was raised) are kept.
Per-example time is recorded too: the slowest example in wall-clock and in CPU seconds, how many took over
``--slow-s`` of wall-clock time, and the inputs of the slowest ones; an example over ``--cpu-limit-s`` of CPU is
a failure like an exception (a parser that can hang shows up there; on a
shared machine a wall-clock outlier whose CPU time is small was waiting for the CPU, not parsing).

    python benchmarks/fuzz.py --examples 10000 --jobs 8 --json benchmarks/results/fuzz.json
    python benchmarks/fuzz.py --examples 200 --targets tegrastats.line,engine.manifest --json runs/fuzz.json

Runs in an empty temporary working directory (a parser that wrote a relative file would leave it there: that is
checked at the end). The JSON is rewritten after every target, so a long run shows its progress.
"""
import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests"))
sys.path.insert(0, os.path.join(REPO, "tests", "fuzz"))

#: failing inputs kept per distinct failure, smallest first
KEEP_SMALLEST = 3
#: slowest inputs kept per target (by CPU time)
KEEP_SLOWEST = 3
SCHEMA = "edgeattn.fuzz-benchmark/1"


def _where(error):
    frames = traceback.extract_tb(error.__traceback__)
    inner = [f for f in frames if os.sep + "edgeattn" + os.sep in f.filename] or frames
    frame = inner[-1] if inner else None
    return "{}:{}".format(os.path.relpath(frame.filename, REPO), frame.lineno) if frame else "?"


def _describe(value, limit=600):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "... ({} characters)".format(len(text))


#: examples per hypothesis run; a target runs batches (seeds seed*1000+0, +1, ...) until its examples are done or
#: the time budget is spent
BATCH = 1000


def run_target(target, examples, seed, workdir, slow_s, until=None, cpu_limit_s=None):
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    import fuzz_targets

    stats = {"examples": 0, "failures": 0, "slow_examples": 0, "max_example_s": 0.0, "max_example_cpu_s": 0.0,
             "batches": 0}
    failures = {}  # signature -> [(size, description, message)]
    slowest = []  # [(cpu seconds, wall seconds, description)]

    def fail(value, signature, message):
        stats["failures"] += 1
        kept = failures.setdefault(signature, [])
        kept.append((len(repr(value)), _describe(value), message))
        kept.sort(key=lambda item: item[0])
        del kept[KEEP_SMALLEST:]

    def run(value):
        stats["examples"] += 1
        started, started_cpu = time.perf_counter(), time.thread_time()
        failed = False
        try:
            fuzz_targets.check(target, value, workdir)
        except Exception as error:  # noqa: BLE001 - every failure is recorded, the run goes on
            failed = True
            fail(value, "{} at {}".format(type(error).__name__, _where(error)),
                 (str(error).strip().splitlines() or [""])[0][:300])
        finally:
            elapsed, cpu = time.perf_counter() - started, time.thread_time() - started_cpu
            if cpu_limit_s is not None and cpu > cpu_limit_s and not failed:
                fail(value, "slow: over {} CPU seconds".format(cpu_limit_s),
                     "{:.2f} CPU seconds for one example".format(cpu))
            stats["max_example_s"] = max(stats["max_example_s"], elapsed)
            stats["max_example_cpu_s"] = max(stats["max_example_cpu_s"], cpu)
            stats["slow_examples"] += elapsed > slow_s
            if len(slowest) < KEEP_SLOWEST or cpu > slowest[-1][0]:
                slowest.append((cpu, elapsed, value))
                slowest.sort(key=lambda item: -item[0])
                del slowest[KEEP_SLOWEST:]

    started = time.time()
    while stats["examples"] < examples and (until is None or time.time() < until):
        batch = min(BATCH, examples - stats["examples"])
        test = hypothesis_seed(seed * 1000 + stats["batches"])(settings(
            max_examples=batch, database=None, deadline=None, phases=[Phase.generate],
            suppress_health_check=list(HealthCheck))(given(target.strategy)(run)))
        before = stats["examples"]
        test()
        stats["batches"] += 1
        if stats["examples"] == before:
            break  # the strategy has nothing new to draw
    stats["budget_reached"] = stats["examples"] < examples
    stats["seconds"] = round(time.time() - started, 1)
    stats["max_example_s"] = round(stats["max_example_s"], 3)
    stats["max_example_cpu_s"] = round(stats["max_example_cpu_s"], 3)
    stats["slowest_inputs"] = [{"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "input": _describe(value, 300)}
                               for cpu, wall, value in slowest]
    stats["distinct_failures"] = len(failures)
    stats["smallest_failures"] = [{"failure": signature, "message": kept[0][2],
                                   "inputs": [{"repr_chars": size, "input": text} for size, text, _ in kept]}
                                  for signature, kept in sorted(failures.items())]
    return stats


def _job(job):
    """One target in a worker process (the corpus is built once, in the parent)."""
    import warnings

    import fuzz_targets

    warnings.simplefilter("ignore")
    corpus, name, examples, seed, workdir, slow_s, until, cpu_limit_s = job
    target = fuzz_targets.targets(corpus)[name]
    if not fuzz_targets.available(target):
        return name, {"skipped": "needs {}".format(target.needs)}
    return name, run_target(target, examples, seed, workdir, slow_s, until, cpu_limit_s)


def _code_commit():
    """The commit of the code fuzzed, and whether the tree differs from it (None outside a git checkout)."""
    import subprocess

    def git(*args):
        return subprocess.run(["git", "-C", REPO] + list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, timeout=30, check=True).stdout.decode()
    try:
        commit = git("rev-parse", "HEAD").strip()
        changed = git("status", "--porcelain", "--untracked-files=no", "--", "edgeattn", "tests", "benchmarks")
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "changed_files": None}
    return {"commit": commit, "changed_files": [line[3:] for line in changed.splitlines()]}


def _write(path, record):
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(record, handle, indent=1)
        handle.write("\n")
    os.replace(tmp, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10000, help="examples per target (default 10000)")
    parser.add_argument("--targets", default=None, help="comma list of target names (default: all)")
    parser.add_argument("--seed", type=int, default=37, help="hypothesis seed (default 37)")
    parser.add_argument("--slow-s", type=float, default=1.0, help="an example slower than this is counted as slow")
    parser.add_argument("--cpu-limit-s", type=float, default=1.0,
                        help="an example that takes more CPU than this is a failure (a parser must not take seconds "
                             "on a short input; 0: no limit)")
    parser.add_argument("--jobs", type=int, default=1, help="targets fuzzed at once, one process each")
    parser.add_argument("--until", default=None, metavar="HH:MM",
                        help="stop drawing new batches at this local time (a target then reports fewer examples)")
    parser.add_argument("--json", default=None, help="write the result here")
    parser.add_argument("--merge", action="store_true",
                        help="keep the other targets of an existing --json file (rerun only --targets)")
    args = parser.parse_args(argv)
    json_path = os.path.abspath(args.json) if args.json else None

    import warnings

    import hypothesis

    import fuzz_corpus
    import fuzz_targets

    warnings.simplefilter("ignore")  # torch's notes on odd pickle protocols of mutated checkpoints
    # the inputs are written and removed per example: on tmpfs where there is one (on this project's VM disk a
    # directory removal took milliseconds, most of an INA3221 tree example's time)
    scratch = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    base = tempfile.mkdtemp(prefix="edgeattn-fuzz-", dir=scratch)
    cwd = os.path.join(base, "cwd")
    os.makedirs(cwd)
    previous = os.getcwd()
    os.chdir(cwd)
    record = {"schema": SCHEMA, "examples_per_target": args.examples, "seed": args.seed, "slow_s": args.slow_s,
              "cpu_limit_s": args.cpu_limit_s or None,
              "python": platform.python_version(), "hypothesis": hypothesis.__version__,
              "started_unix": time.time(), "properties": fuzz_targets.__doc__.split("\n\n")[1].replace("\n", " "),
              "code": _code_commit(), "scratch": scratch or tempfile.gettempdir(), "targets": {}}
    if args.merge and json_path and os.path.exists(json_path):
        with open(json_path) as handle:
            earlier = json.load(handle)
        # each target keeps the commit it ran on: a merged file holds runs of several
        record["targets"] = {name: dict(stats, code=stats.get("code", earlier.get("code")))
                             for name, stats in earlier.get("targets", {}).items()}
        record["merged_from_seeds"] = sorted(set(earlier.get("merged_from_seeds", [earlier.get("seed")])
                                                 + [args.seed]))
    try:
        started = time.time()
        corpus = fuzz_corpus.build(os.path.join(base, "corpus"))
        record["corpus_seconds"] = round(time.time() - started, 1)
        names = args.targets.split(",") if args.targets else sorted(fuzz_targets.targets(corpus))
        until = None
        if args.until:
            hour, minute = (int(part) for part in args.until.split(":"))
            now = time.localtime()
            until = time.mktime(now[:3] + (hour, minute, 0) + now[6:])
            record["until"] = args.until
        jobs = [(corpus, name, args.examples, args.seed, os.path.join(base, "work-{}".format(name)), args.slow_s,
                 until, args.cpu_limit_s or None) for name in names]
        if args.jobs > 1:
            import multiprocessing

            pool = multiprocessing.get_context("fork").Pool(args.jobs)
            finished = pool.imap_unordered(_job, jobs)
        else:
            pool, finished = None, map(_job, jobs)
        for name, stats in finished:
            record["targets"][name] = dict(stats, code=record["code"])
            if "skipped" in stats:
                continue
            print("{:<24} {:>6} examples {:>5} failures {:>7.1f} s (slowest {:.3f} s)".format(
                name, stats["examples"], stats["failures"], stats["seconds"], stats["max_example_s"]), flush=True)
            for failure in stats["smallest_failures"]:
                print("    {}: {}".format(failure["failure"], failure["message"]), flush=True)
            record["total_examples"] = sum(t.get("examples", 0) for t in record["targets"].values())
            record["total_failures"] = sum(t.get("failures", 0) for t in record["targets"].values())
            _write(json_path, record)
        if pool is not None:
            pool.close()
            pool.join()
        record["targets"] = dict(sorted(record["targets"].items()))
        record["elapsed_s"] = round(time.time() - started, 1)
        record["files_left_in_cwd"] = sorted(os.listdir(cwd))
        record["complete"] = True
        _write(json_path, record)
    finally:
        os.chdir(previous)
        shutil.rmtree(base, ignore_errors=True)
    return 1 if record.get("total_failures") or record.get("files_left_in_cwd") else 0


if __name__ == "__main__":
    sys.exit(main())
