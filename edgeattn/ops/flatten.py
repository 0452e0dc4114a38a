"""FLatten: focused linear attention (Han et al., "FLatten Transformer: Vision Transformer using Focused Linear
Attention", ICCV 2023).

Linear attention with the focused kernel phi_p(x) = f_p(ReLU(x)), f_p(x) = (||x|| / ||x^p||) x^p (element-wise
power p, the "focusing factor"): f_p keeps the norm of its argument and turns its direction towards the nearest
axes, so similar query-key pairs get sharper weights than with plain ReLU features. The output adds a depthwise
k x k conv of V (the "rank restoration" DWC, one kernel shared by all heads). Mirrors
``LeapLabTHU/FLatten-Transformer`` ``flatten_swin.py`` / ``flatten_cswin.py`` ``FocusedLinearAttention``, including
its numerics: a learned per-channel positional encoding added to K, features ReLU(x) + 1e-6 divided by a learned
per-channel softplus(scale), the norms taken over all C channels before the head split, and the row normaliser
1 / (phi(q) . mean_j phi(k_j) + 1e-6) with the context K^T V / N.

Everything is standard ONNX (Relu, Softplus, ReduceL2, Pow, MatMul, ReduceMean): no plugin (plugins/README.md).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from ._common import (check_map, check_same_shape, check_tokens, downcast, merge_heads, require, split_heads,
                      upcast)
from .lepe import lepe

#: the official code's feature offset (ReLU(x) + 1e-6) and normaliser eps
FLATTEN_EPS = 1e-6


def focusing_function(x, focusing_factor):
    """f_p(x) = (||x|| / ||x^p||) x^p over the last dim, for x >= 0 (FLatten Eq. 6/7); keeps ||x||."""
    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    powered = x ** focusing_factor
    return powered / torch.linalg.vector_norm(powered, dim=-1, keepdim=True) * norm


def focused_features(x, focusing_factor, scale=None, eps=FLATTEN_EPS):
    """phi_p(x) = f_p((ReLU(x) + eps) / scale) over the channel dim; ``scale`` (positive, broadcastable) or None."""
    x = F.relu(x) + eps
    if scale is not None:
        x = x / scale
    return focusing_function(x, focusing_factor)


def focused_linear_attention(q, k, v, *, num_heads, focusing_factor=3, scale=None, positional_encoding=None,
                             eps=FLATTEN_EPS):
    """FLatten attention core (without qkv, DWC/LePE and the output projection).

    Shapes: q, k, v (B, N, C), C = num_heads * d; ``scale`` (C,) or broadcastable positive per-channel divisor
    (the module passes softplus of its parameter), ``positional_encoding`` (1, N, C) added to k. Returns (B, N, C).
    Equation (FLatten Eq. 5-7, official normalisation): with phi = :func:`focused_features` over the C channels,
    per head
        O_i = phi(q_i) (sum_j phi(k_j)^T v_j / N) / (phi(q_i) . mean_j phi(k_j) + eps)
    which is the row-normalised kernel attention sum_j (phi(q_i).phi(k_j)) v_j / (sum_j phi(q_i).phi(k_j) + N eps).
    FP16 hazards: x^p (p = 3) overflows FP16 once x > 40 and the N-term context wants FP32; half inputs are
    computed in FP32 and cast back once.
    """
    check_tokens("q", q, num_heads)
    check_same_shape("q", q, k=k, v=v)
    require(focusing_factor > 0, "focusing_factor must be > 0, got {}", focusing_factor)
    n = q.shape[1]
    dtype = q.dtype
    q, k, v = upcast(q, k, v)
    if positional_encoding is not None:
        require(positional_encoding.shape[-2] == n, "positional_encoding covers {} tokens, the input has {}",
                positional_encoding.shape[-2], n)
        k = k + positional_encoding.to(k.dtype)
    if scale is not None:
        scale = scale.to(q.dtype)
    qh = split_heads(focused_features(q, focusing_factor, scale, eps), num_heads)
    kh = split_heads(focused_features(k, focusing_factor, scale, eps), num_heads)
    vh = split_heads(v, num_heads)
    normaliser = 1.0 / (torch.matmul(qh, kh.mean(dim=-2, keepdim=True).transpose(-2, -1)) + eps)  # (B, h, N, 1)
    context = torch.matmul(kh.transpose(-2, -1), vh) / n                                         # (B, h, d, d)
    out = torch.matmul(qh, context) * normaliser
    return downcast(merge_heads(out), dtype)


def head_shared_dwc(v, height, width, num_heads, weight, bias):
    """The DWC of FLatten: one depthwise k x k conv (d channels) applied to every head's (H, W, d) value map."""
    b, n, c = v.shape
    d = c // num_heads
    heads = v.reshape(b, height, width, num_heads, d).permute(0, 3, 4, 1, 2).reshape(b * num_heads, d, height,
                                                                                      width)
    out = F.conv2d(heads, weight.to(v.dtype), None if bias is None else bias.to(v.dtype),
                   padding=weight.shape[-1] // 2, groups=d)
    return out.reshape(b, c, n).transpose(1, 2)


class FocusedLinearAttention(nn.Module):
    """FLatten block core over a whole H x W map: qkv -> focused linear attention + DWC (+ LePE) -> proj.

    ``FocusedLinearAttention(dim, num_heads, resolution, focusing_factor=3, kernel_size=5, lepe=False,
    qkv_bias=True)``; ``resolution`` (H, W) fixes the length of the positional encoding (official: the window,
    here the full stage map); another map is rejected. Parameters (official names): ``qkv`` (Linear C -> 3C),
    ``scale`` (1, 1, C; used as softplus(scale)), ``positional_encoding`` (1, H*W, C), ``dwc`` (depthwise
    k x k over d channels, shared by the heads), ``get_v`` (CSWin variant only: LePE 3x3 depthwise over C),
    ``proj``. ``forward(x: (B, N, C), hw: (H, W)) -> (B, N, C)``.
    """

    def __init__(self, dim, num_heads, resolution, focusing_factor=3, kernel_size=5, lepe=False, qkv_bias=True):
        super().__init__()
        require(dim % num_heads == 0, "dim={} is not divisible by num_heads={}", dim, num_heads)
        require(kernel_size % 2 == 1, "the DWC kernel must be odd, got {}", kernel_size)
        height, width = resolution
        head_dim = dim // num_heads
        self.dim = dim
        self.num_heads = num_heads
        self.resolution = (int(height), int(width))
        self.focusing_factor = focusing_factor
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.scale = nn.Parameter(torch.zeros(1, 1, dim))
        self.positional_encoding = nn.Parameter(torch.zeros(1, height * width, dim))
        self.dwc = nn.Conv2d(head_dim, head_dim, kernel_size, padding=kernel_size // 2, groups=head_dim)
        self.get_v = nn.Conv2d(dim, dim, 3, padding=1, groups=dim) if lepe else None
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, hw):
        height, width = hw
        check_map(x.shape[1], height, width)
        require(tuple(hw) == self.resolution, "focused linear attention was built for a {}x{} map (its positional "
                "encoding is per position); got {}x{}", self.resolution[0], self.resolution[1], height, width)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        out = focused_linear_attention(q, k, v, num_heads=self.num_heads, focusing_factor=self.focusing_factor,
                                       scale=F.softplus(self.scale), positional_encoding=self.positional_encoding)
        out = out + head_shared_dwc(v, height, width, self.num_heads, self.dwc.weight, self.dwc.bias)
        if self.get_v is not None:
            out = out + lepe(v, height, width, self.get_v.weight, self.get_v.bias)
        return self.proj(out)
