"""``edgeattn build``: a TensorRT engine and its manifest from an ONNX file."""
import click


def _format_summary(engine_path, manifest):
    from ..engine.manifest import manifest_path

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
        lines.append("  plugins    {}".format(manifest["plugins"]["path"]))
    for name, entry in manifest["profiles"][0]["inputs"].items():
        lines.append("  profile    {}: {} / {} / {}".format(name, *("x".join(str(d) for d in entry[k])
                                                             for k in ("min", "opt", "max"))))
    lines.append("  manifest   {}".format(manifest_path(engine_path)))
    return "\n".join(lines)


@click.command(name="build")
@click.argument("model", metavar="MODEL.onnx")
@click.option("-o", "--output", metavar="ENGINE", default=None,
              help="Engine file (default: MODEL.engine, or MODEL.fp16.engine for --precision fp16).")
@click.option("--precision", type=click.Choice(("fp32", "fp16")), default="fp32", show_default=True,
              help="fp16 keeps LayerNorm, softmax and normaliser reductions in FP32 (one policy for every "
                   "TensorRT version).")
@click.option("--plugins", metavar="LIB", default=None,
              help="edgeattn plugin library (default: $EDGEATTN_PLUGIN_LIB, then the package and build folders).")
@click.option("--shapes", multiple=True, metavar="NAME:MIN,OPT,MAX",
              help="Optimization profile for one input, e.g. input:1x3x224x224,4x3x224x224,8x3x224x224 "
                   "(repeatable).")
@click.option("--backend", type=click.Choice(("auto", "tensorrt", "trtexec")), default="auto", show_default=True,
              help="auto: TensorRT's Python bindings if importable, else trtexec.")
@click.option("--workspace", "workspace_mb", type=click.IntRange(min=1), default=None, metavar="MB",
              help="Builder workspace limit in MiB.")
@click.option("--timing-cache", metavar="FILE", default=None, help="Read and update this timing cache.")
@click.option("--version-compatible", is_flag=True,
              help="Engine that runs on newer TensorRT of the same major version (>= 8.6; embeds the plugin "
                   "library).")
@click.option("--trtexec", "trtexec_path", metavar="PATH", default=None,
              help="trtexec executable (default: $EDGEATTN_TRTEXEC, PATH, /usr/src/tensorrt/bin/trtexec).")
@click.option("--timeout", "timeout_s", type=click.IntRange(min=1), default=None, metavar="S",
              help="Give up a trtexec build after S seconds (default 7200).")
def build(model, output, precision, plugins, shapes, backend, workspace_mb, timing_cache, version_compatible,
          trtexec_path, timeout_s):
    """Build a TensorRT engine from MODEL.onnx and write a manifest (ENGINE.json) beside it.

    Loads our plugin library and NVIDIA's before parsing, hands TensorRT the ONNX variant its version needs
    (local functions removed for TensorRT < 10.7, FP16 with casts for strongly typed TensorRT >= 11), and records
    the TensorRT version, device, plugin library (sha256, creators), precision policy and profiles in the manifest
    so `edgeattn bench` can check an engine before loading it. The engine is written atomically.
    """
    from ..engine import build_engine, default_engine_path

    engine_path = output or default_engine_path(model, precision)

    def progress(message):
        click.echo("edgeattn build: {}".format(message), err=True)

    manifest = build_engine(model, engine_path, precision=precision, plugins=plugins, shapes=shapes,
                            backend=backend, workspace_mb=workspace_mb, timing_cache=timing_cache,
                            version_compatible=version_compatible, trtexec=trtexec_path, timeout=timeout_s,
                            progress=progress)
    click.echo(_format_summary(engine_path, manifest))
