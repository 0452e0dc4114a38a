"""edgeattn.onnx_graph: what build, bench and inspect read from an ONNX file, checked against models written out
here with onnx.helper (the expected values are spelled out, not read back through the module under test)."""
import os
import sys

import numpy as np
import pytest

from bench_helpers import matmul_model
from edgeattn import onnx_graph
from edgeattn.errors import EdgeAttnError, MissingDependencyError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _model_with_function():
    function = helper.make_function("trt.plugins", "EdgeAttnLiteMLA", ["a"], ["b"],
                                    [helper.make_node("Relu", ["a"], ["b"])], [helper.make_opsetid("", 17)])
    custom = helper.make_node("EdgeAttnLiteMLA", ["x"], ["y"], domain="trt.plugins", name="attn",
                              plugin_namespace="edgeattn", plugin_version="1", head_dim=8, qt_alpha=[1.0, 2.5],
                              pads=[1, 2, -3], kernel="relu", names=["a", "b"])
    custom.attribute.append(helper.make_attribute("table", helper.make_tensor("t", TensorProto.FLOAT, [1], [1.0])))
    add = helper.make_node("Add", ["y", "w"], ["z"], name="add")
    weight = helper.make_tensor("w", TensorProto.FLOAT, [4], [1, 2, 3, 4])
    graph = helper.make_graph(
        [custom, add], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [4])],  # IR<4 style: initializer listed as input
        [helper.make_tensor_value_info("z", TensorProto.FLOAT16, ["N", None])], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("trt.plugins", 1)],
                             functions=[function], producer_name="pytorch", producer_version="2.13.0", ir_version=8)


def _save(model, path):
    onnx.save(model, str(path))
    return str(path)


def test_header_io_nodes_and_custom_ops(tmp_path):
    model = onnx_graph.load_model(_save(_model_with_function(), tmp_path / "m.onnx"))
    assert onnx_graph.model_info(model) == {
        "ir_version": 8, "opset_imports": {"": 17, "trt.plugins": 1}, "has_functions": True,
        "function_names": ["EdgeAttnLiteMLA"], "producer_name": "pytorch", "producer_version": "2.13.0"}
    assert onnx_graph.graph_io(model) == {
        "inputs": [{"name": "x", "elem_type": "float32", "shape": ["N", 4]}],
        "outputs": [{"name": "z", "elem_type": "float16", "shape": ["N", None]}]}
    nodes = onnx_graph.graph_nodes(model)
    assert [(n["op_type"], n["domain"], n["name"]) for n in nodes] == [
        ("EdgeAttnLiteMLA", "trt.plugins", "attn"), ("Add", "", "add")]
    assert nodes[0]["inputs"] == ["x"] and nodes[1]["inputs"] == ["y", "w"] and nodes[1]["outputs"] == ["z"]
    assert nodes[0]["attributes"] == {"plugin_namespace": "edgeattn", "plugin_version": "1", "head_dim": 8,
                                      "qt_alpha": [1.0, 2.5], "pads": [1, 2, -3], "kernel": "relu",
                                      "names": ["a", "b"], "table": None}
    assert [n["op_type"] for n in onnx_graph.graph_nodes(model, custom_only=True)] == ["EdgeAttnLiteMLA"]
    assert onnx_graph.custom_ops(model) == [{
        "op_type": "EdgeAttnLiteMLA", "domain": "trt.plugins", "plugin_version": "1", "plugin_namespace": "edgeattn",
        "has_namespace_attribute": True, "count": 1}]


def test_custom_ops_without_namespace_and_counts(tmp_path):
    model = onnx.load_from_string(matmul_model(batch=4, features=8, with_custom=True, namespace=False))
    ops = onnx_graph.custom_ops(model)
    assert ops == [{"op_type": "EdgeAttnLiteMLA", "domain": "trt.plugins", "plugin_version": "1",
                    "plugin_namespace": "", "has_namespace_attribute": False, "count": 1}]
    assert onnx_graph.graph_io(model)["inputs"] == [{"name": "x", "elem_type": "float32", "shape": [4, 8]}]


