"""Post-training quantization of an exported ONNX file to explicit Q/DQ with TensorRT's settings (ONNX Runtime).

The quantizer is ONNX Runtime's static QDQ quantizer (``onnxruntime.quantization.quantize_static``) configured as
Hugging Face Optimum's TensorRT preset (``AutoQuantizationConfig.tensorrt``) does: QDQ format, INT8 weights and
activations, both symmetric, per-channel weights (MatMul along axis 1, the output features of a (K, N) weight),
one dedicated Q/DQ pair per consumer, Q/DQ pairs kept on the FP32 weights (TensorRT folds them into INT8 weights
itself), biases left in floating point. Two passes follow (:mod:`edgeattn.quantize.graph`): any parameter the
quantizer made asymmetric whatever it was told (Softmax outputs) is made symmetric INT8, no plugin node is fed
by a DequantizeLinear, and a pair still shared by two consumers is split. The written graph is then checked (:func:`edgeattn.quantize.graph.check_qdq`) and run once
in ONNX Runtime. The model-local functions of an ``--target ort`` export, which let ONNX Runtime run the
``trt.plugins`` nodes, are carried over unchanged.
"""
import contextlib
import io
import logging
import os
import shutil
import tempfile

import numpy as np

from ..errors import EdgeAttnError, MissingDependencyError
from . import graph

SCHEMA = "edgeattn.quantize/1"
#: --calib-method -> onnxruntime CalibrationMethod name. max: the largest |value| seen (ONNX Runtime's MinMax made
#: symmetric), which NVIDIA's ModelOpt uses by default for INT8 ONNX PTQ and which needs no histogram.
CALIB_METHODS = {"max": "MinMax", "percentile": "Percentile", "entropy": "Entropy"}
DEFAULT_CALIB_METHOD = "max"
PERCENTILE = 99.99


def _onnxruntime_quantization():
    try:
        import onnxruntime.quantization as quantization
    except ImportError:
        raise MissingDependencyError("onnxruntime", "edgeattn quantize", "pip install 'edgeattn[ort]'")
    return quantization


def load_model(path):
    """The ModelProto of ``path`` with one image-like input; one line when it is not an FP32 model to quantize."""
    onnx = graph._onnx()
    if not os.path.isfile(path):
        raise EdgeAttnError("no such file: {}".format(path))
    try:
        model = onnx.load(path)
    except Exception as error:  # noqa: BLE001 - protobuf's DecodeError and onnx's own errors
        raise EdgeAttnError("{} is not an ONNX model: {}".format(path, str(error).splitlines()[0] if str(error)
                                                                  else type(error).__name__))
    count = graph.qdq_count(model)
    if count:
        raise EdgeAttnError("{} is already quantized ({} Q/DQ or integer nodes); quantize the FP32 export "
                            "(`edgeattn export`) instead".format(path, count))
    initializers = {init.name for init in model.graph.initializer}
    inputs = [value for value in model.graph.input if value.name not in initializers]
    if len(inputs) != 1:
        raise EdgeAttnError("{} has {} inputs; edgeattn quantize calibrates models with one image input".format(
            path, len(inputs)))
    return model


def input_signature(model):
    """``(name, batch or None, (C, H, W))`` of the model's image input (static C, H, W required)."""
    value = [v for v in model.graph.input if v.name not in {i.name for i in model.graph.initializer}][0]
    dims = [d.dim_value if d.HasField("dim_value") else None for d in value.type.tensor_type.shape.dim]
    if len(dims) != 4 or any(d is None for d in dims[1:]):
        raise EdgeAttnError("input {!r} has shape {}; edgeattn quantize needs N x C x H x W with static C, H, "
                            "W".format(value.name, dims))
    return value.name, dims[0], tuple(dims[1:])


class _Reader(object):
    """An onnxruntime CalibrationDataReader over an N x C x H x W array, in the model's batch size."""

    def __init__(self, name, batch, array):
        step = batch or 1
        usable = len(array) - len(array) % step if len(array) >= step else 0
        self.feeds = [{name: array[i:i + step]} for i in range(0, usable, step)]
        self.position = 0

    def get_next(self):
        if self.position >= len(self.feeds):
            return None
        self.position += 1
        return self.feeds[self.position - 1]

    def rewind(self):
        self.position = 0


