"""Import timm without torchvision.

timm imports torchvision at module level (FrozenBatchNorm2d, transforms), but torchvision's PyPI wheel pulls another
torch over the CPU build this project pins, so it is not installed. The models the tests use never touch
torchvision; a stand-in package whose every attribute is an inert placeholder class lets ``import timm`` succeed.
Call :func:`import_timm` (it skips the test when timm itself is missing).
"""
import importlib.abc
import importlib.machinery
import sys
import types

import pytest


class _PlaceholderType(type):
    def __getattr__(cls, name):
        # enum members used as dict keys at import time (InterpolationMode.NEAREST): any distinct value will do
        if name.startswith("__"):
            raise AttributeError(name)
        return "{}.{}".format(cls.__name__, name)


class _Placeholder(object, metaclass=_PlaceholderType):
    """Stands in for any torchvision class or function; using it fails loudly."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("torchvision is stubbed in the tests; this timm path needs the real package")


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        placeholder = type(name, (_Placeholder,), {})
        setattr(self, name, placeholder)
        return placeholder


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == "torchvision" or fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        module.__version__ = "0.0.0+stub"


def import_timm():
    """timm, importable without torchvision (a stub is installed only when the real package is absent)."""
    try:
        import torchvision  # noqa: F401
    except ImportError:
        if not any(isinstance(finder, _StubFinder) for finder in sys.meta_path):
            sys.meta_path.append(_StubFinder())
    return pytest.importorskip("timm")
