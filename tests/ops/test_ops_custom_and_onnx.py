"""The torch.ops.edgeattn custom ops (== reference, fake kernels, the plugin switch) and ONNX export of the
reference path (opset 13, TorchScript exporter) checked against ONNX Runtime CPU."""
import io
import warnings

import pytest
import torch

from edgeattn.ops import (BlockifyAttention, CrossShapedWindowAttention, EfficientAttention, ELFATTAttention,
                          FLuRKAAttention, LiteMLA, MultiHeadSoftmaxAttention, MultiSpotAttention, SOFTAttention,
                          blockify_attention, efficient_attention, lite_mla_attention, soft_kernel_attention)
from edgeattn.ops.config import plugin_ops_enabled, use_plugin_ops


def rand(*shape, seed=0, scale=1.0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


def op_cases():
    q, k, v = rand(2, 15 * 10, 32, seed=1), rand(2, 15 * 10, 32, seed=2), rand(2, 15 * 10, 32, seed=3)
    w, b = rand(32, 1, 3, 3, seed=4), rand(32, seed=5)
    qkv_map = rand(2, 4 * 3 * 8, 5, 7, seed=6)
    landmarks = rand(2, 9, 32, seed=7, scale=0.3)
    return [
        ("blockify_attention", (q, k, v, w, b, 2, 15, 10, 7, 0.0, "masked"),
         lambda: blockify_attention(q, k, v, num_heads=2, height=15, width=10, window_size=7, lepe_weight=w,
                                    lepe_bias=b, padding="masked")),
        ("blockify_attention", (q, k, v, None, None, 2, 15, 10, 5, 0.25, "none"),
         lambda: blockify_attention(q, k, v, num_heads=2, height=15, width=10, window_size=5, scale=0.25)),
        ("efficient_attention", (q, k, v, 4),
         lambda: efficient_attention(q, k, v, num_heads=4)),
        ("lite_mla", (qkv_map, 8, "quadratic_taylor", 1e-6, [0.5, 1.0, 1.5, 2.0], [1.0, 0.5, 1.0, 0.5],
                      [1.0, 1.0, 2.0, 2.0]),
         lambda: lite_mla_attention(qkv_map, head_dim=8, kernel="quadratic_taylor", eps=1e-6,
                                    qt_alpha=[0.5, 1.0, 1.5, 2.0], qt_beta=[1.0, 0.5, 1.0, 0.5],
                                    qt_gamma=[1.0, 1.0, 2.0, 2.0])),
        ("soft_kernel_attention", (q * 0.3, landmarks, v, 2, 20, 1),
         lambda: soft_kernel_attention(q * 0.3, landmarks, v, num_heads=2, newton_iters=20, symmetric_norm=True)),
    ]


@pytest.mark.parametrize("case", range(len(op_cases())))
def test_custom_op_equals_reference_and_has_a_fake_kernel(case):
    name, args, reference = op_cases()[case]
    op = getattr(torch.ops.edgeattn, name)
    expected = reference()
    assert torch.equal(op(*args), expected)
    with torch._subclasses.fake_tensor.FakeTensorMode() as mode:
        fake_args = [mode.from_tensor(a) if torch.is_tensor(a) else a for a in args]
        fake = op(*fake_args)
    assert fake.shape == expected.shape and fake.dtype == expected.dtype


def test_custom_op_schemas_match_the_interface():
    schemas = {name: str(getattr(torch.ops.edgeattn, name).default._schema).replace("SymInt", "int") for name in
               ("blockify_attention", "efficient_attention", "lite_mla", "soft_kernel_attention")}
    assert schemas["blockify_attention"] == (
        "edgeattn::blockify_attention(Tensor q, Tensor k, Tensor v, Tensor? lepe_weight, Tensor? lepe_bias, "
        "int num_heads, int height, int width, int window_size, float scale, str padding) -> Tensor")
    assert schemas["efficient_attention"] == \
        "edgeattn::efficient_attention(Tensor q, Tensor k, Tensor v, int num_heads) -> Tensor"
    assert schemas["lite_mla"] == ("edgeattn::lite_mla(Tensor qkv, int head_dim, str kernel, float eps, "
                                   "float[] qt_alpha, float[] qt_beta, float[] qt_gamma) -> Tensor")
    assert schemas["soft_kernel_attention"] == (
        "edgeattn::soft_kernel_attention(Tensor q, Tensor landmarks, Tensor v, int num_heads, int newton_iters, "
        "int symmetric_norm) -> Tensor")


def test_schema_defaults_are_the_reference_defaults():
    """A node that leaves an attribute at its schema default (TensorRT's creator fills it in) computes what the
    PyTorch op computes with its own default: LiteMLA eps = EfficientViT's 1e-15 (not the 1e-6 of other ops), 20
    Newton-Raphson steps, SOFT++, blockify scale 0 = head_dim ** -0.5 (the op's None) and no padding."""
    import inspect

    from edgeattn.ops import litemla
    from edgeattn.schemas import get_schema

    def schema_defaults(op_type):
        return get_schema(op_type).defaults()

    def reference_defaults(function):
        return {name: p.default for name, p in inspect.signature(function).parameters.items()
                if p.default is not inspect.Parameter.empty}

    lite = reference_defaults(lite_mla_attention)
    assert lite["eps"] is None and litemla.DEFAULT_EPS == 1e-15
    assert schema_defaults("EdgeAttnLiteMLA") == {
        "kernel": lite["kernel"], "eps": litemla.DEFAULT_EPS, "qt_alpha": list(lite["qt_alpha"]),
        "qt_beta": list(lite["qt_beta"]), "qt_gamma": list(lite["qt_gamma"])}
    soft = reference_defaults(soft_kernel_attention)
    assert schema_defaults("EdgeAttnSoftKernelAttention") == {
        "newton_iters": soft["newton_iters"], "symmetric_norm": int(soft["symmetric_norm"])}
    block = reference_defaults(blockify_attention)
    assert block["scale"] is None and block["lepe_weight"] is None
    assert schema_defaults("EdgeAttnBlockifyAttention") == {"scale": 0.0, "has_lepe": 0, "padding": block["padding"]}


def test_use_plugin_ops_is_a_restoring_context_manager():
    assert not plugin_ops_enabled()
    with use_plugin_ops():
        assert plugin_ops_enabled()
        with use_plugin_ops(False):
            assert not plugin_ops_enabled()
        assert plugin_ops_enabled()
    assert not plugin_ops_enabled()


class _TokenModule(torch.nn.Module):
    def __init__(self, module, hw):
        super().__init__()
        self.module, self.hw = module, hw

    def forward(self, x):
        return self.module(x, self.hw)


PLUGIN_MODULES = [
    ("blockify_attention", lambda: BlockifyAttention(32, 2, window_size=4, padding="zeros"), (6, 7)),
    ("efficient_attention", lambda: EfficientAttention(32, 2), (6, 7)),
    ("blockify_attention", lambda: ELFATTAttention(64, window_size=3, padding="masked"), (6, 7)),
    ("soft_kernel_attention", lambda: SOFTAttention(32, 2, sampling_ratio=3), (6, 7)),
]


@pytest.mark.parametrize("op_name,factory,hw", PLUGIN_MODULES)
def test_modules_route_through_custom_ops_when_enabled(op_name, factory, hw):
    torch.manual_seed(0)
    module = factory().eval()
    wrapped = _TokenModule(module, hw)
    x = rand(1, hw[0] * hw[1], module.dim, seed=1)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = module(x, hw)
        plain = str(torch.jit.trace(wrapped, (x,)).inlined_graph)
        with use_plugin_ops():
            traced = str(torch.jit.trace(wrapped, (x,)).inlined_graph)
            assert torch.equal(module(x, hw), reference)
    assert "edgeattn::" + op_name in traced
    assert "edgeattn::" not in plain


def test_lite_mla_module_routes_through_custom_op():
    module = LiteMLA(16, 16, dim=4, kernel="quadratic_taylor").eval()
    x = rand(1, 16, 5, 5, seed=2)
    with torch.no_grad():
        reference = module(x)
    with torch.no_grad(), use_plugin_ops(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = str(torch.jit.trace(module, (x,)).inlined_graph)
        assert torch.equal(module(x), reference)
    assert "edgeattn::lite_mla" in graph


ONNX_MODULES = [
    ("global", lambda: MultiHeadSoftmaxAttention(32, 2, lepe=True), (6, 6)),
    ("cswin", lambda: CrossShapedWindowAttention(32, 2, split_size=2), (6, 4)),
    ("blockify-masked", lambda: BlockifyAttention(32, 2, window_size=4, padding="masked"), (6, 7)),
    ("effatt", lambda: EfficientAttention(32, 2), (6, 7)),
    ("elfatt", lambda: ELFATTAttention(64, window_size=3), (6, 6)),
    ("soft++", lambda: SOFTAttention(32, 2, sampling_ratio=2), (6, 8)),
    ("flurka-performer", lambda: FLuRKAAttention(32, 2, num_tokens=36, rank=8, feature_map="performer"), (6, 6)),
    ("multispot", lambda: MultiSpotAttention(32, 2, region_size=3, topk=6, pool_levels=((2, 3), (3, None)),
                                             polynomial_v=True), (6, 6)),
    ("litemla-qt", lambda: LiteMLA(16, 16, dim=4, kernel="quadratic_taylor", qt_params="head"), None),
]


@pytest.mark.parametrize("name,factory,hw", ONNX_MODULES, ids=[case[0] for case in ONNX_MODULES])
def test_reference_path_exports_to_standard_onnx_opset13(name, factory, hw):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    module = factory().eval()
    if hw is None:
        wrapped, x = module, rand(1, 16, 5, 6, seed=3)
    else:
        wrapped, x = _TokenModule(module, hw), rand(1, hw[0] * hw[1], module.dim, seed=3)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(wrapped, (x,), buffer, dynamo=False, opset_version=13, input_names=["x"],
                          output_names=["y"])
    model = onnx.load_from_string(buffer.getvalue())
    assert {node.domain for node in model.graph.node} <= {"", "ai.onnx"}
    assert [op.version for op in model.opset_import if op.domain in ("", "ai.onnx")] == [13]
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    got = session.run(None, {"x": x.numpy()})[0]
    with torch.no_grad():
        expected = wrapped(x).numpy()
    assert abs(got - expected).max() <= 1e-4 * max(1.0, abs(expected).max())
