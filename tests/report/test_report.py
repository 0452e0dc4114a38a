"""`edgeattn report`: tables (FPS, speedups with their definitions), HTML and plots, checked against the ELFATT
paper's own numbers (its Tables VIII and IX, arXiv 2501.06098) where it gives them."""
import json
import os
import xml.etree.ElementTree as ET

import pytest

from edgeattn.report import build_report
from edgeattn.report.tables import SweepTables
from edgeattn.sweep.results import RESULTS_SCHEMA

# Table VIII (AGX Orin, 60 W) and Table IX (Nano, 10 W): model -> (FP32 FPS, ratio, mixed FPS, ratio) as printed
TABLE_VIII = {"Agent": (158, 1.5, 295, 1.3), "EFFATT": (156, 1.4, 305, 1.3), "ELFATT": (174, 1.6, 355, 1.6),
              "FLatten": (138, 1.3, 229, 1.0), "GLOBAL": (108, 1.0, 298, 1.3), "LOCAL": (167, 1.5, 309, 1.3),
              "EfficientViT-B2": (198, 1.8, 282, 1.2)}
TABLE_IX = {"Agent": (4.9, 1.5, 4.5, 1.3), "EFFATT": (5.8, 1.8, 5.5, 1.6), "ELFATT": (6.2, 2.0, 5.8, 1.7),
            "FLatten": (4.7, 1.5, 4.0, 1.1), "GLOBAL": (3.2, 1.0, 3.5, 1.0), "LOCAL": (5.0, 1.6, 4.2, 1.2),
            "EfficientViT-B2": (5.5, 1.7, 5.7, 1.6)}
# Fig. 4, read off the plot: FP32 FPS of three models at 15/30/50/60 W on AGX Orin 64GB
FIG4_FP32 = {"ELFATT": [25, 48, 117, 174], "EfficientViT-B2": [35, 64, 148, 198], "GLOBAL": [15, 27, 70, 108]}
AGX_MODES = [(1, "MODE_15W", 15), (2, "MODE_30W", 30), (3, "MODE_50W", 50), (0, "MAXN", None)]


def _row(model, mode, precision, fps, repeat=1, power_w=None, throttled=False):
    mode_id, name, budget = mode
    row = {"model": model, "model_key": model, "precision": precision, "precision_requested": precision,
           "mode_id": mode_id, "mode_name": name, "mode_budget_w": budget, "mode_threads": None, "repeat": repeat,
           "throughput_items_per_s": fps, "power": {"total_w": power_w, "rails_w": {}, "source": "tegrastats"},
           "energy_per_item_j": power_w / fps if power_w else None,
           "items_per_s_per_w": fps / power_w if power_w else None, "throttled": throttled}
    return row


def _table_rows(table, mode):
    rows = []
    for model, (fp32, _, mixed, _) in table.items():
        rows.append(_row(model, mode, "fp32", fp32))
        rows.append(_row(model, mode, "fp16", mixed))
    return rows


@pytest.mark.parametrize("table, name", [(TABLE_VIII, "VIII"), (TABLE_IX, "IX")])
def test_speedup_ratio_reproduces_the_papers_tables(table, name):
    mode = (0, "MAXN", None)
    tables = SweepTables(_table_rows(table, mode))
    for model, (_, fp32_ratio, _, mixed_ratio) in table.items():
        for precision, printed in (("fp32", fp32_ratio), ("fp16", mixed_ratio)):
            ratio = tables.speedup_ratio(precision, model, 0)
            if (name, model, precision) == ("IX", "ELFATT", "fp32"):
                # the paper prints 2.0 for 6.2 / 3.2 = 1.94 (Table IX)
                assert abs(ratio - printed) < 0.07
            else:
                assert round(ratio, 1) == printed, (model, precision, ratio)
    # the slowest model differs per column: GLOBAL in FP32, FLatten in mixed precision on Orin
    if name == "VIII":
        assert tables.slowest("fp32", 0) == ("GLOBAL", 108) and tables.slowest("fp16", 0) == ("FLatten", 229)


def test_baseline_speedup_and_its_relation_to_the_ratio():
    tables = SweepTables(_table_rows(TABLE_VIII, (0, "MAXN", None)))
    assert tables.speedup_vs_baseline("fp32", "ELFATT", 0, "GLOBAL") == pytest.approx(174 / 108.0)
    assert tables.speedup_vs_baseline("fp32", "GLOBAL", 0, "GLOBAL") == 1.0
    # with the slowest model as the baseline both definitions agree
    for model in TABLE_VIII:
        assert tables.speedup_vs_baseline("fp32", model, 0, "GLOBAL") == pytest.approx(
            tables.speedup_ratio("fp32", model, 0))
    # ...but not where the slowest model is another one (mixed precision: FLatten)
    assert tables.speedup_vs_baseline("fp16", "ELFATT", 0, "GLOBAL") != pytest.approx(
        tables.speedup_ratio("fp16", "ELFATT", 0))


def _write_results(directory, rows, skipped=()):
    os.makedirs(directory, exist_ok=True)
    data = {"schema": RESULTS_SCHEMA, "status": "complete", "rows": rows, "skipped": list(skipped), "notes": [],
            "sweep": {"profile": "agx-orin-64gb", "profile_kind": "jetson",
                      "options": {"clocks": "default", "repeats": 2, "batch": 128, "duration_s": 10,
                                  "backend": "auto"},
                      "board": {"model": "NVIDIA Jetson AGX Orin Developer Kit", "module_id": "p3701-0005",
                                "l4t_release": "36.4.3", "jetpack": "6.2"}}}
    with open(os.path.join(directory, "results.json"), "w") as handle:
        json.dump(data, handle)


def _fig4_rows():
    rows = []
    for model, values in FIG4_FP32.items():
        for mode, fps in zip(AGX_MODES, values):
            for repeat, jitter in ((1, -1.0), (2, 1.0)):
                rows.append(_row(model, mode, "fp32", fps + jitter, repeat=repeat, power_w=mode[2] or 60,
                                 throttled=(model == "GLOBAL" and mode[1] == "MAXN" and repeat == 2)))
    return rows


def test_report_files(tmp_path, invoke):
    out = str(tmp_path / "sweep")
    _write_results(out, _fig4_rows(), skipped=[{"mode_id": 9, "mode_name": "X", "reason": "needs a reboot"}])
    result = invoke(["report", out, "--baseline", "GLOBAL"], expect=0)
    written = [line[len("wrote "):] for line in result.stdout.splitlines() if line.startswith("wrote ")]
    assert written[:2] == [os.path.join(out, "report.md"), os.path.join(out, "report.html")]
    # the terminal gets the headline tables: throughput and the speedup against the chosen baseline
    assert "fp32: Speedup vs baseline `GLOBAL`" in result.stdout
    assert "| ELFATT | 25.0 ± 1.4 | 48.0 ± 1.4 | 117.0 ± 1.4 | 174.0 ± 1.4 |" in result.stdout
    report = open(os.path.join(out, "report.md")).read()
    # modes ordered by budget with the uncapped MAXN last, as in Fig. 4
    assert "| model | MODE_15W | MODE_30W | MODE_50W | MAXN |" in report
    assert "| ELFATT | 25.0 ± 1.4 | 48.0 ± 1.4 | 117.0 ± 1.4 | 174.0 ± 1.4 |" in report
    assert "### Speedup vs baseline `GLOBAL`: FPS / FPS of GLOBAL in the same mode" in report
    assert "### Speedup ratio: FPS / FPS of the slowest model in the same mode" in report
    ratios = (25 / 15., 48 / 27., 117 / 70., 174 / 108.)   # Fig. 4 values over GLOBAL's in each mode
    assert "| ELFATT | {:.2f}x | {:.2f}x | {:.2f}x | {:.2f}x |".format(*ratios) in report
    assert "| GLOBAL | 108.0 ± 1.4 †" not in report and "108.0 ± 1.4 †" in report
    assert "Items per second per watt" in report and "## Skipped modes" in report
    html = open(os.path.join(out, "report.html")).read()
    assert "<table>" in html
    for name in ("throughput_energy_fp32", "speedup_vs_mode_fp32"):
        # report.md embeds the PNG, report.html the SVG, and both files exist
        assert "]({}/{}.png)".format("plots", name) in report
        assert '<img src="plots/{}.svg"'.format(name) in html
        assert os.path.join(out, "plots", name + ".png") in written
        with open(os.path.join(out, "plots", name + ".png"), "rb") as handle:
            assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
        svg = ET.parse(os.path.join(out, "plots", name + ".svg")).getroot()
        ids = {element.get("id") for element in svg.iter() if element.get("id")}
        panels = ("throughput", "energy") if name.startswith("throughput") else ("speedup",)
        for panel in panels:
            assert {i for i in ids if i.startswith(panel + ":") and not i.endswith(":errorbars")
                    and i != "speedup:reference"} == {"{}:{}".format(panel, m) for m in FIG4_FP32}
    assert "error bars: ± one sample standard deviation over the repeats" in report
    assert not [f for f in os.listdir(out) if f.endswith(".tmp")]


def _markdown_section(report, title):
    """The table rows (cells split) of the report.md section whose heading starts with ``title``."""
    body = next(part for part in report.split("\n### ") if part.startswith(title))
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in body.splitlines()[1:]
            if line.startswith("| ") and not line.startswith("| ---")]


def test_power_tables_hold_energy_per_item_and_items_per_watt(tmp_path):
    """Each repeat of _fig4_rows runs at the mode's budget P (60 W for MAXN) and FPS f = Fig. 4 value -/+ 1, so
    its energy per item is P / f J and its efficiency f / P items/s/W; the tables show the mean over the repeats."""
    out = str(tmp_path / "sweep")
    _write_results(out, _fig4_rows())
    build_report(out, plots=False)
    report = open(os.path.join(out, "report.md")).read()
    energy = {row[0]: row[1:] for row in _markdown_section(report, "Energy per item, J")}
    efficiency = {row[0]: row[1:] for row in _markdown_section(report, "Items per second per watt")}
    power = {row[0]: row[1:] for row in _markdown_section(report, "Mean power, W")}
    assert energy["model"] == efficiency["model"] == ["MODE_15W", "MODE_30W", "MODE_50W", "MAXN"]
    for model, values in FIG4_FP32.items():
        budgets = [mode[2] or 60 for mode in AGX_MODES]
        assert energy[model] == ["{:.4f}".format((p / (f - 1.0) + p / (f + 1.0)) / 2.0)
                                 for p, f in zip(budgets, values)]
        assert efficiency[model] == ["{:.2f}".format(((f - 1.0) / p + (f + 1.0) / p) / 2.0)
                                     for p, f in zip(budgets, values)]
        assert power[model] == ["{:.2f}".format(p) for p in budgets]


def test_report_speedup_plot_title_says_which_definition(tmp_path):
    out = str(tmp_path / "sweep")
    _write_results(out, _fig4_rows())
    build_report(out)
    svg = open(os.path.join(out, "plots", "speedup_vs_mode_fp32.svg")).read()
    assert "Speedup ratio vs slowest model per mode (fp32)" in svg
    build_report(out, baseline="ELFATT")
    svg = open(os.path.join(out, "plots", "speedup_vs_mode_fp32.svg")).read()
    assert "Speedup vs baseline ELFATT (fp32)" in svg


def test_host_cpu_columns_are_thread_budgets(tmp_path):
    rows = []
    for threads in (4, 1, 2):
        row = _row("m", (threads, "{} threads".format(threads), None), "fp32", 10.0 * threads)
        row["mode_threads"] = threads
        rows.append(row)
    out = str(tmp_path / "host")
    _write_results(out, rows)
    build_report(out, plots=False)
    report = open(os.path.join(out, "report.md")).read()
    assert "| model | 1 threads | 2 threads | 4 threads |" in report
    assert "Mean power" not in report
    assert not os.path.exists(os.path.join(out, "plots"))


def test_report_errors(tmp_path, invoke):
    result = invoke(["report", str(tmp_path / "nothing")], expect=2)
    assert "no sweep results" in result.stderr and result.stderr.count("\n") == 1
    out = str(tmp_path / "sweep")
    _write_results(out, _fig4_rows())
    result = invoke(["report", out, "--baseline", "nope"], expect=2)
    assert "--baseline 'nope' is not a model of this sweep" in result.stderr
    empty = str(tmp_path / "empty")
    _write_results(empty, [])
    assert "nothing to report" in invoke(["report", empty], expect=2).stderr
    assert not os.path.exists(os.path.join(empty, "report.md"))


def test_int8_is_reported_like_the_other_precisions(tmp_path):
    """A sweep with --precision fp32,fp16,int8: int8 gets its section (after fp32 and fp16) with its own numbers."""
    mode = AGX_MODES[3]
    rows = [_row(model, mode, precision, fps) for model, precision, fps in (
        ("GLOBAL", "fp32", 108.0), ("GLOBAL", "fp16", 298.0), ("GLOBAL", "int8", 350.0),
        ("ELFATT", "fp32", 174.0), ("ELFATT", "int8", 410.0))]
    out = str(tmp_path / "int8")
    _write_results(out, rows)
    build_report(out, plots=False)
    report = open(os.path.join(out, "report.md")).read()
    sections = [line for line in report.splitlines() if line.startswith("## ") and line[3:] in ("fp32", "fp16",
                                                                                                 "int8")]
    assert sections == ["## fp32", "## fp16", "## int8"]
    int8 = report.split("## int8", 1)[1]
    assert "| ELFATT | 410.0" in int8 and "| GLOBAL | 350.0" in int8
    assert "{:.2f}x".format(410.0 / 350.0) in int8
