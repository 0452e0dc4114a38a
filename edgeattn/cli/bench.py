"""``edgeattn bench``: latency distribution and throughput of an engine or ONNX file."""
import json

import click

from ..errors import EdgeAttnError
from .options import allow_engine_host_code_option, backend_option, plugin_lib_option, trtexec_option

_PROVIDERS = ("auto", "cpu", "cuda", "tensorrt")


def _format_summary(result, json_path):
    stats = result["latency_ms"]
    lines = [
        "{name} ({kind}) on {backend} [{provider}], batch {batch}{threads}{precision}".format(
            name=result["model"]["name"], kind=result["model"]["kind"], backend=result["backend"],
            provider=result["provider"], batch=result["batch"],
            threads=", threads {}".format(result["threads"]) if result["threads"] else "",
            precision=", {}".format(result["precision"]) if result["precision"] else ""),
        "  iterations   {} in {:.2f} s (warm-up {:g} s)".format(result["iterations"], result["duration_s"],
                                                                result["warmup_s"]),
        "  throughput   {:.2f} items/s".format(result["throughput_items_per_s"]),
    ]
    from ..bench.stats import format_stats

    lines.append("  end-to-end   " + format_stats(stats))
    if result["gpu_compute_ms"]:
        lines.append("  GPU compute  " + format_stats(result["gpu_compute_ms"]))
    if result.get("layers"):
        from ..tensorrt.layers import format_layer_times

        lines.extend(format_layer_times(result["layers"]))
    if json_path and json_path != "-":
        lines.append("  wrote {}".format(json_path))
    return "\n".join(lines)


@click.command(name="bench")
@click.argument("model", metavar="MODEL")
@backend_option(("auto", "onnxruntime", "tensorrt", "trtexec"),
                help="auto: ONNX Runtime for .onnx files; TensorRT Python (else trtexec) for engines.")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True,
              help="Batch size (the dynamic first input dimension; engines: within the build profile).")
@click.option("--warmup-s", type=float, default=1.0, show_default=True, help="Warm-up seconds, not recorded.")
@click.option("--duration-s", type=float, default=None,
              help="Timed seconds (default 3; at least 10 iterations). Exclusive with --iterations.")
@click.option("--iterations", type=click.IntRange(min=1), default=None, help="Exact number of timed iterations.")
@click.option("--cuda-graph/--no-cuda-graph", default=True, show_default=True,
              help="Launch the engine through a CUDA graph (TensorRT and trtexec backends).")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="ONNX Runtime intra-op threads (default: ONNX Runtime's choice).")
@click.option("--provider", type=click.Choice(_PROVIDERS), default="auto", show_default=True,
              help="ONNX Runtime execution provider (auto: CUDA if available, else CPU).")
@plugin_lib_option(help="Plugin library for engines with edgeattn ops (default: $EDGEATTN_PLUGIN_LIB, then the "
                        "package and build folders; refused unless it is the one the manifest names).",
                   refuse_old_spelling=True)
@trtexec_option()
@click.option("--json", "json_path", metavar="OUT", default=None,
              help="Write the full result (every iteration, run context) as JSON to OUT ('-' for stdout).")
@allow_engine_host_code_option()
@click.option("--layers", is_flag=True,
              help="Also time every layer in a separate profiling run (TensorRT's IProfiler; trtexec "
                   "--exportProfile --separateProfileRun): the slowest layers and each group's share of the time "
                   "(plugins, attention, GEMM/conv, reformat, other), in the JSON under \"layers\".")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, metavar="N",
              help="--layers: how many of the slowest layers to keep.")
@click.option("--quiet", is_flag=True, help="No progress on stderr, even on a terminal (in pipes there is none).")
def bench(model, backend, batch, warmup_s, duration_s, iterations, cuda_graph, threads, provider, plugin_lib,
          trtexec_path, json_path, allow_engine_host_code, layers, top, quiet):
    """Benchmark MODEL (a TensorRT engine or an ONNX file) and report its latency distribution.

    Every iteration is recorded: ONNX Runtime with perf_counter around session.run, TensorRT with CUDA events
    around each enqueue, trtexec through its --exportTimes JSON. Reports throughput (items/s), mean, min, max,
    p50/p90/p95/p99, std and CoV, GPU compute apart from end-to-end where the backend separates them, and the
    run context (host, CPU, device, versions, Jetson power mode and clocks). Engines are checked against their
    manifest (the engine file name plus .json) before loading.
    """
    from ..bench import run_benchmark
    from ..progress import Progress

    if duration_s is not None and iterations is not None:
        raise EdgeAttnError("give --duration-s or --iterations, not both")
    if duration_s is not None and not duration_s > 0:
        raise EdgeAttnError("--duration-s must be > 0, got {:g}".format(duration_s))
    if warmup_s < 0:
        raise EdgeAttnError("--warmup-s must be >= 0, got {:g}".format(warmup_s))
    if json_path and json_path != "-":
        from .._io import check_output_path

        check_output_path(json_path)  # before minutes of benchmarking, not after
    with Progress("edgeattn bench", show=not quiet) as progress:  # a live bar on a terminal, nothing in pipes
        result = run_benchmark(model, backend=backend, batch=batch, warmup_s=warmup_s, duration_s=duration_s,
                               iterations=iterations, threads=threads, cuda_graph=cuda_graph, plugins=plugin_lib,
                               progress=progress.fraction, provider=provider,
                               trtexec=trtexec_path, allow_engine_host_code=allow_engine_host_code,
                               layers_top=top if layers else None)
    if json_path == "-":
        click.echo(json.dumps(result, indent=2))
        return
    if json_path:
        from .._io import write_json

        write_json(json_path, result)
    click.echo(_format_summary(result, json_path))
