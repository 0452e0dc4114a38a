"""The README stays true: every command is documented, the Quickstart has exactly two commands, and .ci/run runs
the Quickstart's test command."""
import os
import re

import pytest

from edgeattn.cli import COMMANDS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as handle:
        return handle.read()


def _quickstart_block(marker):
    match = re.search(r"<!-- quickstart:{} -->\s*```sh\n(.*?)\n```".format(marker), _readme(), re.S)
    assert match, "README has no quickstart:{} block".format(marker)
    return match.group(1).strip()


def test_every_command_is_documented():
    readme = _readme()
    for name in COMMANDS:
        assert "`edgeattn {}`".format(name) in readme, "README does not document `edgeattn {}`".format(name)


def test_quickstart_has_exactly_two_single_line_commands():
    quickstart = _readme().split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert len(re.findall(r"```sh\n", quickstart)) == 2
    for marker in ("main", "test"):
        block = _quickstart_block(marker)
        assert "\n" not in block, "the {} command must be one line".format(marker)
    assert "pytest" in _quickstart_block("test") and "edgeattn " in _quickstart_block("main")


# ---- .ci/run, run for real in a scratch checkout with stand-in tools ------------------------------------------
CI_TOOLS = ("g++", "gcc", "cmake", "nvcc", "nm", "readelf", "objdump")
TRT_VERSIONS = ("8.0", "8.2", "10.3", "11.1")
#: the one-line Quickstart test command of the scratch README: records what it saw, exits with a chosen status
STUB_COMMAND = ('echo "ran $CI|$EDGEATTN_PYTHON38|$EDGEATTN_TRT_INCLUDE_8_0|$EDGEATTN_TRT_INCLUDE_11_1|'
                '$PYTEST_ADDOPTS" >> ran.txt && exit "$STUB_STATUS"')


def scratch_checkout(tmp_path, without=()):
    """tmp_path/repo with .ci/run and a README whose test command is STUB_COMMAND; tmp_path/shared with the
    TensorRT headers; tmp_path/bin with stand-ins for the CI tools and Python 3.8 (names in ``without`` left
    out) plus the few real programs .ci/run itself uses. Returns (repo, environment)."""
    import shutil
    import stat

    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy(os.path.join(REPO, ".ci", "run"), str(repo / ".ci" / "run"))
    (repo / "README.md").write_text("# x\n\n<!-- quickstart:test -->\n```sh\n{}\n```\n".format(STUB_COMMAND))
    for version in TRT_VERSIONS:
        if "trt" + version not in without:
            include = tmp_path / "shared" / "third_party" / "tensorrt-headers" / version / "include"
            include.mkdir(parents=True)
            (include / "NvInferVersion.h").write_text("#define NV_TENSORRT_MAJOR 0\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("bash", "env", "awk", "dirname", "cat"):
        os.symlink(shutil.which(program), str(bin_dir / program))
    stand_ins = {tool: "#!/bin/sh\nexit 0\n" for tool in CI_TOOLS}
    stand_ins["python3.8"] = "#!/bin/sh\necho '(3, 8)'\n"
    for tool, script in stand_ins.items():
        if tool not in without:
            (bin_dir / tool).write_text(script)
            (bin_dir / tool).chmod(stat.S_IRWXU)
    # CUDA 11.8's nvcc given, so .ci/run does not install it (.ci/install_cuda_11_8.sh is not in the scratch copy)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path / "home"), "STUB_STATUS": "0",
           "EDGEATTN_NVCC_11_8": str(bin_dir / "nvcc")}
    return repo, env


def run_ci(repo, env):
    import subprocess

    return subprocess.run([str(repo / ".ci" / "run")], cwd=str(repo), env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60)


def test_ci_runs_exactly_the_readme_test_command_with_ci_settings(tmp_path):
    repo, env = scratch_checkout(tmp_path)
    proc = run_ci(repo, env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["+ " + STUB_COMMAND]
    headers = tmp_path / "shared" / "third_party" / "tensorrt-headers"
    assert (repo / "ran.txt").read_text().splitlines() == ["ran true|{}|{}|{}|-rs".format(
        tmp_path / "bin" / "python3.8", headers / "8.0" / "include", headers / "11.1" / "include")]


@pytest.mark.parametrize("status", [1, 3])
def test_ci_propagates_the_test_command_exit_status(tmp_path, status):
    repo, env = scratch_checkout(tmp_path)
    env["STUB_STATUS"] = str(status)
    assert run_ci(repo, env).returncode == status
    assert (repo / "ran.txt").read_text().count("ran true") == 1


@pytest.mark.parametrize("absent,named", [("nvcc", "nvcc"), ("g++", "g++"), ("cmake", "cmake"),
                                          ("readelf", "readelf"), ("python3.8", "Python 3.8"),
                                          ("trt11.1", "TensorRT 11.1")])
def test_ci_fails_naming_a_missing_tool_before_running_anything(tmp_path, absent, named):
    repo, env = scratch_checkout(tmp_path, without=(absent,))
    proc = run_ci(repo, env)
    assert proc.returncode != 0
    assert named in proc.stderr and "missing" in proc.stderr, proc.stderr
    assert not (repo / "ran.txt").exists()


def test_every_relative_link_in_the_readme_and_docs_resolves():
    """README.md sends users to docs/*.md and the pages link each other and the tree: a moved file breaks a link."""
    pages = ["README.md"] + sorted(os.path.join("docs", name) for name in os.listdir(os.path.join(REPO, "docs"))
                                   if name.endswith(".md"))
    broken = []
    for page in pages:
        with open(os.path.join(REPO, page), encoding="utf-8") as handle:
            text = handle.read()
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if not re.match(r"[a-z]+:", target) and not os.path.exists(
                    os.path.join(REPO, os.path.dirname(page), target)):
                broken.append("{} -> {}".format(page, target))
    assert pages[1:], "docs/ has no pages"
    assert not broken, broken


def _package_rows():
    """The modules the README's package table names (``edgeattn/x.py`` and ``edgeattn/x/`` both as ``x``)."""
    table = _readme().split("The package, top-level module by module:", 1)[1]
    return {name.rstrip("/").rsplit(".py", 1)[0] for name in re.findall(r"`edgeattn/([\w.]+/?)`", table)}


def test_the_readme_package_table_matches_the_tree():
    """Every top-level module and package of edgeattn/ has a row (a new one needs its row, a moved one its row
    updated), and every row names something that exists (``x.py`` or ``x/`` alike, so a module that becomes a
    package keeps its row)."""
    package = os.path.join(REPO, "edgeattn")
    tree = set()
    for name in os.listdir(package):
        path = os.path.join(package, name)
        if name.endswith(".py") and name != "__init__.py":
            tree.add(name[:-3])
        elif os.path.isfile(os.path.join(path, "__init__.py")):
            tree.add(name)
    rows = _package_rows()
    assert not tree - rows, "README's package table lacks a row for: {}".format(", ".join(sorted(tree - rows)))
    assert not rows - tree, "README's package table names what edgeattn/ lacks: {}".format(
        ", ".join(sorted(rows - tree)))
