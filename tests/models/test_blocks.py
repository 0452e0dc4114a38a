"""Every block type of the model zoo against the written-out formulas of ``oracle_functional.py``.

Blocks run in float64 on non-square token maps (so that a transposed height/width or a stripe in the wrong
direction changes the answer) with :func:`random_params.randomise_parameters` applied, and must agree with the
formula to rounding. The whole-model oracles (test_oracles.py) then check that the blocks are put together right.
"""
import pytest

torch = pytest.importorskip("torch")

import oracle_functional as ref  # noqa: E402
from random_params import randomise_parameters  # noqa: E402

from edgeattn.models._layers import (ConvNormAct, ConvTokenEmbed, DSConv, MBConv, Mlp, PostNormBlock,  # noqa: E402
                                     PreNormBlock, Residual)
from edgeattn.models.efficientvit import EfficientViTBlock  # noqa: E402
from edgeattn.models.flurka import T2TModule, TokenPerformer  # noqa: E402
from edgeattn.ops.blockify import BlockifyAttention  # noqa: E402
from edgeattn.ops.cswin import CrossShapedWindowAttention  # noqa: E402
from edgeattn.ops.efficient_attention import EfficientAttention  # noqa: E402
from edgeattn.ops.elfatt import ELFATTAttention  # noqa: E402
from edgeattn.ops.flurka import FLuRKAAttention  # noqa: E402
from edgeattn.ops.litemla import LiteMLA  # noqa: E402
from edgeattn.ops.soft import SOFTAttention  # noqa: E402
from edgeattn.ops.softmax import MultiHeadSoftmaxAttention  # noqa: E402

TOL = 1e-11
P = "m"  # the prefix the state dicts are stored under


def prepared(module, seed=0):
    torch.manual_seed(seed)
    randomise_parameters(module, seed=seed + 1)
    module = module.double().eval()
    return module, {"{}.{}".format(P, key): value for key, value in module.state_dict().items()}


def tokens(hw, channels, batch=2, seed=3):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, hw[0] * hw[1], channels, generator=generator, dtype=torch.float64)


def image(channels, hw, batch=2, seed=4):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, channels, hw[0], hw[1], generator=generator, dtype=torch.float64)


def assert_formula(got, want, tol=TOL):
    assert got.shape == want.shape
    error = float((got - want).abs().max() / want.abs().max())
    assert error <= tol, "block and written-out formula differ: max rel {:.3g} > {:g}".format(error, tol)


def check_token_attention(module, hw, formula, tol=TOL):
    module, sd = prepared(module)
    x = tokens(hw, module.dim)
    with torch.no_grad():
        assert_formula(module(x, hw), formula(x, sd), tol)


# ---- token attention modules ----------------------------------------------------------------------------------
@pytest.mark.parametrize("lepe", [True, False], ids=["lepe", "nolepe"])
def test_softmax_attention_module(lepe):
    check_token_attention(MultiHeadSoftmaxAttention(32, 4, lepe=lepe), (5, 7),
                          lambda x, sd: ref.global_attention(x, sd, P, (5, 7), 4, lepe=lepe))


def test_softmax_attention_module_with_explicit_scale():
    module = MultiHeadSoftmaxAttention(32, 2, lepe=True, scale=0.3)
    check_token_attention(module, (4, 6), lambda x, sd: ref.global_attention(x, sd, P, (4, 6), 2, scale=0.3))


def test_efficient_attention_module():
    check_token_attention(EfficientAttention(32, 4), (5, 7), lambda x, sd: ref.effatt_attention(x, sd, P, (5, 7), 4))


def test_blockify_attention_module():
    """ELFATT with c1 = 0: the module's LePE is ``get_v`` (per window)."""
    def formula(x, sd):
        renamed = {k.replace(".get_v.", ".get_v_local."): v for k, v in sd.items()}
        return ref.elfatt_attention(x, renamed, P, (6, 9), 4, 0, 3)
    check_token_attention(BlockifyAttention(32, 4, 3), (6, 9), formula)


@pytest.mark.parametrize("global_ratio,global_heads", [(0.0, 0), (0.25, 1), (0.5, 2), (1.0, 4)])
def test_elfatt_module(global_ratio, global_heads):
    module = ELFATTAttention(32, num_heads=4, global_ratio=global_ratio, window_size=3)
    check_token_attention(module, (6, 9), lambda x, sd: ref.elfatt_attention(x, sd, P, (6, 9), 4, global_heads, 3))


@pytest.mark.parametrize("split,hw", [(1, (4, 6)), (2, (4, 6)), (3, (6, 9))])
def test_cswin_cross_shaped_window_module(split, hw):
    check_token_attention(CrossShapedWindowAttention(32, 4, split_size=split), hw,
                          lambda x, sd: ref.cswin_local_attention(x, sd, P, hw, 4, split))


def test_cswin_last_stage_module():
    check_token_attention(CrossShapedWindowAttention(32, 4, split_size=3, last_stage=True), (3, 5),
                          lambda x, sd: ref.cswin_local_attention(x, sd, P, (3, 5), 4, 3, last_stage=True))


@pytest.mark.parametrize("symmetric", [True, False], ids=["softpp", "soft"])
@pytest.mark.parametrize("iterations", [0, 1, 20])
def test_soft_attention_module(symmetric, iterations):
    module = SOFTAttention(32, 2, sampling_ratio=2, newton_iters=iterations, symmetric_norm=symmetric,
                           dwconv_kernel=3)
    check_token_attention(module, (6, 8), lambda x, sd: ref.soft_attention(
        x, sd, P, (6, 8), 2, 2, iterations=iterations, symmetric=symmetric), tol=1e-9)


