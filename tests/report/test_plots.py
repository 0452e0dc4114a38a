"""The report's matplotlib figures, checked against values computed here from the rows themselves (numpy, not the
report's own aggregation): one line per model, points at the means, error bars of the documented length."""
import json
import math
import os
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from edgeattn.report.tables import SweepTables

matplotlib = pytest.importorskip("matplotlib", reason="matplotlib (the edgeattn[report] extra) is not installed")
from edgeattn.report import plots  # noqa: E402

AGX_MODES = [(1, "MODE_15W", 15), (2, "MODE_30W", 30), (3, "MODE_50W", 50), (0, "MAXN", None)]
# Fig. 4 of the ELFATT paper, FP32 FPS read off the plot, and three repeats each with a model-specific spread
FIG4_FP32 = {"ELFATT": [25, 48, 117, 174], "EfficientViT-B2": [35, 64, 148, 198], "GLOBAL": [15, 27, 70, 108]}
JITTER = {"ELFATT": (-1.0, 0.5, 0.5), "EfficientViT-B2": (-3.0, 1.0, 2.0), "GLOBAL": (-0.5, -0.5, 1.0)}
POWER_W = {1: 15.0, 2: 30.0, 3: 50.0, 0: 60.0}


def _rows(with_power=True):
    rows = []
    for model, values in FIG4_FP32.items():
        for (mode_id, name, budget), fps in zip(AGX_MODES, values):
            for repeat, jitter in enumerate(JITTER[model], 1):
                value = fps + jitter
                power = POWER_W[mode_id] + 0.3 * repeat if with_power else None
                rows.append({"model": model, "precision": "fp32", "mode_id": mode_id, "mode_name": name,
                             "mode_budget_w": budget, "mode_threads": None, "repeat": repeat,
                             "throughput_items_per_s": value, "power": {"total_w": power},
                             "energy_per_item_j": power / value if power else None,
                             "items_per_s_per_w": value / power if power else None})
    return rows


def _samples(rows, model, mode_id, key):
    return np.array([r[key] for r in rows if r["model"] == model and r["mode_id"] == mode_id], dtype=np.float64)


def _floats(data):
    # errorbar keeps its data as an object array (matplotlib's unit support)
    return np.asarray(data, dtype=np.float64)


def _by_gid(axis, gid):
    lines = [line for line in axis.lines if line.get_gid() == gid]
    bars = [c for c in axis.collections if c.get_gid() == gid + ":errorbars"]
    assert len(lines) == 1 and len(bars) == 1, gid
    return lines[0], bars[0]


def _half_lengths(bars):
    return np.array([abs(seg[1][1] - seg[0][1]) / 2.0 for seg in bars.get_segments()])


def _centres(bars):
    return np.array([(seg[1][1] + seg[0][1]) / 2.0 for seg in bars.get_segments()])


def _mode_order():
    # by nominal budget with the uncapped MAXN last, as in Fig. 4
    return [1, 2, 3, 0]


def test_fig4_view_has_one_line_per_model_with_std_error_bars():
    rows = _rows()
    figure = plots.throughput_energy_figure(SweepTables(rows), "fp32")
    throughput_axis, energy_axis = figure.axes
    assert [t.get_text() for t in throughput_axis.get_xticklabels()] == ["MODE_15W", "MODE_30W", "MODE_50W", "MAXN"]
    for axis, panel, key in ((throughput_axis, "throughput", "throughput_items_per_s"),
                             (energy_axis, "energy", "energy_per_item_j")):
        models = sorted(line.get_gid().split(":", 1)[1] for line in axis.lines if line.get_gid())
        assert models == sorted(FIG4_FP32)
        for model in FIG4_FP32:
            line, bars = _by_gid(axis, "{}:{}".format(panel, model))
            samples = [_samples(rows, model, mode_id, key) for mode_id in _mode_order()]
            np.testing.assert_allclose(_floats(line.get_ydata()), [s.mean() for s in samples], rtol=1e-12)
            np.testing.assert_allclose(_centres(bars), [s.mean() for s in samples], rtol=1e-12)
            np.testing.assert_allclose(_half_lengths(bars), [s.std(ddof=1) for s in samples], rtol=1e-9)
    assert "Throughput and energy per item" in figure.get_label()


def test_fig4_view_without_power_has_the_throughput_panel_only():
    figure = plots.throughput_energy_figure(SweepTables(_rows(with_power=False)), "fp32")
    assert len(figure.axes) == 1 and figure.get_label() == "Throughput vs power mode (fp32)"
    assert any("no power was measured" in text.get_text() for text in figure.texts)


