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
