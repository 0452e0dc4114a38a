"""``edgeattn sweep``: benchmark models across a board's power modes (or the host CPU's thread budgets)."""
import time

import click

from ..errors import EdgeAttnError
from .options import allow_engine_host_code_option, backend_option, plugin_mode_option


@click.command(name="sweep")
@click.argument("models", nargs=-1)
@click.option("--profile", "profile", default="auto", show_default=True,
              help="Board profile name (see `edgeattn profiles`), or auto: the detected Jetson, else host-cpu.")
@click.option("--modes", default="all", show_default=True,
              help="Power mode IDs to visit (comma list, as the board numbers them), or all. On host-cpu the IDs "
                   "are thread counts.")
@click.option("--precision", "precisions", default="fp32", show_default=True,
              help="Comma list of fp32, fp16, int8 (int8 builds MODEL.int8.onnx from `edgeattn quantize`, found "
                   "beside MODEL.onnx). ONNX models on a Jetson get one engine per precision; ONNX Runtime "
                   "on the CPU runs fp32, and int8 as the Q/DQ file itself.")
@backend_option(("auto", "onnxruntime", "tensorrt", "trtexec"), help="Benchmark backend (passed to edgeattn bench).")
@click.option("--clocks", type=click.Choice(["default", "max"]), default="default", show_default=True,
              help="max: lock clocks at each mode's maxima with jetson_clocks (stored first, restored after).")
@click.option("--settle-s", type=float, default=30.0, show_default=True,
              help="After a mode switch, wait until GPU temperature and clock are stable, at most this long "
                   "(0: no wait; without tegrastats the full time; host-cpu switches nothing and never waits).")
@click.option("--repeats", type=int, default=3, show_default=True, help="Measurements per model, mode, precision.")
@click.option("--duration-s", type=float, default=10.0, show_default=True, help="Timed phase of each measurement.")
@click.option("--warmup-s", type=float, default=2.0, show_default=True, help="Warm-up before each measurement.")
@click.option("--batch", type=int, default=1, show_default=True, help="Batch size.")
@click.option("--power-source", type=click.Choice(["auto", "tegrastats", "ina3221", "none"]), default="auto",
              show_default=True, help="Where power comes from. auto: INA3221 sysfs rails when found, else "
                                      "tegrastats (which also gives GPU clock and temperatures whenever installed); "
                                      "none: no sampling at all (no power, no throttling flags).")
@click.option("--interval-ms", type=click.IntRange(min=500), default=500, show_default=True,
              help="Power/telemetry sampling interval (>= 500 ms: the INA3221 monitors refresh every ~430 ms).")
@click.option("--temp-limit-c", type=float, default=85.0, show_default=True,
              help="Flag a measurement as throttled when a chip sensor reaches this temperature (a threshold of "
                   "this tool, not a board fact).")
@click.option("--allow-reboot", is_flag=True,
              help="Include modes that need a reboot: save a resume file, reboot, then continue with --resume.")
@allow_engine_host_code_option(
              help="Also benchmark version-compatible engines, which run host code embedded in them (as "
                   "`edgeattn bench --allow-engine-host-code`; give it again with --resume).")
@plugin_mode_option(
              help="For ONNX models built into engines here: run custom ops as plugins (on), as TensorRT's own "
                   "fusion of their standard-op form (off), or time both per op family and keep the faster (auto). "
                   "Default: auto where candidate engines can be timed on this machine, else on (as `edgeattn "
                   "build`).")
@click.option("--layers", is_flag=True,
              help="Also time every layer of each engine in a separate profiling run (`edgeattn bench --layers`); "
                   "`edgeattn report` then shows each model's per-layer breakdown.")
@click.option("--resume", is_flag=True, help="Continue the sweep in -o DIR (after a reboot, failure or Ctrl-C).")
@click.option("--overwrite", is_flag=True,
              help="Replace a finished sweep in -o DIR (refused for one whose board state was never restored).")
