"""Opset 13 (TensorRT 8.2 on the Jetson Nano): the ELFATT, EfficientViT and SOFT++ models export, their
TensorRT variant is a plain opset-13 / IR-7 file, and the ORT variant (checked in memory) matches PyTorch with
randomised parameters, at the same per-model gate as the opset-17 exports (test_export_models.PARITY_GATES).

LayerNormalization (opset 17), Gelu (20) and the opset-14 SDPA symbolic must be decomposed into opset-13 ops; the
test checks every node of the main graph and of the function bodies against the opset-13 schemas.
"""
import onnx
import pytest
from onnx import defs

from edgeattn.export.exporter import export_onnx, load_torch_model
from edgeattn.export.functions import build_function
from random_params import randomise_parameters
from test_export_models import parity_gate

NANO_MODELS = ["cswin_t24181_elfatt", "efficientvit_b0", "softpp_tiny"]


def _available_at_13(op_type):
    try:
        defs.get_schema(op_type, 13, "")
    except Exception:  # noqa: BLE001 - onnx raises SchemaError for an op that does not exist yet
        return False
    return True


def _graph_ops(nodes):
    for node in nodes:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _graph_ops(attr.g.node)


@pytest.mark.parametrize("arch", NANO_MODELS)
def test_opset13_tensorrt_variant(arch, tmp_path):
    model, size = load_torch_model(arch=arch, seed=0)
    randomise_parameters(model, seed=0, scales=True)
    path = tmp_path / "model.onnx"
    summary = export_onnx(model, path, img_size=size, opset=13, target="tensorrt", check=True)
    # the opset-13 decompositions (LayerNormalization, Gelu, SDPA) stay within the opset-17 export's gate
    assert summary.parity["max_rel"] <= parity_gate(arch), summary.parity
    exported = onnx.load(str(path))
    assert exported.ir_version == 7
    assert {e.domain: e.version for e in exported.opset_import} == {"": 13, "trt.plugins": 1}
    assert len(exported.functions) == 0
    assert summary.custom_ops  # the Nano file does route the attention cores to plugins
    standard = {n.op_type for n in _graph_ops(exported.graph.node) if n.domain in ("", "ai.onnx")}
    assert "LayerNormalization" not in standard
    assert all(_available_at_13(op) for op in standard), sorted(op for op in standard if not _available_at_13(op))
    for op_type in summary.custom_ops:
        body_ops = {n.op_type for n in _graph_ops(build_function(op_type, 13, with_lepe=True).node)}
        assert all(_available_at_13(op) for op in body_ops), (op_type, body_ops)
