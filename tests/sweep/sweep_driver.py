"""Runs `edgeattn sweep ...` in a subprocess with the stub benchmark and engine builder injected, for the
signal tests (SIGINT/SIGTERM must reach a real process). Usage: python sweep_driver.py SWEEP-ARGS...

STUB_BENCH_HOLD_FILE holds every timed phase of the stub benchmark until that file exists (see stubbench).
SWEEP_DRIVER_MIN_INTERVAL_MS lowers the sampling minimum in this process, as the fast_sampling fixture does in the
test process (tests/sweep_timing.py), so that `--interval-ms` below 500 passes."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stubbench  # noqa: E402
from edgeattn.jetson import ina3221, tegrastats  # noqa: E402
from edgeattn.sweep import runner  # noqa: E402

fail_at = os.environ.get("STUB_BENCH_FAIL_AT")
hold_file = os.environ.get("STUB_BENCH_HOLD_FILE")
runner.default_bench = lambda: stubbench.make_bench(fail_at=int(fail_at) if fail_at else None, hold_file=hold_file)
runner.default_engine_builder = lambda plugin_mode=None: stubbench.fake_engine_builder
# the stub models are placeholders, not ONNX: only a readability check
runner.default_model_check = lambda *a, **k: runner._basic_model_check

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
