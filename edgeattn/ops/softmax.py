"""Softmax multi-head attention: the GLOBAL baseline (Vaswani et al. 2017, Eq. 1; CSWin GLOBAL = idx -1 path).

``attend`` is the head-layout softmax-attention primitive shared by every softmax-based operator here (global,
CSWin stripes, blockify windows, Multi-Spot): ``torch.nn.functional.scaled_dot_product_attention`` in eager mode
(fused, max-subtracted, FP32 accumulation on CPU) and the explicit MatMul-Softmax-MatMul graph while exporting to
ONNX (SDPA has no ONNX symbolic below opset 14, and the explicit pattern is what TensorRT's MHA fusion matches).
Both compute softmax(q k^T * scale + bias) v.
"""
import torch
import torch.nn.functional as F

from ._common import (check_same_shape, check_tokens, downcast, exporting, merge_heads,
                      split_heads, upcast)
from .lepe import TokenAttention


def attend(q, k, v, scale, bias=None):
    """softmax(q k^T * scale + bias) v on head layout: q (..., Lq, d), k/v (..., Lk, d) -> (..., Lq, d).

    ``bias`` is an additive float mask broadcastable to (..., Lq, Lk) (-inf excludes a key; every row must keep
    at least one finite entry). Runs in the inputs' dtype: callers upcast half inputs first.
    """
    if bias is not None and bias.dim() < 2:
        bias = bias.reshape(1, -1)
    if exporting():
        scores = torch.matmul(q, k.transpose(-2, -1)) * scale
        if bias is not None:
            scores = scores + bias
        return torch.matmul(torch.softmax(scores, dim=-1), v)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)


def softmax_attention(q, k, v, *, num_heads, scale=None):
    """Multi-head softmax attention, token layout.

    Shapes: q, k, v (B, N, C), C = num_heads * d, channel c -> head c // d; returns (B, N, C).
    Equation: Attention(Q, K, V) = softmax(Q K^T / sqrt(d)) V per head (Vaswani et al. 2017, Eq. 1; Multi-Spot
    paper Eq. 1 in the project's paper set);
    ``scale`` overrides 1/sqrt(d).
    FP16 hazards: q k^T reaches |q||k| (overflows FP16 past 65504 for large activations) and the row sum of N
    exponentials loses precision past 2048 in FP16; both are FP32 here (half inputs are upcast), softmax
    subtracts the row max.
    """
    check_tokens("q", q, num_heads)
    check_same_shape("q", q, k=k, v=v)
    dtype = q.dtype
    q, k, v = upcast(q, k, v)
    d = q.shape[-1] // num_heads
    scale = d ** -0.5 if scale is None or scale <= 0 else float(scale)
    out = attend(split_heads(q, num_heads), split_heads(k, num_heads), split_heads(v, num_heads), scale)
    return downcast(merge_heads(out), dtype)


class MultiHeadSoftmaxAttention(TokenAttention):
    """Global multi-head softmax attention block core: qkv Linear -> softmax attention (+ full-map LePE) -> proj.

    ``MultiHeadSoftmaxAttention(dim, num_heads, qkv_bias=True, lepe=False, scale=None)``.
    With ``lepe=True`` this is CSWin's GLOBAL path (LePEAttention idx=-1: one branch, all heads, LePE = 3x3
    depthwise conv with bias on the full map, ``get_v``). Weight names follow CSWin: ``qkv`` (Linear C -> 3C,
    output laid out [q | k | v]), ``get_v``, ``proj``.
    ``forward(x: (B, N, C), hw: (H, W)) -> (B, N, C)``.
    """

    def __init__(self, dim, num_heads, qkv_bias=True, lepe=False, scale=None):
        super().__init__(dim, num_heads, qkv_bias=qkv_bias, lepe=lepe)
        self.scale = scale

    def attend(self, q, k, v, height, width):
        return softmax_attention(q, k, v, num_heads=self.num_heads, scale=self.scale)
