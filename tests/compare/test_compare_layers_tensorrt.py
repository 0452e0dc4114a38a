"""``edgeattn compare ENGINE ONNX --layers`` and ``build --check`` with a TensorRT side, through the stand-in
TensorRT of fake_tensorrt.py (no TensorRT or GPU here: the TensorRT API and Polygraphy's runner are stand-ins,
ONNX Runtime computes the engine's tensors, Polygraphy's real ModifyNetworkOutputs marks them).

The engine computes its second convolution with weights 1 % larger (the planted divergence) and has no tensor of
its own for the first convolution (swallowed into the Relu after it, as a fused region would): the first divergent
tensor must be the second convolution's output, the first convolution's output listed as not comparable, and the
divergence equal to what the planted factor gives (0.01 of the reference tensor's largest magnitude)."""
import json
import os

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("polygraphy")

import fake_tensorrt  # noqa: E402
from compare_helpers import layered_model, one_error_line, seeded_inputs  # noqa: E402

SHAPES = "x:1x3x4x4,4x3x4x4,4x3x4x4"
PLANTED = {"/conv2/Conv": 1.01}
MATMUL = "(Unnamed Layer* 5) [Matrix Multiply]_output"


def _one_error_line(result):
    return one_error_line(result, progress=("edgeattn compare: ", "edgeattn build"))


def _reference_c2(model, count=4):
    """c2 of the ONNX model on ONNX Runtime for the first ``count`` seeded inputs."""
    import onnx

    proto = onnx.load(model)
    proto.graph.output.append(onnx.ValueInfoProto(name="c2"))
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    inputs = seeded_inputs(count, size=4)
    return session.run(["c2"], {"x": inputs})[0]


@pytest.fixture
def engine(invoke, tmp_path, monkeypatch, isolated_path, no_jetson):
    state = fake_tensorrt.install(monkeypatch, planted=PLANTED, swallowed={"/conv1/Conv"})
    model = layered_model(tmp_path / "model.onnx")
    invoke(["build", model, "--backend", "tensorrt", "--plugins", "off", "--shapes", SHAPES], expect=0)
    return str(tmp_path / "model.engine"), model, state


@pytest.mark.parametrize("engine_side", ["A", "B"])
def test_first_divergent_tensor_of_the_engine(invoke, engine, tmp_path, engine_side):
    path, model, state = engine
    out = tmp_path / "report.json"
    pair = [path, model] if engine_side == "A" else [model, path]
    result = invoke(["compare"] + pair + ["--layers", "--inputs", "4", "--backend", "tensorrt", "--json", out],
                    expect=1)
    assert state["builds"][0] == ["logits"]  # the engine as built: its graph output only
    marked = state["builds"][-1]
    # every layer output (c1 has no layer); Polygraphy 0.53 reads the unnamed product's name as a wildcard pattern
    # and leaves it unmarked, older releases mark it: it is TensorRT's own tensor, compared either way with nothing
    assert set(marked) - {MATMUL} == {"r1", "c2", "r2", "p", "f", "logits"}
    layers = json.loads(out.read_text())["layers"]
    first = layers["first_divergent"]
    assert (first["tensor"], first["node"], first["op_type"]) == ("c2", "/conv2/Conv", "Conv")
    assert first["max_abs"] == pytest.approx(0.01 * np.abs(_reference_c2(model)).max(), rel=1e-3)
    assert [row["tensor"] for row in layers["tensors"]] == ["r1", "c2", "r2", "p", "f", "logits"]
    assert {row["tensor"]: row["max_abs"] for row in layers["tensors"]}["r1"] == 0.0  # upstream: exact
    assert layers["unmatched"]["fused"] == [{"tensor": "c1", "node": "/conv1/Conv", "op_type": "Conv",
                                             "side": engine_side}]
    assert layers["unmatched"]["only_in_" + engine_side.lower()] == [t for t in marked if t == MATMUL]
    assert layers["inputs"] == 4 and "ModifyNetworkOutputs" in layers[engine_side.lower()]["method"]
    assert "first divergent tensor c2 (node /conv2/Conv, Conv)" in result.stdout
    assert "not comparable: fused ({} on TensorRT returns no such tensor): c1 (/conv1/Conv, Conv)".format(
        engine_side) in result.stdout


def test_engine_without_a_planted_divergence_agrees_everywhere(invoke, tmp_path, monkeypatch, isolated_path,
                                                               no_jetson):
    fake_tensorrt.install(monkeypatch)
    model = layered_model(tmp_path / "model.onnx")
    invoke(["build", model, "--backend", "tensorrt", "--plugins", "off", "--shapes", SHAPES], expect=0)
    result = invoke(["compare", str(tmp_path / "model.engine"), model, "--layers", "--inputs", "4", "--backend",
                     "tensorrt"], expect=0)
    assert "every one of 7 shared intermediate tensors is within atol" in result.stdout


