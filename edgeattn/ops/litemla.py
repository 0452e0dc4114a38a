"""LiteMLA: EfficientViT's multi-scale ReLU linear attention, and QT-ViT's compact quadratic Taylor kernel.

Op contract: ``export/schemas/EdgeAttnLiteMLA.yaml`` (custom op ``torch.ops.edgeattn.lite_mla``). Sources:
EfficientViT (Cai et al., ICCV 2023) ``LiteMLA`` / ``relu_linear_att`` (mit-han-lab/efficientvit
``efficientvit/models/nn/ops.py``) and
the QT-ViT poster (Xu et al., NeurIPS 2024), final line of "Reduce the time complexity":
phi(x) = concat(alpha x*x, beta sqrt(4/d) x, gamma).
"""
from typing import List

import torch
import torch.nn as nn

from ._common import check_eps, differentiate_by_reference, downcast, exporting, require, upcast
from .config import plugin_ops_enabled

KERNELS = ("relu", "quadratic_taylor")
#: EfficientViT's eps; representable in the FP32 the core computes in (never materialised in FP16)
DEFAULT_EPS = 1.0e-15


def _per_group(values, groups, like):
    """alpha/beta/gamma as a (1, G or 1, 1, 1) tensor in ``like``'s dtype (list of floats or a tensor)."""
    tensor = values if torch.is_tensor(values) else torch.tensor([float(x) for x in values], dtype=torch.float64)
    tensor = tensor.to(device=like.device, dtype=like.dtype).reshape(-1)
    require(exporting() or tensor.numel() in (1, groups), "QT parameters need 1 or G={} entries, got {}", groups,
            tensor.numel())
    return tensor.reshape(1, -1, 1, 1)


def qt_feature_map(x, alpha, beta, gamma, head_dim):
    """QT-ViT compact feature map along dim 2: (B, G, d, N) -> (B, G, 2d + 1, N).

    phi(x) = [alpha * x*x, beta * sqrt(4/d) * x, gamma] so that
    <phi(q), phi(k)> = alpha^2 sum_i q_i^2 k_i^2 + (4 beta^2 / d) <q, k> + gamma^2.
    ``alpha``/``beta``/``gamma``: tensors broadcastable to (1, G, 1, 1).
    """
    b, g, _, n = x.shape
    const = (gamma * torch.ones(1, 1, 1, 1, dtype=x.dtype, device=x.device)).expand(b, g, 1, n)
    return torch.cat([alpha * x * x, (beta * (4.0 / head_dim) ** 0.5) * x, const], dim=2)


def lite_mla_attention(qkv, *, head_dim, kernel="relu", eps=None, qt_alpha=(1.0,), qt_beta=(1.0,), qt_gamma=(1.0,)):
    """LiteMLA linear attention core with EfficientViT's padded-V normalisation.

    Shapes: qkv (B, G*3*d, H, W) with each of the G head groups contiguous as [q (d) | k (d) | v (d)]
    (EfficientViT's per-head layout, multi-scale groups included); returns (B, G*d, H, W).
    Equation (linear attention, QT-ViT poster "Linear Self-Attention", EfficientViT relu_linear_att):
        num[n] = phi(q_n) (sum_m phi(k_m)^T v_m),  den[n] = phi(q_n) . sum_m phi(k_m),  out = num / (den + eps)
    computed as v_pad = [v; 1] (d+1 x N), vk = v_pad phi(K)^T, out = vk phi(Q), out[:d] / (out[d] + eps).
    kernel "relu": phi = max(x, 0); "quadratic_taylor": phi = :func:`qt_feature_map` with per-group or
    per-layer alpha, beta, gamma (lists of floats or tensors with 1 or G entries; tensors keep gradients).
    FP16 hazards: x*x doubles the exponent (overflow past |x| 256), the N-term sums grow with N, eps = 1e-15
    flushes to 0 in FP16, and the QT denominator can approach 0 or go negative when 4 beta^4 > d alpha^2 gamma^2
    (:meth:`LiteMLA.qt_positivity_margin`); feature maps, both reductions and the division run in FP32 here (half
    inputs upcast).
    """
    require(qkv.dim() == 4, "qkv must have shape (B, G*3*head_dim, H, W), got {}", tuple(qkv.shape))
    require(kernel in KERNELS, "kernel must be one of {}, got {!r}", KERNELS, kernel)
    b, channels, height, width = qkv.shape
    require(head_dim >= 1 and channels % (3 * head_dim) == 0, "qkv channels {} are not a multiple of 3*head_dim={}",
            channels, 3 * head_dim)
    dtype = qkv.dtype
    eps = check_eps(DEFAULT_EPS if eps is None else eps, dtype)
    (qkv,) = upcast(qkv)
    groups = channels // (3 * head_dim)
    n = height * width
    x = qkv.reshape(b, groups, 3 * head_dim, n)
    q, k, v = x[:, :, :head_dim], x[:, :, head_dim:2 * head_dim], x[:, :, 2 * head_dim:]
    if kernel == "relu":
        q, k = torch.relu(q), torch.relu(k)
    else:
        params = [_per_group(p, groups, qkv) for p in (qt_alpha, qt_beta, qt_gamma)]
        q, k = qt_feature_map(q, *params, head_dim), qt_feature_map(k, *params, head_dim)
    v_pad = torch.nn.functional.pad(v, (0, 0, 0, 1), value=1.0)
    vk = torch.matmul(v_pad, k.transpose(-1, -2))
    out = torch.matmul(vk, q)
    out = out[:, :, :head_dim] / (out[:, :, head_dim:] + eps)
    return downcast(out.reshape(b, groups * head_dim, height, width), dtype)


