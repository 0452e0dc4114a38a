"""Time and memory of the test suite (or any command), the whole process tree counted: issue 17's target.

Target (issue 17): the README's test command under 5 minutes and 3 GB on the 2-core development machine.

The command runs in a session of its own; every ``--interval`` seconds the proportional set size (PSS: a page
shared by n processes counts 1/n in each) and the RSS of every process in that session are read from
``/proc/<pid>/smaps_rollup``, so pytest-xdist's workers and the subprocesses they start count together. PSS summed
over the session is what the run takes from the machine; summed RSS counts the shared libraries once per process and
is reported beside it, as is the largest single process (what ``/usr/bin/time -v`` reports). CPU time is the
children's (``getrusage``). Linux only.

    python benchmarks/suite_cost.py --json benchmarks/results/suite_cost.json
    python benchmarks/suite_cost.py --json runs/cost.json -- bash -c "<the README's test command>"
    python benchmarks/suite_cost.py --cold --json runs/cold.json -- .ci/run

Without a command after ``--`` it runs ``python -m pytest -q -n 2 -p no:cacheprovider`` (the README's test run
without the install). Exits with the command's exit status.

Where the time goes: pytest runs inside the command are given ``--junitxml`` (through ``PYTEST_ADDOPTS``; an explicit
``--junitxml`` of an inner run, such as the Python 3.8 pass's, comes later on its command line and wins), and the
result lists the test time of every test file (setup, call and teardown; summed over the workers, so it exceeds the
wall time) and the slowest tests. ``--cold``: the command runs with ``TMPDIR`` set to a new empty directory, so what
the tests cache in the temp dir (nvcc and cuobjdump outputs, the Python 3.8 virtual environment) is made anew, as
on a fresh machine; that directory is deleted afterwards.
"""
import argparse
import collections
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree

