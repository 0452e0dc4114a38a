"""export_onnx's option checks, its FP32 parity gate and what the file and summary of each target record.

References: the TorchScript exporter's highest opset is 20 (torch.onnx._constants.ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET),
the custom ops need opset >= 13; the parity gate is max|ort - torch| / max|torch| <= 1e-4 (the exporter's docstring);
the tensorrt target keeps the exporter's IR version (7 at opset 13) because it carries no model-local functions.
"""
import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

import edgeattn
from edgeattn.errors import EdgeAttnError
from edgeattn.export import exporter


@pytest.mark.parametrize("opset, target, batch, img_size", [
    (13, "ort", 1, 224), (20, "tensorrt", "dynamic", 1), (17, "ort", 64, 384)])
def test_check_options_accepts_the_documented_range(opset, target, batch, img_size):
    exporter.check_options(opset, target, batch, img_size)


@pytest.mark.parametrize("opset, target, batch, img_size, message", [
    (21, "ort", 1, 224, "newer than"), (12, "ort", 1, 224, "too old"), (True, "ort", 1, 224, "integer"),
    (17, "trt", 1, 224, "unknown target"), (17, "ort", 0, 224, "batch"), (17, "ort", True, 224, "batch"),
    (17, "ort", "2", 224, "batch"), (17, "ort", 1, 0, "resolution"), (17, "ort", 1, True, "resolution")])
def test_check_options_rejects_each_bad_value(opset, target, batch, img_size, message):
    with pytest.raises(EdgeAttnError, match=message):
        exporter.check_options(opset, target, batch, img_size)


def _identity_model():
    graph = helper.make_graph([helper.make_node("Identity", ["images"], ["logits"])], "g",
                              [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 2])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def test_parity_is_relative_to_the_largest_reference_logit():
    images = torch.tensor([[0.01, 100.0]])
    # |error| 0.008 on a largest logit of 100.008: 8.0e-5 relative, inside 1e-4 (relative to the mean |logit|,
    # 50.009, it would be 1.6e-4)
    parity, _ = exporter.check_model(_identity_model(), images, torch.tensor([[0.01, 100.008]]))
    assert parity["max_rel"] == pytest.approx(0.008 / 100.008, rel=1e-3)
    assert parity["rel_limit"] == 1e-4
    # |error| 0.02: 2.0e-4 relative, outside the gate
    with pytest.raises(EdgeAttnError, match="differs from PyTorch"):
        exporter.check_model(_identity_model(), images, torch.tensor([[0.01, 100.02]]))


class _Tiny(torch.nn.Module):
    def __init__(self):
        super(_Tiny, self).__init__()
        self.fc = torch.nn.Linear(3 * 4 * 4, 5)

    def forward(self, images):
        return self.fc(images.flatten(1))


def _metadata(path):
    props = onnx.load(str(path)).metadata_props
    keys = [p.key for p in props]
    assert len(keys) == len(set(keys)), keys
    return {p.key: p.value for p in props}


@pytest.mark.parametrize("plugins", [True, False])
def test_metadata_records_resolution_plugins_and_version(tmp_path, plugins):
    path = tmp_path / "tiny.onnx"
    exporter.export_onnx(_Tiny(), path, img_size=4, plugins=plugins, check=False)
    assert _metadata(path) == {"edgeattn.version": edgeattn.__version__, "edgeattn.img_size": "4",
                               "edgeattn.plugins": "1" if plugins else "0"}


def test_tensorrt_target_summary_reports_the_ir_version_of_its_file(tmp_path):
    model, size = exporter.load_torch_model(arch="vit_tiny_elfatt", seed=0)
    path = tmp_path / "nano.onnx"
    summary = exporter.export_onnx(model, path, img_size=size, opset=13, target="tensorrt", check=False)
    written = onnx.load(str(path))
    assert len(written.functions) == 0 and summary.functions == []
    assert written.ir_version == 7 and summary.ir_version == 7  # opset 13 without functions: IR 7
    assert summary.size_bytes == path.stat().st_size
    assert _metadata(path) == {"edgeattn.version": edgeattn.__version__, "edgeattn.img_size": str(size),
                               "edgeattn.plugins": "1", "edgeattn.arch": "vit_tiny_elfatt"}
