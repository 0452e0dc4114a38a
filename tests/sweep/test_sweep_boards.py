"""Full sweeps on the fake tools for every Jetson board profile (and mode table), with the stub benchmark."""
import csv
import os

import pytest

import fakeharness
import stubbench
from edgeattn.sweep import CSV_COLUMNS, run_sweep
from fakeboard import mask_of, parse_conf
from sweep_timing import FAST_INTERVAL_MS, REAL_INTERVAL_MS, scaled

#: > one sampling interval, so every window holds a tegrastats sample (0.6 s at the real 500 ms, see sweep_timing)
DURATION_S = scaled(0.6)
#: what the sweeps below sample at (with the fast_sampling fixture)
FAST = dict(duration_s=DURATION_S, interval_ms=FAST_INTERVAL_MS)
#: the board that is also swept at the real 500 ms interval, end to end
REAL_TIME_BOARD = "nano-4gb"


def _model(tmp_path, name="m1"):
    path = tmp_path / "{}.onnx".format(name)
    path.write_bytes(b"not really onnx; the stub benchmark does not read it")
    return str(path)


def _expected_total_w(rails_mw):
    for name in ("VDD_IN", "POM_5V_IN"):
        if name in rails_mw:
            return rails_mw[name] / 1000.0
    return sum(rails_mw.values()) / 1000.0


@pytest.mark.parametrize("name", fakeharness.BOARD_NAMES)
def test_sweep_on_every_fake_board(fake_board, fast_sampling, tmp_path, name):
    check_board_sweep(fake_board, tmp_path, name, FAST_INTERVAL_MS)


def test_sweep_at_the_real_sampling_interval(fake_board, tmp_path):
    """The same sweep with the product's own 500 ms minimum interval and unscaled times (no fast_sampling)."""
    check_board_sweep(fake_board, tmp_path, REAL_TIME_BOARD, REAL_INTERVAL_MS)


def check_board_sweep(fake_board, tmp_path, name, interval_ms):
    board = fake_board(name)
    lines = []
    out_dir = str(tmp_path / "out")
    scale = REAL_INTERVAL_MS / interval_ms
    # a short settle after each switch, as real sweeps do: a line tegrastats printed just before the switch but
    # read late on a loaded machine must not land in the first window of the new mode. At the fast interval the
    # settle is kept at half the real one (not a fifth): the margin is against scheduling delays, which do not
    # shrink with the interval.
    outcome = run_sweep([_model(tmp_path)], profile="auto", settle_s=0.5 if scale == 1 else 0.25, repeats=1,
                        duration_s=0.6 / scale, interval_ms=interval_ms, out_dir=out_dir,
                        bench=stubbench.make_bench(), engine_builder=stubbench.fake_engine_builder, echo=lines.append)
    assert outcome.status == "complete"
    # Oracle: the fake's own reboot rule on its conf (modes with the default mode's masks switch live)
    modes, default = parse_conf(board.spec["conf"])
    live = sorted(i for i in modes if mask_of(modes[i]) == mask_of(modes[default]))
    assert sorted(row["mode_id"] for row in outcome.rows) == live
    # tegrastats ran at the interval this sweep was given (the fake honours it as the real tool does)
    assert {call["argv"][call["argv"].index("--interval") + 1] for call in board.calls("tegrastats")} == {
        str(interval_ms)}
    assert sorted(entry["mode_id"] for entry in outcome.skipped) == sorted(set(modes) - set(live))
    assert all("reboot" in entry["reason"] for entry in outcome.skipped)
    for row in outcome.rows:
        assert row["mode_name"] == modes[row["mode_id"]]["name"]
        assert row["throughput_items_per_s"] == stubbench.expected_fps("m1", row["mode_id"])
        rails = board.mode_rails_mw(row["mode_id"])
        assert row["power"]["source"] == "tegrastats" and row["power"]["samples"] >= 1
        assert row["power"]["rails_w"] == pytest.approx({k: v / 1000.0 for k, v in rails.items()})
        assert row["power"]["total_w"] == pytest.approx(_expected_total_w(rails))
        assert row["energy_per_item_j"] == pytest.approx(row["power"]["total_w"] / row["throughput_items_per_s"])
        assert row["items_per_s_per_w"] == pytest.approx(row["throughput_items_per_s"] / row["power"]["total_w"])
        assert row["telemetry"]["samples"] >= 1 and row["throttled"] is False
    # the original mode and clocks are back, and our tegrastats is gone
    state = board.state()
    assert state["mode"] == default and state["locked"] is False
    # the clocks were stored in a private 0700 directory under the state dir, never in the sweep directory, and
    # that store is gone once the sweep finished and restored from it
    store = state["restored_from"]
    state_root = os.path.join(board.base, "edgeattn-state", "clocks")
    assert os.path.dirname(os.path.dirname(store)) == os.path.realpath(state_root)
    assert os.path.basename(store) == "jetson_clocks.orig" and not os.path.exists(os.path.dirname(store))
    assert not os.path.exists(os.path.join(out_dir, "jetson_clocks.orig"))
    assert board.live_tegrastats() == []
    # privileged calls went through sudo; prompts (if any) were answered NO; queries had a closed stdin
    for call in board.calls("nvpmodel"):
        if "-m" in call["argv"]:
            assert call["root"] and call["stdin"] in (None, "NO\n")
        else:
            assert call["stdin"] is None
    assert all(call["root"] for call in board.calls("jetson_clocks") if call["argv"] != ["--show"])
    # the profile (auto-detected) agrees with the board's conf
    assert "profile: {} ".format(board.spec["profile"]) in lines[0]
    assert not [line for line in lines if "differs from the board" in line]
    with open(os.path.join(out_dir, "results.csv")) as handle:
        records = list(csv.DictReader(handle))
    assert len(records) == len(live)
    assert set(CSV_COLUMNS) <= set(records[0])
    assert records[0]["profile"] == board.spec["profile"] and records[0]["power_total_w"]
    assert not [f for f in os.listdir(out_dir) if f.endswith(".tmp")]


