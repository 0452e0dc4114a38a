import errno
import os
import subprocess
import sys

import pytest

from edgeattn import __version__
from edgeattn.cli import COMMANDS


def test_version(invoke):
    result = invoke(["--version"], expect=0)
    assert __version__ in result.stdout


def test_root_help_lists_every_command(invoke):
    result = invoke(["--help"], expect=0)
    for name in COMMANDS:
        assert name in result.stdout


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_every_command_has_help(invoke, name, flag):
    result = invoke([name, flag], expect=0)
    assert "Usage: " in result.stdout
    # In the full development environment every command must be importable.
    assert "UNAVAILABLE" not in result.stdout, result.stdout


def test_unknown_command_fails(invoke):
    result = invoke(["no-such-command"])
    assert result.exit_code == 2


def test_root_help_does_not_import_heavy_modules():
    code = (
        "import sys; from edgeattn.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in ('torch', 'onnx', 'onnxruntime', 'tensorrt') if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, universal_newlines=True, check=True)
    assert "HEAVY []" in out.stdout


def test_a_command_whose_module_cannot_be_imported_is_unavailable_and_the_others_still_work(invoke, monkeypatch):
    """A missing optional dependency disables one command: its help says why, running it is one error line, and
    the root help and every other command are unaffected."""
    monkeypatch.setitem(sys.modules, "edgeattn.cli.compare", None)  # importing it raises ImportError
    help_text = " ".join(invoke(["compare", "--help"], expect=0).stdout.split())
    assert "UNAVAILABLE on this installation (" in help_text and "edgeattn.cli.compare" in help_text
    result = invoke(["compare", "a.onnx", "b.onnx"], expect=2)
    assert result.stderr.startswith("edgeattn: error: `edgeattn compare` is unavailable: ")
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert "compare" in invoke(["--help"], expect=0).stdout
    assert "host-cpu" in invoke(["profiles"], expect=0).stdout


def test_an_os_error_no_command_anticipated_is_one_line_naming_the_file(invoke, monkeypatch, tmp_path):
    """The CLI boundary: an OSError from deep inside a command (a read error on a failing SD card) is one line
    with the file and the reason, exit status 2, no traceback."""
    from edgeattn.jetson import power

    log = str(tmp_path / "tegrastats.log")

    def summarise_log(path):
        raise OSError(errno.EIO, os.strerror(errno.EIO), path)

    monkeypatch.setattr(power, "summarise_log", summarise_log)
    result = invoke(["power", log], expect=2)
    assert result.stderr == "edgeattn: error: {}: Input/output error\n".format(log)
    assert result.stdout == ""


def test_ctrl_c_in_a_command_ends_with_status_130_and_keeps_no_output(invoke, monkeypatch, tmp_path):
    """Ctrl-C is not a failed comparison: `edgeattn compare` and `build --check` exit 1 when outputs disagree, so an
    interrupted command must not exit 1 (click's "Aborted!"); it says so and exits 128 + SIGINT, and nothing it
    was writing is left."""
    import edgeattn.doctor
    from edgeattn._io import write_json

    out = tmp_path / "report.json"

    def diagnose(root="/"):
        write_json(str(out), {"partial": True})
        raise KeyboardInterrupt

    monkeypatch.setattr(edgeattn.doctor, "diagnose", diagnose)
    result = invoke(["doctor"])
    assert result.exit_code == 130 and result.stderr == "edgeattn: interrupted\n"
    assert os.listdir(str(tmp_path)) == []
