"""Softmax attention, window partition, blockify (incl. padding modes and locality) and CSWin stripes."""
import pytest
import torch

import ops_reference as ref
from edgeattn.errors import EdgeAttnError
from edgeattn.ops import (BlockifyAttention, CrossShapedWindowAttention, MultiHeadSoftmaxAttention, OpShapeError,
                          blockify_attention, cross_shaped_window_attention, softmax_attention)
from edgeattn.ops import softmax as softmax_module
from edgeattn.ops import windows as windows_module
from edgeattn.ops.windows import window_partition, window_reverse

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: dict(rtol=1e-5, atol=2e-6), torch.float64: dict(rtol=1e-10, atol=1e-12)}


def rand(*shape, dtype=torch.float64, seed=0, scale=1.0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype) * scale


def qkv(b, n, c, dtype, seed=0):
    return rand(b, n, c, dtype=dtype, seed=seed), rand(b, n, c, dtype=dtype, seed=seed + 1), \
        rand(b, n, c, dtype=dtype, seed=seed + 2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_attention_matches_explicit_heads(dtype):
    q, k, v = qkv(2, 37, 24, dtype)
    out = softmax_attention(q, k, v, num_heads=3)
    torch.testing.assert_close(out, ref.softmax_attention(q, k, v, 3), **TOL[dtype])


def test_sdpa_and_export_paths_agree(monkeypatch):
    q, k, v = (t.reshape(2, 5, 3, 4).transpose(1, 2) for t in qkv(2, 5, 12, torch.float64))
    bias = torch.zeros(5, dtype=torch.float64)
    bias[-2:] = float("-inf")
    eager = softmax_module.attend(q, k, v, 0.3, bias)
    monkeypatch.setattr(softmax_module, "exporting", lambda: True)
    explicit = softmax_module.attend(q, k, v, 0.3, bias)
    torch.testing.assert_close(eager, explicit, rtol=1e-12, atol=1e-13)


def test_window_reverse_inverts_partition_and_orders_windows():
    height, width, ws = 6, 9, 3
    # position code: token (y, x) carries the value 100 y + x in channel 0
    positions = torch.tensor([[100.0 * y + x for y in range(height) for x in range(width)]]).unsqueeze(-1)
    x = torch.cat([positions, rand(1, height * width, 3, dtype=torch.float32)], dim=-1)
    windows = window_partition(x, height, width, ws, ws)
    assert windows.shape == (6, 9, 4)
    # window 1 is the second window of the first window row; raster order inside
    assert windows[1, :, 0].tolist() == [100.0 * y + x for y in range(3) for x in range(3, 6)]
    assert windows[3, 0, 0].item() == 300.0  # first window of the second window row
    assert torch.equal(window_reverse(windows, height, width, ws, ws), x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_window_covering_the_map_equals_global(dtype):
    q, k, v = qkv(2, 49, 16, dtype)
    torch.testing.assert_close(
        blockify_attention(q, k, v, num_heads=2, height=7, width=7, window_size=7),
        softmax_attention(q, k, v, num_heads=2), **TOL[dtype])


def test_blockify_module_with_one_window_equals_global_module_with_lepe():
    torch.manual_seed(0)
    dim, hw = 32, (7, 7)
    glob = MultiHeadSoftmaxAttention(dim, 2, lepe=True).double()
    block = BlockifyAttention(dim, 2, window_size=7, lepe=True).double()
    block.load_state_dict(glob.state_dict())
    x = rand(2, 49, dim)
    torch.testing.assert_close(block(x, hw), glob(x, hw), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,padding", [((14, 21), "none"), ((16, 13), "zeros"), ((16, 13), "masked"),
                                           ((9, 20), "masked"), ((3, 5), "masked"), ((3, 5), "zeros")])
def test_blockify_matches_explicit_windows(dtype, shape, padding):
    height, width = shape
    q, k, v = qkv(2, height * width, 16, dtype, seed=3)
    weight, bias = rand(16, 1, 3, 3, dtype=dtype, seed=9), rand(16, dtype=dtype, seed=10)
    out = blockify_attention(q, k, v, num_heads=2, height=height, width=width, window_size=7, padding=padding,
                             lepe_weight=weight, lepe_bias=bias)
    expected = ref.window_attention(q, k, v, 2, height, width, 7, 7, "masked" if padding == "masked" else "zeros",
                                    weight, bias)
    torch.testing.assert_close(out, expected, **TOL[dtype])


@pytest.mark.parametrize("shape,padding", [((21, 14), "none"), ((23, 16), "masked"), ((23, 16), "zeros")])
def test_blockify_in_many_bands_matches_explicit_windows(monkeypatch, shape, padding):
    """Eager mode walks the map in bands of window rows; shrink the band so that every band boundary is hit."""
    monkeypatch.setattr(windows_module, "BAND_TOKENS", 20)
    height, width = shape
    q, k, v = qkv(2, height * width, 16, torch.float64, seed=5)
    weight, bias = rand(16, 1, 3, 3, seed=6), rand(16, seed=7)
    out = blockify_attention(q, k, v, num_heads=2, height=height, width=width, window_size=7, padding=padding,
                             lepe_weight=weight, lepe_bias=bias)
    expected = ref.window_attention(q, k, v, 2, height, width, 7, 7, "masked" if padding == "masked" else "zeros",
                                    weight, bias)
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-12)
    cswin = cross_shaped_window_attention(q, k, v, num_heads=2, height=height, width=width, split_size=7,
                                          last_stage=False) if padding == "none" else None
    if cswin is not None:
        monkeypatch.setattr(windows_module, "BAND_TOKENS", 4096)
        torch.testing.assert_close(cswin, cross_shaped_window_attention(
            q, k, v, num_heads=2, height=height, width=width, split_size=7), rtol=1e-12, atol=1e-13)


