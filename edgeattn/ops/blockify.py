"""Blockify attention: softmax attention inside square ws x ws windows, the local head of ELFATT.

Op contract: ``export/schemas/EdgeAttnBlockifyAttention.yaml`` (custom op ``torch.ops.edgeattn.blockify_attention``).
"""
from typing import Optional

import torch

from ._common import (check_map, check_same_shape, check_tokens, differentiate_by_reference, downcast, require,
                      upcast)
from .config import plugin_ops_enabled
from .lepe import TokenAttention
from .windows import window_attention

#: padding policies of the op schema, in its order
PADDING_MODES = ("none", "zeros", "masked")


def blockify_attention(q, k, v, *, num_heads, height, width, window_size, scale=None, lepe_weight=None,
                       lepe_bias=None, padding="none", out=None):
    """Block-local multi-head softmax attention over non-overlapping ws x ws windows.

    Shapes: q, k, v (B, N=H*W, C), C = num_heads * d, channel c -> head c // d; ``lepe_weight`` (C, 1, 3, 3),
    ``lepe_bias`` (C,); returns (B, N, C).
    Equation: ELFATT (Zhang et al., arXiv 2501.06098) Eq. 8/16, local term g(softmax(f(Q) f(K)^T / sqrt(d)) f(V)
    + L(f(V))) in the README-v2 normalised form, f = window partition, g = its inverse, L = 3x3 depthwise
    conv inside each window (zero padding at window borders). ``scale`` None or <= 0 means d ** -0.5.
    Padding (schema attribute): "none" -> H and W must be multiples of ws (OpShapeError otherwise); "zeros" ->
    q, k, v zero-padded at the bottom/right and the padded keys take part in the softmax (Swin's non-shifted
    convention); "masked" -> as "zeros" but padded keys are excluded (LePE still sees zeros there). Padded
    rows are cropped from the output. ``out`` (eager, in the compute dtype): a (B, N, C) tensor or channel slice
    of a larger buffer to write the result into (ELFATT uses it to skip a concat); it is returned.
    FP16 hazards: scores reach |q||k| * scale and the 49/196-term softmax sums want FP32; half inputs are
    computed in FP32 (max-subtracted softmax) and cast back once.
    """
    check_tokens("q", q, num_heads)
    check_same_shape("q", q, k=k, v=v)
    b, n, c = q.shape
    check_map(n, height, width)
    require(window_size >= 1, "window_size must be >= 1, got {}", window_size)
    require(padding in PADDING_MODES, "padding must be one of {}, got {!r}", PADDING_MODES, padding)
    require((lepe_weight is None) or lepe_weight.shape[-1] == 3, "blockify LePE is a 3x3 depthwise conv, got {}",
            None if lepe_weight is None else tuple(lepe_weight.shape))
    dtype = q.dtype
    q, k, v = upcast(q, k, v)
    scale = (c // num_heads) ** -0.5 if scale is None or scale <= 0 else float(scale)
    padded = height % window_size or width % window_size
    require(not padded or padding != "none",
            "blockify attention: a {}x{} map is not divisible by window_size={}; pass padding='zeros' or "
            "padding='masked' (or use a resolution whose token map is a multiple of the window)",
            height, width, window_size)
    require(out is None or (out.dtype == q.dtype and tuple(out.shape) == (b, n, c)),
            "out must be a ({}, {}, {}) {} tensor", b, n, c, q.dtype)
    result = window_attention(q, k, v, num_heads=num_heads, height=height, width=width, window_h=window_size,
                              window_w=window_size, scale=scale, lepe_weight=lepe_weight, lepe_bias=lepe_bias,
                              padding="masked" if padding == "masked" else "zeros", out=out)
    return result if out is not None else downcast(result, dtype)


def _blockify_attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                  lepe_weight: Optional[torch.Tensor], lepe_bias: Optional[torch.Tensor],
                                  num_heads: int, height: int, width: int, window_size: int, scale: float,
                                  padding: str) -> torch.Tensor:
    """``torch.ops.edgeattn.blockify_attention``: EdgeAttnBlockifyAttention v1 (scale 0.0 = d ** -0.5)."""
    return blockify_attention(q, k, v, num_heads=num_heads, height=height, width=width, window_size=window_size,
                              scale=scale, lepe_weight=lepe_weight, lepe_bias=lepe_bias, padding=padding)


blockify_attention_op = torch.library.custom_op("edgeattn::blockify_attention", _blockify_attention_reference,
                                                mutates_args=())
differentiate_by_reference(blockify_attention_op, _blockify_attention_reference)


@blockify_attention_op.register_fake
def _blockify_attention_fake(q, k, v, lepe_weight, lepe_bias, num_heads, height, width, window_size, scale,
                             padding):
    return torch.empty_like(q)


def run_blockify_attention(q, k, v, *, num_heads, height, width, window_size, scale=None, lepe_weight=None,
                           lepe_bias=None, padding="none"):
    """:func:`blockify_attention`, or the custom op while :func:`edgeattn.ops.config.use_plugin_ops` is on."""
    if plugin_ops_enabled():
        # the kernels read row-major tensors (q, k, v are often chunks of one qkv projection); no ONNX node
        return torch.ops.edgeattn.blockify_attention(q.contiguous(), k.contiguous(), v.contiguous(), lepe_weight,
                                                     lepe_bias, num_heads, height, width, window_size,
                                                     float(scale or 0.0), padding)
    return blockify_attention(q, k, v, num_heads=num_heads, height=height, width=width, window_size=window_size,
                              scale=scale, lepe_weight=lepe_weight, lepe_bias=lepe_bias, padding=padding)


class BlockifyAttention(TokenAttention):
    """Window (blockify) attention block core: qkv Linear -> blockify attention (+ per-window LePE) -> proj.

    ``BlockifyAttention(dim, num_heads, window_size, qkv_bias=True, lepe=True, padding="none", scale=None)``.
    This is ELFATT with c1 = 0 (Swin W-MSA without relative-position bias, plus per-window LePE). Weight names:
    ``qkv`` (Linear C -> 3C, [q | k | v]), ``get_v`` (3x3 depthwise conv with bias, applied inside each window),
    ``proj``. ``forward(x: (B, N, C), hw: (H, W)) -> (B, N, C)``.
    """

    full_map_lepe = False  # LePE runs inside each window, fused into the core

    def __init__(self, dim, num_heads, window_size, qkv_bias=True, lepe=True, padding="none", scale=None):
        require(padding in PADDING_MODES, "padding must be one of {}, got {!r}", PADDING_MODES, padding)
        super().__init__(dim, num_heads, qkv_bias=qkv_bias, lepe=lepe)
        self.window_size = window_size
        self.padding = padding
        self.scale = scale

    def attend(self, q, k, v, height, width):
        return run_blockify_attention(
            q, k, v, num_heads=self.num_heads, height=height, width=width, window_size=self.window_size,
            scale=self.scale, lepe_weight=None if self.get_v is None else self.get_v.weight,
            lepe_bias=None if self.get_v is None else self.get_v.bias, padding=self.padding)
