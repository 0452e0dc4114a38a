"""Locks: one sweep per directory and one board-changing process per board, refused with the holder's PID; a lock
left by a dead process is simply taken over; a sweep that fails its checks leaves no directory behind."""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from unittest import mock

import pytest

from security_support import one_error_line
from edgeattn._io import LockBusy, exclusive_lock
from edgeattn.errors import EdgeAttnError
from edgeattn.jetson import clocks, nvpmodel
from edgeattn.jetson import lock as board_lock_module
from edgeattn.sweep import run_sweep, runner

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(TESTS)
DRIVER = os.path.join(TESTS, "sweep", "sweep_driver.py")
sys.path.insert(0, os.path.join(TESTS, "sweep"))
import stubbench  # noqa: E402


def _model(tmp_path, name="m1", suffix=".onnx"):
    path = tmp_path / (name + suffix)
    path.write_bytes(b"placeholder model for the stub benchmark")
    return str(path)


@pytest.fixture
def host(monkeypatch, tmp_path):
    """No Jetson here: the host-cpu profile, and the stub benchmark behind `edgeattn sweep`."""
    monkeypatch.setenv("EDGEATTN_JETSON_ROOT", str(tmp_path / "emptyroot"))
    for name in ("FAKE_JETSON_STATE", "FAKE_JETSON_BOARD", "EDGEATTN_SUDO", "EDGEATTN_TOOL_DIRS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(runner, "default_bench", lambda: stubbench.make_bench(sleep_s=0.01))
    monkeypatch.setattr(runner, "default_model_check", lambda *a, **k: runner._basic_model_check)


def _start_driver(args, env_extra=None):
    env = dict(os.environ)
    env.update(env_extra or {})
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen([sys.executable, DRIVER] + [str(a) for a in args], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)


def held_until(release):
    """The driver's environment for a first sweep that holds its locks until ``release`` exists (the stub
    benchmark waits for it): the second sweep meets them however slowly this machine runs, and no test waits
    out a guessed duration."""
    return {"STUB_BENCH_HOLD_FILE": str(release)}


def _wait_for(predicate, process, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise AssertionError("the first sweep ended early: {}".format(process.communicate()))
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("the first sweep did not get going within {} s".format(timeout))


def _finish(process):
    try:
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    return stdout


def test_second_sweep_into_one_directory_is_refused_with_the_first_pid(host, tmp_path, invoke):
    out = tmp_path / "out"
    release = tmp_path / "release-first"
    first = _start_driver([_model(tmp_path), "--profile", "host-cpu", "--modes", "1", "--repeats", "1",
                           "--duration-s", "0.05", "--settle-s", "0", "-o", out], held_until(release))
    try:
        _wait_for(lambda: (out / "sweep-state.json").exists(), first)
        before = json.loads((out / "sweep-state.json").read_text())
        for extra in ([], ["--overwrite"], ["--resume"]):
            args = ["sweep"] + ([] if extra == ["--resume"] else [_model(tmp_path, "m2")]) + extra + ["-o", out]
            if extra != ["--resume"]:
                args[2:2] = ["--profile", "host-cpu", "--modes", "1", "--repeats", "1", "--duration-s", "0.01"]
            line = one_error_line(invoke(args))
            assert line == ("edgeattn: error: the sweep directory {} is in use by another edgeattn process (PID {}; "
                            "lock file {})".format(out, first.pid, out / runner.LOCK_FILE)), line
        assert json.loads((out / "sweep-state.json").read_text()) == before
    finally:
        release.touch()
        _finish(first)
    data = json.loads((out / "results.json").read_text())
    assert data["status"] == "complete" and [row["model"] for row in data["rows"]] == ["m1"]
    # once the first is done, the directory can be taken over as usual
    invoke(["sweep", _model(tmp_path, "m2"), "--profile", "host-cpu", "--modes", "1", "--repeats", "1",
            "--duration-s", "0.01", "--overwrite", "-o", out], expect=0)


def test_a_lock_left_by_a_dead_process_is_taken_over(host, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (out / runner.LOCK_FILE).write_text("{}\n".format(dead.pid))  # what a killed sweep or a reboot leaves
    outcome = run_sweep([_model(tmp_path)], profile="host-cpu", modes="1", settle_s=0, repeats=1, duration_s=0.01,
                        out_dir=str(out), bench=stubbench.make_bench(sleep_s=0.01), echo=lambda line: None)
    assert outcome.status == "complete"
    assert (out / runner.LOCK_FILE).read_text() == "{}\n".format(os.getpid())


def test_lock_is_held_exactly_while_the_block_runs(tmp_path):
    path = str(tmp_path / "x.lock")
    code = ("import sys; from edgeattn._io import exclusive_lock, LockBusy\n"
            "try:\n    with exclusive_lock(sys.argv[1], 'x'):\n        print('took it')\n"
            "except LockBusy as busy:\n    print('busy', busy.pid)\n")
    env = dict(os.environ, PYTHONPATH=REPO)

    def other():
        return subprocess.run([sys.executable, "-c", code, path], env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, universal_newlines=True, timeout=60).stdout.strip()

    with exclusive_lock(path, "x"):
        assert other() == "busy {}".format(os.getpid())
        with pytest.raises(LockBusy):  # a second open file description in this process is refused too
            with exclusive_lock(path, "x"):
                pass
    assert other() == "took it"


@contextlib.contextmanager
def fails_instead_of_hanging(seconds):
    """A lock that follows a symlink locks the file behind it, which is never the inode at the lock path, so
    exclusive_lock would retry forever: fail the test instead of hanging the suite."""
    def hung(signum, frame):
        raise AssertionError("still inside the block after {} s".format(seconds))

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_symlink_at_the_lock_path_is_not_followed(tmp_path):
    victim = tmp_path / "victim"
    os.symlink(str(victim), str(tmp_path / "x.lock"))
    with fails_instead_of_hanging(10), pytest.raises(EdgeAttnError, match="cannot open the lock file") as caught:
        with exclusive_lock(str(tmp_path / "x.lock"), "x"):
            pass
    assert "\n" not in caught.value.format_message() and not os.path.lexists(str(victim))


def test_second_sweep_on_one_board_is_refused_with_the_first_pid(fake_board, fast_sampling, tmp_path):
    board = fake_board("orin-nano-8gb")
    env = dict(board.env)
    release = tmp_path / "release-first"
    env.update(held_until(release), SWEEP_DRIVER_MIN_INTERVAL_MS=str(fast_sampling))
    first = _start_driver([_model(tmp_path, suffix=".engine"), "--modes", "2", "--settle-s", "0", "--repeats", "1",
                           "--duration-s", "0.05", "--interval-ms", str(fast_sampling), "-o", tmp_path / "first"],
                          env)
    second_out = tmp_path / "second"
    try:
        _wait_for(lambda: (tmp_path / "first" / "sweep-state.json").exists(), first)

        def touched(*args, **kwargs):
            raise AssertionError("the refused sweep changed the board")

        with mock.patch.object(nvpmodel, "set_mode", touched), mock.patch.object(clocks, "store", touched), \
                mock.patch.object(clocks, "lock", touched), mock.patch.object(clocks, "restore", touched), \
                pytest.raises(LockBusy) as caught:
            run_sweep([_model(tmp_path, "m2", ".engine")], modes="2", settle_s=0, repeats=1, duration_s=0.05,
                      interval_ms=fast_sampling, out_dir=str(second_out), bench=stubbench.make_bench(),
                      echo=lambda line: None)
        assert caught.value.pid == first.pid
        assert caught.value.format_message() == (
            "the board (power mode and clocks) is in use by another edgeattn process (PID {}; lock file {})".format(
                first.pid, os.path.join(env["EDGEATTN_LOCK_DIR"], board_lock_module.BOARD_LOCK_NAME)))
        assert not second_out.exists()  # refused before it wrote anything
    finally:
        release.touch()
        _finish(first)
    assert board.state()["mode"] == board.default_mode
    outcome = run_sweep([_model(tmp_path, "m2", ".engine")], modes="2", settle_s=0, repeats=1, duration_s=0.05,
                        interval_ms=fast_sampling, out_dir=str(second_out), bench=stubbench.make_bench(),
                        echo=lambda line: None)
    assert outcome.status == "complete" and board.state()["mode"] == board.default_mode


def test_a_sweep_that_fails_its_checks_leaves_no_directory(host, tmp_path, invoke):
    out = tmp_path / "out"
    line = one_error_line(invoke(["sweep", _model(tmp_path), "--profile", "no-such-board", "-o", out]))
    assert "unknown profile 'no-such-board'" in line
    assert not out.exists()
    out.mkdir()
    # found once the profile is known (its name is printed first): still before anything is written
    one_error_line(invoke(["sweep", _model(tmp_path), "--profile", "host-cpu", "--modes", "99", "-o", out]),
                   progress_allowed=True)
    assert os.listdir(str(out)) == []  # an existing directory stays, without a lock file
