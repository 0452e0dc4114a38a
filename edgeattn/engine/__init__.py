"""TensorRT engines: build (TensorRT Python or trtexec), the precision policy, and the manifest beside each
engine. See :func:`edgeattn.engine.build.build_engine` and :mod:`edgeattn.engine.manifest`."""
from .build import build_engine, default_engine_path
from .manifest import manifest_path, read_manifest

__all__ = ["build_engine", "default_engine_path", "manifest_path", "read_manifest"]
