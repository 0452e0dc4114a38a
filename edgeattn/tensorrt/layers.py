"""What is inside a TensorRT engine: its layers, grouped into our plugins, fused regions, reformats and the rest.

The input is the JSON of TensorRT's ``IEngineInspector`` (``edgeattn inspect ENGINE``) or the same document as
trtexec's ``--exportLayerInfo`` writes it (``edgeattn inspect LAYERS.json``; :func:`..trtexec.exports
.parse_layer_info`), in either form: layer names only (the default ``layer_names_only`` verbosity) or layer objects
(built with ``detailed`` verbosity). Facts read from a layer object, with the rules of NVIDIA's TensorRT Engine
Explorer (TREx, https://github.com/NVIDIA/TensorRT/tree/b8b46f2/tools/experimental/trt-engine-explorer,
``trex/layer.py`` and ``trex/activations.py``):

* type: ``LayerType`` (``CaskConvolution``, ``Reformat``, ``Myelin``, ``PluginV2``...);
* precision: the data type of the layer's first input (of its first output when it has none), read from the
  tensor's ``Format/Datatype`` (``"Row major linear FP32"``, ``"Thirty-two wide channel vectorized row major Int8
  format"``, or a bare ``"Half"`` for Myelin's generated kernels);
* tactic: ``TacticName`` where TensorRT names the kernel, else ``TacticValue``.

Groups:

* plugins: a layer of a plugin type (``LayerType`` containing ``Plugin``) or, in a names-only list, a layer named
  after one of our custom ops (the ONNX parser names a plugin layer after its node, and the exporter names custom
  nodes after their op type); ours are named by op type, plugin version and tactic;
* fused regions: Myelin regions, named ``{ForeignNode[FIRST...LAST]}`` by TensorRT (a region lists only its first
  and last node; TensorRT 10 detailed info adds each swallowed ONNX node to ``Metadata`` as ``[ONNX Layer: X]``);
* reformats: ``Reformat`` layers, and TensorRT's ``Reformatting CopyNode for Input|Output Tensor N to LAYER``;
* the rest, counted per type.

A layer's time group (:func:`time_group`, for ``bench --layers``) adds attention (layers named after attention
parts: ``attn``, ``attention``, ``softmax``) and GEMM/convolution to these.
"""
import re

from ..errors import EdgeAttnError

#: ``edgeattn inspect ENGINE|LAYERS.json --json``; keys are only added within a schema version
INSPECT_ENGINE_SCHEMA = "edgeattn.inspect-engine/1"

#: time groups of ``bench --layers``, in the order they are reported
TIME_GROUPS = ("plugins", "attention", "gemm_conv", "reformat", "other")

#: ``Format/Datatype`` word -> precision (TREx's activations.py table, lower-cased names)
_DATATYPES = (
    ("FP32", "fp32"), ("Float", "fp32"), ("FP16", "fp16"), ("Half", "fp16"), ("BFloat16", "bf16"), ("BF16", "bf16"),
    ("FP8", "fp8"), ("Int8", "int8"), ("INT8", "int8"), ("UInt8", "uint8"), ("Int4", "int4"), ("FP4", "fp4"),
    ("FP4E2M1", "fp4"), ("Int32", "int32"), ("INT32", "int32"), ("Int64", "int64"), ("BOOL", "bool"),
    ("Bool", "bool"), ("Double", "fp64"),
)
_DATATYPE_RE = re.compile(r"\b(" + "|".join(word for word, _ in _DATATYPES) + r")\b")
_DATATYPE_OF = dict(_DATATYPES)
_FOREIGN_NODE = re.compile(r"^\{ForeignNode\[(?P<body>.*)\]\}$")
_REFORMAT_NAME = re.compile(r"^Reformatting CopyNode for (?P<side>Input|Output) Tensor (?P<index>\d+) to "
                            r"(?P<target>.+)$")
_ONNX_LAYER = re.compile(r"\[ONNX Layer: (?P<name>[^\]]*)\]")
_ATTENTION_WORDS = re.compile(r"attn|attention|softmax", re.IGNORECASE)
_GEMM_CONV_TYPES = re.compile(r"conv|gemm|matrixmultiply|fullyconnected|deconv", re.IGNORECASE)
_GEMM_CONV_NAMES = re.compile(r"(^|[/_.\s+(])(Conv|MatMul|Gemm|FullyConnected|ConvTranspose)(\b|_)")


