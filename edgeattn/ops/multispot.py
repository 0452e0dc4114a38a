"""Multi-Spot attention (softmax mode): region-shared top-k tokens plus average-pooled levels with a learnable
log-ratio bias, and an optional polynomial value map.

Source: "Multi-Spot Transformer: An Efficient Transformer with Linear Complexity" (anonymous ICML submission),
Eq. 2 (multi-spot interpolation: level weights p_hat_m * exp(mean logit) on pooled
groups), Sec. 2.2 query-region sharing, polynomial value fitting. Where the paper leaves the layout open it is read
as: query regions = ws x ws windows, region representative = mean
query, level 1 = top-k1 individual tokens, level m = p_m x p_m average-pooled K/V maps (top-k_m pooled tokens,
or all of them), bias log p_hat_m on pooled logits, p_hat_m = exp(log_ratio) > 0 initialised to p_m^2 (the
number of tokens a pooled token stands for). The separable-kernel mode is not implemented.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._common import check_map, check_same_shape, check_tokens, downcast, merge_heads, require, split_heads, upcast
from .softmax import attend


def _regions(x, height, width, region_size):
    """(B, h, N, d) -> (B, h, R, s*s, d): query regions = non-overlapping windows, window-row-major."""
    b, h, _, d = x.shape
    rows, cols = height // region_size, width // region_size
    x = x.reshape(b, h, rows, region_size, cols, region_size, d).permute(0, 1, 2, 4, 3, 5, 6)
    return x.reshape(b, h, rows * cols, region_size * region_size, d)


def _unregions(x, height, width, region_size):
    """Inverse of :func:`_regions`: (B, h, R, s*s, d) -> (B, N, h*d)."""
    b, h, _, _, d = x.shape
    rows, cols = height // region_size, width // region_size
    x = x.reshape(b, h, rows, cols, region_size, region_size, d).permute(0, 2, 4, 3, 5, 1, 6)
    return x.reshape(b, height * width, h * d)


def _pool(x, height, width, pool):
    """p x p average pooling of a (B, h, N, d) token map -> (B, h, N / p^2, d)."""
    b, h, _, d = x.shape
    image = x.reshape(b, h, height, width, d).permute(0, 1, 4, 2, 3).reshape(b, h * d, height, width)
    pooled = F.avg_pool2d(image, pool, pool)
    return pooled.reshape(b, h, d, -1).transpose(-1, -2)


def _gather_tokens(x, index):
    """Rows of x (B, h, T, d) at index (B, h, R, k) -> (B, h, R, k, d), via one flat Gather."""
    b, h, t, d = x.shape
    offsets = (torch.arange(b * h, device=x.device) * t).reshape(b, h, 1, 1)
    flat = (index + offsets).reshape(-1)
    return x.reshape(b * h * t, d).index_select(0, flat).reshape(*index.shape, d)


def _polynomial_values(values, poly_a, poly_b):
    """V -> V + b V^2 + a V^3 (element-wise; the paper's polynomial value fit), or V when both are None."""
    if poly_a is None and poly_b is None:
        return values
    squared = values * values
    poly = values
    if poly_b is not None:
        poly = poly + (poly_b.to(values.dtype) if torch.is_tensor(poly_b) else float(poly_b)) * squared
    if poly_a is not None:
        poly = poly + (poly_a.to(values.dtype) if torch.is_tensor(poly_a) else float(poly_a)) * squared * values
    return poly


def multi_spot_attention(q, k, v, *, num_heads, height, width, region_size, topk, pool_sizes=(), pool_topk=(),
                         log_ratios=None, poly_a=None, poly_b=None, scale=None, prefix_tokens=0):
    """Multi-Spot attention core (softmax mode).

    Shapes: q, k, v (B, P + N, C) with N = H*W map tokens after ``prefix_tokens`` = P extra tokens (a ViT's class
    token), C = num_heads * d; returns (B, P + N, C). ``pool_sizes`` p_m and
    ``pool_topk`` k_m (None = use every pooled token) describe the pooled levels, ``log_ratios`` (L,) their
    log p_hat_m (tensor or floats; default log p_m^2); ``poly_a``/``poly_b`` enable V -> V + b V^2 + a V^3.
    Per head and region r with representative q_bar_r = mean of its queries:
        level 1: the top-k1 keys by q_bar_r . k (individual tokens, bias 0);
        level m: pooled keys/values k_bar, v_bar of p_m x p_m groups, top-k_m by q_bar_r . k_bar (or all), bias
                 log p_hat_m;
        out_i = softmax_j(q_i . k_j * scale + bias_j) v_j over the union (Eq. 2: weights p_hat_m exp(mean logit),
                since q . mean(k) is the mean of the logits).
    With topk = N and no pooled levels this is exactly softmax attention. ``scale`` None -> d ** -0.5.
    Prefix tokens: their queries attend to all P + N keys exactly (P rows cost P (P + N) d); their keys are
    top-k candidates of every region like the map keys; the pooled levels pool the map only.
    FP16 hazards: the softmax max must include the bias (it does: one softmax over biased logits, FP32), and
    the cubic value map overflows FP16 past |v| ~ 40; half inputs run in FP32. Top-k ties can select different
    tokens in FP16 than in FP32: compare outputs, not indices.
    """
    check_tokens("q", q, num_heads)
    check_same_shape("q", q, k=k, v=v)
    b, total, c = q.shape
    require(0 <= prefix_tokens < total, "prefix_tokens must be in [0, {}), got {}", total, prefix_tokens)
    n = total - prefix_tokens
    check_map(n, height, width)
    require(region_size >= 1 and height % region_size == 0 and width % region_size == 0,
            "Multi-Spot: a {}x{} map is not divisible by region_size={}", height, width, region_size)
    pool_sizes = list(pool_sizes)
    pool_topk = list(pool_topk) if pool_topk else [None] * len(pool_sizes)
    require(len(pool_topk) == len(pool_sizes), "pool_topk needs one entry per pool size")
    require(0 <= topk <= total and (topk > 0 or pool_sizes), "topk must be in [1, N={}] (or 0 with pooled levels), "
            "got {}", total, topk)
    for pool, count in zip(pool_sizes, pool_topk):
        require(pool >= 1 and height % pool == 0 and width % pool == 0,
                "Multi-Spot: a {}x{} map is not divisible by pool size {}", height, width, pool)
        require(count is None or 1 <= count <= n // (pool * pool), "pooled top-k {} exceeds the {} pooled tokens",
                count, n // (pool * pool))
    dtype = q.dtype
    q, k, v = upcast(q, k, v)
    d = c // num_heads
    scale = d ** -0.5 if scale is None or scale <= 0 else float(scale)
    if log_ratios is None:
        log_ratios = [math.log(p * p) for p in pool_sizes]
    if not torch.is_tensor(log_ratios):
        log_ratios = torch.tensor([float(x) for x in log_ratios], dtype=q.dtype, device=q.device)
    log_ratios = log_ratios.to(q.dtype)
    require(log_ratios.numel() == len(pool_sizes), "need one log ratio per pooled level")

    qh, kh, vh = (split_heads(t, num_heads) for t in (q, k, v))
    prefix_q = qh[:, :, :prefix_tokens] if prefix_tokens else None
    map_k, map_v = (kh[:, :, prefix_tokens:], vh[:, :, prefix_tokens:]) if prefix_tokens else (kh, vh)
    regions = _regions(qh[:, :, prefix_tokens:] if prefix_tokens else qh, height, width, region_size)  # (B,h,R,s,d)
    count = regions.shape[2]
    representative = regions.mean(dim=3)  # (B, h, R, d)
    keys, values, biases = [], [], []
    if topk:
        index = torch.matmul(representative, kh.transpose(-1, -2)).topk(topk, dim=-1).indices
        keys.append(_gather_tokens(kh, index))
        values.append(_gather_tokens(vh, index))
        biases.append(q.new_zeros(topk))
    for level, (pool, level_topk) in enumerate(zip(pool_sizes, pool_topk)):
        pooled_k, pooled_v = _pool(map_k, height, width, pool), _pool(map_v, height, width, pool)
        if level_topk is None or level_topk == pooled_k.shape[2]:
            keys.append(pooled_k.unsqueeze(2).expand(-1, -1, count, -1, -1))
            values.append(pooled_v.unsqueeze(2).expand(-1, -1, count, -1, -1))
        else:
            index = torch.matmul(representative, pooled_k.transpose(-1, -2)).topk(level_topk, dim=-1).indices
            keys.append(_gather_tokens(pooled_k, index))
            values.append(_gather_tokens(pooled_v, index))
        biases.append(log_ratios[level].expand(keys[-1].shape[3]))
    keys = torch.cat(keys, dim=3) if len(keys) > 1 else keys[0]
    values = torch.cat(values, dim=3) if len(values) > 1 else values[0]
    bias = torch.cat(biases) if len(biases) > 1 else biases[0]
    values = _polynomial_values(values, poly_a, poly_b)
    heads = b * num_heads * count
    out = attend(regions.reshape(heads, 1, regions.shape[3], d), keys.reshape(heads, 1, keys.shape[3], d),
                 values.reshape(heads, 1, keys.shape[3], d), scale,
                 None if not pool_sizes else bias.reshape(1, 1, 1, -1))
    out = _unregions(out.reshape(b, num_heads, count, regions.shape[3], d), height, width, region_size)
    if prefix_tokens:
        prefix_out = attend(prefix_q, kh, _polynomial_values(vh, poly_a, poly_b), scale)
        out = torch.cat([merge_heads(prefix_out), out], dim=1)
    return downcast(out, dtype)


class MultiSpotAttention(nn.Module):
    """Multi-Spot attention module (softmax mode): qkv Linear -> multi-spot core -> proj.

    ``MultiSpotAttention(dim, num_heads, region_size=7, topk=49, pool_levels=((2, 16), (7, None)),
    polynomial_v=False, qkv_bias=True, scale=None)``.
    ``pool_levels``: (p_m, k_m) per pooled level (k_m None = every pooled token, the "global" level); H and W
    must be multiples of region_size and of every p_m. Parameters: ``qkv`` (Linear C -> 3C, [q | k | v]),
    ``log_ratios`` (one learnable log p_hat_m per level, initialised to log p_m^2), optional ``poly_a``,
    ``poly_b`` (initialised 0 so the layer starts as plain attention), ``proj``.
    ``forward(x: (B, N, C), hw: (H, W)) -> (B, N, C)``.
    """

    def __init__(self, dim, num_heads, region_size=7, topk=49, pool_levels=((2, 16), (7, None)), polynomial_v=False,
                 qkv_bias=True, scale=None):
        super().__init__()
        require(dim % num_heads == 0, "dim={} is not divisible by num_heads={}", dim, num_heads)
        self.dim = dim
        self.num_heads = num_heads
        self.region_size = region_size
        self.topk = topk
        self.pool_sizes = tuple(p for p, _ in pool_levels)
        self.pool_topk = tuple(kt for _, kt in pool_levels)
        self.scale = scale
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.log_ratios = nn.Parameter(torch.tensor([math.log(p * p) for p in self.pool_sizes], dtype=torch.float32))
        self.poly_a = nn.Parameter(torch.zeros(())) if polynomial_v else None
        self.poly_b = nn.Parameter(torch.zeros(())) if polynomial_v else None
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, hw):
        height, width = hw
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        out = multi_spot_attention(q, k, v, num_heads=self.num_heads, height=height, width=width,
                                   region_size=self.region_size, topk=min(self.topk, x.shape[1]),
                                   pool_sizes=self.pool_sizes, pool_topk=self.pool_topk, log_ratios=self.log_ratios,
                                   poly_a=self.poly_a, poly_b=self.poly_b, scale=self.scale)
        return self.proj(out)
