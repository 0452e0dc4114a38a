"""``edgeattn compare``'s metrics (compare/metrics.py): agreement, output matching, thresholds."""

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("polygraphy")


def test_agreement_of_zero_outputs_and_of_exactly_five_classes():
    """Cosine of two all-zero samples is 1 (they agree exactly), of a zero sample against a non-zero one 0; an
    (N, 5) output is a classifier (C >= 5): reversed logits [1..5] vs [5..1] disagree on top-1 but share the
    same five classes, so top-5 overlap is 1."""
    from edgeattn.compare import class_agreement

    zeros = np.zeros((3, 5), np.float32)
    record = class_agreement(zeros, zeros.copy())
    assert record["cosine_min"] == 1.0 and record["cosine_mean"] == 1.0
    other = zeros.copy()
    other[2] = [1, 0, 0, 0, 0]
    record = class_agreement(zeros, other)  # samples 0, 1: both zero -> 1; sample 2: zero vs non-zero -> 0
    assert record["cosine_min"] == 0.0 and record["cosine_mean"] == pytest.approx(2.0 / 3.0)
    a = np.array([[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]], np.float32)
    b = np.array([[5, 4, 3, 2, 1], [9, 4, 3, 2, 1]], np.float32)
    record = class_agreement(a, b)
    assert record["top1"] == 0.5 and record["top5"] == 1.0
    assert class_agreement(a[:, :4], b[:, :4])["top1"] is None  # fewer than 5 classes: no top-k


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
