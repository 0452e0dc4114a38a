"""One precision policy for FP32 and FP16 engines, whichever way the TensorRT version types its networks.

Why one module: the weak-typing route (TensorRT <= 10) and the strongly typed route (>= 11) are one policy, which
nodes are FP32 islands, and must pick the same nodes; keeping them together keeps that choice in one function.

FP16 breaks vision transformers in known places (NVIDIA/TensorRT issues #2709, #3999, #4723; mit-han-lab/efficientvit
issue #142: "leads to overflow in the LayerNorm layers"): LayerNorm (the variance overflows FP16
beyond |x - mean| ~ 256), softmax and the normaliser reductions/divisions of linear attention (sums of thousands of
terms; eps 1e-15 underflows). The policy keeps exactly those "FP32 islands" in FP32 and runs everything else in FP16:

* TensorRT <= 10.x (weak typing): ``BuilderFlag.FP16``, the islands' layers pinned to FP32 (precision and output
  types) and the constraints obeyed (``OBEY_PRECISION_CONSTRAINTS``; ``STRICT_TYPES`` on 8.2-era bindings that lack
  it) - :func:`apply_weak_typing`, or trtexec's ``--precisionConstraints=obey --layerPrecisions``;
* TensorRT >= 11 (strongly typed, no FP16 flag): an FP16 ONNX whose islands are wrapped in explicit casts -
  :func:`make_strongly_typed_fp16` (needs the ``onnx`` package).

Our plugins take FP16 I/O and accumulate in FP32 inside their kernels, so they are not islands.

INT8 (``--precision int8``) is explicit quantization only: the ONNX carries the Q/DQ pairs (``edgeattn quantize``),
TensorRT runs the quantized Linear/Conv layers in INT8 and everything else as the FP16 policy says (weak typing:
``BuilderFlag.INT8`` + the FP16 policy above, trtexec ``--int8 --fp16``; strongly typed TensorRT >= 11: the Q/DQ
graph as it is, FP32 outside the quantized layers, no precision flags, as NVIDIA's guide asks: "Use explicit
quantization with Strong Typing", TensorRT Developer Guide, Explicit Quantization). Plugins keep FP16/FP32 I/O:
TensorRT cannot fuse Q/DQ into a plugin. A GPU without INT8 (TensorRT's hardware support matrix lists INT8 from
compute capability 6.1, and not for 6.2, the TX2; the Jetson Nano is 5.3) is refused: :func:`int8_supported`.

The islands are found on the ONNX graph (node dicts of :func:`edgeattn.onnx_graph.graph_nodes`): normalisation
and softmax ops, every reduction, decomposed LayerNorm chains (ReduceMean -> Sub -> Pow -> ReduceMean -> Add -> Sqrt
-> Div, as the TorchScript exporter emits below opset 17), and divisions whose denominator comes from an island.
"""
from ..errors import EdgeAttnError, MissingDependencyError

PRECISIONS = ("fp32", "fp16", "int8")
#: ONNX ops of explicit quantization (what ``--precision int8`` needs in the graph)
QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")
#: compute capabilities without INT8 in TensorRT (below 6.1, and the TX2's 6.2)
NO_INT8_CAPABILITIES = ((6, 2),)
INT8_MIN_CAPABILITY = (6, 1)

#: ONNX ops computed in FP32 in FP16 engines
FP32_OPS = {
    "Softmax": "softmax", "LogSoftmax": "softmax",
    "LayerNormalization": "layernorm", "GroupNormalization": "groupnorm", "InstanceNormalization": "instancenorm",
    "ReduceMean": "reduction", "ReduceSum": "reduction", "ReduceSumSquare": "reduction", "ReduceL2": "reduction",
    "ReduceLogSumExp": "reduction", "ReduceProd": "reduction",
}
#: TensorRT layer types pinned whatever their names (the parser may rename or split nodes)
FP32_LAYER_TYPES = ("SOFTMAX", "NORMALIZATION", "REDUCE")
#: ops that may sit between the variance reduction and the normalising division of a decomposed LayerNorm
_LAYERNORM_TAIL_OPS = ("Add", "Sqrt", "Reciprocal", "Div", "Mul")


