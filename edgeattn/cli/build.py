"""``edgeattn build``: a TensorRT engine and its manifest from an ONNX file."""
import contextlib

import click

from .options import backend_option, plugin_lib_option, plugin_mode_option, trtexec_option


def _format_summary(engine_path, manifest):
    from ..tensorrt.manifest import manifest_path

    device = manifest.get("device") or {}
    precision = manifest["precision"]
    lines = [
        "built {} ({:.1f} MiB) in {:.1f} s".format(engine_path, manifest["engine"]["size_bytes"] / 2.0 ** 20,
                                                   manifest["build_seconds"]),
        "  TensorRT {} via {}{}".format(manifest["tensorrt"]["version"], manifest["tensorrt"]["builder"],
                                        ", version-compatible" if manifest["tensorrt"]["version_compatible"]
                                        else ""),
        "  device     {} (compute capability {})".format(device.get("name"), device.get("compute_capability")),
        "  precision  {} ({}){}".format(
            precision["precision"], precision["typing"],
            "; FP32 islands: {}".format(", ".join("{} {}".format(n, k) for k, n in
                                                 sorted(precision.get("fp32_islands", {}).items())) or "none")
            if precision["precision"] == "fp16" else ""),
        "  ONNX       {} ({})".format(manifest["source_onnx"]["path"], manifest["source_onnx"]["variant"]),
    ]
    if manifest.get("plugins"):
        lines.append("  plugins    {} (sha256 {}...)".format(manifest["plugins"]["name"],
                                                         manifest["plugins"]["sha256"][:12]))
    lines.extend(_plugin_lines(manifest.get("plugin_selection")))
    for name, entry in manifest["profiles"][0]["inputs"].items():
        lines.append("  profile    {}: {} / {} / {}".format(name, *("x".join(str(d) for d in entry[k])
                                                             for k in ("min", "opt", "max"))))
    lines.append("  manifest   {}".format(manifest_path(engine_path)))
    return "\n".join(lines)


def _plugin_lines(selection):
    if not selection or not selection.get("custom_ops"):
        return []
    lines = ["  plugin ops {} ({}: {})".format(", ".join(selection["plugin_ops"]) or "none", selection["mode"],
                                               selection["reason"])]
    if selection["standard_ops"]:
        lines.append("  std ops    {}".format(", ".join(selection["standard_ops"])))
    for candidate in selection.get("candidates") or ():
        lines.append("  candidate  {:<9} {}: {}".format(candidate["status"], candidate["name"], candidate["reason"]))
    return lines


@click.command(name="build")
@click.argument("model", metavar="MODEL.onnx")
@click.option("-o", "--output", metavar="ENGINE", default=None,
              help="Engine file (default: MODEL.engine, or MODEL.fp16.engine for --precision fp16).")
@click.option("--precision", type=click.Choice(("fp32", "fp16", "int8", "auto")), default="fp32", show_default=True,
              help="fp16 keeps LayerNorm, softmax and normaliser reductions in FP32 (one policy for every "
                   "TensorRT version); int8 builds a Q/DQ model from `edgeattn quantize` (explicit quantization: "
                   "INT8 where the Q/DQ pairs are, the fp16 policy elsewhere, plugins in FP16/FP32); refused on a "
                   "GPU without INT8 (Jetson Nano, TX2); auto builds FP16 from MODEL.onnx and INT8 from "
                   "--int8-model, times both like --plugins auto and keeps INT8 only where it is faster and its "
                   "top-1 agreement with MODEL.onnx on --images is at least --min-top1.")
@click.option("--int8-model", metavar="MODEL.int8.onnx", default=None,
              help="--precision auto: the Q/DQ model (default: MODEL.int8.onnx beside MODEL.onnx).")
@click.option("--images", metavar="DIR|skimage", default="skimage", show_default=True,
              help="--precision auto: the pictures both candidates are compared with MODEL.onnx on (use the "
                   "calibration pictures).")
@click.option("--min-top1", type=click.FloatRange(0, 1), default=0.99, show_default=True,
              help="--precision auto: the least top-1 agreement with MODEL.onnx that INT8 must keep.")
@plugin_mode_option()
@plugin_lib_option()
@click.option("--select-warmup-s", type=click.FloatRange(min=0), default=1.0, show_default=True, metavar="S",
              help="--plugins auto: warm-up seconds before timing each candidate.")
@click.option("--select-duration-s", type=click.FloatRange(min=0, min_open=True), default=3.0, show_default=True,
              metavar="S", help="--plugins auto: timed seconds per candidate.")
@click.option("--shapes", multiple=True, metavar="NAME:MIN,OPT,MAX",
              help="Optimization profile for one input, e.g. input:1x3x224x224,4x3x224x224,8x3x224x224 "
                   "(repeatable).")
