"""What injecting faults into sweeps found (benchmarks/sweep_faults.py), each kept as a test of its own."""
import json
import math
import os

import pytest

import stubbench
from edgeattn.errors import EdgeAttnError
from edgeattn.jetson.tegrastats import parse_line
from edgeattn.sweep import run_sweep, telemetry
from jetson_support import fake_board, fast_sampling  # noqa: F401,E402  (fixtures)
from sweep_timing import FAST_INTERVAL_MS


class _Sampler(object):
    source = "tegrastats"
    interval_s = 0.1

    def __init__(self, times, running=True):
        self.times = times
        self.running = running
        self.stopped = False

    def samples(self, since=None, until=None):
        line = parse_line("VDD_IN 5000mW/5000mW")
        return [(t, line) for t in self.times if since is None or t >= since]

    def stop(self):
        self.stopped = True


@pytest.mark.parametrize("sampler, named", [
    (_Sampler([100.0, 100.1], running=False), "tegrastats exited during the sweep"),   # was: no word of it
    (_Sampler([100.0, 100.1]), "tegrastats stopped printing samples 10 s before the end"),
    (_Sampler([]), "tegrastats stopped printing samples 10 s before the end of the sweep: no power samples from "
                   "the start"),
    (_Sampler([109.9]), None),                                                          # delivering to the end
])
def test_a_sampler_that_stopped_delivering_is_named_when_the_sweep_stops(sampler, named):
    tele = telemetry.Telemetry(power=sampler, board=sampler)
    tele.started_unix = 100.0
    problems = tele.stop(clock=lambda: 110.0)
    assert sampler.stopped
    assert (problems == []) if named is None else (len(problems) == 1 and named in problems[0]), problems


def test_restore_retries_a_board_command_that_failed_once(fake_board, fast_sampling, tmp_path, monkeypatch):
    """nvpmodel failing once while the original mode is put back left the board in the sweep's last mode."""
    board = fake_board("orin-nano-8gb", mode=0)
    calls = len([c for c in board.calls("nvpmodel")])
    model = tmp_path / "m1.onnx"
    model.write_bytes(b"placeholder")
    # a dry run counts the nvpmodel calls; the last -q-or--m of the restore is then made to fail
    lines = []
    run_sweep([str(model)], modes=[0, 1], repeats=1, settle_s=0, duration_s=0.05, warmup_s=0,
              interval_ms=FAST_INTERVAL_MS, out_dir=str(tmp_path / "dry"), bench=stubbench.make_bench(),
              engine_builder=stubbench.fake_engine_builder, echo=lines.append)
    total = len(board.calls("nvpmodel")) - calls
    restore_switch = total - 1  # the restore's `nvpmodel -m 0` (a -q follows it)
    monkeypatch.setenv("FAKE_FAULT", "nvpmodel:fail:{}".format(restore_switch))
    board.update_state(mode=0)
    for name in os.listdir(board.state_dir):
        if name.startswith("fault-count"):
            os.unlink(os.path.join(board.state_dir, name))
    lines = []
    outcome = run_sweep([str(model)], modes=[0, 1], repeats=1, settle_s=0, duration_s=0.05, warmup_s=0,
                        interval_ms=FAST_INTERVAL_MS, out_dir=str(tmp_path / "out"), bench=stubbench.make_bench(),
                        engine_builder=stubbench.fake_engine_builder, echo=lines.append)
    assert any("(fault: fail)" in " ".join(c["argv"]) for c in board.calls("nvpmodel"))
    assert board.state()["mode"] == 0 and outcome.restore["mode"]["ok"] is True
    assert any("failed" in line and "trying again" in line for line in lines), lines


def test_a_mode_is_recorded_done_only_once_its_rows_are_on_disk(fake_board, fast_sampling, tmp_path, monkeypatch):
    """The last row of a mode waited for its power samples while the resume file already called the mode done:
    a SIGKILL in between lost that row for good (--resume skips done modes)."""
    from edgeattn.sweep import runner
    from edgeattn.sweep import state as state_io

    fake_board("orin-nano-8gb", mode=0)
    seen = []
    real_save = state_io.save_state

    def checking_save(out_dir, state):
        path = os.path.join(out_dir, "rows.jsonl")  # where a finished row is on disk (results.json follows it)
        rows = [json.loads(line) for line in open(path).readlines()[1:]] if os.path.exists(path) else []
        for mode in state.get("done_modes", []):
            seen.append((mode, sum(1 for r in rows if r["mode_id"] == mode)))
        real_save(out_dir, state)

    monkeypatch.setattr(runner.state_io, "save_state", checking_save)
    model = tmp_path / "m1.onnx"
    model.write_bytes(b"placeholder")
    run_sweep([str(model)], modes=[0, 1], repeats=2, settle_s=0, duration_s=0.05, warmup_s=0,
              interval_ms=FAST_INTERVAL_MS, out_dir=str(tmp_path / "out"), bench=stubbench.make_bench(),
              engine_builder=stubbench.fake_engine_builder, echo=lambda line: None)
    assert seen and all(count == 2 for _, count in seen), seen


