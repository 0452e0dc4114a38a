"""Swin-T and Swin-B with the six attention variants of the ELFATT paper's Table I (LOCAL, GLOBAL, EFFATT, ELFATT,
Agent, FLatten).

Why one module: the six variants share timm's Swin skeleton (patch embedding, stages, merging, head) and differ
only in the attention module of each block, a few lines per variant.

Architecture (Liu et al., ICCV 2021), in timm's layout so that a timm ``swin_tiny_patch4_window7_224`` /
``swin_base_patch4_window7_224`` / ``swin_base_patch4_window12_384`` state dict loads into ``swin_t_local`` /
``swin_b_local`` unchanged (same keys, same logits):

* ``patch_embed``: ``Conv2d(3, C, 4, stride 4)`` -> tokens -> LayerNorm;
* four stages ``layers.<i>``; stages 2-4 start with ``downsample`` (PatchMerging: the 2x2 neighbours
  concatenated in timm's order -> LayerNorm(4C) -> ``Linear(4C, 2C, bias=False)``), then pre-LN blocks
  ``x + attn(norm1(x)); x + mlp(norm2(x))`` (MLP 4x, GELU);
* final LayerNorm, mean over tokens, ``head.fc``.

Swin-T: C = 96, depths 2-2-6-2, heads 3-6-12-24; Swin-B: C = 128, depths 2-2-18-2, heads 4-8-16-32 (head width 32).

Variants, as the ELFATT paper defines them ("the backbones after replacing the local window-based attention"), each
pinned down by its Table I parameter and MAC counts (``edgeattn models`` prints both):

* LOCAL: Swin's (S)W-MSA, :class:`~edgeattn.ops.swin.ShiftedWindowAttention` (7x7 windows at 224, 12x12 at 384,
  relative position bias, shift ws/2 in odd blocks; a stage map no larger than the window is one unshifted window).
* GLOBAL: full-map softmax attention with the full-map 3x3 LePE of CSWin's GLOBAL
  (:class:`~edgeattn.ops.softmax.MultiHeadSoftmaxAttention`); no relative position bias (Table I's FA column
  exists for it, and LePE is what makes 21.57/15.19 G at 224 and 99.76/44.64 G at 384 for Swin-B add up).
* EFFATT: :class:`~edgeattn.ops.efficient_attention.EfficientAttention` (32-wide heads, LePE) with the paper's
  hybrid stage 3 (even blocks VaniATT), as for CSWin: 15.69/15.33 G for Swin-B.
* ELFATT: the paper's Swin-T-ELFATT is 30M (Swin-B 91M) where every other Swin variant is 28M (88M); the 1.9M
  (3.4M) difference and its MACs (16.46/15.68 G for Swin-B at 224, 52.79/46.08 G at 384) are exactly those of
  CSWin's conv stem (7x7, stride 4) and conv merges (3x3, stride 2) in place of the patch embedding and the
  patch merging. So Swin-*-ELFATT is the CSWin skeleton (:class:`~edgeattn.models.cswin.CSWinTransformer`) with
  Swin's widths, depths and heads: ELFATT c1 = c2, blocks 196-196-196-49 at 224 (576-576-576-144 at 384; the
  stage-3 map side in stages 1-3, the stage-4 side in stage 4, the CSWin-B36292 layout), hybrid stage 3. Its
  stage-1 unit is one EFFATT + one blockify head of width 48 (Swin-T's 3 heads split as CSWin splits heads
  between its two branches, num_heads // 2 each).
* Agent: ``LeapLabTHU/Agent-Attention`` ``agent_swin`` (configs ``agent_swin_t/b[_384].yaml``): agent attention
  (:class:`~edgeattn.ops.agent.AgentAttention`) over the whole stage map ("window" 56 / 96 >= every map) in the
  blocks marked A and Swin W-MSA in the blocks marked B: Swin-T ``AAAB``, Swin-B ``AAMB2`` (stage 3: the first
  two blocks A, the rest B), agents 9-16-49-49.
* FLatten: ``LeapLabTHU/FLatten-Transformer`` ``flatten_swin`` (``flatten_swin_t/b[_384].yaml``): focused linear
  attention (:class:`~edgeattn.ops.flatten.FocusedLinearAttention`, focusing factor 3, DWC 5x5) over the whole
  map in stages 1-2, Swin W-MSA in stages 3-4 (``LLSS``).

Agent and FLatten blocks have per-position parameters (agent biases, positional encodings), so those models run at
the resolution they were built for; the others take any multiple of 32 whose stage maps are at least one window.
"""
import torch.nn as nn

