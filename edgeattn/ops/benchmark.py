"""Timing of the operator cores on this CPU, shared by ``edgeattn ops-bench`` and ``benchmarks/ops_cpu.py``.

FLOP convention (used everywhere here): GEMM FLOPs only, 2 per multiply-accumulate of the operator's matrix
products as :mod:`edgeattn.cost` counts them (the model counter's formulas), over the work the core actually has
to do (masked padding adds nothing: its partial windows are computed at their real size; "zeros" padding is
counted on the padded map). Softmax/exp, normalisation, copies and the landmark sampler are not counted, so
GFLOP/s here is directly comparable to a square GEMM.

Timing: each case runs once to warm up, then at least ``repeats`` times and until ``min_time_s`` has passed
(at most ``max_repeats``); the minimum is the headline number (least disturbed by other processes on a shared
machine), the median is reported next to it.
"""
import math
import os
import platform
import statistics
import time

import torch

from .. import cost
from ..probes import cpu_info, host_info, python_info
from ._common import OpShapeError
from .blockify import blockify_attention
from .cswin import cross_shaped_window_attention
from .efficient_attention import efficient_attention
from .elfatt import elfatt_attention
from .flurka import compress_tokens, flurka_attention, orthogonal_gaussian_features
from .litemla import lite_mla_attention
from .multispot import multi_spot_attention
from .soft import soft_kernel_attention
from .softmax import softmax_attention

BASELINE = "sdpa"


def map_shape(tokens):
    """(H, W) for N tokens: square when N is a perfect square, else the most square factorisation."""
    if tokens < 1:
        raise OpShapeError("token count must be >= 1, got {}".format(tokens))
    side = int(math.isqrt(tokens))
    for height in range(side, 0, -1):
        if tokens % height == 0:
            return height, tokens // height
    return 1, tokens


def largest_divisor_at_most(value, limit):
    for candidate in range(min(value, limit), 0, -1):
        if value % candidate == 0:
            return candidate
    return 1


def time_call(fn, repeats=3, min_time_s=0.0, max_repeats=200, warmup=1):
    """Time ``fn()``: ``warmup`` untimed calls, then >= ``repeats`` timed calls until ``min_time_s`` has passed.

    Returns {"min_ms", "median_ms", "mean_ms", "repeats", "samples_ms"} (wall clock, ``time.perf_counter``).
    """
    for _ in range(warmup):
        fn()
    samples = []
    started = time.perf_counter()
    while len(samples) < max(1, repeats) or (time.perf_counter() - started < min_time_s and
                                             len(samples) < max_repeats):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return {"min_ms": min(samples), "median_ms": statistics.median(samples), "mean_ms": statistics.fmean(samples),
            "repeats": len(samples), "samples_ms": samples}


#: glibc mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def keep_freed_memory():
    """Make glibc keep freed memory in the heap (mmap threshold 256 MiB, trim threshold 1 GiB) for this process.

    With the defaults, every fresh multi-MB temporary of an eager PyTorch op is mmapped and page-faulted in again
    on each call, which costs about as much as a small op's arithmetic on a VM; an inference runtime's arena
    allocator (ONNX Runtime, TensorRT) never pays it. Benchmarks record the numbers both ways. Returns True when
    applied (Linux glibc), False otherwise. Irreversible for the process: call it after the default-allocator runs.
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name or not platform.system() == "Linux":
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, 256 << 20)) and bool(mallopt(_M_TRIM_THRESHOLD, 1 << 30))


def time_interleaved(fns, rounds=20, warmup=1, min_time_s=0.0, block=1):
    """Time several callables in alternating rounds so that they all see the same machine load.

    Each round calls every callable ``block`` times back to back (block > 1: the later calls run with warm caches,
    as in a plain repeat loop; block = 1: every call follows a different op, i.e. cold caches). Runs >= ``rounds``
    rounds and until ``min_time_s``; returns {name: time_call-style dict} over all samples.
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples = {name: [] for name in fns}
    started = time.perf_counter()
    done = 0
    while done < max(1, rounds) or time.perf_counter() - started < min_time_s:
        for name, fn in fns.items():
            for _ in range(max(1, block)):
                t0 = time.perf_counter()
                fn()
                samples[name].append((time.perf_counter() - t0) * 1e3)
        done += 1
    return {name: {"min_ms": min(v), "median_ms": statistics.median(v), "mean_ms": statistics.fmean(v),
                   "repeats": len(v), "samples_ms": v} for name, v in samples.items()}


