"""FLuRKA: low-rank sequence compression (Linformer) followed by a kernel feature map (linear attention).

Source: Gupta et al., "FLuRKA: Fast and accurate unified Low-Rank & Kernel Attention" (arXiv 2306.15799),
Eq. 2: head_i = phi(Q W_i^Q) (phi((E1 K) W_i^K)^T ((E2 V) W_i^V)), with the row normalisation used in the proof of
Theorem 1. E1, E2 (d_k x N) act on the input before the
K/V projections, so they are shared across heads. Feature maps: "elu" (elu(x) + 1, the Linformer-RNN variant,
Katharopoulos et al. 2020) and "performer" (FAVOR+ positive random features, Choromanski et al. 2021, frozen
orthogonal Gaussian features with exact max stabilisers).
"""
import math

import torch
import torch.nn as nn

from ._common import check_eps, check_map, check_tokens, default_eps, downcast, merge_heads, require, split_heads, \
    upcast

FEATURE_MAPS = ("elu", "performer")


def compress_tokens(x, E):
    """Sequence-axis compression E x: (d_k, N) @ (B, N, C) -> (B, d_k, C), shared by all heads.

    FP16 hazard: an N-term sum whose variance grows like N / d_k; computed in FP32 for half inputs.
    """
    require(E.dim() == 2 and E.shape[1] == x.shape[1], "E must be (d_k, N={}), got {}", x.shape[1], tuple(E.shape))
    dtype = x.dtype
    x, E = upcast(x, E)
    return downcast(torch.matmul(E, x), dtype)


def elu_feature_map(x):
    """phi(x) = elu(x) + 1 > 0 (Katharopoulos et al. 2020, the "RNN" kernel of FLuRKA's Linformer-RNN)."""
    return torch.nn.functional.elu(x) + 1.0


def performer_logits(x, projection):
    """FAVOR+ exponents w x' - |x'|^2 / 2 with x' = x d ** -0.25: (..., T, d) -> (..., T, F).

    FAVOR+ positive random features (Choromanski et al. 2021, Lemma 1) are phi(x) = exp(logits) / sqrt(F) with
    ``projection`` (F, d) frozen Gaussian (orthogonal) rows, so E[phi(q)^T phi(k)] = exp(q^T k / sqrt(d)).
    """
    d = x.shape[-1]
    x = x * d ** -0.25
    return torch.matmul(x, projection.to(x.dtype).transpose(0, 1)) - 0.5 * (x * x).sum(dim=-1, keepdim=True)


def flurka_attention(q, k, v, *, num_heads, feature_map="elu", projection=None, eps=None):
    """FLuRKA kernel attention on compressed keys/values, row-normalised.

    Shapes: q (B, N, C) = X W^Q; k, v (B, M, C) = (E1 X) W^K, (E2 X) W^V (M = d_k compressed tokens, see
    :func:`compress_tokens`); C = num_heads * d; ``projection`` (F, d) for "performer". Returns (B, N, C).
    Equation (FLuRKA Eq. 2 + Theorem 1's normalisation): per head,
        out_i = phi(q_i)^T (sum_j phi(k_j) v_j^T) / (phi(q_i)^T sum_j phi(k_j) + eps).
    With E1 = E2 = I this is the plain kernel method (linear attention).
    FP16 hazards: exp in the Performer features overflows FP16 past 11 and underflows even FP32 for large |x|
    (exact max stabilisers below keep every exponent <= 0 and the denominator >= 1), the elu normaliser can be
    tiny (eps, FP32 division) and the E projection sums N terms; all FP32 for half inputs.
    ``eps`` None -> :func:`edgeattn.ops._common.default_eps` (1e-6 in FP32).
    """
    check_tokens("q", q, num_heads)
    check_tokens("k", k, num_heads)
    require(tuple(k.shape) == tuple(v.shape), "k and v must have the same shape, got {} and {}", tuple(k.shape),
            tuple(v.shape))
    require(k.shape[0] == q.shape[0] and k.shape[2] == q.shape[2], "k must be (B={}, M, C={}), got {}", q.shape[0],
            q.shape[2], tuple(k.shape))
    require(feature_map in FEATURE_MAPS, "feature_map must be one of {}, got {!r}", FEATURE_MAPS, feature_map)
    require(feature_map != "performer" or projection is not None, "the performer feature map needs a projection")
    dtype = q.dtype
    eps = check_eps(default_eps(dtype) if eps is None else eps, dtype)
    q, k, v = upcast(q, k, v)
    qh, kh, vh = (split_heads(t, num_heads) for t in (q, k, v))
    if feature_map == "elu":
        fq, fk = elu_feature_map(qh), elu_feature_map(kh)
    else:
        # Max stabilisers, exact: phi(q_i)^T phi(k_j) = exp(lq_if + lk_jf) summed over f. Keys are stabilised per
        # feature, fk = exp(lk - s_f) with s_f = max_j lk_jf, and s_f moves to the query side, fq = exp(lq + s - m_i)
        # with m_i = max_f (lq_if + s_f). The constants exp(m_i) / F cancel between numerator and denominator, every
        # exponent is <= 0 (no overflow) and the largest query feature meets a key column containing exp(0) = 1, so
        # the denominator is >= 1 and cannot underflow, even when FP32 could not represent phi itself.
        lk = performer_logits(kh, projection)
        shift = lk.amax(dim=-2, keepdim=True)
        fk = torch.exp(lk - shift)
        lq = performer_logits(qh, projection) + shift
        fq = torch.exp(lq - lq.amax(dim=-1, keepdim=True))
    kv = torch.matmul(fk.transpose(-1, -2), vh)  # (B, h, F, d)
    z = fk.sum(dim=-2).unsqueeze(-1)  # (B, h, F, 1)
    out = torch.matmul(fq, kv) / (torch.matmul(fq, z) + eps)
    return downcast(merge_heads(out), dtype)


