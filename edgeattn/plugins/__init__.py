"""Find and load the edgeattn TensorRT plugin library (device side: Python 3.8, stdlib + numpy only).

The library (``libedgeattn_plugins.so``, built from ``plugins/`` with CMake or ``deploy/jetson/build_plugins.sh``)
registers its plugin creators with TensorRT's registry when it is loaded, so it must be loaded before an ONNX
model with edgeattn custom ops is parsed or an engine that uses them is deserialized. This module finds it, loads
it once per process (``ctypes.CDLL``; ``tensorrt`` is imported first when installed so the library binds to the
same libnvinfer), and lists the creators TensorRT now knows.

Search order of :func:`find_plugin_library`:
  1. the ``explicit`` argument (a file, or a directory holding the library): ``--plugin-lib``;
  2. the ``EDGEATTN_PLUGIN_LIB`` environment variable (same): the board's configured plugin location, which
     ``deploy/jetson/build_plugins.sh`` tells the user to set;
  3. package data: ``edgeattn/plugins/_lib/`` (this package);
  4. the checkout's build directory ``plugins/build/`` (where ``cmake -S plugins -B plugins/build`` puts it).

Loading a library runs its constructors, so these places are the only ones: nothing read from a data file (an
engine manifest, a sweep directory) ever becomes a library path. A caller that knows which library it needs
passes its sha256 and a different file is refused before it is loaded.
"""
import ctypes
import os
import threading

from .._io import sha256_file
from .._paths import repo_root
from ..errors import EdgeAttnError

LIBRARY_NAME = "libedgeattn_plugins.so"
#: the getCreators/setLoggerFinder-only build (TensorRT >= 8.6) for IPluginRegistry::loadLibrary,
#: trtexec --dynamicPlugins and --setPluginsToSerialize; loading LIBRARY_NAME that way would register twice
DYNAMIC_LIBRARY_NAME = "libedgeattn_plugins_dynamic.so"
ENV_VAR = "EDGEATTN_PLUGIN_LIB"
PLUGIN_NAMESPACE = "edgeattn"

BUILD_HINT = (
    "build it on the device with `deploy/jetson/build_plugins.sh` (or `cmake -S plugins -B plugins/build && "
    "cmake --build plugins/build -- -j4`), then set {}=/path/to/{} or leave it in plugins/build/".format(
        ENV_VAR, LIBRARY_NAME)
)


class PluginLibraryNotFound(EdgeAttnError):
    """No plugin library at any of the searched places; ``searched`` lists them in order."""

    def __init__(self, searched):
        self.searched = list(searched)
        super().__init__(
            "cannot find the edgeattn plugin library {} (looked in: {}); {}".format(
                LIBRARY_NAME, "; ".join(self.searched), BUILD_HINT)
        )


class LoadedPluginLibrary(object):
    """The library loaded into this process.

    ``creators`` lists ``(name, version, namespace)``: from TensorRT's registry when ``tensorrt`` is importable
    (``creators_source == "tensorrt"``), otherwise the op schemas the library implements
    (``creators_source == "schemas"``). ``build_info`` is the library's own one-line description (TensorRT
    version it was built against, interface, CUDA archs), or None if the symbol is missing.
    """

    __slots__ = ("path", "sha256", "creators", "creators_source", "build_info", "handle")

    def __init__(self, path, sha256, creators, creators_source, build_info, handle):
        self.path = path
        self.sha256 = sha256
        self.creators = list(creators)
        self.creators_source = creators_source
        self.build_info = build_info
        self.handle = handle

    def to_dict(self):
        """JSON-serialisable summary (for doctor/bench reports)."""
        return {
            "path": self.path,
            "sha256": self.sha256,
            "creators": [list(creator) for creator in self.creators],
            "creators_source": self.creators_source,
            "build_info": self.build_info,
        }

    def __repr__(self):
        return "LoadedPluginLibrary(path={!r}, creators={})".format(self.path, len(self.creators))


_LOCK = threading.Lock()
_LOADED = {}  # "library" -> LoadedPluginLibrary: one plugin library per process


def _package_lib_dir():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib")


def _build_dir():
    return os.path.join(repo_root(), "plugins", "build")


def _resolve_candidate(path):
    """``path`` itself if it is a file, ``path/LIBRARY_NAME`` if it is a directory, else None."""
    if os.path.isdir(path):
        path = os.path.join(path, LIBRARY_NAME)
    return path if os.path.isfile(path) else None


def find_plugin_library(explicit=None):
    """Return the absolute path of the plugin library (see the module docstring for the search order).

    An explicit path or ``EDGEATTN_PLUGIN_LIB`` that does not exist is an error rather than a reason to keep
    looking: a user who names a library must get that library. Raises :class:`PluginLibraryNotFound` listing
    every place searched.
    """
    if explicit:
        found = _resolve_candidate(os.path.expanduser(str(explicit)))
        if found is None:
            raise PluginLibraryNotFound(["{} (given explicitly)".format(explicit)])
        return os.path.abspath(found)
    from_env = os.environ.get(ENV_VAR)
    if from_env:
        found = _resolve_candidate(os.path.expanduser(from_env))
        if found is None:
            raise PluginLibraryNotFound(["{}={}".format(ENV_VAR, from_env)])
        return os.path.abspath(found)
    searched = ["{} (not set)".format(ENV_VAR)]
    for directory, label in ((_package_lib_dir(), "package data"), (_build_dir(), "checkout build directory")):
        candidate = os.path.join(directory, LIBRARY_NAME)
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
        searched.append("{} ({})".format(candidate, label))
    raise PluginLibraryNotFound(searched)


