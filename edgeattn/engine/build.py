"""``edgeattn build``: ONNX -> TensorRT engine + manifest, with the TensorRT Python builder or trtexec.

Order of work: read and check the ONNX (pure-Python wire reader; no onnx needed), resolve the optimization
profile and the plugin library, pick the ONNX variant the target TensorRT needs (tensorrt.md §2.4), apply the
precision policy, build into a temporary file, then write the manifest and rename the engine into place. A failure
at any step leaves no engine and no manifest behind.
"""
import contextlib
import os
import shlex
import tempfile
import time

from .. import onnx_wire
from .._io import atomic_path, sha256_file, write_json
from .._version import __version__
from ..errors import EdgeAttnError
from .console import warn
from .manifest import MANIFEST_SCHEMA, manifest_path
from .precision import PrecisionPolicy, make_strongly_typed_fp16
from .profiles import profile_record, resolve_profile

BUILD_BACKENDS = ("auto", "tensorrt", "trtexec")
#: TensorRT versions whose ONNX parser inlines a model-local function instead of calling the plugin of the same
#: name (9.0-10.6); <= 8.6 has no function support at all, so stripping is harmless there too; >= 10.7 prefers
#: a registered plugin (10.15+: when the node carries plugin_namespace, which our exporter always sets).
STRIP_FUNCTIONS_BELOW = (10, 7)
DEFAULT_BUILD_TIMEOUT_S = 7200


def default_engine_path(onnx_path, precision):
    """``model.onnx`` -> ``model.engine`` (FP32) or ``model.fp16.engine`` (FP16)."""
    base = os.path.splitext(onnx_path)[0]
    return base + (".fp16.engine" if precision == "fp16" else ".engine")


def _choose_backend(backend, trtexec):
    """``("tensorrt", trt, version, None)`` or ``("trtexec", None, version, path)``."""
    from ..trtexec import probe_version

    if backend not in BUILD_BACKENDS:
        raise EdgeAttnError("unknown build backend {!r} (choose {})".format(backend, ", ".join(BUILD_BACKENDS)))
    if backend in ("auto", "tensorrt"):
        from .tensorrt_api import import_tensorrt, tensorrt_version

        try:
            trt = import_tensorrt("`edgeattn build --backend tensorrt`")
            return "tensorrt", trt, tensorrt_version(trt), None
        except EdgeAttnError:
            if backend == "tensorrt":
                raise
    from ..doctor import find_trtexec

    path, searched = find_trtexec(trtexec)
    if path is None:
        if backend == "auto":
            raise EdgeAttnError("neither TensorRT's Python bindings nor trtexec were found (searched {}); "
                                "`edgeattn doctor` shows what this machine has".format(", ".join(searched)))
        raise EdgeAttnError("trtexec not found (searched {}); pass --trtexec PATH".format(", ".join(searched)))
    return "trtexec", None, probe_version(path), path


def _rebuild_command(onnx_path, engine_path, precision, plugins, shapes, backend, workspace_mb, timing_cache,
                     version_compatible, trtexec=None):
    args = ["edgeattn", "build", os.path.abspath(onnx_path), "-o", os.path.abspath(engine_path), "--precision",
            precision]
    if plugins:
        args += ["--plugins", os.path.abspath(plugins)]
    for spec in shapes or ():
        args += ["--shapes", spec]
    if backend != "auto":
        args += ["--backend", backend]
    if trtexec:
        args += ["--trtexec", os.path.abspath(trtexec)]
    if workspace_mb is not None:
        args += ["--workspace", str(workspace_mb)]
    if timing_cache:
        args += ["--timing-cache", os.path.abspath(timing_cache)]
    if version_compatible:
        args.append("--version-compatible")
    return " ".join(shlex.quote(str(a)) for a in args)


