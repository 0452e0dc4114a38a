"""What to quantize in an exported ONNX graph, and the checks a Q/DQ graph must pass for TensorRT (onnx only).

Selection. ``linear`` (the default): the MatMul, Gemm and Conv nodes whose second input is a weight (an initializer
or a Constant), i.e. the Linear and convolution layers; the products of two activations (attention scores and
contexts), residual Adds, LayerNorm, Softmax and GELU stay in floating point. ``all``: every op type ONNX Runtime's
quantizer knows (Add, Mul, Softmax, LayerNormalization, ... as well). Never a ``trt.plugins`` node: TensorRT cannot
fuse Q/DQ into a plugin, and each custom node keeps its schema, attributes and FP16/FP32 inputs and outputs.

Groups. Each candidate belongs to the transformer block or stage its ONNX node name places it in (the deepest
``name.N`` path component of the exporter's ``/blocks.0/attn/qkv/MatMul``-style names: ``blocks.0``,
``stages.1.3``, ``merges.0``; else the first component: ``patch_embed``, ``head``), which is what
``edgeattn quantize --sensitivity`` quantizes one at a time.

TensorRT's rules for explicit quantization (NVIDIA TensorRT Developer Guide, "Explicit Quantization" and "Q/DQ
Layer-Placement Recommendations", https://docs.nvidia.com/deeplearning/tensorrt/latest/inference-library/
quantized-types-explicit-quantization.html): INT8 only, symmetric (zero point 0, which the ONNX parser enforces:
"Non-zero zero point is not supported"), per-tensor activations and per-channel weights along the output channel.
:func:`check_qdq` verifies them on the written graph.
"""
import fnmatch
import re

PLUGIN_DOMAIN = "trt.plugins"
LINEAR_OPS = ("MatMul", "Gemm", "Conv")
#: op types that make a model count as already quantized
QUANTIZED_OPS = ("QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "MatMulInteger",
                 "ConvInteger", "DynamicQuantizeLinear", "QGemm", "QAttention")
OPS_CHOICES = ("linear", "all")
_BLOCK_COMPONENT = re.compile(r"^[A-Za-z_]\w*(\.\d+)+$")


def _onnx():
    from ..errors import MissingDependencyError

    try:
        import onnx
    except ImportError:
        raise MissingDependencyError("onnx", "reading ONNX graphs", "pip install onnx")
    return onnx


def qdq_count(model):
    """Number of quantization nodes (Q/DQ or integer ops) in the main graph of ``model`` (a ModelProto)."""
    return sum(1 for node in model.graph.node if node.op_type in QUANTIZED_OPS and node.domain in ("", "ai.onnx"))


def file_has_qdq(path):
    """Whether the ONNX file at ``path`` holds explicit quantization (read without its external weights)."""
    onnx = _onnx()
    return qdq_count(onnx.load(path, load_external_data=False)) > 0


def constant_names(model):
    """Initializer names plus the outputs of Constant nodes: the tensors a weight can come from."""
    names = {init.name for init in model.graph.initializer}
    names.update(out for node in model.graph.node if node.op_type == "Constant" for out in node.output)
    return names


def linear_nodes(model):
    """The MatMul/Gemm/Conv nodes with a constant weight (second input), in graph order."""
    constants = constant_names(model)
    return [node for node in model.graph.node
            if node.domain in ("", "ai.onnx") and node.op_type in LINEAR_OPS and len(node.input) > 1
            and node.input[1] in constants]


def candidate_nodes(model, ops):
    """Nodes ``--ops`` selects: see the module docstring. ``all`` needs ONNX Runtime's registry of op types."""
    if ops == "linear":
        return linear_nodes(model)
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    known = set(QDQRegistry) | set(QLinearOpsRegistry)
    return [node for node in model.graph.node if node.domain in ("", "ai.onnx") and node.op_type in known]


def matches(node, pattern):
    """``pattern`` is an op type (exactly) or a shell-style pattern on the node name."""
    return node.op_type == pattern or fnmatch.fnmatchcase(node.name, pattern)


def unmatched_patterns(model, patterns):
    """The patterns that match no node of the graph (the caller warns about them)."""
    return [pattern for pattern in patterns if not any(matches(node, pattern) for node in model.graph.node)]


def excluded(node, patterns):
    return any(matches(node, pattern) for pattern in patterns)


