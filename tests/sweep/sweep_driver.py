"""Runs `edgeattn sweep ...` in a subprocess with the stub benchmark and engine builder injected, for the
signal tests (SIGINT/SIGTERM must reach a real process). Usage: python sweep_driver.py SWEEP-ARGS...

STUB_BENCH_HOLD_FILE holds every timed phase of the stub benchmark until that file exists (see stubbench).
SWEEP_DRIVER_MIN_INTERVAL_MS lowers the sampling minimum in this process, as the fast_sampling fixture does in the
test process (tests/sweep_timing.py), so that `--interval-ms` below 500 passes.

For the fault-injection runs (benchmarks/sweep_faults.py): SWEEP_DRIVER_BENCH=real keeps edgeattn's own benchmark
(engines run by the fake trtexec: a real benchmark subprocess); SWEEP_DRIVER_TIMEOUT_CAP_S caps the timeout of every
command edgeattn runs (trtexec, nvpmodel, jetson_clocks, sudo), so that a hung fake is killed in seconds rather than
after the product's minutes; SWEEP_DRIVER_IO_FAULT=FILE:N:ERRNO makes the Nth write of FILE fail with that errno
(ENOSPC, EIO) while its data is being written, once: the Nth row appended to rows.jsonl (half of its line is out),
or the Nth atomic write of results.json or sweep-state.json."""
import errno
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stubbench  # noqa: E402
from edgeattn.jetson import ina3221, tegrastats  # noqa: E402
from edgeattn.sweep import runner  # noqa: E402

class _CountedCalls(object):
    """The stub benchmark's call log, counted and not kept: benchmarks/long_sweep.py measures this process's memory,
    which must not grow with a test stub's log (a dict per measurement)."""

    def __init__(self):
        self.count = 0

    def append(self, call):
        self.count += 1

    def __len__(self):
        return self.count


if os.environ.get("SWEEP_DRIVER_BENCH") != "real":
    fail_at = os.environ.get("STUB_BENCH_FAIL_AT")
    hold_file = os.environ.get("STUB_BENCH_HOLD_FILE")
    runner.default_bench = lambda: stubbench.make_bench(calls=_CountedCalls(), hold_file=hold_file,
                                                        fail_at=int(fail_at) if fail_at else None)
    runner.default_engine_builder = lambda plugin_mode=None: stubbench.fake_engine_builder
    # the stub models are placeholders, not ONNX: only a readability check
    runner.default_model_check = lambda *a, **k: runner._basic_model_check

timeout_cap = os.environ.get("SWEEP_DRIVER_TIMEOUT_CAP_S")
if timeout_cap:
    import subprocess

    from edgeattn import _subprocess

    class _CappedSubprocess(object):
        def __getattr__(self, name):
            return getattr(subprocess, name)

        @staticmethod
        def run(*args, **kwargs):
            if kwargs.get("timeout") is not None:
                kwargs["timeout"] = min(kwargs["timeout"], float(timeout_cap))
            return subprocess.run(*args, **kwargs)

    _subprocess.subprocess = _CappedSubprocess()

io_fault = os.environ.get("SWEEP_DRIVER_IO_FAULT")
if io_fault:
    import contextlib

    from edgeattn import _io
    from edgeattn.sweep import journal, results

    fault_file, fault_call, fault_errno = io_fault.split(":")
    real_atomic_write = _io.atomic_write
    writes = []

    def _fault_now():
        with open(os.path.join(os.environ["FAKE_JETSON_STATE"], "fault-count-io"), "a") as marker:
            marker.write("x")  # tells the fault script the fault happened (not the sweep's output)
        code = getattr(errno, fault_errno)
        raise OSError(code, os.strerror(code))

    real_write_all = journal._write_all

    def faulty_write_all(fd, data):
        if fault_file == journal.JOURNAL_FILE and not data.startswith(b'{"schema"'):  # a row, not the header
            writes.append(fd)
            if len(writes) == int(fault_call):
                real_write_all(fd, data[:len(data) // 2])  # part of the line is out when the disk fails
                _fault_now()
        real_write_all(fd, data)

    journal._write_all = faulty_write_all

    @contextlib.contextmanager
    def faulty_atomic_write(path, mode="wb"):
        with real_atomic_write(path, mode) as handle:
            if os.path.basename(os.fspath(path)) == fault_file:
                writes.append(path)
                if len(writes) == int(fault_call):
                    handle.write("{" if "b" not in mode else b"{")  # part of the data is out when the disk fails
                    _fault_now()
            yield handle

    _io.atomic_write = faulty_atomic_write
    results.atomic_write = faulty_atomic_write

min_interval_ms = os.environ.get("SWEEP_DRIVER_MIN_INTERVAL_MS")
if min_interval_ms:
    import click

    from edgeattn.cli import sweep as sweep_cli

    tegrastats.MIN_INTERVAL_MS = int(min_interval_ms)
    ina3221.MIN_INTERVAL_S = int(min_interval_ms) / 1000.0
    # the command line checks the range before the sweep does
    for param in sweep_cli.sweep.params:
        if param.name == "interval_ms":
            param.type = click.IntRange(min=int(min_interval_ms))

from edgeattn.cli import main  # noqa: E402

main(["sweep"] + sys.argv[1:])