def tensor_precision(format_text):
    """``"Row major linear FP32"`` -> ``"fp32"``; None when the string names no data type."""
    match = _DATATYPE_RE.search(format_text) if isinstance(format_text, str) else None  # a damaged file: no type
    return _DATATYPE_OF[match.group(1)] if match else None


def _custom_ops(custom_ops):
    """op_type -> {"version", "namespace"}: the engine manifest's custom ops, else the schemas of every op."""
    if custom_ops:
        return {entry["op_type"]: {"version": entry.get("plugin_version"), "namespace": entry.get("plugin_namespace")}
                for entry in custom_ops}
    from ..schemas import all_schemas

    ops = {}
    for (op_type, version), schema in sorted(all_schemas().items()):
        ops[op_type] = {"version": version, "namespace": schema.namespace}  # the newest version last
    return ops


def _our_op(layer_record, name, ours):
    """The custom op type a layer runs (its name or one of its string fields names it), or None."""
    texts = [name] + [value for value in layer_record.values() if isinstance(value, str)]
    for op_type in sorted(ours, key=len, reverse=True):
        if any(op_type in text for text in texts):
            return op_type
    return None


def _tensors(entries):
    tensors = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict):
            tensors.append({"name": entry.get("Name"), "dims": entry.get("Dimensions"),
                            "format": entry.get("Format/Datatype"),
                            "precision": tensor_precision(entry.get("Format/Datatype"))})
    return tensors


def _swallowed(name, record):
    """What a fused region swallowed: the ONNX nodes its Metadata lists, else the first and last its name gives."""
    nodes = _ONNX_LAYER.findall(record.get("Metadata") or "") if isinstance(record.get("Metadata"), str) else []
    if nodes:
        return {"nodes": nodes, "complete": True}
    match = _FOREIGN_NODE.match(name)
    if match:
        first, sep, last = match.group("body").partition("...")
        return {"nodes": [first, last] if sep else [first], "complete": not sep}
    return {"nodes": [], "complete": False}


def describe_layer(index, layer, ours):
    """One layer (a name or an inspector object) as a plain record."""
    record = layer if isinstance(layer, dict) else {}
    name = layer if isinstance(layer, str) else layer["Name"]
    layer_type = record.get("LayerType") if isinstance(record.get("LayerType"), str) else None
    inputs, outputs = _tensors(record.get("Inputs")), _tensors(record.get("Outputs"))
    first = inputs[0] if inputs else (outputs[0] if outputs else None)
    tactic = record.get("TacticName") or record.get("TacticValue")
    entry = {"index": index, "name": name, "type": layer_type,
             "precision": first["precision"] if first else None,
             "tactic": tactic if isinstance(tactic, str) else None,
             "inputs": inputs, "outputs": outputs,
             "metadata": record.get("Metadata") if isinstance(record.get("Metadata"), str) else None}
    reformat = _REFORMAT_NAME.match(name)
    plugin_type = bool(layer_type and "plugin" in layer_type.lower())
    # A copy node is named after the layer it feeds, a plugin maybe: the layer's own kind decides first.
    if not plugin_type and (layer_type == "Reformat" or reformat):
        entry["group"] = "reformat"
        entry["reformat_for"] = ({"side": reformat.group("side").lower(), "layer": reformat.group("target")}
                                 if reformat else None)
    elif not plugin_type and (layer_type == "Myelin" or _FOREIGN_NODE.match(name)):
        entry["group"] = "fused"
        entry["swallowed"] = _swallowed(name, record)
    else:
        op_type = _our_op(record, name, ours)
        entry["group"] = "plugin" if plugin_type or op_type else "layer"
        if entry["group"] == "plugin":
            entry["plugin"] = {"op_type": op_type, "ours": op_type is not None,
                               "version": ours[op_type]["version"] if op_type else None,
                               "namespace": ours[op_type]["namespace"] if op_type else None}
    entry["fused_from"] = [part for part in name.split(" + ")] if " + " in name and entry["group"] == "layer" \
        else None
    return entry


def _reformats_around(plugin, layers):
    """The reformat layers that feed or drain ``plugin``: named for it, or joined to it by a tensor."""
    inputs = {t["name"] for t in plugin["inputs"]}
    outputs = {t["name"] for t in plugin["outputs"]}
    found = []
    for layer in layers:
        if layer["group"] != "reformat":
            continue
        named = (layer.get("reformat_for") or {}).get("layer") == plugin["name"]
        joined = any(t["name"] in inputs for t in layer["outputs"]) or any(t["name"] in outputs
                                                                           for t in layer["inputs"])
        if named or joined:
            found.append(layer["name"])
    return found


