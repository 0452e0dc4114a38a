"""``edgeattn ops-bench``: time each attention operator's core on this CPU against softmax attention (SDPA)."""
import click

from ..errors import EdgeAttnError, MissingDependencyError


def _token_list(ctx, param, value):
    try:
        tokens = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter("expected comma-separated integers, e.g. 3136,9216,16384, got {!r}".format(value))
    if not tokens or min(tokens) < 1:
        raise click.BadParameter("token counts must be positive integers, got {!r}".format(value))
    return tokens


def _names(value):
    return None if value is None else [part.strip() for part in value.split(",") if part.strip()]


def format_table(record):
    """The human-readable table: op, N, ms, speedup vs SDPA, GFLOP/s."""
    header = "{:<18} {:>7} {:>11} {:>11} {:>10}".format("op", "N", "ms (min)", "vs SDPA", "GFLOP/s")
    lines = [header, "-" * len(header)]
    for row in record["results"]:
        if "skipped" in row:
            lines.append("{:<18} {:>7}   skipped: {}".format(row["op"], row["tokens"], row["skipped"]))
            continue
        speedup = "" if row["speedup_vs_sdpa"] is None else "{:.2f}x".format(row["speedup_vs_sdpa"])
        lines.append("{:<18} {:>7} {:>11.3f} {:>11} {:>10.1f}".format(row["op"], row["tokens"], row["ms"], speedup,
                                                                      row["gflops"]))
    gemm = record["context"].get("gemm")
    if gemm:
        lines.append("square GEMM {0[size]}^3 FP32: {0[gflops]:.1f} GFLOP/s ({0[min_ms]:.2f} ms)".format(gemm))
    lines.append("FLOPs: " + record["flop_convention"])
    return "\n".join(lines)


@click.command(name="ops-bench")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Also write the results as JSON to this file (written atomically).")
@click.option("--tokens", default="3136,9216,16384", show_default=True, callback=_token_list,
              help="Comma-separated token counts N (maps are the most square H x W with H*W = N).")
@click.option("--heads", type=click.IntRange(min=1), default=2, show_default=True, help="Attention heads.")
@click.option("--head-dim", type=click.IntRange(min=1), default=32, show_default=True, help="Per-head width d.")
@click.option("--window-size", type=click.IntRange(min=1), default=7, show_default=True,
              help="Window (blockify/ELFATT), stripe and region size.")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="torch CPU threads for the run (default: torch's default).")
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True,
              help="Minimum timed repeats per operator (after one warm-up call).")
@click.option("--min-time", type=click.FloatRange(min=0.0), default=0.2, show_default=True,
              help="Keep repeating each operator until this many seconds have passed (fast ops get more samples).")
@click.option("--ops", "ops", default=None,
              help="Comma-separated subset of operators (sdpa is always included as the baseline).")
def ops_bench(json_path, tokens, heads, head_dim, window_size, threads, repeats, min_time, ops):
    """Time each attention operator's core on this CPU against softmax attention (SDPA).

    Runs the reference cores of edgeattn.ops (batch 1, FP32) at each token count, prints a table (op, N, min ms,
    speedup vs SDPA at the same N, GEMM GFLOP/s) plus a measured square-GEMM rate, and with --json writes the
    full record (run context: torch version, threads, CPU model).
    """
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("torch", "ops-bench", "Install the export extra: pip install -e '.[export]'.")
    from .._io import write_json
    from ..ops.benchmark import OPS, load_warning, measure_gemm, run_context, run_ops_bench

    ops = _names(ops)
    unknown = sorted(set(ops or ()) - set(OPS))
    if unknown:
        raise click.BadParameter("unknown operator(s) {}; choose from {}".format(", ".join(unknown), ", ".join(OPS)),
                                 param_hint="'--ops'")
    warning = load_warning()
    if warning:
        click.echo("ops-bench: warning: " + warning, err=True)
    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)

    from ..progress import Progress

    try:
        # the operator being timed as a live line on a terminal, nothing in pipes (docs/outputs.md)
        with Progress("ops-bench") as shown:
            def progress(done, total, message):
                shown.update(message, completed=done, total=total)

            record = run_ops_bench(tokens, heads=heads, head_dim=head_dim, window_size=window_size,
                                   repeats=repeats, min_time_s=min_time, ops=ops or OPS, progress=progress)
            shown.update("square GEMM")
            context = run_context()
            context["gemm"] = measure_gemm(min_time_s=min_time)
            record["context"] = context
    except MemoryError:
        raise EdgeAttnError("ops-bench ran out of memory; use smaller --tokens")
    finally:
        torch.set_num_threads(previous_threads)
    click.echo(format_table(record))
    if json_path:
        write_json(json_path, record)
        click.echo("wrote {}".format(json_path), err=True)