def test_padding_none_rejects_indivisible_map_with_a_clear_error():
    q, k, v = qkv(1, 16 * 13, 8, torch.float32)
    with pytest.raises(OpShapeError, match="not divisible by window_size=7.*padding='zeros'") as info:
        blockify_attention(q, k, v, num_heads=1, height=16, width=13, window_size=7)
    assert isinstance(info.value, ValueError) and isinstance(info.value, EdgeAttnError)
    assert "\n" not in str(info.value)


def test_padding_modes_differ_only_where_padded_keys_exist():
    q, k, v = qkv(1, 9 * 9, 8, torch.float64)
    zeros = blockify_attention(q, k, v, num_heads=1, height=9, width=9, window_size=7, padding="zeros")
    masked = blockify_attention(q, k, v, num_heads=1, height=9, width=9, window_size=7, padding="masked")
    image_z, image_m = zeros.reshape(9, 9, 8), masked.reshape(9, 9, 8)
    # the top-left 7x7 window has no padding: identical; every other window has padded keys: different
    torch.testing.assert_close(image_z[:7, :7], image_m[:7, :7], rtol=1e-12, atol=1e-13)
    assert (image_z[7:] - image_m[7:]).abs().amin() > 0
    q2, k2, v2 = qkv(1, 14 * 14, 8, torch.float64)
    outs = [blockify_attention(q2, k2, v2, num_heads=1, height=14, width=14, window_size=7, padding=p)
            for p in ("none", "zeros", "masked")]
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)
    torch.testing.assert_close(outs[0], outs[2], rtol=0, atol=0)


@pytest.mark.parametrize("padding", ["none", "masked"])
def test_locality_perturbing_outside_a_window_leaves_it_unchanged(padding):
    height, width = (14, 14) if padding == "none" else (13, 12)
    q, k, v = qkv(1, height * width, 16, torch.float64)
    weight, bias = rand(16, 1, 3, 3, seed=4), rand(16, seed=5)
    run = lambda q_, k_, v_: blockify_attention(q_, k_, v_, num_heads=2, height=height, width=width,
                                                window_size=7, padding=padding, lepe_weight=weight,
                                                lepe_bias=bias).reshape(height, width, 16)
    base = run(q, k, v)
    # token (7, 0) is just below the top-left window; with a full-map LePE it would leak into row 6
    outside = 7 * width
    k2, v2 = k.clone(), v.clone()
    k2[0, outside] += 5.0
    v2[0, outside] += 5.0
    moved = run(q, k2, v2)
    torch.testing.assert_close(moved[:7, :7], base[:7, :7], rtol=0, atol=0)
    assert (moved[7:, :7] - base[7:, :7]).abs().max() > 1e-3  # the window it belongs to does change


def test_full_map_lepe_would_leak_across_windows():
    """Sanity check of the locality test: a full-map conv does reach across the window border."""
    v = torch.zeros(1, 14 * 14, 4, dtype=torch.float64)
    v[0, 7 * 14] = 1.0
    leaked = ref.full_map_lepe(v, 14, 14, torch.ones(4, 1, 3, 3, dtype=torch.float64)).reshape(14, 14, 4)
    assert leaked[6, 0].abs().sum() > 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_cswin_stripes_match_explicit_windows(dtype):
    height, width, split = 8, 12, 2
    q, k, v = qkv(2, height * width, 32, dtype, seed=7)
    weights = [rand(16, 1, 3, 3, dtype=dtype, seed=s) for s in (1, 2)]
    biases = [rand(16, dtype=dtype, seed=s) for s in (3, 4)]
    out = cross_shaped_window_attention(q, k, v, num_heads=4, height=height, width=width, split_size=split,
                                        lepe_weights=weights, lepe_biases=biases)
    first = ref.window_attention(q[..., :16], k[..., :16], v[..., :16], 2, height, width, height, split,
                                 lepe_weight=weights[0], lepe_bias=biases[0])
    second = ref.window_attention(q[..., 16:], k[..., 16:], v[..., 16:], 2, height, width, split, width,
                                  lepe_weight=weights[1], lepe_bias=biases[1])
    torch.testing.assert_close(out, torch.cat([first, second], dim=-1), **TOL[dtype])


def test_cswin_last_stage_is_global_attention_with_full_map_lepe():
    torch.manual_seed(1)
    local = CrossShapedWindowAttention(32, 2, split_size=7, last_stage=True).double()
    glob = MultiHeadSoftmaxAttention(32, 2, lepe=True).double()
    glob.qkv.load_state_dict(local.qkv.state_dict())
    glob.proj.load_state_dict(local.proj.state_dict())
    glob.get_v.load_state_dict(local.attns[0].get_v.state_dict())
    x = rand(1, 49, 32, seed=2)
    torch.testing.assert_close(local(x, (7, 7)), glob(x, (7, 7)), rtol=1e-10, atol=1e-12)


def test_cswin_rejects_indivisible_map():
    q, k, v = qkv(1, 10 * 10, 8, torch.float32)
    with pytest.raises(OpShapeError, match="split_size=3"):
        cross_shaped_window_attention(q, k, v, num_heads=2, height=10, width=10, split_size=3)


def test_token_count_must_match_map():
    q, k, v = qkv(1, 50, 8, torch.float32)
    with pytest.raises(OpShapeError, match="7x7"):
        blockify_attention(q, k, v, num_heads=1, height=7, width=7, window_size=7)