TARGET_WALL_S = 300.0
TARGET_MEMORY_BYTES = 3 * 10**9
DEFAULT_COMMAND = [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider"]


def session_memory(session):
    """[(pid, pss bytes, rss bytes, command line)] of the live processes of ``session``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            if os.getsid(pid) != session:
                continue
            pss = rss = 0
            with open("/proc/{}/smaps_rollup".format(pid)) as handle:
                for line in handle:
                    if line.startswith("Pss:"):
                        pss = int(line.split()[1]) * 1024
                    elif line.startswith("Rss:"):
                        rss = int(line.split()[1]) * 1024
            with open("/proc/{}/cmdline".format(pid), "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except (OSError, ValueError):  # the process ended while it was read
            continue
        found.append((pid, pss, rss, command))
    return found


def time_by_test_file(junit_path, slowest=15):
    """({test file: seconds}, [{"test", "s"}] of the ``slowest`` tests, seconds of all tests) from a pytest JUnit XML
    report; ({}, [], 0.0) when there is none (the command ran no pytest)."""
    try:
        root = ElementTree.parse(junit_path).getroot()
    except (OSError, ElementTree.ParseError):
        return {}, [], 0.0
    by_file = collections.Counter()
    tests = []
    for case in root.iter("testcase"):
        seconds = float(case.get("time") or 0.0)
        parts = (case.get("classname") or "").split(".")
        while len(parts) > 1 and parts[-1][:1].isupper():  # test classes: the file is the module above them
            parts.pop()
        module = "/".join(parts) + ".py"
        by_file[module] += seconds
        tests.append({"test": "{}::{}".format(module, case.get("name", "")), "s": round(seconds, 2)})
    tests.sort(key=lambda test: -test["s"])
    ordered = {name: round(seconds, 1) for name, seconds in by_file.most_common()}
    return ordered, tests[:slowest], round(sum(by_file.values()), 1)


def measure(command, interval_s=0.5, env=None):
    """Run ``command`` and return its cost (see the module docstring) as a dict. CPU time is every child this
    process has waited for, so call it from a process of its own (main) for that number to be the command's."""
    started = time.monotonic()
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True, env=env)
    session = process.pid  # a new session's id is its leader's pid
    peak = {"pss": 0, "rss_sum": 0, "process_rss": 0, "at_s": 0.0, "processes": []}
    samples = 0
    try:
        while True:
            processes = session_memory(session)
            samples += 1
            pss, rss_sum = sum(p[1] for p in processes), sum(p[2] for p in processes)
            peak["rss_sum"] = max(peak["rss_sum"], rss_sum)
            peak["process_rss"] = max([peak["process_rss"]] + [p[2] for p in processes])
            if pss > peak["pss"]:
                peak.update(pss=pss, at_s=round(time.monotonic() - started, 2),
                            processes=[{"pid": p[0], "pss_bytes": p[1], "rss_bytes": p[2], "command": p[3][:200]}
                                       for p in sorted(processes, key=lambda p: -p[1])])
            if process.poll() is not None:
                break
            time.sleep(interval_s)
    except BaseException:  # Ctrl-C: the whole run goes, not only its leader
        try:
            os.killpg(session, 9)
        except ProcessLookupError:
            pass
        process.wait()
        raise
    wall_s = time.monotonic() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "command": list(command),
        "exit_code": process.returncode,
        "wall_s": round(wall_s, 2),
        "cpu_user_s": round(usage.ru_utime, 2),
        "cpu_system_s": round(usage.ru_stime, 2),
        "peak_pss_bytes": peak["pss"],
        "peak_rss_sum_bytes": peak["rss_sum"],
        "peak_process_rss_bytes": peak["process_rss"],
        "peak_at_s": peak["at_s"],
        "processes_at_peak": peak["processes"],
        "interval_s": interval_s,
        "samples": samples,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, help="where to write the result")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between memory samples")
    parser.add_argument("--cold", action="store_true",
                        help="run with an empty temp dir (TMPDIR), so nothing the tests cache there is reused")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND (default: the README's pytest run)")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not os.path.exists("/proc/self/smaps_rollup"):
        print("suite_cost.py: needs Linux >= 4.14 (/proc/<pid>/smaps_rollup)", file=sys.stderr)
        return 2
    scratch = tempfile.mkdtemp(prefix="suite-cost-")
    try:
        env = dict(os.environ)
        junit = os.path.join(scratch, "junit.xml")
        env["PYTEST_ADDOPTS"] = " ".join(filter(None, [env.get("PYTEST_ADDOPTS"), "--junitxml=" + junit]))
        if args.cold:
            env["TMPDIR"] = os.path.join(scratch, "tmp")
            os.mkdir(env["TMPDIR"])
        result = measure(command or DEFAULT_COMMAND, args.interval, env)
        by_file, slowest, total = time_by_test_file(junit)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result["temp_dir"] = "empty (--cold)" if args.cold else "as found (outputs cached there by earlier runs reused)"
    result["test_s_total"] = total
    result["test_s_by_file"] = by_file
    result["slowest_tests"] = slowest
    result["target"] = {"wall_s": TARGET_WALL_S, "memory_bytes": TARGET_MEMORY_BYTES,
                        "wall_met": result["wall_s"] < TARGET_WALL_S,
                        "memory_met": result["peak_pss_bytes"] < TARGET_MEMORY_BYTES}
    result["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}
    directory = os.path.dirname(os.path.abspath(args.json))
    os.makedirs(directory, exist_ok=True)
    partial = args.json + ".partial"
    with open(partial, "w") as handle:
        json.dump(result, handle, indent=2)
        handle.write("\n")
    os.replace(partial, args.json)
    print("exit {exit_code}, {wall_s:.0f} s, peak {gb:.2f} GB PSS over the run ({rss:.2f} GB summed RSS, largest "
          "process {proc:.2f} GB)".format(gb=result["peak_pss_bytes"] / 1e9, rss=result["peak_rss_sum_bytes"] / 1e9,
                                          proc=result["peak_process_rss_bytes"] / 1e9, **result), file=sys.stderr)
    return result["exit_code"]


if __name__ == "__main__":
    sys.exit(main())
