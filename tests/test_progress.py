"""Progress conventions: a live rich line on a terminal, nothing in pipes; events stay as plain stderr lines.

Checked for the long commands through a pipe (subprocess/CliRunner: stderr is not a TTY) and, for the sweep, through
a real pseudo-terminal, where the progress must appear."""
import io
import os
import pty
import select
import subprocess
import sys
import time

import pytest

from edgeattn.progress import Progress, enabled

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SWEEP_DRIVER = os.path.join(REPO, "tests", "sweep", "sweep_driver.py")


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_nothing_is_drawn_when_stderr_is_not_a_terminal(capsys):
    stream = io.StringIO()
    with Progress("edgeattn build", stream=stream) as progress:
        progress.step("parsing")
        progress.fraction(0.5, "timing")
        progress.lines("[1/4] mode 0 MAXN | m fp32 | repeat 1/1 | ETA ?")  # a counter: progress, dropped
        progress.lines("mode 0 MAXN (1/2)")  # an event: kept as a plain line
    assert stream.getvalue() == ""
    captured = capsys.readouterr()
    assert captured.err == "mode 0 MAXN (1/2)\n" and captured.out == ""


def test_a_terminal_gets_the_steps_and_the_counter(monkeypatch):
    monkeypatch.delenv("EDGEATTN_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    terminal = _Terminal()
    with Progress("edgeattn sweep", stream=terminal) as progress:
        progress.lines("[3/12] mode 1 1 thread | m fp32 | repeat 1/3 | ETA 0:42")
        progress._progress.refresh()
        progress.lines("restored clocks: ok")
    text = terminal.getvalue()
    assert "edgeattn sweep: mode 1 1 thread | m fp32 | repeat 1/3 | ETA 0:42" in text and "2/12" in text
    assert "restored clocks: ok" in text


@pytest.mark.parametrize("env, show, expected", [
    ({"TERM": "xterm"}, True, True),
    ({"TERM": "xterm", "EDGEATTN_PROGRESS": "0"}, True, False),
    ({"TERM": "dumb"}, True, False),
    ({"TERM": "xterm"}, False, False),
])
def test_switches(monkeypatch, env, show, expected):
    monkeypatch.delenv("EDGEATTN_PROGRESS", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert enabled(_Terminal()) is (expected or not show)
    assert Progress("x", stream=_Terminal(), show=show).active is expected


def _stub_models(tmp_path):
    paths = []
    for name in ("m1", "m2"):
        path = tmp_path / "{}.onnx".format(name)
        path.write_bytes(b"onnx")
        paths.append(str(path))
    return paths


def _sweep_args(tmp_path):
    return _stub_models(tmp_path) + ["--profile", "host-cpu", "--modes", "1", "--repeats", "2", "--duration-s",
                                     "0.05", "--warmup-s", "0", "--settle-s", "0", "-o", str(tmp_path / "out")]


def _env():
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), TERM="xterm")
    env.pop("EDGEATTN_PROGRESS", None)
    return env


def test_sweep_in_a_pipe_keeps_events_and_drops_progress(tmp_path):
    proc = subprocess.run([sys.executable, SWEEP_DRIVER] + _sweep_args(tmp_path), env=_env(),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "profile: host-cpu" in proc.stderr and "mode 1 1 thread (1/1)" in proc.stderr
    assert "[1/4]" not in proc.stderr and "ETA" not in proc.stderr
    assert "\x1b[" not in proc.stderr and "\r" not in proc.stderr
    assert "4 result row(s)" in proc.stdout


def test_sweep_on_a_terminal_shows_the_counter(tmp_path):
    """A real pseudo-terminal: rich draws the per-measurement line; the events are printed too."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, SWEEP_DRIVER] + _sweep_args(tmp_path), env=_env(),
                            stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    chunks = []
    deadline = time.time() + 120
    while time.time() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)
    text = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 0, text[-2000:]
    assert "edgeattn sweep: mode 1 1 thread | m1 fp32 | repeat 1/2" in text
    assert "profile: host-cpu" in text and "4 result row(s)" in text


def test_build_and_export_are_quiet_in_pipes(invoke, tmp_path):
    """CliRunner's stderr is not a terminal: the steps that a terminal shows are not written."""
    pytest.importorskip("torch")
    out = tmp_path / "vit.onnx"
    result = invoke(["export", "--arch", "vit_tiny_elfatt", "--no-check", "-o", out], expect=0)
    assert result.stderr == ""
    assert result.stdout.startswith("exported vit_tiny_elfatt -> ")


def test_bench_is_quiet_in_pipes(invoke, tmp_path):
    """The bench harness reports its phases (warm-up, timing) as progress: none of it in a pipe."""
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, save

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    path = str(tmp_path / "relu.onnx")
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    result = invoke(["bench", path, "--iterations", "20", "--warmup-s", "0"], expect=0)
    assert "warm-up" not in result.stderr and "iterations" not in result.stderr and "%" not in result.stderr
    assert "throughput" in result.stdout.lower()
