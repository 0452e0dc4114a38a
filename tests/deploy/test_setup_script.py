"""deploy/jetson/setup.sh against fake boards: JetPack detection from real /etc/nv_tegra_release lines, the
commands each JetPack line runs, argument handling, and re-running it (fake python/pip/edgeattn record their calls).

The release lines are real first lines of /etc/nv_tegra_release on R32.7.1, R35.3.1, R36.4.4 and R38.4.0 boards
(dusty-nv/jetson-containers ``jetson_containers/l4t_version.py`` quotes such lines; R36.4.4 as in
lesomnus/tegra-exporter's tests).
"""
import os
import shutil
import stat
import sys

import pytest

from edgeattn._subprocess import run_command

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "deploy", "jetson", "setup.sh")

R32_7_1 = "# R32 (release), REVISION: 7.1, GCID: 29689809, BOARD: t186ref, EABI: aarch64, DATE: Wed Feb  2 21:33:23 UTC 2022"
R35_3_1 = "# R35 (release), REVISION: 3.1, GCID: 32790763, BOARD: t186ref, EABI: aarch64, DATE: Wed Mar 15 07:54:12 UTC 2023"
R36_4_4 = "# R36 (release), REVISION: 4.4, GCID: 41062509, BOARD: generic, EABI: aarch64, DATE: Mon Jun 16 16:07:13 UTC 2025"
R38_4_0 = "# R38 (release), REVISION: 4.0, GCID: 43443517, BOARD: generic, EABI: aarch64, DATE: Wed Dec 31 00:15:19 UTC 2025"
#: an L4T R32.5.1 (JetPack 4.5.1) line in the same format, GCID and date made up
R32_5_1_SYNTHETIC = "# R32 (release), REVISION: 5.1, GCID: 0, BOARD: t210ref, EABI: aarch64, DATE: Mon Jan 1 00:00:00 UTC 2021"
#: the tools setup.sh and the fakes call; PATH holds only these and the fakes, so no real python interferes
TOOLS = ("bash", "sh", "dirname", "head", "sed", "grep", "id", "mkdir", "cat", "cp", "chmod")

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")

FAKE_PYTHON = '''#!{python}
"""A fake CPython {version}: answers the version probe, makes venvs (copying itself), logs pip calls."""
import os, sys
log = os.environ["FAKE_LOG"]
args = sys.argv[1:]
if args[:1] == ["-c"]:
    print("{version}")
    sys.exit(0)
with open(log, "a") as handle:
    handle.write(" ".join([os.path.basename(sys.argv[0])] + args) + "\\n")
if args[:2] == ["-m", "venv"]:
    target = args[-1]
    os.makedirs(os.path.join(target, "bin"), exist_ok=True)
    with open(__file__) as source, open(os.path.join(target, "bin", "python"), "w") as copy:
        copy.write(source.read())
    with open(os.path.join(target, "bin", "edgeattn"), "w") as edgeattn:
        edgeattn.write("#!/bin/sh\\necho \\"edgeattn $*\\" >> \\"$FAKE_LOG\\"\\n")
    for name in ("python", "edgeattn"):
        path = os.path.join(target, "bin", name)
        os.chmod(path, os.stat(path).st_mode | 0o111)
    with open(os.path.join(target, "pyvenv.cfg"), "w") as cfg:
        cfg.write("include-system-site-packages = {{}}\\n".format(
            "true" if "--system-site-packages" in args else "false"))
sys.exit(int(os.environ.get("FAKE_PIP_STATUS", "0")) if args[:2] == ["-m", "pip"] else 0)
'''


def _executable(path, text):
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


class Board(object):
    """A fake root (EDGEATTN_SYSROOT), a PATH of fakes and tools, and the log the fakes write."""

    def __init__(self, tmp_path, release=None, pythons=None):
        self.root = tmp_path / "root"
        self.bin = tmp_path / "bin"
        self.log = tmp_path / "calls.log"
        self.venv = str(tmp_path / "venv")
        self.bin.mkdir()
        if release is not None:
            (self.root / "etc").mkdir(parents=True)
            (self.root / "etc" / "nv_tegra_release").write_text(release + "\n")
        for tool in TOOLS:
            found = shutil.which(tool)
            if found:
                os.symlink(found, str(self.bin / tool))
        for name, version in (pythons or {}).items():
            _executable(str(self.bin / name), FAKE_PYTHON.format(python=sys.executable, version=version))
        self.build_plugins = str(self.bin / "fake_build_plugins.sh")
        _executable(self.build_plugins, '#!/bin/sh\necho "build_plugins.sh $*" >> "$FAKE_LOG"\n'
                                        'exit "${FAKE_BUILD_STATUS:-0}"\n')

    def run(self, *args, **env):
        environment = {"PATH": str(self.bin), "HOME": os.environ.get("HOME", "/root"), "FAKE_LOG": str(self.log),
                       "EDGEATTN_SYSROOT": str(self.root), "BUILD_PLUGINS": self.build_plugins}
        environment.update(env)
        argv = list(args)
        if "--venv" not in argv:
            argv += ["--venv", self.venv]
        return run_command([shutil.which("bash"), SCRIPT] + argv, timeout=60, env=environment)

    def calls(self):
        return self.log.read_text().splitlines() if self.log.exists() else []


