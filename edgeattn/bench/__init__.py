"""Benchmarks with every iteration recorded: ONNX Runtime, TensorRT (Python) and trtexec behind one API.

``run_benchmark`` returns one record (schema ``edgeattn.bench/1``, docs/outputs.md)::

    {"schema": "edgeattn.bench/1",
     "model": {"path", "name", "sha256", "kind": "onnx" | "engine"},
     "backend": "onnxruntime" | "tensorrt" | "trtexec", "provider": "CPUExecutionProvider" | ...,
     "batch", "threads", "precision": "fp32" | "fp16" | null,
     "iterations", "warmup_s",
     "latency_ms": {"mean", "min", "max", "p50", "p90", "p95", "p99", "std", "cov"},
     "throughput_items_per_s",
     "gpu_compute_ms": {...same keys...} | null,
     "samples_ms": [...], "gpu_compute_samples_ms": [...] | null,
     "window": {"start_unix", "end_unix", "source"},
     "context": {...},                      # edgeattn.bench.context.run_context()
     "layers": null | {"total_ms", "layer_count", "groups": {group: {"ms", "share", "layers"}}, "top": [{"name",
                "average_ms", "median_ms", "share", "group", "type", "precision"}], "joined_with_layer_info",
                "source", "profiled_runs"},    # bench --layers: a separate profiling run (tensorrt.layers)
     ...backend details ("providers", "inputs", "duration_s", "cuda_graph", "manifest", "trtexec", ...)}

Statistics: see :mod:`edgeattn.bench.stats` (cov is a fraction). Throughput = batch x iterations / timed wall time.
"""
import os

from .. import filekind, onnx_graph
from .._io import read_input_bytes, sha256_file
from ..console import warn
from ..errors import EdgeAttnError
from ..tensorrt import manifest as manifest_module
from ..tensorrt.api import tensorrt_importable
from .context import run_context
from .stats import latency_stats, throughput
from .timing import check_run_length

__all__ = ["run_benchmark", "latency_stats", "BACKENDS", "RESULT_SCHEMA"]

RESULT_SCHEMA = "edgeattn.bench/1"
BACKENDS = ("auto", "onnxruntime", "tensorrt", "trtexec")
_ENGINE_BACKENDS = ("tensorrt", "trtexec")


def _model_kind(path):
    """``"onnx"`` or ``"engine"``, from the content (a ModelProto parses; an engine plan does not)."""
    if not os.path.exists(path):
        raise EdgeAttnError("no such file: {}".format(path))
    filekind.require(path, ("onnx", "engine"), "an ONNX model or a TensorRT engine")
    if os.path.isdir(path):
        raise EdgeAttnError("{} is a directory, not a model file".format(path))
    data = read_input_bytes(path)
    if onnx_graph.is_onnx_model(data):
        return "onnx", data
    if path.lower().endswith(".onnx"):
        onnx_graph.load_model(path)  # raises "not a valid ONNX model" (or "onnx is not installed")
    return "engine", data


def check_model_file(path, allow_engine_host_code=False):
    """Open and check a model before any output is written: ``"onnx"`` or ``"engine"``. An ONNX file must parse;
    an engine must be non-empty and, when it has a manifest, match it (and embed no host code unless allowed).
    Raises :class:`EdgeAttnError`."""
    path = os.fspath(path)
    kind, data = _model_kind(path)
    if kind == "engine":
        manifest_module.check_engine(path, manifest_module.read_manifest(path), data,
                                     allow_engine_host_code=allow_engine_host_code)
    return kind


def choose_backend(backend, kind, trtexec):
    """The backend that runs a ``kind`` (``"onnx"`` or ``"engine"``) file for ``--backend backend``."""
    if backend not in BACKENDS:
        raise EdgeAttnError("unknown backend {!r} (choose {})".format(backend, ", ".join(BACKENDS)))
    if kind == "onnx":
        return "onnxruntime" if backend == "auto" else backend
    if backend == "onnxruntime":
        raise EdgeAttnError("ONNX Runtime runs ONNX files, not TensorRT engines; use --backend tensorrt or trtexec")
    if backend != "auto":
        return backend
    if tensorrt_importable():
        try:
            from ..tensorrt.cuda import open_cuda
            open_cuda()
            return "tensorrt"
        except EdgeAttnError:
            pass
    from ..trtexec.locate import find_trtexec

    if find_trtexec(trtexec)[0]:
        return "trtexec"
    raise EdgeAttnError("no TensorRT runtime to run an engine: install TensorRT's Python bindings (with "
                        "cuda-python or torch) or put trtexec on PATH; `edgeattn doctor` shows what is missing")


