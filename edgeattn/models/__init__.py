"""The model zoo: the papers' architectures built from :mod:`edgeattn.ops` attention modules.

::

    from edgeattn.models import create_model, list_models
    model = create_model("cswin_t24181_elfatt", img_size=224)       # (B, 3, 224, 224) -> (B, 1000) logits
    list_models("cswin*")

Registered families (each module's docstring gives the architecture, its sources and every config key):
:mod:`~edgeattn.models.cswin` (CSWin-T24181 / B36292: GLOBAL, LOCAL, EFFATT, ELFATT, Agent, FLatten),
:mod:`~edgeattn.models.swin` (Swin-T / Swin-B in the same six variants),
:mod:`~edgeattn.models.efficientvit` (EfficientViT-B0..B3, QT-ViT-1..3),
:mod:`~edgeattn.models.soft` (SOFT++ Tiny..Large), :mod:`~edgeattn.models.flurka` (FLuRKA on T2T-ViT-7),
:mod:`~edgeattn.models.vit` (ViT-B/16 with the Multi-Spot substitution, tiny ViTs for fast tests), and the
released configurations with public weights (:mod:`~edgeattn.models.released`: CSWin-T/S/B/L, SOFT++
Small/Medium/Large as released). Official checkpoint
key layouts: :mod:`edgeattn.models.layouts`; saving and loading checkpoints (state dicts, official layouts,
``.safetensors``): :mod:`edgeattn.models.checkpoint`. Parameter and MAC counts: :mod:`edgeattn.models.complexity`.
"""
from ._registry import create_model, is_model, list_models, model_info, register_model

# Importing the family modules registers their architectures.
from . import cswin, efficientvit, flurka, soft, swin, vit  # noqa: F401,E402  isort:skip
from . import released  # noqa: F401,E402  isort:skip  (after the families it builds on)

__all__ = ["create_model", "is_model", "list_models", "model_info", "register_model"]
