"""The report's figures, drawn with matplotlib (the ``edgeattn[report]`` extra) on the Agg canvas.

* :func:`throughput_energy_figure`: the ELFATT paper's Fig. 4 view of one precision: throughput and, where power
  was measured, energy per item across the power modes (or CPU thread budgets), one line per model;
* :func:`speedup_figure`: the speedup table as a chart, against a named baseline model (or the paper's
  slowest-model-per-mode ratio; the title says which), with the reference drawn at 1.0;
* :func:`ops_scaling_figure`: latency against tokens on log-log axes from an ops benchmark record, where a linear
  operator is a line of slope 1 and softmax attention one of slope 2.

Error bars come from the repeats: ± one sample standard deviation (n - 1 in the denominator) of the repeats'
throughput and energy per item; a speedup's bar combines both models' relative standard deviations to first
order, sqrt((s_a / a)^2 + (s_b / b)^2) times the ratio, and a model against itself has none. Ops latencies are the
median of the timed calls with the interquartile range as the bar (records without quartiles get no bar).
:data:`ERROR_BARS` says the same in one line for captions.

A figure's title is also its label (``figure.get_label()``). Each line carries a ``gid`` (``"<panel>:<model>"``)
that the SVG keeps as the id of its group, so a reader - or a test - can find every series in the file. Figures
are built on a plain :class:`matplotlib.figure.Figure` with an Agg canvas, never pyplot, so no global backend
or window state is touched.
"""
import math

from ..errors import EdgeAttnError, MissingDependencyError

ERROR_BARS = ("error bars: ± one sample standard deviation over the repeats (speedups: both models' relative "
              "deviations combined to first order)")
OPS_ERROR_BARS = "points: median of the timed calls; error bars: interquartile range (25th to 75th percentile)"
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
FIGURE_SIZE = (9.6, 5.6)
DPI = 100


def import_matplotlib():
    """``(Figure, FigureCanvasAgg, matplotlib)``; one error line naming the extra when matplotlib is missing."""
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingDependencyError("matplotlib", "the report's plots",
                                     "Install the report extra: pip install 'edgeattn[report]' (or pass --no-plots).")
    return Figure, FigureCanvasAgg, matplotlib


def new_figure(size=FIGURE_SIZE, columns=1):
    Figure, FigureCanvasAgg, _ = import_matplotlib()
    figure = Figure(figsize=size, dpi=DPI)
    FigureCanvasAgg(figure)
    axes = [figure.add_subplot(1, columns, index + 1) for index in range(columns)]
    return figure, axes


def save_figure(figure, handle, fmt):
    """Write ``figure`` as ``fmt`` ("png" or "svg") to an open binary file, without timestamps, so that the same
    data gives the same bytes."""
    _, _, matplotlib = import_matplotlib()
    metadata = {"Date": None} if fmt == "svg" else {"Software": None}
    with matplotlib.rc_context({"svg.hashsalt": "edgeattn", "svg.fonttype": "none"}):
        figure.savefig(handle, format=fmt, metadata=metadata)


def speedup_std(ratio, value, value_std, base, base_std):
    """First-order standard deviation of ``value / base`` from the two standard deviations."""
    if ratio is None or not value or not base or value_std is None or base_std is None:
        return None
    return ratio * math.sqrt((value_std / value) ** 2 + (base_std / base) ** 2)


def _x_axis(axis, modes):
    axis.set_xticks(range(len(modes)))
    axis.set_xticklabels([mode.name for mode in modes], rotation=0 if len(modes) <= 6 else 30)
    axis.set_xlim(-0.5, len(modes) - 0.5)
    axis.set_xlabel(_x_title(modes))
    axis.grid(True, axis="y", color="#d9d9d9", linewidth=0.8)


def _x_title(modes):
    return "CPU thread budget" if modes and modes[0].threads is not None else "power mode"


