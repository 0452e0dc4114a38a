"""``edgeattn inspect``: describe an exported ONNX file (the onnx package, weights not loaded; no torch), a TensorRT
engine (TensorRT's engine inspector) or a trtexec ``--exportLayerInfo`` file."""
import json

import click

from ..errors import EdgeAttnError
from .options import allow_engine_host_code_option, backend_option, plugin_lib_option, trtexec_option


def _file_kind(path):
    """``("onnx" | "layers" | "engine", content)``: ``"layers"`` is a JSON document, recognised from the content."""
    from .. import onnx_graph
    from .._io import read_input_bytes

    data = read_input_bytes(path)
    if path.lower().endswith(".onnx") or onnx_graph.is_onnx_model(data):
        return "onnx", data
    if data.lstrip()[:1] in (b"{", b"["):
        return "layers", data
    return "engine", data


def _describe_layer_file(path, data):
    from ..tensorrt.layers import describe_layers
    from ..trtexec.exports import parse_layer_info

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise EdgeAttnError("{} is not a text file: not a trtexec --exportLayerInfo file".format(path))
    try:
        info = parse_layer_info(text)
    except EdgeAttnError as error:
        raise EdgeAttnError("{}: {}".format(path, error.format_message()))
    return describe_layers(info, path)


def _engine_layers_with_trtexec(path, manifest, plugins, trtexec):
    """The layer-info text of an engine through trtexec ``--loadEngine --exportLayerInfo``, and its version."""
    import os
    import shutil
    import tempfile

    from ..bench.trtexec_backend import run_for_export
    from ..probes import cuda_device
    from ..tensorrt import manifest as manifest_module
    from ..tensorrt import plugin_library
    from ..trtexec import flags
    from ..trtexec.locate import locate

    executable, version = locate(trtexec)
    manifest_module.preflight(path, manifest, version, cuda_device())  # before TensorRT's own error
    library = plugin_library.resolve(plugins, manifest_plugins=manifest.get("plugins"),
                                     custom_ops=manifest.get("custom_ops") or (), load="optional")
    workdir = tempfile.mkdtemp(prefix="edgeattn-inspect-")
    try:
        export = os.path.join(workdir, "layers.json")
        args = flags.layer_info_command(executable, version, os.path.abspath(path), export,
                                        plugin_library=library["path"] if library else None)
        _result, text = run_for_export(args, version, path, library, export, "--exportLayerInfo", timeout=600)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return text, version


def _engine_layers_with_tensorrt(path, manifest, plugins):
    from ..probes import cuda_device
    from ..tensorrt import manifest as manifest_module
    from ..tensorrt import plugin_library
    from ..tensorrt.inspector import engine_layer_info
    from ..tensorrt.api import import_tensorrt, tensorrt_version

    version = tensorrt_version(import_tensorrt("`edgeattn inspect ENGINE`"))
    manifest_module.preflight(path, manifest, version, cuda_device())  # before TensorRT's own error
    library = plugin_library.resolve(plugins, manifest_plugins=manifest.get("plugins"),
                                     custom_ops=manifest.get("custom_ops") or (), load=False)
    with open(path, "rb") as handle:
        data = handle.read()
    return engine_layer_info(path, data, library["path"] if library else None)


def _describe_engine(path, backend, plugins, trtexec, allow_engine_host_code):
    from ..bench import check_model_file
    from ..tensorrt import manifest as manifest_module
    from ..tensorrt.layers import describe_layers
    from ..trtexec.exports import parse_layer_info

    check_model_file(path, allow_engine_host_code=allow_engine_host_code)
    manifest = manifest_module.read_manifest(path) or {}
    if backend == "auto":
        from ..tensorrt.api import tensorrt_importable

        backend = "tensorrt" if tensorrt_importable() else "trtexec"
    if backend == "tensorrt":
        text, version = _engine_layers_with_tensorrt(path, manifest, plugins)
    else:
        text, version = _engine_layers_with_trtexec(path, manifest, plugins, trtexec)
    try:
        info = parse_layer_info(text)
    except EdgeAttnError as error:
        raise EdgeAttnError("TensorRT {}'s engine inspector wrote an unexpected document for {}: {}".format(
            version, path, error.format_message()))
    if not info["detailed"] or not info["layers"]:
        command = manifest.get("rebuild_command") or "edgeattn build MODEL.onnx -o {}".format(path)
        if "--profiling-verbosity" not in command:
            command += " --profiling-verbosity detailed"
        raise EdgeAttnError("{} was built without detailed profiling verbosity: {}; rebuild with `{}`".format(
            path, "TensorRT recorded only its layer names, not their types, precisions, tactics or tensors"
            if info["layers"] else "TensorRT recorded no layer information", command))
    return describe_layers(info, path, custom_ops=manifest.get("custom_ops"), tensorrt_version=str(version))


