"""Tiny image classifiers written with onnx.helper, the seeded inputs compare documents, and the one-line error
check, for the compare tests."""
import numpy as np

SIZE = 8
CLASSES = 10


def seeded_inputs(count, seed=0, size=SIZE):
    """The documented input contract: standard normal, numpy default_rng(seed), N x 3 x H x W float32."""
    return np.random.default_rng(seed).standard_normal((count, 3, size, size)).astype(np.float32)


def one_error_line(result, progress=("edgeattn compare: ",)):
    """The one ``edgeattn: error:`` line on stderr (progress lines, starting with ``progress``, set aside)."""
    lines = [line for line in result.stderr.strip().splitlines() if not line.startswith(tuple(progress))]
    assert len(lines) == 1 and lines[0].startswith("edgeattn: error: "), result.stderr
    return lines[0]


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


def layered_model(path, scale_second=1.0):
    """x (1, 3, 4, 4) -> Conv -> Relu -> Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm (8 classes)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((6, 3, 3, 3)).astype(np.float32)
    w2 = (rng.standard_normal((6, 6, 3, 3)) * scale_second).astype(np.float32)
    w3 = rng.standard_normal((8, 6)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="/conv1/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="/act1/Relu"),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], name="/conv2/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"], name="/act2/Relu"),
             helper.make_node("GlobalAveragePool", ["r2"], ["p"], name="/pool/GlobalAveragePool"),
             helper.make_node("Flatten", ["p"], ["f"], name="/flatten/Flatten"),
             helper.make_node("Gemm", ["f", "w3"], ["logits"], name="/head/Gemm", transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4, 4])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 8])],
                              [numpy_helper.from_array(w, name) for w, name in ((w1, "w1"), (w2, "w2"), (w3, "w3"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path.write_bytes(model.SerializeToString())
    return str(path)
