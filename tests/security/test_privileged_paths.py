"""Privileged steps take only paths edgeattn created, and privileged tools come from the system directories.

The two attacks on a sweep directory, replayed on the fake boards (tests/fakes): a resume file whose
``original.clocks_store`` names a file of the attacker's (``jetson_clocks --restore`` writes every ``node:value``
line of it as root), and a dangling symlink at ``DIR/jetson_clocks.orig`` (where ``--store`` used to write as
root). Both are refused or come to nothing, with one line.
"""
import json
import os
import stat
import sys

import pytest

import fakeharness
from security_support import one_error_line
from edgeattn import jetson
from edgeattn._subprocess import run_command
from edgeattn.errors import EdgeAttnError
from edgeattn.jetson import clocks
from edgeattn.sweep import run_sweep, runner

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TESTS, "sweep"))
import stubbench  # noqa: E402


def _model(tmp_path, name="m1"):
    path = tmp_path / "{}.engine".format(name)
    path.write_bytes(b"engine")
    return str(path)


def _stub_cli(monkeypatch, fail_at=None):
    monkeypatch.setattr(runner, "default_bench", lambda: stubbench.make_bench(fail_at=fail_at, sleep_s=0.05))
    monkeypatch.setattr(runner, "default_model_check", lambda *a, **k: runner._basic_model_check)


def _interrupted_sweep(board, tmp_path, interval_ms):
    """A sweep with --clocks max that failed after its first measurement: restored, resumable, and its resume
    file names the genuine clock store."""
    out = str(tmp_path / "out")
    with pytest.raises(EdgeAttnError, match="stub benchmark failure"):
        run_sweep([_model(tmp_path)], clocks="max", settle_s=0, repeats=2, duration_s=0.05, out_dir=out,
                  interval_ms=interval_ms, bench=stubbench.make_bench(fail_at=2, sleep_s=0.05),
                  echo=lambda line: None)
    state_file = os.path.join(out, "sweep-state.json")
    with open(state_file) as handle:
        state = json.load(handle)
    assert state["status"] == "failed" and clocks.store_problem(state["original"]["clocks_store"]) is None
    return out, state_file, state


def _restores_of(board, path):
    return [call for call in board.calls("jetson_clocks") if "--restore" in call["argv"] and path in call["argv"]]


@pytest.mark.parametrize("planted", ["attacker-file", "sweep-directory", "symlink-in-store", "other-owner-mode"])
def test_resume_refuses_a_clock_store_it_did_not_create(fake_board, fast_sampling, tmp_path, invoke, monkeypatch,
                                                         planted):
    board = fake_board("orin-nano-8gb")
    out, state_file, state = _interrupted_sweep(board, tmp_path, fast_sampling)
    genuine = state["original"]["clocks_store"]
    attacker = tmp_path / "attacker.conf"
    attacker.write_text("/etc/sudoers:ALL ALL=(ALL) NOPASSWD: ALL\n")
    if planted == "attacker-file":
        named = str(attacker)
    elif planted == "sweep-directory":  # where edgeattn used to keep it
        named = os.path.join(out, "jetson_clocks.orig")
        os.symlink(str(attacker), named)
    elif planted == "symlink-in-store":
        named = genuine
        os.unlink(genuine)
        os.symlink(str(attacker), genuine)
    else:
        named = genuine
        os.chmod(genuine, 0o666)
    state["original"]["clocks_store"] = named
    with open(state_file, "w") as handle:
        json.dump(state, handle)
    calls_before = len(board.calls())
    _stub_cli(monkeypatch)
    line = one_error_line(invoke(["sweep", "--resume", "-o", out]))
    assert line.startswith("edgeattn: error: refusing the clock store {} named in {}: ".format(named, state_file))
    assert "not handed to `jetson_clocks --restore` as root" in line
    # refused before touching the board: no tool ran at all, let alone a restore from the planted file
    assert board.calls()[calls_before:] == []
    assert _restores_of(board, str(attacker)) == []


def test_a_symlink_planted_in_the_sweep_directory_is_never_written_through(fake_board, fast_sampling, tmp_path):
    board = fake_board("orin-nano-8gb")
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    os.symlink(str(victim), str(out / "jetson_clocks.orig"))  # dangling: --store would create the victim as root
    outcome = run_sweep([_model(tmp_path)], clocks="max", settle_s=0, repeats=1, duration_s=0.05, out_dir=str(out),
                        interval_ms=fast_sampling, bench=stubbench.make_bench(sleep_s=0.05), echo=lambda line: None)
    assert outcome.status == "complete" and outcome.restore["clocks"]["ok"]
    assert not os.path.lexists(str(victim)) and os.readlink(str(out / "jetson_clocks.orig")) == str(victim)
    stores = [call["argv"][-1] for call in board.calls("jetson_clocks") if "--store" in call["argv"]]
    assert len(stores) == 1 and clocks.STORE_NAME == os.path.basename(stores[0])
    assert os.path.dirname(os.path.dirname(stores[0])) == os.path.realpath(os.path.join(board.base, "edgeattn-state",
                                                                                       "clocks"))
    assert not os.path.exists(stores[0])  # the finished sweep removed its store


