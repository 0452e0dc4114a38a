"""SOFT / SOFT++: softmax-free Gaussian-kernel Nystrom attention with a Newton-Raphson pseudo-inverse.

Op contract: ``export/schemas/EdgeAttnSoftKernelAttention.yaml`` (custom op
``torch.ops.edgeattn.soft_kernel_attention``). Source: Lu et al., "Softmax-free Linear Transformers" (IJCV,
arXiv 2207.03341v3): Gaussian kernel Eq. 4/5 with tied Q = K, Nystrom factors Eq. 8, SOFT
Eq. 9, Newton-Raphson Eq. 10 (Algorithm 2), symmetric normalisation (SOFT++) Eq. 17; architecture details
from the official code (github.com/fudan-zvg/SOFT).
"""
import torch
import torch.nn as nn

from ._common import (check_map, check_tokens, differentiate_by_reference, downcast, merge_heads, require, split_heads,
                      upcast)
from .config import plugin_ops_enabled
from .lepe import lepe


def newton_pinv(A, iters):
    """Moore-Penrose inverse of each (..., m, m) matrix by Newton-Raphson with a fixed iteration count.

    X_0 = A / max_rowsum(A)^2 (per matrix: the max absolute row sum, i.e. ||A||_inf = ||A||_1 for the symmetric
    non-negative kernel matrices here; no batch-wide statistic), X_{t+1} = 2 X_t - X_t A X_t for t < iters
    (SOFT Eq. 10 / Algorithm 2 with step alpha = 1 / ||A||_1^2, which keeps ||I - alpha A^2|| < 1 so the iteration
    converges monotonically, Proposition 2; no data-dependent loop, so it exports as 2 * iters MatMuls).
    FP16 hazard: the iteration stalls at FP16 precision times cond(A); half inputs are iterated in FP32.
    Returns the inverse in A's dtype.
    """
    require(A.dim() >= 2 and A.shape[-1] == A.shape[-2], "newton_pinv needs square matrices, got {}", tuple(A.shape))
    require(iters >= 0, "newton_iters must be >= 0, got {}", iters)
    dtype = A.dtype
    (A,) = upcast(A)
    norm = A.abs().sum(dim=-1).amax(dim=-1)[..., None, None]
    X = A / (norm * norm)
    for _ in range(int(iters)):
        X = 2 * X - torch.matmul(torch.matmul(X, A), X)
    return downcast(X, dtype)


def gaussian_kernel(x, y):
    """exp(-max(0, |x_i|^2 + |y_j|^2 - 2 x_i . y_j) / 2) for (..., M, d) x and (..., N, d) y -> (..., M, N).

    The squared distance is clamped at 0 so that cancellation can never give entries above 1.
    """
    sq = (x * x).sum(-1)[..., :, None] + (y * y).sum(-1)[..., None, :] - 2 * torch.matmul(x, y.transpose(-1, -2))
    return torch.exp(-0.5 * torch.clamp(sq, min=0.0))


def soft_kernel_attention(q, landmarks, v, *, num_heads, newton_iters=20, symmetric_norm=True):
    """SOFT / SOFT++ attention core: out = P^T (M (P v)) per batch and head.

    Shapes: q (B, N, C) already scaled by d ** -0.25 (so exp(-|x - y|^2 / 2) is the paper's
    exp(-|q - k|^2 / (2 sqrt(d)))), landmarks (B, M, C) (sampled tokens, same channel layout), v (B, N, C);
    C = num_heads * d, channel c -> head c // d; returns (B, N, C).
    Equation: P = exp(l (-) q) (M x N), A = exp(l (-) l) (M x M) (SOFT Eq. 8, tied Q = K), X = NR-pinv(A)
    (Eq. 10, :func:`newton_pinv`), M = X (SOFT, Eq. 9) or diag(s) X diag(s) with s = rowsum(A) ** -0.5
    (SOFT++, Eq. 17), out = P^T (M (P v)) computed right-to-left so no N x N matrix exists.
    FP16 hazards: |x|^2 + |y|^2 - 2 x.y cancels (clamped at 0), A is ill-conditioned (||A^+|| = O(m^2)), and
    P v sums N unnormalised weights (reaches 6e4 at N = 3136, |v| = 20); everything runs in FP32 for half
    inputs and the result is cast back once.
    """
    check_tokens("q", q, num_heads)
    check_tokens("landmarks", landmarks, num_heads)
    require(tuple(v.shape) == tuple(q.shape), "v has shape {} but q has shape {}", tuple(v.shape), tuple(q.shape))
    require(landmarks.shape[0] == q.shape[0] and landmarks.shape[2] == q.shape[2],
            "landmarks must be (B={}, M, C={}), got {}", q.shape[0], q.shape[2], tuple(landmarks.shape))
    dtype = q.dtype
    q, landmarks, v = upcast(q, landmarks, v)
    qh, lh, vh = (split_heads(t, num_heads) for t in (q, landmarks, v))
    P = gaussian_kernel(lh, qh)
    A = gaussian_kernel(lh, lh)
    M = newton_pinv(A, newton_iters)
    if symmetric_norm:
        s = torch.rsqrt(A.sum(dim=-1))
        M = s[..., :, None] * M * s[..., None, :]
    out = torch.matmul(P.transpose(-1, -2), torch.matmul(M, torch.matmul(P, vh)))
    return downcast(merge_heads(out), dtype)


