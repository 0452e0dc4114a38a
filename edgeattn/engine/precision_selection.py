"""``edgeattn build --precision auto``: build the FP16 and the INT8 engine, keep INT8 only where it is faster and
still right.

Candidates: FP16 from MODEL.onnx and INT8 from its Q/DQ version (``edgeattn quantize``'s MODEL.int8.onnx beside
it, or ``int8_onnx``), each built by :func:`edgeattn.engine.build_engine` in a private directory beside the engine,
timed with the harness of ``edgeattn bench`` (as ``--plugins auto`` times its candidates) and compared with the
FP32 ONNX on ONNX Runtime (``edgeattn compare``: top-1 agreement and cosine on the calibration pictures).
:func:`choose` keeps INT8 only when it built, is faster than FP16 by more than :data:`TIE_TOLERANCE` on the median
GPU compute time (latency when the harness has none), and its top-1 agreement is at least ``min_top1``; otherwise
FP16. The manifest of the winner records both candidates, their latencies and agreement, and why one won
(``precision_selection``).
"""
import os
import shutil
import tempfile

from .._io import atomic_path, write_json
from ..console import warn
from ..errors import EdgeAttnError
from ..tensorrt.manifest import manifest_path

#: --min-top1 default: INT8 may change the arg-max of at most 1 % of the pictures
DEFAULT_MIN_TOP1 = 0.99
#: INT8 must be at least this much faster (relative, median) to count as faster
TIE_TOLERANCE = 0.02
DEFAULT_IMAGES = "skimage"


def default_int8_model(onnx_path):
    return os.path.splitext(onnx_path)[0] + ".int8.onnx"


def _metric(bench):
    stats = bench.get("gpu_compute_ms") or bench["latency_ms"]
    return stats["p50"]


def choose(fp16, int8, min_top1):
    """``(winner "fp16"|"int8", reason)`` from two candidate records (``error``, ``p50_ms``, ``top1``)."""
    if int8.get("error"):
        return "fp16", "INT8 candidate failed: {}".format(int8["error"])
    if int8.get("top1") is None or int8["top1"] < min_top1:
        return "fp16", "INT8 top-1 agreement with FP32 {} < --min-top1 {:g}".format(
            "unknown" if int8.get("top1") is None else "{:.4f}".format(int8["top1"]), min_top1)
    if fp16.get("error"):
        return "int8", "FP16 candidate failed ({}); INT8 agrees with FP32 (top-1 {:.4f})".format(fp16["error"],
                                                                                                int8["top1"])
    if int8["p50_ms"] < fp16["p50_ms"] * (1.0 - TIE_TOLERANCE):
        return "int8", "INT8 {:.4g} ms < FP16 {:.4g} ms and top-1 agreement {:.4f} >= {:g}".format(
            int8["p50_ms"], fp16["p50_ms"], int8["top1"], min_top1)
    return "fp16", "INT8 {:.4g} ms is not faster than FP16 {:.4g} ms (by more than {:g} %)".format(
        int8["p50_ms"], fp16["p50_ms"], TIE_TOLERANCE * 100)


def build_auto(onnx_path, engine_path, build, timer, int8_onnx=None, images=DEFAULT_IMAGES,
               min_top1=DEFAULT_MIN_TOP1, plugins=None, warmup_s=1.0, duration_s=3.0, batch=1, timeout=None,
               say=None):
    """Build, time and compare both candidates; move the winner to ``engine_path``; returns its manifest.

    ``build(source, engine_file, precision)`` builds one candidate (``build_engine`` with the command's options);
    ``timer``: ``(bench backend, trtexec path)`` that can time engines here."""
    from ..bench import run_benchmark
    from ..compare import compare_models
    from ..quantize.graph import file_has_qdq

    say = say or (lambda message: None)
    if not 0.0 <= min_top1 <= 1.0:
        raise EdgeAttnError("--min-top1 is a fraction between 0 and 1, got {}".format(min_top1))
    int8_onnx = int8_onnx or default_int8_model(onnx_path)
    if not os.path.isfile(int8_onnx):
        raise EdgeAttnError("--precision auto needs the INT8 model {} (run `edgeattn quantize {} -o {}`, or give "
                            "--int8-model)".format(int8_onnx, onnx_path, int8_onnx))
    if not file_has_qdq(int8_onnx):
        raise EdgeAttnError("{} has no Q/DQ nodes; give the output of `edgeattn quantize`".format(int8_onnx))
    timer_backend, timer_trtexec = timer
    directory = os.path.dirname(os.path.abspath(engine_path))
    os.makedirs(directory, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix=".edgeattn-precision-", dir=directory)
    records, manifests = {}, {}
    try:
        for precision, source in (("fp16", onnx_path), ("int8", int8_onnx)):
            record = {"precision": precision, "onnx": os.path.abspath(source), "error": None, "p50_ms": None,
                      "latency_ms": None, "top1": None, "cosine_mean": None}
            engine_file = os.path.join(workdir, "candidate-{}.engine".format(precision))
            try:
                say("candidate {}: building from {}".format(precision, os.path.basename(source)))
                manifests[precision] = build(source, engine_file, precision)
                say("candidate {}: timing ({:g} s warm-up, {:g} s)".format(precision, warmup_s, duration_s))
                bench = run_benchmark(engine_file, backend=timer_backend, batch=batch, warmup_s=warmup_s,
                                      duration_s=duration_s, plugins=plugins, trtexec=timer_trtexec, timeout=timeout)
                record["p50_ms"] = _metric(bench)
                record["latency_ms"] = bench.get("gpu_compute_ms") or bench["latency_ms"]
                say("candidate {}: comparing with {} ({})".format(precision, os.path.basename(onnx_path), images))
                report = compare_models(engine_file, onnx_path, images=images, backend=timer_backend,
                                        plugins=plugins, trtexec=timer_trtexec, timeout=timeout)
                record["top1"] = report["top1_agreement"]
                record["cosine_mean"] = report["cosine_mean"]
                record["cosine_min"] = report["cosine_min"]
            except EdgeAttnError as error:
                record["error"] = error.format_message()
                warn("candidate {}: failed: {}".format(precision, record["error"]))
            records[precision] = record
        if records["fp16"]["error"] and records["int8"]["error"]:
            raise EdgeAttnError("both candidates failed: fp16: {}; int8: {}".format(records["fp16"]["error"],
                                                                                   records["int8"]["error"]))
        winner, reason = choose(records["fp16"], records["int8"], min_top1)
        say("selected {}: {}".format(winner, reason))
        manifest = manifests[winner]
        manifest["engine"]["file"] = os.path.basename(engine_path)
        manifest["precision_selection"] = {
            "mode": "auto", "selected": winner, "reason": reason, "min_top1": min_top1, "images": images,
            "reference": os.path.abspath(onnx_path), "tie_tolerance": TIE_TOLERANCE,
            "metric": "median GPU compute time (latency where the harness has none)",
            "timing": {"harness": "edgeattn bench", "backend": timer_backend, "batch": batch,
                       "warmup_s": warmup_s, "duration_s": duration_s},
            "candidates": [records["fp16"], records["int8"]]}
        with atomic_path(engine_path) as engine_tmp:
            os.replace(os.path.join(workdir, "candidate-{}.engine".format(winner)), engine_tmp)
            write_json(manifest_path(engine_path), manifest)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return manifest