def test_soft_attention_module_without_local_conv():
    module = SOFTAttention(32, 2, sampling_ratio=1, dwconv_kernel=None)
    check_token_attention(module, (3, 5), lambda x, sd: ref.soft_attention(x, sd, P, (3, 5), 2, 1), tol=1e-9)


#: The Performer's max stabilisers scale numerator and denominator by the same exp(-c) (exact) but not the eps
#: added to the denominator, which they leave in place: with T2T's eps = 1e-8 that moves the result by ~eps
TOKEN_PERFORMER_TOL = 1e-8


@pytest.mark.parametrize("feature_map", ["elu", "performer"])
def test_flurka_attention_module(feature_map):
    """eps = 1e-30, so that the stabilised and the literal Performer agree to rounding (see TOKEN_PERFORMER_TOL)."""
    module = FLuRKAAttention(32, 2, num_tokens=35, rank=6, feature_map=feature_map, num_features=12, eps=1e-30)
    check_token_attention(module, (5, 7), lambda x, sd: ref.flurka_attention(x, sd, P, 2, feature_map, 1e-30))


# ---- transformer blocks ---------------------------------------------------------------------------------------
def test_pre_norm_block():
    block = PreNormBlock(32, MultiHeadSoftmaxAttention(32, 2, lepe=True), mlp_ratio=2.0, norm_eps=1e-6)
    module, sd = prepared(block)
    x = tokens((4, 6), 32)
    with torch.no_grad():
        want = ref.pre_norm_block(x, sd, P, lambda t: ref.global_attention(t, sd, P + ".attn", (4, 6), 2), eps=1e-6)
        assert_formula(module(x, (4, 6)), want)


def test_post_norm_block_with_tanh_gelu():
    block = PostNormBlock(32, SOFTAttention(32, 2, sampling_ratio=2), act_layer=lambda: torch.nn.GELU("tanh"))
    module, sd = prepared(block)
    x = tokens((4, 6), 32)
    with torch.no_grad():
        want = ref.post_norm_block(x, sd, P, lambda t: ref.soft_attention(t, sd, P + ".attn", (4, 6), 2, 2))
        assert_formula(module(x, (4, 6)), want, tol=1e-9)


def test_mlp():
    module, sd = prepared(Mlp(16, 40))
    x = tokens((2, 3), 16)
    with torch.no_grad():
        assert_formula(module(x), ref.mlp(x, sd, P))


def test_conv_token_embed():
    """CSWin's stem and Merge_Block: conv then LayerNorm over channels, tokens out with the map size."""
    module, sd = prepared(ConvTokenEmbed(8, 16, 3, 2, 1))
    x = image(8, (10, 14))
    with torch.no_grad():
        got, hw = module(x)
        out = ref.conv(x, sd, P + ".conv", stride=2, padding=1)
        assert hw == tuple(out.shape[-2:]) == (5, 7)
        assert_formula(got, ref.layer_norm(ref.to_tokens(out), sd, P + ".norm"))


# ---- T2T-ViT --------------------------------------------------------------------------------------------------
def test_token_performer():
    module, sd = prepared(TokenPerformer(27, emb=16, seed=5))
    x = tokens((4, 5), 27)
    with torch.no_grad():
        assert_formula(module(x), ref.token_performer(x, sd, P), TOKEN_PERFORMER_TOL)


def test_tokens_to_token_module_on_a_non_square_image():
    module, sd = prepared(T2TModule(embed_dim=48, token_dim=16))
    x = image(3, (64, 96), batch=1)
    with torch.no_grad():
        assert_formula(module(x), ref.t2t_tokens(sd, P, x), TOKEN_PERFORMER_TOL)


# ---- EfficientViT / QT-ViT ------------------------------------------------------------------------------------
@pytest.mark.parametrize("stride,act", [(1, "hswish"), (2, None)])
def test_conv_norm_act(stride, act):
    module, sd = prepared(ConvNormAct(8, 12, 3, stride=stride, act=act))
    x = image(8, (6, 10))
    with torch.no_grad():
        assert_formula(module(x), ref.conv_norm_act(x, sd, P, stride, act))


def test_ds_conv_residual():
    module, sd = prepared(Residual(DSConv(8, 8)))
    x = image(8, (6, 10))
    with torch.no_grad():
        assert_formula(module(x), x + ref.ds_conv(x, sd, P + ".main"))


@pytest.mark.parametrize("fewer_norm", [False, True])
def test_mb_conv(fewer_norm):
    module, sd = prepared(MBConv(8, 12, stride=2, fewer_norm=fewer_norm))
    x = image(8, (6, 10))
    with torch.no_grad():
        assert_formula(module(x), ref.mb_conv(x, sd, P, stride=2, fewer_norm=fewer_norm))


@pytest.mark.parametrize("kernel,qt_params", [("relu", "layer"), ("quadratic_taylor", "layer"),
                                              ("quadratic_taylor", "head")])
def test_lite_mla_module(kernel, qt_params):
    module, sd = prepared(LiteMLA(32, 32, dim=8, kernel=kernel, qt_params=qt_params, scales=(3, 5), eps=1e-12))
    x = image(32, (6, 10))
    with torch.no_grad():
        assert_formula(module(x), ref.lite_mla(x, sd, P, dim=8, eps=1e-12, kernel=kernel))


def test_efficientvit_block():
    module, sd = prepared(EfficientViTBlock(32, 8, 4, "quadratic_taylor", "layer", (5,), 1e-12))
    x = image(32, (6, 10))
    with torch.no_grad():
        assert_formula(module(x), ref.efficientvit_block(x, sd, P, dim=8, eps=1e-12, kernel="quadratic_taylor"))
