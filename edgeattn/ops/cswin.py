"""CSWin LOCAL: cross-shaped window self-attention with LePE (Dong et al., "CSWin Transformer", CVPR 2022).

Half of the heads attend inside vertical stripes (H x sw windows), the other half inside horizontal stripes
(sw x W windows), in parallel; the outputs are concatenated, and LePE adds a 3x3
depthwise conv of V computed inside each stripe (``LePEAttention.get_lepe`` convolves the windowed V). The
last stage (stripe width = resolution) runs a single full-map branch with all heads. Mirrors
``microsoft/CSWin-Transformer`` ``models/cswin.py`` (``CSWinBlock`` + ``LePEAttention``).
"""
import torch
import torch.nn as nn

from ._common import check_map, check_same_shape, check_tokens, downcast, require, upcast
from .windows import window_attention


def cross_shaped_window_attention(q, k, v, *, num_heads, height, width, split_size, last_stage=False,
                                  lepe_weights=None, lepe_biases=None, scale=None):
    """CSWin cross-shaped window attention core (without the qkv and output projections).

    Shapes: q, k, v (B, N=H*W, C) with q/k/v channels laid out as in CSWin (branch 0 = channels [:C/2] with
    num_heads/2 heads in H x split_size stripes, branch 1 = [C/2:] with num_heads/2 heads in split_size x W
    stripes; ``last_stage``: one branch, all heads, one H x W window). ``lepe_weights``/``lepe_biases``: one
    (C_branch, 1, 3, 3) / (C_branch,) pair per branch, or None. Returns (B, N, C).
    Equation: per branch and stripe, softmax(q k^T / sqrt(d)) v + LePE(v), d = C / num_heads, branches
    concatenated (CSWin, Dong et al. 2022, Sec. 3.2 cross-shaped window attention and Sec. 3.3 LePE; that paper
    is not in the project's paper set, so no equation number is quoted; the code reference is CSWin's
    ``LePEAttention``; ELFATT Eq. 16 writes the same LePE term as L(V)).
    FP16 hazards: as softmax attention over sw*W-token stripes (FP32 max/sum needed); half inputs are computed
    in FP32 and cast back.
    """
    check_tokens("q", q, num_heads)
    check_same_shape("q", q, k=k, v=v)
    b, n, c = q.shape
    check_map(n, height, width)
    dtype = q.dtype
    q, k, v = upcast(q, k, v)
    d = c // num_heads
    scale = d ** -0.5 if scale is None or scale <= 0 else float(scale)
    if last_stage:
        windows = [(slice(0, c), num_heads, height, width)]
    else:
        require(num_heads % 2 == 0 and c % 2 == 0, "CSWin needs an even number of heads, got {}", num_heads)
        require(height % split_size == 0 and width % split_size == 0,
                "CSWin: a {}x{} map is not divisible by split_size={}", height, width, split_size)
        half = c // 2
        windows = [(slice(0, half), num_heads // 2, height, split_size),
                   (slice(half, c), num_heads // 2, split_size, width)]
    require(lepe_weights is None or len(lepe_weights) == len(windows), "need one LePE weight per branch ({})",
            len(windows))
    outs = []
    for index, (channels, heads, window_h, window_w) in enumerate(windows):
        outs.append(window_attention(
            q[..., channels], k[..., channels], v[..., channels], num_heads=heads, height=height, width=width,
            window_h=window_h, window_w=window_w, scale=scale,
            lepe_weight=None if lepe_weights is None else lepe_weights[index],
            lepe_bias=None if lepe_biases is None else lepe_biases[index]))
    out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=-1)
    return downcast(out, dtype)


class _LePEBranch(nn.Module):
    """Holds one branch's LePE conv under CSWin's name (``attns.<i>.get_v``) for checkpoint compatibility."""

    def __init__(self, channels):
        super().__init__()
        self.get_v = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)


class CrossShapedWindowAttention(nn.Module):
    """CSWin LOCAL block core: qkv Linear -> two stripe branches (+ LePE) -> concat -> proj.

    ``CrossShapedWindowAttention(dim, num_heads, split_size, qkv_bias=True, last_stage=False, scale=None)``.
    ``split_size`` is the stripe width sw (CSWin-T24181: 1, 2, 7, 7 per stage); ``last_stage=True`` (CSWin sets
    it when the resolution equals split_size) uses one full-map branch with all heads. Weight names follow
    CSWin: ``qkv`` (Linear C -> 3C, [q | k | v]), ``attns.<i>.get_v`` (3x3 depthwise conv with bias over the
    branch's channels), ``proj``. ``forward(x: (B, N, C), hw: (H, W)) -> (B, N, C)``.
    """

    def __init__(self, dim, num_heads, split_size, qkv_bias=True, last_stage=False, scale=None):
        super().__init__()
        require(dim % num_heads == 0, "dim={} is not divisible by num_heads={}", dim, num_heads)
        require(last_stage or num_heads % 2 == 0, "CSWin needs an even number of heads, got {}", num_heads)
        self.dim = dim
        self.num_heads = num_heads
        self.split_size = split_size
        self.last_stage = last_stage
        self.scale = scale
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        branch_channels = dim if last_stage else dim // 2
        self.attns = nn.ModuleList([_LePEBranch(branch_channels) for _ in range(1 if last_stage else 2)])
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, hw):
        height, width = hw
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        out = cross_shaped_window_attention(
            q, k, v, num_heads=self.num_heads, height=height, width=width, split_size=self.split_size,
            last_stage=self.last_stage, lepe_weights=[a.get_v.weight for a in self.attns],
            lepe_biases=[a.get_v.bias for a in self.attns], scale=self.scale)
        return self.proj(out)