@pytest.mark.parametrize("option, value", [("settle_s", float("nan")), ("duration_s", float("inf")),
                                           ("repeats", 0), ("repeats", 2.5), ("modes", "some"),
                                           ("models", [None]), ("precisions", "fp32"), ("batch", True)])
def test_a_resume_file_with_a_bad_option_is_one_line(tmp_path, option, value):
    from edgeattn.sweep import runner
    from edgeattn.sweep.state import save_state

    options = {"models": [str(tmp_path / "m.onnx")], "profile": "host-cpu", "modes": [1], "precisions": ["fp32"],
               "backend": "auto", "clocks": "default", "settle_s": 0.0, "repeats": 1, "allow_reboot": False,
               "duration_s": 1.0, "warmup_s": 0.0, "batch": 1, "power_source": "auto", "interval_ms": 500,
               "temp_limit_c": 85.0, "plugins": None}
    state = {"options": dict(options), "plan": [1], "original": {"mode": None, "clocks_store": None}}
    save_state(str(tmp_path), state)
    assert runner._verified_resume_state(json.load(open(str(tmp_path / "sweep-state.json"))), str(tmp_path))
    state["options"][option] = value
    save_state(str(tmp_path), state)
    with pytest.raises(EdgeAttnError) as caught:
        runner._verified_resume_state(json.load(open(str(tmp_path / "sweep-state.json"))), str(tmp_path))
    assert "the option {!r} must be".format(option) in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("where", ["done_modes", "skipped", "restore", "original"])
@pytest.mark.parametrize("odd", ["NaN", "-Infinity", "1e309"])
def test_a_resume_file_with_a_non_finite_number_anywhere_is_one_line(tmp_path, where, odd):
    """Found by fuzzing: NaN in the fields --resume does not check (done_modes, skipped, restore reports, the
    original board state) was taken in and written back; the sweep writes every number finite."""
    from edgeattn.sweep.state import load_state, save_state

    state = {"schema": "edgeattn.sweep-state/1", "options": {"models": ["m.onnx"]}, "plan": [1], "done_modes": [1],
             "skipped": [], "restore": {"mode": {"ok": True}}, "original": {"mode": None, "clocks_locked": False}}
    save_state(str(tmp_path), state)
    assert load_state(str(tmp_path))["done_modes"] == [1]
    text = (tmp_path / "sweep-state.json").read_text()
    damaged = {"done_modes": ("[\n    1\n  ]", "[{}]"), "skipped": ("[]", "[{}]"),
               "restore": ('"ok": true', '"ok": {}'), "original": ('"clocks_locked": false', '"clocks_locked": {}')}
    before, after = damaged[where]
    assert before in text
    (tmp_path / "sweep-state.json").write_text(text.replace(before, after.format(odd)))
    with pytest.raises(EdgeAttnError) as caught:
        load_state(str(tmp_path))
    message = caught.value.format_message()
    assert "it is not JSON ({} is no number of a record edgeattn writes)".format(odd) in message
    assert "\n" not in message


def test_trtexec_banner_with_a_huge_version_number_is_no_version():
    from edgeattn.trtexec.version import parse_banners, version_from_output

    text = "&&&& RUNNING TensorRT.trtexec [TensorRT v{}] # trtexec\n".format("9" * 5001)
    assert parse_banners(text) == [] and version_from_output(text) is None  # was ValueError (int digit limit)
    line = "[01/15/2026-07:20:09] [I] TensorRT version: {}.1\n".format("9" * 5001)
    assert version_from_output(line) is None
    assert math.isclose(float(str(version_from_output("[01/15/2026-07:20:09] [I] TensorRT version: 10.3.0\n"))[:4]),
                        10.3)


def _placeholder_sweep(tmp_path, name, lines, **options):
    model = tmp_path / "m1.onnx"
    model.write_bytes(b"placeholder")
    return run_sweep([str(model)], modes=[0, 1], repeats=1, settle_s=0, duration_s=0.05, warmup_s=0,
                     interval_ms=FAST_INTERVAL_MS, out_dir=str(tmp_path / name), bench=stubbench.make_bench(),
                     engine_builder=stubbench.fake_engine_builder, echo=lines.append, **options)


