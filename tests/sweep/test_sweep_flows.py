"""Sweep flows on the fakes: reboot-needed skips, reboot and resume, failure mid-sweep, SIGINT/SIGTERM."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import stubbench
from sweep_timing import FAST_INTERVAL_MS, scaled
from edgeattn.errors import EdgeAttnError
from edgeattn.jetson import clocks, default_root, nvpmodel
from edgeattn.sweep import run_sweep
from edgeattn.sweep import plan, runner, signals
from edgeattn.sweep.controllers import JetsonController

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DRIVER = os.path.join(HERE, "sweep_driver.py")
DURATION_S = scaled(0.6)  # > one sampling interval (sweep_timing)


def _model(tmp_path, name="m1"):
    path = tmp_path / "{}.onnx".format(name)
    path.write_bytes(b"onnx")
    return str(path)


def _kwargs(tmp_path, **extra):
    kwargs = dict(settle_s=0, repeats=1, duration_s=DURATION_S, interval_ms=FAST_INTERVAL_MS,
                  out_dir=str(tmp_path / "out"), bench=stubbench.make_bench(),
                  engine_builder=stubbench.fake_engine_builder, echo=lambda line: None)
    kwargs.update(extra)
    return kwargs


def _results(out_dir):
    with open(os.path.join(out_dir, "results.json")) as handle:
        return json.load(handle)


def test_reboot_needed_modes_are_skipped_with_a_clear_line(fake_board, fast_sampling, tmp_path):
    board = fake_board("agx-orin-64gb")
    lines = []
    outcome = run_sweep([_model(tmp_path)], **_kwargs(tmp_path, echo=lines.append))
    assert [row["mode_id"] for row in outcome.rows] == [2]
    assert "skip mode 1 MODE_15W: switching from MODE_30W to 1 MODE_15W needs a reboot (GPU power-gating masks " \
           "240 -> 248); pass --allow-reboot to include it" in lines
    # predicted from the masks: nvpmodel was never even asked to switch
    assert not [c for c in board.calls("nvpmodel") if "-m" in c["argv"]]
    assert board.state()["reboots"] == 0


def test_prompt_detected_at_run_time_is_answered_no_and_skipped(fake_board, fast_sampling, tmp_path, monkeypatch):
    # without the board's conf the prediction is unknown: the switch is tried and nvpmodel's prompt declined
    board = fake_board("orin-nano-4gb-original")
    monkeypatch.setattr(nvpmodel, "read_modes", lambda root=None, timeout=None: None)
    lines = []
    outcome = run_sweep([_model(tmp_path)], **_kwargs(tmp_path, echo=lines.append))
    assert [row["mode_id"] for row in outcome.rows] == [0]
    reasons = {entry["mode_id"]: entry["reason"] for entry in outcome.skipped}
    assert set(reasons) == {1, 2}
    assert reasons[1].startswith("nvpmodel asked for a reboot to switch to 1 7W_AI (answered NO)")
    assert any("cannot read the board's modes" in line for line in lines)
    prompts = [c["stdin"] for c in board.calls("nvpmodel") if "-m" in c["argv"]]
    assert prompts == ["NO\n", "NO\n"] and board.state()["mode"] == 0 and board.state()["reboots"] == 0


@pytest.mark.parametrize("self_reboot", [True, False])
def test_allow_reboot_saves_state_reboots_and_resumes(fake_board, fast_sampling, tmp_path, monkeypatch, self_reboot):
    board = fake_board("agx-orin-64gb")
    if not self_reboot:
        monkeypatch.setenv("FAKE_NVPMODEL_NO_SELF_REBOOT", "1")
    kwargs = _kwargs(tmp_path)
    outcome = run_sweep([_model(tmp_path)], allow_reboot=True, **kwargs)
    statuses = [outcome.status]
    # MODE_30W (current) first, then the {MAXN, 50W} group behind one reboot, then 15W behind another
    assert outcome.status == "rebooting" and [r["mode_id"] for r in outcome.rows] == [2]
    state = json.load(open(os.path.join(kwargs["out_dir"], "sweep-state.json")))
    assert state["status"] == "rebooting" and state["reboot_target"] == 0 and state["original"]["mode"]["id"] == 2
    assert board.state()["mode"] == 0 and board.state()["reboots"] == 1
    for _ in range(4):
        outcome = run_sweep([], resume=True, **kwargs)        # "after the reboot"
        statuses.append(outcome.status)
        if outcome.status == "complete":
            break
    assert statuses == ["rebooting", "rebooting", "complete"]
    assert sorted(r["mode_id"] for r in outcome.rows) == [0, 1, 2, 3]
    # at the end the original mode (another reboot group) is restored with one more reboot
    assert board.state()["mode"] == 2 and board.state()["reboots"] == 3
    assert outcome.restore["mode"]["ok"] is True
    assert [c["stdin"] for c in board.calls("nvpmodel") if "-m" in c["argv"]].count("YES\n") == 3
    assert len(board.calls("reboot")) == (0 if self_reboot else 3)
    assert board.live_tegrastats() == []


def test_failure_mid_sweep_restores_and_keeps_rows_then_resume_completes(fake_board, fast_sampling, tmp_path):
    board = fake_board("orin-nx-16gb")                      # live modes 4 (default), 0, 3
    kwargs = _kwargs(tmp_path, clocks="max")
    with pytest.raises(EdgeAttnError, match="stub benchmark failure on call 3"):
        run_sweep([_model(tmp_path)], **dict(kwargs, bench=stubbench.make_bench(fail_at=3)))
    data = _results(kwargs["out_dir"])
    assert data["status"] == "failed" and [r["mode_id"] for r in data["rows"]] == [4, 0]
    assert data["restore"]["mode"]["ok"] and data["restore"]["clocks"]["ok"]
    assert board.state()["mode"] == 4 and board.state()["locked"] is False
    assert board.live_tegrastats() == []
    outcome = run_sweep([], resume=True, **kwargs)
    assert outcome.status == "complete"
    assert [r["mode_id"] for r in outcome.rows] == [4, 0, 3]   # nothing measured twice
    assert board.state()["mode"] == 4 and board.state()["locked"] is False


class _InProcessBoard(object):
    """nvpmodel and jetson_clocks as the fake tools (tests/fakes) behave, in this process and without a
    subprocess per call: ``nvpmodel -m`` switches and drops any lock, ``jetson_clocks`` locks, ``--store`` records
    the lock state and ``--restore`` puts it back. ``calls`` is the order in which the tools ran."""

    def __init__(self, monkeypatch, conf_modes, mode, locked):
        self.names = {i: m["name"] for i, m in conf_modes.items()}
        self.mode, self.locked, self.stored, self.calls = mode, locked, None, []
        for module, name, function in (
                (nvpmodel, "current_mode", self.current_mode), (nvpmodel, "set_mode", self.set_mode),
                (clocks, "show", self.show), (clocks, "store", self.store), (clocks, "lock", self.lock),
                (clocks, "restore", self.restore), (clocks, "discard_store", lambda path: None)):
            monkeypatch.setattr(module, name, function)

    def current_mode(self, timeout=None):
        return nvpmodel.PowerMode(self.mode, self.names[self.mode])

    def set_mode(self, mode_id, accept_reboot=False, timeout=None):
        self.calls.append(("nvpmodel -m", mode_id))
        self.mode, self.locked = mode_id, False
        return nvpmodel.SwitchResult(mode_id, "switched", "", 0)

    def show(self, timeout=None, use_sudo=False):
        return {"locked": self.locked, "gpu": {"max_hz": 918000000}}

    def store(self, path=None, timeout=None):
        self.calls.append(("jetson_clocks --store", None))
        self.stored = self.locked
        return "/private/store/jetson_clocks.orig"

    def lock(self, timeout=None):
        self.calls.append(("jetson_clocks", None))
        self.locked = True

    def restore(self, path, timeout=None):
        self.calls.append(("jetson_clocks --restore", None))
        self.locked = self.stored


def _controller_away_from_the_original_mode(fake_board, monkeypatch, clocks_wanted, locked_before=False):
    """A JetsonController on the Orin NX 16GB (conf, profile) that recorded the original state and switched to
    another live mode, locking again there with ``--clocks max`` -- what a sweep has done when it fails or is
    interrupted in that mode. Returns (board, controller, original)."""
    spec = fake_board("orin-nx-16gb")                    # its root: device tree, release, nvpmodel.conf
    board = _InProcessBoard(monkeypatch, spec.conf_modes, spec.default_mode, locked_before)
    board.default_mode = spec.default_mode
    profile, detected = plan.resolve_board_profile("auto", default_root())
    controller = JetsonController(profile, default_root(), lambda line: None, board=detected)
    controller.current_mode_id()
    original = controller.capture_original(None, clocks_wanted)
    if clocks_wanted == "max":
        controller.lock_clocks()
    other = next(m for m in controller.modes() if m.id != spec.default_mode
                 and not controller.needs_reboot(spec.default_mode, m.id))
    assert controller.switch(other, False, original) == ("ready", None)
    if clocks_wanted == "max":
        controller.lock_clocks()                         # the sweep locks again in every mode
    assert board.mode == other.id
    return board, controller, original


def test_failed_or_interrupted_sweep_relocks_clocks_that_were_locked_before(fake_board, monkeypatch):
    """The user ran jetson_clocks before the sweep; a mode switch drops that lock (nvpmodel -m). Restoring after a
    failure or a signal (``final=False``) must put the stored clocks back too, not only at a complete end."""
    board, controller, original = _controller_away_from_the_original_mode(fake_board, monkeypatch, "default",
                                                                          locked_before=True)
    assert board.locked is False                         # the switch unlocked them
    report = controller.restore(original, final=False)
    assert board.mode == board.default_mode and board.locked is True
    assert report["mode"]["ok"] is True and report["clocks"]["ok"] is True
    assert board.calls[-1] == ("jetson_clocks --restore", None)


def test_clocks_we_locked_are_unlocked_before_every_mode_switch(fake_board, monkeypatch):
    """jetson_clocks pins the current mode's maxima (the script's usage text): each ``nvpmodel -m`` must come after the
    ``jetson_clocks --restore`` that undoes our own lock, on a switch and on the final restore."""
    board, controller, original = _controller_away_from_the_original_mode(fake_board, monkeypatch, "max")
    controller.restore(original, final=True)
    ours_locked = False
    for tool, argument in board.calls:
        if tool == "jetson_clocks":
            ours_locked = True
        elif tool == "jetson_clocks --restore":
            ours_locked = False
        elif tool == "nvpmodel -m":
            assert not ours_locked, "nvpmodel -m {} ran while our jetson_clocks lock was on".format(argument)
    assert [tool for tool, _ in board.calls].count("nvpmodel -m") == 2
    assert [tool for tool, _ in board.calls].count("jetson_clocks") == 2
    assert board.mode == board.default_mode and board.locked is False


def test_resume_refusals(fake_board, fast_sampling, tmp_path):
    fake_board("nano-4gb")
    kwargs = _kwargs(tmp_path)
    with pytest.raises(EdgeAttnError, match="nothing to resume"):
        run_sweep([], resume=True, **kwargs)
    run_sweep([_model(tmp_path)], **dict(kwargs, modes="0"))
    with pytest.raises(EdgeAttnError, match="already holds a sweep"):
        run_sweep([_model(tmp_path)], **kwargs)
    with pytest.raises(EdgeAttnError, match="pass the same models or none"):
        run_sweep([_model(tmp_path, "m2")], resume=True, **kwargs)


def test_signals_are_held_while_restoring():
    lines = []
    with signals.hold_signals(lines.append) as received:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
    assert received == [signal.SIGINT] and "please wait" in lines[0]


# -- a real process interrupted with SIGINT / SIGTERM ---------------------------------------------------------------
def _start_driver(board, args, **env_extra):
    env = dict(os.environ)
    env.update(board.env)
    env.update(env_extra)
    env["SWEEP_DRIVER_MIN_INTERVAL_MS"] = str(FAST_INTERVAL_MS)  # what fast_sampling does in this process
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen([sys.executable, DRIVER] + args, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)


def _wait_for_row_in_other_mode(out_dir, original, process, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise AssertionError("sweep ended early: {}".format(process.communicate()))
        try:
            rows = _results(out_dir)["rows"]
        except (OSError, ValueError):
            rows = []
        if any(row["mode_id"] != original for row in rows):
            return rows
        time.sleep(0.05)
    raise AssertionError("no measurement in another mode within {} s".format(timeout))


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_restores_mode_and_clocks_and_keeps_rows(fake_board, tmp_path, signum, code):
    board = fake_board("orin-nx-16gb", fan_pwm=99)
    out_dir = str(tmp_path / "out")
    process = _start_driver(board, [_model(tmp_path), "--clocks", "max", "--settle-s", "0", "--repeats", "2",
                                    "--duration-s", str(DURATION_S), "--interval-ms", str(FAST_INTERVAL_MS),
                                    "-o", out_dir])
    try:
        _wait_for_row_in_other_mode(out_dir, board.default_mode, process)
        # the board is away from its original mode (possibly between two modes, clocks already unlocked)
        assert board.state()["mode"] != board.default_mode
        assert [] in [call["argv"] for call in board.calls("jetson_clocks")]     # clocks were locked meanwhile
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == code, stderr
    state = board.state()
    assert state["mode"] == board.default_mode and state["locked"] is False and state["fan_pwm"] == 99
    data = _results(out_dir)
    assert data["status"] == "interrupted" and len(data["rows"]) >= 2
    assert data["restore"]["mode"]["ok"] and data["restore"]["clocks"]["ok"]
    assert "Traceback" not in stderr and "--resume -o {}".format(out_dir) in stderr
    assert board.live_tegrastats() == []
    # the interrupted sweep continues where it stopped
    kept = len(data["rows"])
    resumed = _start_driver(board, ["--resume", "-o", out_dir])
    stdout, stderr = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, stderr
    rows = _results(out_dir)["rows"]
    assert len(rows) == 6 and len(rows) > kept
    assert len({(r["mode_id"], r["repeat"]) for r in rows}) == 6
    assert board.state()["mode"] == board.default_mode and board.live_tegrastats() == []
