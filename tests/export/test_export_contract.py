"""Custom nodes vs export/schemas: the emitter follows the schemas and the validator catches every deviation."""
import copy

import pytest
from onnx import AttributeProto, helper

from edgeattn.errors import EdgeAttnError
from edgeattn.export import contract
from edgeattn.schemas import ATTRIBUTE_TYPES, all_schemas, get_schema

OP_TYPES = sorted({schema.op_type for schema in all_schemas().values()})
_INPUTS = {
    "EdgeAttnBlockifyAttention": ["q", "k", "v"],
    "EdgeAttnEfficientAttention": ["q", "k", "v"],
    "EdgeAttnLiteMLA": ["qkv"],
    "EdgeAttnSoftKernelAttention": ["q", "landmarks", "v"],
}
_REQUIRED = {
    "EdgeAttnBlockifyAttention": dict(num_heads=2, height=4, width=4, window_size=2),
    "EdgeAttnEfficientAttention": dict(num_heads=2),
    "EdgeAttnLiteMLA": dict(head_dim=8),
    "EdgeAttnSoftKernelAttention": dict(num_heads=2),
}


def _node(op_type, **attrs):
    return contract.make_node(op_type, _INPUTS[op_type], ["out"], name="n", **dict(_REQUIRED[op_type], **attrs))


def test_every_schema_type_has_an_onnx_and_torchscript_mapping():
    assert set(contract.ONNX_ATTRIBUTE_TYPES) == set(ATTRIBUTE_TYPES)
    assert set(contract.TORCHSCRIPT_SUFFIX) == set(ATTRIBUTE_TYPES)
    assert contract.ONNX_ATTRIBUTE_TYPES == {
        "float": AttributeProto.FLOAT, "int": AttributeProto.INT, "string": AttributeProto.STRING,
        "floats": AttributeProto.FLOATS, "ints": AttributeProto.INTS, "strings": AttributeProto.STRINGS}


@pytest.mark.parametrize("op_type", OP_TYPES)
def test_emitted_node_follows_schema(op_type):
    schema = get_schema(op_type)
    node = _node(op_type)
    assert (node.op_type, node.domain) == (schema.op_type, "trt.plugins")
    attrs = {a.name: a for a in node.attribute}
    assert set(attrs) == set(schema.attribute_names) | {"plugin_version", "plugin_namespace"}
    for attr in schema.attributes:
        assert attrs[attr.name].type == contract.ONNX_ATTRIBUTE_TYPES[attr.type], attr.name
    decoded = contract.decoded_attributes(node)
    assert decoded["plugin_version"] == "1" and decoded["plugin_namespace"] == "edgeattn"
    for attr in schema.attributes:
        if not attr.required:
            assert decoded[attr.name] == pytest.approx(attr.default), attr.name  # defaults written out
    assert contract.node_problems(node) == []


def _set_attr(node, name, value, attr_type=None):
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(kept)
    if value is not None:
        node.attribute.append(helper.make_attribute(name, value, attr_type=attr_type))
    return node


MUTATIONS = {
    "domain": lambda n: setattr(n, "domain", "com.example") or n,
    "missing attribute": lambda n: _set_attr(n, "padding", None),
    "unknown attribute": lambda n: _set_attr(n, "dilation", 2),
    "float as int": lambda n: _set_attr(n, "scale", 1, AttributeProto.INT),
    "int as float": lambda n: _set_attr(n, "num_heads", 2.0, AttributeProto.FLOAT),
    "int as ints": lambda n: _set_attr(n, "window_size", [2], AttributeProto.INTS),
    "string as int": lambda n: _set_attr(n, "padding", 0, AttributeProto.INT),
    "value not allowed": lambda n: _set_attr(n, "padding", "reflect"),
    "flag not allowed": lambda n: _set_attr(n, "has_lepe", 2),
    "plugin namespace": lambda n: _set_attr(n, "plugin_namespace", "other"),
    "plugin version": lambda n: _set_attr(n, "plugin_version", "2"),
    "lepe flag without inputs": lambda n: _set_attr(n, "has_lepe", 1),
    "lepe inputs without flag": lambda n: n.input.extend(["w", "b"]) or n,
    "two outputs": lambda n: n.output.append("extra") or n,
    "op_type": lambda n: setattr(n, "op_type", "Attention") or n,
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_validator_catches_deviation(mutation):
    node = MUTATIONS[mutation](copy.deepcopy(_node("EdgeAttnBlockifyAttention")))
    assert contract.node_problems(node), mutation
    model = helper.make_model(helper.make_graph([node], "g", [], []))
    with pytest.raises(EdgeAttnError, match="disagree with the op schema"):
        contract.validate_model(model)


def test_validator_catches_list_attribute_problems():
    node = _node("EdgeAttnLiteMLA", kernel="quadratic_taylor")
    _set_attr(node, "qt_alpha", [1.0, 2.0])
    assert any("lengths" in p for p in contract.node_problems(node))
    _set_attr(node, "qt_alpha", 1.0, AttributeProto.FLOAT)
    assert any("qt_alpha has type float" in p for p in contract.node_problems(node))


def test_emitter_rejects_bad_attributes():
    with pytest.raises(EdgeAttnError, match="not one of"):
        _node("EdgeAttnBlockifyAttention", padding="reflect")
    with pytest.raises(EdgeAttnError, match="required"):
        contract.make_node("EdgeAttnEfficientAttention", ["q", "k", "v"], ["out"])
    with pytest.raises(EdgeAttnError, match="unknown attribute"):
        _node("EdgeAttnEfficientAttention", heads=2)


@pytest.mark.parametrize("op_type", OP_TYPES)
def test_inspect_reports_the_validators_verdicts(op_type, tmp_path):
    """`edgeattn inspect` (describe_onnx, reading the file) gives each node the same verdict as the validator."""
    import onnx

    from edgeattn.export.inspection import describe_onnx

    good = _node(op_type)
    bad = _set_attr(copy.deepcopy(good), "plugin_namespace", "other")
    bad.name = "bad"
    graph = helper.make_graph([good, bad], "g", [], [])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    described = describe_onnx(path)["custom_nodes"]
    assert [node["problems"] for node in described] == [contract.node_problems(good), contract.node_problems(bad)]
    assert described[0]["problems"] == [] and described[1]["problems"] != []
