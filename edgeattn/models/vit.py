"""Tiny plain ViTs for fast tests and quick exports: one with softmax attention, one with ELFATT.

Not paper models. Structure: ``Conv2d(3, C, p, stride p)`` patch embedding, a learned position embedding on the
token grid (bilinearly resized when the input differs from ``img_size``), ``depth`` pre-LN blocks (MLP 4x, GELU),
final LayerNorm, mean over tokens, Linear head. No class token, so every token sits on the 2-D grid the
window attention needs. Inputs must be a multiple of ``patch_size``.
"""
import torch.nn as nn

from ..errors import EdgeAttnError
from ..ops.elfatt import ELFATTAttention
from ..ops.softmax import MultiHeadSoftmaxAttention
from ._layers import PreNormBlock, check_divisible, check_image, init_weights, map_to_tokens, resize_pos_embed
from ._layers import normal_param
from ._registry import register_model


class TinyViT(nn.Module):
    """Patch embedding -> ``depth`` blocks built by ``make_attention(dim)`` -> LN -> mean -> head."""

    def __init__(self, arch, img_size, num_classes, embed_dim, depth, mlp_ratio, patch_size, make_attention,
                 window_size=None):
        super().__init__()
        self.arch = arch
        self.patch_size = patch_size
        self.window_size = window_size
        self.check_resolution(img_size, img_size)
        self.grid = (img_size // patch_size, img_size // patch_size)
        self.patch_embed = nn.Conv2d(3, embed_dim, patch_size, patch_size)
        self.pos_embed = normal_param(1, self.grid[0] * self.grid[1], embed_dim)
        self.blocks = nn.ModuleList(PreNormBlock(embed_dim, make_attention(embed_dim), mlp_ratio)
                                    for _ in range(depth))
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, num_classes)
        init_weights(self)

    def check_resolution(self, height, width):
        if height < self.patch_size or width < self.patch_size or height % self.patch_size or width % self.patch_size:
            raise EdgeAttnError("{}: input {}x{} is not a multiple of the patch size {}".format(
                self.arch, height, width, self.patch_size))
        if self.window_size is not None:
            check_divisible(self.arch, 1, (height // self.patch_size, width // self.patch_size), self.window_size,
                            "ELFATT window", "pass window_size with a side that divides the token map, or padding")

    def forward(self, x):
        height, width = check_image(self.arch, x)
        hw = (height // self.patch_size, width // self.patch_size)
        if hw != self.grid:
            self.check_resolution(height, width)
        x = map_to_tokens(self.patch_embed(x))
        x = x + resize_pos_embed(self.pos_embed, self.grid, hw)
        for block in self.blocks:
            x = block(x, hw)
        return self.head(self.norm(x).mean(dim=1))


def _check_common(arch, embed_dim, depth, num_heads, patch_size):
    for key, value in (("embed_dim", embed_dim), ("depth", depth), ("num_heads", num_heads),
                       ("patch_size", patch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise EdgeAttnError("{}: {} must be a positive integer, got {!r}".format(arch, key, value))
    if embed_dim % num_heads:
        raise EdgeAttnError("{}: embed_dim {} is not divisible by num_heads {}".format(arch, embed_dim, num_heads))


@register_model(family="vit")
def vit_tiny_softmax(img_size=224, num_classes=1000, *, embed_dim=64, depth=4, num_heads=2, mlp_ratio=4.0,
                     patch_size=16):
    """Tiny ViT with global softmax attention (4 blocks, width 64, 2 heads of 32, patch 16) for fast tests.

    Config: ``embed_dim``, ``depth``, ``num_heads``, ``mlp_ratio``, ``patch_size``.
    """
    arch = "vit_tiny_softmax"
    _check_common(arch, embed_dim, depth, num_heads, patch_size)
    model = TinyViT(arch, img_size, num_classes, embed_dim, depth, mlp_ratio, patch_size,
                    lambda dim: MultiHeadSoftmaxAttention(dim, num_heads, qkv_bias=True))
    model.edgeattn_config = {"embed_dim": embed_dim, "depth": depth, "num_heads": num_heads,
                             "mlp_ratio": mlp_ratio, "patch_size": patch_size}
    return model


@register_model(family="vit")
def vit_tiny_elfatt(img_size=224, num_classes=1000, *, embed_dim=64, depth=4, num_heads=2, mlp_ratio=4.0,
                    patch_size=16, window_size=None, global_ratio=0.5, padding="none"):
    """Tiny ViT with ELFATT attention (1 EFFATT + 1 blockify head, 7x7 windows at 224) for fast tests.

    Config: as vit_tiny_softmax plus ``window_size`` (block side; default half the token-map side: 7 at 224,
    12 at 384, 16 at 512), ``global_ratio`` (c1 / C), ``padding`` ("none" | "zeros" | "masked").
    """
    arch = "vit_tiny_elfatt"
    _check_common(arch, embed_dim, depth, num_heads, patch_size)
    if window_size is None:
        side = img_size // patch_size
        if side % 2:
            raise EdgeAttnError("{}: the {}x{} token map at {} is odd, so the default window (half the map) does "
                                "not exist; pass window_size".format(arch, side, side, img_size))
        resolved = side // 2
    else:
        resolved = window_size
    model = TinyViT(arch, img_size, num_classes, embed_dim, depth, mlp_ratio, patch_size,
                    lambda dim: ELFATTAttention(dim, num_heads=num_heads, global_ratio=global_ratio,
                                                window_size=resolved, padding=padding),
                    window_size=None if padding != "none" else resolved)
    model.edgeattn_config = {"embed_dim": embed_dim, "depth": depth, "num_heads": num_heads,
                             "mlp_ratio": mlp_ratio, "patch_size": patch_size, "window_size": window_size,
                             "global_ratio": global_ratio, "padding": padding}
    return model
