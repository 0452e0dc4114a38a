"""``edgeattn compare A B --layers``: where two models first disagree.

Each side gives every intermediate tensor it computes, as Polygraphy does with "mark all":

* an ONNX file: every intermediate becomes a graph output (``polygraphy.backend.onnx.modify_outputs(model,
  outputs=constants.MARK_ALL)``, what ``polygraphy run --onnx-outputs mark all`` does) and the model runs on ONNX
  Runtime CPU with its graph optimisations off, so that every tensor keeps its ONNX name;
* a TensorRT engine: a built engine keeps only its inputs and outputs, so it is rebuilt from the ONNX file its
  manifest names (same precision policy, profile, ONNX variant and plugins: ``edgeattn.engine``'s
  ``build_marked_engine``, handed in by the caller) with every network tensor marked as an output
  (``polygraphy.backend.trt.ModifyNetworkOutputs(network, outputs=constants.MARK_ALL)``, what ``polygraphy run --trt
  --trt-outputs mark all`` does) and run once through TensorRT's Python runtime. TensorRT's ONNX parser names a
  layer's output after the ONNX tensor it computes, so both sides meet by name. An engine without a manifest, or
  whose ONNX is gone or changed, is refused in one line: per-tensor values need the ONNX (its final outputs are
  what plain ``compare`` already checks). trtexec cannot mark every tensor, so this needs TensorRT's Python
  bindings.

The tensors both sides share by name are compared in B's topological order (ONNX keeps a graph's nodes sorted; an
engine side's order is its ONNX's) with the comparison's own metrics and tolerances (Polygraphy's element-wise
comparator, B the reference), on the inputs of one engine run (all inputs when both sides are ONNX files). The
report names the first tensor outside them (the node producing it, its op type and error), the worst tensors, and
what could not be matched instead of guessing: tensors of an engine's ONNX graph that the TensorRT engine does not
return ("not comparable: fused": folded by the parser, swallowed by a fused region or a plugin, or a shape or
constant tensor Polygraphy does not mark), tensors only one side has (TensorRT's own intermediates such as
``(Unnamed Layer* 7) [Shuffle]_output``), and tensors whose shapes differ.

Marking a tensor as an output keeps TensorRT from fusing across it, so the marked engine can pick other kernels
than the one being checked: it says where the graph drifts, not what the original engine's fused kernels compute.
"""
import collections
import os
import shutil
import tempfile

import numpy as np

from ..errors import EdgeAttnError
from .metrics import _polygraphy_compare
from .sides import EngineSide, _quiet_polygraphy

#: how many of the worst tensors the report keeps
WORST = 10
#: how many "not comparable" names the text lists (``--json`` has them all)
LISTED = 5
ONNX_METHOD = ("every intermediate marked as an output (Polygraphy modify_outputs MARK_ALL), ONNX Runtime CPU with "
               "graph optimisations off")
TENSORRT_METHOD = ("rebuilt from its ONNX with every network tensor marked as an output (Polygraphy "
                   "ModifyNetworkOutputs MARK_ALL), TensorRT Python runtime")


def mark_every_tensor(builder, network, parser=None):
    """Mark every layer output of a parsed TensorRT network as a network output, as Polygraphy's ``--trt-outputs
    mark all`` does (shape and constant tensors, and tensors inside loops, stay unmarked: TensorRT cannot return
    them). Called by ``edgeattn.engine``'s builder between parsing and building."""
    with _quiet_polygraphy():
        from polygraphy import constants
        from polygraphy.backend.trt import ModifyNetworkOutputs
        from polygraphy.exception import PolygraphyException

        try:
            ModifyNetworkOutputs((builder, network, parser), outputs=constants.MARK_ALL)()
        except PolygraphyException as error:
            raise EdgeAttnError("Polygraphy could not mark every tensor of the network as an output: {}".format(
                " ".join(str(error).split())))
    return network


def _graph_nodes(path):
    from .. import onnx_graph

    model = onnx_graph.load_model(path, "`edgeattn compare --layers`")
    return model, [(node.name, node.op_type, list(node.output)) for node in model.graph.node]


