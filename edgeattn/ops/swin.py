"""Swin W-MSA / SW-MSA: softmax attention inside (shifted) windows with a relative position bias (Liu et al.,
"Swin Transformer: Hierarchical Vision Transformer using Shifted Windows", ICCV 2021).

Mirrors timm's ``swin_transformer.py`` (``WindowAttention`` + ``SwinTransformerBlock._attn``), so a timm Swin
state dict drives it unchanged: cyclic shift by -shift, zero padding of the block input at the bottom/right to a
multiple of the window (before qkv, as timm does, so padded tokens carry the qkv bias), window partition, per
window and head softmax(q k^T * d^-0.5 + B[rel(i, j)] + M) v, the shift mask M = -100 between tokens of different
shifted regions (timm's value, computed on the padded map), window reverse, crop, shift back. A map exactly one
window large gets no shift (timm's rule).

The bias and the mask make the attention scores a function of an extra (heads, L, L) and (nW, L, L) tensor, which
the v1 EdgeAttnBlockifyAttention contract has no input for; schemas are immutable, so this core exports as
standard ONNX (MatMul / Add / Softmax / MatMul per window), the pattern TensorRT's MHA fusion matches.
"""
import functools

import numpy
import torch
import torch.nn as nn
import torch.nn.functional as F

from ._common import require
from .softmax import attend
from .windows import window_partition, window_reverse

#: timm's additive mask between tokens of different shifted regions (finite, so padded rows never go all -inf)
SHIFT_MASK_VALUE = -100.0


def effective_window(height, width, window_size, shift_size):
    """(window, shift) actually used on an H x W map: a map exactly one window large gets no shift (timm's rule;
    a model built for a smaller map is built with the smaller window, see :mod:`edgeattn.models.swin`)."""
    require(min(height, width) >= window_size, "a {}x{} map is smaller than the {}x{} window this Swin attention "
            "was built with; build the model at this resolution", height, width, window_size, window_size)
    if min(height, width) == window_size:
        return window_size, 0
    return window_size, shift_size


def relative_position_index(window_size):
    """(L, L) index into the (2ws-1)^2 bias table for every pair of positions of a ws x ws window (timm order)."""
    coords = torch.stack(torch.meshgrid(torch.arange(window_size), torch.arange(window_size), indexing="ij"))
    coords = coords.flatten(1)
    relative = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window_size - 1)
    return relative[:, :, 0] * (2 * window_size - 1) + relative[:, :, 1]


