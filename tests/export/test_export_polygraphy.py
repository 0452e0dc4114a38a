"""Exported files as other tools read them: onnx.checker (full check) and Polygraphy's CLI, both independent of
edgeattn's own readers, on both export targets of a small model with both kinds of custom op."""
import os
import re
import shutil
import subprocess
import sys

import onnx
import pytest

ARCH = "vit_tiny_elfatt"  # small, with EdgeAttnBlockifyAttention and EdgeAttnEfficientAttention nodes


def _polygraphy():
    found = shutil.which("polygraphy") or os.path.join(os.path.dirname(sys.executable), "polygraphy")
    if not os.path.exists(found):
        pytest.skip("polygraphy is not installed (pip install 'edgeattn[test]')")
    return found


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    from edgeattn.export.exporter import export_onnx, load_torch_model

    directory = tmp_path_factory.mktemp("polygraphy")
    model, size = load_torch_model(arch=ARCH, img_size=224, seed=0)
    paths = {}
    for target in ("ort", "tensorrt"):
        paths[target] = str(directory / "{}.{}.onnx".format(ARCH, target))
        export_onnx(model, paths[target], img_size=size, target=target, check=target == "ort")
    return paths


def _custom_nodes(path):
    return [node for node in onnx.load(path).graph.node if node.domain == "trt.plugins"]


@pytest.mark.parametrize("target", ["ort", "tensorrt"])
def test_onnx_checker_accepts_the_written_file(exports, target):
    onnx.checker.check_model(exports[target], full_check=True)
    model = onnx.load(exports[target])
    assert len(model.functions) == (2 if target == "ort" else 0)


@pytest.mark.parametrize("target", ["ort", "tensorrt"])
def test_polygraphy_inspect_model_lists_every_custom_node_with_its_plugin_keys(exports, target):
    proc = subprocess.run([_polygraphy(), "inspect", "model", exports[target], "--show", "layers", "attrs"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                          universal_newlines=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "Other Opsets: {'trt.plugins': 1}" in proc.stdout
    nodes = _custom_nodes(exports[target])
    listed = re.findall(r"\| (\S+) \[Op: (EdgeAttn\w+)\]", proc.stdout)
    assert listed == [(node.name, node.op_type) for node in nodes] and len(nodes) == 8
    for node in nodes:
        assert "{}.plugin_namespace = edgeattn".format(node.name) in proc.stdout
        assert "{}.plugin_version = 1".format(node.name) in proc.stdout


def test_polygraphy_runs_the_ort_variant_on_onnx_runtime(exports):
    """Polygraphy's own ONNX Runtime runner executes the custom nodes through their model-local functions."""
    proc = subprocess.run([_polygraphy(), "run", exports["ort"], "--onnxrt"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, universal_newlines=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "PASSED" in proc.stdout
