"""Latency statistics over recorded iterations.

Definitions (the same for every backend, so results from ONNX Runtime, TensorRT and trtexec compare):
  - percentiles: linear interpolation between order statistics (numpy's default "linear" method); trtexec's own
    summary uses a nearest-rank rule instead, so its printed percentiles can differ slightly from ours;
  - std: population standard deviation (ddof=0), as trtexec's "coefficient of variance" uses;
  - cov: std / mean, a fraction (0.01 = 1 %).
"""
import math

import numpy as np

#: keys of every statistics block ("latency_ms", "gpu_compute_ms")
STAT_KEYS = ("mean", "min", "max", "p50", "p90", "p95", "p99", "std", "cov")
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0))


def latency_stats(samples_ms):
    """Statistics of per-iteration latencies in milliseconds: mean, min, max, p50, p90, p95, p99, std, cov."""
    values = np.asarray(samples_ms, dtype=np.float64).ravel()
    if values.size == 0:
        raise ValueError("no samples: at least one timed iteration is needed")
    if not np.all(np.isfinite(values)):
        raise ValueError("samples contain NaN or infinite values")
    mean = float(values.mean())
    std = float(values.std())
    stats = {"mean": mean, "min": float(values.min()), "max": float(values.max())}
    for key, q in PERCENTILES:
        stats[key] = float(np.percentile(values, q))
    stats["std"] = std
    stats["cov"] = std / mean if mean > 0 else (0.0 if std == 0 else math.inf)
    return {key: stats[key] for key in STAT_KEYS}


def throughput(items, seconds):
    """Items per second over a wall-clock span (0 if the span is empty)."""
    return float(items) / seconds if seconds > 0 else 0.0


def format_stats(stats, unit="ms"):
    """One line: mean, p50, p90, p99, min, max, CoV."""
    return "mean {mean:.4g} {u}, p50 {p50:.4g} {u}, p90 {p90:.4g} {u}, p99 {p99:.4g} {u}, min {min:.4g} {u}, " \
           "max {max:.4g} {u}, CoV {cov_pct:.2f} %".format(u=unit, cov_pct=stats["cov"] * 100.0, **stats)