@pytest.mark.parametrize("name, locked_before", [("orin-nano-8gb", False), ("nano-4gb", True)])
def test_locked_clocks_are_restored(fake_board, fast_sampling, tmp_path, name, locked_before):
    board = fake_board(name, locked=locked_before, fan_pwm=42)
    lines = []
    outcome = run_sweep([_model(tmp_path)], clocks="max", settle_s=0, repeats=1, out_dir=str(tmp_path / "out"),
                        bench=stubbench.make_bench(), engine_builder=stubbench.fake_engine_builder,
                        echo=lines.append, **FAST)
    assert outcome.status == "complete" and len(outcome.rows) >= 2
    argvs = [call["argv"] for call in board.calls("jetson_clocks")]
    assert argvs[1][0] == "--store"                       # stored before anything was locked
    assert argvs.count([]) == len(outcome.rows)           # locked once per mode
    assert argvs[-1][0] == "--restore"
    assert board.state()["locked"] is locked_before and board.state()["fan_pwm"] == 42
    assert board.state()["mode"] == board.default_mode
    assert outcome.restore["mode"]["ok"] and outcome.restore["clocks"]["ok"]
    if locked_before:
        assert any("already locked" in line for line in lines)


def test_throttling_is_flagged_from_temperatures(fake_board, fast_sampling, tmp_path):
    board = fake_board("agx-orin-64gb")
    outcome = run_sweep([_model(tmp_path)], settle_s=0, repeats=1, temp_limit_c=50.0, out_dir=str(tmp_path / "out"),
                        bench=stubbench.make_bench(), engine_builder=stubbench.fake_engine_builder,
                        echo=lambda line: None, **FAST)
    row = outcome.rows[0]
    # the replayed R36.4.4 capture reads cpu@52.562C
    assert row["throttled"] is True
    assert row["throttle_reasons"] == ["temperature 52.6 C on cpu reached the 50 C limit"]
    assert board.state()["mode"] == 2


def test_ina3221_power_source(fake_board, fast_sampling, tmp_path):
    board = fake_board("orin-nano-8gb")
    board.add_ina3221_hwmon("1-0040", [("VDD_IN", 5000, 1200), ("VDD_CPU_GPU_CV", 5000, 400), ("VDD_SOC", 5000, 300)])
    lines = []
    outcome = run_sweep([_model(tmp_path)], modes="1", settle_s=0, repeats=1, out_dir=str(tmp_path / "out"),
                        bench=stubbench.make_bench(), engine_builder=stubbench.fake_engine_builder,
                        echo=lines.append, **FAST)
    power = outcome.rows[0]["power"]
    assert power["source"] == "ina3221" and power["total_rail"] == "VDD_IN"
    assert power["total_w"] == pytest.approx(6.0) and power["rails_w"]["VDD_SOC"] == pytest.approx(1.5)
    assert outcome.rows[0]["telemetry"]["samples"] >= 1   # tegrastats still runs for temperatures and clocks
    assert any("INA3221" in line for line in lines)


def test_precisions_build_one_engine_each(fake_board, fast_sampling, tmp_path):
    fake_board("orin-nx-16gb")
    built = []

    def builder(onnx, engine, precision):
        built.append(precision)
        return stubbench.fake_engine_builder(onnx, engine, precision)

    outcome = run_sweep([_model(tmp_path, "m2")], modes="4", precisions="fp32,fp16", settle_s=0, repeats=1,
                        out_dir=str(tmp_path / "out"), bench=stubbench.make_bench(), engine_builder=builder,
                        echo=lambda line: None, **FAST)
    assert built == ["fp32", "fp16"]
    by_precision = {row["precision"]: row for row in outcome.rows}
    assert by_precision["fp16"]["throughput_items_per_s"] == stubbench.expected_fps("m2", 4, precision="fp16")
    assert by_precision["fp16"]["engine_path"].endswith("m2.fp16.engine")


@pytest.mark.parametrize("plugins", [None, "auto", "off"])
def test_sweep_builds_with_the_requested_plugin_mode(fake_board, fast_sampling, tmp_path, monkeypatch, plugins):
    """The default builder is `edgeattn build`'s API with `--plugins` passed through (None: build's device default,
    auto where candidates can be timed), and the mode is kept in the resume state."""
    import json

    import edgeattn.engine.build as engine_build

    fake_board("orin-nx-16gb")
    calls = []

    def build_engine(onnx, engine, precision="fp32", plugin_mode="on", **kwargs):
        calls.append(plugin_mode)
        return stubbench.fake_engine_builder(onnx, engine, precision)

    monkeypatch.setattr(engine_build, "build_engine", build_engine)
    out_dir = tmp_path / "out"
    run_sweep([_model(tmp_path, "m3")], modes="4", settle_s=0, repeats=1, out_dir=str(out_dir),
              bench=stubbench.make_bench(), plugin_mode=plugins, echo=lambda line: None, **FAST)
    assert calls == [plugins]
    assert json.loads((out_dir / "sweep-state.json").read_text())["options"]["plugins"] == plugins


def test_profile_mismatch_warns_and_the_board_wins(fake_board, fast_sampling, tmp_path):
    # an Orin Nano 4GB profile forced onto an Orin Nano 8GB Super board: IDs and names come from the board's conf
    board = fake_board("orin-nano-8gb")
    lines = []
    outcome = run_sweep([_model(tmp_path)], profile="orin-nano-4gb", modes="0", settle_s=0, repeats=1,
                        out_dir=str(tmp_path / "out"), bench=stubbench.make_bench(),
                        engine_builder=stubbench.fake_engine_builder, echo=lines.append, **FAST)
    warnings = [line for line in lines if line.startswith("warning: profile orin-nano-4gb differs from the board")]
    assert "warning: profile orin-nano-4gb differs from the board: board mode 0 is named '15W'; the profile's super " \
           "table calls it '10W'" in warnings
    assert [(r["mode_id"], r["mode_name"]) for r in outcome.rows] == [(0, "15W")]
    assert outcome.rows[0]["mode_budget_w"] == 15      # from the board's mode name, not the profile's 10W
    assert board.state()["mode"] == board.default_mode