def _lite_mla_reference(qkv: torch.Tensor, head_dim: int, kernel: str, eps: float, qt_alpha: List[float],
                        qt_beta: List[float], qt_gamma: List[float]) -> torch.Tensor:
    """``torch.ops.edgeattn.lite_mla``: EdgeAttnLiteMLA v1."""
    return lite_mla_attention(qkv, head_dim=head_dim, kernel=kernel, eps=eps, qt_alpha=qt_alpha, qt_beta=qt_beta,
                              qt_gamma=qt_gamma)


lite_mla_op = torch.library.custom_op("edgeattn::lite_mla", _lite_mla_reference, mutates_args=())
differentiate_by_reference(lite_mla_op, _lite_mla_reference)


@lite_mla_op.register_fake
def _lite_mla_fake(qkv, head_dim, kernel, eps, qt_alpha, qt_beta, qt_gamma):
    b, channels, height, width = qkv.shape
    return qkv.new_empty(b, channels // 3, height, width)


def _floats(values):
    if torch.is_tensor(values):
        return [float(x) for x in values.detach().reshape(-1).tolist()]
    return [float(x) for x in values]


def run_lite_mla(qkv, *, head_dim, kernel="relu", eps=None, qt_alpha=(1.0,), qt_beta=(1.0,), qt_gamma=(1.0,)):
    """:func:`lite_mla_attention`, or the custom op while :func:`edgeattn.ops.config.use_plugin_ops` is on
    (the QT parameters then become constant float attributes)."""
    if plugin_ops_enabled():
        return torch.ops.edgeattn.lite_mla(qkv.contiguous(), head_dim, kernel, DEFAULT_EPS if eps is None else float(eps),
                                           _floats(qt_alpha), _floats(qt_beta), _floats(qt_gamma))
    return lite_mla_attention(qkv, head_dim=head_dim, kernel=kernel, eps=eps, qt_alpha=qt_alpha, qt_beta=qt_beta,
                              qt_gamma=qt_gamma)


class _ConvNorm(nn.Module):
    """EfficientViT's ConvLayer without activation: ``conv`` (+ ``norm`` BatchNorm2d), same parameter names."""

    def __init__(self, in_channels, out_channels, norm):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 1, bias=False)
        self.norm = nn.BatchNorm2d(out_channels) if norm else None

    def forward(self, x):
        x = self.conv(x)
        return x if self.norm is None else self.norm(x)


