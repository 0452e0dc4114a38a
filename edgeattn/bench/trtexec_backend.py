"""trtexec backend: per-iteration times from ``--exportTimes`` JSON, never from the console summary.

End-to-end samples are trtexec's ``latencyMs`` (H2D + GPU compute + D2H, present in every version), GPU compute
samples its ``computeMs``. Before 8.5 the export holds the warm-up iterations too; they are dropped with
trtexec's own rule. The timed window is anchored at trtexec's exit (its timed phase ends the run) and spans the
trace's walltime, so it is approximate by the time trtexec needs to print its report.
"""
import math
import os
import shutil
import tempfile
import time

from .. import onnx_graph
from ..errors import EdgeAttnError
from ..probes import cuda_device
from ..tensorrt import manifest as manifest_module
from ..tensorrt import plugin_library
from ..trtexec import flags, run_trtexec
from ..trtexec.exports import parse_layer_info, parse_profile, parse_times, timed_iterations, trace_samples
from ..trtexec.locate import locate
from ..trtexec.log import explain_failure, parse_device
from ..trtexec.version import version_from_output
from .inputs import resolve_shape
from .timing import TimedRun, check_run_length

#: seconds allowed on top of warm-up + duration for loading (or building, for ONNX) and reporting
LOAD_ALLOWANCE_S = 600
BUILD_ALLOWANCE_S = 3600


def run_for_export(args, version, model_path, library, export_path, export_option, timeout):
    """Run the trtexec command line ``args``, which writes ``export_path`` (its ``export_option``); returns the
    CommandResult and the export's text. A failed run raises one line that explains it (with the plugin library
    and its creators), and so does a run that wrote no export."""
    result = run_trtexec(args, timeout=timeout)
    if result.returncode != 0:
        raise EdgeAttnError(explain_failure(
            result.output, result.returncode, version=version, model_path=model_path,
            plugin_library=library["path"] if library else None,
            creators=plugin_library.creator_tuples(library)))
    try:
        with open(export_path) as handle:
            return result, handle.read()
    except OSError:
        raise EdgeAttnError("trtexec {} reported success but wrote no {} file".format(version, export_option))


def _onnx_shapes(model_path, batch):
    model = onnx_graph.load_model(model_path, "benchmarking an ONNX file with trtexec")
    shapes = []
    dynamic = False
    for entry in onnx_graph.graph_io(model)["inputs"]:
        dims = resolve_shape(entry["name"], entry["shape"], batch)
        dynamic = dynamic or any(not isinstance(d, int) for d in entry["shape"] or [])
        shapes.append((entry["name"], dims))
    return (shapes if dynamic else None), onnx_graph.custom_ops(model)


def _layer_times(workdir, manifest, top):
    """The per-layer record from the profiling run's exports (layer info joined in when trtexec wrote it)."""
    from ..tensorrt.layers import layer_times

    try:
        with open(os.path.join(workdir, "profile.json")) as handle:
            profile = parse_profile(handle.read())
    except OSError:
        raise EdgeAttnError("trtexec reported success but wrote no --exportProfile file")
    info = None
    try:
        with open(os.path.join(workdir, "layers.json")) as handle:
            info = parse_layer_info(handle.read())
    except (OSError, EdgeAttnError):
        info = None  # before 8.2, or an export we cannot read: layers are then grouped by name
    record = layer_times(profile["layers"], info, custom_ops=(manifest or {}).get("custom_ops"), top=top)
    record["source"] = "trtexec --exportProfile (--separateProfileRun: a profiling run apart from the timed one)"
    record["profiled_runs"] = profile["count"]
    return record


def run(model_path, kind, manifest, batch, plugins, warmup_s, duration_s, iterations, cuda_graph, trtexec,
        progress, timeout=None, layers_top=None):
    duration_s, iterations = check_run_length(duration_s, iterations)
    path, version = locate(trtexec)
    custom_ops = []
    if kind == "engine":
        manifest_module.preflight(model_path, manifest, version, cuda_device())
        shapes = manifest_module.check_batch(manifest, batch) if manifest else None
        if shapes is None and batch != 1:
            raise EdgeAttnError("cannot set batch {} for {}: it has no edgeattn manifest naming its inputs; "
                                "build it with `edgeattn build`".format(batch, model_path))
        library = plugin_library.resolve(plugins, manifest_plugins=(manifest or {}).get("plugins"),
                                         custom_ops=(manifest or {}).get("custom_ops") or (), load="optional")
    else:
        shapes, custom_ops = _onnx_shapes(model_path, batch)
        library = plugin_library.resolve(plugins, custom_ops=custom_ops, load="optional")

    workdir = tempfile.mkdtemp(prefix="edgeattn-trtexec-")
    try:
        export_times = os.path.join(workdir, "times.json")
        args = flags.bench_command(path, version, os.path.abspath(model_path), kind == "onnx", export_times,
                                   shapes=shapes, plugin_library=library["path"] if library else None,
                                   warmup_s=warmup_s, duration_s=duration_s, iterations=iterations,
                                   cuda_graph=cuda_graph,
                                   export_profile=os.path.join(workdir, "profile.json") if layers_top else None,
                                   export_layer_info=os.path.join(workdir, "layers.json") if layers_top else None)
        if timeout is None:
            expected = warmup_s + (duration_s if duration_s is not None else iterations * 1.0)
            timeout = int(math.ceil(expected)) + (BUILD_ALLOWANCE_S if kind == "onnx" else LOAD_ALLOWANCE_S)
        if progress is not None:
            progress(0.0, "running trtexec {} ({})".format(version, "build + timing" if kind == "onnx" else
                                                            "timing"))
        result, text = run_for_export(args, version, model_path, library, export_times, "--exportTimes", timeout)
        end_unix = time.time()
        layers = _layer_times(workdir, manifest, layers_top) if layers_top else None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    run_version = version_from_output(result.output) or version
    warmup_ms = warmup_s * 1000.0 if tuple(version) >= (8, 4) else math.ceil(warmup_s * 1000.0)
    records = timed_iterations(parse_times(text), run_version, warmup_ms)
    if not records:
        raise EdgeAttnError("trtexec's --exportTimes file has no iterations after the warm-up")
    series = trace_samples(records)
    span_s = series["span_ms"] / 1000.0 if series["span_ms"] > 0 else sum(series["latency_ms"]) / 1000.0
    if progress is not None:
        progress(1.0, "{} iterations in {:.2f} s".format(len(records), span_s))
    timed = TimedRun(series["latency_ms"], series["compute_ms"], end_unix - span_s, end_unix, span_s, None,
                     float(warmup_s))
    device = parse_device(result.stdout)
    precision = ((manifest or {}).get("precision") or {}).get("precision") if kind == "engine" else "fp32"
    return {
        "timed": timed,
        "provider": "trtexec {}".format(run_version),
        "precision": precision,
        "threads": None,
        "device": {"name": device["name"], "compute_capability": device["compute_capability"],
                   "source": "trtexec"} if device else None,
        "inputs": {name: list(dims) for name, dims in shapes} if shapes else None,
        "window_source": "trtexec exit time minus trace walltime (approximate)",
        "layers": layers,
        "extra": {"trtexec": {"path": path, "version": str(run_version), "command": args,
                              "enqueue_ms_mean": (sum(series["enqueue_ms"]) / len(series["enqueue_ms"])
                                                  if series["enqueue_ms"] else None),
                              "plugins": library}},
    }
