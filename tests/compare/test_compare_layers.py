"""``edgeattn compare A B --layers`` on ONNX Runtime for real: an FP32 model against a copy with one weight
perturbed; the first divergent tensor must be the perturbed node's output (nodes before it agree exactly)."""
import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("polygraphy")


def _model(path, scale_second=1.0):
    """x (1, 3, 4, 4) -> Conv -> Relu -> Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm (8 classes)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((6, 3, 3, 3)).astype(np.float32)
    w2 = (rng.standard_normal((6, 6, 3, 3)) * scale_second).astype(np.float32)
    w3 = rng.standard_normal((8, 6)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="/conv1/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="/act1/Relu"),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], name="/conv2/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"], name="/act2/Relu"),
             helper.make_node("GlobalAveragePool", ["r2"], ["p"], name="/pool/GlobalAveragePool"),
             helper.make_node("Flatten", ["p"], ["f"], name="/flatten/Flatten"),
             helper.make_node("Gemm", ["f", "w3"], ["logits"], name="/head/Gemm", transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4, 4])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 8])],
                              [numpy_helper.from_array(w, name) for w, name in ((w1, "w1"), (w2, "w2"), (w3, "w3"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(path))
    return str(path)


def test_first_divergent_tensor_is_the_perturbed_node(invoke, tmp_path):
    reference = _model(tmp_path / "fp32.onnx")
    perturbed = _model(tmp_path / "perturbed.onnx", scale_second=1.01)
    out = tmp_path / "report.json"
    result = invoke(["compare", perturbed, reference, "--layers", "--inputs", "4", "--json", str(out)], expect=1)
    layers = json.loads(out.read_text())["layers"]
    first = layers["first_divergent"]
    assert (first["tensor"], first["node"], first["op_type"]) == ("c2", "/conv2/Conv", "Conv")
    by_tensor = {row["tensor"]: row for row in layers["tensors"]}
    assert by_tensor["c1"]["max_abs"] == 0.0 and by_tensor["r1"]["passed"]  # before the perturbation: identical
    assert [row["tensor"] for row in layers["tensors"]] == ["c1", "r1", "c2", "r2", "p", "f", "logits"]
    assert layers["unmatched"] == {"only_in_a": [], "only_in_b": [], "shape_differs": []}
    text = invoke(["compare", perturbed, reference, "--layers", "--inputs", "4"], expect=1).stdout
    assert "first divergent tensor c2 (node /conv2/Conv, Conv)" in text


def test_identical_models_have_no_divergent_tensor(invoke, tmp_path):
    a = _model(tmp_path / "a.onnx")
    b = _model(tmp_path / "b.onnx")
    text = invoke(["compare", a, b, "--layers", "--inputs", "2"], expect=0).stdout
    assert "every one of 7 shared intermediate tensors is within atol" in text
