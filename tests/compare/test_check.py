"""``edgeattn build --check`` (compare/check.py): the comparison recorded in the manifest, exit 1 on a
failure with engine and record kept."""
import json
import sys

import pytest

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("polygraphy")


def test_build_check_records_the_comparison_in_the_manifest(invoke, classifier, fake_trtexec, tmp_path, no_jetson):
    trtexec = fake_trtexec("10.3.0")
    model = classifier("model.onnx")
    result = invoke(["build", model, "--backend", "trtexec", "--trtexec", trtexec, "--plugins", "off",
                     "--precision", "fp16", "--check"], expect=0)
    assert "check      PASSED vs model.onnx on ONNX Runtime CPU (8 inputs)" in result.stdout
    manifest = json.loads((tmp_path / "model.fp16.engine.json").read_text())
    check = manifest["check"]
    assert check["passed"] and check["engine_backend"] == "trtexec" and check["tolerances"]["atol"] == 0.05
    assert check["max_abs"] < 1e-5 and check["inputs"]["count"] == 8
    invoke(["bench", str(tmp_path / "model.fp16.engine"), "--trtexec", trtexec, "--iterations", "2",
            "--warmup-s", "0"], expect=0)  # the rewritten manifest still matches its engine


def test_build_check_failure_exits_1_and_keeps_engine_and_record(invoke, classifier, fake_trtexec, tmp_path,
                                                                 monkeypatch, no_jetson):
    """Without TensorRT's Python API (trtexec cannot mark every tensor) the summary says why no divergent tensor
    is named."""
    monkeypatch.setitem(sys.modules, "tensorrt", None)
    trtexec = fake_trtexec("10.3.0")
    model = classifier("model.onnx")
    monkeypatch.setenv("FAKE_TRTEXEC_OUTPUT_ERROR", "0.5")  # far outside the FP32 tolerance
    result = invoke(["build", model, "--backend", "trtexec", "--trtexec", trtexec, "--plugins", "off", "--check"],
                    expect=1)
    assert "check      FAILED" in result.stdout
    assert "  layers     not compared: tensorrt is not installed" in result.stdout
    manifest = json.loads((tmp_path / "model.engine.json").read_text())
    assert (tmp_path / "model.engine").exists() and manifest["check"]["passed"] is False
    assert manifest["check"]["failures"]
