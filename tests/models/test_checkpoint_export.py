"""``edgeattn export FILE --arch NAME`` on upstream checkpoints: the ONNX file ONNX Runtime runs gives the logits of
the model the checkpoint came from (timm's, built from PyPI), from a training wrapper, a DDP prefix and
safetensors; official key lists export too. Bad checkpoints give one line and no file."""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from test_layouts import random_state_dict, read_key_list  # noqa: E402
from timm_support import import_timm  # noqa: E402


@pytest.fixture(scope="module")
def timm_b0():
    timm = import_timm()
    torch.manual_seed(0)
    return timm.create_model("efficientvit_b0", pretrained=False).eval()


def ort_logits(path, images):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: images})[0]


def _one_error_line(result):
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edgeattn: error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize("form", ["state_dict_ema+module", "safetensors"])
def test_timm_checkpoint_exports_with_timm_logits(form, timm_b0, invoke, tmp_path):
    state = timm_b0.state_dict()
    if form == "safetensors":
        from safetensors.torch import save_file

        checkpoint = tmp_path / "efficientvit_b0.safetensors"
        save_file({key: value.contiguous() for key, value in state.items()}, str(checkpoint))
    else:
        checkpoint = tmp_path / "efficientvit_b0.pth.tar"
        torch.save({"epoch": 1, "state_dict_ema": {"module." + key: value for key, value in state.items()}},
                   checkpoint)
    out = tmp_path / "b0.onnx"
    result = invoke(["export", checkpoint, "--arch", "efficientvit_b0", "-o", out, "--summary-json",
                     tmp_path / "summary.json"], expect=0)
    assert "weights   " in result.stdout and "timm efficientvit_mit layout" in result.stdout
    if form != "safetensors":
        assert "'state_dict_ema' entry" in result.stdout and "prefix 'module.' stripped" in result.stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["weights"]["layout"] == "timm efficientvit_mit"
    images = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    with torch.no_grad():
        expected = timm_b0(torch.from_numpy(images)).numpy()
    got = ort_logits(out, images)
    assert np.max(np.abs(got - expected)) <= 1e-4 * np.max(np.abs(expected))
    if form == "safetensors":
        pytest.importorskip("polygraphy")
        # the README's check of an export against its checkpoint, on real pictures
        report = tmp_path / "compare.json"
        invoke(["compare", out, checkpoint, "--arch", "efficientvit_b0", "--images", "skimage", "--min-top1", "1",
                "--json", report], expect=0)
        compared = json.loads(report.read_text())
        assert compared["b"]["kind"] == "checkpoint" and "timm efficientvit_mit" in compared["b"]["weights"]
        assert compared["top1_agreement"] == 1.0 and compared["inputs"]["count"] == 8


@pytest.mark.parametrize("fixture,arch", [("mit_efficientvit_cls_b0.txt", "efficientvit_b0"),
                                          ("soft_norm_tiny.txt", "softpp_tiny")])
def test_official_key_lists_export(fixture, arch, invoke, tmp_path):
    checkpoint = tmp_path / "official.pth"
    torch.save({"state_dict": random_state_dict(read_key_list(fixture))}, checkpoint)
    out = tmp_path / "official.onnx"
    result = invoke(["export", checkpoint, "--arch", arch, "-o", out], expect=0)
    assert "parity    ORT CPU vs PyTorch FP32" in result.stdout and out.exists()


def test_mismatched_checkpoint_one_line_no_file(timm_b0, invoke, tmp_path):
    checkpoint = tmp_path / "b0.pth"
    torch.save(timm_b0.state_dict(), checkpoint)
    out = tmp_path / "b1.onnx"
    result = invoke(["export", checkpoint, "--arch", "efficientvit_b1", "-o", out], expect=2)
    line = _one_error_line(result)
    assert "does not match architecture efficientvit_b1" in line and "--arch efficientvit_b0" in line
    assert sorted(os.listdir(tmp_path)) == ["b0.pth"]


def test_state_dict_without_arch_asks_for_it(timm_b0, invoke, tmp_path):
    checkpoint = tmp_path / "b0.pth"
    torch.save({"model": timm_b0.state_dict()}, checkpoint)
    line = _one_error_line(invoke(["export", checkpoint, "-o", tmp_path / "x.onnx"], expect=2))
    assert "state dict (in 'model') without an architecture name" in line and "--arch NAME" in line


def test_checkpoint_key_option(timm_b0, invoke, tmp_path):
    checkpoint = tmp_path / "b0.pth"
    torch.save({"state_dict": timm_b0.state_dict(), "ema": timm_b0.state_dict()}, checkpoint)
    result = invoke(["export", checkpoint, "--arch", "efficientvit_b0", "--checkpoint-key", "ema", "--no-check",
                     "-o", tmp_path / "b0.onnx"], expect=0)
    assert "'ema' entry of b0.pth" in result.stdout
    line = _one_error_line(invoke(["export", checkpoint, "--arch", "efficientvit_b0", "--checkpoint-key",
                                   "nothing", "-o", tmp_path / "c.onnx"], expect=2))
    assert "has no entry 'nothing'" in line
