"""Optimization profiles and the FP16 precision policy (the manifest rules: tests/tensorrt_runtime/test_manifest.py)."""
import numpy as np
import pytest

from bench_helpers import layernorm_model, model_nodes, needs_onnx, needs_ort
from edgeattn.engine.precision import PrecisionPolicy, find_fp32_islands, make_strongly_typed_fp16
from edgeattn.engine.profiles import parse_shape_spec, resolve_shape_profile
from edgeattn.errors import EdgeAttnError, MissingDependencyError


def test_shape_specs():
    assert parse_shape_spec("input:0:1x3x8x8,2x3x8x8,4x3x8x8") == ("input:0", [1, 3, 8, 8], [2, 3, 8, 8],
                                                                  [4, 3, 8, 8])
    assert parse_shape_spec("x:1x4") == ("x", [1, 4], [1, 4], [1, 4])
    for bad in ("x", ":1x2", "x:1x2,2x2", "x:1xa", "x:0x2", "x:2x2,1x2,4x2", "x:1x2,1x2x3,1x2"):
        with pytest.raises(EdgeAttnError):
            parse_shape_spec(bad)


def test_resolve_profile(capsys):
    inputs = [{"name": "x", "shape": ["batch", 3, 8, 8]}, {"name": "scale", "shape": [1]}]
    profile = resolve_shape_profile(inputs, ["x:1x3x8x8,2x3x8x8,8x3x8x8"])
    assert profile == [("x", [1, 3, 8, 8], [2, 3, 8, 8], [8, 3, 8, 8]), ("scale", [1], [1], [1])]
    assert resolve_shape_profile(inputs, [])[0] == ("x", [1, 3, 8, 8], [1, 3, 8, 8], [1, 3, 8, 8])
    assert "dynamic dimensions" in capsys.readouterr().err
    with pytest.raises(EdgeAttnError, match="not an input of the model \\(inputs: scale, x\\)"):
        resolve_shape_profile(inputs, ["y:1x3"])
    with pytest.raises(EdgeAttnError, match="dimension 1 is fixed to 3"):
        resolve_shape_profile(inputs, ["x:1x4x8x8"])
    with pytest.raises(EdgeAttnError, match="rank 2 but the input has rank 4"):
        resolve_shape_profile(inputs, ["x:1x3"])


def test_islands_found_in_a_decomposed_layernorm_and_softmax():
    islands = PrecisionPolicy("fp16").fp32_islands(model_nodes(layernorm_model()))
    assert islands == {"/norm/ReduceMean": "layernorm", "/norm/Sub": "layernorm", "/norm/Pow": "layernorm",
                       "/norm/ReduceMean_1": "layernorm", "/norm/Add": "layernorm", "/norm/Sqrt": "layernorm",
                       "/norm/Div": "layernorm", "/attn/Softmax": "softmax"}
    assert "/fc/MatMul" not in islands and "/norm/Mul" not in islands  # the affine part runs in FP16
    assert PrecisionPolicy("fp32").fp32_islands(model_nodes(layernorm_model())) == {}


def test_normaliser_division_is_an_island():
    def node(op, inputs, outputs, name):
        return {"op_type": op, "domain": "", "name": name, "inputs": inputs, "outputs": outputs, "attributes": {}}

    nodes = [node("MatMul", ["q", "kv"], ["num"], "num"), node("ReduceSum", ["k"], ["ksum"], "ksum"),
             node("MatMul", ["q", "ksum"], ["den0"], "den0"), node("Add", ["ksum", "eps"], ["den"], "den"),
             node("Div", ["num", "den"], ["out"], "out"), node("Div", ["num", "two"], ["half"], "half")]
    islands = find_fp32_islands(nodes)
    assert islands == {"ksum": "reduction", "den": "normaliser", "out": "normaliser"}


