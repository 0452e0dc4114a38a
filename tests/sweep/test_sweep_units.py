"""Pieces of the sweep: plan order, mode budgets, settling, throttling flags, results files."""
import csv
import os

import pytest

from jetson_support import capture
from edgeattn.jetson.tegrastats import parse_line
from edgeattn.sweep import results, telemetry
from edgeattn.sweep.controllers import SweepMode, budget_from_name
from edgeattn.sweep.plan import order_modes, parse_modes
from edgeattn.sweep.runner import _attach_power


def test_plan_starts_with_the_current_mode_and_groups_reboots():
    masks = {0: 0, 1: 248, 2: 240, 3: 0}                 # AGX Orin 64GB (nvpmodel_p3701_0000.conf)
    modes = [SweepMode(i, "m{}".format(i), group=[masks[i]]) for i in range(4)]
    plan = order_modes(modes, 2, lambda a, b: masks[a] != masks[b])
    assert [m.id for m in plan] == [2, 0, 3, 1]


def test_parse_modes_and_budgets():
    assert parse_modes("all") == "all" and parse_modes("0, 2,3") == [0, 2, 3]
    assert budget_from_name("MODE_15W") == 15 and budget_from_name("7W_AI") == 7 and budget_from_name("25W") == 25
    assert budget_from_name("MAXN") is None and budget_from_name("MAXN_SUPER") is None
    assert budget_from_name("MODE_30W_6CORE") == 30


class _FakeSampler(object):
    source = "tegrastats"
    interval_s = 0.5
    running = True

    def __init__(self, timed):
        self.timed = timed

    def samples(self, since=None, until=None):
        return [(t, s) for t, s in self.timed if (since is None or t >= since) and (until is None or t <= until)]


class _Clock(object):
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def _sample(temp, freq=612, util=99):
    return parse_line("GR3D_FREQ {}%@[{}] gpu@{}C VDD_IN 5000mW/5000mW".format(util, freq, temp))


def test_settle_waits_for_stable_temperature_and_clock():
    clock = _Clock()
    timed = [(1000.0 + 0.5 * i, _sample(50.0 + (2.0 if i < 6 else 0.0) * (6 - i))) for i in range(60)]
    result = telemetry.settle(telemetry.Telemetry(board=_FakeSampler(timed)), 20.0, clock=clock, sleep=clock.sleep)
    assert result["settled"] is True and 5.0 <= result["waited_s"] < 20.0


def test_settle_gives_up_at_the_cap():
    clock = _Clock()
    timed = [(1000.0 + 0.5 * i, _sample(40.0 + i)) for i in range(60)]   # heating up all the time
    result = telemetry.settle(telemetry.Telemetry(board=_FakeSampler(timed)), 6.0, clock=clock, sleep=clock.sleep)
    assert result["settled"] is False and result["waited_s"] >= 6.0


def test_settle_without_telemetry_waits_the_cap():
    clock = _Clock()
    result = telemetry.settle(None, 3.0, clock=clock, sleep=clock.sleep)
    assert result["settled"] is None and result["waited_s"] == 3.0
    assert telemetry.settle(None, 0, clock=clock, sleep=clock.sleep)["waited_s"] == 0.0


class _LateSampler(_FakeSampler):
    """Delivers its samples only once the clock reaches each sample's time (a tool that starts late)."""

    def __init__(self, timed, clock):
        super().__init__(timed)
        self.clock = clock

    def samples(self, since=None, until=None):
        arrived = [(t, s) for t, s in self.timed if t <= self.clock()]
        return [(t, s) for t, s in arrived if (since is None or t >= since) and (until is None or t <= until)]


def test_first_samples_are_waited_for_before_measuring():
    clock = _Clock()
    late = _LateSampler([(1001.7, _sample(50.0)), (1002.2, _sample(50.0))], clock)
    tele = telemetry.Telemetry(power=late, board=late)
    assert tele.wait_for_first_samples(clock=clock, sleep=clock.sleep) is True
    assert 1001.7 <= clock.now < 1001.7 + 0.2