def group_of(name):
    """``(group, pattern)`` for a node name: the block/stage it belongs to and an ``--exclude`` pattern for it."""
    parts = [part for part in name.split("/") if part]
    depth = None
    for index, part in enumerate(parts[:-1]):
        if _BLOCK_COMPONENT.match(part):
            depth = index
    if depth is None:
        depth = 0 if len(parts) > 1 else None
    if depth is None:
        return name, name
    prefix = "/" if name.startswith("/") else ""
    return parts[depth], prefix + "/".join(parts[:depth + 1]) + "/*"


def groups(nodes):
    """``[(group, pattern, [node names])]`` in graph order."""
    ordered = {}
    for node in nodes:
        group, pattern = group_of(node.name)
        ordered.setdefault((group, pattern), []).append(node.name)
    return [(group, pattern, names) for (group, pattern), names in ordered.items()]


def name_unnamed_nodes(model):
    """Give every nameless node a unique name (the quantizer selects nodes by name)."""
    used = {node.name for node in model.graph.node if node.name}
    for index, node in enumerate(model.graph.node):
        if not node.name:
            name = "{}_{}".format(node.op_type, index)
            while name in used:
                name += "_"
            node.name = name
            used.add(name)


def plugin_signatures(model):
    """``{name: (op_type, attributes bytes)}`` of the trt.plugins nodes, to check that quantization kept them."""
    return {node.name: (node.op_type, tuple(attr.SerializeToString() for attr in node.attribute),
                        len(node.input), len(node.output))
            for node in model.graph.node if node.domain == PLUGIN_DOMAIN}


def _initializer_arrays(model):
    from onnx import numpy_helper

    return {init.name: init for init in model.graph.initializer}, numpy_helper


def symmetrize(model):
    """Rewrite any asymmetric or UINT8 Q/DQ parameters as symmetric INT8 covering the same range.

    ONNX Runtime's quantizer fixes some outputs to an asymmetric range whatever ``ActivationSymmetric`` says
    (Softmax's [0, 1] as UINT8 with zero point 0 -> a scale of 1/255 on [0, 255]; Sigmoid likewise); TensorRT
    rejects a non-zero zero point and takes INT8 only. A range [(0 - z) s, (q_max - z) s] becomes zero point 0 and
    scale max(|lo|, |hi|) / 127. Returns the number of parameter pairs rewritten.
    """
    import numpy as np

    initializers, numpy_helper = _initializer_arrays(model)
    done = set()
    for node in model.graph.node:
        if node.op_type not in ("QuantizeLinear", "DequantizeLinear") or len(node.input) < 3:
            continue
        scale_name, zero_name = node.input[1], node.input[2]
        if (scale_name, zero_name) in done or zero_name not in initializers or scale_name not in initializers:
            continue
        zero = numpy_helper.to_array(initializers[zero_name])
        if zero.dtype == np.int8 and not zero.any():
            continue
        scale = numpy_helper.to_array(initializers[scale_name]).astype(np.float64)
        info = np.iinfo(zero.dtype)
        low = (info.min - zero.astype(np.float64)) * scale
        high = (info.max - zero.astype(np.float64)) * scale
        new_scale = (np.maximum(np.abs(low), np.abs(high)) / 127.0).astype(numpy_helper.to_array(
            initializers[scale_name]).dtype)
        initializers[scale_name].CopyFrom(numpy_helper.from_array(new_scale, scale_name))
        initializers[zero_name].CopyFrom(numpy_helper.from_array(np.zeros(zero.shape, np.int8), zero_name))
        done.add((scale_name, zero_name))
    return len(done)


def free_plugin_inputs(model):
    """Feed every trt.plugins node the floating-point tensor itself instead of a DequantizeLinear output.

    A Q/DQ pair in front of a plugin would round its input to INT8 with nothing to fuse into (TensorRT keeps
    plugins in the precision their I/O declares). Dangling Q/DQ nodes are removed. Returns the inputs freed.
    """
    producers = {out: node for node in model.graph.node for out in node.output}
    freed = 0
    for node in model.graph.node:
        if node.domain != PLUGIN_DOMAIN:
            continue
        for index, name in enumerate(node.input):
            dq = producers.get(name)
            if dq is None or dq.op_type != "DequantizeLinear":
                continue
            q = producers.get(dq.input[0])
            if q is not None and q.op_type == "QuantizeLinear":
                node.input[index] = q.input[0]
                freed += 1
    _remove_dangling(model)
    return freed