class PrecisionPolicy(object):
    """What runs in FP32 and how it is enforced. ``PrecisionPolicy("fp32")`` pins nothing."""

    def __init__(self, precision):
        if precision not in PRECISIONS:
            raise EdgeAttnError("unknown precision {!r} (choose {})".format(precision, " or ".join(PRECISIONS)))
        self.precision = precision

    @property
    def fp16(self):
        """FP16 outside the FP32 islands (and, for INT8, outside the quantized layers)."""
        return self.precision in ("fp16", "int8")

    @property
    def int8(self):
        return self.precision == "int8"

    @staticmethod
    def typing_mode(trt_version, has_fp16_flag=None):
        """``"weak"`` (FP16 builder flag + obeyed FP32 constraints) up to TensorRT 10.x, ``"strong"`` (FP16 ONNX
        with casts) from 11 - or earlier if the bindings lack ``BuilderFlag.FP16``."""
        if has_fp16_flag is False or tuple(trt_version) >= (11, 0):
            return "strong"
        return "weak"

    def fp32_islands(self, nodes):
        """ONNX node names to keep in FP32 -> reason (``softmax``, ``layernorm``, ``reduction``, ``normaliser``).
        ``nodes`` as returned by ``onnx_graph.graph_nodes``. Empty for an FP32 policy."""
        if not self.fp16:
            return {}
        return find_fp32_islands(nodes)

    def pins_layer(self, layer_name, layer_type, islands):
        """True if a TensorRT layer (name, ``trt.LayerType`` name) belongs to an FP32 island."""
        if not self.fp16:
            return False
        if layer_type in FP32_LAYER_TYPES:
            return True
        if layer_name in islands:
            return True
        # Importers that emit several layers for one node name the extra ones "<node>_<n>" or "<node>_<suffix>".
        head, sep, _tail = layer_name.rpartition("_")
        while sep:
            if head in islands:
                return True
            head, sep, _tail = head.rpartition("_")
        return False

    def describe(self, islands=None, mode=None, enforced_by=None, qdq_nodes=None):
        """The manifest's ``precision`` record."""
        record = {"precision": self.precision, "typing": mode if self.fp16 else "fp32"}
        if self.int8:
            record["quantization"] = {"kind": "explicit Q/DQ from the ONNX (edgeattn quantize)",
                                      "qdq_nodes": qdq_nodes,
                                      "outside_qdq": "fp32 (strongly typed)" if mode == "strong" else
                                      "fp16 with the FP32 islands"}
        if self.fp16 and not (self.int8 and mode == "strong"):
            counts = {}
            for reason in (islands or {}).values():
                counts[reason] = counts.get(reason, 0) + 1
            record.update({
                "fp32_islands": counts,
                "fp32_island_nodes": sorted(islands or ()),
                "fp32_layer_types": list(FP32_LAYER_TYPES),
                "plugins": "fp16 I/O, fp32 accumulation inside the kernels",
                "enforced_by": enforced_by,
            })
        return record


def qdq_node_count(nodes):
    """Q/DQ nodes among ``nodes`` (``onnx_graph.graph_nodes`` dicts)."""
    return sum(1 for node in nodes if node["op_type"] in QDQ_OPS and node["domain"] in ("", "ai.onnx"))


def int8_supported(capability):
    """Whether TensorRT runs INT8 on a GPU of compute capability ``capability`` ("8.7" or (8, 7)); None when
    unknown."""
    if not capability:
        return None
    try:
        parts = tuple(int(p) for p in (capability.split(".") if isinstance(capability, str) else capability))
    except (TypeError, ValueError):
        return None
    return parts[:2] >= INT8_MIN_CAPABILITY and parts[:2] not in NO_INT8_CAPABILITIES