@contextlib.contextmanager
def _quiet():
    """ONNX Runtime's quantizer logs a pre-processing hint on the root logger for every call, and its histogram
    calibrators print their progress on stdout (where the summary goes)."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        root.setLevel(level)


def select_nodes(model, ops="linear", exclude=(), only=None):
    """``(nodes to quantize (names), excluded names)``: the ``ops`` candidates minus ``exclude`` patterns,
    restricted to the names in ``only`` when given (one sensitivity group)."""
    if ops not in graph.OPS_CHOICES:
        raise EdgeAttnError("--ops must be one of {}, got {!r}".format(", ".join(graph.OPS_CHOICES), ops))
    chosen, dropped = [], []
    for node in graph.candidate_nodes(model, ops):
        if graph.excluded(node, exclude):
            dropped.append(node.name)
        elif only is None or node.name in only:
            chosen.append(node.name)
    return chosen, dropped


def quantize_model(model, calibration, nodes, ops="linear", calib_method=DEFAULT_CALIB_METHOD, workdir=None):
    """Quantize ``nodes`` of ``model`` (a ModelProto, names given) with the calibration array; returns the Q/DQ
    ModelProto after the TensorRT passes, checked, and what the passes did. ``ops`` decides which op types the
    quantizer considers."""
    if calib_method not in CALIB_METHODS:
        raise EdgeAttnError("--calib-method must be one of {}, got {!r}".format(", ".join(CALIB_METHODS),
                                                                               calib_method))
    if not nodes:
        raise EdgeAttnError("nothing to quantize: no {} node is left after the exclusions".format(
            "MatMul/Gemm/Conv-with-weights" if ops == "linear" else "quantizable"))
    onnx = graph._onnx()
    quantization = _onnxruntime_quantization()
    name, batch, _ = input_signature(model)
    if batch and len(calibration) < batch:
        raise EdgeAttnError("the model's batch is {} but there are only {} calibration input(s)".format(
            batch, len(calibration)))
    plugins_before = graph.plugin_signatures(model)
    op_types = sorted({node.op_type for node in model.graph.node if node.name in set(nodes)})
    extra = {"ActivationSymmetric": True, "WeightSymmetric": True, "DedicatedQDQPair": True,
             "AddQDQPairToWeight": True, "QuantizeBias": False, "QDQOpTypePerChannelAxis": {"MatMul": 1},
             "CalibPercentile": PERCENTILE, "CalibTensorRangeSymmetric": True}
    if ops == "linear":  # weights and inputs only: a Linear/Conv output stays FP for the Add/LayerNorm it feeds
        extra["OpTypesToExcludeOutputQuantization"] = list(op_types)
    scratch = tempfile.mkdtemp(prefix="edgeattn-quantize-", dir=workdir)
    try:
        source, target = os.path.join(scratch, "fp32.onnx"), os.path.join(scratch, "int8.onnx")
        onnx.save(model, source)
        with _quiet():
            quantization.quantize_static(
                source, target, _Reader(name, batch, calibration), quant_format=quantization.QuantFormat.QDQ,
                op_types_to_quantize=op_types, nodes_to_quantize=list(nodes), per_channel=True,
                activation_type=quantization.QuantType.QInt8, weight_type=quantization.QuantType.QInt8,
                calibrate_method=getattr(quantization.CalibrationMethod, CALIB_METHODS[calib_method]),
                extra_options=extra)
        quantized = onnx.load(target)
    except EdgeAttnError:
        raise
    except Exception as error:  # noqa: BLE001 - the quantizer raises whatever its passes raise
        raise EdgeAttnError("ONNX Runtime's quantizer failed: {}".format(
            str(error).splitlines()[0] if str(error) else type(error).__name__))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    rewritten = graph.symmetrize(quantized)
    freed = graph.free_plugin_inputs(quantized)
    dedicated = graph.dedicate_pairs(quantized)
    problems = graph.check_qdq(quantized, plugins_before)
    if problems:
        raise EdgeAttnError("the quantized graph breaks TensorRT's Q/DQ rules: {}{}".format(
            problems[0], " (and {} more)".format(len(problems) - 1) if len(problems) > 1 else ""))
    return quantized, {"symmetrized": rewritten, "plugin_inputs_freed": freed, "pairs_dedicated": dedicated}


def run_onnx(model, array, batch=None):
    """Outputs of the first graph output of ``model`` (ModelProto) on ``array`` with ONNX Runtime CPU."""
    from ..bench.onnxruntime_backend import import_onnxruntime

    ort = import_onnxruntime()
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    step = batch or len(array)
    parts = [session.run(None, {name: array[i:i + step]})[0] for i in range(0, len(array) - len(array) % step, step)]
    return np.concatenate(parts)


def agreement(quantized_out, reference_out):
    """Cosine (min, mean) and top-1 agreement of ``quantized_out`` against ``reference_out`` (compare's metrics)."""
    from ..compare import class_agreement

    record = class_agreement(quantized_out, reference_out)
    return {"cosine_min": record["cosine_min"], "cosine_mean": record["cosine_mean"], "top1": record["top1"]}


def count_by_type(model):
    counts = {}
    for node in model.graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts
