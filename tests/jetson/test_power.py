"""Power summaries (jtop's total-rail rule, rbonghi/jetson_stats jtop/core/power.py) and `edgeattn power` on real
captures."""
import json

import pytest

from jetson_support import capture
from edgeattn.jetson import power
from edgeattn.jetson.tegrastats import parse_line


def test_total_rail_choice():
    assert power.total_power_mw({"VDD_IN": 5000.0, "VDD_SOC": 100.0}) == (5000.0, "VDD_IN")
    assert power.total_power_mw({"POM_5V_IN": 943.0, "POM_5V_GPU": 0.0}) == (943.0, "POM_5V_IN")
    total, label = power.total_power_mw({"VDD_GPU_SOC": 2340.0, "VDD_CPU_CV": 390.0})
    assert total == 2730.0 and label == "sum of rails (VDD_CPU_CV+VDD_GPU_SOC)"
    assert power.total_power_mw({}) == (None, None)


def test_summary_of_the_agx_orin_r36_capture():
    summary = power.summarise_log_lines(capture("tegrastats/agx_orin_r36_4_4.log").splitlines())
    assert summary["samples"] == 3 and summary["unparsed_lines"] == 0
    assert summary["time_span"]["duration_s"] == 2.0 and summary["time_span"]["source"] == "timestamps"
    vin = summary["rails_w"]["VIN_SYS_5V0"]
    assert vin["mean"] == pytest.approx((4.707 + 4.607 + 4.707) / 3, abs=1e-3)
    assert (vin["min"], vin["max"]) == (4.607, 4.707)
    totals = [2.412 + 1.607 + 4.707, 2.412 + 1.607 + 4.607, 2.412 + 1.607 + 4.707]
    assert summary["total_w"]["rail"] == "sum of rails (VDD_CPU_CV+VDD_GPU_SOC+VIN_SYS_5V0)"
    assert summary["total_w"]["mean"] == pytest.approx(sum(totals) / 3, abs=1e-3)
    # trapezoid over the 1 s steps of the timestamps
    assert summary["energy_j"] == pytest.approx((totals[0] + totals[1]) / 2 + (totals[1] + totals[2]) / 2, abs=1e-3)
    assert summary["temperatures_c"]["cpu"]["max"] == 52.562
    assert summary["gpu"]["util_pct"]["mean"] == 0


def test_energy_is_the_trapezoid_between_unequal_samples():
    """Two consecutive real samples 1 s apart with different totals: the trapezoid is their mean times 1 s, not
    either endpoint (the three-line capture above is symmetric, so a rectangle rule would pass it)."""
    first_two = capture("tegrastats/agx_orin_r36_4_4.log").splitlines()[:2]
    summary = power.summarise_log_lines(first_two)
    assert summary["samples"] == 2 and summary["time_span"]["duration_s"] == 1.0
    before, after = 2.412 + 1.607 + 4.707, 2.412 + 1.607 + 4.607   # VDD_GPU_SOC + VDD_CPU_CV + VIN_SYS_5V0, W
    assert summary["energy_j"] == pytest.approx((before + after) / 2.0 * 1.0, abs=1e-3)
    assert summary["energy_j"] != pytest.approx(before, abs=1e-3) and summary["energy_j"] != pytest.approx(after,
                                                                                                         abs=1e-3)


def test_jp4_log_without_timestamps_and_garbage_lines():
    text = capture("tegrastats/nano_jp4_root.log") + "garbage line\n\x00\x01binary\n" + \
        capture("tegrastats/nano_jp4_nonroot.log")
    summary = power.summarise_log_lines(text.splitlines())
    assert summary["samples"] == 2 and summary["unparsed_lines"] == 2
    assert summary["time_span"] is None and summary["energy_j"] is None
    assert summary["total_w"]["rail"] == "POM_5V_IN"
    assert summary["total_w"]["mean"] == pytest.approx((1.003 + 0.943) / 2)
    assert summary["unparsed_examples"][0] == {"line": 2, "text": "garbage line"}


def test_window_attribution():
    samples = [(100.0 + 0.5 * i, parse_line("VDD_IN {0}/{0}".format(1000 * i))) for i in range(10)]
    # a sample at t covers (t - 0.5, t]; its middle t - 0.25 must fall inside [101.0, 102.0]
    chosen, approximate = power.samples_in_window(samples, 101.0, 102.0, 0.5)
    assert [t for t, _ in chosen] == [101.5, 102.0] and not approximate
    summary = power.window_summary(samples, 101.0, 102.0, 0.5, "tegrastats")
    assert summary["total_w"] == pytest.approx((3.0 + 4.0) / 2) and summary["total_rail"] == "VDD_IN"
    short, approximate = power.samples_in_window(samples, 101.30, 101.35, 0.5)
    assert approximate and [t for t, _ in short] == [101.5]
    assert power.samples_in_window(samples, 200.0, 201.0, 0.5) == ([], False)


def test_cli_power_text_and_json(invoke, tmp_path):
    log = tmp_path / "tegra.log"
    log.write_text(capture("tegrastats/orin_nano_super_jp62.log") + "NVPM ERROR: not tegrastats\n")
    result = invoke(["power", str(log)], expect=0)
    assert "samples: 2  unparsed lines: 1" in result.stdout
    assert "total (VDD_IN)" in result.stdout and "rail VDD_SOC" in result.stdout
    data = json.loads(invoke(["power", str(log), "--json"], expect=0).stdout)
    assert data["rails_w"]["VDD_IN"]["max"] == 16.321 and data["gpu"]["util_pct"]["max"] == 99
    assert data["unparsed_lines"] == 1


def test_cli_power_bad_input(invoke, tmp_path):
    result = invoke(["power", str(tmp_path / "missing.log")], expect=2)
    assert "no such tegrastats log" in result.stderr
    junk = tmp_path / "junk.log"
    junk.write_text("junk\nmore junk\n")
    result = invoke(["power", str(junk), "--json"], expect=2)
    assert result.stdout == "" and result.stderr.count("\n") == 1
    assert "holds no tegrastats sample (2 line(s), none parsable; line 1: 'junk')" in result.stderr
    empty = tmp_path / "empty.log"
    empty.write_text("")
    assert "holds no tegrastats sample (empty)" in invoke(["power", str(empty)], expect=2).stderr
    assert "is a directory" in invoke(["power", str(tmp_path)], expect=2).stderr