def find_fp32_islands(nodes):
    """See :meth:`PrecisionPolicy.fp32_islands`."""
    producers = {}
    consumers = {}
    for node in nodes:
        for output in node["outputs"]:
            producers[output] = node
        for position, tensor in enumerate(node["inputs"]):
            consumers.setdefault(tensor, []).append((node, position))
    names = _ensure_names(nodes)
    islands = {}

    for node in nodes:
        reason = FP32_OPS.get(node["op_type"])
        if reason and node["domain"] in ("", "ai.onnx"):
            islands[names[id(node)]] = reason

    # Decomposed LayerNorm: mean = ReduceMean(x); d = x - mean; var = ReduceMean(d ** 2); y = d / sqrt(var + eps)
    for node in nodes:
        if node["op_type"] != "ReduceMean" or not node["inputs"]:
            continue
        x, mean = node["inputs"][0], node["outputs"][0]
        for sub, _pos in consumers.get(mean, ()):
            if sub["op_type"] != "Sub" or sub["inputs"][:2] != [x, mean]:
                continue
            centred = sub["outputs"][0]
            for power, _p in consumers.get(centred, ()):
                if power["op_type"] != "Pow" and not (power["op_type"] == "Mul" and
                                                       power["inputs"][:2] == [centred, centred]):
                    continue
                for variance, _v in consumers.get(power["outputs"][0], ()):
                    if variance["op_type"] != "ReduceMean":
                        continue
                    chain = _layernorm_tail(variance, centred, consumers)
                    if chain is None:
                        continue
                    for member in [node, sub, power, variance] + chain:
                        islands[names[id(member)]] = "layernorm"

    # Normalising divisions: y = num / (den [+ eps]) with den from an island (reduction, softmax sum...).
    island_ids = {id(n) for n in nodes if names[id(n)] in islands}
    for node in nodes:
        if node["op_type"] != "Div" or len(node["inputs"]) < 2 or names[id(node)] in islands:
            continue
        denominator = producers.get(node["inputs"][1])
        via_add = None
        if denominator is not None and denominator["op_type"] == "Add":
            via_add = denominator
            sources = [producers.get(t) for t in denominator["inputs"]]
            denominator = next((s for s in sources if s is not None and id(s) in island_ids), None)
        if denominator is not None and id(denominator) in island_ids:
            islands[names[id(node)]] = "normaliser"
            if via_add is not None:
                islands[names[id(via_add)]] = "normaliser"
            continue
        # Linear attention's padded-V trick (LiteMLA's decomposition, as EfficientViT computes it): numerator and
        # denominator are slices of one product phi(Q) (phi(K)^T [V; 1]), a sum over all tokens that the official
        # code runs in FP32 for the same reason; the products, the slice and the division stay FP32 together.
        chain = _product_normaliser(node, producers)
        if chain:
            for member in chain:
                islands[names[id(member)]] = "normaliser"
    return islands


_RESHAPING_OPS = ("Slice", "Reshape", "Squeeze", "Unsqueeze", "Transpose")


def _product_normaliser(division, producers):
    """``[division, eps Add, slicing ops..., MatMul, MatMul feeding it]`` when the division's denominator is (plus an
    optional eps) a slice or reshape of a MatMul of a MatMul's output; else None."""
    chain = [division]
    current = producers.get(division["inputs"][1])
    if current is not None and current["op_type"] == "Add":
        chain.append(current)
        current = next((producers[t] for t in current["inputs"]
                        if t in producers and producers[t]["op_type"] != "Constant"), None)
    while current is not None and current["op_type"] in _RESHAPING_OPS:
        chain.append(current)
        current = producers.get(current["inputs"][0]) if current["inputs"] else None
    if current is None or current["op_type"] != "MatMul":
        return None
    feeding = [producers[t] for t in current["inputs"] if t in producers and producers[t]["op_type"] == "MatMul"]
    if not feeding:
        return None  # a plain projection, not a token-axis sum
    return chain + [current] + feeding


def _layernorm_tail(variance, centred, consumers):
    """From the variance reduction, follow Add/Sqrt/Reciprocal up to the op that combines with ``centred``."""
    chain = []
    current = variance
    for _ in range(4):
        outputs = current["outputs"]
        nexts = [c for c, _p in consumers.get(outputs[0], ())] if outputs else []
        if len(nexts) != 1 or nexts[0]["op_type"] not in _LAYERNORM_TAIL_OPS:
            return None
        current = nexts[0]
        chain.append(current)
        if current["op_type"] in ("Div", "Mul") and centred in current["inputs"]:
            return chain
    return None


def _ensure_names(nodes):
    """Node names, with "<op_type>_<index>" for unnamed nodes (TensorRT names such layers itself; they are
    still matched by layer type)."""
    return {id(node): node["name"] or "{}_{}".format(node["op_type"], index) for index, node in enumerate(nodes)}