@click.command(name="inspect")
@click.argument("model", metavar="MODEL.onnx|ENGINE|LAYERS.json")
@click.option("--json", "as_json", is_flag=True,
              help="Print the description as JSON instead of text. ONNX: schema edgeattn.inspect/1 (path, "
                   "size_bytes, ir_version, producer, opset_imports, variant, inputs, outputs, node_count, "
                   "custom_ops, custom_nodes, functions, schema_problems). Engines and layer files: schema "
                   "edgeattn.inspect-engine/1 (source, tensorrt_version, detailed, layer_count, bindings, "
                   "precision_totals, plugins, fused_regions, reformats, other_layers, layers).")
@plugin_lib_option(help="ENGINE: plugin library for engines with edgeattn ops (default: $EDGEATTN_PLUGIN_LIB, then "
                        "the package and build folders; refused unless it is the one the manifest names).")
@backend_option(("auto", "tensorrt", "trtexec"),
                help="ENGINE: read it with TensorRT's Python engine inspector or with trtexec --exportLayerInfo "
                     "(auto: TensorRT's Python bindings if importable, else trtexec).")
@trtexec_option()
@allow_engine_host_code_option(help="ENGINE: let TensorRT run host code embedded in a version-compatible engine "
                                    "(only for engines you built or trust).")
def inspect_(model, as_json, plugin_lib, backend, trtexec_path, allow_engine_host_code):
    """Describe MODEL.onnx, a TensorRT ENGINE, or LAYERS.json (a trtexec --exportLayerInfo file).

    ONNX: IR version, opsets, inputs/outputs with shapes, custom-op nodes with their attributes (checked against
    export/schemas), model-local functions, and whether the file is the ORT variant (runs in ONNX Runtime as is),
    the TensorRT variant (no local functions) or standard ops only.

    ENGINE or LAYERS.json: every layer with its type, precision, tactic and tensors, grouped into our plugins (op,
    plugin version, tactic, the reformat layers around each), fused Myelin regions (ForeignNode) and what they
    swallowed, reformat/copy layers and the rest, with totals per precision. An engine is read with TensorRT's
    engine inspector and must have been built with `edgeattn build --profiling-verbosity detailed` (trtexec
    --profilingVerbosity=detailed); a layer file from any TensorRT version is read whether it lists layer
    objects (detailed) or names only.
    """
    import os

    from .. import filekind

    if not os.path.exists(model):
        raise EdgeAttnError("no such file: {}".format(model))
    # a file of another kind edgeattn knows (a sweep's results.json, a tegrastats log, a profile) is named as such
    filekind.require(model, ("onnx", "engine", "json", "trtexec-export"),
                     "an ONNX model, a TensorRT engine or a trtexec --exportLayerInfo file", command="`edgeattn inspect`")
    if os.path.isdir(model):
        raise EdgeAttnError("{} is a directory, not a model, engine or layer file".format(model))
    kind, data = _file_kind(model)
    if kind == "onnx":
        from ..export.inspection import describe_onnx, format_description

        description = describe_onnx(model)
    else:
        from ..tensorrt.layers import format_description

        description = (_describe_layer_file(model, data) if kind == "layers"
                       else _describe_engine(model, backend, plugin_lib, trtexec_path, allow_engine_host_code))
    if as_json:
        click.echo(json.dumps(description, indent=2))
    else:
        click.echo("\n".join(format_description(description)))
