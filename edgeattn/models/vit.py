"""Plain ViTs: ViT-B/16 in timm's layout with the Multi-Spot substitution of the Multi-Spot paper's Table 1, and
tiny ViTs for fast tests and quick exports (one with softmax attention, one with ELFATT).

ViT-B/16 (``vit_base_patch16_384*``, Dosovitskiy et al. 2021) is timm's ``vit_base_patch16_384`` module for module,
so a timm state dict loads unchanged: ``patch_embed.proj`` (Conv2d 16x16 stride 16), ``cls_token``, ``pos_embed``
(1, 1 + grid^2, 768), 12 pre-LN blocks (LayerNorm eps 1e-6, ``attn.qkv``/``attn.proj``, MLP 3072 GELU),
``norm``, the class token's features -> ``head``. The attention of every block is :class:`ViTAttention`: plain
softmax attention ("ORIGIN"), or Multi-Spot attention (:func:`edgeattn.ops.multispot.multi_spot_attention`,
softmax mode) with the settings of the Multi-Spot paper's Table 1, applied to the trained weights without
retraining (it adds no parameters): the 576 patch queries of the 24 x 24 grid form 16 regions of 36 (6 x 6
windows); each region shares its top-k keys/values (k = 64 or 96, scored by the region's mean query against all
577 keys) and optionally all average-pooled keys/values of 4 x 4 ("S16": 36 tokens of 16) or 2 x 2 ("S4": 144
tokens of 4) groups, weighted by the number of tokens they stand for (bias log 16 / log 4, the paper's p_hat_m at
its natural value p_m). The class token's query attends to all 577 keys exactly (one row; the paper does not say
how it treats it). Normalisation runs over the selected set (the paper's "denominator correction").
:func:`logit_shift` measures how far a substitution moves the logits of the original model.

Tiny ViTs (not paper models). Structure: ``Conv2d(3, C, p, stride p)`` patch embedding, a learned position embedding
on the token grid (bilinearly resized when the input differs from ``img_size``), ``depth`` pre-LN blocks (MLP 4x,
GELU), final LayerNorm, mean over tokens, Linear head. No class token, so every token sits on the 2-D grid the
window attention needs. Inputs must be a multiple of ``patch_size``.
"""
import math

import torch
import torch.nn as nn

from ..errors import EdgeAttnError
from ..ops import check_tokens, require
from ..ops.elfatt import ELFATTAttention
from ..ops.multispot import multi_spot_attention
from ..ops.softmax import MultiHeadSoftmaxAttention, softmax_attention
from ._layers import PreNormBlock, check_divisible, check_image, init_weights, map_to_tokens, resize_pos_embed
from ._layers import normal_param
from ._registry import register_model

MULTISPOT_PAPER = "Multi-Spot Transformer (anonymous ICML submission) Table 1"


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


# --------------------------------------------------------------------------------------------------------------
# ViT-B/16 (timm layout) with the Multi-Spot substitution
# --------------------------------------------------------------------------------------------------------------
#: Table 1 rows: arch suffix -> (setting name in the paper, top-k, tokens per pooled token or None, top-1 %)
MULTISPOT_SETTINGS = {
    "ms_top64": ("P_S36_KVTOP64", 64, None, "73.9"),
    "ms_top64_s16": ("P_S36_KVTOP64_S16", 64, 16, "80.7"),
    "ms_top96_s16": ("P_S36_KVTOP96_S16", 96, 16, "81.9"),
    "ms_top96_s4": ("P_S36_KVTOP96_S4", 96, 4, "83.1"),
}
REGION_QUERIES = 36


class ViTAttention(nn.Module):
    """timm ViT attention (``qkv``, ``proj``) over a class token + a grid of patch tokens: softmax attention, or
    the Multi-Spot core when ``multispot`` = dict(region_size, topk, pool_side or None) is given.

    Multi-Spot adds no parameter (the pooled level's log ratio is a fixed buffer, log p_m), so a trained softmax
    ViT's weights drive it unchanged. ``forward(x: (B, 1 + H*W, C), hw: (H, W))``.
    """

    def __init__(self, dim, num_heads, multispot=None, prefix_tokens=1):
        super().__init__()
        require(dim % num_heads == 0, "dim={} is not divisible by num_heads={}", dim, num_heads)
        self.dim = dim
        self.num_heads = num_heads
        self.prefix_tokens = prefix_tokens
        self.multispot = dict(multispot) if multispot else None
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        if self.multispot and self.multispot.get("pool_side"):
            side = self.multispot["pool_side"]
            self.register_buffer("log_ratios", torch.tensor([math.log(side * side)]), persistent=False)
        else:
            self.log_ratios = None

    def forward(self, x, hw):
        check_tokens("x", x, self.num_heads)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if self.multispot is None:
            out = softmax_attention(q, k, v, num_heads=self.num_heads)
        else:
            pools = (self.multispot["pool_side"],) if self.multispot.get("pool_side") else ()
            out = multi_spot_attention(q, k, v, num_heads=self.num_heads, height=hw[0], width=hw[1],
                                       region_size=self.multispot["region_size"], topk=self.multispot["topk"],
                                       pool_sizes=pools, log_ratios=self.log_ratios,
                                       prefix_tokens=self.prefix_tokens)
        return self.proj(out)


class ViTPatchEmbed(nn.Module):
    """timm's ViT patch embedding: ``proj`` Conv2d(3, C, p, stride p) -> tokens."""

    def __init__(self, embed_dim, patch_size):
        super().__init__()
        self.proj = nn.Conv2d(3, embed_dim, patch_size, patch_size)

    def forward(self, x):
        return map_to_tokens(self.proj(x))


class VisionTransformer(nn.Module):
    """ViT with a class token in timm's layout; ``multispot`` (dict or None) configures every block's attention."""

    def __init__(self, arch, img_size, num_classes, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4.0,
                 patch_size=16, multispot=None):
        super().__init__()
        self.arch = arch
        self.patch_size = patch_size
        self.multispot = multispot
        self.grid = (img_size // patch_size, img_size // patch_size)
        self.check_resolution(img_size, img_size)
        self.patch_embed = ViTPatchEmbed(embed_dim, patch_size)
        self.cls_token = normal_param(1, 1, embed_dim, std=1e-6)
        self.pos_embed = normal_param(1, 1 + self.grid[0] * self.grid[1], embed_dim)
        self.blocks = nn.ModuleList(PreNormBlock(embed_dim, ViTAttention(embed_dim, num_heads, multispot), mlp_ratio,
                                                 norm_eps=1e-6) for _ in range(depth))
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Linear(embed_dim, num_classes)
        init_weights(self)

    def check_resolution(self, height, width):
        if height % self.patch_size or width % self.patch_size or min(height, width) < self.patch_size:
            raise EdgeAttnError("{}: input {}x{} is not a multiple of the patch size {}".format(
                self.arch, height, width, self.patch_size))
        if (height, width) != (self.grid[0] * self.patch_size, self.grid[1] * self.patch_size):
            raise EdgeAttnError("{}: built for {}x{} (a {}x{} position embedding); got {}x{}".format(
                self.arch, self.grid[0] * self.patch_size, self.grid[1] * self.patch_size, self.grid[0],
                self.grid[1], height, width))
        if self.multispot:
            region, pool = self.multispot["region_size"], self.multispot.get("pool_side") or 1
            for size, what in ((region, "Multi-Spot region side {} ({} queries)".format(region, region * region)),
                               (pool, "Multi-Spot pooling side {}".format(pool))):
                if self.grid[0] % size or self.grid[1] % size:
                    raise EdgeAttnError("{}: the {}x{} patch grid at {}x{} is not divisible by its {}; the Table 1 "
                                        "settings are for 384x384 (a 24x24 grid)".format(
                                            self.arch, self.grid[0], self.grid[1], height, width, what))

    def forward(self, x):
        height, width = check_image(self.arch, x)
        if (height, width) != (self.grid[0] * self.patch_size, self.grid[1] * self.patch_size):
            self.check_resolution(height, width)
        x = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x, self.grid)
        return self.head(self.norm(x)[:, 0])


def _vit_b16(arch, img_size, num_classes, setting):
    multispot = None
    if setting is not None:
        _, topk, pooled_tokens, _ = MULTISPOT_SETTINGS[setting]
        side = int(math.isqrt(REGION_QUERIES))
        multispot = {"region_size": side, "topk": topk,
                     "pool_side": int(math.isqrt(pooled_tokens)) if pooled_tokens else None}
    model = VisionTransformer(arch, img_size, num_classes, multispot=multispot)
    model.edgeattn_config = {}
    return model


def _multispot_paper(setting):
    if setting is None:
        return {"source": MULTISPOT_PAPER, "setting": "ORIGIN", "top1": "84.2", "params": None, "macs": {}}
    name, _, _, top1 = MULTISPOT_SETTINGS[setting]
    return {"source": MULTISPOT_PAPER, "setting": name, "top1": top1, "params": None, "macs": {}}