def _series(axis, index, name, gid, xs, values, errors):
    """One model's line with its error bars; gaps (None) break the line. Returns the ErrorbarContainer."""
    points = [(x, v, e) for x, v, e in zip(xs, values, errors) if v is not None]
    if not points:
        return None
    px = [float(p[0]) for p in points]
    py = [float(p[1]) for p in points]
    bars = [float(p[2]) if p[2] is not None else 0.0 for p in points]
    container = axis.errorbar(px, py, yerr=bars, marker=MARKERS[index % len(MARKERS)], capsize=4, linewidth=1.8,
                              markersize=6, label=name, color="C{}".format(index % 10))
    line, caps, columns = container.lines
    line.set_gid(gid)
    for column in columns:
        column.set_gid(gid + ":errorbars")
    return container


def throughput_energy_figure(tables, precision):
    """The Fig. 4 view of ``precision``: items/s (and J per item when measured) per mode, one line per model."""
    modes = tables.modes_in(precision)
    models = tables.models_in(precision)
    cells = {(m, mode.id): tables.cell(precision, m, mode.id) for m in models for mode in modes}
    have_energy = any(c is not None and c.energy_j is not None for c in cells.values())
    figure, axes = new_figure(columns=2 if have_energy else 1)
    xs = list(range(len(modes)))
    panels = [("throughput", "items/s", "fps", "fps_std")]
    if have_energy:
        panels.append(("energy", "J per item", "energy_j", "energy_std"))
    for axis, (panel, label, value_key, std_key) in zip(axes, panels):
        for index, model in enumerate(models):
            values = [getattr(cells[(model, mode.id)], value_key, None) for mode in modes]
            errors = [getattr(cells[(model, mode.id)], std_key, None) for mode in modes]
            _series(axis, index, model, "{}:{}".format(panel, model), xs, values, errors)
        _x_axis(axis, modes)
        axis.set_ylabel(label)
        axis.set_ylim(bottom=0)
        if have_energy:
            axis.set_title("Energy per item" if panel == "energy" else "Throughput")
    axes[0].legend(loc="best", fontsize="small")
    title = "{} vs {} ({})".format("Throughput and energy per item" if have_energy else "Throughput",
                                   _x_title(modes), precision)
    figure.suptitle(title)
    figure.set_label(title)
    note = ERROR_BARS if have_energy else ERROR_BARS + "; energy per item: no power was measured"
    figure.text(0.5, 0.01, note, ha="center", fontsize="x-small", color="#555555")
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    return figure


def speedup_figure(tables, precision, baseline=None):
    """Speedup per mode, one line per model: vs ``baseline`` when given (the title names it), else vs the slowest
    model of each mode (the ELFATT paper's ratio)."""
    modes = tables.modes_in(precision)
    models = tables.models_in(precision)
    figure, (axis,) = new_figure()
    xs = list(range(len(modes)))
    for index, model in enumerate(models):
        values, errors = [], []
        for mode in modes:
            if baseline:
                reference = baseline
                ratio = tables.speedup_vs_baseline(precision, model, mode.id, baseline)
            else:
                reference = tables.slowest(precision, mode.id)[0]
                ratio = tables.speedup_ratio(precision, model, mode.id)
            cell, base = tables.cell(precision, model, mode.id), tables.cell(precision, reference, mode.id)
            values.append(ratio)
            if model == reference or cell is None or base is None:
                errors.append(0.0 if ratio is not None else None)
            else:
                errors.append(speedup_std(ratio, cell.fps, cell.fps_std, base.fps, base.fps_std))
        _series(axis, index, model, "speedup:{}".format(model), xs, values, errors)
    if baseline:
        title = "Speedup vs baseline {} ({})".format(baseline, precision)
        reference_label = "baseline {} = 1.0".format(baseline)
        y_label = "FPS / FPS of {}".format(baseline)
    else:
        title = "Speedup ratio vs slowest model per mode ({})".format(precision)
        reference_label = "slowest model of each mode = 1.0"
        y_label = "FPS / FPS of the slowest model"
    reference_line = axis.axhline(1.0, color="#888888", linestyle="--", linewidth=1.2, label=reference_label)
    reference_line.set_gid("speedup:reference")
    _x_axis(axis, modes)
    axis.set_ylabel(y_label)
    axis.set_ylim(bottom=0)
    axis.set_title(title)
    figure.set_label(title)
    axis.legend(loc="best", fontsize="small")
    figure.text(0.5, 0.01, ERROR_BARS, ha="center", fontsize="x-small", color="#555555")
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    return figure


