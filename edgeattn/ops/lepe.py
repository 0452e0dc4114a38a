"""LePE: the locally enhanced positional encoding of CSWin, a depthwise conv on V added to the attention output.

CSWin (Dong et al., CVPR 2022, Sec. 3.3): Attention(Q, K, V) = softmax(QK^T/sqrt(d)) V + L(V) with L a 3x3
depthwise conv (``get_v = Conv2d(C, C, 3, padding=1, groups=C)`` with bias); in the project's paper set it is
the L(.) of ELFATT Eq. 16/17, applied to the full map for the global head and inside each window for the block
head (CSWin's ``get_lepe`` convolves the already-windowed V, so zero padding applies at window borders too). The
window form is this same function applied to the windows as a
batch (see :mod:`edgeattn.ops.windows`).
"""
import torch.nn as nn
import torch.nn.functional as F

from ._common import check_map, downcast, image_to_tokens, require, tokens_to_image, upcast


def lepe(v, height, width, weight, bias=None):
    """Depthwise k x k conv of the token map ``v`` (zero padding at the border): (B, N, C) -> (B, N, C).

    ``weight`` is (C, 1, k, k) with odd k, ``bias`` (C,) or None.
    FP16 hazard: none beyond a k*k-term sum per output; half inputs are computed in FP32 and cast back.
    """
    channels = v.shape[-1]
    require(weight.dim() == 4 and weight.shape[0] == channels and weight.shape[1] == 1,
            "LePE weight must be ({}, 1, k, k), got {}", channels, tuple(weight.shape))
    require(weight.shape[2] % 2 == 1 and weight.shape[2] == weight.shape[3],
            "LePE kernel must be square and odd, got {}", tuple(weight.shape[2:]))
    require(bias is None or tuple(bias.shape) == (channels,), "LePE bias must be ({},), got {}", channels,
            None if bias is None else tuple(bias.shape))
    dtype = v.dtype
    (v,) = upcast(v)
    weight = weight if weight.dtype == v.dtype else weight.to(v.dtype)
    bias = bias if bias is None or bias.dtype == v.dtype else bias.to(v.dtype)
    out = F.conv2d(tokens_to_image(v, height, width), weight, bias, padding=weight.shape[2] // 2, groups=channels)
    return downcast(image_to_tokens(out), dtype)


class TokenAttention(nn.Module):
    """The skeleton shared by the single-core token attention blocks (softmax, EFFATT, blockify):
    ``qkv`` Linear (C -> 3C, laid out [q | k | v]) -> ``attend(q, k, v, height, width)`` -> plus LePE
    ``get_v`` (3x3 depthwise conv with bias) on the full map -> ``proj``. A core that applies LePE itself (inside
    windows) sets ``full_map_lepe = False`` and reads ``get_v``. ``forward(x: (B, N, C), hw: (H, W))``.
    """

    full_map_lepe = True

    def __init__(self, dim, num_heads, qkv_bias=True, lepe=False):
        super().__init__()
        require(dim % num_heads == 0, "dim={} is not divisible by num_heads={}", dim, num_heads)
        self.dim = dim
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.get_v = nn.Conv2d(dim, dim, 3, padding=1, groups=dim) if lepe else None
        self.proj = nn.Linear(dim, dim)

    def attend(self, q, k, v, height, width):
        raise NotImplementedError

    def forward(self, x, hw):
        height, width = hw
        check_map(x.shape[1], height, width)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        out = self.attend(q, k, v, height, width)
        if self.get_v is not None and self.full_map_lepe:
            out = out + lepe(v, height, width, self.get_v.weight, self.get_v.bias)
        return self.proj(out)