def run_benchmark(model_path, backend="auto", batch=1, warmup_s=1.0, duration_s=None, iterations=None,
                  threads=None, cuda_graph=True, plugins=None, progress=None, provider=None, trtexec=None,
                  timeout=None, allow_engine_host_code=False, layers_top=None):
    """Benchmark an ONNX file (ONNX Runtime, or trtexec) or a TensorRT engine (TensorRT Python or trtexec).

    ``duration_s`` and ``iterations`` are exclusive (neither: 3 s); ``threads`` sets ONNX Runtime's intra-op
    threads; ``provider`` picks ONNX Runtime's provider (auto, cpu, cuda, tensorrt); ``plugins`` is the plugin
    library for engines with custom ops (default: the manifest's, then ``edgeattn.plugins``' search);
    ``trtexec`` the trtexec executable. ``progress(fraction, message)`` is called while running.
    ``allow_engine_host_code``: let TensorRT run host code embedded in a version-compatible engine (the embedded
    plugin library); never switched on by the engine's manifest. ``layers_top``: also time every layer in a
    separate profiling run and keep the ``layers_top`` slowest (engines and trtexec only). Bad input raises
    :class:`EdgeAttnError`.
    """
    if int(batch) != batch or batch < 1:
        raise EdgeAttnError("batch must be a positive integer, got {!r}".format(batch))
    batch = int(batch)
    if threads is not None and (int(threads) != threads or threads < 1):
        raise EdgeAttnError("threads must be a positive integer, got {!r}".format(threads))
    if warmup_s is None or warmup_s < 0:
        raise EdgeAttnError("warm-up must be >= 0 s, got {!r}".format(warmup_s))
    try:
        duration_s, iterations = check_run_length(duration_s, iterations)
    except ValueError as error:
        raise EdgeAttnError(str(error))
    model_path = os.fspath(model_path)
    kind, data = _model_kind(model_path)
    backend = choose_backend(backend, kind, trtexec)
    if layers_top is not None and backend == "onnxruntime":
        raise EdgeAttnError("per-layer times (--layers) come from TensorRT's profiler: benchmark an engine, or the "
                            "ONNX file with --backend trtexec")
    if threads is not None and backend != "onnxruntime":
        warn("--threads only applies to ONNX Runtime; ignored for {}".format(backend))
        threads = None

    manifest = None
    if kind == "engine":
        manifest = manifest_module.read_manifest(model_path)
        if manifest is None:
            warn("{} has no manifest ({}); its TensorRT version and device cannot be checked before loading".format(
                model_path, os.path.basename(manifest_module.manifest_path(model_path))))
        manifest_module.check_engine(model_path, manifest, data, allow_engine_host_code=allow_engine_host_code,
                                     rebuild_hint=True)

    if backend == "onnxruntime":
        from . import onnxruntime_backend

        part = onnxruntime_backend.run(model_path, batch, threads, provider, warmup_s, duration_s, iterations,
                                       progress)
        if part["provider"] != "CPUExecutionProvider":
            from ..probes import cuda_device

            part["device"] = cuda_device()
    elif backend == "tensorrt":
        if kind != "engine":
            raise EdgeAttnError("--backend tensorrt runs engines; build one first with `edgeattn build {}`".format(
                model_path))
        from ..tensorrt import plugin_library
        from . import tensorrt_backend

        library = plugin_library.resolve(plugins, manifest_plugins=(manifest or {}).get("plugins"),
                                         custom_ops=(manifest or {}).get("custom_ops") or (), load=False)
        part = tensorrt_backend.run(model_path, data, manifest, batch, library["path"] if library else None,
                                    warmup_s, duration_s, iterations, cuda_graph, progress,
                                    allow_engine_host_code=allow_engine_host_code, layers_top=layers_top)
    else:
        from . import trtexec_backend

        part = trtexec_backend.run(model_path, kind, manifest, batch, plugins, warmup_s, duration_s, iterations,
                                   cuda_graph, trtexec, progress, timeout=timeout, layers_top=layers_top)
    del data

    timed = part["timed"]
    result = {
        "schema": RESULT_SCHEMA,
        "model": {"path": os.path.abspath(model_path),
                  "name": os.path.splitext(os.path.basename(model_path))[0],
                  "sha256": sha256_file(model_path), "kind": kind},
        "backend": backend,
        "provider": part["provider"],
        "batch": batch,
        "threads": part["threads"],
        "precision": part["precision"],
        "iterations": len(timed.samples_ms),
        "warmup_s": float(warmup_s),
        "latency_ms": latency_stats(timed.samples_ms),
        "throughput_items_per_s": throughput(batch * len(timed.samples_ms), timed.elapsed_s),
        "gpu_compute_ms": latency_stats(timed.device_ms) if timed.device_ms else None,
        "samples_ms": [round(x, 6) for x in timed.samples_ms],
        "gpu_compute_samples_ms": [round(x, 6) for x in timed.device_ms] if timed.device_ms else None,
        "window": {"start_unix": timed.start_unix, "end_unix": timed.end_unix,
                   "source": part.get("window_source", "host clock around the timed loop")},
        "duration_s": timed.elapsed_s,
        "warmup_iterations": timed.warmup_iterations,
        "run_length": {"duration_s": duration_s, "iterations": iterations},
        "cuda_graph": bool(cuda_graph) if backend in _ENGINE_BACKENDS else None,
        "inputs": part.get("inputs"),
        "providers": part.get("providers"),
        "manifest": manifest_module.manifest_path(model_path) if manifest else None,
        "context": run_context(device=part.get("device")),
        "layers": part.get("layers"),
    }
    result.update(part.get("extra") or {})
    return result
