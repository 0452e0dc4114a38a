"""``edgeattn build --plugins on|off|auto``: which custom ops of a model an engine runs as plugins.

TensorRT compiles the standard-op decomposition of an attention core (the model-local function the exporter
stores beside each custom op, or ``edgeattn export --no-plugins``) into its own fused kernels, on tensor cores in
FP16 and TF32. A plugin is only worth shipping where it beats that, and nobody can know without timing both on
the device. So:

* ``on`` runs every custom op as a plugin (the plugin library is required): the behaviour before this option;
* ``off`` runs none: each custom op is replaced by its decomposition, and no plugin library is needed or loaded;
* ``auto`` builds candidates with and without each custom-op *family* (op type), times each one with
  ``edgeattn bench``'s harness, and keeps the fastest; the manifest records every candidate and why it won or lost.

The decomposition of an op is the model's own model-local FunctionProto for it (the ``ort`` export variant has
one per custom op); a file without it (``--target tensorrt``) gets it rebuilt from ``export/schemas`` by
:mod:`edgeattn.export.functions`, the code that wrote it in the first place. The function is inlined with
``onnx.inliner``, then the attribute-driven selections the bodies contain are folded away (string attributes
become a one-hot through ``TfIdfVectorizer`` and pick ``If`` branches; TensorRT has no importer for
``TfIdfVectorizer`` and would otherwise build both branches), leaving the plain MatMul/Softmax/ReduceSum graph
TensorRT fuses. Folding evaluates nodes whose inputs are all known with ``onnx.reference`` and reads static
dimensions off shape inference, so it needs only onnx and numpy.

Search (``auto``): with the families F of the model, the candidates are all plugins, no plugins, and all plugins
but one family, for each family; for |F| <= 2 (every registered model: ELFATT has two families, the others one)
that is every subset, i.e. 2 builds for one family and 4 for two. Beyond two families it adds one more candidate,
the combination of the per-family verdicts (a family keeps its plugin when dropping it from "all plugins" made
the engine slower), so the cost is |F| + 3 builds and timings instead of 2^|F|. Each candidate is built in a
temporary directory beside the engine and timed for the same warm-up and duration; a candidate that fails to
build or run (no plugin library, a missing creator, a TensorRT error) is recorded with its error and the search
goes on; only when every candidate fails does the build fail. The metric is the median GPU compute time per
iteration (trtexec's and the TensorRT backend's device-side time; the median end-to-end latency when a backend
has none). Candidates within :data:`TIE_TOLERANCE` of the fastest count as equally fast, and of those the one
with the fewest plugins wins: a plugin that is not measurably faster is not worth a library to deploy.
"""
import collections
import re

from ..errors import EdgeAttnError

