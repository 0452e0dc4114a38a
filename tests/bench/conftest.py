"""Fixtures for the build/bench/doctor tests (they live in bench_helpers.py, shared with tests/engine,
tests/tensorrt_runtime and tests/trtexec)."""
from bench_helpers import fake_trtexec, isolated_path, jetson_stub, no_jetson, no_plugins_module, plugins_stub, \
    write_model  # noqa: F401  (fixtures)
