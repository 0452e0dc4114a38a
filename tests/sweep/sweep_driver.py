"""Runs `edgeattn sweep ...` in a subprocess with the stub benchmark and engine builder injected, for the
signal tests (SIGINT/SIGTERM must reach a real process). Usage: python sweep_driver.py SWEEP-ARGS..."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stubbench  # noqa: E402
from edgeattn.sweep import runner  # noqa: E402

fail_at = os.environ.get("STUB_BENCH_FAIL_AT")
runner.default_bench = lambda: stubbench.make_bench(fail_at=int(fail_at) if fail_at else None)
runner.default_engine_builder = lambda plugin_mode=None: stubbench.fake_engine_builder
# the stub models are placeholders, not ONNX: only a readability check
runner.default_model_check = lambda *a, **k: runner._basic_model_check

from edgeattn.cli import main  # noqa: E402

main(["sweep"] + sys.argv[1:])