def test_clocks_locked_before_the_sweep_are_stored_after_a_failed_store(fake_board, fast_sampling, tmp_path,
                                                                        monkeypatch):
    """`jetson_clocks --store` timing out once (a loaded board) left the clocks unstored; the mode switch unlocked
    them and nothing locked them again, while the restore reported success."""
    board = fake_board("orin-nano-8gb", mode=0, locked=True)
    monkeypatch.setenv("FAKE_FAULT", "jetson_clocks:fail:2")  # --show, then the --store fails once
    lines = []
    outcome = _placeholder_sweep(tmp_path, "out", lines)
    assert board.state()["locked"] is True and board.state()["mode"] == 0
    assert outcome.restore["clocks"]["ok"] is True
    assert any("jetson_clocks --store failed" in line and "trying again" in line for line in lines), lines


def test_clocks_locked_before_the_sweep_and_never_stored_are_locked_again(fake_board, fast_sampling, tmp_path,
                                                                          monkeypatch):
    from edgeattn.sweep import controllers

    board = fake_board("orin-nano-8gb", mode=0, locked=True)

    def no_store(*args, **kwargs):
        raise EdgeAttnError("jetson_clocks --store failed: no space left")

    monkeypatch.setattr(controllers.clocks_io, "store", no_store)
    lines = []
    outcome = _placeholder_sweep(tmp_path, "out", lines)
    assert board.state()["mode"] == 0 and board.state()["locked"] is True  # was: left unlocked, reported ok
    assert outcome.restore["clocks"] == {"ok": True, "detail": "locked again with jetson_clocks, as before the "
                                                               "sweep (they could not be stored)"}


def test_samples_no_window_needs_are_dropped(monkeypatch, tmp_path):
    """Every tegrastats sample of a sweep stayed in memory (about 4 KiB each: 40 KiB a second at the tests' 100 ms,
    170 MB over six hours at 500 ms; benchmarks/long_sweep.py measured RSS growing 139 KiB per measurement)."""
    from edgeattn.jetson.samples import SampleBuffer
    from edgeattn.jetson.tegrastats import TegrastatsSampler
    from edgeattn.sweep import runner
    from edgeattn.sweep.results import ResultStore

    sampler = TegrastatsSampler.__new__(TegrastatsSampler)
    sampler._buffer, sampler.interval_s, sampler.source = SampleBuffer(), 0.1, "tegrastats"
    for i in range(300):
        sampler._buffer.add(1000.0 + i, parse_line("VDD_IN 5000mW/5000mW"))
    sampler._process = type("Running", (), {"poll": lambda self: None})()
    tele = telemetry.Telemetry(power=sampler, board=sampler)

    key = {"model_key": "m", "mode_id": 0, "precision_requested": "fp32"}
    pending = [dict(key, repeat=1, window={"start_unix": 1250.0, "end_unix": 1251.0}, throughput_items_per_s=1.0),
               dict(key, repeat=2, window={"start_unix": 1290.0, "end_unix": 1400.0}, throughput_items_per_s=1.0)]
    store = ResultStore(str(tmp_path))
    runner._flush(pending, tele, store, {"temp_limit_c": 85.0}, wait=False)
    # the first row was covered and saved, the second still waits for samples after its end: what stays is from
    # the margin before the oldest window still needed (the first row's end bounds it from below)
    assert len(store.rows) == 1 and len(pending) == 1
    kept = [t for t, _ in sampler.samples()]
    assert min(kept) == 1251.0 - runner.KEEP_SAMPLES_S and len(kept) == 300 - (1251 - 60 - 1000)


def test_a_resumed_sweep_still_lists_the_modes_it_skipped(fake_board, fast_sampling, tmp_path):
    """Killed before results.json was first written, a sweep's resume wrote results.json without the mode it had
    skipped for a reboot: that mode's rows were missing with no reason (sweep_faults.py, SIGKILL)."""
    from edgeattn.sweep import state as state_io

    board = fake_board("orin-nano-8gb-original", mode=0)  # 0 and 1 need a reboot between them
    lines = []
    outcome = _placeholder_sweep(tmp_path, "out", lines)
    assert [s["mode_id"] for s in outcome.skipped] == [1]
    out = str(tmp_path / "out")
    state = state_io.load_state(out)
    state.update(status="running", done_modes=[])  # as a kill left it, before any row was saved
    state_io.save_state(out, state)
    os.unlink(os.path.join(out, "results.json"))
    board.update_state(mode=0)
    resumed = run_sweep([], resume=True, out_dir=out, bench=stubbench.make_bench(),
                        engine_builder=stubbench.fake_engine_builder, echo=lines.append)
    data = json.load(open(os.path.join(out, "results.json")))
    assert [s["mode_id"] for s in data["skipped"]] == [1] and "reboot" in data["skipped"][0]["reason"]
    assert [r["mode_id"] for r in resumed.rows] == [0]