@click.option("-o", "--output", "out_dir", default=None,
              help="Output directory (default runs/sweep-YYYYmmdd-HHMMSS; required with --resume).")
@click.option("--preset", default=None, metavar="NAME",
              help="A paper table instead of MODELS: elfatt-table8 (AGX Orin, batch 128) or elfatt-table9 (Nano, "
                   "batch 1), the 7 models, batch, precisions and power mode the paper used (options given "
                   "explicitly win); missing ONNX files are exported into --models-dir first (needs torch). "
                   "`edgeattn report` then prints the paper's numbers beside ours.")
@click.option("--models-dir", default="runs/models", show_default=True, metavar="DIR",
              help="Where --preset keeps its ONNX files (DIR/batch<N>/<model>.onnx).")
@click.pass_context
def sweep(ctx, models, profile, modes, precisions, backend, clocks, settle_s, repeats, duration_s, warmup_s, batch,
          power_source, interval_ms, temp_limit_c, allow_reboot, allow_engine_host_code, plugin_mode, layers, resume,
          overwrite, out_dir, preset, models_dir):
    """Benchmark MODELS (ONNX files or TensorRT engines) in every power mode of the board.

    For each mode: switch with nvpmodel (skipping modes that need a reboot unless --allow-reboot), optionally lock
    clocks, settle, then benchmark each model while sampling power. Each measurement is appended to
    DIR/rows.jsonl as it finishes; DIR/results.json and DIR/results.csv are written from it after every mode
    and when the sweep ends or stops (--resume reads rows.jsonl). The original power mode and clocks are
    restored on success, error, Ctrl-C and SIGTERM. Then `edgeattn report DIR` makes tables and plots.
    """
    from ..sweep.runner import SweepInterrupted, run_sweep

    if resume and overwrite:
        raise EdgeAttnError("--resume and --overwrite exclude each other")
    if resume and not out_dir:
        raise EdgeAttnError("--resume needs -o DIR (the directory of the sweep to continue)")
    out_dir = out_dir or "runs/sweep-{}".format(time.strftime("%Y%m%d-%H%M%S"))
    if preset or overwrite:
        from ..sweep import presets

        models, batch, precisions, modes = presets.prepare_sweep(
            preset, models, out_dir, profile, models_dir, batch, precisions, modes,
            presets.given_options(ctx, ("batch", "precisions", "modes")), resume=resume, overwrite=overwrite,
            echo=lambda line: click.echo(line, err=True))
    if not models and not resume:
        raise EdgeAttnError("give at least one model (ONNX file or TensorRT engine)")
    from ..progress import Progress

    try:
        # per-measurement counters and ETA as a live bar on a terminal (nothing in pipes); events stay as lines
        with Progress("edgeattn sweep") as progress:
            outcome = run_sweep(
                list(models), profile=profile, modes=modes, precisions=precisions, backend=backend, clocks=clocks,
                settle_s=settle_s, repeats=repeats, allow_reboot=allow_reboot, resume=resume, out_dir=out_dir,
                duration_s=duration_s, warmup_s=warmup_s, batch=batch, power_source=power_source,
                interval_ms=interval_ms, temp_limit_c=temp_limit_c, overwrite=overwrite,
                allow_engine_host_code=allow_engine_host_code, plugin_mode=plugin_mode, layers=layers,
                echo=progress.lines)
    except SweepInterrupted as interrupted:
        ctx.exit(interrupted.exit_code)
        return
    if outcome.status == "rebooting":
        click.echo(outcome.message)
        return
    click.echo("{} result row(s) in {}/results.csv and results.json".format(outcome.row_count, outcome.out_dir))
    for entry in outcome.skipped:
        click.echo("skipped mode {} {}: {}".format(entry["mode_id"], entry["mode_name"], entry["reason"]))
    click.echo("next: edgeattn report {}".format(outcome.out_dir))
