"""Helpers of the quantize tests: the trained digits checkpoint exported once, the held-out digits, tiny graphs."""
import importlib.util
import os

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECKPOINT = os.path.join(REPO, "tests", "fixtures", "models", "vit_tiny_elfatt_digits.safetensors")


def train_tiny():
    """benchmarks/train_tiny.py as a module (its digits split is the held-out set the checkpoint never saw)."""
    spec = importlib.util.spec_from_file_location("train_tiny", os.path.join(REPO, "benchmarks", "train_tiny.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def export_checkpoint(path, plugins=True):
    """Export the trained digits checkpoint (batch 1, 16 x 16) to ``path``."""
    from edgeattn.export.exporter import export_onnx, load_torch_model

    model, size = load_torch_model(CHECKPOINT)
    export_onnx(model, path, img_size=size, batch=1, opset=17, plugins=plugins, target="ort", check=False, seed=0)
    return path


def write_pictures(directory, pictures):
    """Write HxWx3 uint8 arrays as PNG files 0000.png, 0001.png, ... in ``directory``."""
    from PIL import Image

    os.makedirs(directory, exist_ok=True)
    for index, picture in enumerate(pictures):
        Image.fromarray(picture).save(os.path.join(directory, "{:04d}.png".format(index)))
    return directory


def one_conv_model(path, channels=3, size=8, out_channels=4):
    """A Conv (weights) -> Relu -> Add (residual with the Conv output) ONNX model written to ``path``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((out_channels, channels, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="/stem/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="/stem/Relu"),
             helper.make_node("Add", ["c", "r"], ["y"], name="/stem/Add")]
    graph = helper.make_graph(nodes, "one_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                [1, channels, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def ort_logits(path, images):
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return np.concatenate([session.run(None, {name: images[i:i + 1]})[0] for i in range(len(images))])
