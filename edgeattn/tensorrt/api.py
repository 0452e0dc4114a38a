"""The thin layer over TensorRT's Python API shared by the builder and the benchmark runtime.

UNVERIFIED: this repository's CI has no TensorRT and no GPU, so nothing here has run; it follows the documented
TensorRT 8.2 -> 10.x Python API (tensor-name API from 8.5, binding API before) and is kept as small as possible.
The trtexec backend, which is tested against replays of real trtexec output, is the verified path.

Process-wide rules: one ``trt.Logger`` for every builder/runtime (several loggers crashed TensorRT on an AGX Orin,
NVIDIA/TensorRT issue #4134), plugin libraries loaded - ours through ``edgeattn.plugins``, NVIDIA's through
``trt.init_libnvinfer_plugins`` - before any parse or deserialization (otherwise "Cannot deserialize plugin since
corresponding IPluginCreator not found", NVIDIA/TensorRT issue #955).
"""
import ctypes
import os

from ..errors import EdgeAttnError, MissingDependencyError
from ..trtexec.version import TrtVersion

_LOGGER = None
_NVIDIA_PLUGINS_READY = False


def import_tensorrt(needed_for):
    try:
        import tensorrt as trt
    except ImportError:
        raise MissingDependencyError(
            "tensorrt", needed_for,
            "On a Jetson it comes with JetPack (python3-libnvinfer); on a desktop `pip install tensorrt`. "
            "Or use --backend trtexec.")
    return trt


def tensorrt_importable():
    """Whether TensorRT's Python bindings import here (without keeping them imported by name)."""
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        return False
    return True


def tensorrt_version(trt):
    return TrtVersion(trt.__version__)


def get_logger(trt):
    """The one TensorRT logger of this process (warnings and errors)."""
    global _LOGGER
    if _LOGGER is None:
        _LOGGER = trt.Logger(trt.Logger.WARNING)
    return _LOGGER


def registered_creators(trt):
    """``[(name, version, namespace)]`` of every creator in TensorRT's plugin registry."""
    registry = trt.get_plugin_registry()
    creators = getattr(registry, "all_creators", None)
    if creators is None:
        creators = getattr(registry, "plugin_creator_list", [])
    result = []
    for creator in creators:
        result.append((str(creator.name), str(creator.plugin_version), str(creator.plugin_namespace)))
    return result


def load_plugins(trt, library_path=None):
    """Register NVIDIA's plugins and, if given, our plugin library (through ``edgeattn.plugins`` when present, else
    ``ctypes.CDLL`` with RTLD_GLOBAL, which runs the library's static registrars)."""
    global _NVIDIA_PLUGINS_READY
    if not _NVIDIA_PLUGINS_READY:
        trt.init_libnvinfer_plugins(get_logger(trt), "")
        _NVIDIA_PLUGINS_READY = True
    if not library_path:
        return None
    try:
        from .. import plugins
    except ImportError:
        plugins = None
    if plugins is not None:
        return plugins.load_plugin_library(library_path)
    if not os.path.isfile(library_path):
        raise EdgeAttnError("plugin library not found: {}".format(library_path))
    try:
        ctypes.CDLL(library_path, mode=ctypes.RTLD_GLOBAL)
    except OSError as error:
        raise EdgeAttnError("cannot load the plugin library {}: {}".format(library_path, error))
    return None


def deserialize_engine(trt, data, engine_path, version, allow_engine_host_code=False):
    """The ``ICudaEngine`` in ``data`` (the bytes of ``engine_path``), through this process's one logger.

    ``allow_engine_host_code`` lets TensorRT run host code embedded in a version-compatible engine; only the
    user's explicit ``--allow-engine-host-code`` may set it, never the manifest beside the engine (which travels
    with it and is not to be trusted). Call :func:`load_plugins` first. Raises :class:`EdgeAttnError` when TensorRT
    returns no engine (its own messages went to the logger just before).
    """
    runtime = trt.Runtime(get_logger(trt))
    if allow_engine_host_code and hasattr(runtime, "engine_host_code_allowed"):
        runtime.engine_host_code_allowed = True
    engine = runtime.deserialize_cuda_engine(data)
    if engine is None:
        raise EdgeAttnError("TensorRT {} could not deserialize {} (see the TensorRT messages above); rebuild it "
                            "with `edgeattn build`".format(version, engine_path))
    return engine


def format_creators(creators):
    return ", ".join("{}::{} v{}".format(ns, name, version) for name, version, ns in creators) or "none"