def describe_layers(info, source, custom_ops=None, tensorrt_version=None):
    """The ``edgeattn inspect`` description (schema ``edgeattn.inspect-engine/1``) of parsed layer info
    (:func:`..trtexec.exports.parse_layer_info`'s dict). ``custom_ops``: the engine manifest's list."""
    ours = _custom_ops(custom_ops)
    layers = [describe_layer(index, layer, ours) for index, layer in enumerate(info["layers"])]
    if not layers:
        raise EdgeAttnError("{} lists no layers".format(source))
    plugins = []
    for layer in layers:
        if layer["group"] == "plugin":
            plugin = dict(layer["plugin"], layer=layer["name"], tactic=layer["tactic"],
                          precision=layer["precision"], reformats_around=_reformats_around(layer, layers))
            plugins.append(plugin)
    fused = [{"layer": layer["name"], "type": layer["type"], "precision": layer["precision"],
              "swallowed": layer["swallowed"]["nodes"], "swallowed_complete": layer["swallowed"]["complete"]}
             for layer in layers if layer["group"] == "fused"]
    reformats = [{"layer": layer["name"], "for": layer.get("reformat_for"),
                  "from": layer["inputs"][0]["format"] if layer["inputs"] else None,
                  "to": layer["outputs"][0]["format"] if layer["outputs"] else None,
                  "from_precision": layer["inputs"][0]["precision"] if layer["inputs"] else None,
                  "to_precision": layer["outputs"][0]["precision"] if layer["outputs"] else None}
                 for layer in layers if layer["group"] == "reformat"]
    rest = {}
    for layer in layers:
        if layer["group"] == "layer":
            key = layer["type"] or "?"
            rest[key] = rest.get(key, 0) + 1
    precisions = {}
    for layer in layers:
        key = layer["precision"] or "unknown"
        precisions[key] = precisions.get(key, 0) + 1
    return {
        "schema": INSPECT_ENGINE_SCHEMA,
        "source": source,
        "tensorrt_version": tensorrt_version,
        "detailed": bool(info["detailed"]),
        "layer_count": len(layers),
        "bindings": info["bindings"],
        "precision_totals": precisions,
        "plugins": plugins,
        "fused_regions": fused,
        "reformats": reformats,
        "other_layers": rest,
        "layers": layers,
    }


def time_group(layer):
    """The ``bench --layers`` group of a described layer: plugins, attention, gemm_conv, reformat or other."""
    if layer["group"] == "plugin":
        return "plugins"
    if layer["group"] == "reformat":
        return "reformat"
    words = [layer["name"]] + (layer.get("swallowed") or {}).get("nodes", [])
    if any(_ATTENTION_WORDS.search(word) for word in words):
        return "attention"
    if (layer["type"] and _GEMM_CONV_TYPES.search(layer["type"])) or _GEMM_CONV_NAMES.search(layer["name"]):
        return "gemm_conv"
    return "other"


def layer_times(profile, info=None, custom_ops=None, top=10):
    """Per-layer times of a profiling run joined with the engine's layer info (when there is one): the ``layers``
    record of ``edgeattn.bench/1``.

    ``profile``: ``[{"name", "averageMs", "medianMs", "percentage"}]`` (:func:`..trtexec.exports.parse_profile`'s
    layers, or the TensorRT backend's IProfiler mean per layer); ``info``: parsed layer info or None (names are
    then classified alone)."""
    ours = _custom_ops(custom_ops)
    known = {}
    if info is not None:
        for index, layer in enumerate(info["layers"]):
            described = describe_layer(index, layer, ours)
            known[described["name"]] = described
    rows = []
    for index, entry in enumerate(profile):
        if entry.get("averageMs") is None:
            continue
        described = known.get(entry["name"]) or describe_layer(index, entry["name"], ours)
        rows.append({"name": entry["name"], "average_ms": float(entry["averageMs"]),
                     "median_ms": entry.get("medianMs"), "group": time_group(described),
                     "type": described["type"], "precision": described["precision"]})
    if not rows:
        raise EdgeAttnError("the profiling run reported no layer times")
    total = sum(row["average_ms"] for row in rows)
    for row in rows:
        row["share"] = row["average_ms"] / total if total > 0 else 0.0
    groups = {}
    for group in TIME_GROUPS:
        members = [row for row in rows if row["group"] == group]
        ms = sum(row["average_ms"] for row in members)
        groups[group] = {"ms": ms, "share": ms / total if total > 0 else 0.0, "layers": len(members)}
    ranked = sorted(rows, key=lambda row: row["average_ms"], reverse=True)
    return {"total_ms": total, "layer_count": len(rows), "groups": groups, "top": ranked[:top],
            "joined_with_layer_info": info is not None}