def test_store_refuses_an_existing_name_with_one_line(fake_board, tmp_path):
    fake_board("nano-4gb")
    os.symlink(str(tmp_path / "victim"), str(tmp_path / "planted"))
    with pytest.raises(EdgeAttnError) as caught:
        clocks.store(str(tmp_path / "planted"))
    assert "\n" not in caught.value.format_message() and "already exists" in caught.value.format_message()
    assert not os.path.lexists(str(tmp_path / "victim"))


def _executable(path, body):
    path.write_text("#!/bin/sh\n" + body + "\n")
    os.chmod(str(path), 0o755)
    return str(path)


def test_tools_come_from_the_explicit_dirs_then_the_system_dirs_then_path(tmp_path, monkeypatch):
    system, on_path, explicit = (tmp_path / name for name in ("system", "path", "explicit"))
    for directory in (system, on_path, explicit):
        directory.mkdir()
        _executable(directory / "nvpmodel", "true")
    monkeypatch.setenv("PATH", str(on_path))
    monkeypatch.delenv(jetson.TOOL_DIRS_ENV, raising=False)
    assert jetson.find_tool("nvpmodel", fallback_dirs=(str(system),)) == str(system / "nvpmodel")
    monkeypatch.setenv(jetson.TOOL_DIRS_ENV, str(explicit))
    assert jetson.find_tool("nvpmodel", fallback_dirs=(str(system),)) == str(explicit / "nvpmodel")
    monkeypatch.delenv(jetson.TOOL_DIRS_ENV)
    os.unlink(str(system / "nvpmodel"))
    assert jetson.find_tool("nvpmodel", fallback_dirs=(str(system),)) == str(on_path / "nvpmodel")
    assert jetson.SYSTEM_TOOL_DIRS[:2] == ("/usr/sbin", "/usr/bin")


def test_tools_planted_on_path_never_run_as_root(fake_board, fast_sampling, tmp_path, monkeypatch):
    """A directory early on PATH (a user's ~/bin, a project's node_modules/.bin) holding sudo, nvpmodel and
    jetson_clocks: the sweep runs the board's tools from the tool directories, never these."""
    board = fake_board("orin-nano-8gb")
    planted = tmp_path / "planted"
    planted.mkdir()
    marker = tmp_path / "planted.ran"
    for name in ("sudo", "nvpmodel", "jetson_clocks", "tegrastats"):
        _executable(planted / name, "echo {} >> '{}'; exit 1".format(name, marker))
    monkeypatch.setenv("PATH", str(planted) + os.pathsep + os.environ["PATH"])
    assert jetson.privileged(["x"]) == [os.path.join(fakeharness.FAKES_DIR, "sudo", "sudo"), "-n", "x"]
    outcome = run_sweep([_model(tmp_path)], clocks="max", settle_s=0, repeats=1, duration_s=0.05,
                        interval_ms=fast_sampling, out_dir=str(tmp_path / "out"),
                        bench=stubbench.make_bench(sleep_s=0.05), echo=lambda line: None)
    assert outcome.status == "complete" and not marker.exists()
    sudo_calls = board.calls("sudo")
    assert sudo_calls and all(os.path.isabs(call["argv"][1]) for call in sudo_calls if len(call["argv"]) > 1)


def test_private_store_directory_is_0700_and_checked_component_by_component(fake_board):
    board = fake_board("nano-4gb")
    path = clocks.store()
    directory = os.path.dirname(path)
    assert stat.S_IMODE(os.lstat(directory).st_mode) == 0o700
    root = os.path.dirname(directory)
    os.chmod(root, 0o777)  # a root others may write: they could swap the per-sweep directory
    assert "others may change" in clocks.store_problem(path)
    os.chmod(root, 0o700)
    assert clocks.store_problem(path) is None
    assert board.calls("jetson_clocks")


# -- how every tool is run (edgeattn._subprocess.run_command) ---------------------------------------------------------
def _python(code):
    return [sys.executable, "-c", code]


def test_a_tool_never_reads_the_callers_stdin():
    """A tool that prompts (nvpmodel's reboot question, sudo's password) must find stdin closed, not read what the
    user types or what is piped into edgeattn; only the exact text a caller passes is fed to it."""
    echo_stdin = _python("import sys; sys.stdout.write(repr(sys.stdin.read()))")
    read_end, write_end = os.pipe()
    os.write(write_end, b"YES\n")
    os.close(write_end)
    saved = os.dup(0)
    try:
        os.dup2(read_end, 0)  # our own stdin now holds an answer a tool could take
        result = run_command(echo_stdin, timeout=60)
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(read_end)
    assert result.returncode == 0 and result.stdout == repr("")
    assert run_command(echo_stdin, timeout=60, input_text="NO\n").stdout == repr("NO\n")


def test_a_tool_that_hangs_ends_in_one_error_line():
    with pytest.raises(EdgeAttnError) as caught:
        run_command(_python("import signal; signal.pause()"), timeout=0.3)
    message = caught.value.format_message()
    assert message.startswith("command timed out after 0.3 s: {} -c ".format(sys.executable))
    assert "\n" not in message and caught.value.exit_code == 2


@pytest.mark.parametrize("command", ["touch planted", b"touch planted", "true"])
def test_a_shell_string_is_refused(tmp_path, command):
    """Argument lists only: a string would need a shell (or be split into characters)."""
    with pytest.raises(TypeError, match="argument list"):
        run_command(command, timeout=60, cwd=str(tmp_path))
    assert os.listdir(str(tmp_path)) == []
