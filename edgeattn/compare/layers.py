"""``edgeattn compare A B --layers``: where two models first disagree.

Every intermediate tensor of both models is made a graph output with Polygraphy's
``polygraphy.backend.onnx.modify_outputs(model, outputs=constants.MARK_ALL)`` (what its ``--onnx-outputs mark all``
does), both run on ONNX Runtime CPU on the inputs of the comparison, and the tensors the two graphs share by name
are compared in B's topological order (ONNX keeps a graph's nodes topologically sorted) with the comparison's own
metrics and tolerances (Polygraphy's element-wise comparator, B the reference). The report names the first tensor
outside them (the node producing it in B, its op type and error), the worst tensors, and what could not be matched:
tensors only one model has, and tensors whose shapes differ.

UNSUPPORTED for engines: a built engine keeps only the tensors TensorRT did not fuse away, and marking its
network's tensors as outputs (Polygraphy's ``--trt-outputs mark all``) means building another engine on the
device; ``--layers`` refuses an engine side in one line instead of guessing which fused tensor is which.
"""
import collections

import numpy as np

from ..errors import EdgeAttnError
from .metrics import _polygraphy_compare
from .sides import _quiet_polygraphy

#: how many of the worst tensors the report keeps
WORST = 10


def _all_outputs_session(path):
    """An ONNX Runtime CPU session on ``path`` with every intermediate tensor as an output, and the model's nodes."""
    from .. import onnx_graph
    from ..bench.onnxruntime_backend import import_onnxruntime, open_session

    model = onnx_graph.load_model(path, "`edgeattn compare --layers`")
    nodes = [(node.name, node.op_type, list(node.output)) for node in model.graph.node]
    with _quiet_polygraphy():
        from polygraphy import constants
        from polygraphy.backend.onnx import modify_outputs

        marked = modify_outputs(model, outputs=constants.MARK_ALL, copy=True)
    ort = import_onnxruntime()
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep every tensor as named
    return open_session(ort, marked.SerializeToString(), options, ["CPUExecutionProvider"], label=path), nodes


def _run(session, batch):
    name = session.get_inputs()[0].name
    names = [output.name for output in session.get_outputs()]
    values = session.run(names, {name: batch.astype(np.float32)})
    return collections.OrderedDict(zip(names, values))


def compare_layers(path_a, path_b, batch, atol, rtol):
    """The ``layers`` record of ``edgeattn compare --layers`` for two ONNX files on ``batch``."""
    session_a, _ = _all_outputs_session(path_a)
    session_b, nodes_b = _all_outputs_session(path_b)
    out_a, out_b = _run(session_a, batch), _run(session_b, batch)
    producer = {}
    order = []
    for name, op_type, outputs in nodes_b:
        for tensor in outputs:
            if tensor and tensor not in producer:
                producer[tensor] = (name, op_type)
                order.append(tensor)
    shared = [t for t in order if t in out_a and t in out_b]
    mismatched = [t for t in shared if np.shape(out_a[t]) != np.shape(out_b[t])]
    comparable = [t for t in shared if t not in mismatched]
    if not comparable:
        raise EdgeAttnError("{} and {} share no intermediate tensor by name (with the same shape): nothing to "
                            "compare layer by layer".format(path_a, path_b))
    per_tensor = _polygraphy_compare(
        collections.OrderedDict((t, np.asarray(out_a[t], dtype=np.float64)) for t in comparable),
        collections.OrderedDict((t, np.asarray(out_b[t], dtype=np.float64)) for t in comparable), atol, rtol)
    rows = []
    for index, tensor in enumerate(comparable):
        node, op_type = producer[tensor]
        entry = per_tensor[tensor]
        rows.append({"order": index, "tensor": tensor, "node": node, "op_type": op_type,
                     "passed": entry["passed"], "max_abs": entry["max_abs"], "max_rel": entry["max_rel"],
                     "mean_abs": entry["mean_abs"]})
    first = next((row for row in rows if not row["passed"]), None)
    worst = sorted(rows, key=lambda row: -(row["max_abs"] if row["max_abs"] is not None else float("inf")))
    only_a = [t for t in out_a if t not in out_b]
    only_b = [t for t in order if t not in out_a]
    return {"compared": len(rows), "first_divergent": first, "worst": worst[:WORST], "tensors": rows,
            "unmatched": {"only_in_a": only_a, "only_in_b": only_b, "shape_differs": mismatched},
            "method": "every intermediate marked as an output (Polygraphy modify_outputs MARK_ALL), ONNX Runtime "
                      "CPU with graph optimisations off, shared names compared in B's topological order"}


def first_divergence_line(layers, tolerances):
    """One line naming where the models first disagree (or that no shared tensor does)."""
    first = layers["first_divergent"]
    if first is None:
        return "every one of {} shared intermediate tensors is within atol {:g} / rtol {:g}".format(
            layers["compared"], tolerances["atol"], tolerances["rtol"])
    return ("first divergent tensor {} (node {}, {}): max abs {:.3g}, max rel {:.3g}, tensor {} of {} in B's "
            "order".format(first["tensor"], first["node"] or "?", first["op_type"], first["max_abs"] or float("nan"),
                           first["max_rel"] or float("nan"), first["order"] + 1, layers["compared"]))


def format_layers(layers, tolerances):
    lines = ["  layers   " + first_divergence_line(layers, tolerances), "  worst    max abs    max rel  tensor"]
    for row in layers["worst"]:
        lines.append("           {:>9.3g} {:>9.3g}  {} ({}, {})".format(
            row["max_abs"] if row["max_abs"] is not None else float("nan"),
            row["max_rel"] if row["max_rel"] is not None else float("nan"), row["tensor"], row["node"],
            row["op_type"]))
    unmatched = layers["unmatched"]
    if any(unmatched.values()):
        lines.append("  unmatched {} only in A, {} only in B, {} with another shape (not compared)".format(
            len(unmatched["only_in_a"]), len(unmatched["only_in_b"]), len(unmatched["shape_differs"])))
    return lines