class LiteMLA(nn.Module):
    """EfficientViT LiteMLA (ReLU) or QT-ViT (quadratic Taylor) multi-scale linear attention module.

    ``LiteMLA(in_channels, out_channels, heads=None, heads_ratio=1.0, dim=8, scales=(5,), kernel="relu",
    qt_params="layer", eps=1e-15)``.
    heads defaults to int(in_channels // dim * heads_ratio); total_dim = heads * dim. Layers (EfficientViT names,
    so official checkpoints load): ``qkv`` = 1x1 conv in -> 3*total_dim (no bias, no norm); ``aggreg.<i>`` =
    Sequential(depthwise s x s conv, grouped 1x1 conv with 3*heads groups), no bias, one per scale, whose outputs
    are concatenated to qkv (doubling the head groups for one scale); ``proj`` = 1x1 conv
    (1 + len(scales)) * total_dim -> out_channels, no bias, + BatchNorm (``proj.norm``).
    kernel "quadratic_taylor" adds learnable ``qt_alpha``, ``qt_beta``, ``qt_gamma`` (initialised to 1), one set
    per layer (``qt_params="layer"``, shape (1,)) or one per head group (``"head"``, shape (G,),
    G = heads * (1 + len(scales))); they are shared by q and k so the kernel stays symmetric.
    ``forward(x: (B, C, H, W)) -> (B, out_channels, H, W)``.
    """

    def __init__(self, in_channels, out_channels, heads=None, heads_ratio=1.0, dim=8, scales=(5,), kernel="relu",
                 qt_params="layer", eps=DEFAULT_EPS):
        super().__init__()
        require(kernel in KERNELS, "kernel must be one of {}, got {!r}", KERNELS, kernel)
        require(qt_params in ("layer", "head"), "qt_params must be 'layer' or 'head', got {!r}", qt_params)
        heads = int(in_channels // dim * heads_ratio) if heads is None else heads
        require(heads >= 1, "LiteMLA needs at least one head (in_channels={}, dim={})", in_channels, dim)
        total_dim = heads * dim
        self.dim = dim
        self.heads = heads
        self.kernel = kernel
        self.eps = eps
        self.qkv = _ConvNorm(in_channels, 3 * total_dim, norm=False)
        self.aggreg = nn.ModuleList([
            nn.Sequential(
                nn.Conv2d(3 * total_dim, 3 * total_dim, scale, padding=scale // 2, groups=3 * total_dim, bias=False),
                nn.Conv2d(3 * total_dim, 3 * total_dim, 1, groups=3 * heads, bias=False))
            for scale in scales])
        self.proj = _ConvNorm(total_dim * (1 + len(scales)), out_channels, norm=True)
        if kernel == "quadratic_taylor":
            count = heads * (1 + len(scales)) if qt_params == "head" else 1
            self.qt_alpha = nn.Parameter(torch.ones(count))
            self.qt_beta = nn.Parameter(torch.ones(count))
            self.qt_gamma = nn.Parameter(torch.ones(count))

    def qt_positivity_margin(self):
        """min over groups of d*alpha^2*gamma^2 - 4*beta^4 (>= 0 guarantees a positive kernel).

        Why: split gamma^2 evenly over the d coordinates; each term of <phi(q), phi(k)> is then the quadratic
        alpha^2 t^2 + (4 beta^2 / d) t + gamma^2 / d in t = q_i k_i, positive for every t when its discriminant
        16 beta^4 / d^2 - 4 alpha^2 gamma^2 / d is negative, i.e. 4 beta^4 < d alpha^2 gamma^2."""
        require(self.kernel == "quadratic_taylor", "only the quadratic_taylor kernel has QT parameters")
        with torch.no_grad():
            return float((self.dim * self.qt_alpha ** 2 * self.qt_gamma ** 2 - 4 * self.qt_beta ** 4).min())

    def forward(self, x):
        qkv = self.qkv(x)
        qkv = torch.cat([qkv] + [op(qkv) for op in self.aggreg], dim=1)
        if self.kernel == "quadratic_taylor":
            out = run_lite_mla(qkv, head_dim=self.dim, kernel=self.kernel, eps=self.eps, qt_alpha=self.qt_alpha,
                               qt_beta=self.qt_beta, qt_gamma=self.qt_gamma)
        else:
            out = run_lite_mla(qkv, head_dim=self.dim, kernel=self.kernel, eps=self.eps)
        return self.proj(out)
