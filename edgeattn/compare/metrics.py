"""How two sides' outputs are matched and measured: Polygraphy's element-wise comparator (B is the reference),
per-sample cosine similarity, top-1 / top-5 agreement for classifier outputs."""
import collections

import numpy as np

from ..errors import EdgeAttnError
from .sides import _quiet_polygraphy

DEFAULT_ATOL = 1e-4
DEFAULT_RTOL = 1e-3


def _common_outputs(out_a, out_b, path_a, path_b):
    """Both sides' outputs under shared names: by name, or the single output of each under B's name."""
    if len(out_a) == 1 and len(out_b) == 1:
        name = next(iter(out_b))
        return collections.OrderedDict([(name, next(iter(out_a.values())))]), out_b
    missing = [name for name in out_b if name not in out_a]
    if missing:
        raise EdgeAttnError("{} has no output named {} (its outputs: {})".format(
            path_a, ", ".join(missing), ", ".join(out_a)))
    return collections.OrderedDict((name, out_a[name]) for name in out_b), out_b


def _polygraphy_compare(out_a, out_b, atol, rtol):
    """Per output: Polygraphy's element-wise verdict and error statistics (B is the reference)."""
    with _quiet_polygraphy():
        from polygraphy import comparator

        make = getattr(comparator, "SimpleCompareFunc", None) or comparator.CompareFunc.simple
        compare_func = make(atol=atol, rtol=rtol, check_error_stat="elemwise")
        first = comparator.IterationResult(outputs=out_a, runner_name="A")
        second = comparator.IterationResult(outputs=out_b, runner_name="B")
        results = compare_func(first, second)
    report = collections.OrderedDict()
    for name in out_b:
        result = results.get(name)
        if result is None:
            raise EdgeAttnError("Polygraphy did not compare output {!r} (shapes {} vs {})".format(
                name, out_a[name].shape, out_b[name].shape))
        report[name] = {"shape": list(out_b[name].shape), "passed": bool(result),
                        "max_abs": _number(result.max_absdiff), "max_rel": _number(result.max_reldiff),
                        "mean_abs": _number(result.mean_absdiff), "mean_rel": _number(result.mean_reldiff),
                        "median_abs": _number(getattr(result, "median_absdiff", None))}
    return report


def _number(value):
    if value is None:
        return None
    value = float(value)
    return value if np.isfinite(value) else None


def class_agreement(a, b):
    """Cosine similarity per sample, and top-1 / top-5 agreement for (N, C >= 5) classifier outputs."""
    a64 = a.reshape(len(a), -1).astype(np.float64)
    b64 = b.reshape(len(b), -1).astype(np.float64)
    norms = np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cosine = np.where(norms > 0, np.sum(a64 * b64, axis=1) / norms, np.where(
            np.all(a64 == b64, axis=1), 1.0, 0.0))
    record = {"cosine_min": _number(np.min(cosine)), "cosine_mean": _number(np.mean(cosine)), "top1": None,
              "top5": None}
    if a.ndim == 2 and a.shape[1] >= 5:
        record["top1"] = float(np.mean(np.argmax(a, axis=1) == np.argmax(b, axis=1)))
        top_a = np.argsort(-a, axis=1, kind="stable")[:, :5]
        top_b = np.argsort(-b, axis=1, kind="stable")[:, :5]
        overlap = [len(set(x) & set(y)) / 5.0 for x, y in zip(top_a.tolist(), top_b.tolist())]
        record["top5"] = float(np.mean(overlap))
    return record