@contextlib.contextmanager
def _variant_file(onnx_path, payload):
    """``onnx_path`` itself, or a temporary file beside it holding ``payload`` (beside it so that external weight
    files still resolve); removed afterwards."""
    if payload is None:
        yield onnx_path
        return
    directory = os.path.dirname(os.path.abspath(onnx_path))
    try:
        fd, path = tempfile.mkstemp(prefix=".edgeattn-", suffix=".onnx", dir=directory)
    except OSError:
        fd, path = tempfile.mkstemp(prefix="edgeattn-", suffix=".onnx")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def build_engine(onnx_path, engine_path=None, precision="fp32", plugins=None, shapes=(), backend="auto",
                 workspace_mb=None, timing_cache=None, version_compatible=False, trtexec=None, timeout=None,
                 progress=None):
    """Build a TensorRT engine from ``onnx_path``; returns the manifest written beside it.

    ``shapes``: ``NAME:MIN,OPT,MAX`` strings; ``backend``: auto (TensorRT Python if importable, else trtexec),
    tensorrt or trtexec; ``plugins``: our plugin library (default: ``edgeattn.plugins``' search, needed only if
    the model has custom ops); ``progress(message)`` is told each step.
    """
    say = progress or (lambda message: None)
    policy = PrecisionPolicy(precision)
    onnx_path = os.fspath(onnx_path)
    data = onnx_wire.load_model_bytes(onnx_path)
    info = onnx_wire.read_model_info(data)
    graph_io = onnx_wire.read_graph_io(data)
    nodes = onnx_wire.read_nodes(data)
    custom_ops = onnx_wire.read_custom_ops(data)
    engine_path = os.fspath(engine_path) if engine_path else default_engine_path(onnx_path, precision)
    if os.path.abspath(engine_path) == os.path.abspath(onnx_path):
        raise EdgeAttnError("the engine would overwrite the ONNX file; choose another -o")
    if workspace_mb is not None and workspace_mb < 1:
        raise EdgeAttnError("--workspace must be >= 1 MiB, got {}".format(workspace_mb))
    if timing_cache and os.path.isdir(timing_cache):
        raise EdgeAttnError("--timing-cache {} is a directory".format(timing_cache))
    profile = resolve_profile(graph_io["inputs"], shapes)

    backend, trt, version, trtexec_path = _choose_backend(backend, trtexec)
    say("TensorRT {} via {}".format(version, "trtexec " + trtexec_path if trtexec_path else "Python bindings"))
    if version_compatible and tuple(version) < (8, 6):
        raise EdgeAttnError("--version-compatible needs TensorRT >= 8.6; this is {}".format(version))

    from . import plugin_library

    library = plugin_library.resolve(plugins, custom_ops=custom_ops,
                                     load=True if backend == "tensorrt" else "optional")
    for op in custom_ops:
        if not op["has_namespace_attribute"]:
            warn("custom op {} has no plugin_namespace attribute; TensorRT >= 10.15 then prefers a model-local "
                 "function over the plugin (re-export with `edgeattn export`)".format(op["op_type"]))

    has_fp16_flag = hasattr(trt.BuilderFlag, "FP16") if trt is not None else None
    typing = policy.typing_mode(version, has_fp16_flag) if policy.fp16 else "fp32"
    islands = policy.fp32_islands(nodes)
    if typing == "strong":
        payload = make_strongly_typed_fp16(data, islands)
        variant = "fp16-strongly-typed"
    elif info["has_functions"] and tuple(version) < STRIP_FUNCTIONS_BELOW:
        payload = onnx_wire.strip_local_functions(data)
        variant = "local-functions-stripped"
    else:
        payload = None
        variant = "as-exported"
    say("ONNX variant: {}{}".format(variant, "; {} FP32 island nodes".format(len(islands)) if policy.fp16 else ""))

    started = time.time()
    with atomic_path(engine_path) as engine_tmp, _variant_file(onnx_path, payload) as onnx_file:
        say("building {} (this can take minutes)".format(os.path.basename(engine_path)))
        if backend == "tensorrt":
            from . import tensorrt_builder

            details = tensorrt_builder.build(trt, version, payload if payload is not None else data, onnx_file,
                                             engine_tmp, policy, typing, islands, profile, workspace_mb,
                                             timing_cache, version_compatible, library, onnx_path)
        else:
            from . import trtexec_builder

            details = trtexec_builder.build(trtexec_path, version, onnx_file, engine_tmp, policy, typing, islands,
                                            profile, workspace_mb, timing_cache, version_compatible, library,
                                            timeout or DEFAULT_BUILD_TIMEOUT_S, onnx_path)
        if not os.path.exists(engine_tmp) or os.path.getsize(engine_tmp) == 0:
            raise EdgeAttnError("TensorRT reported success but wrote no engine for {}".format(onnx_path))
        from ..doctor import jetson_context

        jetson = jetson_context(with_clocks=False)
        manifest = {
            "schema": MANIFEST_SCHEMA,
            "engine": {"file": os.path.basename(engine_path), "sha256": sha256_file(engine_tmp),
                       "size_bytes": os.path.getsize(engine_tmp)},
            "source_onnx": {"path": os.path.abspath(onnx_path), "sha256": sha256_file(onnx_path),
                            "variant": variant, "ir_version": info["ir_version"],
                            "opset_imports": info["opset_imports"]},
            "tensorrt": {"version": str(details["tensorrt_version"]),
                         "builder": "tensorrt-python" if backend == "tensorrt" else "trtexec",
                         "trtexec": {"path": trtexec_path, "version": str(version),
                                     "command": details.get("command")} if trtexec_path else None,
                         "version_compatible": bool(version_compatible)},
            "device": details.get("device"),
            "jetson": dict(jetson["board"], power_mode=jetson["power_mode"]) if jetson else None,
            "plugins": library,
            "custom_ops": custom_ops,
            "precision": policy.describe(islands, typing, details.get("enforced_by")),
            "profiles": [profile_record(profile)],
            "inputs": graph_io["inputs"],
            "outputs": graph_io["outputs"],
            "workspace_mb": workspace_mb,
            "timing_cache": os.path.abspath(timing_cache) if timing_cache else None,
            "edgeattn_version": __version__,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "build_seconds": round(time.time() - started, 3),
            "rebuild_command": _rebuild_command(onnx_path, engine_path, precision, plugins, shapes,
                                                "trtexec" if backend == "trtexec" else "tensorrt", workspace_mb,
                                                timing_cache, version_compatible, trtexec),
        }
        if details.get("pinned_layers") is not None:
            manifest["precision"]["pinned_layers"] = details["pinned_layers"]
        write_json(manifest_path(engine_path), manifest)
    return manifest
