"""Swin (S)W-MSA and the prefix-token Multi-Spot core against explicit references written out here.

Swin: Liu et al., ICCV 2021, Sec. 3.2 (cyclic shift, masked windows, relative position bias B[rel(i, j)]); the
whole-model check against timm is in tests/models/test_zoo_timm.py. Multi-Spot with a class token: the region loop
of ops_reference.multi_spot extended by one prefix token (its query attends to everything; its key is a top-k
candidate of every region).
"""
import math

import pytest
import torch

import ops_reference as ref
from edgeattn.ops import OpShapeError, ShiftedWindowAttention, multi_spot_attention, softmax_attention
from edgeattn.ops.swin import relative_position_index, shift_mask, windowed_biased_attention


def rand(*shape, dtype=torch.float64, seed=0, scale=1.0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator, dtype=torch.float64) * scale).to(dtype)


def shifted_region(y, x, size, window, shift):
    """Which of the 9 regions of a cyclically shifted map a position belongs to (rows and columns split at
    size - window and size - shift)."""
    def band(t):
        return 0 if t < size - window else (1 if t < size - shift else 2)
    return band(y) * 3 + band(x)


def test_relative_position_index_is_the_offset_pair():
    ws = 4
    index = relative_position_index(ws)
    for i in range(ws * ws):
        for j in range(ws * ws):
            dy, dx = i // ws - j // ws, i % ws - j % ws
            assert index[i, j] == (dy + ws - 1) * (2 * ws - 1) + (dx + ws - 1)