def test_first_samples_wait_is_bounded_and_skips_a_stopped_sampler():
    clock = _Clock()
    silent = _LateSampler([], clock)
    tele = telemetry.Telemetry(board=silent)
    assert tele.wait_for_first_samples(timeout_s=3.0, clock=clock, sleep=clock.sleep) is False
    assert 1003.0 <= clock.now < 1003.2
    silent.running = False
    started = clock.now
    assert tele.wait_for_first_samples(clock=clock, sleep=clock.sleep) is False and clock.now == started
    assert telemetry.Telemetry().wait_for_first_samples(clock=clock, sleep=clock.sleep) is True  # host CPU


def test_throttling_on_the_real_orin_nano_busy_line():
    busy = parse_line(capture("tegrastats/orin_nano_super_jp62.log").splitlines()[1])
    tele = telemetry.Telemetry(board=_FakeSampler([(10.0, busy)]))
    _, window = tele.window(9.0, 10.0)
    assert window["gpu_freq_busy_min_mhz"] == 612 and window["temp_max_c"] == 58.625
    # locked at MAXN_SUPER's 1020 MHz but running at 612 MHz: a clock drop
    flag, reasons = telemetry.throttling(window, temp_limit_c=85.0, reference_gpu_mhz=1020)
    assert flag is True and reasons == ["GPU clock dropped to 612 MHz while busy (reference 1020 MHz)"]
    flag, reasons = telemetry.throttling(window, temp_limit_c=58.0)
    assert flag is True and reasons[0].startswith("temperature 58.6 C on gpu")
    assert telemetry.throttling(window, temp_limit_c=85.0) == (False, [])
    assert telemetry.throttling(None, 85.0) == (None, [])


def test_an_idle_sample_in_the_window_is_not_a_clock_drop():
    """The real Orin Nano Super idle line (GR3D 0% at 305 MHz) and busy line (99% at 612 MHz) in one window: only
    the busy one says what clock the benchmark ran at, so the busy minimum is 612 MHz and nothing throttled."""
    idle, busy = [parse_line(line) for line in capture("tegrastats/orin_nano_super_jp62.log").splitlines()]
    assert (idle.gpu_util_pct, idle.gpu_freq_mhz, busy.gpu_util_pct, busy.gpu_freq_mhz) == (0, 305, 99, 612)
    # received at 10.0 and 10.5 (interval 0.5 s): their middles 9.75 and 10.25 both lie in [9.5, 10.5]
    tele = telemetry.Telemetry(board=_FakeSampler([(10.0, idle), (10.5, busy)]))
    _, window = tele.window(9.5, 10.5)
    assert window["samples"] == 2 and window["gpu_freq_min_mhz"] == 305 and window["gpu_freq_max_mhz"] == 612
    assert window["gpu_freq_busy_min_mhz"] == 612
    assert telemetry.throttling(window, temp_limit_c=85.0) == (False, [])
    assert telemetry.throttling(window, temp_limit_c=85.0, reference_gpu_mhz=612) == (False, [])


def _power_sampler(total_mw, times):
    return _FakeSampler([(t, parse_line("VDD_IN {0}mW/{0}mW".format(total_mw))) for t in times])


def test_energy_per_item_of_a_batched_row_divides_by_items_not_batches():
    """Throughput is in items per second (batch x iterations / time), so W / (items/s) is J per item whatever the
    batch: 8 W at 40 items/s (10 batches of 4 per second) is 0.2 J per item and 5 items/s per W."""
    tele = telemetry.Telemetry(power=_power_sampler(8000, [100.5, 101.0, 101.5, 102.0]))
    row = {"batch": 4, "throughput_items_per_s": 40.0, "window": {"start_unix": 100.0, "end_unix": 102.0},
           "reference_gpu_mhz": None}
    _attach_power(row, tele, {"temp_limit_c": 85.0})
    assert row["power"]["total_w"] == pytest.approx(8.0) and row["power"]["total_rail"] == "VDD_IN"
    assert row["energy_per_item_j"] == pytest.approx(8.0 / 40.0)
    assert row["items_per_s_per_w"] == pytest.approx(40.0 / 8.0)
    # energy per item x items per second is the power again
    assert row["energy_per_item_j"] * row["throughput_items_per_s"] == pytest.approx(row["power"]["total_w"])


