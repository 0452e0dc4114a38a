"""The standard-op decomposition of custom ops, for engines that run them without plugins.

Each custom op's decomposition is the model's own model-local FunctionProto for it (the ``ort`` export variant has
one per custom op); a file without it (``--target tensorrt``) gets it rebuilt from ``export/schemas`` by
:mod:`edgeattn.export.functions`, the code that wrote it in the first place. The calls are inlined with onnx's own
inliner (``onnx.inliner.inline_selected_functions``, onnx >= 1.16, the board-side lower bound), then the
attribute-driven selections the bodies contain are folded away by :func:`edgeattn.onnx_fold.fold_constants`
(string attributes become a one-hot through ``TfIdfVectorizer`` and pick ``If`` branches; TensorRT has no importer
for ``TfIdfVectorizer`` and would otherwise build both branches), leaving the plain MatMul/Softmax/ReduceSum graph
TensorRT fuses. Hand-written here is only what no tool does: naming the inlined nodes after the call they came
from (FP16 builds pin FP32 islands by node name) and dropping the opsets and IR version the functions needed.
"""
import re

from ..errors import EdgeAttnError
from ..onnx_fold import all_nodes, fold_constants


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
    used = {node.domain or "" for node in all_nodes(model.graph)}
    for function in model.functions:
        used.add(function.domain)
        used.update(node.domain or "" for node in function.node)
    kept = [opset for opset in model.opset_import if (opset.domain or "") in used or opset.domain in ("", "ai.onnx")]
    if len(kept) != len(model.opset_import):
        del model.opset_import[:]
        model.opset_import.extend(kept)


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
