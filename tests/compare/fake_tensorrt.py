"""A stand-in for TensorRT's Python API and Polygraphy's ``TrtRunner``, for ``compare --layers`` and
``build --check`` on the CPU.

It does NOT verify TensorRT (no TensorRT or GPU here): it mirrors the API surface our builder, Polygraphy's
``ModifyNetworkOutputs(..., MARK_ALL)`` and the compare runtime call, records which tensors were marked as network
outputs, and computes every tensor the "engine" returns with ONNX Runtime on the ONNX the parser was given. What it
models of TensorRT:

* the ONNX parser gives each node one layer whose output carries the ONNX tensor's name, except: a ``Gemm`` becomes a
  matrix multiply (an unnamed TensorRT-only tensor, as TensorRT names them) and an element-wise bias add; a
  ``Shape`` node a SHAPE layer (Polygraphy never marks those); and the nodes named in ``swallowed`` get no layer of
  their own (as inside a fused region or a plugin), so their tensors exist on the ONNX Runtime side only;
* the engine returns exactly the marked outputs (the graph outputs when nothing else was marked);
* ``planted``: ``{node name: factor}``, the engine computes that node with its weight (second input) scaled by the
  factor: one planted divergence, upstream tensors stay exact, downstream ones drift.
"""
import base64
import collections
import json
import sys
import types

import numpy as np

import tensorrt_support

PLAN_MAGIC = b"FAKE-TRT-PLAN"
DEVICE = {"name": "Orin", "compute_capability": "8.7"}


class _Tensor(object):
    def __init__(self, name, network):
        self.name = name
        self._network = network
        self.dtype = "float32"

    @property
    def is_network_output(self):
        return self in self._network.outputs


class _Layer(object):
    def __init__(self, name, layer_type, inputs, outputs):
        self.name = name
        self.type = layer_type
        self._inputs = inputs
        self._outputs = outputs
        self.precision = None

    @property
    def num_inputs(self):
        return len(self._inputs)

    @property
    def num_outputs(self):
        return len(self._outputs)

    def get_input(self, index):
        return self._inputs[index]

    def get_output(self, index):
        return self._outputs[index]


def fake_tensorrt(state, version="10.3.0"):
    """The ``tensorrt`` module; ``state`` records what was parsed, marked and built."""
    import onnx

    trt = tensorrt_support.tensorrt_module(version)
    trt.LayerType = types.SimpleNamespace(**{name: "LayerType." + name for name in (
        "CONVOLUTION", "ACTIVATION", "POOLING", "SHUFFLE", "MATRIX_MULTIPLY", "ELEMENTWISE", "SHAPE", "CONSTANT",
        "PLUGIN_V2", "REDUCE", "SOFTMAX", "UNARY")})
    layer_types = {"Conv": "CONVOLUTION", "Relu": "ACTIVATION", "GlobalAveragePool": "POOLING",
                   "Flatten": "SHUFFLE", "Reshape": "SHUFFLE", "Shape": "SHAPE", "MatMul": "MATRIX_MULTIPLY"}

    class Network(object):
        def __init__(self):
            self.layers = []
            self.inputs = []
            self.outputs = []
            self.tensors = {}

        def tensor(self, name):
            if name not in self.tensors:
                self.tensors[name] = _Tensor(name, self)
            return self.tensors[name]

        @property
        def num_layers(self):
            return len(self.layers)

        def get_layer(self, index):
            return self.layers[index]

        def __iter__(self):
            return iter(self.layers)

        def __len__(self):
            return len(self.layers)

        @property
        def num_inputs(self):
            return len(self.inputs)

        def get_input(self, index):
            return self.inputs[index]

        @property
        def num_outputs(self):
            return len(self.outputs)

        def get_output(self, index):
            return self.outputs[index]

        def mark_output(self, tensor):
            state["marked"].append(tensor.name)
            if tensor not in self.outputs:
                self.outputs.append(tensor)

        def unmark_output(self, tensor):
            self.outputs.remove(tensor)

    class Parser(object):
        num_errors = 0

        def __init__(self, network, logger):
            self.network = network

        def parse(self, data, path):
            model = onnx.load_from_string(data)
            state["onnx"] = data
            network = self.network
            initializers = {init.name for init in model.graph.initializer}
            network.inputs = [network.tensor(value.name) for value in model.graph.input
                              if value.name not in initializers]
            for node in model.graph.node:
                if node.name in state["swallowed"]:
                    continue
                inputs = [network.tensor(name) for name in node.input if name and name not in initializers]
                outputs = [network.tensor(name) for name in node.output]
                if node.op_type == "Gemm":
                    product = network.tensor("(Unnamed Layer* {}) [Matrix Multiply]_output".format(
                        len(network.layers)))
                    network.layers.append(_Layer(node.name, trt.LayerType.MATRIX_MULTIPLY, inputs, [product]))
                    network.layers.append(_Layer(node.name + "_bias", trt.LayerType.ELEMENTWISE, [product],
                                                 outputs))
                    continue
                layer_type = getattr(trt.LayerType, layer_types.get(node.op_type, "ELEMENTWISE"))
                network.layers.append(_Layer(node.name, layer_type, inputs, outputs))
            network.outputs = [network.tensor(value.name) for value in model.graph.output]
            return True

    def serialize(network, config):
        plan = {"onnx": base64.b64encode(state["onnx"]).decode("ascii"),
                "outputs": [tensor.name for tensor in network.outputs]}
        state["builds"].append(plan["outputs"])
        return PLAN_MAGIC + json.dumps(plan).encode("utf-8")

    Builder = tensorrt_support.builder_class(state, Network, serialize)

    class Engine(object):
        def __init__(self, plan):
            self.onnx = base64.b64decode(plan["onnx"])
            self.outputs = plan["outputs"]

    class Runtime(object):
        def __init__(self, logger):
            pass

        def deserialize_cuda_engine(self, data):
            if not data.startswith(PLAN_MAGIC):
                return None
            return Engine(json.loads(data[len(PLAN_MAGIC):].decode("utf-8")))

    trt.Builder, trt.OnnxParser, trt.Runtime = Builder, Parser, Runtime
    return trt