def test_results_csv_energy_and_efficiency_columns_hold_their_own_values(tmp_path):
    """6 W at 10 items/s: 0.6 J per item and 1.6667 items/s per W, each under its own column of results.csv."""
    row = _row("a", 0, 1, {"VDD_IN": 6.0})
    row.update({"energy_per_item_j": 6.0 / 10.0, "items_per_s_per_w": 10.0 / 6.0})
    store = results.ResultStore(str(tmp_path))
    store.add(row)
    store.save()
    with open(store.csv_path) as handle:
        record = list(csv.DictReader(handle))[0]
    assert float(record["power_total_w"]) == 6.0 and float(record["throughput_items_per_s"]) == 10.0
    assert float(record["energy_per_item_j"]) == pytest.approx(0.6)
    assert float(record["items_per_s_per_w"]) == pytest.approx(10.0 / 6.0, rel=1e-6)


def _row(model, mode, repeat, rails):
    return {"model": model, "model_key": "/m/" + model, "precision": "fp32", "precision_requested": "fp32",
            "mode_id": mode, "mode_name": "M{}".format(mode), "repeat": repeat, "throughput_items_per_s": 10.0,
            "latency_ms": {"mean": 100.0, "p99": 120.0}, "power": {"source": "tegrastats", "rails_w": rails,
                                                                  "total_w": sum(rails.values())},
            "throttled": False, "throttle_reasons": []}


def test_results_files_are_written_atomically_with_rail_columns(tmp_path):
    store = results.ResultStore(str(tmp_path), context={"profile": "x", "board": {"model": "B"}})
    store.add(_row("a", 0, 1, {"VDD_IN": 5.0}))
    store.add(_row("b", 1, 1, {"VDD_IN": 6.0, "VDD_SOC": 1.0}))
    store.save()
    with open(store.csv_path) as handle:
        records = list(csv.DictReader(handle))
    header = open(store.csv_path).readline().strip().split(",")
    at = header.index("power_total_w")
    assert header[at + 1:at + 3] == ["power_VDD_IN_w", "power_VDD_SOC_w"]
    assert records[0]["power_VDD_SOC_w"] == "" and records[1]["power_VDD_SOC_w"] == "1.0"
    assert records[1]["latency_p99_ms"] == "120.0" and records[0]["board_model"] == "B"
    assert results.load_results(str(tmp_path))["rows"][1]["model"] == "b"
    assert sorted(os.listdir(str(tmp_path))) == ["results.csv", "results.json", "rows.jsonl"]
    assert results.row_key(store.rows[0]) == ("/m/a", 0, "fp32", 1)


def test_load_results_errors(tmp_path):
    from edgeattn.errors import EdgeAttnError
    with pytest.raises(EdgeAttnError, match="no sweep results"):
        results.load_results(str(tmp_path))
    (tmp_path / "results.json").write_text("{\"schema\": \"other\"}")
    with pytest.raises(EdgeAttnError, match="not an edgeattn sweep result"):
        results.load_results(str(tmp_path))


def _keyed_row(repeat, precision="fp32", mode=2):
    """The fields of a row that identify a measurement for --resume: (model key, mode, requested precision,
    repeat)."""
    return {"model_key": "/m/a.onnx", "mode_id": mode, "precision_requested": precision, "repeat": repeat}


def test_each_repeat_is_its_own_finished_measurement(tmp_path):
    store = results.ResultStore(str(tmp_path))
    for row in [_keyed_row(1), _keyed_row(2), _keyed_row(1, "fp16"), _keyed_row(1, mode=0)]:
        store.add(row)
    assert results.row_key(_keyed_row(3)) == ("/m/a.onnx", 2, "fp32", 3)
    assert store.done_keys() == {("/m/a.onnx", 2, "fp32", 1), ("/m/a.onnx", 2, "fp32", 2),
                                 ("/m/a.onnx", 2, "fp16", 1), ("/m/a.onnx", 0, "fp32", 1)}