def test_strip_local_functions_keeps_everything_else():
    model = _model_with_function()
    before = model.SerializeToString()
    stripped = onnx.load_from_string(onnx_graph.strip_local_functions(model))
    assert len(stripped.functions) == 0
    expected = onnx.load_from_string(before)
    expected.ClearField("functions")
    assert stripped == expected
    assert model.SerializeToString() == before  # the caller's model is untouched


def test_external_weights_are_not_loaded_and_a_stripped_variant_beside_still_finds_them(tmp_path):
    """build writes the stripped variant beside the original, so its external-data references still resolve."""
    model = onnx.load_from_string(matmul_model(features=64, with_custom=True, with_function=True))
    weight = numpy_helper.to_array(model.graph.initializer[0]).copy()
    path = str(tmp_path / "big.onnx")
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="big.data",
                    size_threshold=0)
    loaded = onnx_graph.load_model(path)
    tensor = loaded.graph.initializer[0]
    assert tensor.data_location == TensorProto.EXTERNAL and not tensor.raw_data
    variant = tmp_path / "variant.onnx"
    variant.write_bytes(onnx_graph.strip_local_functions(loaded))
    reread = onnx.load(str(variant))  # loads the external data relative to the variant's folder
    assert len(reread.functions) == 0
    np.testing.assert_array_equal(numpy_helper.to_array(reread.graph.initializer[0]), weight)


def test_is_onnx_model_tells_models_from_engine_plans():
    assert onnx_graph.is_onnx_model(matmul_model())
    for data in (b"", b"not an onnx file at all", b"ftrt" + bytes(range(256)) * 4, b"\x08\x07", b"\xff" * 20):
        assert not onnx_graph.is_onnx_model(data), data[:16]


@pytest.mark.parametrize("case", ["missing", "directory", "truncated", "garbage", "no-graph"])
def test_load_model_errors_are_one_line(tmp_path, case):
    path = tmp_path / "m.onnx"
    if case == "directory":
        path = tmp_path
    elif case == "truncated":
        path.write_bytes(matmul_model()[:-10])
    elif case == "garbage":
        path.write_bytes(b"\xff" * 64)
    elif case == "no-graph":
        path.write_bytes(onnx.ModelProto(ir_version=8).SerializeToString())
    expected = {"missing": "no such file", "directory": "is a directory"}.get(case, "not a valid ONNX model")
    with pytest.raises(EdgeAttnError, match=expected) as raised:
        onnx_graph.load_model(str(path))
    assert "\n" not in raised.value.format_message()


def test_missing_onnx_is_named(monkeypatch, tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(matmul_model())
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(MissingDependencyError, match="onnx is not installed; it is needed for `edgeattn build`"):
        onnx_graph.load_model(str(path), "`edgeattn build`")
    assert not onnx_graph.is_onnx_model(path.read_bytes())  # an engine file stays usable without onnx
    assert os.path.exists(str(path))


def test_inspect_variant_and_custom_node_inputs(tmp_path):
    """Two custom op_types, a local function for only one: "incomplete" (neither runtime takes it as is); an
    omitted optional input ("") is not an input of the node."""
    from edgeattn.export.inspection import classify, describe_onnx

    assert classify({"EdgeAttnLiteMLA", "EdgeAttnSoftmaxAttention"}, ["EdgeAttnLiteMLA"]) == "incomplete"
    assert classify({"EdgeAttnLiteMLA"}, ["EdgeAttnLiteMLA", "Unrelated"]) == "ort"
    assert classify({"EdgeAttnLiteMLA"}, []) == "tensorrt" and classify(set(), ["EdgeAttnLiteMLA"]) == "standard"
    custom = helper.make_node("EdgeAttnLiteMLA", ["x", ""], ["y"], domain="trt.plugins", name="attn")
    graph = helper.make_graph([custom], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("trt.plugins", 1)], ir_version=8)
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    description = describe_onnx(str(path))
    assert description["variant"] == "tensorrt"
    assert [node["inputs"] for node in description["custom_nodes"]] == [1]
