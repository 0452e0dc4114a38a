"""The device-side path must run on Python 3.8 (JetPack 4.6 and 5) with the board-side requirements only.

Three checks: vermin finds no syntax or stdlib use newer than 3.8; every device-side module imports with torch,
onnx, onnxruntime and tensorrt made unimportable (onnx, matplotlib and onnxruntime are imported where they are
used, so a missing one is a one-line error, not a broken CLI); and the device-side test directories pass under a
real Python 3.8 interpreter in a virtual environment holding only the board-side requirements (pyproject's
``dependencies`` and ``board`` extra, see deploy/jetson/check_board_wheels.py) and pytest (when a 3.8 interpreter
exists on the machine).
"""
import collections
import glob
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Everything `edgeattn build/bench/doctor/profiles/sweep/power/report` can import.
DEVICE_SIDE_GLOBS = [
    "edgeattn/__init__.py",
    "edgeattn/_version.py",
    "edgeattn/errors.py",
    "edgeattn/_io.py",
    "edgeattn/_subprocess.py",
    "edgeattn/_paths.py",
    "edgeattn/cost.py",
    "edgeattn/schemas.py",
    "edgeattn/plugins.py",
    "edgeattn/plugins/**/*.py",
    "edgeattn/onnx_graph.py",
    "edgeattn/onnx_fold.py",
    "edgeattn/progress.py",
    "edgeattn/console.py",
    "edgeattn/doctor.py",
    "edgeattn/probes.py",
    "edgeattn/trtexec.py",
    "edgeattn/trtexec/**/*.py",
    "edgeattn/profiles.py",
    "edgeattn/bench/**/*.py",
    "edgeattn/engine/**/*.py",
    "edgeattn/tensorrt/**/*.py",
    "edgeattn/jetson/**/*.py",
    "edgeattn/sweep/**/*.py",
    "edgeattn/report/**/*.py",
    "edgeattn/cli/__init__.py",
    "edgeattn/cli/build.py",
    "edgeattn/cli/bench.py",
    "edgeattn/cli/doctor.py",
    "edgeattn/cli/inspect.py",
    "edgeattn/export/__init__.py",
    "edgeattn/export/inspection.py",
    "edgeattn/export/contract.py",
    "edgeattn/cli/profiles.py",
    "edgeattn/cli/sweep.py",
    "edgeattn/cli/power.py",
    "edgeattn/cli/report.py",
]

# Test directories that exercise only the device-side path (each may skip tests needing onnx/onnxruntime).
DEVICE_SIDE_TEST_DIRS = ["tests/bench", "tests/engine", "tests/tensorrt_runtime", "tests/trtexec", "tests/jetson",
                         "tests/sweep", "tests/report", "tests/plugins"]
# skimage: the images extra (sample pictures), which the board-side set leaves out
HEAVY_MODULES = ("torch", "onnx", "onnxruntime", "tensorrt", "onnx_graphsurgeon", "polygraphy", "matplotlib",
                 "skimage")


def device_side_files():
    files = set()
    for pattern in DEVICE_SIDE_GLOBS:
        files.update(glob.glob(os.path.join(REPO, pattern), recursive=True))
    return sorted(files)


def module_name(path):
    rel = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def test_device_side_files_exist():
    names = {module_name(p) for p in device_side_files()}
    assert "edgeattn.cli" in names and "edgeattn.errors" in names


def test_vermin_minimum_python_is_3_8():
    vermin = shutil.which("vermin") or os.path.join(os.path.dirname(sys.executable), "vermin")
    if not os.path.exists(vermin):
        pytest.skip("vermin is not installed")
    files = device_side_files()
    proc = subprocess.run(
        [vermin, "-t=3.8-", "--no-tips", "--violations", "--eval-annotations", "--no-parse-comments"] + files,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300,
    )
    assert proc.returncode == 0, "vermin reports code newer than Python 3.8:\n" + proc.stdout


BLOCKER = """
import importlib.abc, sys
HEAVY = {heavy!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] in HEAVY:
            raise ImportError('blocked for the device-side check: ' + name)
sys.meta_path.insert(0, Block())
import importlib
failed = []
for name in {modules!r}:
    try:
        importlib.import_module(name)
    except Exception as error:
        failed.append('%s: %s: %s' % (name, type(error).__name__, error))
print('\\n'.join(failed))
sys.exit(1 if failed else 0)
"""


def test_device_side_modules_import_without_torch_or_onnx():
    modules = [module_name(p) for p in device_side_files()]
    code = BLOCKER.format(heavy=HEAVY_MODULES, modules=modules)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
    assert proc.returncode == 0, "device-side modules need a heavy import at module level:\n" + proc.stdout