from ..errors import EdgeAttnError
from ..ops.agent import AgentAttention
from ..ops.efficient_attention import EfficientAttention
from ..ops.flatten import FocusedLinearAttention
from ..ops.softmax import MultiHeadSoftmaxAttention
from ..ops.swin import ShiftedWindowAttention
from . import cswin
from ._layers import PreNormBlock, check_image, init_weights, map_to_tokens
from ._registry import register_model

SWIN_T = {"embed_dim": 96, "depths": (2, 2, 6, 2), "num_heads": (3, 6, 12, 24)}
SWIN_B = {"embed_dim": 128, "depths": (2, 2, 18, 2), "num_heads": (4, 8, 16, 32)}
#: Agent / FLatten layouts per stage (official configs): A/L = the efficient attention on the full map, B/S = W-MSA,
#: "M<k>" = the first k blocks of the stage A, the rest B.
AGENT_LAYOUTS = {"t": ("A", "A", "A", "B"), "b": ("A", "A", "M2", "B")}
AGENT_NUM = (9, 16, 49, 49)
FLATTEN_LAYOUT = ("L", "L", "S", "S")
ELFATT_PAPER = cswin.ELFATT_PAPER


def stage_sides(img_size):
    """Token-map side of each stage: patch 4, then three 2x2 merges."""
    return [img_size // 4 // 2 ** i for i in range(4)]


class PatchEmbed(nn.Module):
    """timm's Swin patch embedding: ``proj`` Conv2d(3, C, 4, stride 4) -> tokens -> ``norm`` LayerNorm."""

    def __init__(self, embed_dim, patch_size=4):
        super().__init__()
        self.proj = nn.Conv2d(3, embed_dim, patch_size, patch_size)
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x):
        x = self.proj(x)
        return self.norm(map_to_tokens(x)), (int(x.shape[2]), int(x.shape[3]))


