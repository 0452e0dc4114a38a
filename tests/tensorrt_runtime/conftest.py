"""Fixtures shared with tests/bench (they live in tests/bench/bench_helpers.py).

The tests of edgeattn/tensorrt/ live here and not in tests/tensorrt: pytest puts tests/ on sys.path, where a
directory named tensorrt would be found by ``import tensorrt`` as a namespace package on machines without
TensorRT."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

from bench_helpers import fake_trtexec, isolated_path, jetson_stub, no_jetson, no_plugins_module, plugins_stub, \
    write_model  # noqa: E402,F401  (fixtures)
