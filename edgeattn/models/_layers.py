"""Non-attention building blocks shared by the model families: MLPs, transformer blocks, conv stems and
downsamplers, EfficientViT's MBConv/DSConv, and the input-resolution checks.

Attention itself always comes from :mod:`edgeattn.ops`; nothing here computes attention.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..errors import EdgeAttnError


# --------------------------------------------------------------------------------------------------------------
# Resolution bookkeeping
# --------------------------------------------------------------------------------------------------------------

def conv_out(size, kernel, stride, padding):
    """Output length of a convolution along one axis (PyTorch's floor rule)."""
    return (size + 2 * padding - kernel) // stride + 1


def check_image(arch, x, expected_channels=3):
    """Reject anything but a (B, 3, H, W) float image batch with one clear line."""
    if x.dim() != 4 or x.shape[1] != expected_channels:
        raise EdgeAttnError(
            "{} expects images shaped (B, {}, H, W), got {}".format(arch, expected_channels, tuple(x.shape)))
    return int(x.shape[2]), int(x.shape[3])


def check_divisible(arch, stage, hw, size, what, hint, detail=""):
    """A stage's H x W map must tile exactly into ``size``-wide windows or stripes."""
    height, width = hw
    if size <= 0 or height % size or width % size:
        raise EdgeAttnError("{}: stage {} map {}x{} is not divisible by its {} {}{}; {}".format(
            arch, stage, height, width, what, size, detail, hint))


# --------------------------------------------------------------------------------------------------------------
# Token blocks
# --------------------------------------------------------------------------------------------------------------

class Mlp(nn.Module):
    """Two-layer feed-forward network: Linear -> activation -> Linear (biases on both)."""

    def __init__(self, dim, hidden_dim, act_layer=nn.GELU):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.act = act_layer()
        self.fc2 = nn.Linear(hidden_dim, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class PreNormBlock(nn.Module):
    """Pre-LN transformer block around an edgeattn.ops token attention module:
    ``x + attn(LN(x), hw)`` then ``x + mlp(LN(x))``."""

    def __init__(self, dim, attn, mlp_ratio=4.0, norm_eps=1e-5, act_layer=nn.GELU):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        self.attn = attn
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps)
        self.mlp = Mlp(dim, int(round(dim * mlp_ratio)), act_layer)

    def forward(self, x, hw):
        x = x + self.attn(self.norm1(x), hw)
        return x + self.mlp(self.norm2(x))


class PostNormBlock(nn.Module):
    """Post-LN transformer block (SOFT's released block): ``LN(x + attn(x, hw))`` then ``LN(x + mlp(x))``."""

    def __init__(self, dim, attn, mlp_ratio=4.0, norm_eps=1e-5, act_layer=nn.GELU):
        super().__init__()
        self.attn = attn
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        self.mlp = Mlp(dim, int(round(dim * mlp_ratio)), act_layer)
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps)

    def forward(self, x, hw):
        x = self.norm1(x + self.attn(x, hw))
        return self.norm2(x + self.mlp(x))


def tokens_to_map(x, hw):
    """(B, H*W, C) -> (B, C, H, W)."""
    return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], hw[0], hw[1])


def map_to_tokens(x):
    """(B, C, H, W) -> (B, H*W, C)."""
    return x.flatten(2).transpose(1, 2)


class ConvTokenEmbed(nn.Module):
    """Conv2d then LayerNorm over channels, returning tokens: CSWin's stem (k7 s4) and Merge_Block (k3 s2)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding)
        self.norm = nn.LayerNorm(out_channels)

    def forward(self, x):
        x = self.conv(x)
        hw = (int(x.shape[2]), int(x.shape[3]))
        return self.norm(map_to_tokens(x)), hw


def sinusoid_table(num_positions, dim):
    """The fixed sinusoidal position table of "Attention is all you need" (used by T2T-ViT), (1, P, dim)."""
    position = torch.arange(num_positions, dtype=torch.float64).unsqueeze(1)
    index = torch.arange(dim, dtype=torch.float64).unsqueeze(0)
    angle = position / torch.pow(10000.0, 2 * torch.div(index, 2, rounding_mode="floor") / dim)
    table = torch.where(index.long() % 2 == 0, torch.sin(angle), torch.cos(angle))
    return table.float().unsqueeze(0)


def resize_pos_embed(pos_embed, old_hw, new_hw):
    """Bilinearly resize a (1, H*W, C) grid position embedding to another grid (as SOFT's released code does)."""
    if tuple(old_hw) == tuple(new_hw):
        return pos_embed
    grid = pos_embed.reshape(1, old_hw[0], old_hw[1], -1).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=tuple(new_hw), mode="bilinear", align_corners=False)
    return grid.flatten(2).transpose(1, 2)


