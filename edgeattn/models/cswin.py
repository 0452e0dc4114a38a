"""CSWin-T24181 and CSWin-B36292 with the attention variants of the ELFATT paper (GLOBAL, LOCAL, EFFATT, ELFATT,
Agent, FLatten).

Why one module: the six variants share the CSWin skeleton (stem, stages, merges, head, per-stage configuration) and
differ only in the attention module each stage builds, a few lines per variant.

Architecture (CSWin, Dong et al. CVPR 2022; the 2-4-18-1 "24181" tiny variant as defined in the FLatten /
Agent-Attention repositories (``FLatten_CSWin_64_24181_tiny_224`` in LeapLabTHU/FLatten-Transformer
``models/flatten_cswin.py``, ``Agent_CSWin_64_24181_tiny_224`` in LeapLabTHU/Agent-Attention) and used by ELFATT):

* stem ``Conv2d(3, C1, 7, stride 4, padding 2)`` -> tokens -> LayerNorm;
* four stages of pre-LN blocks ``x + attn(LN(x)); x + MLP(LN(x))`` (MLP 4x, GELU; qkv with bias), widths
  C1 x (1, 2, 4, 8), head width 32 (CSWin-T24181: 64-128-256-512, heads 2-4-8-16, depths 2-4-18-1;
  CSWin-B36292: 96-192-384-768, heads 4-8-16-32, depths 3-6-29-2, head width 24);
* between stages ``Conv2d(C, 2C, 3, stride 2, padding 1)`` -> LayerNorm (CSWin's Merge_Block);
* final LayerNorm, mean over tokens, Linear head.

Every attention module comes from :mod:`edgeattn.ops` (qkv projection, core, LePE, output projection):

* GLOBAL: :class:`~edgeattn.ops.softmax.MultiHeadSoftmaxAttention` with full-map LePE (CSWin's idx=-1 path);
* LOCAL: :class:`~edgeattn.ops.cswin.CrossShapedWindowAttention` (horizontal + vertical stripes, stripe widths
  ``split_size`` per stage, LePE); the last stage is always the full-map path, as in CSWin;
* EFFATT: :class:`~edgeattn.ops.efficient_attention.EfficientAttention` (ELFATT with c1 = c) with full-map LePE;
* ELFATT: :class:`~edgeattn.ops.elfatt.ELFATTAttention` (c1 = c2 by default).
* Agent / FLatten: the official ``AABB`` / ``LLSS`` layouts of LeapLabTHU's Agent-Attention / FLatten-Transformer
  (agent attention, :class:`~edgeattn.ops.agent.AgentAttention`, agents 9-16-49-49, or focused linear attention,
  :class:`~edgeattn.ops.flatten.FocusedLinearAttention`, on the full map in stages 1-2; CSWin LOCAL stripes in
  stages 3-4). Their per-position parameters tie them to the resolution they are built for.

EFFATT and ELFATT use the paper's hybrid third stage: VaniATT (= the GLOBAL module) and ELFATT alternate,
VaniATT first ("VaniATT-ELFATT-...-VaniATT-ELFATT", ELFATT paper section IV-E). The ELFATT paper's MACs only
reconcile with that layout for its EFFATT row too (nFA - FA = 0.18 G = the softmax cores of the stage-3 VaniATT half;
the softmax-core MACs per block are
2 N^2 C for full softmax, 2 N bs c2 for the block head).

Block sizes and resolutions. The paper gives ELFATT's block sizes at 224x224: 49-49-196-49 for CSWin-T24181
(Tables I/II) and, from its MAC counts, 196-196-196-49 for CSWin-B36292 (nFA - FA = 1.01 G at 224 only fits
that layout). At 384x384 the CSWin-B36292-ELFATT MACs (51.21 / 42.48 G) fit 576-576-576-144 blocks, i.e. the
window side scales with the resolution exactly like CSWin's own stripes (7 at 224 -> 12 at 384). So the default
layout is defined by the stage maps: window side = stage-4 map side ("49") or stage-3 map side ("196"), which is
49-49-196-49 at 224, 144-144-576-144 at 384, 256-256-1024-256 at 512, and tiles every stage whenever the input
is a multiple of 32. LOCAL's default stripes are likewise [1, 2, s3/2, s4] = CSWin's [1, 2, 7, 7] at 224 and
[1, 2, 12, 12] at 384. Passing ``block_sizes`` / ``split_size`` fixes them instead; a stage map they do not tile
is rejected naming the stage, the map and the block (or pass ``padding="zeros"|"masked"`` for ELFATT).
"""
import math

