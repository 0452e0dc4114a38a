"""``edgeattn export`` / ``edgeattn inspect`` through the CLI (CliRunner): success paths and every bad input.

Bad input must give exit status 2, exactly one line on stderr, and no output file (nor temporary file) left.
"""
import json
import os

import onnx
import pytest

from edgeattn.onnx_graph import load_model, model_info

ARCH = "vit_tiny_elfatt"  # small, and carries both blockify and EFFATT custom ops


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    import torch

    from edgeattn.models.checkpoint import save_checkpoint
    from edgeattn.models import create_model

    directory = tmp_path_factory.mktemp("checkpoints")
    torch.manual_seed(0)
    model = create_model(ARCH)
    paths = {"good": directory / "vit.pt", "state_dict": directory / "state_dict.pt",
             "pickled_module": directory / "module.pt", "corrupt": directory / "corrupt.pt",
             "truncated": directory / "truncated.pt", "not_onnx": directory / "not_onnx.onnx"}
    save_checkpoint(model, paths["good"])
    torch.save(model.state_dict(), paths["state_dict"])
    torch.save(model, paths["pickled_module"])
    paths["corrupt"].write_bytes(os.urandom(4096))
    data = paths["good"].read_bytes()
    paths["truncated"].write_bytes(data[:len(data) // 2])
    paths["not_onnx"].write_bytes(b"\x08\x07this is not protobuf at all \xff\xff\xff")
    return paths


def _one_error_line(result):
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("edgeattn: error: "), lines[0]
    return lines[0]


def _files(directory):
    return sorted(p.name for p in directory.iterdir())


def test_export_checkpoint_prints_summary_and_writes_ort_variant(invoke, checkpoints, tmp_path):
    out = tmp_path / "vit.onnx"
    result = invoke(["export", checkpoints["good"], "-o", out, "--summary-json", tmp_path / "summary.json"],
                    expect=0)
    for text in ("exported", "opset     17", "custom    EdgeAttnBlockifyAttention x4, EdgeAttnEfficientAttention x4",
                 "parity    ORT CPU vs PyTorch FP32", "max rel", "size", "time"):
        assert text in result.stdout, result.stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["parity"]["max_rel"] <= 1e-4
    assert summary["custom_ops"] == {"EdgeAttnBlockifyAttention": 4, "EdgeAttnEfficientAttention": 4}
    model = onnx.load(str(out))
    assert sorted(f.name for f in model.functions) == ["EdgeAttnBlockifyAttention", "EdgeAttnEfficientAttention"]
    assert _files(tmp_path) == ["summary.json", "vit.onnx"]

    text = invoke(["inspect", out], expect=0).stdout
    assert "variant   ort:" in text
    assert "EdgeAttnBlockifyAttention x4" in text and "window_size=7" in text
    assert "every custom node conforms to export/schemas" in text
    desc = json.loads(invoke(["inspect", out, "--json"], expect=0).stdout)
    assert desc["variant"] == "ort"
    assert desc["opset_imports"] == {"": 17, "trt.plugins": 1}
    assert len(desc["custom_nodes"]) == 8 and desc["schema_problems"] == 0
    assert desc["inputs"][0]["name"] == "images" and desc["inputs"][0]["shape"] == [1, 3, 224, 224]


def test_export_tensorrt_target_opset13(invoke, tmp_path):
    out = tmp_path / "vit.trt.onnx"
    result = invoke(["export", "--arch", ARCH, "--target", "tensorrt", "--opset", "13", "-o", out], expect=0)
    assert "target    tensorrt" in result.stdout and "parity" in result.stdout
    info = model_info(load_model(str(out)))
    assert info["has_functions"] is False
    assert info["opset_imports"] == {"": 13, "trt.plugins": 1}
    assert info["ir_version"] == 7
    model = onnx.load(str(out))
    for node in model.graph.node:
        if node.domain == "trt.plugins":
            attrs = {a.name: a.s.decode() for a in node.attribute if a.name.startswith("plugin_")}
            assert attrs == {"plugin_namespace": "edgeattn", "plugin_version": "1"}
    desc = json.loads(invoke(["inspect", out, "--json"], expect=0).stdout)
    assert desc["variant"] == "tensorrt" and desc["functions"] == []


def test_export_dynamic_batch(invoke, tmp_path):
    out = tmp_path / "dynamic.onnx"
    result = invoke(["export", "--arch", ARCH, "--batch", "dynamic", "-o", out], expect=0)
    assert "(batch 3)" in result.stdout  # traced at batch 2, checked at 3: the batch axis is free
    desc = json.loads(invoke(["inspect", out, "--json"], expect=0).stdout)
    assert desc["variant"] == "ort"
    assert desc["inputs"][0]["shape"] == ["batch", 3, 224, 224]
    assert desc["outputs"][0]["shape"] == ["batch", 1000]


def test_export_without_plugins(invoke, tmp_path):
    out = tmp_path / "std.onnx"
    result = invoke(["export", "--arch", ARCH, "--no-plugins", "-o", out], expect=0)
    assert "custom    none" in result.stdout
    desc = json.loads(invoke(["inspect", out, "--json"], expect=0).stdout)
    assert desc["variant"] == "standard" and desc["custom_nodes"] == [] and desc["functions"] == []


def test_export_checkpoint_at_another_resolution(invoke, checkpoints, tmp_path):
    out = tmp_path / "vit448.onnx"
    result = invoke(["export", checkpoints["good"], "--resolution", "448", "-o", out], expect=0)
    assert "resolution 448" in result.stdout
    desc = json.loads(invoke(["inspect", out, "--json"], expect=0).stdout)
    assert desc["inputs"][0]["shape"] == [1, 3, 448, 448]
    blockify = [n for n in desc["custom_nodes"] if n["op_type"] == "EdgeAttnBlockifyAttention"]
    assert {(n["attributes"]["height"], n["attributes"]["width"]) for n in blockify} == {(28, 28)}


def test_export_default_output_name_and_no_check(invoke, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke(["export", "--arch", ARCH, "--no-check"], expect=0)
    assert "not checked" in result.stdout
    assert _files(tmp_path) == [ARCH + ".onnx"]


def test_trusted_pickle_is_accepted_with_flag(invoke, checkpoints, tmp_path):
    out = tmp_path / "module.onnx"
    with pytest.warns(UserWarning, match="trust_pickle=True"):
        invoke(["export", checkpoints["pickled_module"], "--trust-pickle", "-o", out], expect=0)
    assert out.exists()


BAD_EXPORTS = {
    "missing file": (["{missing}"], "no such file"),
    "corrupt file": (["{corrupt}"], "corrupt"),
    "truncated checkpoint": (["{truncated}"], "truncated"),
    "state dict without arch": (["{state_dict}"], "without an architecture"),
    "untrusted pickle": (["{pickled_module}"], "--trust-pickle"),
    "unknown arch": (["--arch", "no_such_model"], "unknown model architecture"),
    "arch differs from checkpoint": (["{good}", "--arch", "vit_tiny_softmax"], "not vit_tiny_softmax"),
    "resolution vs windows": (["--arch", "cswin_t24181_elfatt", "--resolution", "100"], "not divisible"),
    "resolution vs patches": (["--arch", ARCH, "--resolution", "200"], "patch size"),
    "opset too old": (["--arch", ARCH, "--opset", "12"], "opset 12 is too old"),
    "opset too new": (["--arch", ARCH, "--opset", "21"], "newer than the TorchScript"),
    "bad batch": (["--arch", ARCH, "--batch", "0"], "--batch"),
    "nothing to export": ([], "--arch NAME"),
}


@pytest.mark.parametrize("case", sorted(BAD_EXPORTS))
def test_bad_export_input(invoke, checkpoints, tmp_path, case):
    args, message = BAD_EXPORTS[case]
    paths = {key: str(value) for key, value in checkpoints.items()}
    paths["missing"] = str(tmp_path / "missing.pt")
    out = tmp_path / "out" / "model.onnx"
    result = invoke(["export"] + [a.format(**paths) for a in args] + ["-o", out])
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert message in _one_error_line(result)
    assert not out.exists()
    assert not out.parent.exists() or _files(out.parent) == []


def test_output_may_not_overwrite_checkpoint(invoke, checkpoints):
    before = checkpoints["good"].read_bytes()
    result = invoke(["export", checkpoints["good"], "-o", checkpoints["good"]])
    assert result.exit_code == 2
    assert "overwrite" in _one_error_line(result)
    assert checkpoints["good"].read_bytes() == before


def test_failed_check_leaves_no_file(invoke, tmp_path, monkeypatch):
    """A failure after the export itself (here: parity with an impossible limit) still writes nothing."""
    from edgeattn.export import exporter

    monkeypatch.setattr(exporter, "PARITY_RTOL", 0.0)
    out = tmp_path / "model.onnx"
    result = invoke(["export", "--arch", ARCH, "-o", out])
    assert result.exit_code == 2
    assert "differs from PyTorch" in _one_error_line(result)
    assert _files(tmp_path) == []


@pytest.mark.parametrize("case", ["missing", "not_onnx", "corrupt"])
def test_bad_inspect_input(invoke, checkpoints, tmp_path, case):
    path = tmp_path / "missing.onnx" if case == "missing" else checkpoints[case]
    result = invoke(["inspect", path])
    assert result.exit_code == 2
    _one_error_line(result)


def test_inspect_needs_neither_torch_nor_onnxruntime_and_names_a_missing_onnx(invoke, tmp_path):
    """`edgeattn inspect` reads the file with the onnx package alone (as on a board); without onnx it says so."""
    import subprocess
    import sys

    out = tmp_path / "vit.onnx"
    invoke(["export", "--arch", ARCH, "--no-check", "-o", out], expect=0)
    code = ("import sys\n"
            "for name in sys.argv[2].split(','):\n"
            "    sys.modules[name] = None  # any import of them raises ImportError\n"
            "from edgeattn.cli import main\n"
            "main(['inspect', sys.argv[1]])\n")

    def inspect_without(blocked):
        return subprocess.run([sys.executable, "-c", code, str(out), blocked], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=120)

    result = inspect_without("torch,onnxruntime,onnx_graphsurgeon")
    assert result.returncode == 0, result.stderr
    assert "variant   ort:" in result.stdout
    assert "every custom node conforms to export/schemas" in result.stdout
    result = inspect_without("onnx")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "edgeattn: error: onnx is not installed; it is needed for `edgeattn inspect`. Install it with `pip install "
        "onnx` (a dependency of edgeattn; deploy/jetson/setup.sh installs it)."]
