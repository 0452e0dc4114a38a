"""Fixtures for the compare tests: tiny image classifiers written with onnx.helper, and the fake trtexec of
tests/fakes installed per TensorRT version (through tests/bench/bench_helpers.py)."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "bench"))

from bench_helpers import install_trtexec  # noqa: E402

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


@pytest.fixture
def fake_trtexec(tmp_path, monkeypatch):
    """Factory: ``fake_trtexec("10.3.0")`` installs the fake and returns its path."""
    for name in ("FAKE_TRTEXEC_VERSION", "FAKE_TRTEXEC_DEVICE", "FAKE_TRTEXEC_OUTPUT_ERROR", "EDGEATTN_TRTEXEC"):
        monkeypatch.delenv(name, raising=False)

    def _install(version):
        return install_trtexec(tmp_path / "trt", version)

    return _install


@pytest.fixture
def no_jetson(monkeypatch):
    """Not a Jetson: the build's board detection finds nothing."""
    import edgeattn

    for name in ("edgeattn.jetson", "edgeattn.jetson.board", "edgeattn.jetson.nvpmodel", "edgeattn.jetson.clocks"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delattr(edgeattn, "jetson", raising=False)
