"""``edgeattn compare``: ONNX pairs on ONNX Runtime, engines through trtexec (the fake replaying trtexec's
--loadInputs / --exportOutput formats), checkpoints through PyTorch; the numbers against numpy computed here from
ONNX Runtime outputs; exit 0 / 1 / 2."""
import json
import os

import numpy as np
import pytest

from compare_helpers import SIZE, classifier_weight

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("polygraphy")


def ort_run(path, images):
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, {"images": images})[0]


def seeded_inputs(count, seed=0, size=SIZE):
    """The documented input contract: standard normal, numpy default_rng(seed), N x 3 x H x W float32."""
    return np.random.default_rng(seed).standard_normal((count, 3, size, size)).astype(np.float32)


def _one_error_line(result):
    lines = [line for line in result.stderr.strip().splitlines() if not line.startswith("edgeattn compare: ")]
    assert len(lines) == 1 and lines[0].startswith("edgeattn: error: "), result.stderr
    return lines[0]


def test_identical_models_pass(invoke, classifier, tmp_path):
    a, b = classifier("a.onnx"), classifier("b.onnx")
    out = tmp_path / "report.json"
    result = invoke(["compare", a, b, "--json", out], expect=0)
    report = json.loads(out.read_text())
    assert report["passed"] and report["outputs"]["logits"]["max_abs"] == 0.0
    assert report["top1_agreement"] == 1.0 and report["top5_agreement"] == 1.0
    assert abs(report["cosine_min"] - 1.0) < 1e-12
    assert report["inputs"] == {"source": "random", "seed": 0, "count": 8, "distribution": "standard normal",
                                "shape": [8, 3, SIZE, SIZE]}
    assert "PASSED" in result.stdout and "max abs 0," in result.stdout


def test_reported_errors_are_those_of_the_outputs(invoke, classifier, tmp_path):
    """max abs / max rel / cosine / top-k against numpy on the same seeded inputs run through ONNX Runtime."""
    weight = classifier_weight()
    perturbed = weight + np.random.default_rng(7).standard_normal(weight.shape).astype(np.float32) * 0.02
    a, b = classifier("a.onnx", perturbed), classifier("b.onnx", weight)
    out = tmp_path / "report.json"
    invoke(["compare", a, b, "--inputs", "16", "--seed", "3", "--atol", "10", "--json", out], expect=0)
    report = json.loads(out.read_text())
    images = seeded_inputs(16, seed=3)
    ya, yb = ort_run(a, images).astype(np.float64), ort_run(b, images).astype(np.float64)
    entry = report["outputs"]["logits"]
    assert entry["max_abs"] == pytest.approx(np.max(np.abs(ya - yb)), rel=1e-5)
    assert entry["max_rel"] == pytest.approx(np.max(np.abs(ya - yb) / np.abs(yb)), rel=1e-4)
    cosine = np.sum(ya * yb, axis=1) / np.linalg.norm(ya, axis=1) / np.linalg.norm(yb, axis=1)
    assert report["cosine_min"] == pytest.approx(cosine.min(), rel=1e-9)
    assert report["cosine_mean"] == pytest.approx(cosine.mean(), rel=1e-9)
    assert report["top1_agreement"] == pytest.approx(np.mean(ya.argmax(1) == yb.argmax(1)))
    overlap = [len(set(np.argsort(-x)[:5]) & set(np.argsort(-y)[:5])) / 5 for x, y in zip(ya, yb)]
    assert report["top5_agreement"] == pytest.approx(np.mean(overlap))


def test_outside_tolerance_exits_1_and_keeps_the_report(invoke, classifier, tmp_path):
    weight = classifier_weight()
    a, b = classifier("a.onnx", weight * 1.01), classifier("b.onnx", weight)
    out = tmp_path / "report.json"
    result = invoke(["compare", a, b, "--atol", "1e-6", "--rtol", "1e-6", "--json", out], expect=1)
    assert "FAILED: output logits: outside --atol 1e-06 and --rtol 1e-06" in result.stdout
    report = json.loads(out.read_text())
    assert not report["passed"] and report["failures"]
    # 1 % everywhere: inside a 2 % relative tolerance even with a tiny atol
    invoke(["compare", a, b, "--atol", "1e-6", "--rtol", "0.02"], expect=0)


def test_min_top1(invoke, classifier):
    """Swapping two classifier columns swaps those classes: top-1 agreement drops below 1 but logits are
    within a loose tolerance elsewhere; --min-top1 makes that a failure."""
    weight = classifier_weight()
    swapped = weight.copy()
    logits = seeded_inputs(8).reshape(8, -1) @ weight
    top = np.argmax(logits, axis=1)
    first, second = int(top[0]), int(np.argsort(-logits[0])[1])
    swapped[:, [first, second]] = swapped[:, [second, first]]
    a, b = classifier("a.onnx", swapped), classifier("b.onnx", weight)
    result = invoke(["compare", a, b, "--atol", "100", "--min-top1", "1.0"], expect=1)
    assert "top-1 agreement" in result.stdout and "< --min-top1 1" in result.stdout
    invoke(["compare", a, b, "--atol", "100", "--min-top1", "0.5"], expect=0)