MODES = ("on", "off", "auto")
#: candidates within this fraction of the fastest median are "equally fast"; the one with fewer plugins wins
TIE_TOLERANCE = 0.01
#: folded tensors larger than this many elements stay computed at run time (index tables are far smaller)
MAX_FOLDED_ELEMENTS = 1 << 22
_MAX_FOLD_PASSES = 8
#: ops never evaluated at build time: random, or with no reference implementation worth trusting for folding
_NO_FOLD_OPS = frozenset(("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                          "Bernoulli", "If", "Loop", "Scan", "SequenceMap"))
_FOLD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")
STRATEGY = ("all plugins, no plugins, and all plugins but one family for each family (every subset for up to two "
            "families); with more families also the combination of the per-family verdicts")


# --------------------------------------------------------------------------------------------------------------
# modes
# --------------------------------------------------------------------------------------------------------------
def op_families(custom_ops):
    """The custom op types of a model (``custom_ops`` records of :func:`edgeattn.onnx_graph.custom_ops`), sorted."""
    return sorted({op["op_type"] for op in custom_ops})


def candidate_name(plugin_ops):
    return "plugins: {}".format(", ".join(sorted(plugin_ops)) or "none")


# --------------------------------------------------------------------------------------------------------------
# the standard-op decomposition
# --------------------------------------------------------------------------------------------------------------
def decompose(model, op_types):
    """A copy of ``model`` (a ModelProto; left unchanged) in which every node of ``op_types`` is replaced by its
    standard-op decomposition, plus ``{op_type: source}`` saying where each decomposition came from.

    External-data references are kept as they are, so the copy must be written beside the original.
    """
    from ..onnx_graph import import_onnx

    onnx = import_onnx("`edgeattn build --plugins off|auto` (inlining the custom ops' standard-op decompositions)")
    wanted = set(op_types)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    if not wanted:
        return copy, {}
    calls = [node for node in copy.graph.node if node.op_type in wanted and node.domain not in ("", "ai.onnx")]
    if not calls:
        return copy, {}
    keys = sorted({(node.domain, node.op_type) for node in calls})
    sources = decomposition_sources(copy, wanted)
    have = {(function.domain, function.name) for function in copy.functions}
    missing = [key for key in keys if key not in have]
    if missing:
        _attach_schema_functions(copy, missing)
    call_sites = [(node.name, list(node.output)) for node in calls]

    from onnx import inliner

    try:
        inlined = inliner.inline_selected_functions(copy, [list(key) for key in keys])
    except Exception as error:  # the C++ inliner reports bad bodies as plain exceptions
        raise EdgeAttnError("could not inline the decomposition of {}: {}".format(
            ", ".join(op for _, op in keys), " ".join(str(error).split())))
    # The exporter's value_info for a custom node's output is not guaranteed to match what the body computes
    # (shape inference cannot see through a plugin); TensorRT infers every shape itself.
    del inlined.graph.value_info[:]
    fold_constants(inlined)
    _name_nodes(inlined.graph, call_sites)
    _drop_unused_opsets(inlined)
    if not inlined.functions and int(inlined.ir_version) == 8:
        # IR 8 may only have been forced by the functions; the opsets' own minimum (7 at opset 13) is the IR
        # TensorRT 8.2's parser was built against.
        from onnx import helper

        inlined.ir_version = min(8, helper.find_min_ir_version_for(list(inlined.opset_import), True))
    left = [node.op_type for node in inlined.graph.node if node.op_type in wanted]
    if left:
        raise EdgeAttnError("{} still in the graph after inlining its decomposition".format(left[0]))
    return inlined, sources


def decomposition_sources(model, op_types):
    """``{op_type: where its standard-op decomposition comes from}`` for the custom ops of ``model`` in
    ``op_types``."""
    have = {(function.domain, function.name) for function in model.functions}
    sources = {}
    for node in model.graph.node:
        if node.op_type in op_types and node.domain not in ("", "ai.onnx") and node.op_type not in sources:
            sources[node.op_type] = "the model-local function" if (node.domain, node.op_type) in have else \
                "export/schemas (rebuilt: the file has no local function for it)"
    return sources


def _attach_schema_functions(model, keys):
    """Add the exporter's decompositions for ``keys`` (domain, op_type) that the file does not carry."""
    try:
        from ..export import functions
    except ImportError as error:
        raise EdgeAttnError("the model has no local function for {} and edgeattn.export.functions cannot be "
                            "imported to rebuild it ({})".format(", ".join(op for _, op in keys), error))
    built = {(function.domain, function.name): function for function in functions.build_functions(model)}
    for key in keys:
        if key not in built:
            raise EdgeAttnError("no standard-op decomposition of custom op {} (domain {!r}): it has no local "
                                "function in the file and no schema in export/schemas; run it with --plugins on"
                                .format(key[1], key[0]))
        model.functions.append(built[key])
    model.ir_version = max(int(model.ir_version), 8)


def _drop_unused_opsets(model):
    used = {node.domain or "" for node in _all_nodes(model.graph)}
    for function in model.functions:
        used.add(function.domain)
        used.update(node.domain or "" for node in function.node)
    kept = [opset for opset in model.opset_import if (opset.domain or "") in used or opset.domain in ("", "ai.onnx")]
    if len(kept) != len(model.opset_import):
        del model.opset_import[:]
        model.opset_import.extend(kept)


def _all_nodes(graph):
    for node in graph.node:
        yield node
        for subgraph in _subgraphs(node):
            for inner in _all_nodes(subgraph):
                yield inner


def _subgraphs(node):
    from onnx import AttributeProto

    for attribute in node.attribute:
        if attribute.type == AttributeProto.GRAPH:
            yield attribute.g
        elif attribute.type == AttributeProto.GRAPHS:
            for graph in attribute.graphs:
                yield graph


_SUFFIX = re.compile(r"__(\d+)$")


def _name_nodes(graph, call_sites):
    """Give every unnamed node a unique name ``<custom node name>/<op_type>_<k>``: FP16 builds pin FP32 islands by
    node name, and TensorRT's layer names (profiles, errors) then say which attention call a layer came from.

    The inliner suffixes each call's values with ``__<n>``; the call a suffix belongs to is read off the node that
    produces that call's output. Names are cosmetic, so an unknown suffix only gives a generic prefix.
    """
    call_of_output = {}
    for name, outputs in call_sites:
        for output in outputs:
            call_of_output[output] = name or "decomposed"
    prefix_of = {}
    for node in graph.node:
        call = next((call_of_output[o] for o in node.output if o in call_of_output), None)
        if call is None:
            continue
        for value in node.input:
            match = _SUFFIX.search(value)
            if match:
                prefix_of.setdefault(match.group(1), call)
    taken = {node.name for node in graph.node if node.name}
    counters = {}
    for node in graph.node:
        if node.name:
            continue
        prefix = next((call_of_output[o] for o in node.output if o in call_of_output), None)
        if prefix is None:
            match = next((m for m in (_SUFFIX.search(o) for o in node.output) if m), None)
            prefix = prefix_of.get(match.group(1), "decomposed") if match else "decomposed"
        while True:
            counters[prefix] = counters.get(prefix, 0) + 1
            name = "{}/{}_{}".format(prefix, node.op_type, counters[prefix])
            if name not in taken:
                break
        node.name = name
        taken.add(name)


# --------------------------------------------------------------------------------------------------------------
# constant folding
# --------------------------------------------------------------------------------------------------------------
def fold_constants(model):
    """Fold, in place, every main-graph node whose inputs are known at build time, replace ``If`` nodes whose
    condition is known by the branch they take, and drop what is no longer used. Returns the number of nodes
    folded or flattened.

    Known values: initializers (not overridable graph inputs, not external data), outputs of folded nodes, and
    ``Shape`` of tensors whose dimensions shape inference found static (also per element, so ``Gather``/``Slice``
    of a shape with a dynamic batch still fold when they pick static dimensions).
    """
    from onnx import numpy_helper

    graph = model.graph
    opsets = {(opset.domain or ""): int(opset.version) for opset in model.opset_import}
    total = 0
    for _ in range(_MAX_FOLD_PASSES):
        shapes = _static_shapes(model)
        inputs = {value.name for value in graph.input}
        known = {}
        for tensor in graph.initializer:
            if tensor.name not in inputs and not _is_external(tensor):
                known[tensor.name] = numpy_helper.to_array(tensor)
        partial = {}
        definitions = _definition_counts(graph)
        queue = list(graph.node)
        kept = []
        folded = {}
        changed = 0
        index = 0
        while index < len(queue):
            node = queue[index]
            index += 1
            if node.op_type == "If" and node.domain in ("", "ai.onnx") and node.input[0] in known:
                branch = _taken_branch(node, known[node.input[0]])
                inner = _branch_nodes(node, branch, definitions)
                if inner is not None:
                    queue[index:index] = inner
                    changed += 1
                    continue
            values = _fold_node(node, known, partial, shapes, opsets)
            if values is None:
                kept.append(node)
                continue
            for name, value in zip(node.output, values):
                if name:
                    known[name] = value
                    folded[name] = value
            changed += 1
        if not changed:
            break
        total += changed
        del graph.node[:]
        graph.node.extend(kept)
        used = _used_names(graph)
        existing = {tensor.name for tensor in graph.initializer}
        for name, value in folded.items():
            if name in used and name not in existing:
                graph.initializer.append(_to_tensor(value, name))
        _prune(graph)
    return total


def _is_external(tensor):
    from onnx import TensorProto

    return tensor.HasField("data_location") and tensor.data_location == TensorProto.EXTERNAL


def _to_tensor(value, name):
    import numpy as np
    from onnx import numpy_helper

    array = np.asarray(value)
    if array.dtype.kind == "U":
        array = array.astype(object)
    return numpy_helper.from_array(array, name)


def _static_shapes(model):
    """``{value name: [int or None per dimension]}`` from shape inference (empty where inference fails)."""
    from onnx import shape_inference

    try:
        inferred = shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # inference is an optimisation here: without it only constants fold
        inferred = model
    shapes = {}
    graph = inferred.graph
    for value in list(graph.input) + list(graph.value_info) + list(graph.output):
        tensor = value.type.tensor_type
        if not tensor.HasField("shape"):
            continue
        shapes[value.name] = [int(dim.dim_value) if dim.HasField("dim_value") else None for dim in tensor.shape.dim]
    return shapes


def _definition_counts(graph):
    """How many times each value name is defined anywhere in ``graph`` (subgraphs included)."""
    counts = collections.Counter(value.name for value in graph.input)
    counts.update(tensor.name for tensor in graph.initializer)
    for node in _all_nodes(graph):
        counts.update(name for name in node.output if name)
    return counts


def _names_defined_in(graphs):
    counts = collections.Counter()
    for graph in graphs:
        counts.update(tensor.name for tensor in graph.initializer)
        for node in _all_nodes(graph):
            counts.update(name for name in node.output if name)
    return counts


def _taken_branch(node, condition):
    import numpy as np

    flag = bool(np.asarray(condition).reshape(-1)[0])
    for attribute in node.attribute:
        if attribute.name == ("then_branch" if flag else "else_branch"):
            return attribute.g
    return None


def _branch_nodes(node, branch, definitions):
    """The branch's nodes plus Identity nodes from its outputs to the If's outputs; None if it cannot be lifted
    into the main graph as it is: a value it defines is also defined outside this If (subgraph scopes may reuse
    names, the main graph may not), or the output counts differ."""
    from onnx import helper

    if branch is None or len(branch.output) != len(node.output):
        return None
    inside = _names_defined_in(list(_subgraphs(node)))
    mine = _names_defined_in([branch])
    if any(definitions[name] > inside[name] or name in node.output for name in mine):
        return None
    nodes = [_copy_node(inner) for inner in branch.node]
    for tensor in branch.initializer:
        nodes.insert(0, helper.make_node("Constant", [], [tensor.name], value=tensor))
    for source, target in zip(branch.output, node.output):
        if target:
            nodes.append(helper.make_node("Identity", [source.name], [target]))
    return nodes


def _copy_node(node):
    from onnx import NodeProto

    copy = NodeProto()
    copy.CopyFrom(node)
    return copy


def _fold_node(node, known, partial, shapes, opsets):
    """Output values of ``node`` when they can be computed now, else None (``partial`` collects shapes with
    dynamic dimensions for Gather/Slice of them)."""
    import numpy as np

    if node.op_type in _NO_FOLD_OPS or node.domain not in _FOLD_DOMAINS or any(True for _ in _subgraphs(node)):
        return None
    if node.op_type == "Shape" and node.input[0] not in known:
        dims = shapes.get(node.input[0])
        if dims is None:
            return None
        start, end = _shape_bounds(node, len(dims))
        dims = dims[start:end]
        if None in dims:
            partial[node.output[0]] = dims
            return None
        return [np.array(dims, dtype=np.int64)]
    if node.input and node.input[0] in partial and all(name in known for name in node.input[1:] if name):
        dims = _partial_shape_op(node, partial[node.input[0]], known)
        if dims is None or isinstance(dims, np.ndarray):
            return None if dims is None else [dims]
        if None in dims:
            partial[node.output[0]] = dims
            return None
        return [np.array(dims, dtype=np.int64)]
    if not all(name in known for name in node.input if name):
        return None
    try:
        values = _evaluate(node, known, opsets)
    except Exception:  # an op the reference cannot run stays in the graph; TensorRT computes it
        return None
    if any(np.asarray(value).size > MAX_FOLDED_ELEMENTS for value in values):
        return None
    return values


def _shape_bounds(node, rank):
    start, end = 0, rank
    for attribute in node.attribute:
        if attribute.name == "start":
            start = attribute.i
        elif attribute.name == "end":
            end = attribute.i
    start = max(0, min(rank, start + rank if start < 0 else start))
    end = max(0, min(rank, end + rank if end < 0 else end))
    return start, end


def _partial_shape_op(node, dims, known):
    """Gather/Slice/Identity of a shape vector whose entries are ints or None (dynamic): the result's entries,
    or None when the op is another one or picks in a way this does not follow."""
    import numpy as np

    if node.op_type == "Identity":
        return list(dims)
    if node.op_type == "Gather":
        if next((a.i for a in node.attribute if a.name == "axis"), 0) != 0:
            return None
        indices = np.asarray(known[node.input[1]]).astype(np.int64)
        if indices.ndim == 0:
            picked = dims[int(indices)]
            return None if picked is None else np.array(picked, dtype=np.int64)
        if indices.ndim != 1:
            return None
        return [dims[int(i)] for i in indices]
    if node.op_type == "Slice" and len(node.input) >= 3:
        def operand(position, default):
            if len(node.input) > position and node.input[position]:
                return [int(v) for v in np.asarray(known[node.input[position]]).reshape(-1)]
            return default

        starts, ends, axes, steps = operand(1, None), operand(2, None), operand(3, [0]), operand(4, [1])
        if len(starts) != 1 or len(ends) != 1 or axes not in ([0], [-1]) or len(steps) != 1 or steps[0] == 0:
            return None
        return list(dims)[starts[0]:ends[0]:steps[0]]  # Python clamps out-of-range bounds as ONNX Slice does
    return None


def _evaluate(node, known, opsets):
    from onnx.reference import ReferenceEvaluator

    evaluator = ReferenceEvaluator(node, opsets=opsets)
    feeds = {name: known[name] for name in node.input if name}
    return evaluator.run(None, feeds)


def _used_names(graph):
    used = {value.name for value in graph.output}
    for node in _all_nodes(graph):
        used.update(name for name in node.input if name)
    return used


def _prune(graph):
    """Drop nodes whose outputs nothing uses (subgraph references count) and initializers nobody reads."""
    needed = {value.name for value in graph.output}
    kept = []
    for node in reversed(list(graph.node)):
        if any(output in needed for output in node.output if output):
            kept.append(node)
            needed.update(name for name in node.input if name)
            for subgraph in _subgraphs(node):
                for inner in _all_nodes(subgraph):
                    needed.update(name for name in inner.input if name)
    kept.reverse()
    if len(kept) != len(graph.node):
        del graph.node[:]
        graph.node.extend(kept)
    inputs = {value.name for value in graph.input}
    initializers = [tensor for tensor in graph.initializer if tensor.name in needed or tensor.name in inputs]
    if len(initializers) != len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(initializers)


# --------------------------------------------------------------------------------------------------------------
# the search
# --------------------------------------------------------------------------------------------------------------
class Candidate(object):
    """One engine of the search: the ops it runs as plugins, and what building and timing it gave."""

    def __init__(self, plugin_ops, families):
        self.plugin_ops = frozenset(plugin_ops)
        self.standard_ops = frozenset(families) - self.plugin_ops
        self.name = candidate_name(self.plugin_ops)
        self.manifest = None
        self.engine_file = None
        self.bench = None
        self.error = None
        self.status = None
        self.reason = None

    @property
    def ok(self):
        return self.error is None and self.bench is not None

    def metric(self, key):
        block, stat = key.split(".")
        return (self.bench.get(block) or {}).get(stat)

    def record(self):
        bench = self.bench or {}
        manifest = self.manifest or {}
        return {
            "name": self.name,
            "plugin_ops": sorted(self.plugin_ops),
            "standard_ops": sorted(self.standard_ops),
            "status": self.status,
            "reason": self.reason,
            "error": self.error,
            "build_seconds": manifest.get("build_seconds"),
            "engine_sha256": (manifest.get("engine") or {}).get("sha256"),
            "onnx_variant": (manifest.get("source_onnx") or {}).get("variant"),
            "iterations": bench.get("iterations"),
            "latency_ms": bench.get("latency_ms"),
            "gpu_compute_ms": bench.get("gpu_compute_ms"),
            "throughput_items_per_s": bench.get("throughput_items_per_s"),
        }


def search(families, evaluate):
    """Run the search over ``families``; ``evaluate(candidate)`` builds and times one candidate in place (errors
    recorded on it, never raised). Returns the candidates in the order they were tried."""
    everything = frozenset(families)
    tried = []
    seen = {}

    def run(plugin_ops):
        plugin_ops = frozenset(plugin_ops)
        if plugin_ops in seen:
            return seen[plugin_ops]
        candidate = Candidate(plugin_ops, families)
        seen[plugin_ops] = candidate
        tried.append(candidate)
        evaluate(candidate)
        return candidate

    all_on = run(everything)
    run(frozenset())
    without = {}
    for family in sorted(families):
        without[family] = run(everything - {family})
    if len(families) > 2 and all_on.ok:
        key = metric_key(tried)
        keep = [family for family in families
                if not without[family].ok or without[family].metric(key) > all_on.metric(key)]
        run(keep)
    return tried


def metric_key(candidates):
    """``gpu_compute_ms.p50`` when every successful candidate has device-side times, else ``latency_ms.p50``."""
    ok = [c for c in candidates if c.ok]
    if ok and all(c.bench.get("gpu_compute_ms") for c in ok):
        return "gpu_compute_ms.p50"
    return "latency_ms.p50"


def choose(candidates):
    """The winner among ``candidates``; sets every candidate's status and reason. Raises when all failed."""
    ok = [c for c in candidates if c.ok]
    for candidate in candidates:
        if not candidate.ok:
            candidate.status = "failed"
            candidate.reason = "failed: {}".format(candidate.error)
    if not ok:
        raise EdgeAttnError("every --plugins auto candidate failed: {}".format(
            "; ".join("{} ({})".format(c.name, c.error) for c in candidates)))
    key = metric_key(candidates)
    label = _metric_label(key)
    fastest = min(ok, key=lambda c: c.metric(key))
    best = fastest.metric(key)
    close = [c for c in ok if c.metric(key) <= best * (1.0 + TIE_TOLERANCE)]
    winner = min(close, key=lambda c: (len(c.plugin_ops), c.metric(key)))
    mine = winner.metric(key)
    for candidate in ok:
        value = candidate.metric(key)
        if candidate is winner:
            candidate.status = "selected"
            if candidate is fastest or value == best:
                ties = len(close) - 1
                runner_up = [c.metric(key) for c in ok if c not in close]
                if ties:
                    detail = "; {} other(s) within {:g}% run more ops as plugins".format(ties, TIE_TOLERANCE * 100)
                elif runner_up and value > 0:
                    detail = "; next {:.1f}% slower".format(100.0 * (min(runner_up) / value - 1.0))
                else:
                    detail = ""
                candidate.reason = "fastest: {} {:.4g} ms{}".format(label, value, detail)
            else:
                candidate.reason = ("{} {:.4g} ms, within {:g}% of the fastest ({}, {:.4g} ms) with fewer ops as "
                                    "plugins".format(label, value, TIE_TOLERANCE * 100, fastest.name, best))
        elif candidate in close:
            candidate.status = "rejected"
            candidate.reason = ("{} {:.4g} ms, within {:g}% of the selected candidate but with more ops as plugins"
                                .format(label, value, TIE_TOLERANCE * 100))
        else:
            candidate.status = "rejected"
            candidate.reason = "{} {:.4g} ms, {:.1f}% slower than the selected candidate".format(
                label, value, 100.0 * (value / mine - 1.0) if mine > 0 else float("inf"))
    return winner


def _metric_label(key):
    return {"gpu_compute_ms.p50": "median GPU compute", "latency_ms.p50": "median latency"}[key]


def op_verdicts(families, candidates, winner):
    """Per custom op: how it runs in the selected engine and the best time with and without its plugin."""
    key = metric_key(candidates)
    label = _metric_label(key)
    ok = [c for c in candidates if c.ok]
    verdicts = {}
    for family in sorted(families):
        with_plugin = [c for c in ok if family in c.plugin_ops]
        without = [c for c in ok if family not in c.plugin_ops]
        parts = []
        for text, group in (("with the plugin", with_plugin), ("with standard ops", without)):
            if group:
                best = min(group, key=lambda c: c.metric(key))
                parts.append("{}: best {} {:.4g} ms ({})".format(text, label, best.metric(key), best.name))
            else:
                parts.append("{}: no candidate built and ran".format(text))
        verdicts[family] = {"runs_as": "plugin" if family in winner.plugin_ops else "standard ops",
                            "reason": "; ".join(parts)}
    return verdicts
