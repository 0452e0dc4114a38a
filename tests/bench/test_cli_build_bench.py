"""`edgeattn build` / `edgeattn bench` through the CLI: success, the precision policy per TensorRT version, and every
bad-input path (exit 2, one line on stderr, no output file)."""
import json
import os
import sys

import pytest

from bench_helpers import layernorm_model, matmul_model, needs_onnx


def _one_error_line(result):
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("edgeattn: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], result.stderr
    return errors[0]


def _header(engine):
    with open(engine) as handle:
        return json.loads(handle.read().split(" ", 1)[1])


@pytest.mark.parametrize("command", ["build", "bench", "doctor"])
def test_help(invoke, command):
    result = invoke([command, "--help"], expect=0)
    assert "Usage: " in result.stdout and "UNAVAILABLE" not in result.stdout


def test_build_then_bench(invoke, fake_trtexec, tmp_path, write_model, no_jetson):
    trtexec = fake_trtexec("10.3.0")
    model = write_model(matmul_model(features=8))
    result = invoke(["build", model, "--backend", "trtexec", "--trtexec", trtexec, "--shapes", "x:1x8,2x8,4x8"],
                    expect=0)
    engine = str(tmp_path / "model.engine")
    assert "built {}".format(engine) in result.stdout and "TensorRT 10.3.0 via trtexec" in result.stdout
    assert os.path.exists(engine + ".json")
    out = tmp_path / "bench.json"
    result = invoke(["bench", engine, "--trtexec", trtexec, "--batch", "2", "--iterations", "20", "--warmup-s",
                     "0.01", "--json", str(out)], expect=0)
    data = json.loads(out.read_text())
    assert data["backend"] == "trtexec" and data["iterations"] == 20 and data["gpu_compute_ms"]["mean"] > 0
    assert "GPU compute" in result.stdout


def test_fp16_weak_typing_pins_islands_through_trtexec(invoke, fake_trtexec, tmp_path, write_model, no_jetson):
    model = write_model(layernorm_model())
    invoke(["build", model, "--precision", "fp16", "--backend", "trtexec", "--trtexec", fake_trtexec("8.6.2")],
           expect=0)
    engine = str(tmp_path / "model.fp16.engine")
    header = _header(engine)
    assert header["fp16"] and header["precision_constraints"] == "obey"
    pinned = {item.rsplit(":", 1)[0] for item in header["layer_precisions"].split(",")}
    assert pinned == {"/norm/ReduceMean", "/norm/Sub", "/norm/Pow", "/norm/ReduceMean_1", "/norm/Add", "/norm/Sqrt",
                      "/norm/Div", "/attn/Softmax"}
    precision = json.load(open(engine + ".json"))["precision"]
    assert precision["typing"] == "weak" and precision["fp32_islands"] == {"layernorm": 7, "softmax": 1}


def test_fp16_on_8_2_warns_that_trtexec_cannot_pin(invoke, fake_trtexec, tmp_path, write_model):
    model = write_model(layernorm_model())
    result = invoke(["build", model, "--precision", "fp16", "--backend", "trtexec", "--trtexec",
                     fake_trtexec("8.2.1")], expect=0)
    assert "cannot pin layers to FP32" in result.stderr
    header = _header(str(tmp_path / "model.fp16.engine"))
    assert header["fp16"] and header["layer_precisions"] is None
    assert "none" in json.load(open(str(tmp_path / "model.fp16.engine.json")))["precision"]["enforced_by"]


@needs_onnx
def test_fp16_strongly_typed_for_tensorrt_11(invoke, fake_trtexec, tmp_path, write_model, no_jetson):
    model = write_model(layernorm_model())
    invoke(["build", model, "--precision", "fp16", "--backend", "trtexec", "--trtexec", fake_trtexec("11.1.0")],
           expect=0)
    manifest = json.load(open(str(tmp_path / "model.fp16.engine.json")))
    assert manifest["source_onnx"]["variant"] == "fp16-strongly-typed"
    assert manifest["precision"]["typing"] == "strong"
    assert "--fp16" not in manifest["tensorrt"]["trtexec"]["command"]
    assert not [p for p in os.listdir(str(tmp_path)) if p.endswith(".onnx") and p != "model.onnx"]


@pytest.mark.parametrize("case,expected", [
    ("missing", "no such file"),
    ("corrupt", "is not a valid ONNX model"),
    ("bad-shapes", "not an input of the model"),
    ("shape-syntax", "bad --shapes"),
    ("version-compatible-8.2", "--version-compatible needs TensorRT >= 8.6"),
    ("no-tensorrt", "tensorrt is not installed"),
    ("no-trtexec", "trtexec not found or not executable"),
    ("overwrite", "would overwrite the ONNX file"),
    ("no-onnx", "onnx is not installed; it is needed for `edgeattn build`"),
])
def test_build_bad_input(invoke, fake_trtexec, tmp_path, write_model, monkeypatch, case, expected):
    monkeypatch.setitem(sys.modules, "tensorrt", None)
    model = write_model(matmul_model(features=8))
    trtexec = fake_trtexec("8.2.1")
    engine = str(tmp_path / "out.engine")
    args = ["build", model, "-o", engine, "--backend", "trtexec", "--trtexec", trtexec]
    if case == "missing":
        args[1] = str(tmp_path / "nope.onnx")
    elif case == "corrupt":
        args[1] = write_model(matmul_model()[:-3], "corrupt.onnx")
    elif case == "bad-shapes":
        args += ["--shapes", "input:1x8"]
    elif case == "shape-syntax":
        args += ["--shapes", "x:1x8,2x8"]
    elif case == "version-compatible-8.2":
        args.append("--version-compatible")
    elif case == "no-tensorrt":
        args[5] = "tensorrt"
    elif case == "no-trtexec":
        args[7] = str(tmp_path / "nowhere" / "trtexec")
    elif case == "overwrite":
        args[3] = model
    elif case == "no-onnx":
        monkeypatch.setitem(sys.modules, "onnx", None)
    result = invoke(args, expect=2)
    assert expected in _one_error_line(result)
    assert not os.path.exists(engine) and not os.path.exists(engine + ".json")
    assert not [p for p in os.listdir(str(tmp_path)) if p.startswith(".")]


def test_bench_preflight_mismatch_exits_2_without_output(invoke, fake_trtexec, tmp_path, write_model):
    model = write_model(matmul_model(features=8, batch=1))
    invoke(["build", model, "--backend", "trtexec", "--trtexec", fake_trtexec("10.3.0")], expect=0)
    out = tmp_path / "result.json"
    result = invoke(["bench", str(tmp_path / "model.engine"), "--trtexec", fake_trtexec("8.6.2"), "--json",
                     str(out)], expect=2)
    line = _one_error_line(result)
    assert line.startswith("edgeattn: error: engine built with TensorRT 10.3.0 on Orin (sm_87); this machine has "
                           "TensorRT 8.6.2")
    assert "rebuild with `edgeattn build" in line
    assert not out.exists()


def test_bench_engine_without_runtime(invoke, isolated_path, tmp_path, write_model, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", None)
    engine = tmp_path / "m.engine"
    engine.write_bytes(b"\x00\x01\x02 plan")
    result = invoke(["bench", str(engine)], expect=2)
    assert "no TensorRT runtime to run an engine" in _one_error_line(result)


def test_bench_tensorrt_backend_needs_tensorrt(invoke, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", None)
    engine = tmp_path / "m.engine"
    engine.write_bytes(b"\x00\x01\x02 plan")
    result = invoke(["bench", str(engine), "--backend", "tensorrt"], expect=2)
    assert "tensorrt is not installed" in _one_error_line(result)


def test_bench_rejects_a_corrupt_manifest(invoke, tmp_path, fake_trtexec):
    engine = tmp_path / "m.engine"
    engine.write_bytes(b"plan")
    (tmp_path / "m.engine.json").write_text("{not json")
    result = invoke(["bench", str(engine), "--trtexec", fake_trtexec("10.3.0")], expect=2)
    assert "cannot read the engine manifest" in _one_error_line(result)

