"""The board-side dependency rule (docs/dependencies.md): every board-side requirement has a lower bound whose
manylinux aarch64 wheels exist on PyPI for each JetPack line's CPython and glibc (or is pure Python), and the whole
set resolves to wheels. The PyPI part asks pip itself, as a Jetson would; it is skipped when PyPI is unreachable."""
import importlib.util
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "deploy", "jetson", "check_board_wheels.py")


def _load():
    spec = importlib.util.spec_from_file_location("check_board_wheels", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


wheels = _load()


def _project():
    return wheels._load_toml(os.path.join(REPO, "pyproject.toml"))["project"]


def test_board_requirements_are_the_core_set_plus_the_board_extra_each_with_a_lower_bound():
    requirements = wheels.board_requirements()
    names = [wheels.requirement_name(r) for r in requirements]
    assert {"click", "pyyaml", "numpy", "onnx", "rich", "matplotlib", "onnxruntime"} <= set(names)
    assert "torch" not in names  # export-only
    extras = _project()["optional-dependencies"]
    # everything a board-side extra offers is in the checked set
    for extra in ("report", "ort", "compare"):
        for requirement in extras[extra]:
            assert wheels.requirement_name(requirement) in names, (extra, requirement)
    assert wheels.lower_bound_pin("onnx>=1.16") == "onnx==1.16"
    assert wheels.lower_bound_pin("numpy >= 1.21.2, <2") == "numpy==1.21.2"


@pytest.mark.parametrize("requirement", ["numpy", "onnx==1.17.0", "rich>=13; python_version>'3.8'", "x<2"])
def test_requirements_the_rule_cannot_check_are_refused(requirement):
    with pytest.raises(wheels.RuleError, match="NAME>=LOWER"):
        wheels.requirement_name(requirement)


def test_each_jetpack_line_accepts_the_manylinux_tags_of_its_glibc():
    assert wheels.platform_tags(27)[0] == "manylinux2014_aarch64"
    assert wheels.platform_tags(27)[-1] == "manylinux_2_27_aarch64"
    assert "manylinux_2_28_aarch64" not in wheels.platform_tags(27)  # Ubuntu 18.04 (JetPack 4.6) cannot run them
    assert [t[1:] for t in wheels.TARGETS] == [("3.8", 27), ("3.8", 31), ("3.10", 35)]


def test_pip_asks_pypi_only_for_binary_wheels(monkeypatch):
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "file:///opt/pypi/simple")
    command = wheels.pip_download_command(["onnx==1.16"], "3.8", 31, "/tmp/x", deps=False, python="python")
    assert command[:4] == ["python", "-m", "pip", "download"]
    assert "--only-binary=:all:" in command and "--no-deps" in command
    assert command[command.index("--index-url") + 1] == "https://pypi.org/simple"
    assert command[command.index("--python-version") + 1] == "3.8"
    env = wheels.pypi_environment()
    assert env["PIP_CONFIG_FILE"] == os.devnull
    assert "PIP_FIND_LINKS" not in env and "PIP_EXTRA_INDEX_URL" not in env


@pytest.fixture(scope="module")
def pypi():
    reason = wheels.pypi_reachable()
    if reason:
        pytest.skip("PyPI is unreachable ({}): the board-wheel check needs the package index".format(reason))


@pytest.mark.slow
def test_every_board_requirement_resolves_to_aarch64_wheels_on_every_jetpack_line(pypi):
    assert wheels.check(wheels.board_requirements()) == []


def test_the_check_fails_for_a_requirement_without_cp38_aarch64_wheels(pypi):
    """torch >= 2.6 (the export extra) has no CPython 3.8 build at all: the reason it is not board-side."""
    jetpack5 = [target for target in wheels.TARGETS if target[0].startswith("JetPack 5")]
    problems = wheels.check(["torch>=2.6"], targets=jetpack5, full_set=False)
    assert [(target, what) for target, what, _message in problems] == [(jetpack5[0][0], "torch==2.6")]
    assert "No matching distribution" in problems[0][2] or "Could not find" in problems[0][2]
