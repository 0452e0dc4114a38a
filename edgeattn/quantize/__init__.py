"""``edgeattn quantize``: post-training INT8 quantization of an exported ONNX file to explicit Q/DQ for TensorRT.

A host-side step like export (ONNX Runtime on the CPU; nothing here needs the board)::

    edgeattn export model.safetensors -o model.onnx
    edgeattn quantize model.onnx -o model.int8.onnx --calib pictures/        # Linear/Conv weights + inputs only
    edgeattn build model.int8.onnx --precision int8 -o model.int8.engine       # on the board

What gets quantized (:mod:`edgeattn.quantize.graph`): by default (``ops="linear"``) the MatMul/Gemm/Conv nodes with
weights, i.e. the Linear layers and convolutions, and nothing else: residual Adds, LayerNorm, Softmax, GELU, the
attention products and every ``trt.plugins`` node stay floating point. That is the placement that keeps a ViT's
accuracy (public TensorRT 10.3 measurements of ViT-B/16 on an Orin Nano: Linear-only INT8 kept 84.5 % of 85.2 %
top-1 and ran 1.15x faster than FP16; quantizing every eligible op, residual Adds included, fell to 0.03-5 %).
``ops="all"`` quantizes every op type ONNX Runtime's quantizer knows, for those who want to see that.

How (:mod:`edgeattn.quantize.ptq`): ONNX Runtime's static QDQ quantizer with TensorRT's settings. NVIDIA's ModelOpt
(``modelopt.onnx.quantization``), the first choice, was tried (0.47.0) and does not fit: its ``[onnx]`` extra
replaces onnx 1.23 with 1.21 and installs onnxruntime-gpu 1.24 over the same ``onnxruntime`` package; without the
extra's version pins its INT8 path fails on an edgeattn export because it rebuilds the graph without the model-local
functions, and ONNX Runtime then cannot run the ``trt.plugins`` nodes (see docs/int8.md).

:func:`quantize_file` returns the summary (schema ``edgeattn.quantize/1``); :func:`sensitivity` quantizes one
block/stage at a time and recommends exclusions.
"""
import json
import os

from ..errors import EdgeAttnError
from . import graph
from .calibration import DEFAULT_SIZE, calibration_inputs
from .ptq import (CALIB_METHODS, DEFAULT_CALIB_METHOD, SCHEMA, agreement, count_by_type, input_signature,
                  load_model, quantize_model, run_onnx, select_nodes)

SENSITIVITY_SCHEMA = "edgeattn.quantize-sensitivity/1"
#: a group is recommended for exclusion when quantizing it alone leaves less top-1 agreement or cosine than this
SENSITIVITY_MIN_TOP1 = 0.99
SENSITIVITY_MIN_COSINE = 0.999

__all__ = ["quantize_file", "sensitivity", "read_exclusions", "CALIB_METHODS", "DEFAULT_CALIB_METHOD",
           "DEFAULT_SIZE", "SCHEMA", "SENSITIVITY_SCHEMA"]


def _load(path, exclude, warn):
    model = load_model(path)
    graph.name_unnamed_nodes(model)
    for pattern in graph.unmatched_patterns(model, exclude):
        warn("--exclude {!r} matches no node name or op type of the model".format(pattern))
    return model


def _calibration(model, calib, calib_size, seed, warn):
    _, batch, chw = input_signature(model)
    array, described = calibration_inputs(calib, chw, size=calib_size, seed=seed, warn=warn)
    return batch, array, described


def quantize_file(path, output, calib=None, calib_size=DEFAULT_SIZE, calib_method=DEFAULT_CALIB_METHOD,
                  ops="linear", exclude=(), seed=0, warn=None, progress=None):
    """Quantize the ONNX file ``path`` to ``output``; returns the summary dict. Bad input raises EdgeAttnError
    before anything is written; the output appears only once the quantized model has been checked and run."""
    from .._io import atomic_path

    warn = warn or (lambda message: None)
    say = progress or (lambda message: None)
    exclude = list(exclude)
    model = _load(path, exclude, warn)
    nodes, dropped = select_nodes(model, ops, exclude)
    if not nodes:
        raise EdgeAttnError("nothing to quantize: no {} node is left after the exclusions".format(
            "MatMul/Gemm/Conv-with-weights" if ops == "linear" else "quantizable"))
    batch, array, described = _calibration(model, calib, calib_size, seed, warn)
    say("calibrating {} node(s) on {} input(s) ({})".format(len(nodes), len(array), calib_method))
    quantized, passes = quantize_model(model, array, nodes, ops=ops, calib_method=calib_method)
    say("running FP32 and INT8 on ONNX Runtime CPU")
    reference = run_onnx(model, array, batch)
    measured = agreement(run_onnx(quantized, array, batch), reference)
    onnx = graph._onnx()
    with atomic_path(output) as temporary:
        onnx.save(quantized, temporary)
    return {
        "schema": SCHEMA,
        "input": os.path.abspath(path),
        "output": os.path.abspath(output),
        "tool": "onnxruntime.quantization.quantize_static (QDQ, TensorRT settings)",
        "ops": ops,
        "quantized_nodes": len(nodes),
        "quantized_op_types": sorted({n.op_type for n in model.graph.node if n.name in set(nodes)}),
        "excluded_nodes": dropped,
        "exclude": exclude,
        "plugin_nodes_kept": len(graph.plugin_signatures(model)),
        "qdq_nodes": count_by_type(quantized),
        "passes": passes,
        "calibration": dict(described, method=calib_method),
        "agreement_vs_fp32": measured,
    }