def _facts(result):
    return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line and not line.startswith("+"))


def _commands(result):
    return [line[2:] for line in result.stdout.splitlines() if line.startswith("+ ")]


def _error(result):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("setup.sh: error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize("release, pythons, expected", [
    (R32_7_1, {"python3.8": "3.8", "python3": "3.6"},
     {"l4t": "32.7.1", "jetpack": "4.6", "python": "python3.8 (3.8)", "backend": "trtexec"}),
    (R35_3_1, {"python3": "3.8"},
     {"l4t": "35.3.1", "jetpack": "5", "python": "python3 (3.8)", "backend": "tensorrt (system bindings)"}),
    (R36_4_4, {"python3": "3.10"},
     {"l4t": "36.4.4", "jetpack": "6", "python": "python3 (3.10)", "backend": "tensorrt (system bindings)"}),
], ids=["jetpack4.6-nano", "jetpack5", "jetpack6"])
def test_dry_run_detects_the_jetpack_line_and_prints_its_commands(tmp_path, release, pythons, expected):
    board = Board(tmp_path, release, pythons)
    result = board.run("--dry-run")
    assert result.returncode == 0, result.stderr
    facts = _facts(result)
    assert {key: facts[key] for key in expected} == expected
    python = expected["python"].split()[0]
    site = [] if expected["jetpack"] == "4.6" else ["--system-site-packages"]
    venv_python = board.venv + "/bin/python"
    assert _commands(result) == [
        " ".join([python, "-m", "venv"] + site + [board.venv]),
        venv_python + " -m pip install --upgrade pip",
        board.build_plugins,
        "{} -m pip install --prefer-binary --constraint {} --editable {}\\[board\\]".format(
            venv_python, os.path.join(REPO, "deploy", "jetson", "constraints.txt"), REPO),
        board.venv + "/bin/edgeattn doctor",
    ]
    assert result.stdout.rstrip().endswith("dry run: nothing run")
    assert board.calls() == [] and not os.path.exists(board.venv)


def test_jetpack_4_6_installs_the_distributions_python38_when_missing(tmp_path):
    board = Board(tmp_path, R32_7_1, {"python3": "3.6"})
    result = board.run("--dry-run")
    assert result.returncode == 0, result.stderr
    commands = _commands(result)
    apt = "apt-get install -y python3.8 python3.8-venv python3.8-dev"
    assert commands[0] in (apt, "sudo " + apt)
    assert commands[1] == "python3.8 -m venv " + board.venv


@pytest.mark.parametrize("release, pythons, args, expected", [
    (R38_4_0, {"python3": "3.12"}, [], "L4T 38.4.0 is not a JetPack line this script knows"),
    (R32_5_1_SYNTHETIC, {"python3.8": "3.8"}, [], "older than JetPack 4.6 (TensorRT 7)"),
    ("not a release line", {}, [], "cannot read the L4T release"),
    (None, {}, [], "not a Jetson"),
    (None, {}, ["--jetpack", "7"], "--jetpack must be 4.6, 5 or 6, got '7'"),
    (R36_4_4, {"python3": "3.8"}, [], "python3 is Python 3.8; JetPack 6 needs 3.10"),
    (R35_3_1, {}, ["--python", "python3.9"], "python3.9 not found"),
    (R35_3_1, {"python3": "3.8"}, ["--frobnicate"], "unknown option: --frobnicate"),
    (R35_3_1, {"python3": "3.8"}, ["--venv"], "--venv needs a directory"),
], ids=["jetpack7", "l4t-32.5", "garbled", "no-release-file", "bad-jetpack", "wrong-python", "no-python",
        "unknown-option", "venv-without-value"])