# ----------------------------------------------------------------------------------------------------------------
# TensorRT <= 10.x: weak typing


def apply_weak_typing(trt, network, config, policy, islands):
    """Set the FP16 flag, pin the islands' layers to FP32 and make TensorRT obey it. Returns the pinned layer names.

    Unverified on hardware in this repository's CI (no TensorRT there); follows the TensorRT 8.2-10.x Python API.
    """
    config.set_flag(trt.BuilderFlag.FP16)
    if hasattr(trt.BuilderFlag, "OBEY_PRECISION_CONSTRAINTS"):
        config.set_flag(trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
    elif hasattr(trt.BuilderFlag, "STRICT_TYPES"):
        config.set_flag(trt.BuilderFlag.STRICT_TYPES)
    float_types = (trt.float32, trt.float16)
    pinned = []
    for index in range(network.num_layers):
        layer = network.get_layer(index)
        layer_type = str(layer.type).rsplit(".", 1)[-1]
        if not policy.pins_layer(layer.name, layer_type, islands):
            continue
        outputs = [layer.get_output(j) for j in range(layer.num_outputs)]
        if not outputs or any(o.dtype not in float_types for o in outputs):
            continue  # shape arithmetic and index outputs keep their types
        layer.precision = trt.float32
        for j in range(layer.num_outputs):
            layer.set_output_type(j, trt.float32)
        pinned.append(layer.name)
    return pinned


# ----------------------------------------------------------------------------------------------------------------
# TensorRT >= 11: strongly typed FP16 ONNX


def _import_onnx(reason):
    try:
        import onnx
        from onnx import numpy_helper, shape_inference
    except ImportError:
        raise MissingDependencyError("onnx", reason, "Install it with `pip install onnx` (or build on a TensorRT "
                                     "<= 10.x, which types FP16 itself).")
    return onnx, numpy_helper, shape_inference


def _elem_types(onnx, shape_inference, model):
    """Element type of every tensor; custom ops' outputs take their first input's type (as our op schemas say)."""
    standard = ("", "ai.onnx")
    for _ in range(1 + sum(1 for n in model.graph.node if n.domain not in standard)):
        try:
            inferred = shape_inference.infer_shapes(model)
        except Exception:
            inferred = model
        types = {}
        for info in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
            if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
                types[info.name] = info.type.tensor_type.elem_type
        for init in inferred.graph.initializer:
            types[init.name] = init.data_type
        added = False
        for node in model.graph.node:
            if node.domain in standard or not node.input:
                continue
            source = types.get(node.input[0])
            for output in node.output:
                if source and output not in types:
                    model.graph.value_info.add().CopyFrom(onnx.helper.make_tensor_value_info(output, source, None))
                    types[output] = source
                    added = True
        if not added:
            return types
    return types


def make_strongly_typed_fp16(source, islands):
    """An FP16 ONNX (bytes) from ``source`` (a ModelProto, left unchanged, or serialized bytes) for strongly
    typed TensorRT: float weights, constants and computations in FP16, the
    ``islands`` (node names) in FP32 with explicit Casts at their borders; graph inputs and outputs stay FP32.

    Model-local functions are dropped: strongly typed TensorRT (>= 11) resolves our custom nodes through their
    ``plugin_namespace`` attribute, and the functions' FP32 bodies are only for ONNX Runtime.
    """
    onnx, numpy_helper, shape_inference = _import_onnx(
        "FP16 engines with TensorRT >= 11 (strongly typed networks need an FP16 ONNX with FP32 casts)")
    import numpy as np

    FLOAT, HALF = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16
    if isinstance(source, (bytes, bytearray)):
        model = onnx.load_from_string(bytes(source))
    else:
        model = onnx.ModelProto()
        model.CopyFrom(source)
    del model.functions[:]
    graph = model.graph
    nodes = list(graph.node)
    names = {id(n): n.name or "{}_{}".format(n.op_type, i) for i, n in enumerate(nodes)}
    for node in nodes:
        if not node.name:
            node.name = names[id(node)]
    types = _elem_types(onnx, shape_inference, model)
    is_island = {id(n): names[id(n)] in islands for n in nodes}

    consumers = {}
    for node in nodes:
        for tensor in node.input:
            if tensor:
                consumers.setdefault(tensor, []).append(node)
    graph_outputs = {o.name for o in graph.output}

    def _all_island_consumers(tensor):
        users = consumers.get(tensor, [])
        return bool(users) and all(is_island[id(u)] for u in users) and tensor not in graph_outputs

    # Where each float tensor lives after the rewrite.
    native = {}
    for info in graph.input:
        if types.get(info.name) == FLOAT:
            native[info.name] = FLOAT
    for init in graph.initializer:
        if init.data_type == FLOAT:
            if _all_island_consumers(init.name):
                native[init.name] = FLOAT
            else:
                array = numpy_helper.to_array(init).astype(np.float16)
                init.CopyFrom(numpy_helper.from_array(array, init.name))
                native[init.name] = HALF
    for node in nodes:
        island = is_island[id(node)]
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value" and attr.t.data_type == FLOAT:
                    keep = all(_all_island_consumers(o) for o in node.output)
                    if not keep:
                        array = numpy_helper.to_array(attr.t).astype(np.float16)
                        attr.t.CopyFrom(numpy_helper.from_array(array, attr.t.name))
                    native.update({o: FLOAT if keep else HALF for o in node.output})
            continue
        if node.op_type == "Cast" and not island:
            for attr in node.attribute:
                if attr.name == "to" and attr.i == FLOAT:
                    attr.i = HALF
        if node.op_type == "ConstantOfShape" and not island:
            value = [a for a in node.attribute if a.name == "value"]
            if not value:
                node.attribute.append(onnx.helper.make_attribute(
                    "value", numpy_helper.from_array(np.zeros(1, dtype=np.float16))))
            elif value[0].t.data_type == FLOAT:
                value[0].t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(value[0].t).astype(np.float16)))
        for output in node.output:
            if types.get(output) == FLOAT:
                native[output] = FLOAT if island else HALF

    new_nodes = []
    casts = {}

    def _converted(tensor, target):
        key = (tensor, target)
        if key not in casts:
            suffix = "fp32" if target == FLOAT else "fp16"
            name = "{}__{}".format(tensor, suffix)
            casts[key] = name
            new_nodes.append(onnx.helper.make_node("Cast", [tensor], [name], to=target,
                                                   name="edgeattn_cast_{}_{}".format(suffix, len(casts))))
        return casts[key]

    # Graph inputs stay FP32 for the caller: the first cast to FP16 happens inside.
    rewritten = []
    for node in nodes:
        wanted = FLOAT if is_island[id(node)] else HALF
        for index, tensor in enumerate(node.input):
            have = native.get(tensor)
            if have is not None and have != wanted and node.op_type not in ("Shape", "Size"):
                node.input[index] = _converted(tensor, wanted)
        rewritten.append(node)
    # Graph outputs stay FP32: rename an FP16 producer's output and cast it back under the public name.
    producers = {o: n for n in nodes for o in n.output}
    tail = []
    for info in graph.output:
        if native.get(info.name) == HALF and info.name in producers:
            inner = "{}__fp16".format(info.name)
            node = producers[info.name]
            node.output[list(node.output).index(info.name)] = inner
            for user in consumers.get(info.name, []):
                for index, tensor in enumerate(user.input):
                    if tensor == info.name:
                        user.input[index] = inner
            for key in [k for k in casts if k[0] == info.name]:
                for n in new_nodes:
                    for index, tensor in enumerate(n.input):
                        if tensor == info.name:
                            n.input[index] = inner
            tail.append(onnx.helper.make_node("Cast", [inner], [info.name], to=FLOAT,
                                              name="edgeattn_cast_output_{}".format(len(tail))))

    # Topological order: each cast right after its source is produced (inputs/initializers: at the front).
    by_source = {}
    for cast in new_nodes:
        by_source.setdefault(cast.input[0], []).append(cast)
    ordered = []
    produced_inside = {o for n in rewritten for o in n.output}
    for source, group in by_source.items():
        if source not in produced_inside:
            ordered.extend(group)
    for node in rewritten:
        ordered.append(node)
        for output in node.output:
            ordered.extend(by_source.get(output, []))
    ordered.extend(tail)
    del graph.node[:]
    graph.node.extend(ordered)
    # Intermediate type annotations are stale now; TensorRT infers them.
    del graph.value_info[:]
    return model.SerializeToString()