def test_shift_mask_separates_the_shifted_regions():
    size, ws, shift = 12, 4, 2
    mask = shift_mask(size, size, ws, shift)
    assert mask.shape == ((size // ws) ** 2, ws * ws, ws * ws)
    for w in range((size // ws) ** 2):
        wy, wx = divmod(w, size // ws)
        positions = [(wy * ws + t // ws, wx * ws + t % ws) for t in range(ws * ws)]
        for i, (yi, xi) in enumerate(positions):
            for j, (yj, xj) in enumerate(positions):
                same = shifted_region(yi, xi, size, ws, shift) == shifted_region(yj, xj, size, ws, shift)
                assert mask[w, i, j] == (0.0 if same else -100.0)
    assert shift_mask(size, size, ws, 0) is None


def test_windowed_biased_attention_matches_the_per_window_formula():
    size, ws, heads = 8, 4, 2
    q, k, v = (rand(2, size * size, 16, seed=s) for s in (1, 2, 3))
    bias, mask = rand(heads, ws * ws, ws * ws, seed=4), shift_mask(size, size, ws, 2, torch.float64)
    out = windowed_biased_attention(q, k, v, num_heads=heads, height=size, width=size, window_size=ws, bias=bias,
                                    mask=mask)
    index, _, _ = ref.window_token_index(size, size, ws, ws)
    expected = torch.zeros_like(q)
    for w, tokens in enumerate(index):
        for h, sl in enumerate(ref.head_slices(16, heads)):
            scores = q[:, tokens, sl] @ k[:, tokens, sl].transpose(-1, -2) * 8 ** -0.5 + bias[h] + mask[w]
            expected[:, tokens, sl] = torch.softmax(scores, -1) @ v[:, tokens, sl]
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("shift", [0, 2])
def test_shifted_window_module_rolls_partitions_and_unrolls(shift):
    torch.manual_seed(0)
    size, ws = 8, 4
    module = ShiftedWindowAttention(16, 2, window_size=ws, shift_size=shift).double()
    x = rand(1, size * size, 16, seed=5)
    rolled = torch.roll(x.reshape(1, size, size, 16), (-shift, -shift), (1, 2)).reshape(1, -1, 16)
    q, k, v = module.qkv(rolled).chunk(3, -1)
    index = relative_position_index(ws)
    bias = module.relative_position_bias_table[index.reshape(-1)].reshape(ws * ws, ws * ws, 2).permute(2, 0, 1)
    windows, _, _ = ref.window_token_index(size, size, ws, ws)
    out = torch.zeros_like(q)
    for w, tokens in enumerate(windows):
        for h, sl in enumerate(ref.head_slices(16, 2)):
            scores = q[:, tokens, sl] @ k[:, tokens, sl].transpose(-1, -2) * 8 ** -0.5 + bias[h]
            if shift:
                positions = [(int(t) // size, int(t) % size) for t in tokens]
                regions = torch.tensor([shifted_region(y, x_, size, ws, shift) for y, x_ in positions])
                scores = scores + (regions[:, None] != regions[None, :]).double() * -100.0
            out[:, tokens, sl] = torch.softmax(scores, -1) @ v[:, tokens, sl]
    expected = torch.roll(module.proj(out).reshape(1, size, size, 16), (shift, shift), (1, 2)).reshape(1, -1, 16)
    torch.testing.assert_close(module(x, (size, size)), expected, rtol=1e-10, atol=1e-12)


def test_shifted_window_module_pads_like_timm_and_rejects_small_maps():
    """A 10x10 map with 4x4 windows is padded to 12x12 before qkv: the padded tokens carry the qkv bias."""
    torch.manual_seed(1)
    module = ShiftedWindowAttention(16, 2, window_size=4).double()
    x = rand(1, 100, 16, seed=6)
    padded = torch.zeros(1, 12, 12, 16, dtype=torch.float64)
    padded[:, :10, :10] = x.reshape(1, 10, 10, 16)
    full = module(padded.reshape(1, 144, 16), (12, 12)).reshape(1, 12, 12, 16)
    torch.testing.assert_close(module(x, (10, 10)), full[:, :10, :10].reshape(1, 100, 16), rtol=1e-12, atol=1e-13)
    with pytest.raises(OpShapeError, match="smaller than the 4x4 window"):
        module(rand(1, 9, 16), (3, 3))


# ---------------------------------------------------------------- Multi-Spot with a class token

def multi_spot_with_prefix(q, k, v, num_heads, height, width, region, topk, pool, log_ratio):
    """Per head: the class query (token 0) attends to all keys; each region of patch queries attends to its top-k
    of all 1 + N keys (scored by the region's mean query) plus every pool x pool average of the patch keys/values
    (bias log_ratio)."""
    d = q.shape[-1] // num_heads
    out = torch.zeros_like(q)
    regions, _, _ = ref.window_token_index(height, width, region, region)
    groups = ref.window_token_index(height, width, pool, pool)[0] if pool else []
    for sl in ref.head_slices(q.shape[-1], num_heads):
        qh, kh, vh = q[0, :, sl], k[0, :, sl], v[0, :, sl]
        out[0, 0, sl] = torch.softmax(qh[0] @ kh.T * d ** -0.5, -1) @ vh
        patches_k, patches_v = kh[1:], vh[1:]
        for tokens in regions:
            rows = qh[1:][tokens]
            chosen = (kh @ rows.mean(0)).topk(topk).indices
            keys, values = [kh[chosen]], [vh[chosen]]
            bias = [torch.zeros(topk, dtype=q.dtype)]
            if pool:
                keys.append(torch.stack([patches_k[g].mean(0) for g in groups]))
                values.append(torch.stack([patches_v[g].mean(0) for g in groups]))
                bias.append(torch.full((len(groups),), log_ratio, dtype=q.dtype))
            weights = torch.softmax(rows @ torch.cat(keys).T * d ** -0.5 + torch.cat(bias), -1)
            out[0, 1 + tokens, sl] = weights @ torch.cat(values)
    return out


@pytest.mark.parametrize("topk,pool", [(10, None), (7, 2), (12, 4)])
def test_multi_spot_with_a_class_token_matches_the_explicit_loop(topk, pool):
    q, k, v = (rand(1, 1 + 8 * 8, 16, seed=s) for s in (7, 8, 9))
    out = multi_spot_attention(q, k, v, num_heads=2, height=8, width=8, region_size=4, topk=topk,
                               pool_sizes=[pool] if pool else [], log_ratios=[math.log(pool * pool)] if pool else None,
                               prefix_tokens=1)
    expected = multi_spot_with_prefix(q, k, v, 2, 8, 8, 4, topk, pool, math.log(pool * pool) if pool else 0.0)
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-12)


def test_multi_spot_selecting_every_key_with_a_class_token_is_softmax_attention():
    q, k, v = (rand(2, 1 + 6 * 6, 16, seed=s) for s in (10, 11, 12))
    out = multi_spot_attention(q, k, v, num_heads=2, height=6, width=6, region_size=3, topk=37, prefix_tokens=1)
    torch.testing.assert_close(out, softmax_attention(q, k, v, num_heads=2), rtol=1e-10, atol=1e-12)