def board_requirements():
    """pyproject's board-side requirements, read by the same code as the board-wheel check."""
    import importlib.util

    script = os.path.join(REPO, "deploy", "jetson", "check_board_wheels.py")
    spec = importlib.util.spec_from_file_location("check_board_wheels", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.board_requirements()


def find_python38():
    """A Python 3.8 interpreter that actually runs (a pyenv shim for an absent version does not)."""
    candidates = [os.environ.get("EDGEATTN_PYTHON38")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")))
    candidates.append(shutil.which("python3.8"))
    for candidate in candidates:
        if not candidate or not os.path.exists(candidate):
            continue
        try:
            probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   universal_newlines=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0 and probe.stdout.strip() == "(3, 8)":
            return candidate
    return None


#: what the device-side venv holds besides the board-side requirements: the test runner
TEST_PACKAGES = ["pytest", "hypothesis", "pytest-xdist"]


def board_venv(python38):
    """(python, None) of a venv of ``python38`` holding only the board-side requirements and TEST_PACKAGES, or
    (None, pip's output) when they do not install.

    The venv is kept in the temp dir under a hash of the interpreter, the requirement list and pip's environment
    (PIP_* variables), and reused while none of them changes: creating it costs ~25 s of CPU, as much as the pass
    itself. It is published (INSTALL_OK written) only after pip succeeded, so a failed install is retried next time;
    EDGEATTN_REBUILD_PY38=1 creates it anew. The project itself is not installed there (the pass runs the checkout
    through PYTHONPATH), so changes to edgeattn never make it stale."""
    import fcntl
    import hashlib
    import json
    import tempfile

    requirements = board_requirements() + TEST_PACKAGES
    probe = subprocess.run([python38, "-c", "import sys; print(sys.version)"], stdout=subprocess.PIPE,
                           universal_newlines=True, timeout=30, check=True).stdout
    pip_environment = sorted((k, v) for k, v in os.environ.items() if k.startswith("PIP_"))
    key = json.dumps([os.path.realpath(python38), probe, requirements, pip_environment])
    venv = os.path.join(tempfile.gettempdir(), "edgeattn-py38-venv-" + hashlib.sha256(key.encode()).hexdigest()[:16])
    py = os.path.join(venv, "bin", "python")
    marker = os.path.join(venv, "INSTALL_OK")
    with open(venv + ".lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # one install per key across concurrent sessions
        if os.environ.get("EDGEATTN_REBUILD_PY38") != "1" and os.path.isfile(marker):
            return py, None
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([python38, "-m", "venv", venv], check=True, timeout=300)
        install = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check"] + requirements,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                                 timeout=600)
        if install.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            return None, install.stdout
        with open(marker, "w") as handle:
            handle.write(key)
    return py, None


@pytest.mark.slow
def test_device_side_tests_pass_under_python38(tmp_path_factory, record_property):
    python38 = find_python38()
    if python38 is None:
        pytest.skip("no Python 3.8 interpreter on this machine (set EDGEATTN_PYTHON38)")
    dirs = [d for d in DEVICE_SIDE_TEST_DIRS if os.path.isdir(os.path.join(REPO, d))]
    if not dirs:
        pytest.skip("no device-side test directories yet")
    py, install = board_venv(python38)
    if install is not None:
        message = "could not install the board-side requirements for Python 3.8:\n" + install[-2000:]
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    env = dict(os.environ, PYTHONPATH=REPO, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONHOME", None)
    env.pop("CI", None)  # the inner session's skips are judged here (inner_skip_allowed)
    junit = str(tmp_path_factory.mktemp("py38-report") / "junit.xml")
    proc = subprocess.run(
        # one process: it runs beside the worker exporting the largest models, and two workers of its own (~290 MB
        # each) took the whole run past 3 GB; alone it takes ~95 s instead of ~55 s, mostly waiting on the fake
        # boards' tegrastats while the other workers compute
        [py, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-m", "not gpu", "--junitxml", junit]
        + dirs,
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
        timeout=900,
    )
    assert proc.returncode == 0, "device-side tests fail under Python 3.8:\n" + proc.stdout[-6000:]
    counts, skips = junit_outcomes(junit)
    summary = "Python 3.8 device-side pass ({}): {passed} passed, {skipped} skipped, {failed} failed".format(
        " ".join(dirs), **counts)
    reasons = collections.Counter(reason for _, reason in skips)
    record_property("suite_summary", summary + "".join(
        "\n  {} skipped: {}".format(count, reason) for reason, count in sorted(reasons.items())))
    assert counts["passed"] > 0, summary + ": it ran nothing\n" + proc.stdout[-3000:]
    if in_ci():
        unexpected = [(test, reason) for test, reason in skips if not inner_skip_allowed(reason)]
        assert not unexpected, "{}; skips that only a missing heavy package or GPU may cause:\n{}".format(
            summary, "\n".join("{}: {}".format(test, reason) for test, reason in unexpected))


def in_ci():
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def junit_outcomes(path):
    """({passed, skipped, failed}, [(test, skip reason)]) from a pytest junit XML report."""
    import xml.etree.ElementTree as ElementTree

    root = ElementTree.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    counts = {"passed": 0, "skipped": 0, "failed": 0}
    skips = []
    for suite in suites:
        for case in suite.iter("testcase"):
            test = "{}::{}".format(case.get("classname", ""), case.get("name", ""))
            skipped = case.find("skipped")
            if skipped is not None:
                counts["skipped"] += 1
                reason = skipped.get("message", "")
                if reason == "collection skipped":  # a module-level skip: "(path, line, 'Skipped: reason')"
                    reason = (skipped.text or reason).strip()
                    reason = reason.split("Skipped: ", 1)[-1]
                    reason = reason[:-2] if reason.endswith(("')", '")')) else reason
                skips.append((test, reason))
            elif case.find("failure") is not None or case.find("error") is not None:
                counts["failed"] += 1
            else:
                counts["passed"] += 1
    return counts, skips


def inner_skip_allowed(reason):
    """The device-side venv lacks the heavy packages on purpose, and there is no GPU: only those may skip."""
    text = reason.lower().replace("_", "-")
    return "cuda device" in text or any(module.replace("_", "-") in text for module in HEAVY_MODULES)