def test_an_engine_without_its_onnx_is_refused_in_one_line(invoke, engine, tmp_path):
    """Per-tensor values of an engine need the ONNX it was built from: gone, changed or never recorded (no
    manifest), one line, exit 2, no report written."""
    path, model, _ = engine
    reference = layered_model(tmp_path / "reference.onnx")
    out = tmp_path / "report.json"
    args = ["compare", path, reference, "--layers", "--inputs", "4", "--backend", "tensorrt", "--json", out]
    with open(model, "ab") as handle:
        handle.write(b"\0")
    assert "changed since the engine was built" in _one_error_line(invoke(args, expect=2))
    os.remove(model)
    line = _one_error_line(invoke(args, expect=2))
    assert "per-tensor comparison rebuilds it from its ONNX" in line and "is not there" in line
    os.remove(path + ".json")
    assert "has no manifest naming its ONNX" in _one_error_line(invoke(args, expect=2))
    assert not out.exists()


def test_layers_on_an_engine_needs_tensorrt_python(invoke, classifier, fake_trtexec, tmp_path, monkeypatch,
                                                   no_jetson):
    """trtexec cannot mark every tensor as an output: without TensorRT's Python bindings, one line."""
    import sys

    monkeypatch.setitem(sys.modules, "tensorrt", None)
    trtexec = fake_trtexec("10.3.0")
    model = classifier("model.onnx")
    invoke(["build", model, "--backend", "trtexec", "--trtexec", trtexec, "--plugins", "off"], expect=0)
    line = _one_error_line(invoke(["compare", str(tmp_path / "model.engine"), model, "--trtexec", trtexec,
                                   "--layers", "--inputs", "2"], expect=2))
    assert "tensorrt is not installed" in line and "trtexec cannot mark them" in line



def test_layers_on_an_engine_of_another_tensorrt_is_refused(invoke, classifier, fake_trtexec, tmp_path, monkeypatch,
                                                             no_jetson):
    """An engine that runs through trtexec 10.3 while this Python has TensorRT 10.4: the marked rebuild would be
    another TensorRT's engine, so no tensor of it stands for this one."""
    trtexec = fake_trtexec("10.3.0")
    model = classifier("model.onnx")
    invoke(["build", model, "--backend", "trtexec", "--trtexec", trtexec, "--plugins", "off"], expect=0)
    state = fake_tensorrt.install(monkeypatch, version="10.4.0")
    line = _one_error_line(invoke(["compare", str(tmp_path / "model.engine"), model, "--backend", "trtexec",
                                   "--trtexec", trtexec, "--layers", "--inputs", "2"], expect=2))
    assert "built with TensorRT 10.3.0" in line and "this Python's TensorRT 10.4.0" in line
    assert state["builds"] == []


# ------------------------------------------------------------------------------------------- build --check
def test_build_check_names_the_first_divergent_tensor(invoke, tmp_path, monkeypatch, isolated_path, no_jetson):
    """A failed check (exit 1, engine and manifest kept, as before) prints where the engine first drifts."""
    fake_tensorrt.install(monkeypatch, planted={"/conv2/Conv": 1.5})  # far outside the FP32 check tolerance
    model = layered_model(tmp_path / "model.onnx")
    result = invoke(["build", model, "--backend", "tensorrt", "--plugins", "off", "--shapes", SHAPES, "--check"],
                    expect=1)
    assert "check      FAILED" in result.stdout
    assert "  layers     first divergent tensor c2 (node /conv2/Conv, Conv)" in result.stdout
    check = json.loads((tmp_path / "model.engine.json").read_text())["check"]
    assert not check["passed"] and check["first_divergent"]["tensor"] == "c2"
    assert (tmp_path / "model.engine").exists()
    assert sorted(os.listdir(str(tmp_path))) == ["bin", "model.engine", "model.engine.json", "model.onnx"]  # no scratch


def test_build_check_that_passes_runs_no_marked_build(invoke, tmp_path, monkeypatch, isolated_path, no_jetson):
    state = fake_tensorrt.install(monkeypatch)
    model = layered_model(tmp_path / "model.onnx")
    result = invoke(["build", model, "--backend", "tensorrt", "--plugins", "off", "--shapes", SHAPES, "--check"],
                    expect=0)
    assert "check      PASSED" in result.stdout and "layers" not in result.stdout
    assert state["builds"] == [["logits"]]
