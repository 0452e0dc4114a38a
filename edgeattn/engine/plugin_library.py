"""Which plugin library a build or benchmark uses, and what it provides.

Finding and loading the library is ``edgeattn.plugins``' job (INTERFACES §3); this module only decides *which*
library (explicit ``--plugins`` > the engine manifest's > the loader's search) and records path, sha256 and
creators. When ``edgeattn.plugins`` is not installed an explicit path still works.
"""
import os

from .._io import sha256_file
from ..errors import EdgeAttnError
from .console import warn


def _plugins_module():
    try:
        from .. import plugins
    except ImportError:
        return None
    return plugins


def _describe(path, loaded=None):
    creators = None
    sha256 = None
    if loaded is not None:
        sha256 = getattr(loaded, "sha256", None)
        if getattr(loaded, "creators", None) is not None:
            creators = [{"name": n, "version": v, "namespace": ns} for n, v, ns in loaded.creators]
    return {"path": os.path.abspath(path), "sha256": sha256 or sha256_file(path), "creators": creators,
            # "tensorrt" (its registry) or "schemas" (the op contract, when TensorRT is absent); None if unknown
            "creators_source": getattr(loaded, "creators_source", None) if creators is not None else None}


def resolve(explicit=None, custom_ops=(), manifest_plugins=None, load=True):
    """The plugin library record ``{"path", "sha256", "creators"}`` to use, or None when none is needed.

    ``load``: also load it into this process (needed for the TensorRT Python backend; for trtexec it only serves
    to list creators, so a load failure is tolerated there and ``load="optional"`` is passed).
    """
    plugins = _plugins_module()
    path = None
    if explicit:
        if plugins is not None:
            path = plugins.find_plugin_library(explicit)
        elif os.path.isfile(explicit):
            path = explicit
        else:
            raise EdgeAttnError("plugin library not found: {}".format(explicit))
    elif manifest_plugins and manifest_plugins.get("path") and os.path.isfile(manifest_plugins["path"]):
        path = manifest_plugins["path"]
    elif custom_ops or manifest_plugins:
        names = ", ".join(sorted({op["op_type"] for op in custom_ops})) or "plugins"
        if plugins is None:
            raise EdgeAttnError("the model needs the edgeattn plugin library ({}); pass it with --plugins LIB"
                                .format(names))
        path = plugins.find_plugin_library(None)
    else:
        return None

    loaded = None
    if load and plugins is not None:
        try:
            loaded = plugins.load_plugin_library(path)
        except EdgeAttnError as error:
            if load != "optional":
                raise
            warn("cannot load {} in this process to list its creators ({})".format(path, error.format_message()))
    record = _describe(path, loaded)
    if manifest_plugins and manifest_plugins.get("sha256") and manifest_plugins["sha256"] != record["sha256"]:
        warn("plugin library {} differs from the one the engine was built with ({}, sha256 {}...); rebuild the "
             "engine if it fails to load".format(record["path"], manifest_plugins.get("path"),
                                                 manifest_plugins["sha256"][:12]))
    return record


def creator_tuples(record):
    if not record or record.get("creators") is None:
        return None
    return [(c["name"], c["version"], c["namespace"]) for c in record["creators"]]
