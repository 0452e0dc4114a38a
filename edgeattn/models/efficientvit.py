"""EfficientViT-B0..B3 (ReLU LiteMLA) and QT-ViT-1..3 (the same backbones with the quadratic Taylor kernel).

EfficientViT (Cai et al., ICCV 2023; mit-han-lab/efficientvit ``efficientvit/models/efficientvit/backbone.py``
/ ``cls.py``, B-series configs ``efficientvit_backbone_b0..b3``). NCHW throughout, BatchNorm + Hardswish:

* input stem: ``Conv3x3 s2`` (BN, hswish) then ``depths[0]`` residual DSConvs (dw3x3 BN hswish -> pw1x1 BN);
* stages 1-2: MBConv (expand 4; BN after every conv, hswish after the first two), the first one stride 2 without
  shortcut, the rest residual;
* stages 3-4: a stride-2 MBConv with "fewer norm" (biases, BN only after the projection, no shortcut), then
  ``depths[i]`` EfficientViT blocks = residual :class:`~edgeattn.ops.litemla.LiteMLA` (qkv 1x1 conv, 5x5
  multi-scale aggregation, linear attention per head of width ``dim``, 1x1 projection + BN) followed by a residual
  fewer-norm MBConv;
* classifier: ``Conv1x1 -> head_widths[0]`` (BN, hswish), global average pool,
  ``Linear(no bias) -> head_widths[1]`` + LayerNorm + hswish, ``Linear -> num_classes``.

QT-ViT (Xu et al., "QT-ViT: Improving Linear Attention in ViT with Quadratic Taylor Expansion", NeurIPS 2024
poster) swaps LiteMLA's ReLU feature map for
phi(x) = [alpha x*x, beta sqrt(4/d) x, gamma] with learnable alpha, beta, gamma: by default one set per LiteMLA
layer (``qt_params="layer"``: +3 parameters per LiteMLA, +21 / +30 / +45 for QT-ViT-1/2/3), or one per head
group (``qt_params="head"``). The poster's detection-model parameter deltas (+0.3 / +0.5 / +1.0 M) cannot come
from alpha, beta, gamma (a few dozen parameters) and the poster does not explain them, so they are not reproduced.
QT-ViT-1/2/3 are
the B1/B2/B3 backbones.

Any input resolution of at least 32 works (every conv is 'same'-padded); the reported numbers are at 224.

Parameter names are those of the EfficientViT code's modules; checkpoints from timm (``efficientvit_b0..b3``) and
mit-han-lab load through :mod:`edgeattn.models.layouts.efficientvit`. timm's LiteMLA uses ``eps=1e-5`` where the
EfficientViT code uses 1e-15, so a timm checkpoint builds the model with ``eps=1e-5`` (config key ``eps``).
"""
import torch.nn as nn

from ..errors import EdgeAttnError
from ._layers import ConvNormAct, DSConv, MBConv, Residual, check_image, init_weights
from ._registry import register_model

#: width_list, depth_list, dim (head width), head_widths; from mit-han-lab/efficientvit backbone.py and cls.py
CONFIGS = {
    "b0": ([8, 16, 32, 64, 128], [1, 2, 2, 2, 2], 16, [1024, 1280]),
    "b1": ([16, 32, 64, 128, 256], [1, 2, 3, 3, 4], 16, [1536, 1600]),
    "b2": ([24, 48, 96, 192, 384], [1, 3, 4, 4, 6], 32, [2304, 2560]),
    "b3": ([32, 64, 128, 256, 512], [1, 4, 6, 6, 9], 32, [2304, 2560]),
}
EFFICIENTVIT_README = "EfficientViT (mit-han-lab/efficientvit applications/efficientvit_cls README)"
QT_KERNEL = "quadratic_taylor"


def _lite_mla(channels, dim, kernel, qt_params, scales, eps):
    from ..ops.litemla import LiteMLA

    return LiteMLA(channels, channels, dim=dim, kernel=kernel, qt_params=qt_params, scales=tuple(scales), eps=eps)


