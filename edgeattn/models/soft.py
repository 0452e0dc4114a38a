"""SOFT++ Tiny / Small / Medium / Large (Lu et al., "Softmax-free Linear Transformers", IJCV; arXiv 2207.03341v3).

Structure (Table 1 + the released code fudan-zvg/SOFT ``softmax_free_vision_transformer.py``):

* stem "C33-BN-ReLU": Conv3x3 s2 (3 -> 32), Conv3x3 s1 (32 -> 32), Conv3x3 s2 (32 -> C1), each + BN + ReLU;
  before stages 2-4 one "C31-BN-ReLU" (Conv3x3 s2 + BN + ReLU); convs with bias, as released;
* a learned position embedding per stage on the token grid built for ``img_size`` (bilinearly resized when the
  input differs, as the released code does);
* stages 1-3: post-LN SOFT blocks ``x = LN(x + SOFT(x)); x = LN(x + FFN(x))`` with FFN 4C and tanh-approximated
  GELU, and :class:`~edgeattn.ops.soft.SOFTAttention` (tied Q = K, conv landmark sampler with stride r = 8/4/2 =
  the sampling ratio sp, so m = 49 landmarks per stage at 224, Newton-Raphson pseudo-inverse with 20 iterations,
  SOFT++ symmetric normalisation, per-head depthwise conv on V with k = 9/5/3); head width 32;
* stage 4 (``stage4``):
  - ``"softmax"``: the released code's block: class token + pre-LN standard multi-head softmax attention
    (:class:`~edgeattn.ops.softmax.MultiHeadSoftmaxAttention`, LN eps 1e-6, MLP 4x, qkv bias), the class token
    feeds the head;
  - ``"soft"``: Table 1's "sp. 1x1" SOFT blocks (sampling ratio 1: every token is a landmark, dwconv k = 3) on the
    H x W grid. SOFTAttention takes an H x W token map only, so there is no class token: the head reads the mean
    token (Table 1 prints "w. cls token"; the difference is 2C parameters).

Which configuration (the Tiny discrepancy). Table 1 prints Tiny as depths 2-2-5-2, but that comes to ~15.4M
parameters, not the 13M the paper reports (Tables 2/3) and not Table 10's sharper 13.07M (conv sampler). The
released ``soft_tiny`` / ``soft_norm_tiny`` config -- depths 1-2-3-2, widths 64-128-320-512, heads 2-4-10-16,
softmax stage 4 -- reproduces exactly 13.07M and ~1.9 GMACs (without NR), so ``softpp_tiny`` implements the
released config. The released code has no Small/Medium/Large of the IJCV Table 1 (its soft_small etc. are the
NeurIPS v1 models, 24M/45M/64M), so those follow Table 1 (widths 96/96/128 x (1, 2, 4, 8), depths 2-2-5-2 /
2-2-18-2 / 2-2-18-2) with Table 1's SOFT blocks in stage 4, which reproduces 27.2 / 48.4 / 85.2 M (reported
27 / 48 / 85 M); with the released softmax stage 4 they would be 28.4 / 49.6 / 87.3 M.
The released soft_norm_small/medium/large configurations (depths 1-3-20-4, 1-3-29-5, 1-3-40-5, whose weights
are public) are registered under those names in :mod:`edgeattn.models.released`; fudan-zvg checkpoints load through
:mod:`edgeattn.models.layouts.soft`.

MACs: the paper's FLOPs leave out the Newton-Raphson iterations (Table 3's Tiny 1.9 G is our 1.93 G without NR); our
counter includes them in ``total`` and reports them as ``iterative`` (newton_raphson_macs in ``edgeattn
models``), so compare ``total - iterative`` with the table. Without NR: Tiny 1.93 G (table 1.9 G), Small
4.42 G (4.5 G, -1.7 %), Medium 8.76 G (8.7 G, +0.7 %), Large 15.21 G (15.4 G, -1.2 %). Small and Large miss by
more than 1 % with opposite sign to Medium, which shares Small's widths: no single counting convention
reproduces all three printed values from Table 1's structures (with NR they are 5.02 / 10.09 / 16.98 G), so the
counts are left as computed rather than tuned.

Resolutions: any input whose stage maps are multiples of the landmark sampling ratios (8, 4, 2 on maps of
img/4, img/8, img/16), e.g. every multiple of 32; the number of landmarks then grows with the resolution (144 in
stage 1 at 384, 256 at 512), as with the released code.
"""
import torch
import torch.nn as nn

from ..errors import EdgeAttnError
from ..ops.soft import SOFTAttention
from ..ops.softmax import MultiHeadSoftmaxAttention
from ._layers import (PostNormBlock, PreNormBlock, check_divisible, check_image, conv_out, init_weights,
                      map_to_tokens, resize_pos_embed, tokens_to_map, normal_param)
