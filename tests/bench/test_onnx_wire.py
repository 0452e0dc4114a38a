"""edgeattn.onnx_wire against the onnx package (when installed) and against hand-encoded protobuf bytes."""
import numpy as np
import pytest

from bench_helpers import matmul_model, needs_onnx
from edgeattn import onnx_wire
from edgeattn.errors import EdgeAttnError


def _onnx_model_with_function():
    import onnx
    from onnx import TensorProto, helper

    function = helper.make_function("trt.plugins", "EdgeAttnLiteMLA", ["a"], ["b"],
                                    [helper.make_node("Relu", ["a"], ["b"])], [helper.make_opsetid("", 17)])
    custom = helper.make_node("EdgeAttnLiteMLA", ["x"], ["y"], domain="trt.plugins", name="attn",
                              plugin_namespace="edgeattn", plugin_version="1", head_dim=8, qt_alpha=[1.0, 2.5],
                              pads=[1, 2, -3], kernel="relu")
    add = helper.make_node("Add", ["y", "w"], ["z"], name="add")
    weight = helper.make_tensor("w", TensorProto.FLOAT, [4], [1, 2, 3, 4])
    graph = helper.make_graph(
        [custom, add], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [4])],  # IR<4 style: initializer listed as input
        [helper.make_tensor_value_info("z", TensorProto.FLOAT16, ["N", 4])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("trt.plugins", 1)],
                              functions=[function], producer_name="pytorch", producer_version="2.13.0")
    return onnx, model


@needs_onnx
def test_strip_local_functions_matches_onnx_clearing_the_field():
    onnx, model = _onnx_model_with_function()
    data = model.SerializeToString()
    stripped = onnx_wire.strip_local_functions(data)
    expected = onnx.load_from_string(data)
    expected.ClearField("functions")
    assert stripped == expected.SerializeToString()
    assert len(onnx.load_from_string(stripped).functions) == 0
    assert len(onnx.load_from_string(data).functions) == 1


@needs_onnx
def test_readers_agree_with_onnx():
    onnx, model = _onnx_model_with_function()
    data = model.SerializeToString()
    info = onnx_wire.read_model_info(data)
    assert info["ir_version"] == model.ir_version
    assert info["opset_imports"] == {o.domain: o.version for o in model.opset_import}
    assert info["has_functions"] and info["function_names"] == [f.name for f in model.functions]
    assert (info["producer_name"], info["producer_version"]) == ("pytorch", "2.13.0")
    io = onnx_wire.read_graph_io(data)
    assert io["inputs"] == [{"name": "x", "elem_type": "float32", "shape": ["N", 4]}]
    assert io["outputs"] == [{"name": "z", "elem_type": "float16", "shape": ["N", 4]}]
    nodes = onnx_wire.read_nodes(data)
    assert [(n["op_type"], n["domain"], n["name"]) for n in nodes] == [
        (n.op_type, n.domain, n.name) for n in model.graph.node]
    attrs = nodes[0]["attributes"]
    reference = {a.name: onnx.helper.get_attribute_value(a) for a in model.graph.node[0].attribute}
    assert attrs["plugin_namespace"] == str(reference["plugin_namespace"], "utf-8")
    assert attrs["kernel"] == "relu" and attrs["head_dim"] == reference["head_dim"]
    assert attrs["pads"] == list(reference["pads"])
    np.testing.assert_allclose(attrs["qt_alpha"], reference["qt_alpha"], rtol=0, atol=0)
    assert onnx_wire.read_custom_ops(data) == [{
        "op_type": "EdgeAttnLiteMLA", "domain": "trt.plugins", "plugin_version": "1", "plugin_namespace": "edgeattn",
        "has_namespace_attribute": True, "count": 1}]


@needs_onnx
def test_writer_produces_models_onnx_accepts():
    import onnx

    data = matmul_model(with_custom=True, with_function=True)
    model = onnx.load_from_string(data)
    onnx.checker.check_model(model)
    assert [n.op_type for n in model.graph.node] == ["MatMul", "Relu", "EdgeAttnLiteMLA"]
    assert model.functions[0].name == "EdgeAttnLiteMLA"
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    weight = onnx.numpy_helper.to_array(model.graph.initializer[0])
    assert weight.shape == (64, 64) and weight.dtype == np.float32