class PatchMerging(nn.Module):
    """timm's PatchMerging: 2x2 neighbours concatenated as (0,0), (1,0), (0,1), (1,1) -> ``norm`` LayerNorm(4C) ->
    ``reduction`` Linear(4C, 2C, bias=False)."""

    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(4 * dim)
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x, hw):
        height, width = hw
        b, _, c = x.shape
        x = x.reshape(b, height // 2, 2, width // 2, 2, c).permute(0, 1, 3, 4, 2, 5).reshape(
            b, (height // 2) * (width // 2), 4 * c)
        return self.reduction(self.norm(x)), (height // 2, width // 2)


class SwinStage(nn.Module):
    """``downsample`` (PatchMerging, or Identity in stage 1) then ``blocks``."""

    def __init__(self, downsample, blocks):
        super().__init__()
        self.downsample = downsample
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x, hw):
        if not isinstance(self.downsample, nn.Identity):
            x, hw = self.downsample(x, hw)
        for block in self.blocks:
            x = block(x, hw)
        return x, hw


class ClassifierHead(nn.Module):
    """Holds the classifier under timm's name (``head.fc``)."""

    def __init__(self, dim, num_classes):
        super().__init__()
        self.fc = nn.Linear(dim, num_classes)

    def forward(self, x):
        return self.fc(x)


class SwinTransformer(nn.Module):
    """Swin backbone + classifier; ``block_kinds[stage][block]`` is "local", "global", "effatt", "agent" or
    "flatten" (see the module docstring). ``window_size`` is the W-MSA window of the "local" blocks."""

    def __init__(self, arch, img_size, num_classes, embed_dim, depths, num_heads, block_kinds, window_size,
                 agent_num=AGENT_NUM, mlp_ratio=4.0):
        super().__init__()
        self.arch = arch
        self.img_size = img_size
        self.window_size = window_size
        self.block_kinds = [list(kinds) for kinds in block_kinds]
        self.check_resolution(img_size, img_size)
        dims = [embed_dim * 2 ** i for i in range(4)]
        sides = stage_sides(img_size)
        self.patch_embed = PatchEmbed(embed_dim)
        self.layers = nn.ModuleList()
        for stage, (dim, depth, heads, side) in enumerate(zip(dims, depths, num_heads, sides)):
            blocks = [PreNormBlock(dim, self._attention(block_kinds[stage][index], index, dim, heads, side,
                                                        window_size, agent_num[stage]), mlp_ratio)
                      for index in range(depth)]
            self.layers.append(SwinStage(PatchMerging(dims[stage - 1]) if stage else nn.Identity(), blocks))
        self.norm = nn.LayerNorm(dims[-1])
        self.head = ClassifierHead(dims[-1], num_classes)
        init_weights(self)

    @staticmethod
    def _attention(kind, index, dim, heads, side, window_size, agent_num):
        if kind == "local":
            # timm builds a stage whose map is no larger than the window with one window of the map's size
            window = min(window_size, side)
            shift = window // 2 if index % 2 and side > window else 0
            return ShiftedWindowAttention(dim, heads, window_size=window, shift_size=shift)
        if kind == "global":
            return MultiHeadSoftmaxAttention(dim, heads, lepe=True)
        if kind == "effatt":
            return EfficientAttention(dim, heads, lepe=True)
        if kind == "agent":
            return AgentAttention(dim, heads, agent_num, (side, side))
        if kind == "flatten":
            return FocusedLinearAttention(dim, heads, (side, side))
        raise ValueError("unknown block kind {!r}".format(kind))

    def check_resolution(self, height, width):
        """Raise EdgeAttnError unless the model's structure takes an H x W input."""
        if height != width or height % 32 or height < 32:
            raise EdgeAttnError("{}: input {}x{} must be square and a multiple of 32 (patch 4, then three 2x2 "
                                "merges)".format(self.arch, height, width))
        kinds = set(k for stage in self.block_kinds for k in stage)
        fixed = kinds & {"agent", "flatten"}
        if fixed and height != self.img_size:
            raise EdgeAttnError("{}: built for {}x{}; its {} blocks have per-position parameters, so rebuild it for "
                                "{}x{}".format(self.arch, self.img_size, self.img_size, "/".join(sorted(fixed)),
                                               height, width))
        if "local" in kinds:
            built = stage_sides(self.img_size)
            for stage, side in enumerate(stage_sides(height)):
                window = min(self.window_size, built[stage])
                if "local" in self.block_kinds[stage] and side < window:
                    raise EdgeAttnError("{}: stage {} map {}x{} is smaller than its {}x{} window; build the model "
                                        "for {}x{}".format(self.arch, stage + 1, side, side, window, window, height,
                                                           width))

    def forward_features(self, x):
        height, width = check_image(self.arch, x)
        if (height, width) != (self.img_size, self.img_size):
            self.check_resolution(height, width)
        x, hw = self.patch_embed(x)
        for stage in self.layers:
            x, hw = stage(x, hw)
        return self.norm(x).mean(dim=1)

    def forward(self, x):
        return self.head(self.forward_features(x))


def _check_window(arch, img_size, window_size):
    if window_size is None:
        return max(1, img_size // 32)
    if isinstance(window_size, bool) or not isinstance(window_size, int) or window_size < 1:
        raise EdgeAttnError("{}: window_size must be a positive integer, got {!r}".format(arch, window_size))
    return window_size


def _layout_kinds(layout, depths, efficient):
    """Per-block kinds from an official A/B (L/S) stage layout; ``efficient`` is the A/L kind."""
    kinds = []
    for code, depth in zip(layout, depths):
        if code in ("A", "L"):
            kinds.append([efficient] * depth)
        elif code in ("B", "S"):
            kinds.append(["local"] * depth)
        else:  # "M<k>"
            first = int(code[1:])
            kinds.append([efficient if i < first else "local" for i in range(depth)])
    return kinds


def _build(arch, img_size, num_classes, spec, attention, window_size=None, hybrid=None, agent_layout=None):
    if isinstance(img_size, int) and (img_size % 32 or img_size < 32):
        raise EdgeAttnError("{}: input {}x{} must be square and a multiple of 32 (patch 4, then three 2x2 "
                            "merges)".format(arch, img_size, img_size))
    window = _check_window(arch, img_size, window_size)
    depths = spec["depths"]
    if attention == "local":
        kinds = [["local"] * d for d in depths]
    elif attention == "global":
        kinds = [["global"] * d for d in depths]
    elif attention == "effatt":
        patterns = hybrid if hybrid is not None else ["none", "none", "even", "none"]
        if isinstance(patterns, str) or len(patterns) != 4:
            raise EdgeAttnError("hybrid must list one pattern per stage (4), got {!r}".format(patterns))
        softmax_sets = [cswin.softmax_blocks(p, d, s + 1) for s, (p, d) in enumerate(zip(patterns, depths))]
        kinds = [["global" if i in softmax_sets[s] else "effatt" for i in range(d)] for s, d in enumerate(depths)]
    elif attention == "agent":
        kinds = _layout_kinds(agent_layout, depths, "agent")
    elif attention == "flatten":
        kinds = _layout_kinds(FLATTEN_LAYOUT, depths, "flatten")
    else:
        raise ValueError(attention)
    return SwinTransformer(arch, img_size, num_classes, spec["embed_dim"], depths, spec["num_heads"], kinds, window)


def _elfatt_spec(spec):
    """Swin's widths and depths with its heads split as CSWin splits them between two branches (num_heads // 2
    per half): 3 heads of 32 -> 2 heads of 48."""
    return {"embed_dim": spec["embed_dim"], "depths": spec["depths"],
            "num_heads": tuple(2 * (h // 2) for h in spec["num_heads"])}


def _paper(params, r224, r384=None, params_384=None):
    paper = {"source": ELFATT_PAPER, "params": params, "macs": {"224": list(r224)}}
    if r384 is not None:
        paper["macs"]["384"] = list(r384)
    if params_384 is not None:
        paper["params_at"] = {"384": params_384}
    return paper


# --- Swin-T ---------------------------------------------------------------------------------------------------
@register_model(family="swin", paper=_paper("28M", ("4.51G", "-")))
def swin_t_local(img_size=224, num_classes=1000, *, window_size=None):
    """Swin-T-LOCAL: Swin-T with shifted windows and relative position bias (timm swin_tiny_patch4_window7_224).

    Config: ``window_size`` (W-MSA window; default img_size // 32: 7 at 224, 12 at 384).
    """
    model = _build("swin_t_local", img_size, num_classes, SWIN_T, "local", window_size=window_size)
    model.edgeattn_config = {"window_size": window_size}
    return model


@register_model(family="swin", paper=_paper("28M", ("8.81G", "4.38G")))
def swin_t_global(img_size=224, num_classes=1000):
    """Swin-T-GLOBAL: full-map softmax attention with full-map LePE in every block (no windows, no shift)."""
    model = _build("swin_t_global", img_size, num_classes, SWIN_T, "global")
    model.edgeattn_config = {}
    return model


@register_model(family="swin", paper=_paper("28M", ("4.55G", "4.45G")))
def swin_t_effatt(img_size=224, num_classes=1000, *, hybrid=None):
    """Swin-T-EFFATT: EFFATT (32-wide heads, LePE) with the hybrid stage 3 (even blocks VaniATT).

    Config: ``hybrid`` (per stage "none" | "all" | "even" | "odd" | list of VaniATT block indices; default
    ["none", "none", "even", "none"]).
    """
    model = _build("swin_t_effatt", img_size, num_classes, SWIN_T, "effatt", hybrid=hybrid)
    model.edgeattn_config = {"hybrid": hybrid}
    return model


@register_model(family="swin", paper=_paper("30M", ("4.99G", "4.67G")))
def swin_t_elfatt(img_size=224, num_classes=1000, *, block_sizes=None, hybrid=None, global_ratio=0.5, lepe=True,
                  padding="none"):
    """Swin-T-ELFATT: CSWin skeleton with Swin-T's widths/depths, ELFATT blocks 196-196-196-49, hybrid stage 3.

    Config: as cswin_t24181_elfatt (``block_sizes`` default: stage-3 map side in stages 1-3, stage-4 side in
    stage 4). Heads 2-6-12-24 (Swin-T's 3 stage-1 heads split CSWin-style into one 48-wide head per half).
    """
    model = cswin.build_cswin("swin_t_elfatt", img_size, num_classes, _elfatt_spec(SWIN_T), "elfatt",
                              block_sizes=block_sizes, default_blocks=("s3", "s3", "s3", "s4"), hybrid=hybrid,
                              global_ratio=global_ratio, lepe=lepe, padding=padding)
    model.edgeattn_config = {"block_sizes": block_sizes, "hybrid": hybrid, "global_ratio": global_ratio,
                             "lepe": lepe, "padding": padding}
    return model


@register_model(family="swin", paper=_paper("29M", ("4.53G", "-")))
def swin_t_agent(img_size=224, num_classes=1000, *, window_size=None):
    """Swin-T-Agent: Agent-Swin-T (AAAB, agents 9-16-49-49; agent attention over the whole map in stages 1-3).

    Config: ``window_size`` of the stage-4 W-MSA blocks (default img_size // 32). Runs at its built resolution.
    """
    model = _build("swin_t_agent", img_size, num_classes, SWIN_T, "agent", window_size=window_size,
                   agent_layout=AGENT_LAYOUTS["t"])
    model.edgeattn_config = {"window_size": window_size}
    return model


@register_model(family="swin", paper=_paper("29M", ("4.50G", "-")))
def swin_t_flatten(img_size=224, num_classes=1000, *, window_size=None):
    """Swin-T-FLatten: FLatten-Swin-T (LLSS: focused linear attention on the whole map in stages 1-2).

    Config: ``window_size`` of the stage-3/4 W-MSA blocks (default img_size // 32). Runs at its built resolution.
    """
    model = _build("swin_t_flatten", img_size, num_classes, SWIN_T, "flatten", window_size=window_size)
    model.edgeattn_config = {"window_size": window_size}
    return model


# --- Swin-B ---------------------------------------------------------------------------------------------------
@register_model(family="swin", paper=_paper("88M", ("15.47G", "-"), ("47.19G", "-")))
def swin_b_local(img_size=224, num_classes=1000, *, window_size=None):
    """Swin-B-LOCAL: Swin-B with shifted windows (= timm swin_base_patch4_window7_224; window12_384 at 384).

    Config: ``window_size`` (W-MSA window; default img_size // 32: 7 at 224, 12 at 384).
    """
    model = _build("swin_b_local", img_size, num_classes, SWIN_B, "local", window_size=window_size)
    model.edgeattn_config = {"window_size": window_size}
    return model


@register_model(family="swin", paper=_paper("88M", ("21.57G", "15.19G"), ("99.76G", "44.64G")))
def swin_b_global(img_size=224, num_classes=1000):
    """Swin-B-GLOBAL: full-map softmax attention with full-map LePE in every block."""
    model = _build("swin_b_global", img_size, num_classes, SWIN_B, "global")
    model.edgeattn_config = {}
    return model


@register_model(family="swin", paper=_paper("88M", ("15.69G", "15.33G"), ("48.18G", "45.04G")))
def swin_b_effatt(img_size=224, num_classes=1000, *, hybrid=None):
    """Swin-B-EFFATT: EFFATT (32-wide heads, LePE) with the hybrid stage 3 (9 VaniATT + 9 EFFATT).

    Config: ``hybrid`` (as swin_t_effatt).
    """
    model = _build("swin_b_effatt", img_size, num_classes, SWIN_B, "effatt", hybrid=hybrid)
    model.edgeattn_config = {"hybrid": hybrid}
    return model


@register_model(family="swin", paper=_paper("91M", ("16.46G", "15.68G"), ("52.79G", "46.08G")))
def swin_b_elfatt(img_size=224, num_classes=1000, *, block_sizes=None, hybrid=None, global_ratio=0.5, lepe=True,
                  padding="none"):
    """Swin-B-ELFATT: CSWin skeleton with Swin-B's widths/depths/heads, ELFATT 196-196-196-49, hybrid stage 3.

    Config: as swin_t_elfatt (576-576-576-144 blocks at 384 by default).
    """
    model = cswin.build_cswin("swin_b_elfatt", img_size, num_classes, _elfatt_spec(SWIN_B), "elfatt",
                              block_sizes=block_sizes, default_blocks=("s3", "s3", "s3", "s4"), hybrid=hybrid,
                              global_ratio=global_ratio, lepe=lepe, padding=padding)
    model.edgeattn_config = {"block_sizes": block_sizes, "hybrid": hybrid, "global_ratio": global_ratio,
                             "lepe": lepe, "padding": padding}
    return model


@register_model(family="swin", paper=_paper("88M", ("15.44G", "-"), ("46.34G", "-")))
def swin_b_agent(img_size=224, num_classes=1000, *, window_size=None):
    """Swin-B-Agent: Agent-Swin-B (AAMB2: agent attention on the whole map in stages 1-2 and the first two
    stage-3 blocks, agents 9-16-49-49).

    Config: ``window_size`` of the W-MSA blocks (default img_size // 32). Runs at its built resolution.
    """
    model = _build("swin_b_agent", img_size, num_classes, SWIN_B, "agent", window_size=window_size,
                   agent_layout=AGENT_LAYOUTS["b"])
    model.edgeattn_config = {"window_size": window_size}
    return model


@register_model(family="swin", paper=_paper("89M", ("15.46G", "-"), ("46.49G", "-"), params_384="91M"))
def swin_b_flatten(img_size=224, num_classes=1000, *, window_size=None):
    """Swin-B-FLatten: FLatten-Swin-B (LLSS); 89M at 224, 91M at 384 (positional encodings grow with the map).

    Config: ``window_size`` of the stage-3/4 W-MSA blocks (default img_size // 32). Runs at its built resolution.
    """
    model = _build("swin_b_flatten", img_size, num_classes, SWIN_B, "flatten", window_size=window_size)
    model.edgeattn_config = {"window_size": window_size}
    return model