def test_speedup_chart_names_its_baseline_and_propagates_the_spread():
    rows = _rows()
    figure = plots.speedup_figure(SweepTables(rows), "fp32", baseline="GLOBAL")
    (axis,) = figure.axes
    assert axis.get_title() == "Speedup vs baseline GLOBAL (fp32)"
    assert "GLOBAL" in axis.get_ylabel()
    reference = [line for line in axis.lines if line.get_gid() == "speedup:reference"]
    assert len(reference) == 1 and list(_floats(reference[0].get_ydata())) == [1.0, 1.0]
    assert "baseline GLOBAL" in reference[0].get_label()
    for model in FIG4_FP32:
        line, bars = _by_gid(axis, "speedup:" + model)
        expected, spread = [], []
        for mode_id in _mode_order():
            a = _samples(rows, model, mode_id, "throughput_items_per_s")
            b = _samples(rows, "GLOBAL", mode_id, "throughput_items_per_s")
            ratio = a.mean() / b.mean()
            expected.append(ratio)
            spread.append(0.0 if model == "GLOBAL" else
                          ratio * math.hypot(a.std(ddof=1) / a.mean(), b.std(ddof=1) / b.mean()))
        np.testing.assert_allclose(_floats(line.get_ydata()), expected, rtol=1e-12)
        np.testing.assert_allclose(_half_lengths(bars), spread, rtol=1e-9, atol=1e-15)


def test_speedup_chart_without_baseline_uses_the_papers_ratio():
    figure = plots.speedup_figure(SweepTables(_rows()), "fp32")
    axis = figure.axes[0]
    assert axis.get_title() == "Speedup ratio vs slowest model per mode (fp32)"
    line, _bars = _by_gid(axis, "speedup:GLOBAL")  # GLOBAL is the slowest everywhere: exactly 1
    np.testing.assert_allclose(_floats(line.get_ydata()), [1.0] * 4)


def _ops_record():
    rng = np.random.default_rng(0)
    results = []
    for tokens in (1024, 4096, 16384):
        for op, cost in (("sdpa", 1e-6 * tokens ** 2), ("elfatt", 2e-4 * tokens), ("blockify", 1.5e-4 * tokens)):
            samples = cost * (1 + 0.1 * rng.random(9))
            q1, median, q3 = np.percentile(samples, [25, 50, 75])
            results.append({"op": op, "tokens": tokens, "ms": samples.min(), "median_ms": median, "q1_ms": q1,
                            "q3_ms": q3, "repeats": 9})
    results.append({"op": "cswin", "tokens": 1024, "skipped": "needs an even number of heads"})
    return {"schema": "edgeattn.ops-bench/1", "config": {"heads": 2, "head_dim": 32, "batch": 1},
            "results": results}


def test_ops_scaling_view_is_log_log_with_interquartile_bars():
    record = _ops_record()
    figure = plots.ops_scaling_figure(record)
    (axis,) = figure.axes
    assert axis.get_xscale() == "log" and axis.get_yscale() == "log"
    gids = [line.get_gid() or "" for line in axis.lines]
    ops = sorted(gid.split(":", 1)[1] for gid in gids if gid.startswith("latency:"))
    assert ops == ["blockify", "elfatt", "sdpa"]  # the skipped row draws nothing
    for op in ops:
        rows = sorted((r for r in record["results"] if r["op"] == op), key=lambda r: r["tokens"])
        line, bars = _by_gid(axis, "latency:" + op)
        assert list(_floats(line.get_xdata())) == [1024, 4096, 16384]
        np.testing.assert_allclose(_floats(line.get_ydata()), [r["median_ms"] for r in rows])
        lows = [seg[0][1] for seg in bars.get_segments()]
        highs = [seg[1][1] for seg in bars.get_segments()]
        np.testing.assert_allclose(lows, [r["q1_ms"] for r in rows])
        np.testing.assert_allclose(highs, [r["q3_ms"] for r in rows])
    slope1 = [line for line in axis.lines if line.get_gid() == "guide:slope1"][0]
    slope2 = [line for line in axis.lines if line.get_gid() == "guide:slope2"][0]
    # the guides double / quadruple per doubling of N: check on the log scale
    for guide, slope in ((slope1, 1.0), (slope2, 2.0)):
        log_x, log_y = np.log(_floats(guide.get_xdata())), np.log(_floats(guide.get_ydata()))
        np.testing.assert_allclose(np.diff(log_y) / np.diff(log_x), slope)