def dynamic_plugin_library(static_path):
    """The dynamically loadable library built beside ``static_path`` (same build, TensorRT >= 8.6 only).

    Version-compatible engines embed the plugin library, and TensorRT loads an embedded library through
    ``getCreators``; the self-registering ``libedgeattn_plugins.so`` must not be used for that.
    """
    candidate = os.path.join(os.path.dirname(os.path.abspath(static_path)), DYNAMIC_LIBRARY_NAME)
    if not os.path.isfile(candidate):
        raise EdgeAttnError(
            "serializing plugins into the engine needs {} beside {} (built for TensorRT >= 8.6); {}".format(
                DYNAMIC_LIBRARY_NAME, static_path, BUILD_HINT))
    return candidate


def _import_tensorrt():
    try:
        import tensorrt  # noqa: F401  (lazy: only when a plugin library is loaded)
    except ImportError:
        return None
    return tensorrt


def _creator_triple(creator):
    version = getattr(creator, "plugin_version", None)
    namespace = getattr(creator, "plugin_namespace", "")
    return (str(creator.name), str(version), str(namespace))


def _tensorrt_creators(trt, namespace=PLUGIN_NAMESPACE):
    registry = trt.get_plugin_registry()
    creators = getattr(registry, "all_creators", None)  # TensorRT >= 10 (V1 and V3 creators)
    if creators is None:
        creators = registry.plugin_creator_list  # TensorRT 8.x
    triples = [_creator_triple(creator) for creator in creators]
    if namespace is not None:
        triples = [triple for triple in triples if triple[2] == namespace]
    return sorted(set(triples))


def _schema_creators():
    from ..schemas import all_schemas

    return sorted((schema.op_type, schema.version, schema.namespace) for schema in all_schemas().values())


def _build_info(handle):
    try:
        function = handle.edgeattn_plugins_build_info
    except AttributeError:
        return None
    function.restype = ctypes.c_char_p
    function.argtypes = []
    raw = function()
    return raw.decode("utf-8", "replace") if raw else None


def load_plugin_library(path=None, expected_sha256=None):
    """Load the plugin library once per process and return a :class:`LoadedPluginLibrary`.

    A second call returns the same object. Asking for a *different* library after one is loaded is an error:
    both would register creators with the same names. With ``expected_sha256`` a file with another hash is
    refused before it is loaded. Raises :class:`PluginLibraryNotFound` or :class:`EdgeAttnError` (with the
    dynamic loader's message) when the file cannot be loaded.
    """
    resolved = find_plugin_library(path)
    real = os.path.realpath(resolved)
    sha256 = sha256_file(resolved)
    if expected_sha256 and sha256 != expected_sha256:
        raise EdgeAttnError("plugin library {} has sha256 {}..., not the expected {}...; it was not loaded".format(
            resolved, sha256[:12], str(expected_sha256)[:12]))
    with _LOCK:
        loaded = _LOADED.get("library")
        if loaded is not None:
            if os.path.realpath(loaded.path) != real:
                raise EdgeAttnError(
                    "the edgeattn plugin library {} is already loaded in this process; cannot also load {} "
                    "(restart the process to switch libraries)".format(loaded.path, resolved)
                )
            return loaded
        trt = _import_tensorrt()
        try:
            # RTLD_GLOBAL: engines deserialized later may dlsym the creators' symbols through TensorRT.
            handle = ctypes.CDLL(resolved, mode=getattr(os, "RTLD_GLOBAL", 0) | getattr(os, "RTLD_NOW", 0))
        except OSError as error:
            raise EdgeAttnError(
                "cannot load the edgeattn plugin library {}: {} (it needs the TensorRT and CUDA libraries it was "
                "built against on the loader path; rebuild it on this device if they changed)".format(resolved, error)
            )
        if trt is not None:
            creators, source = _tensorrt_creators(trt), "tensorrt"
        else:
            creators, source = _schema_creators(), "schemas"
        loaded = LoadedPluginLibrary(
            path=resolved,
            sha256=sha256,
            creators=creators,
            creators_source=source,
            build_info=_build_info(handle),
            handle=handle,
        )
        _LOADED["library"] = loaded
        return loaded


def loaded_plugin_library():
    """The library loaded in this process, or None."""
    return _LOADED.get("library")


def registered_creators(namespace=PLUGIN_NAMESPACE):
    """``(name, version, namespace)`` of the creators in TensorRT's plugin registry, sorted.

    Only creators in ``namespace`` ("edgeattn" by default; None for all). Empty when ``tensorrt`` is not
    installed: without TensorRT there is no registry to ask.
    """
    trt = _import_tensorrt()
    if trt is None:
        return []
    return _tensorrt_creators(trt, namespace)
