"""The model-local FunctionProtos run in ONNX Runtime and implement the schema semantics.

Oracle: schema_references.py, NumPy float64 loops written from the ``semantics`` text of export/schemas (not from
the function bodies, not from edgeattn.ops). Each model holds several nodes of one op with different attributes
and shapes, the situation of a real model whose stages call one op differently.
"""
import numpy as np
import onnx
import pytest

from edgeattn.errors import EdgeAttnError
from edgeattn.export.functions import build_function, supported_op_types
from edgeattn.schemas import all_schemas, get_schema

from export_helpers import custom_op_model, relative_error, run_ort
from schema_references import REFERENCES

OPSETS = (13, 17, 18, 20)
RTOL = 1e-5  # float32 evaluation vs float64 reference
#: Newton-Raphson iterated far past convergence settles on an FP32 fixed point ~cond(A) * eps away
CONVERGED_NEWTON_RTOL = 1e-4


def _rng():
    return np.random.default_rng(1234)


def _cases():
    rng = _rng()

    def r(*shape, scale=1.0):
        return rng.standard_normal(shape) * scale

    def qkv(batch, tokens, channels):
        return {"q": r(batch, tokens, channels), "k": r(batch, tokens, channels), "v": r(batch, tokens, channels)}

    def lepe(channels):
        return {"lepe_weight": r(channels, 1, 3, 3), "lepe_bias": r(channels)}

    blockify_plain = [
        ("EdgeAttnBlockifyAttention", qkv(2, 24, 8), dict(num_heads=2, height=4, width=6, window_size=2)),
        ("EdgeAttnBlockifyAttention", qkv(1, 35, 6),
         dict(num_heads=3, height=5, width=7, window_size=3, padding="zeros", scale=0.3)),
        ("EdgeAttnBlockifyAttention", qkv(2, 35, 6), dict(num_heads=1, height=7, width=5, window_size=3,
                                                          padding="masked")),
    ]
    blockify_lepe = [
        ("EdgeAttnBlockifyAttention", dict(qkv(2, 35, 6), **lepe(6)),
         dict(num_heads=2, height=5, width=7, window_size=3, padding="masked", has_lepe=1)),
        ("EdgeAttnBlockifyAttention", dict(qkv(2, 36, 12), **lepe(12)),
         dict(num_heads=3, height=6, width=6, window_size=3, has_lepe=1)),
        ("EdgeAttnBlockifyAttention", dict(qkv(1, 35, 6), **lepe(6)),
         dict(num_heads=3, height=5, width=7, window_size=4, padding="zeros", has_lepe=1, scale=0.7)),
    ]
    efficient = [
        ("EdgeAttnEfficientAttention", qkv(2, 12, 8), dict(num_heads=2)),
        ("EdgeAttnEfficientAttention", qkv(2, 5, 12), dict(num_heads=3)),
        ("EdgeAttnEfficientAttention", qkv(1, 30, 4), dict(num_heads=1)),
    ]
    lite_mla = [
        ("EdgeAttnLiteMLA", {"qkv": r(2, 24, 3, 5)}, dict(head_dim=4)),
        ("EdgeAttnLiteMLA", {"qkv": r(2, 18, 4, 2)},
         dict(head_dim=3, kernel="quadratic_taylor", qt_alpha=[0.5, 1.5], qt_beta=[1.0, 0.7], qt_gamma=[1.0, 2.0],
              eps=1e-6)),
        ("EdgeAttnLiteMLA", {"qkv": r(1, 24, 2, 2)},
         dict(head_dim=8, kernel="quadratic_taylor", qt_alpha=[0.3], qt_beta=[1.2], qt_gamma=[0.8])),
    ]
    soft = [
        ("EdgeAttnSoftKernelAttention", {"q": r(2, 20, 8, scale=0.5), "landmarks": r(2, 5, 8, scale=0.5),
                                         "v": r(2, 20, 8)}, dict(num_heads=2)),
        ("EdgeAttnSoftKernelAttention", {"q": r(1, 9, 6, scale=0.5), "landmarks": r(1, 3, 6, scale=0.5),
                                         "v": r(1, 9, 6)}, dict(num_heads=3, newton_iters=7, symmetric_norm=0)),
        ("EdgeAttnSoftKernelAttention", {"q": r(1, 16, 4, scale=0.5), "landmarks": r(1, 4, 4, scale=0.5),
                                         "v": r(1, 16, 4)}, dict(num_heads=1, newton_iters=0)),
        # 2 * 64 + 5 iterations: the unrolled bits plus two passes of the Loop over 64-step blocks. Converged
        # long before, so this checks that the Loop path runs and lands on the pseudo-inverse (the 7-iteration
        # case above, far from convergence, is the one that pins the step count).
        ("EdgeAttnSoftKernelAttention", {"q": r(1, 12, 4, scale=0.5), "landmarks": r(1, 3, 4, scale=0.5),
                                         "v": r(1, 12, 4)}, dict(num_heads=2, newton_iters=133)),
    ]
    return {"blockify": blockify_plain, "blockify_lepe": blockify_lepe, "efficient": efficient,
            "lite_mla": lite_mla, "soft": soft}


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("group", ["blockify", "blockify_lepe", "efficient", "lite_mla", "soft"])
def test_function_matches_schema_reference(group, opset):
    specs = _cases()[group]
    model, feeds = custom_op_model(specs, opset)
    onnx.checker.check_model(model, full_check=True)
    outputs = run_ort(model, feeds)
    for (op_type, inputs, attributes), got in zip(specs, outputs):
        resolved = get_schema(op_type).resolve_attributes(attributes)
        reference = REFERENCES[op_type](**inputs, **resolved)
        assert got.shape == reference.shape
        limit = CONVERGED_NEWTON_RTOL if attributes.get("newton_iters", 0) >= 64 else RTOL
        assert relative_error(got, reference) <= limit, (op_type, attributes)


