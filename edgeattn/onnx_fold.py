"""Constant folding of an ONNX graph without ONNX Runtime: what a model-local function body selects by its
attributes is resolved at build time, so TensorRT sees only the operators that compute.

Why it is hand-written. The field's folders evaluate through ONNX Runtime: onnx-graphsurgeon's
``Graph.fold_constants`` imports ``onnxruntime``, Polygraphy's ``FoldConstants`` loader and ``surgeon sanitize
--fold-constants`` call that, and ONNX Runtime's own graph optimizer is ONNX Runtime. The board-side commands run on
Python 3.8 without onnxruntime (docs/dependencies.md), and onnx itself ships an inliner (used by
:mod:`edgeattn.engine.decomposition`) but no folder. So only the driver is written here; every node is evaluated by
onnx's reference evaluator (``onnx.reference.ReferenceEvaluator``) and static dimensions come from onnx's shape
inference. Two steps the field's folders do not take either are written out as well: an ``If`` whose condition is
known is replaced by the branch it takes (the branch's nodes lifted into the main graph), and ``Gather``/``Slice``
of a shape with a dynamic batch dimension fold when they pick static dimensions.
"""
import collections

#: folded tensors larger than this many elements stay computed at run time (index tables are far smaller)
MAX_FOLDED_ELEMENTS = 1 << 22
_MAX_FOLD_PASSES = 8
#: ops never evaluated at build time: random, or with no reference implementation worth trusting for folding
_NO_FOLD_OPS = frozenset(("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                          "Bernoulli", "If", "Loop", "Scan", "SequenceMap"))
_FOLD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")


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
    for node in all_nodes(graph):
        counts.update(name for name in node.output if name)
    return counts


def _names_defined_in(graphs):
    counts = collections.Counter()
    for graph in graphs:
        counts.update(tensor.name for tensor in graph.initializer)
        for node in all_nodes(graph):
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
    inside = _names_defined_in(list(subgraphs(node)))
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

    if node.op_type in _NO_FOLD_OPS or node.domain not in _FOLD_DOMAINS or any(True for _ in subgraphs(node)):
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
    for node in all_nodes(graph):
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
            for subgraph in subgraphs(node):
                for inner in all_nodes(subgraph):
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


def all_nodes(graph):
    """Every node of ``graph`` and of its subgraphs (If branches, Loop bodies), depth first."""
    for node in graph.node:
        yield node
        for subgraph in subgraphs(node):
            for inner in all_nodes(subgraph):
                yield inner


def subgraphs(node):
    """The graphs a node's attributes hold (If's branches, Loop/Scan bodies)."""
    from onnx import AttributeProto

    for attribute in node.attribute:
        if attribute.type == AttributeProto.GRAPH:
            yield attribute.g
        elif attribute.type == AttributeProto.GRAPHS:
            for graph in attribute.graphs:
                yield graph