def _short(text, width=72):
    return text if len(text) <= width else text[:width - 3] + "..."


def format_description(desc):
    """The text of ``edgeattn inspect ENGINE|LAYERS.json`` (a list of lines)."""
    lines = ["engine    {}{}".format(desc["source"], " (TensorRT {})".format(desc["tensorrt_version"])
                                     if desc["tensorrt_version"] else ""),
             "layers    {} ({})".format(desc["layer_count"], "detailed" if desc["detailed"] else
                                         "names only: built without detailed profiling verbosity, so types, "
                                         "precisions and tactics are unknown"),
             "bindings  {}".format(", ".join(desc["bindings"]) or "?")]
    lines.append("precision " + ", ".join("{} {}".format(key, count) for key, count in
                                          sorted(desc["precision_totals"].items(), key=lambda kv: -kv[1])))
    lines.append("plugins   {}".format(len(desc["plugins"]) or "none"))
    for plugin in desc["plugins"]:
        label = "{} v{}".format(plugin["op_type"], plugin["version"]) if plugin["ours"] else "other plugin"
        details = [part for part in (plugin["precision"], "tactic {}".format(plugin["tactic"]) if plugin["tactic"]
                                     else None, "{} reformat(s) around it".format(len(plugin["reformats_around"])))
                   if part]
        lines.append("  {}: {} ({})".format(label, _short(plugin["layer"], 60), ", ".join(details)))
    lines.append("fused     {} region(s)".format(len(desc["fused_regions"])))
    for region in desc["fused_regions"]:
        swallowed = region["swallowed"]
        if region["swallowed_complete"]:
            what = "swallowed {} node(s): {}".format(len(swallowed), _short(", ".join(swallowed), 80))
        else:
            what = "swallowed the nodes from {} to {} (TensorRT names only the first and last)".format(
                swallowed[0], swallowed[-1]) if swallowed else "swallowed nodes not recorded"
        lines.append("  {}: {}".format(_short(region["layer"], 60), what))
    lines.append("reformat  {} layer(s)".format(len(desc["reformats"])))
    for reformat in desc["reformats"][:10]:
        change = " ({} -> {})".format(reformat["from_precision"], reformat["to_precision"]) if reformat["from"] \
            else ""
        lines.append("  {}{}".format(_short(reformat["layer"], 70), change))
    if len(desc["reformats"]) > 10:
        lines.append("  ... {} more (--json lists all)".format(len(desc["reformats"]) - 10))
    lines.append("rest      " + (", ".join("{} {}".format(kind, count) for kind, count in
                                          sorted(desc["other_layers"].items(), key=lambda kv: (-kv[1], kv[0])))
                                 or "none"))
    lines.append("every layer:")
    for layer in desc["layers"]:
        parts = [layer["type"] or "", layer["precision"] or "", _short(layer["tactic"] or "", 40)]
        tensors = ""
        if layer["inputs"] or layer["outputs"]:
            tensors = " [{} -> {}]".format(",".join(t["name"] or "?" for t in layer["inputs"]),
                                          ",".join(t["name"] or "?" for t in layer["outputs"]))
        lines.append("  {:>3} {:<8} {} {}{}".format(layer["index"], layer["group"], _short(layer["name"], 70),
                                                    " ".join(p for p in parts if p), _short(tensors, 60)))
    return lines


def format_layer_times(times, top=None):
    """Lines of the per-layer breakdown (bench and report)."""
    lines = ["  per layer    {} layers, {:.4f} ms per run in the profiling run{}".format(
        times["layer_count"], times["total_ms"], "" if times["joined_with_layer_info"] else
        " (no layer info: grouped by name)")]
    lines.append("  by group     " + ", ".join("{} {:.1%}".format(group.replace("_", "/"), entry["share"])
                                               for group, entry in times["groups"].items() if entry["layers"]))
    for row in times["top"][:top]:
        lines.append("    {:>8.4f} ms {:>6.1%}  {:<9} {}".format(row["average_ms"], row["share"], row["group"],
                                                                 _short(row["name"], 70)))
    return lines
