"""The model zoo: the papers' architectures built from :mod:`edgeattn.ops` attention modules.

::

    from edgeattn.models import create_model, list_models
    model = create_model("cswin_t24181_elfatt", img_size=224)       # (B, 3, 224, 224) -> (B, 1000) logits
    list_models("cswin*")

Registered families (each module's docstring gives the architecture, its sources and every config key):
:mod:`~edgeattn.models.cswin` (CSWin-T24181 / B36292: GLOBAL, LOCAL, EFFATT, ELFATT),
:mod:`~edgeattn.models.efficientvit` (EfficientViT-B0..B3, QT-ViT-1..3),
:mod:`~edgeattn.models.soft` (SOFT++ Tiny..Large), :mod:`~edgeattn.models.flurka` (FLuRKA on T2T-ViT-7),
:mod:`~edgeattn.models.vit` (tiny ViTs for fast tests). Parameter and MAC counts:
:mod:`edgeattn.models.complexity`.
"""
from ._registry import create_model, is_model, list_models, model_info, register_model

# Importing the family modules registers their architectures.
from . import cswin, efficientvit, flurka, soft, vit  # noqa: F401,E402  isort:skip

__all__ = ["create_model", "is_model", "list_models", "model_info", "register_model"]
