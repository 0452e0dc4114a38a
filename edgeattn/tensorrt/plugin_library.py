"""Which plugin library a build or benchmark uses, and what it provides.

Finding and loading the library is ``edgeattn.plugins``' job; this module only decides *which*
library and records what it is. Loading a shared library runs its code, so a library is only ever taken from a
place the user chose: ``--plugin-lib PATH``, ``EDGEATTN_PLUGIN_LIB`` (the board's configured plugin location), the
installed package or the checkout's build directory. An engine manifest is data that travels with an engine (a
download, a teammate's share), so it only *names* the library the engine was built with (name, version,
sha256); it never supplies a path, and a library whose sha256 differs is refused before it is loaded.
When ``edgeattn.plugins`` is not installed an explicit path still works.
"""
import os

from .._io import sha256_file
from ..errors import EdgeAttnError
from ..console import warn


def _plugins_module():
    try:
        from .. import plugins
    except ImportError:
        return None
    return plugins


def _describe(path, sha256, loaded=None):
    creators = None
    if loaded is not None and getattr(loaded, "creators", None) is not None:
        creators = [{"name": n, "version": v, "namespace": ns} for n, v, ns in loaded.creators]
    return {"path": os.path.abspath(path), "name": os.path.basename(path), "sha256": sha256,
            "version": getattr(loaded, "build_info", None) if loaded is not None else None,
            "creators": creators,
            # "tensorrt" (its registry) or "schemas" (the op contract, when TensorRT is absent); None if unknown
            "creators_source": getattr(loaded, "creators_source", None) if creators is not None else None}


def manifest_record(record):
    """What an engine manifest keeps of a library record: its name, version and sha256 (and the creators it
    provided), never its path."""
    if not record:
        return None
    return {key: record.get(key) for key in ("name", "version", "sha256", "creators", "creators_source")}


def check_expected(path, sha256, manifest_plugins):
    """Refuse (before anything loads it) a library that is not the one the engine's manifest names."""
    want = (manifest_plugins or {}).get("sha256")
    if want and want != sha256:
        raise EdgeAttnError(
            "plugin library {} (sha256 {}...) is not the one this engine was built with ({}, sha256 {}...); it "
            "was not loaded: pass the matching library with --plugin-lib or rebuild the engine".format(
                path, sha256[:12], manifest_plugins.get("name") or "unnamed", str(want)[:12]))


def resolve(explicit=None, custom_ops=(), manifest_plugins=None, load=True):
    """The plugin library record ``{"path", "name", "version", "sha256", "creators", "creators_source"}`` to
    use, or None when none is needed.

    ``explicit``: ``--plugin-lib``; otherwise ``edgeattn.plugins``' search. ``manifest_plugins``: the manifest's
    record of the library the engine was built with; only its sha256 is used, to refuse a different library
    before loading it. ``load``: also load it into this process (needed for the TensorRT Python backend; for
    trtexec it only serves to list creators, so a load failure is tolerated there and ``load="optional"`` is
    passed).
    """
    plugins = _plugins_module()
    if explicit:
        if plugins is not None:
            path = plugins.find_plugin_library(explicit)
        elif os.path.isfile(explicit):
            path = explicit
        else:
            raise EdgeAttnError("plugin library not found: {}".format(explicit))
    elif custom_ops or manifest_plugins:
        names = ", ".join(sorted({op["op_type"] for op in custom_ops})) or "plugins"
        if plugins is None:
            raise EdgeAttnError("the model needs the edgeattn plugin library ({}); pass it with --plugin-lib LIB"
                                .format(names))
        path = plugins.find_plugin_library(None)
    else:
        return None

    sha256 = sha256_file(path)
    check_expected(path, sha256, manifest_plugins)
    loaded = None
    if load and plugins is not None:
        try:
            loaded = plugins.load_plugin_library(path)
        except EdgeAttnError as error:
            if load != "optional":
                raise
            warn("cannot load {} in this process to list its creators ({})".format(path, error.format_message()))
    return _describe(path, sha256, loaded)


def creator_tuples(record):
    if not record or record.get("creators") is None:
        return None
    return [(c["name"], c["version"], c["namespace"]) for c in record["creators"]]
