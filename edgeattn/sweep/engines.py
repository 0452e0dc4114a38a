"""The sweep's engine cache: ``DIR/engines/<model>.<precision>.engine``, built once per ONNX model and precision
with ``edgeattn build``'s Python API and reused by ``--resume`` only while it still matches its manifest and its
ONNX file."""
import functools
import os

from .._io import all_or_nothing, sha256_file
from ..errors import EdgeAttnError


def default_engine_builder(plugin_mode=None):
    """``edgeattn build``'s Python API, :func:`edgeattn.engine.build.build_engine(onnx_path, engine_path,
    precision=...)` (it writes the engine and its manifest); None when it cannot be imported.

    ``plugin_mode`` is ``build --plugins``: None takes build's device default (``auto`` where candidate engines can
    be timed on this machine, so a sweep never ships a plugin slower than TensorRT's own fusion)."""
    try:
        from ..engine.build import build_engine
    except ImportError:
        return None
    return functools.partial(build_engine, plugin_mode=plugin_mode)


def stale_engine_reason(engine_path, onnx_path):
    """Why an engine from an earlier run must not be reused (None when it may): no or unreadable manifest, bytes
    that differ from the sha256 the manifest recorded (a damaged or replaced file), or an ONNX changed since."""
    from ..tensorrt import manifest as manifest_module

    try:
        manifest = manifest_module.read_manifest(engine_path)
    except EdgeAttnError as error:
        return error.format_message()
    if manifest is None:
        return "it has no manifest"
    if not manifest_module.recorded_engine_sha256(manifest) or \
            manifest_module.engine_manifest_problem(engine_path, manifest):
        return "it does not match the sha256 in its manifest"
    source = (manifest.get("source_onnx") or {}).get("sha256")
    if source and source != sha256_file(onnx_path):
        return "{} changed since it was built".format(onnx_path)
    return None


def build_engines(variants, out_dir, builder, echo):
    """Set each variant's ``bench_path``: its ONNX or engine file as given, or its engine in ``out_dir/engines``
    (built, or reused when :func:`stale_engine_reason` finds nothing against it)."""
    engine_dir = os.path.join(out_dir, "engines")
    for variant in variants:
        if not variant["build"]:
            variant["bench_path"] = variant.get("source") or variant["model"]["path"]
            continue
        target = os.path.join(engine_dir, "{}.{}.engine".format(variant["model"]["name"], variant["precision"]))
        variant["bench_path"] = target
        source = variant.get("source") or variant["model"]["path"]  # int8: the model's Q/DQ file
        if os.path.isfile(target):
            why = stale_engine_reason(target, source)
            if why is None:
                echo("reusing engine {}".format(target))
                continue
            echo("rebuilding engine {}: {}".format(target, why))
        else:
            echo("building {} engine for {}".format(variant["precision"], variant["model"]["name"]))
        os.makedirs(engine_dir, exist_ok=True)
        with all_or_nothing():  # an engine and its manifest, or neither
            builder(source, target, precision=variant["precision"])
        if not os.path.isfile(target):
            raise EdgeAttnError("building {} produced no engine at {}".format(source, target))