class EfficientViTBlock(nn.Module):
    """Residual LiteMLA (context) followed by a residual fewer-norm MBConv (local)."""

    def __init__(self, channels, dim, expand_ratio, kernel, qt_params, scales, eps):
        super().__init__()
        self.context_module = Residual(_lite_mla(channels, dim, kernel, qt_params, scales, eps))
        self.local_module = Residual(MBConv(channels, channels, 1, expand_ratio, fewer_norm=True))

    def forward(self, x):
        return self.local_module(self.context_module(x))


class EfficientViT(nn.Module):
    """EfficientViT-B classification model (backbone + ClsHead), see the module docstring."""

    def __init__(self, arch, img_size, num_classes, width_list, depth_list, dim, head_widths, expand_ratio=4,
                 kernel="relu", qt_params="layer", scales=(5,), eps=1e-15):
        super().__init__()
        self.arch = arch
        self.check_resolution(img_size, img_size)
        stem = [ConvNormAct(3, width_list[0], 3, stride=2, act="hswish")]
        stem += [Residual(DSConv(width_list[0], width_list[0])) for _ in range(depth_list[0])]
        self.input_stem = nn.Sequential(*stem)
        stages = []
        channels = width_list[0]
        for width, depth in zip(width_list[1:3], depth_list[1:3]):
            blocks = []
            for index in range(depth):
                block = MBConv(channels, width, 2 if index == 0 else 1, expand_ratio)
                blocks.append(block if index == 0 else Residual(block))
                channels = width
            stages.append(nn.Sequential(*blocks))
        for width, depth in zip(width_list[3:], depth_list[3:]):
            blocks = [MBConv(channels, width, 2, expand_ratio, fewer_norm=True)]
            channels = width
            blocks += [EfficientViTBlock(channels, dim, expand_ratio, kernel, qt_params, scales, eps)
                       for _ in range(depth)]
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.ModuleList(stages)
        self.head_conv = ConvNormAct(channels, head_widths[0], 1, act="hswish")
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head_fc = nn.Linear(head_widths[0], head_widths[1], bias=False)
        self.head_norm = nn.LayerNorm(head_widths[1])
        self.head_act = nn.Hardswish()
        self.classifier = nn.Linear(head_widths[1], num_classes)
        init_weights(self)

    def check_resolution(self, height, width):
        if min(height, width) < 32:
            raise EdgeAttnError("{}: input {}x{} is too small; the five stride-2 stages need at least 32x32".format(
                self.arch, height, width))

    def forward(self, x):
        height, width = check_image(self.arch, x)
        self.check_resolution(height, width)
        x = self.input_stem(x)
        for stage in self.stages:
            x = stage(x)
        x = self.pool(self.head_conv(x)).flatten(1)
        return self.classifier(self.head_act(self.head_norm(self.head_fc(x))))


def _build(arch, variant, img_size, num_classes, kernel, qt_params="layer", scales=(5,), eps=1e-15):
    width_list, depth_list, dim, head_widths = CONFIGS[variant]
    if qt_params not in ("layer", "head"):
        raise EdgeAttnError("{}: qt_params must be 'layer' or 'head', got {!r}".format(arch, qt_params))
    if isinstance(scales, (str, bytes)) or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 or s % 2 == 0
                                               for s in scales):
        raise EdgeAttnError("{}: scales must be odd positive kernel sizes, got {!r}".format(arch, scales))
    model = EfficientViT(arch, img_size, num_classes, width_list, depth_list, dim, head_widths, kernel=kernel,
                         qt_params=qt_params, scales=scales, eps=eps)
    config = {"scales": list(scales), "eps": eps}
    if kernel == QT_KERNEL:
        config["qt_params"] = qt_params
    model.edgeattn_config = config
    return model


def _readme(params, macs=None):
    paper = {"source": EFFICIENTVIT_README, "params": params}
    if macs:
        paper["macs"] = {"224": [macs]}
    return paper


