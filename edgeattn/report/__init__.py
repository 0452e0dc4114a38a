"""``build_report(DIR)``: markdown and HTML tables plus PNG/SVG plots from a sweep's results.json, and
``build_ops_report(FILE)``: the linear-scaling plot of an ops benchmark record.

Plots (drawn by :mod:`.plots` with matplotlib, the ``edgeattn[report]`` extra), one set per precision: the ELFATT
paper's Fig. 4 view (throughput and energy per item across the power modes, one line per model) and the speedup
chart (vs the explicit baseline when given, else the paper's slowest-model ratio; the title says which), each with
error bars from the repeats. Everything under DIR is written atomically and as one group (report.md, report.html,
plots/*.png|svg): a failure leaves the previous report as it was. The Markdown report embeds the PNGs, so a
terminal-only workflow can open them beside it; the HTML report shows the SVGs.
"""
import os
import time

from .. import filekind
from .._io import all_or_nothing, atomic_write, read_json
from .._version import __version__
from ..errors import EdgeAttnError
from .page import Page, escape, write_figure
from .tables import load_sweep_tables, markdown_table, table_sections

PLOT_DIR = "plots"


def _context_lines(data):
    sweep = data.get("sweep") or {}
    options = sweep.get("options") or {}
    board = sweep.get("board") or {}
    lines = ["profile: {} ({})".format(sweep.get("profile"), sweep.get("profile_kind"))]
    if board:
        lines.append("board: {} | module {} | L4T {} | JetPack {}".format(
            board.get("model"), board.get("module_id"), board.get("l4t_release"), board.get("jetpack")))
    lines.append("clocks: {} | repeats: {} | batch: {} | timed phase: {} s | backend: {}".format(
        options.get("clocks"), options.get("repeats"), options.get("batch"), options.get("duration_s"),
        options.get("backend")))
    for note in data.get("notes") or []:
        lines.append("note: " + note)
    lines.append("sweep status: {}".format(data.get("status")))
    return lines


def _figures(tables, precision, baseline):
    """(file stem, title, matplotlib Figure) of each plot of one precision."""
    from . import plots

    throughput = plots.throughput_energy_figure(tables, precision)
    speedup = plots.speedup_figure(tables, precision, baseline if baseline in tables.models_in(precision) else None)
    return [("throughput_energy_{}".format(precision), throughput.get_label(), throughput),
            ("speedup_vs_mode_{}".format(precision), speedup.get_label(), speedup)]


def _load_tables(out_dir, baseline):
    data, rows, tables = load_sweep_tables(out_dir)
    if baseline and baseline not in tables.models:
        raise EdgeAttnError("--baseline {!r} is not a model of this sweep; models: {}".format(
            baseline, ", ".join(tables.models)))
    return data, rows, tables


def summary_markdown(out_dir, baseline=None):
    """The headline tables for a terminal: per precision, throughput and the speedup (vs ``baseline`` when given,
    else the paper's ratio vs the slowest model per mode)."""
    _, _, tables = _load_tables(out_dir, baseline)
    lines = []
    for precision in tables.precisions:
        sections = table_sections(tables, precision, baseline)
        for title, header, rows_, note in (sections[0], sections[1]):
            lines += ["{}: {}".format(precision, title), "", markdown_table(header, rows_), ""]
            if note:
                lines += [note, ""]
    return "\n".join(lines).rstrip("\n")


def build_report(out_dir, baseline=None, html=True, plots=True):
    """Write report.md (and report.html, plots/) for the sweep in ``out_dir``; returns the written paths."""
    data, rows, tables = _load_tables(out_dir, baseline)
    if plots:
        from .plots import import_matplotlib

        import_matplotlib()  # a missing extra is reported before anything is written
    with all_or_nothing():
        return _write_report(out_dir, baseline, html, plots, data, rows, tables)


def layer_sections(rows):
    """(title, header, rows) per precision of the per-layer breakdown a ``sweep --layers`` recorded: each model and
    mode's time share per layer group and its slowest layer (the first repeat that has one)."""
    from ..tensorrt.layers import TIME_GROUPS

    seen = {}
    for row in rows:
        if row.get("layers"):
            seen.setdefault((row["precision"], row["model"], row["mode_name"]), row["layers"])
    sections = []
    for precision in sorted({key[0] for key in seen}, key=lambda p: (p != "fp32", p)):
        table = []
        for (p, model, mode), layers in seen.items():
            if p != precision:
                continue
            top = (layers.get("top") or [{}])[0]
            table.append([model, mode] + ["{:.1%}".format(layers["groups"][group]["share"]) for group in TIME_GROUPS]
                         + ["{} ({:.3f} ms)".format(top.get("name", "-"), top.get("average_ms") or 0.0)])
        header = ["model", "mode"] + [group.replace("_", "/") for group in TIME_GROUPS] + ["slowest layer"]
        sections.append(("{}: per-layer time share (sweep --layers, a separate profiling run)".format(precision),
                         header, table))
    return sections