import torch.nn as nn

from ..errors import EdgeAttnError
from ..ops.agent import AgentAttention
from ..ops.cswin import CrossShapedWindowAttention
from ..ops.efficient_attention import EfficientAttention
from ..ops.elfatt import ELFATTAttention
from ..ops.flatten import FocusedLinearAttention
from ..ops.softmax import MultiHeadSoftmaxAttention
from ._layers import (ConvTokenEmbed, PreNormBlock, check_divisible, check_image, conv_out, init_weights,
                      tokens_to_map)
from ._registry import register_model

T24181 = {"embed_dim": 64, "depths": (2, 4, 18, 1), "num_heads": (2, 4, 8, 16)}
B36292 = {"embed_dim": 96, "depths": (3, 6, 29, 2), "num_heads": (4, 8, 16, 32)}
HYBRID_PATTERNS = ("none", "all", "even", "odd")
ELFATT_PAPER = "ELFATT (Zhang et al., arXiv 2501.06098) Table I"


def stage_maps(img_size):
    """Token-map side of each stage for a square input (stem k7 s4 p2, then three k3 s2 p1 merges)."""
    side = conv_out(img_size, 7, 4, 2)
    sides = [side]
    for _ in range(3):
        side = conv_out(side, 3, 2, 1)
        sides.append(side)
    return sides


def softmax_blocks(pattern, depth, stage):
    """Indices of the blocks of a stage that use VaniATT (global softmax) instead of ELFATT/EFFATT."""
    if isinstance(pattern, str):
        if pattern not in HYBRID_PATTERNS:
            raise EdgeAttnError("hybrid pattern for stage {} must be one of {} or a list of block indices, got "
                                "{!r}".format(stage, ", ".join(HYBRID_PATTERNS), pattern))
        return {"none": set(), "all": set(range(depth)), "even": set(range(0, depth, 2)),
                "odd": set(range(1, depth, 2))}[pattern]
    indices = set()
    for index in pattern:
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < depth:
            raise EdgeAttnError("hybrid: stage {} has blocks 0..{}, got index {!r}".format(stage, depth - 1, index))
        indices.add(index)
    return indices


def _four(name, values, kind=int):
    if values is None:
        return None
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__") or len(values) != 4:
        raise EdgeAttnError("{} must list 4 values (one per stage), got {!r}".format(name, values))
    if kind is int and any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in values):
        raise EdgeAttnError("{} must be 4 positive integers, got {!r}".format(name, values))
    return list(values)


