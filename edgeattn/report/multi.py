"""``edgeattn report DIR DIR... -o OUT``: one report over sweeps from several boards, JetPack releases or dates.

Each sweep's run context is read from its results.json: the board (its model name, or the host for a host-cpu
sweep), JetPack and L4T, the TensorRT version its benchmarks ran with, the date it started. A sweep's column label
names board and software, so two JetPack releases on one board stay apart; within a column the rows are
joined by power mode, precision and model. Two sweeps of the same board and software that both measure a model
in the same mode and precision are refused (which one is meant?), and so is a sweep that shares no model with
any other (nothing to compare).

Written to OUT as one group: report.md, report.html and plots/multi_<precision>.png|svg (throughput and, where
power was measured, energy per item, one line per model across every board and mode).
"""
import os
import time

from .._io import all_or_nothing
from .._version import __version__
from ..errors import EdgeAttnError
from .page import Page
from .tables import MISSING, load_sweep_tables, markdown_table

PLOT_DIR = "plots"


def sweep_context(out_dir, data, rows):
    """The run context of one sweep: ``{"dir", "board", "jetpack", "l4t", "tensorrt", "date", "profile",
    "backend", "status", "label"}``."""
    sweep = data.get("sweep") or {}
    board = sweep.get("board") or {}
    tensorrt = None
    for row in rows:
        versions = (row.get("bench_context") or {}).get("versions") or {}
        tensorrt = tensorrt or versions.get("tensorrt")
    name = board.get("model") or ("{} ({})".format(sweep.get("host"), sweep.get("profile"))
                                  if sweep.get("profile_kind") == "host-cpu" else sweep.get("profile"))
    started = sweep.get("started_unix")
    context = {"dir": out_dir, "board": name or "?", "jetpack": board.get("jetpack"),
               "l4t": board.get("l4t_release"), "tensorrt": tensorrt,
               "date": time.strftime("%Y-%m-%d", time.gmtime(started)) if started else None,
               "profile": sweep.get("profile"), "backend": (sweep.get("options") or {}).get("backend"),
               "status": data.get("status")}
    parts = [context["board"]]
    if context["jetpack"]:
        parts.append("JetPack {}".format(context["jetpack"]))
    if context["tensorrt"]:
        parts.append("TensorRT {}".format(context["tensorrt"]))
    context["label"] = ", ".join(parts)
    return context


def _identity(context):
    return (context["board"], context["jetpack"], context["l4t"], context["tensorrt"])


def load_sweeps(directories):
    """``[(context, SweepTables)]`` of the sweeps, checked to be joinable; one-line errors otherwise."""
    sweeps = []
    for out_dir in directories:
        data, rows, tables = load_sweep_tables(out_dir)
        sweeps.append((sweep_context(out_dir, data, rows), tables))
    if len(sweeps) < 2:
        raise EdgeAttnError("a report over several sweeps needs at least two sweep directories")
    for index, (context, tables) in enumerate(sweeps):
        for other, other_tables in sweeps[index + 1:]:
            if os.path.realpath(context["dir"]) == os.path.realpath(other["dir"]):
                raise EdgeAttnError("{} is given twice".format(context["dir"]))
            if _identity(context) != _identity(other):
                continue
            for precision, per_model in tables.cells.items():
                for model, per_mode in per_model.items():
                    for mode_id in per_mode:
                        if other_tables.cell(precision, model, mode_id) is not None:
                            mode = next(m.name for m in tables.modes if m.id == mode_id)
                            raise EdgeAttnError(
                                "{} and {} both measure {} {} in mode {} on {}: report them one at a time (or "
                                "drop one)".format(context["dir"], other["dir"], model, precision, mode,
                                                   context["label"]))
    for context, tables in sweeps:
        others = set()
        for other, other_tables in sweeps:
            if other is not context:
                others.update(other_tables.models)
        if not set(tables.models) & others:
            raise EdgeAttnError("{} ({}) shares no model with the other sweeps (its models: {}; theirs: {}): "
                                "nothing to compare".format(context["dir"], context["label"],
                                                            ", ".join(tables.models), ", ".join(sorted(others))))
    labels = [context["label"] for context, _ in sweeps]
    for context, _ in sweeps:
        if labels.count(context["label"]) > 1:
            context["label"] += " ({})".format(context["date"] or os.path.basename(os.path.normpath(
                context["dir"])))
    return sweeps


def columns(sweeps, precision):
    """``[(context, SweepTables, ModeColumn)]`` of every sweep and mode that measured ``precision``."""
    result = []
    for context, tables in sweeps:
        for mode in tables.modes_in(precision):
            result.append((context, tables, mode))
    return result


def models_of(sweeps, precision):
    models = []
    for _, tables in sweeps:
        for model in tables.models_in(precision):
            if model not in models:
                models.append(model)
    return models


def precisions_of(sweeps):
    found = []
    for _, tables in sweeps:
        for precision in tables.precisions:
            if precision not in found:
                found.append(precision)
    return sorted(found, key=lambda p: (p != "fp32", p))


def _value(cell, key, std_key, digits):
    if cell is None or getattr(cell, key) is None:
        return MISSING
    std = getattr(cell, std_key) if std_key else None
    text = "{:.{}f}".format(getattr(cell, key), digits)
    if std and cell.n > 1:
        text += " ± {:.{}f}".format(std, digits)
    return text + (" †" if cell.throttled else "")


