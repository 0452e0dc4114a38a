"""edgeattn: efficient-attention vision transformers from PyTorch to TensorRT on NVIDIA Jetson.

``import edgeattn`` stays light (no torch, no onnx) because the same package runs on the board for build, bench
and sweep. Torch-backed helpers are loaded on first use.
"""
from ._version import __version__
from .errors import EdgeAttnError

__all__ = ["__version__", "EdgeAttnError", "save_checkpoint", "load_checkpoint", "create_model", "list_models"]

_LAZY = {
    "save_checkpoint": ("edgeattn.models.checkpoint", "save_checkpoint"),
    "load_checkpoint": ("edgeattn.models.checkpoint", "load_checkpoint"),
    "create_model": ("edgeattn.models", "create_model"),
    "list_models": ("edgeattn.models", "list_models"),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module_name, attribute = _LAZY[name]
        return getattr(importlib.import_module(module_name), attribute)
    raise AttributeError("module 'edgeattn' has no attribute {!r}".format(name))
