"""SOFT / SOFT++ (fudan-zvg/SOFT ``models/softmax_free_vision_transformer.py``, ``softmax_free_transformer.py``)
key layout, for ``softpp_*`` and the released ``soft_norm_*`` configurations.

Upstream names -> ours:

* ``patch_embed1.proj`` = Sequential(Conv, BN, ReLU, Conv, BN, ReLU, Conv, BN, ReLU): indices 0/1, 3/4, 6/7 ->
  ``embeds.0.<0|1|2>.<0|1>``; ``patch_embed<k>.proj`` (Conv, BN, ReLU), k = 2..4 -> ``embeds.<k-1>.<0|1>``;
* ``pos_embed<k>`` -> ``pos_embeds.<k-1>``; ``cls_token``, ``norm``, ``head`` unchanged;
* SOFT blocks ``block<k>.<i>.att`` (SoftmaxFreeTransformer, post-LN): ``mha.W_q``, ``mha.W_v``,
  ``mha.attn.Qlandmark_op`` (landmark conv), ``mha.attn.Qnorm_act.0`` (its LayerNorm), ``mha.attn.conv`` (the
  per-head depthwise conv on V), ``mha.ff`` (output projection), ``norm1``, ``ff1``, ``ff2``, ``norm2`` ->
  ``stages.<k-1>.<i>`` ``attn.W_q``, ``attn.W_v``, ``attn.landmark_conv``, ``attn.landmark_norm``,
  ``attn.dwconv``, ``attn.proj``, ``norm1``, ``mlp.fc1``, ``mlp.fc2``, ``norm2``;
* the released softmax stage 4 ``block4.<i>`` (pre-LN Block): its ``attn.q`` (C -> C) and ``attn.kv``
  (C -> 2C, laid out [k | v]) become our ``attn.qkv`` ([q | k | v]) by concatenation along the output rows;
  ``norm1``, ``attn.proj``, ``norm2``, ``mlp.fc1/fc2`` keep their names.
"""
from . import Concat, Layout, Rename

FUDAN = Layout(
    "fudan-zvg SOFT",
    "fudan-zvg/SOFT models/softmax_free_vision_transformer.py, softmax_free_transformer.py (soft_norm_*)",
    ["softpp_*", "soft_norm_*"],
    [
        Concat(("block4.{i}.attn.q.{p}", "block4.{i}.attn.kv.{p}"), "stages.3.{i}.attn.qkv.{p}"),
        Rename("patch_embed1.proj.0.{p}", "embeds.0.0.0.{p}"),
        Rename("patch_embed1.proj.1.{p}", "embeds.0.0.1.{p}"),
        Rename("patch_embed1.proj.3.{p}", "embeds.0.1.0.{p}"),
        Rename("patch_embed1.proj.4.{p}", "embeds.0.1.1.{p}"),
        Rename("patch_embed1.proj.6.{p}", "embeds.0.2.0.{p}"),
        Rename("patch_embed1.proj.7.{p}", "embeds.0.2.1.{p}"),
        Rename("patch_embed{k}.proj.0.{p}", "embeds.{k-1}.0.{p}"),
        Rename("patch_embed{k}.proj.1.{p}", "embeds.{k-1}.1.{p}"),
        Rename("pos_embed{k}", "pos_embeds.{k-1}"),
        Rename("cls_token", "cls_token"),
        Rename("block{k}.{i}.att.mha.W_q.{p}", "stages.{k-1}.{i}.attn.W_q.{p}"),
        Rename("block{k}.{i}.att.mha.W_v.{p}", "stages.{k-1}.{i}.attn.W_v.{p}"),
        Rename("block{k}.{i}.att.mha.attn.Qlandmark_op.{p}", "stages.{k-1}.{i}.attn.landmark_conv.{p}"),
        Rename("block{k}.{i}.att.mha.attn.Qnorm_act.0.{p}", "stages.{k-1}.{i}.attn.landmark_norm.{p}"),
        Rename("block{k}.{i}.att.mha.attn.conv.{p}", "stages.{k-1}.{i}.attn.dwconv.{p}"),
        Rename("block{k}.{i}.att.mha.ff.{p}", "stages.{k-1}.{i}.attn.proj.{p}"),
        Rename("block{k}.{i}.att.norm1.{p}", "stages.{k-1}.{i}.norm1.{p}"),
        Rename("block{k}.{i}.att.ff1.{p}", "stages.{k-1}.{i}.mlp.fc1.{p}"),
        Rename("block{k}.{i}.att.ff2.{p}", "stages.{k-1}.{i}.mlp.fc2.{p}"),
        Rename("block{k}.{i}.att.norm2.{p}", "stages.{k-1}.{i}.norm2.{p}"),
        Rename("block4.{i}.{rest}", "stages.3.{i}.{rest}"),
        Rename("norm.{p}", "norm.{p}"),
        Rename("head.{p}", "head.{p}"),
    ],
)

LAYOUTS = [FUDAN]