def _write_report(out_dir, baseline, html, plots, data, rows, tables):
    from .plots import ERROR_BARS

    written = []
    page = Page(["# Sweep report", "", "Generated by edgeattn {} on {} from {}.".format(
        __version__, time.strftime("%Y-%m-%d %H:%M"), os.path.join(out_dir, "results.json")), ""],
        ["<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\"><title>edgeattn sweep report</title>",
         "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
         "td,th{border:1px solid #ccc;padding:4px 8px}td.num{text-align:right}"
         "h3{margin-top:1.5em}img{max-width:100%}</style></head><body>", "<h1>Sweep report</h1>", "<ul>"])
    markdown, html_parts = page.markdown, page.html
    markdown += ["- " + line for line in _context_lines(data)] + [""]
    html_parts += ["<li>{}</li>".format(escape(line)) for line in _context_lines(data)] + ["</ul>"]
    plot_dir = os.path.join(out_dir, PLOT_DIR)
    for precision in tables.precisions:
        page.heading(2, precision)
        for title, header, rows_, note in table_sections(tables, precision, baseline):
            page.table(3, title, header, rows_)
            if note:
                markdown += ["_{}_".format(note), ""]
                html_parts.append("<p><em>{}</em></p>".format(escape(note)))
        if plots:
            for stem, title, figure in _figures(tables, precision, baseline):
                written += page.plot(figure, plot_dir, stem, title)
            markdown += ["_Plots ({}): {}._".format(precision, ERROR_BARS), ""]
            html_parts.append("<p><em>{}</em></p>".format(escape(ERROR_BARS)))
    for title, header, rows_ in layer_sections(rows):
        page.table(2, title, header, rows_)
    throttled = [r for r in rows if r.get("throttled")]
    if throttled:
        markdown += ["† throttling was flagged in at least one repeat (see throttle_reasons in results.csv).", ""]
        html_parts.append("<p>† throttling was flagged in at least one repeat (see throttle_reasons in "
                          "results.csv).</p>")
    skipped = data.get("skipped") or []
    if skipped:
        markdown += ["## Skipped modes", ""] + ["- {} {}: {}".format(s["mode_id"], s["mode_name"], s["reason"])
                                                for s in skipped] + [""]
        html_parts += ["<h2>Skipped modes</h2>", "<ul>"] + [
            "<li>{} {}: {}</li>".format(s["mode_id"], escape(s["mode_name"]), escape(s["reason"]))
            for s in skipped] + ["</ul>"]
    return page.write(out_dir, html) + written


def load_ops_record(path):
    """An ops benchmark record (``edgeattn ops-bench --json`` or benchmarks/ops_cpu.py); one-line errors."""
    filekind.require(path, ("edgeattn-json", "json"), "a sweep directory or an operator benchmark's JSON",
                     command="`edgeattn report`")
    return read_json(path, "an ops benchmark record")


def ops_summary_markdown(record):
    """Median latency per operator and token count, as a markdown table."""
    from .plots import ops_series

    series = ops_series(record)
    tokens = sorted({p[0] for points in series.values() for p in points})
    rows = []
    for name, points in series.items():
        by_tokens = {p[0]: p[1] for p in points}
        rows.append([name] + ["{:.3f}".format(by_tokens[n]) if n in by_tokens else "-" for n in tokens])
    return markdown_table(["median ms"] + ["N={}".format(n) for n in tokens], rows)


def build_ops_report(json_path, out_dir=None):
    """Write ``<stem>.report.md`` and ``plots/<stem>_latency_vs_tokens.png|svg`` for an ops benchmark record
    (beside it, or in ``out_dir``); returns the written paths."""
    from .plots import OPS_ERROR_BARS, import_matplotlib, ops_scaling_figure, ops_series

    record = load_ops_record(json_path)
    table = ops_summary_markdown(record)  # rejects a file of another schema before anything is drawn
    import_matplotlib()
    out_dir = out_dir or os.path.dirname(os.path.abspath(json_path))
    stem = os.path.splitext(os.path.basename(json_path))[0]
    figure = ops_scaling_figure(record)
    plot_stem = "{}_latency_vs_tokens".format(stem)
    with all_or_nothing():
        written = write_figure(figure, os.path.join(out_dir, PLOT_DIR), plot_stem)
        markdown = ["# Operator scaling", "", "Generated by edgeattn {} from {} ({}).".format(
            __version__, json_path, record.get("schema")), "", table, "",
            "![{}]({}/{}.png)".format(figure.get_label(), PLOT_DIR, plot_stem), "",
            "_{}; log-log axes: a linear-time operator follows the slope-1 guide, softmax attention the slope-2 "
            "one._".format(OPS_ERROR_BARS if any(p[2] is not None for points in ops_series(record).values()
                                                 for p in points) else "points: median of the timed calls (no "
                           "quartiles recorded, so no error bars)"), ""]
        md_path = os.path.join(out_dir, stem + ".report.md")
        with atomic_write(md_path, "w") as handle:
            handle.write("\n".join(markdown))
    return [md_path] + written