# --------------------------------------------------------------------------------------------------------------
# Convolutional blocks (EfficientViT, SOFT stem)
# --------------------------------------------------------------------------------------------------------------

def _activation(name):
    if name is None:
        return None
    return {"hswish": nn.Hardswish, "relu": nn.ReLU, "relu6": nn.ReLU6, "gelu": nn.GELU}[name]()


class ConvNormAct(nn.Module):
    """Conv2d ('same' padding for odd kernels) -> optional BatchNorm2d -> optional activation."""

    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, groups=1, bias=False, norm=True,
                 act=None):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, kernel_size // 2, groups=groups,
                              bias=bias)
        self.norm = nn.BatchNorm2d(out_channels) if norm else None
        self.act = _activation(act)

    def forward(self, x):
        x = self.conv(x)
        if self.norm is not None:
            x = self.norm(x)
        if self.act is not None:
            x = self.act(x)
        return x


class DSConv(nn.Module):
    """EfficientViT depthwise-separable conv: depthwise k3 (BN, act) -> pointwise 1x1 (BN, no act)."""

    def __init__(self, in_channels, out_channels, stride=1, act="hswish"):
        super().__init__()
        self.depth_conv = ConvNormAct(in_channels, in_channels, 3, stride, groups=in_channels, act=act)
        self.point_conv = ConvNormAct(in_channels, out_channels, 1, act=None)

    def forward(self, x):
        return self.point_conv(self.depth_conv(x))


class MBConv(nn.Module):
    """EfficientViT inverted bottleneck: 1x1 expand -> depthwise k3 -> 1x1 project.

    ``fewer_norm=True`` is the variant used in the downsampling block of stages 3-4 and in EfficientViTBlock's
    local module: biases instead of BatchNorm on the first two convs, BatchNorm only after the projection.
    """

    def __init__(self, in_channels, out_channels, stride=1, expand_ratio=4, act="hswish", fewer_norm=False):
        super().__init__()
        mid = int(round(in_channels * expand_ratio))
        self.inverted_conv = ConvNormAct(in_channels, mid, 1, bias=fewer_norm, norm=not fewer_norm, act=act)
        self.depth_conv = ConvNormAct(mid, mid, 3, stride, groups=mid, bias=fewer_norm, norm=not fewer_norm,
                                      act=act)
        self.point_conv = ConvNormAct(mid, out_channels, 1, act=None)

    def forward(self, x):
        return self.point_conv(self.depth_conv(self.inverted_conv(x)))


class Residual(nn.Module):
    """``main(x) + x`` (EfficientViT's ResidualBlock with an identity shortcut)."""

    def __init__(self, main):
        super().__init__()
        self.main = main

    def forward(self, x):
        return self.main(x) + x


def init_weights(module):
    """timm-style init: normal (std 0.02) for Linear weights, zero biases, unit norms.

    timm's ``trunc_normal_(std=0.02)`` truncates at +-2 in absolute units, i.e. 100 standard deviations, so a plain
    normal draw is the same distribution at half the cost. Convolutions keep PyTorch's default
    (Kaiming-uniform). On the meta device (parameter counting) this is skipped: there is no storage to fill.
    """
    for m in module.modules():
        if isinstance(m, nn.Linear):
            if m.weight.device.type != "meta":
                nn.init.normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.LayerNorm, nn.BatchNorm2d)):
            if m.weight is not None and m.weight.device.type != "meta":
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)


def normal_param(*shape, std=0.02):
    """A parameter drawn from N(0, std^2) (position embeddings, class tokens), left empty on the meta device."""
    param = nn.Parameter(torch.zeros(*shape))
    if param.device.type != "meta":
        nn.init.normal_(param, std=std)
    return param
