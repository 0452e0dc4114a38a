"""ELFATT: an EFFATT global linear head on channels [:c1] and a blockify local head on [c1:], concatenated.

Source: Wu et al., "ELFATT: Efficient Linear Fast Attention for Vision Transformers" (arXiv 2501.06098),
Eq. 8 (operator), Eq. 12 (one ELFATT unit = two heads), Eq. 16/17 (with LePE), in the README-v2 normalised form
(github.com/Alicewithrabbit/ELFTEST, the paper's README, which releases no code). Decisions the paper leaves
open, taken from the CSWin / EFFATT code it builds on and from its MAC counts (linear head first, per-head width d = 32,
square windows, LePE on the full map for the global head and inside each window for the block head).
"""
import torch
import torch.nn as nn

from ._common import check_map, check_same_shape, check_tokens, downcast, exporting, grad_needed, require, upcast
from .blockify import PADDING_MODES, blockify_attention, run_blockify_attention
from .config import plugin_ops_enabled
from .efficient_attention import efficient_attention, run_efficient_attention
from .lepe import lepe


def elfatt_attention(q, k, v, *, num_heads, num_global_heads, height, width, window_size, scale=None,
                     padding="none", global_lepe_weight=None, global_lepe_bias=None, local_lepe_weight=None,
                     local_lepe_bias=None):
    """ELFATT attention core (without the qkv and output projections).

    Shapes: q, k, v (B, N=H*W, C), C = num_heads * d; the first ``num_global_heads`` heads (channels [:c1],
    c1 = num_global_heads * d) form the global EFFATT head(s), the rest (channels [c1:]) the blockify head(s).
    LePE weights: global (c1, 1, 3, 3) + (c1,), local (c2, 1, 3, 3) + (c2,), each optional. Returns (B, N, C).
    Equation (ELFATT Eq. 16, README v2):
        [softmax(Q1) softmax(K1)^T V1 + L(V1),  g(softmax(f(Q2) f(K2)^T / sqrt(d)) f(V2) + L(f(V2)))]
    with Q = [Q1, Q2] split along channels, f/g = window partition/reverse (ws x ws, ``padding`` per the
    blockify schema), L = 3x3 depthwise conv (full map for the global head, per window for the block head).
    num_global_heads = 0 is blockify attention, = num_heads is EFFATT.
    The two heads are the reference cores (in eager inference both write into one output buffer instead of being
    concatenated; while a gradient is needed they are concatenated, which autograd differentiates), or the custom
    ops while ``use_plugin_ops()`` is on.
    FP16 hazards: those of EFFATT (N-term token softmax and context) and of windowed softmax; half inputs are
    computed in FP32 (reference mode) and cast back once.
    """
    check_tokens("q", q, num_heads)
    check_same_shape("q", q, k=k, v=v)
    b, n, c = q.shape
    check_map(n, height, width)
    require(0 <= num_global_heads <= num_heads, "num_global_heads must be in [0, {}], got {}", num_heads,
            num_global_heads)
    c1 = num_global_heads * (c // num_heads)
    dtype = q.dtype
    if not plugin_ops_enabled():
        q, k, v = upcast(q, k, v)
    weights = (global_lepe_weight, global_lepe_bias, local_lepe_weight, local_lepe_bias)
    if not plugin_ops_enabled() and not exporting() and 0 < c1 < c and not grad_needed(q, k, v, *weights):
        # Eager inference: both heads write straight into one output buffer (no concat copy).
        out = q.new_empty(b, n, c)
        efficient_attention(q[..., :c1], k[..., :c1], v[..., :c1], num_heads=num_global_heads, out=out[..., :c1])
        if global_lepe_weight is not None:
            out[..., :c1] += lepe(v[..., :c1], height, width, global_lepe_weight, global_lepe_bias)
        blockify_attention(q[..., c1:], k[..., c1:], v[..., c1:], num_heads=num_heads - num_global_heads,
                           height=height, width=width, window_size=window_size, scale=scale,
                           lepe_weight=local_lepe_weight, lepe_bias=local_lepe_bias, padding=padding,
                           out=out[..., c1:])
        return downcast(out, dtype)
    parts = []
    if c1 > 0:
        out = run_efficient_attention(q[..., :c1], k[..., :c1], v[..., :c1], num_heads=num_global_heads)
        if global_lepe_weight is not None:
            out = out + lepe(v[..., :c1], height, width, global_lepe_weight, global_lepe_bias)
        parts.append(out)
    if c1 < c:
        parts.append(run_blockify_attention(
            q[..., c1:], k[..., c1:], v[..., c1:], num_heads=num_heads - num_global_heads, height=height,
            width=width, window_size=window_size, scale=scale, lepe_weight=local_lepe_weight,
            lepe_bias=local_lepe_bias, padding=padding))
    out = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
    return downcast(out, dtype)


class ELFATTAttention(nn.Module):
    """ELFATT block core: qkv Linear -> [EFFATT + LePE | blockify + per-window LePE] -> concat -> proj.

    ``ELFATTAttention(dim, num_heads=None, head_dim=32, global_ratio=0.5, window_size=7, qkv_bias=True,
    lepe=True, padding="none", scale=None)``.
    ``num_heads`` defaults to dim // head_dim (given, it wins and head_dim = dim // num_heads);
    ``global_ratio`` = c1 / C, so num_global_heads = global_ratio * num_heads must be an integer (0 -> pure
    blockify, 1 -> pure EFFATT; CSWin-T24181-ELFATT: 0.5, i.e. h1 = h2 = heads / 2). Weight names: ``qkv``
    (Linear C -> 3C, [q | k | v]), ``get_v_global`` (dwconv 3x3 over c1 channels, full map), ``get_v_local``
    (dwconv 3x3 over c2 channels, per window), ``proj``; same parameter count as CSWin LOCAL.
    ``forward(x: (B, N, C), hw: (H, W)) -> (B, N, C)``.
    """

    def __init__(self, dim, num_heads=None, head_dim=32, global_ratio=0.5, window_size=7, qkv_bias=True,
                 lepe=True, padding="none", scale=None):
        super().__init__()
        if num_heads is None:
            require(head_dim >= 1 and dim % head_dim == 0, "dim={} is not divisible by head_dim={}", dim, head_dim)
            num_heads = dim // head_dim
        require(num_heads >= 1 and dim % num_heads == 0, "dim={} is not divisible by num_heads={}", dim, num_heads)
        require(0.0 <= global_ratio <= 1.0, "global_ratio must be in [0, 1], got {}", global_ratio)
        num_global_heads = int(round(global_ratio * num_heads))
        require(abs(num_global_heads - global_ratio * num_heads) < 1e-6,
                "global_ratio={} of {} heads is not a whole number of heads", global_ratio, num_heads)
        require(padding in PADDING_MODES, "padding must be one of {}, got {!r}", PADDING_MODES, padding)
        self.dim = dim
        self.num_heads = num_heads
        self.num_global_heads = num_global_heads
        self.window_size = window_size
        self.padding = padding
        self.scale = scale
        c1 = num_global_heads * (dim // num_heads)
        c2 = dim - c1
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.get_v_global = nn.Conv2d(c1, c1, 3, padding=1, groups=c1) if lepe and c1 else None
        self.get_v_local = nn.Conv2d(c2, c2, 3, padding=1, groups=c2) if lepe and c2 else None
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, hw):
        height, width = hw
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        glob, loc = self.get_v_global, self.get_v_local
        out = elfatt_attention(
            q, k, v, num_heads=self.num_heads, num_global_heads=self.num_global_heads, height=height, width=width,
            window_size=self.window_size, scale=self.scale, padding=self.padding,
            global_lepe_weight=None if glob is None else glob.weight,
            global_lepe_bias=None if glob is None else glob.bias,
            local_lepe_weight=None if loc is None else loc.weight,
            local_lepe_bias=None if loc is None else loc.bias)
        return self.proj(out)
