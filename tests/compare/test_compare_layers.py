"""``edgeattn compare A B --layers`` on ONNX Runtime for real: an FP32 model against a copy with one weight
perturbed; the first divergent tensor must be the perturbed node's output (nodes before it agree exactly)."""
import json

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("polygraphy")

from compare_helpers import layered_model  # noqa: E402


def test_first_divergent_tensor_is_the_perturbed_node(invoke, tmp_path):
    reference = layered_model(tmp_path / "fp32.onnx")
    perturbed = layered_model(tmp_path / "perturbed.onnx", scale_second=1.01)
    out = tmp_path / "report.json"
    invoke(["compare", perturbed, reference, "--layers", "--inputs", "4", "--json", str(out)], expect=1)
    layers = json.loads(out.read_text())["layers"]
    first = layers["first_divergent"]
    assert (first["tensor"], first["node"], first["op_type"]) == ("c2", "/conv2/Conv", "Conv")
    by_tensor = {row["tensor"]: row for row in layers["tensors"]}
    assert by_tensor["c1"]["max_abs"] == 0.0 and by_tensor["r1"]["passed"]  # before the perturbation: identical
    assert [row["tensor"] for row in layers["tensors"]] == ["c1", "r1", "c2", "r2", "p", "f", "logits"]
    assert layers["unmatched"] == {"only_in_a": [], "only_in_b": [], "shape_differs": [], "fused": []}
    text = invoke(["compare", perturbed, reference, "--layers", "--inputs", "4"], expect=1).stdout
    assert "first divergent tensor c2 (node /conv2/Conv, Conv)" in text


def test_identical_models_have_no_divergent_tensor(invoke, tmp_path):
    a = layered_model(tmp_path / "a.onnx")
    b = layered_model(tmp_path / "b.onnx")
    text = invoke(["compare", a, b, "--layers", "--inputs", "2"], expect=0).stdout
    assert "every one of 7 shared intermediate tensors is within atol" in text
