"""Helpers shared by the export tests: one-node ONNX models of the custom ops, ORT sessions, custom-op capture."""
import collections

import numpy as np

OUT_PREFIX = "out"


def custom_op_model(specs, opset):
    """An onnx ModelProto with one custom node per spec and the model-local functions attached.

    ``specs``: list of (op_type, inputs, attributes) with ``inputs`` an ordered dict name -> array (None = absent
    optional input). Returns (model, feeds).
    """
    from onnx import TensorProto, helper

    from edgeattn.export import contract
    from edgeattn.export.functions import attach_functions

    nodes, graph_inputs, graph_outputs, feeds = [], [], [], {}
    for index, (op_type, inputs, attributes) in enumerate(specs):
        names = []
        for key, array in inputs.items():
            if array is None:
                names.append("")
                continue
            name = "{}{}".format(key, index)
            names.append(name)
            feeds[name] = np.asarray(array, np.float32)
            graph_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(array.shape)))
        while names and not names[-1]:
            names.pop()
        nodes.append(contract.make_node(op_type, names, ["{}{}".format(OUT_PREFIX, index)], name="node{}".format(index),
                                        **attributes))
        rank = len(next(a for a in inputs.values() if a is not None).shape)
        graph_outputs.append(helper.make_tensor_value_info("{}{}".format(OUT_PREFIX, index), TensorProto.FLOAT,
                                                           [None] * rank))
    graph = helper.make_graph(nodes, "custom_ops", graph_inputs, graph_outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("trt.plugins", 1)], ir_version=8)
    attach_functions(model)
    return model, feeds


def export_images(model, images, plugins=True, opset=17):
    """export_onnx's pipeline for any input batch (export_onnx takes square sizes only): trace with the custom-op
    symbolics, validate the custom nodes against their schemas, attach the model-local functions. Returns the
    ModelProto (checked by the caller, e.g. with exporter.check_model)."""
    import onnx

    from edgeattn.export import contract
    from edgeattn.export.exporter import torch_to_onnx_bytes
    from edgeattn.export.functions import attach_functions

    model_proto = onnx.load_from_string(torch_to_onnx_bytes(model.eval(), images, opset=opset, plugins=plugins,
                                                            dynamic_batch=False))
    contract.validate_model(model_proto)
    return attach_functions(model_proto)


def run_ort(model_or_bytes, feeds):
    import onnxruntime as ort

    data = model_or_bytes if isinstance(model_or_bytes, bytes) else model_or_bytes.SerializeToString()
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def relative_error(got, reference):
    reference = np.asarray(reference, np.float64)
    return float(np.max(np.abs(np.asarray(got, np.float64) - reference)) / np.max(np.abs(reference)))


OP_TYPES = {
    "edgeattn::blockify_attention": "EdgeAttnBlockifyAttention",
    "edgeattn::efficient_attention": "EdgeAttnEfficientAttention",
    "edgeattn::lite_mla": "EdgeAttnLiteMLA",
    "edgeattn::soft_kernel_attention": "EdgeAttnSoftKernelAttention",
}


def capture_custom_op_calls(model, images):
    """The ``torch.ops.edgeattn.*`` calls a plugin-mode forward makes, in order: list of (op_type, args).

    Uses a TorchDispatchMode, i.e. PyTorch's own dispatcher, independent of the exporter.
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from edgeattn.ops.config import use_plugin_ops

    calls = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func._schema.name
            if name in OP_TYPES:
                calls.append((OP_TYPES[name], args))
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), use_plugin_ops(True), Recorder():
        model(images)
    return calls


def expected_attributes(op_type, args):
    """Schema attributes a custom-op call must become (from the op's argument list in its schema, export/schemas/)."""
    import torch

    if op_type == "EdgeAttnBlockifyAttention":
        q, k, v, weight, bias, num_heads, height, width, window_size, scale, padding = args
        return {"num_heads": num_heads, "height": height, "width": width, "window_size": window_size,
                "scale": float(scale), "has_lepe": int(isinstance(weight, torch.Tensor)), "padding": padding}
    if op_type == "EdgeAttnEfficientAttention":
        return {"num_heads": args[3]}
    if op_type == "EdgeAttnLiteMLA":
        qkv, head_dim, kernel, eps, alpha, beta, gamma = args
        return {"head_dim": head_dim, "kernel": kernel, "eps": float(eps), "qt_alpha": list(alpha),
                "qt_beta": list(beta), "qt_gamma": list(gamma)}
    if op_type == "EdgeAttnSoftKernelAttention":
        return {"num_heads": args[3], "newton_iters": args[4], "symmetric_norm": int(args[5])}
    raise AssertionError(op_type)


def op_counts(graph_nodes):
    return collections.Counter(node.op_type for node in graph_nodes)