@register_model(family="vit", paper=_multispot_paper(None))
def vit_base_patch16_384(img_size=384, num_classes=1000):
    """ViT-B/16 in timm's vit_base_patch16_384 layout (softmax attention, Multi-Spot Table 1 "ORIGIN") at 384.

    Built for ``img_size`` (default 384, timm's; the position embedding covers that grid).
    """
    return _vit_b16("vit_base_patch16_384", img_size, num_classes, None)


@register_model(family="vit", paper=_multispot_paper("ms_top64"))
def vit_base_patch16_384_ms_top64(img_size=384, num_classes=1000):
    """ViT-B/16 with Multi-Spot attention P_S36_KVTOP64: regions of 36 queries share their top-64 keys/values.

    Same weights as vit_base_patch16_384 (training-free substitution); needs 384x384 (24x24 grid).
    """
    return _vit_b16("vit_base_patch16_384_ms_top64", img_size, num_classes, "ms_top64")


@register_model(family="vit", paper=_multispot_paper("ms_top64_s16"))
def vit_base_patch16_384_ms_top64_s16(img_size=384, num_classes=1000):
    """ViT-B/16 with Multi-Spot P_S36_KVTOP64_S16: top-64 plus all 36 average-pooled 4x4 tokens (of 16 each).

    Same weights as vit_base_patch16_384; needs 384x384.
    """
    return _vit_b16("vit_base_patch16_384_ms_top64_s16", img_size, num_classes, "ms_top64_s16")


@register_model(family="vit", paper=_multispot_paper("ms_top96_s16"))
def vit_base_patch16_384_ms_top96_s16(img_size=384, num_classes=1000):
    """ViT-B/16 with Multi-Spot P_S36_KVTOP96_S16: top-96 plus all 36 pooled 4x4 tokens.

    Same weights as vit_base_patch16_384; needs 384x384.
    """
    return _vit_b16("vit_base_patch16_384_ms_top96_s16", img_size, num_classes, "ms_top96_s16")


@register_model(family="vit", paper=_multispot_paper("ms_top96_s4"))
def vit_base_patch16_384_ms_top96_s4(img_size=384, num_classes=1000):
    """ViT-B/16 with Multi-Spot P_S36_KVTOP96_S4: top-96 plus all 144 pooled 2x2 tokens (of 4 each).

    Same weights as vit_base_patch16_384; needs 384x384.
    """
    return _vit_b16("vit_base_patch16_384_ms_top96_s4", img_size, num_classes, "ms_top96_s4")


def substitute_multispot(model, setting):
    """A copy of a ViT-B/16 (``vit_base_patch16_384`` or any Multi-Spot variant, trained weights included) whose
    attention uses the Table 1 ``setting`` ("ms_top64", "ms_top64_s16", "ms_top96_s16", "ms_top96_s4", or None for
    plain softmax). The weights are shared with nothing: the copy is built fresh and loaded with ``model``'s state."""
    require(setting is None or setting in MULTISPOT_SETTINGS, "unknown Multi-Spot setting {!r}; one of {}", setting,
            ", ".join(sorted(MULTISPOT_SETTINGS)))
    arch = "vit_base_patch16_384" + ("_" + setting if setting else "")
    size = model.grid[0] * model.patch_size
    substituted = _vit_b16(arch, size, model.head.out_features, setting)
    substituted.load_state_dict(model.state_dict(), strict=True)
    substituted.edgeattn_arch = arch
    substituted.edgeattn_config = {"img_size": size, "num_classes": model.head.out_features}
    return substituted.eval()


def logit_shift(reference, candidate, images):
    """How far ``candidate``'s logits move from ``reference``'s on ``images`` (B, 3, H, W): max abs and max relative
    error (max|c - r| / max|r|), mean cosine similarity of the logit vectors, top-1 agreement (fraction) and top-5
    overlap of the reference top-1. Both models run in eval mode, FP32, no grad."""
    with torch.no_grad():
        ref = reference.eval()(images).double()
        got = candidate.eval()(images).double()
    cosine = torch.nn.functional.cosine_similarity(ref, got, dim=1)
    top5 = got.topk(min(5, got.shape[1]), dim=1).indices
    return {
        "max_abs": float((got - ref).abs().max()),
        "max_rel": float((got - ref).abs().max() / ref.abs().max()),
        "cosine_mean": float(cosine.mean()),
        "top1_agreement": float((got.argmax(1) == ref.argmax(1)).double().mean()),
        "top5_contains_reference_top1": float((top5 == ref.argmax(1, keepdim=True)).any(1).double().mean()),
        "images": int(images.shape[0]),
    }