def _all_outputs_session(path):
    """An ONNX Runtime CPU session on ``path`` with every intermediate tensor as an output, and the model's nodes."""
    from ..bench.onnxruntime_backend import import_onnxruntime, open_session

    model, nodes = _graph_nodes(path)
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


def engine_onnx(side):
    """The ONNX file an engine side is rebuilt from for ``--layers``; :class:`EdgeAttnError` in one line when
    there is none to trust."""
    from .._io import sha256_file

    why = "--layers on the engine {}: per-tensor comparison rebuilds it from its ONNX with every tensor marked as " \
          "an output, ".format(side.path)
    source = ((side.manifest or {}).get("source_onnx") or {}).get("path")
    if not source:
        raise EdgeAttnError(why + "and it has no manifest naming its ONNX: compare its ONNX file instead, or "
                                  "rebuild it with `edgeattn build`")
    if not os.path.isfile(source):
        raise EdgeAttnError(why + "but {} (named by its manifest) is not there: compare its ONNX file "
                                  "instead".format(source))
    if side.manifest["source_onnx"].get("sha256") not in (None, sha256_file(source)):
        raise EdgeAttnError(why + "but {} changed since the engine was built: rebuild the engine with `edgeattn "
                                  "build`".format(source))
    return source


def check_layer_sides(sides, marked_build):
    """Refuse, before anything runs, a side ``--layers`` cannot read every tensor of (one line)."""
    for side in sides:
        if side.kind == "onnx":
            continue
        if side.kind != "engine":
            raise EdgeAttnError("--layers compares ONNX files and TensorRT engines (every intermediate tensor marked "
                                "as an output); {} is a {}: export it to ONNX first".format(side.path, side.kind))
        engine_onnx(side)
        if marked_build is None:
            raise EdgeAttnError("--layers on the engine {}: this caller cannot rebuild engines; compare its ONNX "
                                "file instead".format(side.path))
        from ..tensorrt.api import import_tensorrt, tensorrt_version
        from ..trtexec.version import TrtVersion

        trt = import_tensorrt("--layers on an engine (rebuilt with every tensor marked as an output; trtexec cannot "
                              "mark them)")
        try:
            built_with = TrtVersion(str(side.manifest["tensorrt"]["version"]))
        except (KeyError, TypeError, ValueError):
            built_with = None
        if built_with and built_with != tensorrt_version(trt):
            # another TensorRT would rebuild another engine: its tensors would say nothing about this one
            raise EdgeAttnError("--layers on the engine {}: it was built with TensorRT {}, and the rebuild with "
                                "every tensor marked would use this Python's TensorRT {}: run it where that "
                                "TensorRT is, or rebuild the engine with this one (`edgeattn build`)".format(
                                    side.path, built_with, tensorrt_version(trt)))


def _side_tensors(side, batch, marked_build, plugins, say):
    """``(tensors OrderedDict, graph nodes, runtime record)`` of one side."""
    if side.kind == "onnx":
        session, nodes = _all_outputs_session(side.path)
        return _run(session, batch), nodes, {"onnx": os.path.abspath(side.path), "method": ONNX_METHOD}
    source = engine_onnx(side)
    _, nodes = _graph_nodes(source)
    workdir = tempfile.mkdtemp(prefix="edgeattn-layers-")
    marked = None
    try:
        engine_file = os.path.join(workdir, "marked.engine")
        marked_build(side.manifest, engine_file, plugins=plugins, progress=say)
        marked = EngineSide(engine_file, backend="tensorrt", plugins=plugins)
        marked.chunk = len(batch)  # one run of the marked engine
        say("running the marked engine on {} input(s)".format(len(batch)))
        tensors = marked.run(batch)
    finally:
        if marked is not None:
            marked.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return tensors, nodes, {"onnx": source, "method": TENSORRT_METHOD}


def _layer_batch(sides, batch):
    """The inputs of one engine run (the first chunk an engine side takes); all of them for two ONNX files."""
    count = len(batch)
    for side in sides:
        if side.kind == "engine":
            count = min(count, side.chunks(len(batch))[0][1])
    return batch[:count]