def orthogonal_gaussian_features(num_features, dim, generator=None):
    """(F, d) random features: blocks of orthogonalised Gaussian rows, each row rescaled to a chi(d) norm
    (Performer's ``gaussian_orthogonal_random_matrix``), so every row is marginally N(0, I)."""
    blocks = []
    for _ in range(-(-num_features // dim)):
        gaussian = torch.randn(dim, dim, generator=generator, dtype=torch.float64)
        q, _ = torch.linalg.qr(gaussian)
        blocks.append(q.transpose(0, 1))
    rows = torch.cat(blocks, dim=0)[:num_features]
    norms = torch.randn(num_features, dim, generator=generator, dtype=torch.float64).norm(dim=1, keepdim=True)
    return (rows * norms).to(torch.float32)


class FLuRKAAttention(nn.Module):
    """FLuRKA attention module: E1/E2 sequence compression -> q/k/v projections -> kernel attention -> proj.

    ``FLuRKAAttention(dim, num_heads, num_tokens, rank, feature_map="elu", num_features=None, qkv_bias=True,
    eps=None, seed=0)``.
    ``E1``, ``E2``: learnable (rank, num_tokens) parameters initialised N(0, 1/rank) (Linformer); they fix N at
    construction (one model per resolution). ``W_q``, ``W_k``, ``W_v``, ``proj``: Linear(dim, dim).
    feature_map "performer" registers a frozen buffer ``projection`` (num_features, head_dim) drawn with
    ``seed`` (num_features defaults to int(d ln d), Performer's default); "elu" uses elu + 1.
    ``forward(x: (B, N, C), hw: (H, W)) -> (B, N, C)``.
    """

    def __init__(self, dim, num_heads, num_tokens, rank, feature_map="elu", num_features=None, qkv_bias=True,
                 eps=None, seed=0):
        super().__init__()
        require(dim % num_heads == 0, "dim={} is not divisible by num_heads={}", dim, num_heads)
        require(feature_map in FEATURE_MAPS, "feature_map must be one of {}, got {!r}", FEATURE_MAPS, feature_map)
        require(1 <= rank, "rank must be >= 1, got {}", rank)
        self.dim = dim
        self.num_heads = num_heads
        self.num_tokens = num_tokens
        self.feature_map = feature_map
        self.eps = eps
        head_dim = dim // num_heads
        self.E1 = nn.Parameter(torch.randn(rank, num_tokens) * rank ** -0.5)
        self.E2 = nn.Parameter(torch.randn(rank, num_tokens) * rank ** -0.5)
        self.W_q = nn.Linear(dim, dim, bias=qkv_bias)
        self.W_k = nn.Linear(dim, dim, bias=qkv_bias)
        self.W_v = nn.Linear(dim, dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        if feature_map == "performer":
            count = num_features or max(1, int(head_dim * math.log(head_dim)))
            generator = torch.Generator().manual_seed(seed)
            self.register_buffer("projection", orthogonal_gaussian_features(count, head_dim, generator))
        else:
            self.projection = None

    def forward(self, x, hw):
        check_map(x.shape[1], *hw)
        require(x.shape[1] == self.num_tokens, "FLuRKAAttention was built for N={} tokens, got {}", self.num_tokens,
                x.shape[1])
        k = self.W_k(compress_tokens(x, self.E1))
        v = self.W_v(compress_tokens(x, self.E2))
        out = flurka_attention(self.W_q(x), k, v, num_heads=self.num_heads, feature_map=self.feature_map,
                               projection=self.projection, eps=self.eps)
        return self.proj(out)
