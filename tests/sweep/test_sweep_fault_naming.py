"""Every fault a sweep meets is named where its user looks: in the row it cost (power.reason, results.csv's
power_reason), in the output, and in results.json's notes (an unattended sweep's terminal is not read). Found by
benchmarks/sweep_faults.py: a tegrastats that stalled left rows without power and no word why; a failed
``jetson_clocks --show`` was announced as "no output" whatever it said; a signal during the restore was answered
"please wait" without saying which signal arrived."""
import csv
import json
import os
import re
import signal

import pytest

import stubbench
from sweep_timing import FAST_INTERVAL_MS, scaled
from edgeattn.sweep import run_sweep
from edgeattn.sweep import signals, telemetry

DURATION_S = scaled(0.6)
CLOCK = r"\d\d:\d\d:\d\d\.\d"


def _sweep(tmp_path, lines, **extra):
    model = tmp_path / "m1.onnx"
    model.write_bytes(b"placeholder")
    kwargs = dict(modes=[0, 3], repeats=2, settle_s=0, duration_s=DURATION_S, warmup_s=0,
                  interval_ms=FAST_INTERVAL_MS, out_dir=str(tmp_path / "out"), bench=stubbench.make_bench(),
                  engine_builder=stubbench.fake_engine_builder, echo=lines.append)
    kwargs.update(extra)
    return run_sweep([str(model)], **kwargs)


def _files(tmp_path):
    out = str(tmp_path / "out")
    with open(os.path.join(out, "results.json")) as handle:
        data = json.load(handle)
    with open(os.path.join(out, "results.csv")) as handle:
        records = list(csv.DictReader(handle))
    return data, records


@pytest.mark.parametrize("fault, pattern", [
    ("stall", r"tegrastats printed no line after {} \(it still runs: stalled\)".format(CLOCK)),
    ("exit", r"tegrastats exited \(exit status 0\) and printed no line after {}".format(CLOCK)),
])
def test_rows_measured_after_tegrastats_failed_say_why_they_have_no_power(fake_board, fast_sampling, tmp_path,
                                                                         monkeypatch, fault, pattern):
    fake_board("agx-orin-64gb", mode=0)
    monkeypatch.setenv("FAKE_FAULT", "tegrastats:{}:1".format(fault))  # one line, then silence or exit
    lines = []
    outcome = _sweep(tmp_path, lines)
    assert outcome.status == "complete"
    data, records = _files(tmp_path)
    unpowered = [r for r in data["rows"] if r["power"]["total_w"] is None]
    assert len(unpowered) >= 3  # at most the first window saw the one line
    for row in unpowered:
        assert re.fullmatch(pattern, row["power"]["reason"]), row["power"]
    assert all("reason" not in r["power"] for r in data["rows"] if r["power"]["total_w"] is not None)
    assert [r["power_reason"] for r in records if not r["power_total_w"]] == [r["power"]["reason"] for r in unpowered]
    summary = [line for line in lines if re.fullmatch(r"warning: \d+ measurement\(s\) without power: " + pattern,
                                                      line)]
    assert summary and sum(int(line.split()[1]) for line in summary) == len(unpowered)
    assert [line[len("warning: "):] for line in summary] == [n for n in data["notes"] if "without power" in n]


def test_a_failed_jetson_clocks_show_is_announced_in_its_own_words(fake_board, fast_sampling, tmp_path,
                                                                   monkeypatch):
    board = fake_board("agx-orin-64gb", mode=0)
    monkeypatch.setenv("FAKE_FAULT", "jetson_clocks:fail:1")  # its first call: --show, before anything is stored
    lines = []
    outcome = _sweep(tmp_path, lines, clocks="max")
    assert "--show" in board.calls("jetson_clocks")[0]["argv"]
    expected = ("jetson_clocks --show failed (jetson_clocks: injected failure (FAKE_FAULT) (exit status 1)); trying "
                "again")
    assert outcome.status == "complete" and "warning: " + expected in lines
    data, _ = _files(tmp_path)
    assert expected in data["notes"]  # the files of the sweep name it too


def test_a_sweep_without_faults_has_no_warnings_in_its_notes(fake_board, fast_sampling, tmp_path):
    fake_board("agx-orin-64gb", mode=0)
    lines = []
    _sweep(tmp_path, lines)
    data, records = _files(tmp_path)
    assert not [line for line in lines if line.startswith("warning:")]
    assert all(r["power_total_w"] and not r["power_reason"] for r in records)
    assert all(not n.startswith(("warning", "jetson_clocks", "tegrastats ")) for n in data["notes"])


def test_a_signal_held_back_while_restoring_is_named(monkeypatch):
    lines = []
    with signals.hold_signals(lines.append) as received:
        os.kill(os.getpid(), signal.SIGTERM)
    assert received == [signal.SIGTERM]
    assert lines == ["SIGTERM received: restoring the original power mode and clocks; please wait"]


class _Sampler(object):
    source = "tegrastats"
    interval_s = 0.5

    def __init__(self, stamps, running=True, returncode=None):
        self._stamps, self.running, self.returncode = stamps, running, returncode

    def samples(self, since=None, until=None):
        return [(t, None) for t in self._stamps]


def test_no_power_reason_tells_a_stall_an_exit_and_a_short_window_apart():
    stalled = telemetry.no_power_reason(_Sampler([100.0]), 101.0, 102.0)
    assert re.fullmatch(r"tegrastats printed no line after {} \(it still runs: stalled\)".format(CLOCK), stalled)
    exited = telemetry.no_power_reason(_Sampler([100.0], running=False, returncode=1), 101.0, 102.0)
    assert re.fullmatch(r"tegrastats exited \(exit status 1\) and printed no line after {}".format(CLOCK), exited)
    never = telemetry.no_power_reason(_Sampler([], running=False), 101.0, 102.0)
    assert never == "tegrastats exited and printed no line before the window ended"
    short = telemetry.no_power_reason(_Sampler([100.0, 103.0]), 101.0, 101.01)
    assert short == "no tegrastats sample covers this 0.01 s window (interval 0.5 s)"