def test_static_batch_runs_one_sample_at_a_time(invoke, classifier, tmp_path):
    a, b = classifier("a.onnx", batch=1), classifier("b.onnx")
    out = tmp_path / "report.json"
    invoke(["compare", a, b, "--inputs", "3", "--json", out], expect=0)
    assert json.loads(out.read_text())["inputs"]["count"] == 3


def test_json_to_stdout(invoke, classifier):
    result = invoke(["compare", classifier("a.onnx"), classifier("b.onnx"), "--json", "-", "--quiet"], expect=0)
    assert json.loads(result.stdout)["schema"] == "edgeattn.compare/1"


@pytest.mark.parametrize("args,words", [
    (["{a}", "{missing}"], "no such file"),
    (["{a}", "{other_size}"], "the models take different inputs"),
    (["{a}", "{b}", "--inputs", "2", "--images", "skimage"], "not both"),
    (["{a}", "{b}", "--images", "{empty_dir}"], "no pictures"),
    (["{a}", "{b}", "--min-top1", "2"], "fraction between 0 and 1"),
    (["{a}", "{b}", "--inputs", "0"], "positive"),
    (["{a}", "{b}", "--atol", "-1"], ">= 0"),
    (["{static2}", "{b}", "--inputs", "3"], "fixed batch of 2"),
])
def test_bad_input_one_line_exit_2(args, words, invoke, classifier, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    paths = {"a": classifier("a.onnx"), "b": classifier("b.onnx"), "missing": str(tmp_path / "nope.onnx"),
             "other_size": classifier("other.onnx", classifier_weight(size=4), size=4),
             "static2": classifier("static2.onnx", batch=2), "empty_dir": str(empty)}
    out = tmp_path / "report.json"
    result = invoke(["compare"] + [a.format(**paths) for a in args] + ["--json", out], expect=2)
    assert words in _one_error_line(result)
    assert not out.exists()


# ---------------------------------------------------------------------------------------------- pictures


def test_skimage_pictures_are_real_photographs():
    from edgeattn.compare import SKIMAGE_PICTURES, sample_pictures

    pictures = sample_pictures()
    assert [name for name, _ in pictures] == list(SKIMAGE_PICTURES)
    for _, array in pictures:
        assert array.dtype == np.uint8 and array.ndim == 3 and array.shape[2] == 3 and min(array.shape[:2]) >= 256
        assert array.std() > 10  # a photograph, not a flat image


def test_preprocess_crops_the_centre_and_normalises():
    """A 2:1 picture, red | wide green | blue bands: resizing the short side to 8 / 0.875 (9 px, so 18 px wide)
    and cropping 8 x 8 from the centre keeps only green (with a margin for the bicubic kernel); ImageNet
    normalisation then gives its exact values."""
    from edgeattn.compare import IMAGENET_MEAN, IMAGENET_STD, preprocess

    picture = np.zeros((60, 120, 3), np.uint8)
    picture[:, :10, 0] = 255
    picture[:, 10:110, 1] = 255
    picture[:, 110:, 2] = 255
    out = preprocess(picture, 8, 8)
    assert out.shape == (3, 8, 8) and out.dtype == np.float32
    expected = [(0.0 - IMAGENET_MEAN[0]) / IMAGENET_STD[0], (1.0 - IMAGENET_MEAN[1]) / IMAGENET_STD[1],
                (0.0 - IMAGENET_MEAN[2]) / IMAGENET_STD[2]]
    for channel in range(3):
        assert np.allclose(out[channel], expected[channel], atol=1e-6)


def test_images_directory_and_skimage(invoke, classifier, tmp_path):
    from edgeattn.compare import write_sample_pictures

    pictures = tmp_path / "pictures"
    paths = write_sample_pictures(str(pictures))
    assert len(paths) == 8 and all(os.path.getsize(p) > 1000 for p in paths)
    a, b = classifier("a.onnx"), classifier("b.onnx")
    out = tmp_path / "dir.json"
    invoke(["compare", a, b, "--images", pictures, "--json", out], expect=0)
    from_dir = json.loads(out.read_text())
    assert from_dir["inputs"]["source"] == "images" and from_dir["inputs"]["count"] == 8
    invoke(["compare", a, b, "--images", "skimage", "--json", out], expect=0)
    bundled = json.loads(out.read_text())
    assert bundled["inputs"]["pictures"] == [os.path.basename(p)[:-4] for p in paths]


# ----------------------------------------------------------------------------------------------- engines


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
    line = _one_error_line(invoke(["compare", onnx_path, state_dict], expect=2))
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
    line = _one_error_line(invoke(["compare", model, checkpoint], expect=2))
    assert "--trust-pickle" in line
    assert not marker.exists(), "compare unpickled the checkpoint without --trust-pickle"
    with pytest.warns(UserWarning, match="trust_pickle=True"):
        invoke(["compare", model, checkpoint, "--trust-pickle"], expect=2)
    assert marker.is_dir()


# ------------------------------------------------------------------------------------------ build --check


def test_build_check_records_the_comparison_in_the_manifest(invoke, classifier, fake_trtexec, tmp_path, no_jetson):
    trtexec = fake_trtexec("10.3.0")
    model = classifier("model.onnx")
    result = invoke(["build", model, "--backend", "trtexec", "--trtexec", trtexec, "--plugins", "off",
                     "--precision", "fp16", "--check"], expect=0)
    assert "check      PASSED vs model.onnx on ONNX Runtime CPU (8 inputs)" in result.stdout
    manifest = json.loads((tmp_path / "model.fp16.engine.json").read_text())
    check = manifest["check"]
    assert check["passed"] and check["engine_backend"] == "trtexec" and check["tolerances"]["atol"] == 0.05
    assert check["max_abs"] < 1e-5 and check["inputs"]["count"] == 8
    invoke(["bench", str(tmp_path / "model.fp16.engine"), "--trtexec", trtexec, "--iterations", "2",
            "--warmup-s", "0"], expect=0)  # the rewritten manifest still matches its engine


def test_build_check_failure_exits_1_and_keeps_engine_and_record(invoke, classifier, fake_trtexec, tmp_path,
                                                                 monkeypatch, no_jetson):
    trtexec = fake_trtexec("10.3.0")
    model = classifier("model.onnx")
    monkeypatch.setenv("FAKE_TRTEXEC_OUTPUT_ERROR", "0.5")  # far outside the FP32 tolerance
    result = invoke(["build", model, "--backend", "trtexec", "--trtexec", trtexec, "--plugins", "off", "--check"],
                    expect=1)
    assert "check      FAILED" in result.stdout
    manifest = json.loads((tmp_path / "model.engine.json").read_text())
    assert (tmp_path / "model.engine").exists() and manifest["check"]["passed"] is False
    assert manifest["check"]["failures"]


def test_tensorrt_variant_onnx_is_explained(invoke, classifier, tmp_path):
    """A custom op without its local function (the TensorRT variant) cannot run on ONNX Runtime: one line."""
    from bench_helpers import matmul_model

    variant = tmp_path / "model.trt.onnx"
    variant.write_bytes(matmul_model(with_custom=True, with_function=False))
    line = _one_error_line(invoke(["compare", str(variant), classifier("b.onnx")], expect=2))
    assert "ONNX Runtime cannot run EdgeAttnLiteMLA" in line and "local functions" in line


# ---------------------------------------------------------------------------------- agreement, outputs, thresholds


def test_agreement_of_zero_outputs_and_of_exactly_five_classes():
    """Cosine of two all-zero samples is 1 (they agree exactly), of a zero sample against a non-zero one 0; an
    (N, 5) output is a classifier (C >= 5): reversed logits [1..5] vs [5..1] disagree on top-1 but share the
    same five classes, so top-5 overlap is 1."""
    from edgeattn.compare.metrics import _agreement

    zeros = np.zeros((3, 5), np.float32)
    record = _agreement(zeros, zeros.copy())
    assert record["cosine_min"] == 1.0 and record["cosine_mean"] == 1.0
    other = zeros.copy()
    other[2] = [1, 0, 0, 0, 0]
    record = _agreement(zeros, other)  # samples 0, 1: both zero -> 1; sample 2: zero vs non-zero -> 0
    assert record["cosine_min"] == 0.0 and record["cosine_mean"] == pytest.approx(2.0 / 3.0)
    a = np.array([[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]], np.float32)
    b = np.array([[5, 4, 3, 2, 1], [9, 4, 3, 2, 1]], np.float32)
    record = _agreement(a, b)
    assert record["top1"] == 0.5 and record["top5"] == 1.0
    assert _agreement(a[:, :4], b[:, :4])["top1"] is None  # fewer than 5 classes: no top-k


def test_single_outputs_with_different_names_are_compared_under_bs_name():
    """One output on each side, named differently (an engine's "output_0" vs the ONNX "logits"): the pair is
    compared under B's (the reference's) name."""
    from edgeattn.compare.metrics import _common_outputs

    a, b = np.ones((2, 10), np.float32), np.zeros((2, 10), np.float32)
    first, second = _common_outputs({"output_0": a}, {"logits": b}, "a.engine", "b.onnx")
    assert list(first) == ["logits"] and list(second) == ["logits"]
    assert first["logits"] is a and second["logits"] is b


def test_min_top1_is_a_lower_bound_that_full_agreement_meets(invoke, classifier):
    """--min-top1 1.0 with identical models: top-1 agreement is exactly 1.0, which is not below the bound."""
    invoke(["compare", classifier("a.onnx"), classifier("b.onnx"), "--min-top1", "1.0"], expect=0)
