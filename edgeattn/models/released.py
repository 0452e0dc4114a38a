"""Released configurations with public weights that differ from the papers' tables, registered under the names
their upstream code uses so that those checkpoints load (``edgeattn export cswin_tiny_224.pth --arch
cswin_64_12211_tiny``); the key layouts are in :mod:`edgeattn.models.layouts`.

CSWin (microsoft/CSWin-Transformer ``models/cswin.py``, ``CSWin_<dim>_<depths>_<size>_224``): CSWin attention
(LOCAL) with stripes [1, 2, 7, 7] at 224 ([1, 2, 12, 12] at 384, which is the default here at every resolution:
half the stage-3 map, the whole stage-4 map), LePE, qkv bias, MLP 4x, LayerNorm eps 1e-5:

* ``cswin_64_12211_tiny``: C 64, depths 1-2-21-1, heads 2-4-8-16 (the ELFATT paper's CSWin-T is 2-4-18-1:
  ``cswin_t24181_*``);
* ``cswin_64_24322_small``: C 64, depths 2-4-32-2, heads 2-4-8-16;
* ``cswin_96_24322_base``: C 96, depths 2-4-32-2, heads 4-8-16-32 (the ELFATT paper's CSWin-B is 3-6-29-2:
  ``cswin_b36292_*``);
* ``cswin_144_24322_large``: C 144, depths 2-4-32-2, heads 6-12-24-24 (stage-4 heads are 48 wide).

SOFT++ (fudan-zvg/SOFT ``soft_norm_<size>``, weights for Tiny..Large; the IJCV paper's Table 1 describes other
Small/Medium/Large models, registered as ``softpp_small/medium/large``; ``softpp_tiny`` is already the released
Tiny): released softmax stage 4 with a class token, SOFT++ symmetric normalisation, 20 Newton-Raphson iterations:

* ``soft_norm_small``: widths 64-128-320-512, heads 2-4-10-16, depths 1-3-20-4;
* ``soft_norm_medium``: widths 64-128-288-512, heads 2-4-9-16, depths 1-3-29-5;
* ``soft_norm_large``: widths 64-128-320-512, heads 2-4-10-16, depths 1-3-40-5.

A checkpoint of any other depth or width is refused by the loader (its keys or shapes do not fit), never half
loaded.

Counts against the upstream READMEs (the "paper" entries). The parameter counts here equal those of an
independent, parameter-only transcription of the upstream modules (tests/fixtures/layouts). CSWin-S/B/L
parameters agree with the README within 1 %; CSWin-T is 22.32M where the README says 23M (its 4.32 GMACs match
4.3G). MACs: T and B match; S is 6.80 G (README 6.9G, -1.4 %) and L 33.13 G (31.5G, +5 %), unexplained with
the counter that matches T and B.
SOFT-Small-Norm: the README row (24M, 3.3G, printed alike for SOFT-Small) does not describe the code's
soft_norm_small (depths 1-3-20-4 at widths 64-128-320-512 hold 38.86M; unexplained upstream); Medium/Large are
within 2 % (45.81M, 64.70M) and 2-3 % in GFLOPs without Newton-Raphson (7.39, 11.23 vs 7.2, 11.0).
"""
from . import cswin, soft
from ._registry import register_model

CSWIN_README = "CSWin README (microsoft/CSWin-Transformer, ImageNet table)"
SOFT_README = "SOFT README (fudan-zvg/SOFT, ImageNet table, *-Norm rows)"


def _cswin(arch, img_size, num_classes, embed_dim, depths, num_heads, split_size):
    spec = {"embed_dim": embed_dim, "depths": depths, "num_heads": num_heads}
    model = cswin.build_cswin(arch, img_size, num_classes, spec, "local", split_size=split_size)
    model.edgeattn_config = {"split_size": split_size}
    return model


def _cswin_paper(params, macs224, macs384=None):
    macs = {"224": [macs224]}
    if macs384:
        macs["384"] = [macs384]
    return {"source": CSWIN_README, "params": params, "macs": macs}


@register_model(family="cswin", paper=_cswin_paper("23M", "4.3G"))
def cswin_64_12211_tiny(img_size=224, num_classes=1000, *, split_size=None):
    """CSWin-T as released (CSWin_64_12211_tiny_224): C 64, depths 1-2-21-1, heads 2-4-8-16, CSWin attention.

    Config: ``split_size`` (4 stripe widths; default [1, 2, s3/2, s4] = [1, 2, 7, 7] at 224).
    """
    return _cswin("cswin_64_12211_tiny", img_size, num_classes, 64, (1, 2, 21, 1), (2, 4, 8, 16), split_size)


