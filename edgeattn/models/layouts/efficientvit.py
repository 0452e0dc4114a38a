"""EfficientViT-B0..B3 / QT-ViT-1..3: timm and mit-han-lab key layouts.

Both upstream models have exactly our module structure (edgeattn.models.efficientvit); only names differ:

* timm ``efficientvit_b0..b3`` (huggingface/pytorch-image-models ``timm/models/efficientvit_mit.py``): ``stem.in_conv``
  + ``stem.res<i>``; ``stages.<s>.blocks.<i>`` where every block is a ResidualBlock (``.main``), also the first
  (stride-2) one, which has no shortcut and is our bare MBConv; ``head.in_conv``, ``head.classifier`` =
  Sequential(Linear, LayerNorm, Hardswish, Dropout, Linear) -> indices 0, 1, 4. timm's LiteMLA divides by
  ``denominator + 1e-5`` where the EfficientViT code uses 1e-15, so a timm checkpoint builds the model with
  ``eps=1e-5`` (the logits then match timm's).
* mit-han-lab/efficientvit (``efficientvit/models/efficientvit/backbone.py``, ``cls.py``, ``nn/ops.py``):
  ``backbone.input_stem.op_list.<i>``, ``backbone.stages.<s>.op_list.<i>`` (OpSequential of ResidualBlocks),
  ``head.op_list`` = [ConvLayer, AdaptiveAvgPool2d, LinearLayer(linear, norm=LayerNorm), LinearLayer(linear)].
  QT-ViT released no code; its checkpoints are taken to be this layout with the kernel's ``qt_alpha``,
  ``qt_beta``, ``qt_gamma`` inside each LiteMLA (``...context_module.main.qt_alpha``), which the generic stage
  rule carries over unchanged.
"""
from . import Layout, Rename

TIMM = Layout(
    "timm efficientvit_mit",
    "huggingface/pytorch-image-models timm/models/efficientvit_mit.py (EfficientVit, LiteMLA eps=1e-5)",
    ["efficientvit_b[0-3]"],
    [
        Rename("stem.in_conv.{rest}", "input_stem.0.{rest}"),
        Rename("stem.res{i}.{rest}", "input_stem.{i+1}.{rest}"),
        Rename("stages.{s}.blocks.0.main.{rest}", "stages.{s}.0.{rest}"),
        Rename("stages.{s}.blocks.{i}.{rest}", "stages.{s}.{i}.{rest}"),
        Rename("head.in_conv.{rest}", "head_conv.{rest}"),
        Rename("head.classifier.0.{p}", "head_fc.{p}"),
        Rename("head.classifier.1.{p}", "head_norm.{p}"),
        Rename("head.classifier.4.{p}", "classifier.{p}"),
    ],
    config={"eps": 1e-5},
    notes="LiteMLA eps 1e-5 as in timm",
)

MIT_HAN_LAB = Layout(
    "mit-han-lab efficientvit",
    "mit-han-lab/efficientvit efficientvit/models/efficientvit/{backbone,cls}.py, nn/ops.py (LiteMLA eps=1e-15)",
    ["efficientvit_b[0-3]", "qtvit_[1-3]"],
    [
        Rename("backbone.input_stem.op_list.{i}.{rest}", "input_stem.{i}.{rest}"),
        Rename("backbone.stages.{s}.op_list.0.main.{rest}", "stages.{s}.0.{rest}"),
        Rename("backbone.stages.{s}.op_list.{i}.{rest}", "stages.{s}.{i}.{rest}"),
        Rename("head.op_list.0.{rest}", "head_conv.{rest}"),
        Rename("head.op_list.2.linear.{p}", "head_fc.{p}"),
        Rename("head.op_list.2.norm.{p}", "head_norm.{p}"),
        Rename("head.op_list.3.linear.{p}", "classifier.{p}"),
    ],
    config={"eps": 1e-15},
    notes="LiteMLA eps 1e-15 as in the EfficientViT code",
)

LAYOUTS = [TIMM, MIT_HAN_LAB]