from ._registry import register_model

SAMPLING_RATIOS = (8, 4, 2, 1)
DWCONV_KERNELS = (9, 5, 3, 3)
STEM_WIDTH = 32
SOFT_PAPER = "SOFT++ (Lu et al., IJCV) Table 3 (params, FLOPs at 224)"


def stage_maps(img_size):
    """Token-map side per stage: C33 stem (s2, s1, s2) then a stride-2 C31 before stages 2-4."""
    side = conv_out(conv_out(img_size, 3, 2, 1), 3, 2, 1)
    sides = [side]
    for _ in range(3):
        side = conv_out(side, 3, 2, 1)
        sides.append(side)
    return sides


class ConvBNReLU(nn.Sequential):
    def __init__(self, in_channels, out_channels, stride):
        super().__init__(nn.Conv2d(in_channels, out_channels, 3, stride, 1), nn.BatchNorm2d(out_channels),
                         nn.ReLU())


class SOFTVisionTransformer(nn.Module):
    """Four-stage SOFT++ classifier (see the module docstring)."""

    def __init__(self, arch, img_size, num_classes, embed_dims, num_heads, depths, stage4="softmax",
                 newton_iters=20, symmetric_norm=True):
        super().__init__()
        self.arch = arch
        self.stage4 = stage4
        self.check_resolution(img_size, img_size)
        sides = stage_maps(img_size)
        self.grids = [(side, side) for side in sides]
        self.embeds = nn.ModuleList([nn.Sequential(ConvBNReLU(3, STEM_WIDTH, 2), ConvBNReLU(STEM_WIDTH, STEM_WIDTH, 1),
                                                   ConvBNReLU(STEM_WIDTH, embed_dims[0], 2))])
        self.embeds.extend(ConvBNReLU(embed_dims[i - 1], embed_dims[i], 2) for i in range(1, 4))
        extra = [0, 0, 0, 1 if stage4 == "softmax" else 0]
        self.pos_embeds = nn.ParameterList(normal_param(1, side * side + extra[i], embed_dims[i])
                                           for i, side in enumerate(sides))
        tanh_gelu = lambda: nn.GELU(approximate="tanh")  # noqa: E731 - the released SOFT block's Approx_GeLU
        self.stages = nn.ModuleList()
        for i in range(3):
            self.stages.append(nn.ModuleList(
                PostNormBlock(embed_dims[i], SOFTAttention(embed_dims[i], num_heads[i], SAMPLING_RATIOS[i],
                                                           newton_iters=newton_iters, symmetric_norm=symmetric_norm,
                                                           dwconv_kernel=DWCONV_KERNELS[i]),
                              mlp_ratio=4.0, act_layer=tanh_gelu)
                for _ in range(depths[i])))
        dim = embed_dims[3]
        if stage4 == "softmax":
            self.cls_token = normal_param(1, 1, dim)
            last = [PreNormBlock(dim, MultiHeadSoftmaxAttention(dim, num_heads[3], qkv_bias=True), mlp_ratio=4.0,
                                 norm_eps=1e-6) for _ in range(depths[3])]
        else:
            self.cls_token = None
            last = [PostNormBlock(dim, SOFTAttention(dim, num_heads[3], SAMPLING_RATIOS[3], newton_iters=newton_iters,
                                                     symmetric_norm=symmetric_norm, dwconv_kernel=DWCONV_KERNELS[3]),
                                  mlp_ratio=4.0, act_layer=tanh_gelu) for _ in range(depths[3])]
        self.stages.append(nn.ModuleList(last))
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)
        init_weights(self)

    def check_resolution(self, height, width):
        sides_h, sides_w = stage_maps(height), stage_maps(width)
        if min(sides_h[-1], sides_w[-1]) < 1 or min(height, width) < 32:
            raise EdgeAttnError("{}: input {}x{} is too small; the four stages downsample by 32".format(
                self.arch, height, width))
        for stage in range(4):
            check_divisible(self.arch, stage + 1, (sides_h[stage], sides_w[stage]), SAMPLING_RATIOS[stage],
                            "landmark sampling ratio", "the stride-r landmark conv would skip the last rows and "
                            "columns; use an input size that is a multiple of 32")

    def forward_features(self, x):
        height, width = check_image(self.arch, x)
        if stage_maps(height)[0] != self.grids[0][0] or stage_maps(width)[0] != self.grids[0][1]:
            self.check_resolution(height, width)
        for stage in range(4):
            x = self.embeds[stage](x if stage == 0 else tokens_to_map(x, hw))
            hw = (int(x.shape[2]), int(x.shape[3]))
            x = map_to_tokens(x)
            pos = self.pos_embeds[stage]
            if stage == 3 and self.cls_token is not None:
                x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
                pos = torch.cat([pos[:, :1], resize_pos_embed(pos[:, 1:], self.grids[3], hw)], dim=1)
                # the class token has no place on the grid: the softmax module sees a 1 x (1 + H*W) sequence
                token_hw = (1, x.shape[1])
            else:
                pos = resize_pos_embed(pos, self.grids[stage], hw)
                token_hw = hw
            x = x + pos
            for block in self.stages[stage]:
                x = block(x, token_hw)
        x = self.norm(x)
        return x[:, 0] if self.cls_token is not None else x.mean(dim=1)

    def forward(self, x):
        return self.head(self.forward_features(x))