def sections(sweeps, precision):
    """(title, header, rows) of the joined tables of one precision."""
    cols = columns(sweeps, precision)
    header = ["model"] + ["{} · {}".format(context["label"], mode.name) for context, _, mode in cols]
    result = []
    for title, key, std_key, digits in (("Throughput (items/s, mean ± std over repeats)", "fps", "fps_std", 1),
                                        ("Energy per item (J)", "energy_j", "energy_std", 4),
                                        ("Mean power (W)", "power_w", None, 2)):
        rows = []
        for model in models_of(sweeps, precision):
            rows.append([model] + [_value(tables.cell(precision, model, mode.id), key, std_key, digits)
                                   for _, tables, mode in cols])
        if any(value != MISSING for row in rows for value in row[1:]):
            result.append((title, header, rows))
    return result


def context_table(sweeps):
    header = ["sweep", "directory", "board", "JetPack", "L4T", "TensorRT", "profile", "backend", "started", "status"]
    rows = [[context["label"], context["dir"], context["board"], context["jetpack"] or MISSING,
             context["l4t"] or MISSING, context["tensorrt"] or MISSING, context["profile"] or MISSING,
             context["backend"] or MISSING, context["date"] or MISSING, context["status"] or MISSING]
            for context, _ in sweeps]
    return header, rows


def figure(sweeps, precision):
    """Throughput (and energy per item where measured) per board and mode, one line per model."""
    from . import plots

    cols = columns(sweeps, precision)
    models = models_of(sweeps, precision)
    have_energy = any(tables.cell(precision, model, mode.id) is not None and
                      tables.cell(precision, model, mode.id).energy_j is not None
                      for model in models for _, tables, mode in cols)
    fig, axes = plots.new_figure(columns=2 if have_energy else 1)
    xs = list(range(len(cols)))
    # the x axis names sweeps by number (their labels are long); the caption says which is which
    numbers = {id(context): index + 1 for index, (context, _) in enumerate(sweeps)}
    panels = [("throughput", "items/s", "fps", "fps_std")]
    if have_energy:
        panels.append(("energy", "J per item", "energy_j", "energy_std"))
    for axis, (panel, label, key, std_key) in zip(axes, panels):
        for index, model in enumerate(models):
            cells = [tables.cell(precision, model, mode.id) for _, tables, mode in cols]
            plots._series(axis, index, model, "{}:{}".format(panel, model), xs,
                          [getattr(c, key) if c is not None else None for c in cells],
                          [getattr(c, std_key) if c is not None else None for c in cells])
        axis.set_xticks(xs)
        axis.set_xticklabels(["#{} {}".format(numbers[id(context)], mode.name) for context, _, mode in cols],
                             rotation=30 if len(cols) > 4 else 0, fontsize="small")
        axis.set_xlim(-0.5, len(cols) - 0.5)
        axis.set_ylabel(label)
        axis.set_ylim(bottom=0)
        axis.grid(True, axis="y", color="#d9d9d9", linewidth=0.8)
        if have_energy:
            axis.set_title("Energy per item" if panel == "energy" else "Throughput")
    axes[0].legend(loc="best", fontsize="small")
    title = "{} per board and power mode ({})".format(
        "Throughput and energy per item" if have_energy else "Throughput", precision)
    fig.suptitle(title)
    fig.set_label(title)
    caption = ["#{}: {}".format(numbers[id(context)], context["label"]) for context, _ in sweeps]
    caption.append(plots.ERROR_BARS.split(" (")[0])
    fig.text(0.5, 0.01, "\n".join(caption), ha="center", va="bottom", fontsize="x-small", color="#555555")
    fig.tight_layout(rect=(0, 0.03 * len(caption) + 0.01, 1, 1))
    return fig


def build_multi_report(directories, out, html=True, plots=True):
    """Write OUT/report.md (and report.html, plots/) over the sweeps in ``directories``; returns the written
    paths."""
    sweeps = load_sweeps(directories)
    if os.path.exists(out) and not os.path.isdir(out):
        raise EdgeAttnError("-o {} is a file; give a directory for the report".format(out))
    if plots:
        from .plots import import_matplotlib

        import_matplotlib()
    with all_or_nothing():
        return _write(sweeps, out, html, plots)


def summary_markdown(directories):
    sweeps = load_sweeps(directories)
    lines = []
    for precision in precisions_of(sweeps):
        title, header, rows = sections(sweeps, precision)[0]
        lines += ["{}: {}".format(precision, title), "", markdown_table(header, rows), ""]
    return "\n".join(lines).rstrip("\n")


def _write(sweeps, out, html, plots):
    written = []
    page = Page(["# Report over {} sweeps".format(len(sweeps)), "",
                 "Generated by edgeattn {} on {}. Columns are board and software · power mode; rows are joined by "
                 "mode, precision and model.".format(__version__, time.strftime("%Y-%m-%d %H:%M")), ""],
                ["<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\"><title>edgeattn report over sweeps"
                 "</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;"
                 "margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px}img{max-width:100%}</style></head>"
                 "<body>", "<h1>Report over {} sweeps</h1>".format(len(sweeps))])
    page.table(2, "Sweeps", *context_table(sweeps))
    for precision in precisions_of(sweeps):
        page.heading(2, precision)
        for title, header, rows in sections(sweeps, precision):
            page.table(3, title, header, rows)
        if plots:
            fig = figure(sweeps, precision)
            written += page.plot(fig, os.path.join(out, PLOT_DIR), "multi_{}".format(precision), fig.get_label())
    page.markdown += ["† throttling was flagged in at least one repeat of that cell.", ""]
    return page.write(out, html) + written