@needs_onnx
@pytest.mark.parametrize("kernel", ["relu", "quadratic_taylor"])
def test_decomposed_lite_mla_normaliser_is_an_island(kernel):
    """`build --plugins off|auto` in FP16 runs LiteMLA as its standard-op form: its token-axis sums (the two
    MatMuls of the padded-V trick), the denominator slice, the eps Add and the division must stay FP32, as the
    EfficientViT code runs them; the projections around it are free to run in FP16."""
    from onnx import TensorProto, helper

    from edgeattn.engine import decomposition
    from edgeattn.export import functions
    from edgeattn.onnx_graph import graph_nodes
    from edgeattn.schemas import get_schema

    attributes = get_schema("EdgeAttnLiteMLA").resolve_attributes(
        {"head_dim": 4, "kernel": kernel, "qt_alpha": [0.5], "qt_beta": [0.75], "qt_gamma": [0.25]})
    attributes.update(plugin_version="1", plugin_namespace="edgeattn")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["qkv_flat"], name="/proj/MatMul"),
             helper.make_node("Reshape", ["qkv_flat", "shape"], ["qkv"], name="/proj/Reshape"),
             helper.make_node("EdgeAttnLiteMLA", ["qkv"], ["y"], name="/attn/EdgeAttnLiteMLA", domain="trt.plugins",
                              **attributes)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 25, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5, 5])],
        [helper.make_tensor("W", TensorProto.FLOAT, [12, 12], [0.1] * 144),
         helper.make_tensor("shape", TensorProto.INT64, [4], [1, 12, 5, 5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("trt.plugins", 1)],
                              ir_version=8)
    functions.attach_functions(model)
    decomposed, _sources = decomposition.decompose(model, ["EdgeAttnLiteMLA"])
    nodes = graph_nodes(decomposed)
    islands = PrecisionPolicy("fp16").fp32_islands(nodes)
    by_name = {node["name"]: node for node in nodes}
    pinned_ops = sorted(by_name[name]["op_type"] for name, reason in islands.items() if reason == "normaliser")
    assert pinned_ops.count("MatMul") == 2 and "Div" in pinned_ops and "Add" in pinned_ops and "Slice" in pinned_ops
    assert "/proj/MatMul" not in islands


def test_layer_pinning_and_typing_mode():
    policy = PrecisionPolicy("fp16")
    islands = {"/norm/Div": "layernorm"}
    assert policy.pins_layer("/norm/Div", "ELEMENTWISE", islands)
    assert policy.pins_layer("/norm/Div_1_output", "ELEMENTWISE", islands)  # helper layers of the same node
    assert policy.pins_layer("anything", "SOFTMAX", {}) and policy.pins_layer("x", "REDUCE", {})
    assert not policy.pins_layer("/fc/MatMul", "MATRIX_MULTIPLY", islands)
    assert not PrecisionPolicy("fp32").pins_layer("y", "SOFTMAX", {})
    assert PrecisionPolicy.typing_mode((8, 2, 1)) == "weak" and PrecisionPolicy.typing_mode((10, 16, 2)) == "weak"
    assert PrecisionPolicy.typing_mode((11, 0, 0)) == "strong"
    assert PrecisionPolicy.typing_mode((10, 3, 0), has_fp16_flag=False) == "strong"
    with pytest.raises(EdgeAttnError):
        PrecisionPolicy("int4")


def test_strongly_typed_rewrite_needs_onnx(monkeypatch):
    import sys

    data = layernorm_model()
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(MissingDependencyError, match="onnx is not installed; it is needed for FP16 engines with "
                                                     "TensorRT >= 11.*pip install onnx"):
        make_strongly_typed_fp16(data, {})


@needs_onnx
def test_strongly_typed_rewrite_types_check():
    import onnx

    data = layernorm_model()
    islands = PrecisionPolicy("fp16").fp32_islands(model_nodes(data))
    model = onnx.load_from_string(make_strongly_typed_fp16(data, islands))
    onnx.checker.check_model(model, full_check=True)  # type-consistent everywhere
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    types = {v.name: v.type.tensor_type.elem_type for v in list(inferred.graph.value_info) +
             list(inferred.graph.input) + list(inferred.graph.output)}
    types.update({t.name: t.data_type for t in inferred.graph.initializer})
    float32, float16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16
    for node in inferred.graph.node:
        if node.op_type == "Cast":
            continue
        float_inputs = [types[i] for i in node.input if types.get(i) in (float32, float16)]
        expected = float32 if node.name in islands else float16
        assert float_inputs and all(t == expected for t in float_inputs), node.name
    assert types["x"] == float32 and types["y"] == float32  # the graph interface stays FP32
    assert types["eps"] == float32 and types["W"] == float16  # island-only constants stay FP32


@needs_onnx
@needs_ort
def test_strongly_typed_rewrite_stays_accurate_where_fp16_variance_overflows():
    import onnxruntime as ort

    data = layernorm_model()
    islands = PrecisionPolicy("fp16").fp32_islands(model_nodes(data))
    fp16 = make_strongly_typed_fp16(data, islands)
    x = (np.random.default_rng(0).standard_normal((2, 8, 16)) * 300).astype(np.float32)  # (h - mean)^2 > 65504
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # run the graph as written

    def run(model):
        return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]

    reference, mixed = run(data), run(fp16)
    assert np.all(np.isfinite(mixed))
    assert np.max(np.abs(reference - mixed)) < 2e-2


def _ln_node(op, inputs, outputs, name):
    return {"op_type": op, "domain": "", "name": name, "inputs": inputs, "outputs": outputs, "attributes": {}}


def test_decomposed_layernorm_variants_are_islands():
    """Two other spellings of d / sqrt(mean(d^2) + eps): the square as Mul(d, d), and the division as
    Reciprocal(Sqrt(...)) then Mul - every op of the chain stays FP32, the affine Mul after it does not."""
    squared_by_mul = [
        _ln_node("ReduceMean", ["x"], ["mean"], "m"), _ln_node("Sub", ["x", "mean"], ["d"], "s"),
        _ln_node("Mul", ["d", "d"], ["sq"], "sq"), _ln_node("ReduceMean", ["sq"], ["var"], "v"),
        _ln_node("Add", ["var", "eps"], ["ve"], "a"), _ln_node("Sqrt", ["ve"], ["std"], "r"),
        _ln_node("Div", ["d", "std"], ["y"], "div"), _ln_node("Mul", ["y", "gamma"], ["out"], "affine")]
    islands = find_fp32_islands(squared_by_mul)
    assert islands == {name: "layernorm" for name in ("m", "s", "sq", "v", "a", "r", "div")}
    by_reciprocal = [
        _ln_node("ReduceMean", ["x"], ["mean"], "m"), _ln_node("Sub", ["x", "mean"], ["d"], "s"),
        _ln_node("Pow", ["d", "two"], ["sq"], "p"), _ln_node("ReduceMean", ["sq"], ["var"], "v"),
        _ln_node("Add", ["var", "eps"], ["ve"], "a"), _ln_node("Sqrt", ["ve"], ["std"], "r"),
        _ln_node("Reciprocal", ["std"], ["inv"], "inv"), _ln_node("Mul", ["d", "inv"], ["y"], "norm"),
        _ln_node("Mul", ["y", "gamma"], ["out"], "affine")]
    islands = find_fp32_islands(by_reciprocal)
    assert islands == {name: "layernorm" for name in ("m", "s", "p", "v", "a", "r", "inv", "norm")}