def dedicate_pairs(model):
    """Give each consumer of a dequantized activation its own QuantizeLinear/DequantizeLinear pair.

    ONNX Runtime's ``DedicatedQDQPair`` does so among the nodes it quantizes; an output it quantizes (``--ops
    all``) is still shared with the nodes it does not (Shape, Reshape). TensorRT places and fuses each pair with
    its consumer (NVIDIA's Q/DQ placement recommendations), so a shared pair is split. Returns the pairs added.
    """
    import copy

    producers = {out: node for node in model.graph.node for out in node.output}
    consumers = {}
    for node in model.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    constants = constant_names(model)
    added = 0
    for dq in [node for node in model.graph.node if node.op_type == "DequantizeLinear"]:
        users = consumers.get(dq.output[0], [])
        q = producers.get(dq.input[0])
        if len(users) < 2 or q is None or q.op_type != "QuantizeLinear" or _quantizes_constant(dq, producers,
                                                                                                constants):
            continue
        for index, user in enumerate(users[1:], start=2):
            new_q, new_dq = copy.deepcopy(q), copy.deepcopy(dq)
            new_q.name, new_dq.name = "{}_{}".format(q.name, index), "{}_{}".format(dq.name, index)
            new_q.output[0] = "{}_{}".format(q.output[0], index)
            new_dq.input[0] = new_q.output[0]
            new_dq.output[0] = "{}_{}".format(dq.output[0], index)
            position = list(model.graph.node).index(dq) + 1
            model.graph.node.insert(position, new_dq)
            model.graph.node.insert(position, new_q)
            for slot, name in enumerate(user.input):
                if name == dq.output[0]:
                    user.input[slot] = new_dq.output[0]
            added += 1
    return added


def _remove_dangling(model):
    while True:
        consumed = {name for node in model.graph.node for name in node.input}
        consumed.update(out.name for out in model.graph.output)
        dead = [node for node in model.graph.node if node.op_type in ("QuantizeLinear", "DequantizeLinear")
                and not any(out in consumed for out in node.output)]
        if not dead:
            return
        for node in dead:
            model.graph.node.remove(node)


def _quantizes_constant(dq, producers, constants):
    """Whether a DequantizeLinear dequantizes a weight (a constant, or a QuantizeLinear of one): a shared weight
    needs no dedicated pair, an activation does."""
    source = dq.input[0]
    quantize = producers.get(source)
    if quantize is not None and quantize.op_type == "QuantizeLinear":
        source = quantize.input[0]
    return source in constants


def check_qdq(model, plugins_before=None):
    """Problems (strings) that would keep TensorRT from taking the Q/DQ graph as intended; empty when it is fine.

    Checked: every zero point INT8 and 0; no DequantizeLinear of an activation shared by two consumers (one
    dedicated pair per consumer); no trt.plugins node fed by a DequantizeLinear; every plugin node unchanged (``plugins_before``:
    :func:`plugin_signatures` of the input graph).
    """
    import numpy as np

    initializers, numpy_helper = _initializer_arrays(model)
    problems = []
    consumers = {}
    for node in model.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    producers = {out: node for node in model.graph.node for out in node.output}
    constants = constant_names(model)
    for node in model.graph.node:
        if node.op_type not in ("QuantizeLinear", "DequantizeLinear"):
            continue
        if len(node.input) < 3 or node.input[2] not in initializers:
            problems.append("{} {} has no INT8 zero point".format(node.op_type, node.name))
            continue
        zero = numpy_helper.to_array(initializers[node.input[2]])
        if zero.dtype != np.int8 or zero.any():
            problems.append("{} {}: zero point {} {} (TensorRT needs INT8 zero points of 0)".format(
                node.op_type, node.name, zero.dtype, zero.ravel()[:4].tolist()))
        if node.op_type == "DequantizeLinear" and len(consumers.get(node.output[0], [])) > 1 \
                and not _quantizes_constant(node, producers, constants):
            problems.append("DequantizeLinear {} feeds {} nodes (one dedicated Q/DQ pair per consumer)".format(
                node.name, len(consumers[node.output[0]])))
    for node in model.graph.node:
        if node.domain != PLUGIN_DOMAIN:
            continue
        for name in node.input:
            producer = producers.get(name)
            if producer is not None and producer.op_type == "DequantizeLinear":
                problems.append("plugin node {} ({}) is fed by DequantizeLinear {}".format(
                    node.name, node.op_type, producer.name))
    if plugins_before is not None:
        after = plugin_signatures(model)
        if after != plugins_before:
            changed = sorted(set(after) ^ set(plugins_before) | {name for name in after if name in plugins_before
                                                                 and after[name] != plugins_before[name]})
            problems.append("trt.plugins nodes changed: {}".format(", ".join(changed[:5])))
    return problems
