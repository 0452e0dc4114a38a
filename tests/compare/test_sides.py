"""``edgeattn compare``'s sides (compare/sides.py): engines through trtexec (the fake replaying trtexec's
--loadInputs / --exportOutput formats), checkpoints through PyTorch, the TensorRT variant refused on ONNX Runtime."""
import json
import os

import numpy as np
import pytest

from compare_helpers import one_error_line, seeded_inputs

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("polygraphy")


@pytest.mark.parametrize("version", ["8.2.1", "10.3.0", "11.1.0"])
def test_engine_through_trtexec_matches_its_onnx(version, invoke, classifier, fake_trtexec, tmp_path,
                                                 no_jetson):
    """The engine's outputs come back through --exportOutput (6 significant digits) for exactly the inputs sent
    with --loadInputs: agreement to 1e-5 relative proves both directions of the file exchange."""
    trtexec = fake_trtexec(version)
    model = classifier("model.onnx")
    invoke(["build", model, "--backend", "trtexec", "--trtexec", trtexec, "--shapes",
            "images:1x3x8x8,4x3x8x8,4x3x8x8", "--plugins", "off"], expect=0)
    engine = str(tmp_path / "model.engine")
    out = tmp_path / "report.json"
    result = invoke(["compare", engine, model, "--trtexec", trtexec, "--inputs", "6", "--atol", "0", "--rtol",
                     "1e-5", "--json", out], expect=0)
    report = json.loads(out.read_text())
    assert report["a"]["kind"] == "engine" and report["a"]["backend"] == "trtexec"
    assert report["outputs"]["logits"]["max_rel"] < 1e-5 and report["top1_agreement"] == 1.0
    assert "(engine, trtexec)" in result.stdout


def test_fp16_like_engine_error_is_caught(invoke, classifier, fake_trtexec, tmp_path, monkeypatch, no_jetson):
    trtexec = fake_trtexec("10.3.0")
    model = classifier("model.onnx")
    invoke(["build", model, "--backend", "trtexec", "--trtexec", trtexec, "--plugins", "off"], expect=0)
    monkeypatch.setenv("FAKE_TRTEXEC_OUTPUT_ERROR", "0.01")
    engine = str(tmp_path / "model.engine")
    invoke(["compare", engine, model, "--trtexec", trtexec, "--inputs", "2", "--atol", "1e-5", "--rtol", "1e-3"],
           expect=1)
    invoke(["compare", engine, model, "--trtexec", trtexec, "--inputs", "2", "--atol", "1e-5", "--rtol", "0.02"],
           expect=0)


def test_exported_output_parser_reads_the_real_capture():
    """The --exportOutput format as a public file shows it (two bindings, unordered, dimensions as text)."""
    from edgeattn.compare import parse_exported_outputs

    text = ('[\n  { "name" : "probs_phone"\n  , "dimensions" : "1x5"\n'
            '  , "values" : [ 0.0435101, 0.0340782, 0.0555826, 0.195444, 0.671385 ]\n  }\n'
            ', { "name" : "probs_headset"\n  , "dimensions" : "1x3"\n'
            '  , "values" : [ 0.79014, 0.206794, 0.00306536 ]\n  }\n]\n')
    outputs = parse_exported_outputs(text)
    assert list(outputs) == ["probs_headset", "probs_phone"]
    assert outputs["probs_phone"].shape == (1, 5) and outputs["probs_headset"][0, 2] == np.float32(0.00306536)
    with_nan = text.replace("0.79014", "nan")
    assert np.isnan(parse_exported_outputs(with_nan)["probs_headset"][0, 0])


# ------------------------------------------------------------------------------------------- checkpoints


def test_checkpoint_against_its_export(invoke, tmp_path):
    torch = pytest.importorskip("torch")
    from edgeattn.models.checkpoint import save_checkpoint
    from edgeattn.models import create_model

    torch.manual_seed(0)
    model = create_model("vit_tiny_softmax", num_classes=10).eval()
    checkpoint = tmp_path / "vit.pt"
    save_checkpoint(model, checkpoint)
    onnx_path = tmp_path / "vit.onnx"
    invoke(["export", checkpoint, "-o", onnx_path, "--batch", "dynamic"], expect=0)
    out = tmp_path / "report.json"
    invoke(["compare", onnx_path, checkpoint, "--inputs", "4", "--json", out], expect=0)
    report = json.loads(out.read_text())
    assert report["b"]["kind"] == "checkpoint" and report["b"]["arch"] == "vit_tiny_softmax"
    images = seeded_inputs(4, size=224)
    with torch.no_grad():
        expected = model(torch.from_numpy(images)).numpy()
    assert report["outputs"]["logits"]["max_abs"] <= 1e-4 * np.abs(expected).max()
    state_dict = tmp_path / "state.pt"
    torch.save(model.state_dict(), state_dict)
    line = one_error_line(invoke(["compare", onnx_path, state_dict], expect=2))
    assert "without an architecture name" in line


class _Planted(object):
    """Unpickling this runs os.makedirs(marker): code from the file, as any pickled object can."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.makedirs, (self.marker,)


def test_checkpoint_side_never_unpickles_without_trust_pickle(invoke, classifier, tmp_path):
    """A checkpoint side is loaded like `edgeattn export` loads it: a file that can only be read by unpickling
    Python objects is refused without --trust-pickle, and nothing from it runs; with the flag it is unpickled
    (the planted code runs, which proves the check above meaningful) and, holding no model, still refused."""
    torch = pytest.importorskip("torch")
    marker = tmp_path / "unpickled"
    checkpoint = tmp_path / "planted.pt"
    torch.save({"state_dict": {"w": torch.zeros(1)}, "payload": _Planted(str(marker))}, str(checkpoint))
    model = classifier("model.onnx")
    line = one_error_line(invoke(["compare", model, checkpoint], expect=2))
    assert "--trust-pickle" in line
    assert not marker.exists(), "compare unpickled the checkpoint without --trust-pickle"
    with pytest.warns(UserWarning, match="trust_pickle=True"):
        invoke(["compare", model, checkpoint, "--trust-pickle"], expect=2)
    assert marker.is_dir()


def test_tensorrt_variant_onnx_is_explained(invoke, classifier, tmp_path):
    """A custom op without its local function (the TensorRT variant) cannot run on ONNX Runtime: one line."""
    from bench_helpers import matmul_model

    variant = tmp_path / "model.trt.onnx"
    variant.write_bytes(matmul_model(with_custom=True, with_function=False))
    line = one_error_line(invoke(["compare", str(variant), classifier("b.onnx")], expect=2))
    assert "ONNX Runtime cannot run EdgeAttnLiteMLA" in line and "local functions" in line


def test_a_host_code_engine_is_compared_only_with_the_explicit_flag(invoke, classifier, fake_trtexec, tmp_path,
                                                                     no_jetson):
    """`compare` refuses a version-compatible engine (it embeds host code) with the same line as `bench`, and
    --allow-engine-host-code lets it run: the engine check is the tensorrt layer's, shared with bench and sweep."""
    trtexec = fake_trtexec("10.3.0")
    model = classifier("model.onnx")
    invoke(["build", model, "--backend", "trtexec", "--trtexec", trtexec, "--plugins", "off",
            "--version-compatible"], expect=0)
    args = ["compare", str(tmp_path / "model.engine"), model, "--trtexec", trtexec, "--inputs", "2", "--quiet"]
    result = invoke(args, expect=2)
    assert result.stderr.count("\n") == 1 and "version-compatible engine: loading it runs host code" in result.stderr
    invoke(args + ["--allow-engine-host-code"], expect=0)