def test_bad_setups_are_one_error_line(tmp_path, release, pythons, args, expected):
    board = Board(tmp_path, release, pythons)
    if args[:1] == ["--venv"]:
        result = run_command([shutil.which("bash"), SCRIPT, "--venv"], timeout=60,
                             env={"PATH": str(board.bin), "EDGEATTN_SYSROOT": str(board.root)})
    else:
        result = board.run("--dry-run", *args)
    assert expected in _error(result)
    assert board.calls() == []


def test_jetpack_override_needs_no_release_file(tmp_path):
    board = Board(tmp_path, None, {"python3": "3.10"})
    result = board.run("--dry-run", "--jetpack", "6")
    assert result.returncode == 0, result.stderr
    assert _facts(result)["l4t"] == "none" and _facts(result)["jetpack"] == "6"


def test_help(tmp_path):
    board = Board(tmp_path)
    result = board.run("--help")
    assert result.returncode == 0
    assert "JetPack 4.6 (Jetson Nano" in result.stdout and "--dry-run" in result.stdout


def test_setup_runs_every_step_and_running_it_again_reuses_the_environment(tmp_path):
    board = Board(tmp_path, R35_3_1, {"python3": "3.8"})
    first = board.run()
    assert first.returncode == 0, first.stderr
    constraints = os.path.join(REPO, "deploy", "jetson", "constraints.txt")
    expected_tail = ["python -m pip install --upgrade pip", "build_plugins.sh ",
                     "python -m pip install --prefer-binary --constraint {} --editable {}[board]".format(constraints,
                                                                                                      REPO),
                     "edgeattn doctor"]
    assert board.calls() == ["python3 -m venv --system-site-packages " + board.venv] + expected_tail
    assert "ready: . {}/bin/activate".format(board.venv) in first.stdout
    board.log.unlink()
    second = board.run()
    assert second.returncode == 0, second.stderr
    assert board.calls() == expected_tail  # no second venv
    assert "[reusing {}]".format(board.venv) in _facts(second)["venv"]


def test_an_environment_without_system_site_packages_is_refused_on_jetpack_5(tmp_path):
    board = Board(tmp_path, R32_7_1, {"python3.8": "3.8"})
    assert board.run().returncode == 0  # JetPack 4.6 makes a plain venv
    board.log.unlink()
    (board.root / "etc" / "nv_tegra_release").write_text(R35_3_1 + "\n")
    assert "made without --system-site-packages" in _error(board.run())
    assert board.calls() == []


def test_an_environment_of_another_python_is_refused(tmp_path):
    board = Board(tmp_path, R35_3_1, {"python3": "3.8"})
    assert board.run().returncode == 0
    (board.root / "etc" / "nv_tegra_release").write_text(R36_4_4 + "\n")
    assert "holds Python 3.8, JetPack 6 needs 3.10" in _error(board.run())


def test_a_failing_step_stops_the_setup_with_its_status(tmp_path):
    board = Board(tmp_path, R36_4_4, {"python3": "3.10"})
    result = board.run(FAKE_BUILD_STATUS="3")
    assert result.returncode == 3
    calls = board.calls()
    assert calls[-1] == "build_plugins.sh " and not any(c.startswith("edgeattn") for c in calls)


def test_skip_plugins(tmp_path):
    board = Board(tmp_path, R36_4_4, {"python3": "3.10"})
    result = board.run("--skip-plugins")
    assert result.returncode == 0, result.stderr
    assert not any(c.startswith("build_plugins") for c in board.calls())


#: an L4T R34.1.1 (JetPack 5.0.1 DP) line in the release-file format, GCID and date made up
R34_1_1_SYNTHETIC = "# R34 (release), REVISION: 1.1, GCID: 0, BOARD: t186ref, EABI: aarch64, DATE: Mon Jan 1 00:00:00 UTC 2022"


def test_l4t_r34_is_the_jetpack_5_line(tmp_path):
    """L4T 34.1.x is JetPack 5.0 DP / 5.0.1 DP (jtop's NVIDIA_JETPACK table): the JetPack 5 recipe, Python 3.8."""
    board = Board(tmp_path, R34_1_1_SYNTHETIC, {"python3": "3.8"})
    result = board.run("--dry-run")
    assert result.returncode == 0, result.stderr
    facts = _facts(result)
    assert facts["l4t"] == "34.1.1" and facts["jetpack"] == "5"
    assert facts["backend"] == "tensorrt (system bindings)"