@register_model(family="efficientvit", paper={"source": "analytic count of the official B0 config (mit-han-lab/efficientvit backbone.py)"})
def efficientvit_b0(img_size=224, num_classes=1000, *, scales=(5,), eps=1e-15):
    """EfficientViT-B0 (widths 8-16-32-64-128, depths 1-2-2-2-2, head width 16), ReLU LiteMLA; 3.41M params.

    Config: ``scales`` (multi-scale aggregation kernels, (5,)), ``eps`` (normaliser eps, 1e-15 as released).
    """
    return _build("efficientvit_b0", "b0", img_size, num_classes, "relu", scales=scales, eps=eps)


@register_model(family="efficientvit", paper=_readme("9.1M", "0.52G"))
def efficientvit_b1(img_size=224, num_classes=1000, *, scales=(5,), eps=1e-15):
    """EfficientViT-B1 (widths 16-32-64-128-256, depths 1-2-3-3-4, head width 16), ReLU LiteMLA; 9.10M params.

    Config: ``scales``, ``eps``.
    """
    return _build("efficientvit_b1", "b1", img_size, num_classes, "relu", scales=scales, eps=eps)


@register_model(family="efficientvit", paper=_readme("24M", "1.6G"))
def efficientvit_b2(img_size=224, num_classes=1000, *, scales=(5,), eps=1e-15):
    """EfficientViT-B2 (widths 24-48-96-192-384, depths 1-3-4-4-6, head width 32), ReLU LiteMLA; 24.33M params.

    Config: ``scales``, ``eps``.
    """
    return _build("efficientvit_b2", "b2", img_size, num_classes, "relu", scales=scales, eps=eps)


@register_model(family="efficientvit", paper=_readme("49M", "4.0G"))
def efficientvit_b3(img_size=224, num_classes=1000, *, scales=(5,), eps=1e-15):
    """EfficientViT-B3 (widths 32-64-128-256-512, depths 1-4-6-6-9, head width 32), ReLU LiteMLA; 48.65M params.

    Config: ``scales``, ``eps``.
    """
    return _build("efficientvit_b3", "b3", img_size, num_classes, "relu", scales=scales, eps=eps)


_QT_SOURCE = {"source": "QT-ViT poster: no ImageNet table; backbone = EfficientViT-B{} + 3 params per LiteMLA"}


@register_model(family="qtvit", paper={"source": _QT_SOURCE["source"].format(1)})
def qtvit_1(img_size=224, num_classes=1000, *, qt_params="layer", scales=(5,), eps=1e-15):
    """QT-ViT-1: EfficientViT-B1 with the quadratic Taylor kernel in every LiteMLA (one alpha/beta/gamma per layer).

    Config: ``qt_params`` ("layer" | "head": where alpha, beta, gamma live), ``scales``, ``eps``.
    """
    return _build("qtvit_1", "b1", img_size, num_classes, QT_KERNEL, qt_params=qt_params, scales=scales, eps=eps)


@register_model(family="qtvit", paper={"source": _QT_SOURCE["source"].format(2)})
def qtvit_2(img_size=224, num_classes=1000, *, qt_params="layer", scales=(5,), eps=1e-15):
    """QT-ViT-2: EfficientViT-B2 with the quadratic Taylor kernel in every LiteMLA (one alpha/beta/gamma per layer).

    Config: ``qt_params``, ``scales``, ``eps``.
    """
    return _build("qtvit_2", "b2", img_size, num_classes, QT_KERNEL, qt_params=qt_params, scales=scales, eps=eps)


@register_model(family="qtvit", paper={"source": _QT_SOURCE["source"].format(3)})
def qtvit_3(img_size=224, num_classes=1000, *, qt_params="layer", scales=(5,), eps=1e-15):
    """QT-ViT-3: EfficientViT-B3 with the quadratic Taylor kernel in every LiteMLA (one alpha/beta/gamma per layer).

    Config: ``qt_params``, ``scales``, ``eps``.
    """
    return _build("qtvit_3", "b3", img_size, num_classes, QT_KERNEL, qt_params=qt_params, scales=scales, eps=eps)