def _build(arch, img_size, num_classes, embed_dims, num_heads, depths, stage4, newton_iters, symmetric_norm):
    if stage4 not in ("softmax", "soft"):
        raise EdgeAttnError("{}: stage4 must be 'softmax' or 'soft', got {!r}".format(arch, stage4))
    if isinstance(newton_iters, bool) or not isinstance(newton_iters, int) or newton_iters < 0:
        raise EdgeAttnError("{}: newton_iters must be a non-negative integer, got {!r}".format(arch, newton_iters))
    model = SOFTVisionTransformer(arch, img_size, num_classes, embed_dims, num_heads, depths, stage4=stage4,
                                  newton_iters=newton_iters, symmetric_norm=bool(symmetric_norm))
    model.edgeattn_config = {"stage4": stage4, "newton_iters": newton_iters, "symmetric_norm": bool(symmetric_norm)}
    return model


def _paper(params, macs, note=None):
    paper = {"source": SOFT_PAPER, "params": params, "macs": {"224": [macs]}}
    if note:
        paper["note"] = note
    return paper


_NO_NR = "paper FLOPs exclude the Newton-Raphson iterations"


@register_model(family="softpp", paper=_paper("13M", "1.9G", "released config; " + _NO_NR))
def softpp_tiny(img_size=224, num_classes=1000, *, stage4="softmax", newton_iters=20, symmetric_norm=True):
    """SOFT++-Tiny as released (depths 1-2-3-2, widths 64-128-320-512, heads 2-4-10-16, softmax stage 4); 13.07M.

    Config: ``stage4`` ("softmax" = released code, "soft" = Table 1's sp 1x1 SOFT blocks), ``newton_iters`` (20),
    ``symmetric_norm`` (True = SOFT++, False = SOFT).
    """
    return _build("softpp_tiny", img_size, num_classes, [64, 128, 320, 512], [2, 4, 10, 16], [1, 2, 3, 2], stage4,
                  newton_iters, symmetric_norm)


@register_model(family="softpp", paper=_paper("27M", "4.5G", _NO_NR))
def softpp_small(img_size=224, num_classes=1000, *, stage4="soft", newton_iters=20, symmetric_norm=True):
    """SOFT++-Small per Table 1 (depths 2-2-5-2, widths 96-192-384-768, heads 3-6-12-24, SOFT stage 4); 27.20M.

    Config: as softpp_tiny (default ``stage4="soft"``).
    """
    return _build("softpp_small", img_size, num_classes, [96, 192, 384, 768], [3, 6, 12, 24], [2, 2, 5, 2], stage4,
                  newton_iters, symmetric_norm)


@register_model(family="softpp", paper=_paper("48M", "8.7G", _NO_NR))
def softpp_medium(img_size=224, num_classes=1000, *, stage4="soft", newton_iters=20, symmetric_norm=True):
    """SOFT++-Medium per Table 1 (depths 2-2-18-2, widths 96-192-384-768, heads 3-6-12-24, SOFT stage 4); 48.40M.

    Config: as softpp_tiny (default ``stage4="soft"``).
    """
    return _build("softpp_medium", img_size, num_classes, [96, 192, 384, 768], [3, 6, 12, 24], [2, 2, 18, 2],
                  stage4, newton_iters, symmetric_norm)


@register_model(family="softpp", paper=_paper("85M", "15.4G", _NO_NR))
def softpp_large(img_size=224, num_classes=1000, *, stage4="soft", newton_iters=20, symmetric_norm=True):
    """SOFT++-Large per Table 1 (depths 2-2-18-2, widths 128-256-512-1024, heads 4-8-16-32, SOFT stage 4); 85.19M.

    Config: as softpp_tiny (default ``stage4="soft"``).
    """
    return _build("softpp_large", img_size, num_classes, [128, 256, 512, 1024], [4, 8, 16, 32], [2, 2, 18, 2],
                  stage4, newton_iters, symmetric_norm)