def _soft_kernel_attention_reference(q: torch.Tensor, landmarks: torch.Tensor, v: torch.Tensor, num_heads: int,
                                     newton_iters: int, symmetric_norm: int) -> torch.Tensor:
    """``torch.ops.edgeattn.soft_kernel_attention``: EdgeAttnSoftKernelAttention v1."""
    return soft_kernel_attention(q, landmarks, v, num_heads=num_heads, newton_iters=newton_iters,
                                 symmetric_norm=bool(symmetric_norm))


soft_kernel_attention_op = torch.library.custom_op("edgeattn::soft_kernel_attention", _soft_kernel_attention_reference,
                                                   mutates_args=())
differentiate_by_reference(soft_kernel_attention_op, _soft_kernel_attention_reference)


@soft_kernel_attention_op.register_fake
def _soft_kernel_attention_fake(q, landmarks, v, num_heads, newton_iters, symmetric_norm):
    return torch.empty_like(q)


def run_soft_kernel_attention(q, landmarks, v, *, num_heads, newton_iters=20, symmetric_norm=True):
    """:func:`soft_kernel_attention`, or the custom op while :func:`edgeattn.ops.config.use_plugin_ops` is on."""
    if plugin_ops_enabled():
        return torch.ops.edgeattn.soft_kernel_attention(q.contiguous(), landmarks.contiguous(), v.contiguous(),
                                                        num_heads, int(newton_iters),
                                                        int(bool(symmetric_norm)))
    return soft_kernel_attention(q, landmarks, v, num_heads=num_heads, newton_iters=newton_iters,
                                 symmetric_norm=symmetric_norm)


class SOFTAttention(nn.Module):
    """SOFT / SOFT++ attention module: tied Q = K projection, conv landmark sampler, NR Nystrom core, dwconv on V.

    ``SOFTAttention(dim, num_heads, sampling_ratio, newton_iters=20, symmetric_norm=True, dwconv_kernel=3,
    qkv_bias=True)``.
    Layers (official code structure): ``W_q`` (Linear, Q = K, scaled by d ** -0.25 after projection), ``W_v``
    (Linear), landmark sampler ``landmark_conv`` = Conv2d(d, d, r, stride r, no bias) shared across heads
    (applied to the (B*heads, d, H, W) map of the scaled Q) -> ``landmark_norm`` = LayerNorm(d) -> GELU, giving
    floor(H/r) * floor(W/r) landmarks (r = ``sampling_ratio``; 8/4/2 in SOFT stages 1-3 at 224^2);
    ``dwconv`` = Conv2d(heads, heads, k, groups=heads, no bias): one k x k filter per head shared over its d
    channels, applied to V and added to the attention output (k = 9/5/3 in the code; None disables it);
    ``proj`` (Linear). ``symmetric_norm=True`` is SOFT++ (Eq. 17), False is SOFT (Eq. 9).
    ``forward(x: (B, N, C), hw: (H, W)) -> (B, N, C)``.
    """

    def __init__(self, dim, num_heads, sampling_ratio, newton_iters=20, symmetric_norm=True, dwconv_kernel=3,
                 qkv_bias=True):
        super().__init__()
        require(dim % num_heads == 0, "dim={} is not divisible by num_heads={}", dim, num_heads)
        require(sampling_ratio >= 1, "sampling_ratio must be >= 1, got {}", sampling_ratio)
        require(dwconv_kernel is None or dwconv_kernel % 2 == 1, "dwconv_kernel must be odd, got {}", dwconv_kernel)
        self.dim = dim
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.sampling_ratio = sampling_ratio
        self.newton_iters = newton_iters
        self.symmetric_norm = symmetric_norm
        self.W_q = nn.Linear(dim, dim, bias=qkv_bias)
        self.W_v = nn.Linear(dim, dim, bias=qkv_bias)
        self.landmark_conv = nn.Conv2d(self.head_dim, self.head_dim, sampling_ratio, stride=sampling_ratio, bias=False)
        self.landmark_norm = nn.LayerNorm(self.head_dim)
        self.dwconv = None
        if dwconv_kernel:
            self.dwconv = nn.Conv2d(num_heads, num_heads, dwconv_kernel, padding=dwconv_kernel // 2,
                                    groups=num_heads, bias=False)
        self.proj = nn.Linear(dim, dim)

    def landmarks(self, q, hw):
        """Conv + LayerNorm + GELU landmarks of the scaled q (B, N, C) -> (B, M, C)."""
        height, width = hw
        b, n, c = q.shape
        h, d = self.num_heads, self.head_dim
        require(height >= self.sampling_ratio and width >= self.sampling_ratio,
                "SOFT: a {}x{} map is smaller than sampling_ratio={}", height, width, self.sampling_ratio)
        image = q.reshape(b, height, width, h, d).permute(0, 3, 4, 1, 2).reshape(b * h, d, height, width)
        sampled = self.landmark_conv(image)  # (B*h, d, H/r, W/r)
        sampled = sampled.reshape(b, h, d, -1).permute(0, 3, 1, 2)  # (B, M, h, d)
        sampled = nn.functional.gelu(self.landmark_norm(sampled))
        return sampled.reshape(b, -1, c)

    def forward(self, x, hw):
        height, width = hw
        check_map(x.shape[1], height, width)
        q = self.W_q(x) * self.head_dim ** -0.25
        v = self.W_v(x)
        out = run_soft_kernel_attention(q, self.landmarks(q, hw), v, num_heads=self.num_heads,
                                        newton_iters=self.newton_iters, symmetric_norm=self.symmetric_norm)
        if self.dwconv is not None:
            weight = self.dwconv.weight.repeat_interleave(self.head_dim, dim=0)  # (C, 1, k, k): head filter per channel
            out = out + lepe(v, height, width, weight)
        return self.proj(out)