def _every_tensor(onnx_bytes, feed, planted):
    """Every tensor of the ONNX model on ONNX Runtime CPU, the planted nodes' weights scaled."""
    import onnx
    import onnxruntime
    from onnx import numpy_helper

    model = onnx.load_from_string(onnx_bytes)
    weights = {init.name: init for init in model.graph.initializer}
    for node in model.graph.node:
        if node.name in planted:
            init = weights[node.input[1]]
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * np.float32(planted[node.name]),
                                                  init.name))
    known = {value.name for value in model.graph.output}
    for node in model.graph.node:
        for name in node.output:
            if name not in known:
                model.graph.output.append(onnx.ValueInfoProto(name=name))
                known.add(name)
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(names, feed))), model


class FakeTrtRunner(object):
    """Polygraphy's ``TrtRunner(engine, name=)`` surface: activate, get_input_metadata, infer, deactivate."""

    planted = {}

    def __init__(self, engine, name=None):
        self.engine = engine

    def activate(self):
        pass

    def deactivate(self):
        pass

    def get_input_metadata(self):
        import onnx

        model = onnx.load_from_string(self.engine.onnx)
        value = model.graph.input[0]
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in value.type.tensor_type.shape.dim]
        return {value.name: types.SimpleNamespace(shape=dims, dtype=np.float32)}

    def infer(self, feed):
        tensors, model = _every_tensor(self.engine.onnx, feed, self.planted)
        gemm = {node.output[0] for node in model.graph.node if node.op_type == "Gemm"}
        outputs = collections.OrderedDict()
        for name in self.engine.outputs:
            if name in tensors:
                outputs[name] = tensors[name]
            elif name.startswith("(Unnamed Layer*"):  # the matrix product before the bias: any Gemm's output
                outputs[name] = tensors[sorted(gemm)[0]]
        return outputs


def install(monkeypatch, planted=None, swallowed=(), version="10.3.0"):
    """Put the stand-in in place of ``tensorrt``, Polygraphy's TrtRunner and the CUDA helper; returns the state
    (``marked``: every tensor marked as a network output, ``builds``: each build's output names)."""
    import polygraphy.backend.trt as polygraphy_trt

    import edgeattn.tensorrt.api as api
    import edgeattn.tensorrt.cuda as cuda

    state = {"marked": [], "builds": [], "profiles": [], "swallowed": set(swallowed), "onnx": None}
    monkeypatch.setitem(sys.modules, "tensorrt", fake_tensorrt(state, version))
    for module in ("torch", "cuda", "cuda.bindings", "cuda.bindings.runtime", "cuda.cudart"):
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setattr(api, "_LOGGER", None)
    monkeypatch.setattr(api, "_NVIDIA_PLUGINS_READY", False)
    device = types.SimpleNamespace(device=lambda: dict(DEVICE), release=lambda: None)
    monkeypatch.setattr(cuda, "open_cuda", lambda: device)
    runner = type("PlantedTrtRunner", (FakeTrtRunner,), {"planted": dict(planted or {})})
    monkeypatch.setattr(polygraphy_trt, "TrtRunner", runner)
    return state
