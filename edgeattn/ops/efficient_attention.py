"""EFFATT: the efficient-attention linear head (Shen et al., WACV 2021), the global head of ELFATT.

Op contract: ``export/schemas/EdgeAttnEfficientAttention.yaml`` (custom op
``torch.ops.edgeattn.efficient_attention``).
"""
import torch

from ._common import (check_same_shape, check_tokens, compute_dtype, differentiate_by_reference, downcast, grad_needed,
                      require, upcast)
from .config import plugin_ops_enabled
from .lepe import TokenAttention


def efficient_attention(q, k, v, *, num_heads, out=None):
    """EFFATT linear attention per head: softmax_features(q) @ (softmax_tokens(k)^T @ v).

    Shapes: q, k, v (B, N, C), C = num_heads * d, channel c -> head c // d; returns (B, N, C).
    Equation: efficient attention (Shen et al., WACV 2021) E(Q, K, V) = rho_q(Q) (rho_k(K)^T V) with softmax
    normalisation, rho_q over each token's d features, rho_k over the N tokens per feature (official code
    cmsflash/efficient-attention ``efficient_attention.py``: keys softmax over positions, queries over
    channels, no temperature); this is the global term of ELFATT Eq. 8/16 in its README-v2 normalised
    form softmax(Q) softmax(K)^T V, no temperature. The implied N x N matrix q_hat k_hat^T is row-stochastic.
    ``out`` (in the compute dtype): a (B, N, C) tensor or a channel slice of a larger buffer to write the result
    into (ELFATT uses it to skip a concat); it is returned. While a gradient is needed the product is computed
    and copied into ``out`` (autograd has no backward for matmul's ``out=`` form).
    FP16 hazards: the token-axis max/sum over N (ulp 2 past 2048 in FP16, exp overflow past 11) and the N-term
    context accumulation; all FP32 here (half inputs upcast), both softmaxes subtract their max.
    """
    check_tokens("q", q, num_heads)
    check_same_shape("q", q, k=k, v=v)
    b, n, c = q.shape
    d = c // num_heads
    require(out is None or (out.dtype == compute_dtype(q.dtype) and tuple(out.shape) == (b, n, c)),
            "out must be a ({}, {}, {}) {} tensor", b, n, c, compute_dtype(q.dtype))
    dtype = q.dtype
    q, k, v = upcast(q, k, v)
    # (B, N, h, d) views: both softmaxes run on them directly, the matmuls see (B, h, ., .) views
    q_hat = torch.softmax(q.reshape(b, n, num_heads, d), dim=-1).transpose(1, 2)  # (B, h, N, d)
    k_hat = torch.softmax(k.reshape(b, n, num_heads, d), dim=1).permute(0, 2, 3, 1)  # (B, h, d, N)
    context = torch.matmul(k_hat, v.reshape(b, n, num_heads, d).transpose(1, 2))  # (B, h, d, d)
    if out is not None:
        target = out.view(b, n, num_heads, d).transpose(1, 2)
        if grad_needed(q_hat, context):
            target.copy_(torch.matmul(q_hat, context))
        else:
            torch.matmul(q_hat, context, out=target)
        return out
    return downcast(torch.matmul(q_hat, context).transpose(1, 2).reshape(b, n, c), dtype)


def _efficient_attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``torch.ops.edgeattn.efficient_attention``: EdgeAttnEfficientAttention v1."""
    return efficient_attention(q, k, v, num_heads=num_heads)


efficient_attention_op = torch.library.custom_op("edgeattn::efficient_attention", _efficient_attention_reference,
                                                 mutates_args=())
differentiate_by_reference(efficient_attention_op, _efficient_attention_reference)


@efficient_attention_op.register_fake
def _efficient_attention_fake(q, k, v, num_heads):
    return torch.empty_like(q)


def run_efficient_attention(q, k, v, *, num_heads):
    """:func:`efficient_attention`, or the custom op while :func:`edgeattn.ops.config.use_plugin_ops` is on."""
    if plugin_ops_enabled():
        # the kernels read row-major tensors (q, k, v are often chunks of one qkv projection); no ONNX node
        return torch.ops.edgeattn.efficient_attention(q.contiguous(), k.contiguous(), v.contiguous(), num_heads)
    return efficient_attention(q, k, v, num_heads=num_heads)


class EfficientAttention(TokenAttention):
    """EFFATT block core: qkv Linear -> EFFATT per head (+ full-map LePE) -> proj.

    ``EfficientAttention(dim, num_heads, qkv_bias=True, lepe=True)``. This is ELFATT with c2 = 0
    (CSWin-T24181-EFFATT). Weight names: ``qkv`` (Linear C -> 3C, [q | k | v]), ``get_v`` (3x3 depthwise conv
    with bias on the full map), ``proj``. ``forward(x: (B, N, C), hw: (H, W)) -> (B, N, C)``.
    """

    def __init__(self, dim, num_heads, qkv_bias=True, lepe=True):
        super().__init__(dim, num_heads, qkv_bias=qkv_bias, lepe=lepe)

    def attend(self, q, k, v, height, width):
        return run_efficient_attention(q, k, v, num_heads=self.num_heads)
