"""Building TensorRT engines (TensorRT Python or trtexec), the precision policy and the plugin-mode search. See
:func:`edgeattn.engine.build.build_engine`; the manifest written beside each engine is
:mod:`edgeattn.tensorrt.manifest`."""
from .build import build_engine, build_marked_engine, default_engine_path

__all__ = ["build_engine", "build_marked_engine", "default_engine_path"]