def ops_series(record):
    """``{series name: [(tokens, center_ms, low_ms or None, high_ms or None), ...]}`` from an ops benchmark record:
    ``edgeattn ops-bench --json`` (schema edgeattn.ops-bench/1: one series per operator) or
    ``benchmarks/ops_cpu.py`` (edgeattn.ops-cpu-benchmark/1: ELFATT and SDPA per allocator and thread count,
    median only)."""
    schema = record.get("schema", "")
    series = {}
    if schema.startswith("edgeattn.ops-bench/"):
        for row in record.get("results") or []:
            if "skipped" in row or row.get("median_ms") is None:
                continue
            series.setdefault(row["op"], []).append(
                (row["tokens"], row["median_ms"], row.get("q1_ms"), row.get("q3_ms")))
    elif schema.startswith("edgeattn.ops-cpu-benchmark/"):
        for row in record.get("results") or []:
            suffix = " ({} thread{}, {} allocator)".format(row["threads"], "" if row["threads"] == 1 else "s",
                                                           row["allocator"])
            for op in ("elfatt", "sdpa"):
                if row.get(op + "_median_ms") is not None:
                    series.setdefault(op + suffix, []).append((row["tokens"], row[op + "_median_ms"], None, None))
    else:
        raise EdgeAttnError("not an ops benchmark record (schema {!r}); expected the JSON of `edgeattn ops-bench "
                            "--json` or benchmarks/ops_cpu.py".format(schema or None))
    return {name: sorted(points) for name, points in series.items()}


def ops_scaling_figure(record, title=None):
    """Latency against tokens on log-log axes, one line per operator, with dotted slope-1 and slope-2 guides
    through the first point of the first series (linear vs quadratic scaling)."""
    series = ops_series(record)
    figure, (axis,) = new_figure()
    for index, (name, points) in enumerate(series.items()):
        tokens = [float(p[0]) for p in points]
        center = [float(p[1]) for p in points]
        lower = [float(p[1] - p[2]) if p[2] is not None else 0.0 for p in points]
        upper = [float(p[3] - p[1]) if p[3] is not None else 0.0 for p in points]
        container = axis.errorbar(tokens, center, yerr=[lower, upper], marker=MARKERS[index % len(MARKERS)],
                                  capsize=3, linewidth=1.6, markersize=5, label=name,
                                  color="C{}".format(index % 10))
        line, _caps, columns = container.lines
        line.set_gid("latency:{}".format(name))
        for column in columns:
            column.set_gid("latency:{}:errorbars".format(name))
    all_tokens = sorted({float(p[0]) for points in series.values() for p in points})
    if series and len(all_tokens) > 1:
        first = next(iter(series.values()))[0]
        for slope, style in ((1, ":"), (2, "-.")):
            guide = [first[1] * (n / float(first[0])) ** slope for n in all_tokens]
            drawn, = axis.plot(all_tokens, guide, linestyle=style, color="#999999", linewidth=1,
                               label="slope {} (time ∝ N{})".format(slope, "" if slope == 1 else "²"))
            drawn.set_gid("guide:slope{}".format(slope))
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("tokens N")
    axis.set_ylabel("latency, ms")
    axis.grid(True, which="both", color="#e5e5e5", linewidth=0.6)
    config = record.get("config") or {}
    title = title or "Operator latency vs tokens ({} heads x d {}, batch {})".format(
        config.get("heads", "?"), config.get("head_dim", "?"), config.get("batch", 1))
    axis.set_title(title)
    figure.set_label(title)
    axis.legend(loc="best", fontsize="x-small")
    has_spread = any(p[2] is not None for points in series.values() for p in points)
    note = OPS_ERROR_BARS if has_spread else "points: median of the timed calls (the record has no quartiles: no bars)"
    figure.text(0.5, 0.01, note, ha="center", fontsize="x-small", color="#555555")
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    return figure
