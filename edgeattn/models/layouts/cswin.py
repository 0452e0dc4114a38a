"""CSWin Transformer (microsoft/CSWin-Transformer ``models/cswin.py``) key layout, for every ``cswin_*`` model.

Upstream names: ``stage1_conv_embed`` = Sequential(Conv2d, Rearrange, LayerNorm) -> our ``stem.conv`` / ``stem.norm``;
``stage<k>.<i>`` = CSWinBlock (``qkv``, ``norm1``, ``proj``, ``attns.<j>.get_v``, ``mlp.fc1/fc2``, ``norm2``) -> our
``stages.<k-1>.<i>`` (PreNormBlock: ``norm1``, ``attn.qkv``, ``attn.proj``, ..., ``mlp``, ``norm2``);
``merge<k>`` (Merge_Block: ``conv``, ``norm``) -> ``merges.<k-1>``; ``norm``, ``head`` unchanged.

LOCAL (CSWin's own attention) loads directly. The GLOBAL, EFFATT and ELFATT variants keep CSWin's names for
everything outside attention, as ELFATT extends the CSWin code (no ELFATT code is public, so this convention is
declared here rather than read from a release), and CSWin's ``attns.<j>.get_v`` LePE convolutions map per block
kind (each block has exactly one of the candidates):

* LOCAL block (two stripe branches of C/2 channels; the last stage one full-map branch of C):
  ``attns.0.get_v`` -> ``attn.attns.0.get_v``, ``attns.1.get_v`` -> ``attn.attns.1.get_v``;
* GLOBAL, EFFATT and the hybrid stages' VaniATT blocks (one full-map LePE of C channels):
  ``attns.0.get_v`` -> ``attn.get_v``;
* ELFATT block (global head on channels [:c1], block head on [c1:], c1 = c2 = C/2 by default):
  ``attns.0.get_v`` -> ``attn.get_v_global``, ``attns.1.get_v`` -> ``attn.get_v_local``.

CSWin's branch 0 takes channels [:C/2] and branch 1 [C/2:], as ELFATT's global head takes [:c1] and its block
head [c1:], so the ELFATT mapping keeps each LePE on its own channels. A LOCAL checkpoint does not load into
ELFATT: its last-stage LePE has C channels where ELFATT has two halves.
"""
from . import Layout, Rename

MICROSOFT = Layout(
    "microsoft CSWin-Transformer",
    "microsoft/CSWin-Transformer models/cswin.py (CSWinTransformer, CSWinBlock, LePEAttention, Merge_Block)",
    ["cswin_*"],
    [
        Rename("stage1_conv_embed.0.{p}", "stem.conv.{p}"),
        Rename("stage1_conv_embed.2.{p}", "stem.norm.{p}"),
        Rename("stage{k}.{i}.qkv.{p}", "stages.{k-1}.{i}.attn.qkv.{p}"),
        Rename("stage{k}.{i}.proj.{p}", "stages.{k-1}.{i}.attn.proj.{p}"),
        Rename("stage{k}.{i}.attns.0.get_v.{p}", "stages.{k-1}.{i}.attn.attns.0.get_v.{p}",
               "stages.{k-1}.{i}.attn.get_v.{p}", "stages.{k-1}.{i}.attn.get_v_global.{p}"),
        Rename("stage{k}.{i}.attns.1.get_v.{p}", "stages.{k-1}.{i}.attn.attns.1.get_v.{p}",
               "stages.{k-1}.{i}.attn.get_v_local.{p}"),
        Rename("stage{k}.{i}.{rest}", "stages.{k-1}.{i}.{rest}"),
        Rename("merge{k}.{rest}", "merges.{k-1}.{rest}"),
        Rename("norm.{p}", "norm.{p}"),
        Rename("head.{p}", "head.{p}"),
    ],
)

LAYOUTS = [MICROSOFT]
