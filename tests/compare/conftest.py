"""Fixtures for the compare tests: tiny image classifiers written with onnx.helper, and the fake trtexec of
tests/fakes installed per TensorRT version (through tests/bench/bench_helpers.py)."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "bench"))

from bench_helpers import fake_trtexec, isolated_path, no_jetson  # noqa: E402,F401  (fixtures)

from compare_helpers import SIZE, classifier_bytes, classifier_weight  # noqa: E402


@pytest.fixture
def classifier(tmp_path):
    """Factory: ``classifier(name, weight=None, batch="batch")`` writes an ONNX classifier and returns its path."""
    pytest.importorskip("onnx")

    def _write(name="model.onnx", weight=None, batch="batch", size=SIZE):
        path = tmp_path / name
        path.write_bytes(classifier_bytes(classifier_weight(size=size) if weight is None else weight, batch, size))
        return str(path)

    return _write
