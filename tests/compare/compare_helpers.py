"""Tiny image classifiers written with onnx.helper, for the compare tests."""
import numpy as np

SIZE = 8
CLASSES = 10


def classifier_bytes(weight, batch="batch", size=SIZE):
    """images (batch, 3, size, size) -> Flatten -> MatMul(weight) -> logits (batch, classes)."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Flatten", ["images"], ["flat"], axis=1),
             helper.make_node("MatMul", ["flat", "W"], ["logits"])]
    graph = helper.make_graph(
        nodes, "classifier",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [batch, 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, weight.shape[1]])],
        [numpy_helper.from_array(weight.astype(np.float32), "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model.SerializeToString()


def classifier_weight(seed=0, size=SIZE):
    return np.random.default_rng(seed).standard_normal((3 * size * size, CLASSES)).astype(np.float32) * 0.1