@functools.lru_cache(maxsize=64)
def _shift_mask_array(height, width, window_size, shift_size):
    labels = numpy.zeros((height, width), dtype=numpy.int64)
    count = 0
    for rows in ((0, -window_size), (-window_size, -shift_size), (-shift_size, None)):
        for cols in ((0, -window_size), (-window_size, -shift_size), (-shift_size, None)):
            labels[rows[0]:rows[1], cols[0]:cols[1]] = count
            count += 1
    windows = labels.reshape(height // window_size, window_size, width // window_size, window_size)
    windows = windows.transpose(0, 2, 1, 3).reshape(-1, window_size * window_size)
    different = windows[:, None, :] != windows[:, :, None]
    return numpy.where(different, SHIFT_MASK_VALUE, 0.0).astype(numpy.float32)


def shift_mask(height, width, window_size, shift_size, dtype=torch.float32, device=None):
    """(nW, L, L) additive mask of SW-MSA on a (padded) H x W map: 0 within a shifted region, -100 across regions
    (None without shift). H and W must be multiples of the window. Built in numpy (cached per geometry) so that a
    trace records one constant instead of the ops that would fill it."""
    if not shift_size:
        return None
    return torch.tensor(_shift_mask_array(height, width, window_size, shift_size), dtype=dtype, device=device)


def windowed_biased_attention(q, k, v, *, num_heads, height, width, window_size, bias, mask=None, scale=None):
    """Softmax attention per ws x ws window with an additive per-head bias (and per-window mask).

    Shapes: q, k, v (B, N=H*W, C) on a map tiled exactly by the window; ``bias`` (h, L, L), ``mask`` (nW, L, L) or
    None; returns (B, N, C). Per window w, head h: softmax(q k^T * scale + bias[h] + mask[w]) v, scale = d^-0.5.
    """
    b, n, c = q.shape
    d = c // num_heads
    scale = d ** -0.5 if scale is None or scale <= 0 else float(scale)
    length = window_size * window_size
    windows = n // length

    def heads(t):  # (B, N, C) -> (B, nW, h, L, d)
        t = window_partition(t, height, width, window_size, window_size)
        return t.reshape(b, windows, length, num_heads, d).transpose(2, 3)

    scores_bias = bias.unsqueeze(0).to(q.dtype)                         # (1, h, L, L)
    if mask is not None:
        scores_bias = scores_bias + mask.unsqueeze(1).to(q.dtype)       # (nW, h, L, L)
    out = attend(heads(q), heads(k), heads(v), scale, scores_bias)
    out = out.transpose(2, 3).reshape(b * windows, length, c)
    return window_reverse(out, height, width, window_size, window_size)


class ShiftedWindowAttention(nn.Module):
    """Swin (S)W-MSA block core: [shift, pad] -> qkv -> windowed attention + relative position bias -> proj
    -> [crop, unshift].

    ``ShiftedWindowAttention(dim, num_heads, window_size=7, shift_size=0, qkv_bias=True)``; ``shift_size`` 0 is
    W-MSA, ws // 2 SW-MSA. Weight names follow timm: ``qkv``, ``relative_position_bias_table`` ((2ws-1)^2, h),
    ``proj``; ``relative_position_index`` is a non-persistent buffer. ``forward(x: (B, N, C), hw: (H, W))``.
    """

    def __init__(self, dim, num_heads, window_size=7, shift_size=0, qkv_bias=True):
        super().__init__()
        require(dim % num_heads == 0, "dim={} is not divisible by num_heads={}", dim, num_heads)
        require(0 <= shift_size < window_size, "shift_size must be in [0, window_size), got {}", shift_size)
        self.dim = dim
        self.num_heads = num_heads
        self.window_size = window_size
        self.shift_size = shift_size
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * window_size - 1) ** 2, num_heads))
        if self.relative_position_bias_table.device.type != "meta":
            nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.register_buffer("relative_position_index", relative_position_index(window_size), persistent=False)
        self.proj = nn.Linear(dim, dim)

    def geometry(self, height, width):
        """(window, shift, padded H, padded W) on an H x W map."""
        window, shift = effective_window(height, width, self.window_size, self.shift_size)
        return window, shift, -(-height // window) * window, -(-width // window) * window

    def position_bias(self):
        """(h, L, L) relative position bias of the window."""
        length = self.window_size * self.window_size
        table = self.relative_position_bias_table[self.relative_position_index.reshape(-1)]
        return table.reshape(length, length, self.num_heads).permute(2, 0, 1)

    def forward(self, x, hw):
        height, width = hw
        b, n, c = x.shape
        window, shift, padded_h, padded_w = self.geometry(height, width)
        image = x.reshape(b, height, width, c)
        if shift:
            image = torch.roll(image, shifts=(-shift, -shift), dims=(1, 2))
        if (padded_h, padded_w) != (height, width):
            image = F.pad(image, (0, 0, 0, padded_w - width, 0, padded_h - height))
        tokens = image.reshape(b, padded_h * padded_w, c)
        q, k, v = self.qkv(tokens).chunk(3, dim=-1)
        mask = shift_mask(padded_h, padded_w, window, shift, q.dtype, q.device)
        out = windowed_biased_attention(q, k, v, num_heads=self.num_heads, height=padded_h, width=padded_w,
                                        window_size=window, bias=self.position_bias(), mask=mask)
        image = self.proj(out).reshape(b, padded_h, padded_w, c)[:, :height, :width]
        if shift:
            image = torch.roll(image, shifts=(shift, shift), dims=(1, 2))
        return image.reshape(b, n, c)