def test_hand_encoded_model_is_read():
    # ModelProto{ir_version: 7, graph: {node: {input "x", output "y", op_type "Relu"}, name "g",
    #   input: {name "x", type.tensor_type{elem_type 1, shape{dim{dim_value 3}}}}}, opset_import{version 13}}
    # encoded by hand (not with edgeattn's writer): keys are (field << 3) | wire_type.
    node = b"\x0a\x01x" + b"\x12\x01y" + b"\x22\x04Relu"
    dim = b"\x0a\x02\x08\x03"
    shape = b"\x12" + bytes([len(dim)]) + dim
    tensor_type = b"\x08\x01" + shape
    type_proto = b"\x0a" + bytes([len(tensor_type)]) + tensor_type
    value_info = b"\x0a\x01x" + b"\x12" + bytes([len(type_proto)]) + type_proto
    graph = b"\x0a" + bytes([len(node)]) + node + b"\x12\x01g" + b"\x5a" + bytes([len(value_info)]) + value_info
    opset = b"\x10\x0d"
    model = b"\x08\x07" + b"\x3a" + bytes([len(graph)]) + graph + b"\x42" + bytes([len(opset)]) + opset
    assert onnx_wire.read_model_info(model)["ir_version"] == 7
    assert onnx_wire.read_model_info(model)["opset_imports"] == {"": 13}
    assert onnx_wire.read_graph_io(model)["inputs"] == [{"name": "x", "elem_type": "float32", "shape": [3]}]
    assert [n["op_type"] for n in onnx_wire.read_nodes(model)] == ["Relu"]
    # A function (field 25 = key 0xca 0x01) appended is removed again, leaving the original bytes.
    function = b"\x0a\x04Relu"
    with_function = model + b"\xca\x01" + bytes([len(function)]) + function
    assert onnx_wire.read_model_info(with_function)["function_names"] == ["Relu"]
    assert onnx_wire.strip_local_functions(with_function) == model


def test_packed_ints_attribute_is_read():
    # AttributeProto{name "p", ints [1, 300] packed (wire type 2), type INTS}
    packed = b"\x01\xac\x02"
    attribute = b"\x0a\x01p" + b"\x42" + bytes([len(packed)]) + packed + b"\xa0\x01\x07"
    node = b"\x22\x03Pad" + b"\x2a" + bytes([len(attribute)]) + attribute + b"\x3a\x03foo"
    graph = b"\x0a" + bytes([len(node)]) + node
    model = b"\x08\x08\x3a" + bytes([len(graph)]) + graph
    nodes = onnx_wire.read_nodes(model, custom_only=True)
    assert nodes[0]["domain"] == "foo" and nodes[0]["attributes"] == {"p": [1, 300]}


def test_writer_round_trip_without_onnx():
    data = matmul_model(batch=4, features=8, with_custom=True, with_function=True, namespace=False)
    assert onnx_wire.is_onnx_model(data)
    info = onnx_wire.read_model_info(data)
    assert info["function_names"] == ["EdgeAttnLiteMLA"]
    assert onnx_wire.read_graph_io(data)["inputs"] == [{"name": "x", "elem_type": "float32", "shape": [4, 8]}]
    ops = onnx_wire.read_custom_ops(data)
    assert ops[0]["plugin_namespace"] == "" and ops[0]["has_namespace_attribute"] is False
    stripped = onnx_wire.strip_local_functions(data)
    assert not onnx_wire.read_model_info(stripped)["has_functions"]
    assert len(stripped) < len(data)
    assert onnx_wire.read_nodes(stripped) == onnx_wire.read_nodes(data)


@pytest.mark.parametrize("data", [b"", b"not an onnx file at all", b"\x08\x07", b"\x3a\x10abc", b"\xff" * 20])
def test_garbage_is_rejected(data):
    assert not onnx_wire.is_onnx_model(data)
    with pytest.raises(onnx_wire.WireError):
        onnx_wire.strip_local_functions(data)


def test_load_model_bytes_messages(tmp_path):
    with pytest.raises(EdgeAttnError, match="no such file"):
        onnx_wire.load_model_bytes(str(tmp_path / "missing.onnx"))
    with pytest.raises(EdgeAttnError, match="is a directory"):
        onnx_wire.load_model_bytes(str(tmp_path))
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(matmul_model()[:-10])
    with pytest.raises(EdgeAttnError, match="not a valid ONNX model"):
        onnx_wire.load_model_bytes(str(truncated))
