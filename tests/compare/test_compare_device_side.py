"""``edgeattn compare`` is device-side: it parses as Python 3.8 and imports without torch, onnx, onnxruntime,
tensorrt or polygraphy (each is imported only for the side or step that needs it)."""
import glob
import os
import shutil
import subprocess
import sys

import pytest

from test_device_side import BLOCKER, HEAVY_MODULES, REPO

COMPARE_MODULES = ["edgeattn.compare", "edgeattn.compare.inputs", "edgeattn.compare.sides", "edgeattn.compare.metrics",
                   "edgeattn.compare.report", "edgeattn.compare.check", "edgeattn.compare.layers", "edgeattn.cli.compare"]
FILES = sorted(glob.glob(os.path.join(REPO, "edgeattn", "compare", "*.py"))) + ["edgeattn/cli/compare.py"]


def test_compare_modules_import_without_heavy_packages():
    code = BLOCKER.format(heavy=HEAVY_MODULES, modules=COMPARE_MODULES)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=120)
    assert proc.returncode == 0, proc.stdout


def test_compare_modules_are_python_3_8():
    vermin = shutil.which("vermin") or os.path.join(os.path.dirname(sys.executable), "vermin")
    if not os.path.exists(vermin):
        pytest.skip("vermin is not installed")
    proc = subprocess.run([vermin, "-t=3.8-", "--no-tips", "--violations", "--eval-annotations",
                           "--no-parse-comments"] + [os.path.join(REPO, f) for f in FILES],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)
    assert proc.returncode == 0, proc.stdout
