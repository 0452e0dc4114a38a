"""``edgeattn compare``: ONNX pairs on ONNX Runtime, engines through trtexec (the fake replaying trtexec's
--loadInputs / --exportOutput formats), checkpoints through PyTorch; the numbers against numpy computed here from
ONNX Runtime outputs; exit 0 / 1 / 2."""
import json

import numpy as np
import pytest

from compare_helpers import SIZE, classifier_weight, one_error_line, seeded_inputs

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("polygraphy")


def ort_run(path, images):
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, {"images": images})[0]


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
    assert words in one_error_line(result)
    assert not out.exists()