def compare_layers(sides, batch, atol, rtol, marked_build=None, plugins=None, progress=None):
    """The ``layers`` record of ``edgeattn compare --layers`` for two opened sides (ONNX or engine) on ``batch``.
    ``marked_build(manifest, engine_file, plugins=, progress=)`` rebuilds an engine side with every tensor
    marked."""
    say = progress or (lambda message: None)
    check_layer_sides(sides, marked_build)
    batch = _layer_batch(sides, batch)
    read = [_side_tensors(side, batch, marked_build, plugins, say) for side in sides]
    (out_a, nodes_a, run_a), (out_b, nodes_b, run_b) = read
    producer = {}
    order = []
    for name, op_type, outputs in list(nodes_b) + list(nodes_a):
        for tensor in outputs:
            if tensor and tensor not in producer:
                producer[tensor] = (name, op_type)
                order.append(tensor)
    fused = []
    for label, side, tensors, nodes, other in (("A", sides[0], out_a, nodes_a, out_b),
                                                 ("B", sides[1], out_b, nodes_b, out_a)):
        if side.kind != "engine":
            continue
        for name, op_type, outputs in nodes:
            fused.extend({"tensor": t, "node": name, "op_type": op_type, "side": label}
                         for t in outputs if t and t not in tensors and t in other)
    fused_names = {entry["tensor"] for entry in fused}
    shared = [t for t in order if t in out_a and t in out_b]
    mismatched = [t for t in shared if np.shape(out_a[t]) != np.shape(out_b[t])]
    comparable = [t for t in shared if t not in mismatched]
    if not comparable:
        raise EdgeAttnError("{} and {} share no intermediate tensor by name (with the same shape): nothing to "
                            "compare layer by layer".format(sides[0].path, sides[1].path))
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
    only_a = [t for t in out_a if t not in out_b and t not in fused_names]
    only_b = [t for t in out_b if t not in out_a and t not in fused_names]
    return {"compared": len(rows), "inputs": int(len(batch)), "first_divergent": first, "worst": worst[:WORST],
            "tensors": rows,
            "unmatched": {"only_in_a": only_a, "only_in_b": only_b, "shape_differs": mismatched, "fused": fused},
            "a": run_a, "b": run_b,
            "method": "shared tensor names compared in B's topological order; A: {}; B: {}".format(
                run_a["method"], run_b["method"])}


def first_divergence_line(layers, tolerances):
    """One line naming where the models first disagree (or that no shared tensor does)."""
    first = layers["first_divergent"]
    if first is None:
        return "every one of {} shared intermediate tensors is within atol {:g} / rtol {:g}".format(
            layers["compared"], tolerances["atol"], tolerances["rtol"])
    return ("first divergent tensor {} (node {}, {}): max abs {:.3g}, max rel {:.3g}, tensor {} of {} in B's "
            "order".format(first["tensor"], first["node"] or "?", first["op_type"], first["max_abs"] or float("nan"),
                           first["max_rel"] or float("nan"), first["order"] + 1, layers["compared"]))


def _listed(entries):
    names = ["{} ({}, {})".format(e["tensor"], e["node"] or "?", e["op_type"]) for e in entries[:LISTED]]
    if len(entries) > LISTED:
        names.append("... {} more (--json lists all)".format(len(entries) - LISTED))
    return ", ".join(names)


def format_layers(layers, tolerances):
    lines = ["  layers   " + first_divergence_line(layers, tolerances), "  worst    max abs    max rel  tensor"]
    for row in layers["worst"]:
        lines.append("           {:>9.3g} {:>9.3g}  {} ({}, {})".format(
            row["max_abs"] if row["max_abs"] is not None else float("nan"),
            row["max_rel"] if row["max_rel"] is not None else float("nan"), row["tensor"], row["node"],
            row["op_type"]))
    unmatched = layers["unmatched"]
    for label in ("A", "B"):
        fused = [entry for entry in unmatched.get("fused") or () if entry["side"] == label]
        if fused:
            lines.append("  not comparable: fused ({} on TensorRT returns no such tensor): {}".format(
                label, _listed(fused)))
    if unmatched["only_in_a"] or unmatched["only_in_b"] or unmatched["shape_differs"]:
        lines.append("  unmatched {} only in A, {} only in B, {} with another shape (not compared)".format(
            len(unmatched["only_in_a"]), len(unmatched["only_in_b"]), len(unmatched["shape_differs"])))
    return lines