class CSWinTransformer(nn.Module):
    """CSWin backbone + classifier; ``block_kinds[stage][block]`` picks each block's attention module.

    Kinds: "global" (full softmax + LePE), "local" (cross-shaped stripes), "local_last" (CSWin's full-map
    last-stage branch), "effatt", "elfatt", "agent" (agent attention on the full map, ``agent_num[stage]``
    agents), "flatten" (focused linear attention on the full map + LePE).
    ``windows[stage]`` is the ELFATT window side (for "elfatt" blocks) or the stripe width (for "local").
    """

    def __init__(self, arch, img_size, num_classes, embed_dim, depths, num_heads, block_kinds, windows,
                 mlp_ratio=4.0, qkv_bias=True, global_ratio=0.5, lepe=True, padding="none",
                 agent_num=(9, 16, 49, 49)):
        super().__init__()
        self.arch = arch
        self.img_size = img_size
        self.dims = [embed_dim * 2 ** i for i in range(4)]
        self.windows = list(windows)
        self.block_kinds = [list(kinds) for kinds in block_kinds]
        self.padding = padding
        self.check_resolution(img_size, img_size)
        self.stem = ConvTokenEmbed(3, embed_dim, 7, 4, 2)
        self.stages = nn.ModuleList()
        sides = stage_maps(img_size)
        for stage, (dim, depth, heads) in enumerate(zip(self.dims, depths, num_heads)):
            blocks = nn.ModuleList()
            for index in range(depth):
                attn = self._attention(block_kinds[stage][index], dim, heads, windows[stage], qkv_bias,
                                       global_ratio, lepe, padding, sides[stage], agent_num[stage])
                blocks.append(PreNormBlock(dim, attn, mlp_ratio))
            self.stages.append(blocks)
        self.merges = nn.ModuleList(ConvTokenEmbed(d, 2 * d, 3, 2, 1) for d in self.dims[:3])
        self.norm = nn.LayerNorm(self.dims[-1])
        self.head = nn.Linear(self.dims[-1], num_classes)
        init_weights(self)

    @staticmethod
    def _attention(kind, dim, heads, window, qkv_bias, global_ratio, lepe, padding, side, agent_num):
        if kind == "global":
            return MultiHeadSoftmaxAttention(dim, heads, qkv_bias=qkv_bias, lepe=lepe)
        if kind == "effatt":
            return EfficientAttention(dim, heads, qkv_bias=qkv_bias, lepe=lepe)
        if kind == "elfatt":
            return ELFATTAttention(dim, num_heads=heads, global_ratio=global_ratio, window_size=window,
                                   qkv_bias=qkv_bias, lepe=lepe, padding=padding)
        if kind in ("local", "local_last"):
            # CSWin's last stage is one full-map branch with all heads (its last_stage=True path)
            return CrossShapedWindowAttention(dim, heads, split_size=window, qkv_bias=qkv_bias,
                                              last_stage=kind == "local_last")
        if kind == "agent":
            # the Agent repo's A blocks: CSWin's single full-map branch (split = resolution), LePE as the DWC
            return AgentAttention(dim, heads, agent_num, (side, side), qkv_bias=qkv_bias)
        if kind == "flatten":
            return FocusedLinearAttention(dim, heads, (side, side), lepe=True, qkv_bias=qkv_bias)
        raise ValueError("unknown block kind {!r}".format(kind))

    def check_resolution(self, height, width):
        """Raise EdgeAttnError unless every stage's map tiles into that stage's windows/stripes."""
        sides_h, sides_w = stage_maps(height), stage_maps(width)
        if min(sides_h[-1], sides_w[-1]) < 1 or min(height, width) < 32:
            raise EdgeAttnError("{}: input {}x{} is too small; the four stages downsample by 32".format(
                self.arch, height, width))
        fixed = set(k for kinds in self.block_kinds for k in kinds) & {"agent", "flatten"}
        if fixed and (height, width) != (self.img_size, self.img_size):
            raise EdgeAttnError("{}: built for {}x{}; its {} blocks have per-position parameters, so rebuild it for "
                                "{}x{}".format(self.arch, self.img_size, self.img_size, "/".join(sorted(fixed)),
                                               height, width))
        for stage in range(4):
            kinds = set(self.block_kinds[stage])
            hw = (sides_h[stage], sides_w[stage])
            if "elfatt" in kinds and self.padding == "none":
                side = self.windows[stage]
                check_divisible(self.arch, stage + 1, hw, side, "ELFATT block side",
                                "use an input size that is a multiple of 32 with the default blocks, pass "
                                "block_sizes, or padding='zeros' or 'masked'",
                                detail=" ({}x{} = {}-token blocks)".format(side, side, side * side))
            if "local" in kinds and stage < 3:
                # horizontal stripes split H, vertical stripes split W
                check_divisible(self.arch, stage + 1, hw, self.windows[stage], "CSWin stripe width",
                                "pass split_size with stripe widths that divide every stage map")

    def forward_features(self, x):
        height, width = check_image(self.arch, x)
        if (height, width) != (self.img_size, self.img_size):
            self.check_resolution(height, width)
        x, hw = self.stem(x)
        for stage, blocks in enumerate(self.stages):
            for block in blocks:
                x = block(x, hw)
            if stage < 3:
                x, hw = self.merges[stage](tokens_to_map(x, hw))
        return self.norm(x).mean(dim=1)

    def forward(self, x):
        return self.head(self.forward_features(x))