def square_gemm(size=1024):
    """A square FP32 GEMM callable (size^3 multiply-accumulates) and its FLOPs."""
    a = torch.randn(size, size)
    b = torch.randn(size, size)
    return (lambda: torch.mm(a, b)), 2.0 * size ** 3


def measure_gemm(size=1024, repeats=5, min_time_s=0.2):
    """Square FP32 GEMM (size^3 MACs) GFLOP/s on this machine with the current torch thread count."""
    fn, flops = square_gemm(size)
    timing = time_call(fn, repeats=repeats, min_time_s=min_time_s)
    return {"size": size, "flops": flops, "min_ms": timing["min_ms"], "median_ms": timing["median_ms"],
            "gflops": flops / timing["min_ms"] / 1e6, "gflops_median": flops / timing["median_ms"] / 1e6}


def run_context():
    """Where the numbers come from: torch version, threads, CPU model, Python, OS, load when it started."""
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    cpu = cpu_info()  # the probes of every run record (bench, doctor), here with torch's thread settings
    return {"loadavg_at_start": load, "torch": torch.__version__, "threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(), "cpu_model": cpu["model"],
            "cpu_count": cpu["cores_logical"], "python": python_info()["version"], "platform": host_info()["os"],
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}


def load_warning():
    """A one-line warning when other processes keep the CPUs busy (timings are then disturbed), else None."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return None
    cpus = os.cpu_count() or 1
    if load <= 0.5 * cpus:
        return None
    return ("load average {:.1f} on {} CPUs: other processes are competing for the cores, so timings (especially "
            "multi-threaded small ops) are inflated and noisy".format(load, cpus))


def _tokens(b, n, c, seed, scale=1.0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(b, n, c, generator=generator) * scale


def build_case(name, tokens, heads, head_dim, window_size):
    """(callable, gemm_flops, details) for one operator core at N tokens, or raise OpShapeError."""
    height, width = map_shape(tokens)
    n, d, c = tokens, head_dim, heads * head_dim
    q, k, v = _tokens(1, n, c, 1), _tokens(1, n, c, 2), _tokens(1, n, c, 3)
    pad = "none" if height % window_size == 0 and width % window_size == 0 else "masked"
    details = {"height": height, "width": width}
    if name == "sdpa":
        gemm = cost.flops(cost.softmax_attention_macs(n, n, c))
        return (lambda: softmax_attention(q, k, v, num_heads=heads)), gemm, details
    if name == "blockify":
        details["padding"] = pad
        gemm = cost.flops(cost.window_attention_macs(height, width, window_size, c,
                                                     exact_partial_windows=pad == "masked"))
        return (lambda: blockify_attention(q, k, v, num_heads=heads, height=height, width=width,
                                           window_size=window_size, padding=pad)), gemm, details
    if name == "effatt":
        gemm = cost.flops(cost.efficient_attention_macs(n, c, heads))
        return (lambda: efficient_attention(q, k, v, num_heads=heads)), gemm, details
    if name == "elfatt":
        if heads < 2:
            raise OpShapeError("ELFATT needs >= 2 heads (one global, one block)")
        global_heads = heads // 2
        details.update(padding=pad, global_heads=global_heads)
        gemm = cost.flops(sum(cost.elfatt_macs(height, width, window_size, c, heads, global_heads,
                                               exact_partial_windows=pad == "masked")))
        return (lambda: elfatt_attention(q, k, v, num_heads=heads, num_global_heads=global_heads, height=height,
                                         width=width, window_size=window_size, padding=pad)), gemm, details
    if name == "cswin":
        if heads % 2:
            raise OpShapeError("CSWin needs an even number of heads")
        split = largest_divisor_at_most(math.gcd(height, width), window_size)
        details["split_size"] = split
        gemm = cost.flops(cost.cswin_stripes_macs(height, width, split, c))
        return (lambda: cross_shaped_window_attention(q, k, v, num_heads=heads, height=height, width=width,
                                                      split_size=split)), gemm, details
    if name in ("litemla-relu", "litemla-qt"):
        kernel = "relu" if name == "litemla-relu" else "quadratic_taylor"
        qkv_map = _tokens(1, 3 * c, height * width, 4).reshape(1, 3 * c, height, width)
        gemm = cost.flops(cost.lite_mla_macs(n, heads, d, kernel))
        return (lambda: lite_mla_attention(qkv_map, head_dim=d, kernel=kernel)), gemm, details
    if name == "soft++":
        ratio_h, ratio_w = max(1, height // 7), max(1, width // 7)
        m = (height // ratio_h) * (width // ratio_w)
        landmarks = _tokens(1, m, c, 5, scale=0.3)
        qs = q * d ** -0.25
        details.update(landmarks=m, newton_iters=20)
        gemm = cost.flops(cost.soft_macs(n, m, heads, d, iterations=20)[0])
        return (lambda: soft_kernel_attention(qs, landmarks, v, num_heads=heads, newton_iters=20,
                                              symmetric_norm=True)), gemm, details
    if name in ("flurka-elu", "flurka-performer"):
        rank = min(64, n)
        feature_map = "elu" if name == "flurka-elu" else "performer"
        features = d if feature_map == "elu" else max(1, int(d * math.log(d)))
        E1, E2 = _tokens(1, rank, n, 6)[0] / math.sqrt(rank), _tokens(1, rank, n, 7)[0] / math.sqrt(rank)
        projection = orthogonal_gaussian_features(features, d, torch.Generator().manual_seed(0)) \
            if feature_map == "performer" else None
        details.update(rank=rank, features=features)
        gemm = cost.flops(cost.flurka_macs(n, rank, c, heads, features, performer=feature_map == "performer"))

        def run():
            return flurka_attention(q, compress_tokens(k, E1), compress_tokens(v, E2), num_heads=heads,
                                    feature_map=feature_map, projection=projection)
        return run, gemm, details
    if name == "multispot":
        region = largest_divisor_at_most(math.gcd(height, width), window_size + 1)
        pool = largest_divisor_at_most(math.gcd(height, width), 2)
        topk = min(64, n)
        pooled_all = (height // region) * (width // region)
        pooled_top = min(16, (height // pool) * (width // pool))
        details.update(region_size=region, topk=topk, pool_levels=[[pool, pooled_top], [region, None]])
        levels = [(n // (pool * pool), pooled_top), (pooled_all, None)]
        gemm = cost.flops(cost.multi_spot_macs(n, 0, c, region, topk, levels))
        return (lambda: multi_spot_attention(q, k, v, num_heads=heads, height=height, width=width,
                                             region_size=region, topk=topk, pool_sizes=[pool, region],
                                             pool_topk=[pooled_top, None])), gemm, details
    raise OpShapeError("unknown operator {!r}".format(name))


def _quartiles(samples):
    """``q1_ms``/``q3_ms`` of the timed calls (the spread the report's scaling plot draws as error bars)."""
    if len(samples) < 2:
        return {"q1_ms": samples[0], "q3_ms": samples[0]}
    q1, _median, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return {"q1_ms": q1, "q3_ms": q3}


#: every benchmarked operator core, the softmax baseline first
OPS = ("sdpa", "blockify", "effatt", "elfatt", "cswin", "litemla-relu", "litemla-qt", "soft++", "flurka-elu",
       "flurka-performer", "multispot")


def run_ops_bench(tokens_list, heads=2, head_dim=32, window_size=7, repeats=3, min_time_s=0.2, ops=OPS,
                  progress=None):
    """Time each operator core at each token count against SDPA. Returns the JSON-serialisable record.

    ``progress``: optional callable(done, total, message) for long runs.
    """
    ops = list(ops)
    if BASELINE not in ops:
        ops.insert(0, BASELINE)
    results = []
    total = len(ops) * len(tokens_list)
    done = 0
    for tokens in tokens_list:
        baseline_ms = None
        for name in ops:
            if progress is not None:
                progress(done, total, "{} N={}".format(name, tokens))
            record = {"op": name, "tokens": tokens}
            try:
                fn, flops, details = build_case(name, tokens, heads, head_dim, window_size)
                with torch.no_grad():
                    timing = time_call(fn, repeats=repeats, min_time_s=min_time_s)
            except OpShapeError as error:
                record.update(skipped=str(error))
            else:
                if name == BASELINE:
                    baseline_ms = timing["min_ms"]
                record.update(details)
                record.update(ms=timing["min_ms"], median_ms=timing["median_ms"], repeats=timing["repeats"],
                              gemm_flops=flops, gflops=flops / timing["min_ms"] / 1e6,
                              speedup_vs_sdpa=None if baseline_ms is None else baseline_ms / timing["min_ms"])
                record.update(_quartiles(timing["samples_ms"]))
            results.append(record)
            done += 1
    if progress is not None:
        progress(done, total, "done")
    return {"schema": "edgeattn.ops-bench/1",
            "config": {"tokens": list(tokens_list), "heads": heads, "head_dim": head_dim,
                       "window_size": window_size, "repeats": repeats, "min_time_s": min_time_s, "batch": 1,
                       "dtype": "float32", "baseline": BASELINE},
            "flop_convention": "GEMM FLOPs only (2 per multiply-accumulate of the core's matrix products); "
                               "softmax/exp, copies and samplers not counted",
            "results": results}
