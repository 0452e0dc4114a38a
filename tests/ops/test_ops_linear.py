"""EFFATT, ELFATT and LiteMLA / QT-ViT: identities of the papers (ELFATT arXiv 2501.06098, EFFATT WACV 2021,
EfficientViT ICCV 2023, QT-ViT NeurIPS 2024) and of the official code they name."""
import math

import pytest
import torch

import ops_reference as ref
from edgeattn.ops import (BlockifyAttention, EfficientAttention, ELFATTAttention, LiteMLA, OpShapeError,
                          blockify_attention, efficient_attention, elfatt_attention, lite_mla_attention)
from edgeattn.ops.config import use_plugin_ops
from edgeattn.ops.litemla import qt_feature_map

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: dict(rtol=2e-5, atol=2e-6), torch.float64: dict(rtol=1e-10, atol=1e-12)}


def rand(*shape, dtype=torch.float64, seed=0, scale=1.0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator, dtype=torch.float64) * scale).to(dtype)


def qkv(b, n, c, dtype, seed=0):
    return tuple(rand(b, n, c, dtype=dtype, seed=seed + i) for i in range(3))


# ---------------------------------------------------------------- EFFATT

@pytest.mark.parametrize("dtype", DTYPES)
def test_efficient_attention_equals_its_quadratic_form(dtype):
    q, k, v = qkv(2, 50, 24, dtype)
    torch.testing.assert_close(efficient_attention(q, k, v, num_heads=3),
                               ref.efficient_attention_quadratic(q, k, v, 3), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_efficient_attention_matrix_is_row_stochastic(dtype):
    # With v = I (N = d) the output of one head *is* the implied N x N matrix q_hat k_hat^T.
    n = 16
    q, k = rand(1, n, n, dtype=dtype, seed=1, scale=2.0), rand(1, n, n, dtype=dtype, seed=2, scale=2.0)
    matrix = efficient_attention(q, k, torch.eye(n, dtype=dtype).unsqueeze(0), num_heads=1)[0]
    assert matrix.min() >= 0
    torch.testing.assert_close(matrix.sum(-1), torch.ones(n, dtype=dtype), **TOL[dtype])
    # hence a constant value map comes out unchanged
    out = efficient_attention(q, k, torch.full((1, n, n), 3.25, dtype=dtype), num_heads=1)
    torch.testing.assert_close(out, torch.full_like(out, 3.25), **TOL[dtype])


def test_efficient_attention_is_not_the_raw_exp_form():
    """ELFATT v1's form: row-normalised exp(Q)exp(K)^T V = softmax_f(q + log sum_j e^k_jf) ctx != EFFATT;
    keys whose features have different scales (non-iid) separate the two clearly."""
    n, d = 64, 16
    q = rand(1, n, d, seed=3)
    k = rand(1, n, d, seed=4) + torch.linspace(-3, 3, d, dtype=torch.float64)  # per-feature offsets
    v = rand(1, n, d, seed=5)
    v1 = ref.raw_exp_attention_normalised(q, k, v, 1)
    # the closed form of v1 (sum_j e^k_jf folded into q's softmax), so that the discriminator compares the right thing
    context = torch.softmax(k, dim=1).transpose(-1, -2) @ v
    closed = torch.softmax(q + torch.logsumexp(k, dim=1, keepdim=True), dim=-1) @ context
    torch.testing.assert_close(v1, closed, rtol=1e-10, atol=1e-12)
    ours = efficient_attention(q, k, v, num_heads=1)
    torch.testing.assert_close(ours, ref.efficient_attention_quadratic(q, k, v, 1), rtol=1e-10, atol=1e-12)
    assert (ours - v1).abs().max() > 0.05


# ---------------------------------------------------------------- ELFATT

@pytest.mark.parametrize("dtype", DTYPES)
def test_elfatt_without_global_heads_is_blockify(dtype):
    q, k, v = qkv(2, 14 * 14, 64, dtype)
    w, b = rand(64, 1, 3, 3, dtype=dtype, seed=8), rand(64, dtype=dtype, seed=9)
    out = elfatt_attention(q, k, v, num_heads=2, num_global_heads=0, height=14, width=14, window_size=7,
                           local_lepe_weight=w, local_lepe_bias=b)
    expected = blockify_attention(q, k, v, num_heads=2, height=14, width=14, window_size=7, lepe_weight=w,
                                  lepe_bias=b)
    torch.testing.assert_close(out, expected, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_elfatt_without_block_heads_is_efficient_attention(dtype):
    q, k, v = qkv(2, 14 * 14, 64, dtype)
    w, b = rand(64, 1, 3, 3, dtype=dtype, seed=8), rand(64, dtype=dtype, seed=9)
    out = elfatt_attention(q, k, v, num_heads=2, num_global_heads=2, height=14, width=14, window_size=7,
                           global_lepe_weight=w, global_lepe_bias=b)
    expected = ref.efficient_attention_quadratic(q, k, v, 2) + ref.full_map_lepe(v, 14, 14, w, b)
    torch.testing.assert_close(out, expected, **TOL[dtype])


@pytest.mark.parametrize("global_heads,padding", [(1, "none"), (1, "masked"), (3, "zeros")])
def test_elfatt_splits_channels_global_first(global_heads, padding):
    height, width = (14, 14) if padding == "none" else (12, 10)
    n, c, heads = height * width, 128, 4
    q, k, v = qkv(1, n, c, torch.float64, seed=11)
    c1 = global_heads * 32
    wg, bg = rand(c1, 1, 3, 3, seed=1), rand(c1, seed=2)
    wl, bl = rand(c - c1, 1, 3, 3, seed=3), rand(c - c1, seed=4)
    out = elfatt_attention(q, k, v, num_heads=heads, num_global_heads=global_heads, height=height, width=width,
                           window_size=7, padding=padding, global_lepe_weight=wg, global_lepe_bias=bg,
                           local_lepe_weight=wl, local_lepe_bias=bl)
    glob = ref.efficient_attention_quadratic(q[..., :c1], k[..., :c1], v[..., :c1], global_heads) + \
        ref.full_map_lepe(v[..., :c1], height, width, wg, bg)
    local = ref.window_attention(q[..., c1:], k[..., c1:], v[..., c1:], heads - global_heads, height, width, 7, 7,
                                 "masked" if padding == "masked" else "zeros", wl, bl)
    torch.testing.assert_close(out, torch.cat([glob, local], dim=-1), rtol=1e-10, atol=1e-12)
    # the custom-op path (concat of the two heads) gives the same numbers as the eager direct-write path
    with use_plugin_ops():
        plugin = elfatt_attention(q, k, v, num_heads=heads, num_global_heads=global_heads, height=height,
                                  width=width, window_size=7, padding=padding, global_lepe_weight=wg,
                                  global_lepe_bias=bg, local_lepe_weight=wl, local_lepe_bias=bl)
    torch.testing.assert_close(plugin, out, rtol=1e-12, atol=1e-13)


def test_elfatt_modules_reduce_to_blockify_and_efficient_attention():
    torch.manual_seed(0)
    x, hw = rand(2, 49, 64, seed=3), (7, 7)
    local_only = ELFATTAttention(64, global_ratio=0.0).double()
    block = BlockifyAttention(64, 2, window_size=7).double()
    block.qkv.load_state_dict(local_only.qkv.state_dict())
    block.proj.load_state_dict(local_only.proj.state_dict())
    block.get_v.load_state_dict(local_only.get_v_local.state_dict())
    torch.testing.assert_close(local_only(x, hw), block(x, hw), rtol=1e-10, atol=1e-12)
    global_only = ELFATTAttention(64, global_ratio=1.0).double()
    eff = EfficientAttention(64, 2).double()
    eff.qkv.load_state_dict(global_only.qkv.state_dict())
    eff.proj.load_state_dict(global_only.proj.state_dict())
    eff.get_v.load_state_dict(global_only.get_v_global.state_dict())
    torch.testing.assert_close(global_only(x, hw), eff(x, hw), rtol=1e-10, atol=1e-12)
    assert local_only.get_v_global is None and global_only.get_v_local is None


def test_elfatt_module_defaults_and_parameter_count():
    module = ELFATTAttention(256)  # CSWin-T24181 stage 3: 8 heads of 32, 4 global + 4 block
    assert (module.num_heads, module.num_global_heads, module.window_size) == (8, 4, 7)
    # same parameters as a CSWin LOCAL block core: qkv + bias, dw3x3 + bias over C channels, proj + bias
    assert sum(p.numel() for p in module.parameters()) == 3 * 256 * 256 + 3 * 256 + 256 * 9 + 256 + 256 * 256 + 256
    with pytest.raises(OpShapeError, match="whole number of heads"):
        ELFATTAttention(64, global_ratio=0.25)


# ---------------------------------------------------------------- LiteMLA / QT

def test_qt_feature_map_inner_product_identity():
    d = 16
    q, k = rand(3, 1, d, 5, seed=1), rand(3, 1, d, 5, seed=2)  # (B, G, d, N)
    alpha, beta, gamma = (torch.tensor(x, dtype=torch.float64).reshape(1, 1, 1, 1) for x in (0.7, -1.3, 0.4))
    inner = (qt_feature_map(q, alpha, beta, gamma, d) * qt_feature_map(k, alpha, beta, gamma, d)).sum(2)
    closed = 0.7 ** 2 * (q ** 2 * k ** 2).sum(2) + 4 * 1.3 ** 2 / d * (q * k).sum(2) + 0.4 ** 2
    torch.testing.assert_close(inner, closed, rtol=1e-12, atol=1e-12)


QT_CASES = [("relu", None), ("quadratic_taylor", ([0.5], [1.2], [0.8])),
            ("quadratic_taylor", ([0.5, 1.0, 0.2, 0.9], [1.2, 0.3, 1.0, 0.7], [0.8, 1.1, 0.6, 1.3]))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel,params", QT_CASES)
def test_lite_mla_linear_form_equals_explicit_quadratic_form(dtype, kernel, params):
    head_dim, groups = 8, 4
    qkv_map = rand(2, groups * 3 * head_dim, 5, 6, dtype=dtype, seed=4)
    kwargs = {}
    if params:
        kwargs = dict(qt_alpha=params[0], qt_beta=params[1], qt_gamma=params[2])
    out = lite_mla_attention(qkv_map, head_dim=head_dim, kernel=kernel, **kwargs)
    alpha, beta, gamma = params if params else (None, None, None)
    expected = ref.lite_mla_quadratic(qkv_map, head_dim, kernel, 1e-15, alpha, beta, gamma)
    torch.testing.assert_close(out, expected, **TOL[dtype])


def test_lite_mla_constant_kernel_averages_values():
    # alpha = beta = 0, gamma != 0: every similarity is gamma^2, so each output is the token mean of V
    qkv_map = rand(1, 2 * 3 * 4, 3, 5, seed=6)
    out = lite_mla_attention(qkv_map, head_dim=4, kernel="quadratic_taylor", qt_alpha=[0.0], qt_beta=[0.0],
                             qt_gamma=[2.0])
    for g, (_, _, v) in enumerate(ref.lite_mla_groups(qkv_map, 4)):
        mean = v.mean(dim=1)  # (B, d)
        torch.testing.assert_close(out[:, 4 * g:4 * (g + 1)].reshape(1, 4, -1),
                                   mean[..., None].expand(1, 4, 15), rtol=1e-12, atol=1e-12)


def test_lite_mla_uses_per_head_contiguous_layout():
    """Group g reads channels [3dg, 3dg+d) as q, the next d as k, the next d as v (not 3 x (G*d) blocks)."""
    head_dim, groups = 4, 3
    qkv_map = rand(1, groups * 3 * head_dim, 4, 4, seed=8)
    out = lite_mla_attention(qkv_map, head_dim=head_dim)
    for g in range(groups):
        single = lite_mla_attention(qkv_map[:, 3 * head_dim * g:3 * head_dim * (g + 1)], head_dim=head_dim)
        torch.testing.assert_close(out[:, head_dim * g:head_dim * (g + 1)], single, rtol=0, atol=0)
    blocked = qkv_map.reshape(1, 3, groups, head_dim, 4, 4).transpose(1, 2).reshape(1, -1, 4, 4)
    assert (lite_mla_attention(blocked, head_dim=head_dim) - out).abs().max() > 1e-3


def test_lite_mla_eps_must_not_underflow():
    qkv_map = rand(1, 12, 2, 2, dtype=torch.float32)
    with pytest.raises(OpShapeError, match="underflows"):
        lite_mla_attention(qkv_map, head_dim=4, eps=1e-50)


@pytest.mark.parametrize("qt_params", ["layer", "head"])
def test_lite_mla_module_qt_parameters(qt_params):
    torch.manual_seed(0)
    module = LiteMLA(32, 48, dim=8, kernel="quadratic_taylor", qt_params=qt_params).double().eval()
    groups = 2 * (32 // 8)  # heads doubled by the one multi-scale branch
    assert module.qt_alpha.shape == ((groups,) if qt_params == "head" else (1,))
    with torch.no_grad():
        module.qt_alpha.copy_(torch.linspace(0.5, 1.5, module.qt_alpha.numel()))
    x = rand(2, 32, 6, 6, seed=1)
    qkv_map = module.qkv(x)
    qkv_map = torch.cat([qkv_map] + [op(qkv_map) for op in module.aggreg], dim=1)
    core = ref.lite_mla_quadratic(qkv_map, 8, "quadratic_taylor", 1e-15, module.qt_alpha.detach().tolist(),
                                  module.qt_beta.detach().tolist(), module.qt_gamma.detach().tolist())
    torch.testing.assert_close(module(x), module.proj(core), rtol=1e-9, atol=1e-10)
    # positivity margin d alpha^2 gamma^2 - 4 beta^4 (LiteMLA.qt_positivity_margin) at the smallest alpha (0.5), beta
    # = gamma = 1
    assert module.qt_positivity_margin() == pytest.approx(8 * 0.5 ** 2 - 4)


def test_lite_mla_module_parameter_names_follow_efficientvit():
    names = set(dict(LiteMLA(64, 64, dim=16).named_parameters()))
    assert {"qkv.conv.weight", "aggreg.0.0.weight", "aggreg.0.1.weight", "proj.conv.weight", "proj.norm.weight",
            "proj.norm.bias"} == names
    assert math.isclose(sum(p.numel() for p in LiteMLA(64, 64, dim=16).parameters()),
                        64 * 192 + 192 * 25 + 192 * 192 // 12 + 128 * 64 + 2 * 64)