def test_ops_cpu_benchmark_records_plot_medians_per_allocator_and_threads():
    record = {"schema": "edgeattn.ops-cpu-benchmark/1", "config": {"heads": 2, "head_dim": 32, "batch": 1},
              "results": [{"tokens": n, "allocator": "default", "threads": 1, "elfatt_median_ms": 0.001 * n,
                           "sdpa_median_ms": 1e-6 * n * n} for n in (3136, 9216)]}
    series = plots.ops_series(record)
    assert series == {"elfatt (1 thread, default allocator)": [(n, 0.001 * n, None, None) for n in (3136, 9216)],
                      "sdpa (1 thread, default allocator)": [(n, 1e-6 * n * n, None, None) for n in (3136, 9216)]}


def test_quartiles_of_ops_bench_match_numpys_percentiles():
    pytest.importorskip("torch")
    from edgeattn.ops.benchmark import _quartiles

    samples = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0]
    q1, q3 = np.percentile(samples, [25, 75])
    assert _quartiles(samples) == pytest.approx({"q1_ms": q1, "q3_ms": q3})
    assert _quartiles([2.0]) == {"q1_ms": 2.0, "q3_ms": 2.0}


def _write_results(directory, rows):
    from edgeattn.sweep.results import RESULTS_SCHEMA

    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "results.json"), "w") as handle:
        json.dump({"schema": RESULTS_SCHEMA, "status": "complete", "rows": rows, "skipped": [], "notes": [],
                   "sweep": {"profile": "agx-orin-64gb", "profile_kind": "jetson", "options": {}}}, handle)


def test_same_data_same_bytes(tmp_path):
    from edgeattn.report import build_report

    out = str(tmp_path / "sweep")
    _write_results(out, _rows())
    build_report(out, baseline="GLOBAL")
    first = {name: open(os.path.join(out, "plots", name), "rb").read() for name in os.listdir(os.path.join(out,
                                                                                                         "plots"))}
    build_report(out, baseline="GLOBAL")
    second = {name: open(os.path.join(out, "plots", name), "rb").read() for name in first}
    assert sorted(first) == ["speedup_vs_mode_fp32.png", "speedup_vs_mode_fp32.svg", "throughput_energy_fp32.png",
                             "throughput_energy_fp32.svg"]
    assert first == second


def test_missing_matplotlib_is_one_line_naming_the_extra(tmp_path, invoke, monkeypatch):
    out = str(tmp_path / "sweep")
    _write_results(out, _rows())
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = invoke(["report", out], expect=2)
    assert result.stderr.strip().splitlines() == [
        "edgeattn: error: matplotlib is not installed; it is needed for the report's plots. Install the report "
        "extra: pip install 'edgeattn[report]' (or pass --no-plots)."]
    assert os.listdir(out) == ["results.json"]
    invoke(["report", out, "--no-plots"], expect=0)
    assert sorted(os.listdir(out)) == ["report.html", "report.md", "results.json"]


def test_ops_report_from_the_cli(tmp_path, invoke):
    path = tmp_path / "ops.json"
    path.write_text(json.dumps(_ops_record()))
    result = invoke(["report", str(path)], expect=0)
    assert "| median ms | N=1024 | N=4096 | N=16384 |" in result.stdout
    report = (tmp_path / "ops.report.md").read_text()
    assert "](plots/ops_latency_vs_tokens.png)" in report and "interquartile range" in report
    svg = ET.parse(str(tmp_path / "plots" / "ops_latency_vs_tokens.svg")).getroot()
    ids = {element.get("id") for element in svg.iter()}
    assert {"latency:sdpa", "latency:elfatt", "latency:blockify"} <= ids
    assert (tmp_path / "plots" / "ops_latency_vs_tokens.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("content, args, expected", [
    ('{"schema": "edgeattn.sweep/1"}', [], "is a sweep's results.json (schema edgeattn.sweep/1); give its directory"),
    ('{"schema": "edgeattn.bench/1"}', [], "not an ops benchmark record"),
    ("{not json", [], "is not JSON"),
    ("{}", ["--baseline", "x"], "--baseline applies to sweep directories"),
])
def test_ops_report_bad_input(tmp_path, invoke, content, args, expected):
    path = tmp_path / "ops.json"
    path.write_text(content)
    result = invoke(["report", str(path)] + args, expect=2)
    assert expected in result.stderr and result.stderr.count("\n") == 1
    assert sorted(os.listdir(str(tmp_path))) == ["ops.json"]