def build_cswin(arch, img_size, num_classes, spec, attention, block_sizes=None,
                default_blocks=("s4", "s4", "s3", "s4"), split_size=None, hybrid=None, global_ratio=0.5, lepe=True,
                padding="none"):
    """The CSWin skeleton with ``spec`` (embed_dim, depths, num_heads) and one attention variant: "global",
    "local", "effatt", "elfatt" (hybrid stage 3), or "agent" / "flatten" (the official AABB / LLSS layouts: the
    efficient attention on the full map in stages 1-2, CSWin stripes in stages 3-4)."""
    sides = stage_maps(img_size)
    if min(sides) < 1 or img_size < 32:
        raise EdgeAttnError("{}: input resolution {} is too small; the four stages downsample by 32".format(
            arch, img_size))
    depths = spec["depths"]
    if attention == "elfatt":
        blocks = _four("block_sizes", block_sizes)
        if blocks is None:
            named = {"s3": sides[2], "s4": sides[3]}
            windows = [named[key] for key in default_blocks]
        else:
            windows = []
            for stage, tokens in enumerate(blocks):
                side = int(math.isqrt(tokens))
                if side * side != tokens:
                    raise EdgeAttnError("{}: block_sizes[{}] = {} is not a square number of tokens (blocks are "
                                        "square windows, e.g. 49 = 7x7)".format(arch, stage, tokens))
                windows.append(side)
    elif attention in ("local", "agent", "flatten"):
        split = _four("split_size", split_size)
        if split is None:
            if sides[2] % 2:
                raise EdgeAttnError("{}: stage-3 map {}x{} is odd, so the default stripe width (half the map, 7 at "
                                    "224) does not exist; pass split_size".format(arch, sides[2], sides[2]))
            split = [1, 2, sides[2] // 2, sides[3]]
        windows = split
    else:
        windows = [0, 0, 0, 0]
    if attention in ("elfatt", "effatt"):
        patterns = hybrid if hybrid is not None else ["none", "none", "even", "none"]
        if isinstance(patterns, str) or len(patterns) != 4:
            raise EdgeAttnError("hybrid must list one pattern per stage (4), got {!r}".format(patterns))
        softmax_sets = [softmax_blocks(p, d, s + 1) for s, (p, d) in enumerate(zip(patterns, depths))]
        kinds = [["global" if i in softmax_sets[s] else attention for i in range(d)] for s, d in enumerate(depths)]
    elif attention == "local":
        kinds = [["local"] * d for d in depths[:3]] + [["local_last"] * depths[3]]
    elif attention in ("agent", "flatten"):
        kinds = [[attention] * depths[0], [attention] * depths[1], ["local"] * depths[2], ["local_last"] * depths[3]]
    else:
        kinds = [["global"] * d for d in depths]
    if padding not in ("none", "zeros", "masked"):
        raise EdgeAttnError("padding must be 'none', 'zeros' or 'masked', got {!r}".format(padding))
    model = CSWinTransformer(arch, img_size, num_classes, spec["embed_dim"], depths, spec["num_heads"], kinds,
                             windows, global_ratio=global_ratio, lepe=lepe, padding=padding)
    return model


_build = build_cswin  # the name models/released.py builds with


def _paper(params, params_at=None, **macs):
    paper = {"source": ELFATT_PAPER, "params": params,
             "macs": {size.lstrip("r"): list(values) for size, values in macs.items()}}
    if params_at:
        paper["params_at"] = {size.lstrip("r"): value for size, value in params_at.items()}
    return paper


@register_model(family="cswin", paper=_paper("20M", r224=("7.60G", "4.09G")))
def cswin_t24181_global(img_size=224, num_classes=1000, *, lepe=True):
    """CSWin-T24181-GLOBAL: full-map softmax attention (CSWin idx=-1 path, LePE) in every block; 20.39M params.

    Config: ``lepe`` (full-map 3x3 depthwise LePE, default True). No windows, so any input of at least 32x32
    works.
    """
    model = build_cswin("cswin_t24181_global", img_size, num_classes, T24181, "global", lepe=lepe)
    model.edgeattn_config = {"lepe": lepe}
    return model


@register_model(family="cswin", paper=_paper("20M", r224=("4.36G", "4.09G")))
def cswin_t24181_local(img_size=224, num_classes=1000, *, split_size=None):
    """CSWin-T24181-LOCAL: CSWin cross-shaped window attention (stripes 1-2-7-7 at 224, LePE).

    Config: ``split_size`` (4 stripe widths; default [1, 2, s3/2, s4] from the stage-3/4 map sides = CSWin's
    [1, 2, 7, 7] at 224 and [1, 2, 12, 12] at 384). Stage 4 is CSWin's full-map branch (its width is unused).
    LePE is always on (CSWin's LePEAttention).
    """
    model = build_cswin("cswin_t24181_local", img_size, num_classes, T24181, "local", split_size=split_size)
    model.edgeattn_config = {"split_size": split_size}
    return model


@register_model(family="cswin", paper=_paper("20M", r224=("4.35G", "4.17G")))
def cswin_t24181_effatt(img_size=224, num_classes=1000, *, hybrid=None, lepe=True):
    """CSWin-T24181-EFFATT: ELFATT with c1 = c (EFFATT linear heads of width 32 + full-map LePE), hybrid stage 3.

    Config: ``hybrid`` (per stage "none" | "all" | "even" | "odd" | list of block indices that use VaniATT;
    default ["none", "none", "even", "none"]), ``lepe``.
    """
    model = build_cswin("cswin_t24181_effatt", img_size, num_classes, T24181, "effatt", hybrid=hybrid, lepe=lepe)
    model.edgeattn_config = {"hybrid": hybrid, "lepe": lepe}
    return model


@register_model(family="cswin", paper=_paper("20M", r224=("4.44G", "4.13G")))
def cswin_t24181_elfatt(img_size=224, num_classes=1000, *, block_sizes=None, hybrid=None, global_ratio=0.5,
                        lepe=True, padding="none"):
    """CSWin-T24181-ELFATT: ELFATT (c1 = c2, blocks 49-49-196-49 at 224), hybrid stage 3 (VaniATT first).

    Config: ``block_sizes`` (4 square token counts; default 49-49-196-49 at 224, scaled with the stage maps at
    other resolutions, see the module docstring), ``hybrid`` (as for EFFATT), ``global_ratio`` (c1 / c, 0.5),
    ``lepe``, ``padding`` ("none" | "zeros" | "masked": what the block head does with maps its windows do not
    tile).
    """
    model = build_cswin("cswin_t24181_elfatt", img_size, num_classes, T24181, "elfatt", block_sizes=block_sizes,
                   hybrid=hybrid, global_ratio=global_ratio, lepe=lepe, padding=padding)
    model.edgeattn_config = {"block_sizes": block_sizes, "hybrid": hybrid, "global_ratio": global_ratio,
                             "lepe": lepe, "padding": padding}
    return model


@register_model(family="cswin", paper=_paper("73M", r224=("22.33G", "14.39G"), r384=("110.89G", "42.28G")))
def cswin_b36292_global(img_size=224, num_classes=1000, *, lepe=True):
    """CSWin-B36292-GLOBAL: full-map softmax attention with LePE in every block; 73.05M params.

    Config: ``lepe``.
    """
    model = build_cswin("cswin_b36292_global", img_size, num_classes, B36292, "global", lepe=lepe)
    model.edgeattn_config = {"lepe": lepe}
    return model


@register_model(family="cswin", paper=_paper("73M", r224=("15.47G", "14.46G"), r384=("51.21G", "42.48G")))
def cswin_b36292_elfatt(img_size=224, num_classes=1000, *, block_sizes=None, hybrid=None, global_ratio=0.5,
                        lepe=True, padding="none"):
    """CSWin-B36292-ELFATT: ELFATT (c1 = c2, blocks 196-196-196-49 at 224), hybrid stage 3 (15 VaniATT + 14).

    The paper does not print CSWin-B36292's block sizes; its MACs (Table I, 15.47/14.46 G at 224 and
    51.21/42.48 G at 384) fit only 196-196-196-49 at 224 and 576-576-576-144 at 384, i.e. window side = the
    stage-3 map side in stages 1-3 and the stage-4 map side in stage 4, which is the default here.
    Config: as cswin_t24181_elfatt.
    """
    model = build_cswin("cswin_b36292_elfatt", img_size, num_classes, B36292, "elfatt", block_sizes=block_sizes,
                   default_blocks=("s3", "s3", "s3", "s4"), hybrid=hybrid, global_ratio=global_ratio, lepe=lepe,
                   padding=padding)
    model.edgeattn_config = {"block_sizes": block_sizes, "hybrid": hybrid, "global_ratio": global_ratio,
                             "lepe": lepe, "padding": padding}
    return model


@register_model(family="cswin", paper=_paper("20M", r224=("4.31G", "4.14G")))
def cswin_t24181_agent(img_size=224, num_classes=1000, *, split_size=None):
    """CSWin-T24181-Agent: Agent-CSWin-T (AABB, agents 9-16-49-49: agent attention on the full map in stages 1-2).

    As ``LeapLabTHU/Agent-Attention`` ``Agent_CSWin_64_24181_tiny_224`` with ``agent_cswin_t.yaml``: the A blocks
    are CSWin's single full-map branch (their split size is the map) with agent attention and its biases, the
    branch's LePE as the DWC; stages 3-4 are CSWin LOCAL stripes. Config: ``split_size`` (the stage-3/4 stripes,
    as cswin_t24181_local). Runs at its built resolution.
    """
    model = build_cswin("cswin_t24181_agent", img_size, num_classes, T24181, "agent", split_size=split_size)
    model.edgeattn_config = {"split_size": split_size}
    return model


@register_model(family="cswin", paper=_paper("21M", r224=("4.34G", "4.16G")))
def cswin_t24181_flatten(img_size=224, num_classes=1000, *, split_size=None):
    """CSWin-T24181-FLatten: FLatten-CSWin-T (LLSS: focused linear attention on the full map in stages 1-2).

    As ``LeapLabTHU/FLatten-Transformer`` ``FLatten_CSWin_64_24181_tiny_224`` with ``flatten_cswin_t.yaml``
    (focusing factor 3, DWC 5x5, LePE, positional encoding per token). Config: ``split_size`` (stage-3/4 stripes).
    Runs at its built resolution.
    """
    model = build_cswin("cswin_t24181_flatten", img_size, num_classes, T24181, "flatten", split_size=split_size)
    model.edgeattn_config = {"split_size": split_size}
    return model


@register_model(family="cswin", paper=_paper("73M", r224=("15.03G", "14.39G"), r384=("47.06G", "42.28G")))
def cswin_b36292_local(img_size=224, num_classes=1000, *, split_size=None):
    """CSWin-B36292-LOCAL: CSWin cross-shaped windows (stripes 1-2-7-7 at 224, 1-2-12-12 at 384, LePE).

    Config: ``split_size`` (as cswin_t24181_local).
    """
    model = build_cswin("cswin_b36292_local", img_size, num_classes, B36292, "local", split_size=split_size)
    model.edgeattn_config = {"split_size": split_size}
    return model


@register_model(family="cswin", paper=_paper("73M", r224=("14.98G", "14.53G"), r384=("46.57G", "42.69G")))
def cswin_b36292_effatt(img_size=224, num_classes=1000, *, hybrid=None, lepe=True):
    """CSWin-B36292-EFFATT: EFFATT heads of width 24 + LePE, hybrid stage 3 (15 VaniATT + 14 EFFATT).

    Config: ``hybrid``, ``lepe`` (as cswin_t24181_effatt).
    """
    model = build_cswin("cswin_b36292_effatt", img_size, num_classes, B36292, "effatt", hybrid=hybrid, lepe=lepe)
    model.edgeattn_config = {"hybrid": hybrid, "lepe": lepe}
    return model


@register_model(family="cswin", paper=_paper("73M", r224=("14.92G", "14.49G"), r384=("46.33G", "42.57G")))
def cswin_b36292_agent(img_size=224, num_classes=1000, *, split_size=None):
    """CSWin-B36292-Agent: Agent-CSWin-B (AABB, agents 9-16-49-49; ``agent_cswin_b[_384].yaml``).

    Config: ``split_size`` (stage-3/4 stripes). Runs at its built resolution.
    """
    model = build_cswin("cswin_b36292_agent", img_size, num_classes, B36292, "agent", split_size=split_size)
    model.edgeattn_config = {"split_size": split_size}
    return model


@register_model(family="cswin", paper=_paper("75M", params_at={"r384": "78M"}, r224=("14.96G", "14.52G"),
                                             r384=("46.43G", "42.67G")))
def cswin_b36292_flatten(img_size=224, num_classes=1000, *, split_size=None):
    """CSWin-B36292-FLatten: FLatten-CSWin-B (LLSS; ``flatten_cswin_b[_384].yaml``); 75M at 224, 78M at 384 (the
    positional encodings grow with the map).

    Config: ``split_size`` (stage-3/4 stripes). Runs at its built resolution.
    """
    model = build_cswin("cswin_b36292_flatten", img_size, num_classes, B36292, "flatten", split_size=split_size)
    model.edgeattn_config = {"split_size": split_size}
    return model