@backend_option(("auto", "tensorrt", "trtexec"), help="auto: TensorRT's Python bindings if importable, else trtexec.")
@click.option("--workspace", "workspace_mb", type=click.IntRange(min=1), default=None, metavar="MB",
              help="Builder workspace limit in MiB.")
@click.option("--timing-cache", metavar="FILE", default=None, help="Read and update this timing cache.")
@click.option("--version-compatible", is_flag=True,
              help="Engine that runs on newer TensorRT of the same major version (>= 8.6; embeds the plugin "
                   "library).")
@trtexec_option()
@click.option("--profiling-verbosity", type=click.Choice(("detailed", "layer_names_only", "none")), default=None,
              help="What the engine records about its layers (TensorRT >= 8.2; trtexec --profilingVerbosity): "
                   "detailed keeps every layer's type, precision, tactic and tensors for `edgeattn inspect ENGINE`; "
                   "default: TensorRT's (layer_names_only).")
@click.option("--timeout", "timeout_s", type=click.IntRange(min=1), default=None, metavar="S",
              help="Give up a trtexec build after S seconds (default 7200).")
@click.option("--check", is_flag=True,
              help="Then compare the engine with MODEL.onnx on ONNX Runtime CPU (`edgeattn compare`, 8 seeded "
                   "inputs, atol = rtol = 0.01 for fp32, 0.05 for fp16) and record the result in the manifest; "
                   "exit 1 when they disagree (engine and manifest are kept), naming the first divergent tensor "
                   "(`edgeattn compare --layers`) where TensorRT's Python API can rebuild the engine with every "
                   "tensor marked.")
def build(model, output, precision, plugin_mode, plugin_lib, select_warmup_s, select_duration_s, shapes, backend,
          workspace_mb, timing_cache, version_compatible, trtexec_path, profiling_verbosity, timeout_s, check,
          int8_model, images, min_top1):
    """Build a TensorRT engine from MODEL.onnx and write a manifest (ENGINE.json) beside it.

    Loads our plugin library and NVIDIA's before parsing, hands TensorRT the ONNX variant its version needs
    (local functions removed for TensorRT < 10.7, FP16 with casts for strongly typed TensorRT >= 11), and records
    the TensorRT version, device, plugin library (sha256, creators), precision policy and profiles in the manifest
    so `edgeattn bench` can check an engine before loading it. The engine is written atomically.

    With --plugins auto every candidate (which custom ops run as plugins, and its latency statistics) and why
    it was chosen or rejected are recorded under "plugin_selection" in the manifest; with --precision auto both
    precision candidates, their latencies and agreement and why one won under "precision_selection".
    """
    from ..engine import build_engine, default_engine_path

    engine_path = output or default_engine_path(model, precision)
    from .._io import check_output_path

    for destination in (engine_path, engine_path + ".json"):  # before the build, not after it
        check_output_path(destination)

    from ..progress import Progress

    from .._io import outputs_now

    # With --check the engine is published before it is run, and kept when the check then fails.
    outputs = outputs_now() if check else contextlib.nullcontext()
    with outputs, Progress("edgeattn build") as progress:  # Python 3.8: no parenthesised context managers
        manifest = build_engine(model, engine_path, precision=precision, plugins=plugin_lib, shapes=shapes,
                                backend=backend, workspace_mb=workspace_mb, timing_cache=timing_cache,
                                version_compatible=version_compatible, trtexec=trtexec_path, timeout=timeout_s,
                                progress=progress.step, plugin_mode=plugin_mode,
                                selection_warmup_s=select_warmup_s, selection_duration_s=select_duration_s,
                                profiling_verbosity=profiling_verbosity, int8_onnx=int8_model, images=images,
                                min_top1=min_top1)
    click.echo(_format_summary(engine_path, manifest))
    selection = manifest.get("precision_selection")
    if selection:
        for record in selection["candidates"]:
            click.echo("  candidate  {}: {}".format(record["precision"], record["error"] or
                                                     "median {:.4g} ms, top-1 agreement {}".format(
                                                         record["p50_ms"], record["top1"])))
        click.echo("  selected   {} ({})".format(selection["selected"], selection["reason"]))
    if check:
        from ..compare import check_engine, format_check
        from ..engine import build_marked_engine

        report = check_engine(engine_path, model, precision=manifest["precision"]["precision"], backend=backend,
                              plugins=plugin_lib, trtexec=trtexec_path, marked_build=build_marked_engine,
                              progress=lambda message: click.echo("edgeattn build: check: {}".format(message),
                                                                  err=True))
        click.echo("\n".join(format_check(report)))
        if not report["passed"]:
            raise SystemExit(1)