@pytest.mark.parametrize("opset", (13, 18))
@pytest.mark.parametrize("iterations,dropped", [(24, (8, 16)), (40, (8,))], ids=["24", "40"])
def test_newton_iteration_counts_with_bits_3_to_5(iterations, dropped, opset):
    """newton_iters = 24 (bits 3 + 4) and 40 (bits 3 + 5): the unrolled If per bit of the count must run 2**b steps
    for every set bit, bit 5 (32 steps) included, which the cases above (0, 7, 20, 133 = 2 x 64 + 5) never set.
    Close landmarks (scale 0.35), so that after 8 or 16 steps the iterate is still far from the one after
    ``iterations``: ``dropped`` are the counts a step budget missing one bit would run."""
    rng = np.random.default_rng(7)
    inputs = {"q": rng.standard_normal((2, 24, 8)) * 0.35, "landmarks": rng.standard_normal((2, 8, 8)) * 0.35,
              "v": rng.standard_normal((2, 24, 8))}
    reference = REFERENCES["EdgeAttnSoftKernelAttention"](**inputs, num_heads=2, newton_iters=iterations)
    for fewer in dropped:
        other = REFERENCES["EdgeAttnSoftKernelAttention"](**inputs, num_heads=2, newton_iters=fewer)
        assert relative_error(other, reference) > 100 * CONVERGED_NEWTON_RTOL  # the count is visible here
    model, feeds = custom_op_model([("EdgeAttnSoftKernelAttention", inputs,
                                     dict(num_heads=2, newton_iters=iterations))], opset)
    assert relative_error(run_ort(model, feeds)[0], reference) <= CONVERGED_NEWTON_RTOL


def test_masked_and_zeros_padding_differ():
    """The two padding modes are distinguishable, so the test above checks the mode selection itself."""
    rng = _rng()
    inputs = {name: rng.standard_normal((1, 35, 4)) for name in ("q", "k", "v")}
    outs = {}
    for padding in ("zeros", "masked"):
        attrs = dict(num_heads=2, height=5, width=7, window_size=3, padding=padding)
        model, feeds = custom_op_model([("EdgeAttnBlockifyAttention", inputs, attrs)], 17)
        outs[padding] = run_ort(model, feeds)[0]
    assert np.max(np.abs(outs["zeros"] - outs["masked"])) > 1e-3


def _attribute_references(nodes):
    """ref_attr_name of every attribute in ``nodes`` and in their If/Loop subgraphs."""
    for node in nodes:
        for attr in node.attribute:
            if attr.ref_attr_name:
                yield attr.ref_attr_name
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _attribute_references(attr.g.node)


@pytest.mark.parametrize("op_type", sorted({schema.op_type for schema in all_schemas().values()}))
def test_function_signature_follows_schema(op_type):
    schema = get_schema(op_type)
    function = build_function(op_type, 17, with_lepe=True)
    assert (function.domain, function.name) == (schema.domain, op_type)
    assert list(function.attribute) == schema.attribute_names
    expected_inputs = [spec.name for spec in schema.inputs]
    assert list(function.input) == expected_inputs
    assert list(function.output) == [spec.name for spec in schema.outputs]
    refs = set(_attribute_references(function.node))
    assert refs <= set(schema.attribute_names)
    # every attribute that changes the computation is read from the calling node, none is baked in
    assert refs == set(schema.attribute_names) - {"has_lepe"}  # has_lepe is the presence of the LePE inputs


def test_every_schema_has_a_decomposition():
    assert supported_op_types() == sorted({schema.op_type for schema in all_schemas().values()})


def test_opset_below_13_is_rejected():
    with pytest.raises(EdgeAttnError, match="opset 12 is too old"):
        build_function("EdgeAttnEfficientAttention", 12)


def test_mixed_lepe_presence_is_rejected():
    rng = _rng()
    base = {name: rng.standard_normal((1, 16, 4)) for name in ("q", "k", "v")}
    with_lepe = dict(base, lepe_weight=rng.standard_normal((4, 1, 3, 3)), lepe_bias=rng.standard_normal(4))
    attrs = dict(num_heads=2, height=4, width=4, window_size=2)
    with pytest.raises(EdgeAttnError, match="with and without LePE"):
        custom_op_model([("EdgeAttnBlockifyAttention", base, attrs),
                         ("EdgeAttnBlockifyAttention", with_lepe, dict(attrs, has_lepe=1))], 17)