def format_summary(summary):
    got = summary["agreement_vs_fp32"]
    lines = [
        "quantized {} -> {}".format(summary["input"], summary["output"]),
        "  tool      {}".format(summary["tool"]),
        "  nodes     {} quantized ({}; --ops {}), {} excluded, {} trt.plugins node(s) left in FP".format(
            summary["quantized_nodes"], ", ".join(summary["quantized_op_types"]), summary["ops"],
            len(summary["excluded_nodes"]), summary["plugin_nodes_kept"]),
        "  q/dq      {} QuantizeLinear, {} DequantizeLinear; INT8, symmetric, per-channel weights".format(
            summary["qdq_nodes"].get("QuantizeLinear", 0), summary["qdq_nodes"].get("DequantizeLinear", 0)),
        "  calib     {} {} input(s), {} ranges".format(summary["calibration"]["count"],
                                                     summary["calibration"]["source"],
                                                     summary["calibration"]["method"]),
        "  vs fp32   cosine min {:.6f} mean {:.6f}{} (ONNX Runtime CPU, calibration inputs)".format(
            got["cosine_min"], got["cosine_mean"],
            "" if got["top1"] is None else ", top-1 agreement {:.4f}".format(got["top1"])),
    ]
    return "\n".join(lines)


def sensitivity(path, calib=None, calib_size=DEFAULT_SIZE, calib_method=DEFAULT_CALIB_METHOD, exclude=(),
                seed=0, min_top1=SENSITIVITY_MIN_TOP1, min_cosine=SENSITIVITY_MIN_COSINE, warn=None,
                progress=None):
    """Quantize the Linear/Conv nodes of one block/stage at a time (the rest FP32) and measure each against FP32
    on the calibration inputs; returns the table (schema ``edgeattn.quantize-sensitivity/1``) with the groups
    recommended for exclusion (top-1 agreement < ``min_top1`` or mean cosine < ``min_cosine``)."""
    warn = warn or (lambda message: None)
    say = progress or (lambda message: None)
    exclude = list(exclude)
    model = _load(path, exclude, warn)
    candidates = [node for node in graph.candidate_nodes(model, "linear") if not graph.excluded(node, exclude)]
    if not candidates:
        raise EdgeAttnError("nothing to measure: no MatMul/Gemm/Conv-with-weights node is left after the "
                            "exclusions")
    batch, array, described = _calibration(model, calib, calib_size, seed, warn)
    reference = run_onnx(model, array, batch)
    rows = []
    table = graph.groups(candidates)
    for index, (group, pattern, names) in enumerate(table):
        say("group {}/{}: {} ({} node(s))".format(index + 1, len(table), group, len(names)))
        quantized, _ = quantize_model(model, array, names, calib_method=calib_method)
        measured = agreement(run_onnx(quantized, array, batch), reference)
        sensitive = (measured["top1"] is not None and measured["top1"] < min_top1) or \
            measured["cosine_mean"] < min_cosine
        rows.append({"group": group, "pattern": pattern, "nodes": len(names), "cosine_min": measured["cosine_min"],
                     "cosine_mean": measured["cosine_mean"], "top1": measured["top1"], "exclude": sensitive})
    return {
        "schema": SENSITIVITY_SCHEMA,
        "input": os.path.abspath(path),
        "calibration": dict(described, method=calib_method),
        "thresholds": {"min_top1": min_top1, "min_cosine": min_cosine},
        "groups": rows,
        "exclude": [row["pattern"] for row in rows if row["exclude"]],
    }


def format_sensitivity(table):
    lines = ["sensitivity of {} ({} {} input(s); one group quantized at a time, the rest FP32)".format(
        table["input"], table["calibration"]["count"], table["calibration"]["source"]),
        "  {:<22} {:>5} {:>10} {:>10} {:>7}  {}".format("group", "nodes", "cos min", "cos mean", "top-1",
                                                       "recommendation")]
    for row in table["groups"]:
        lines.append("  {:<22} {:>5} {:>10.6f} {:>10.6f} {:>7}  {}".format(
            row["group"], row["nodes"], row["cosine_min"], row["cosine_mean"],
            "-" if row["top1"] is None else "{:.4f}".format(row["top1"]),
            "exclude ({})".format(row["pattern"]) if row["exclude"] else "quantize"))
    thresholds = table["thresholds"]
    lines.append("  recommended exclusions (top-1 < {:g} or mean cosine < {:g}): {}".format(
        thresholds["min_top1"], thresholds["min_cosine"], ", ".join(table["exclude"]) or "none"))
    return "\n".join(lines)


def read_exclusions(path):
    """The patterns of an ``--exclude-from`` file: a sensitivity table (its ``exclude`` list) or plain text, one
    pattern per line (``#`` comments)."""
    try:
        with open(path) as handle:
            text = handle.read()
    except OSError as error:
        raise EdgeAttnError("--exclude-from {}: {}".format(path, error.strerror or error))
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as error:
            raise EdgeAttnError("--exclude-from {}: not valid JSON ({})".format(path, error))
        patterns = data.get("exclude") if isinstance(data, dict) else None
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise EdgeAttnError("--exclude-from {}: a JSON file needs an \"exclude\" list of patterns (what "
                                "--sensitivity writes)".format(path))
        return patterns
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]
