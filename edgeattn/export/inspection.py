"""Describe an exported ONNX file: opsets, I/O, custom-op nodes, local functions, and which variant it is.

Reads the file with the ``onnx`` package without its external weights (:mod:`edgeattn.onnx_graph`), so
``edgeattn inspect`` runs on a board (Python 3.8) and on models of any size; torch is not needed.

Variants (see export/README.md):

* ``ort``: custom nodes, each op_type backed by a model-local function: ONNX Runtime runs it as is;
  TensorRT >= 10.7 calls the plugin when its creator is registered (and >= 10.15 also because the node carries
  ``plugin_namespace``), but TensorRT 9.0-10.6 would inline the functions instead.
* ``tensorrt``: custom nodes without functions: TensorRT with the edgeattn plugin library; ONNX Runtime cannot
  run it.
* ``standard``: no custom nodes (``--no-plugins``): every runtime runs it with its own kernels.
* ``incomplete``: custom nodes, but only some op_types have a function (not produced by edgeattn export).
"""
import os

from .. import onnx_graph
from . import contract

#: ``edgeattn inspect --json``: keys are only added within a schema version; a change of meaning bumps it
INSPECT_SCHEMA = "edgeattn.inspect/1"

VARIANT_NOTES = {
    "ort": "custom ops with model-local functions: ONNX Runtime runs it as is; for TensorRT 9.0-10.6 strip the "
           "functions (edgeattn export --target tensorrt, or edgeattn build does it)",
    "tensorrt": "custom ops without local functions: for TensorRT with the edgeattn plugin library; ONNX Runtime "
                "cannot run it (export --target ort for that)",
    "standard": "standard ONNX ops only: runs on any runtime, no plugins involved",
    "incomplete": "some custom op_types have no local function: neither ONNX Runtime nor TensorRT 9.0-10.6 "
                  "handles it as is",
}


def classify(custom_op_types, function_names):
    """Variant name from the set of custom op_types and the local-function names."""
    if not custom_op_types:
        return "standard"
    covered = set(custom_op_types) & set(function_names)
    if not covered:
        return "tensorrt"
    if covered == set(custom_op_types):
        return "ort"
    return "incomplete"


def describe_onnx(path):
    """A JSON-able description of the ONNX file at ``path`` (EdgeAttnError for a missing or corrupt file)."""
    model = onnx_graph.load_model(path, "`edgeattn inspect`")
    info = onnx_graph.model_info(model)
    io_info = onnx_graph.graph_io(model)
    custom = [node for node in model.graph.node if node.domain not in onnx_graph.STANDARD_DOMAINS
              or contract.is_custom(node.op_type, node.domain)]
    custom_nodes = []
    for index, node in enumerate(custom):
        ours = contract.is_custom(node.op_type, node.domain)
        custom_nodes.append({
            "index": index, "name": node.name, "op_type": node.op_type, "domain": node.domain,
            "inputs": len([name for name in node.input if name]),
            "attributes": {attr.name: onnx_graph.attribute_value(attr) for attr in node.attribute},
            "problems": contract.node_problems(node) if ours else ["not an edgeattn op (no schema)"],
        })
    op_types = []
    for node in custom_nodes:
        if node["op_type"] not in op_types:
            op_types.append(node["op_type"])
    variant = classify(op_types, info["function_names"])
    return {
        "schema": INSPECT_SCHEMA,
        "path": os.fspath(path),
        "size_bytes": os.path.getsize(path),
        "ir_version": info["ir_version"],
        "producer": "{} {}".format(info["producer_name"], info["producer_version"]).strip(),
        "opset_imports": info["opset_imports"],
        "variant": variant,
        "variant_note": VARIANT_NOTES[variant],
        "inputs": io_info["inputs"],
        "outputs": io_info["outputs"],
        "node_count": len(model.graph.node),
        "custom_ops": onnx_graph.custom_ops(model),
        "custom_nodes": custom_nodes,
        "functions": info["function_names"],
        "schema_problems": sum(len(node["problems"]) for node in custom_nodes),
    }


def _shape(shape):
    if shape is None:
        return "[?]"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _value(value):
    if isinstance(value, float):
        return "{:g}".format(value)
    if isinstance(value, list):
        return "[" + ",".join(_value(v) for v in value) + "]"
    return str(value)


def format_description(desc):
    """The human-readable ``edgeattn inspect`` text (a list of lines)."""
    opsets = ", ".join("{} {}".format(domain or "ai.onnx", version)
                       for domain, version in sorted(desc["opset_imports"].items()))
    lines = [
        "model     {} ({:.1f} MiB)".format(desc["path"], desc["size_bytes"] / 1048576.0),
        "format    ONNX IR {}, producer {}".format(desc["ir_version"], desc["producer"] or "?"),
        "opsets    {}".format(opsets),
        "variant   {}: {}".format(desc["variant"], desc["variant_note"]),
    ]
    for key in ("inputs", "outputs"):
        for index, entry in enumerate(desc[key]):
            lines.append("{:9} {} {} {}".format(key if index == 0 else "", entry["name"], entry["elem_type"],
                                               _shape(entry["shape"])))
    lines.append("nodes     {} in the main graph, {} custom".format(desc["node_count"], len(desc["custom_nodes"])))
    groups = []
    for node in desc["custom_nodes"]:
        key = (node["op_type"], node["domain"], node["inputs"],
               tuple((k, _value(v)) for k, v in node["attributes"].items()), tuple(node["problems"]))
        for group in groups:
            if group[0] == key:
                group[1].append(node)
                break
        else:
            groups.append((key, [node]))
    if groups:
        lines.append("custom ops (nodes with identical attributes grouped):")
    for (op_type, domain, n_inputs, attributes, found), members in groups:
        lines.append("  {} x{} ({}, {} inputs)".format(op_type, len(members), domain, n_inputs))
        lines.append("    " + " ".join("{}={}".format(k, v) for k, v in attributes))
        if found:
            lines.append("    DISAGREES WITH ITS SCHEMA: " + "; ".join(found))
    lines.append("functions {}".format(", ".join(desc["functions"]) or "none"))
    if desc["custom_nodes"]:
        lines.append("schema    " + ("every custom node conforms to export/schemas" if not desc["schema_problems"]
                                     else "{} problem(s) against export/schemas".format(desc["schema_problems"])))
    return lines