@register_model(family="cswin", paper=_cswin_paper("35M", "6.9G"))
def cswin_64_24322_small(img_size=224, num_classes=1000, *, split_size=None):
    """CSWin-S as released (CSWin_64_24322_small_224): C 64, depths 2-4-32-2, heads 2-4-8-16, CSWin attention.

    Config: ``split_size``.
    """
    return _cswin("cswin_64_24322_small", img_size, num_classes, 64, (2, 4, 32, 2), (2, 4, 8, 16), split_size)


@register_model(family="cswin", paper=_cswin_paper("78M", "15.0G", "47.0G"))
def cswin_96_24322_base(img_size=224, num_classes=1000, *, split_size=None):
    """CSWin-B as released (CSWin_96_24322_base_224/384): C 96, depths 2-4-32-2, heads 4-8-16-32.

    Config: ``split_size`` (default [1, 2, 12, 12] at 384, as CSWin_96_24322_base_384).
    """
    return _cswin("cswin_96_24322_base", img_size, num_classes, 96, (2, 4, 32, 2), (4, 8, 16, 32), split_size)


@register_model(family="cswin", paper=_cswin_paper("173M", "31.5G", "96.8G"))
def cswin_144_24322_large(img_size=224, num_classes=1000, *, split_size=None):
    """CSWin-L as released (CSWin_144_24322_large_224/384): C 144, depths 2-4-32-2, heads 6-12-24-24.

    Config: ``split_size``. The ImageNet-22K checkpoint needs ``num_classes=21841``.
    """
    return _cswin("cswin_144_24322_large", img_size, num_classes, 144, (2, 4, 32, 2), (6, 12, 24, 24),
                  split_size)


def _soft_paper(params, macs):
    return {"source": SOFT_README, "params": params, "macs": {"224": [macs]},
            "note": "README FLOPs exclude the Newton-Raphson iterations"}


def _soft(arch, img_size, num_classes, embed_dims, num_heads, depths, newton_iters, symmetric_norm):
    model = soft._build(arch, img_size, num_classes, embed_dims, num_heads, depths, "softmax", newton_iters,
                        symmetric_norm)
    model.edgeattn_config = {"newton_iters": newton_iters, "symmetric_norm": bool(symmetric_norm)}
    return model


@register_model(family="softpp", paper=_soft_paper("24M", "3.3G"))
def soft_norm_small(img_size=224, num_classes=1000, *, newton_iters=20, symmetric_norm=True):
    """SOFT++-Small as released (soft_norm_small): widths 64-128-320-512, heads 2-4-10-16, depths 1-3-20-4.

    Config: ``newton_iters`` (20), ``symmetric_norm`` (True = SOFT++).
    """
    return _soft("soft_norm_small", img_size, num_classes, [64, 128, 320, 512], [2, 4, 10, 16], [1, 3, 20, 4],
                 newton_iters, symmetric_norm)


@register_model(family="softpp", paper=_soft_paper("45M", "7.2G"))
def soft_norm_medium(img_size=224, num_classes=1000, *, newton_iters=20, symmetric_norm=True):
    """SOFT++-Medium as released (soft_norm_medium): widths 64-128-288-512, heads 2-4-9-16, depths 1-3-29-5.

    Config: as soft_norm_small.
    """
    return _soft("soft_norm_medium", img_size, num_classes, [64, 128, 288, 512], [2, 4, 9, 16], [1, 3, 29, 5],
                 newton_iters, symmetric_norm)


@register_model(family="softpp", paper=_soft_paper("64M", "11.0G"))
def soft_norm_large(img_size=224, num_classes=1000, *, newton_iters=20, symmetric_norm=True):
    """SOFT++-Large as released (soft_norm_large): widths 64-128-320-512, heads 2-4-10-16, depths 1-3-40-5.

    Config: as soft_norm_small.
    """
    return _soft("soft_norm_large", img_size, num_classes, [64, 128, 320, 512], [2, 4, 10, 16], [1, 3, 40, 5],
                 newton_iters, symmetric_norm)
