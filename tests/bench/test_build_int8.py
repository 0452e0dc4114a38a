"""``edgeattn build --precision int8``: explicit quantization from a Q/DQ ONNX, through trtexec (the fake replays
real trtexec build output: the options dump's ``Precision: FP32+FP16+INT8``, the device blocks of real Jetson
captures in tests/fixtures/trtexec) and the TensorRT Python builder (stand-in module). GPU-unverified: no INT8
engine has been built on a GPU here."""
import json
import os

import numpy as np
import pytest

from bench_helpers import matmul_model, needs_onnx, qdq_matmul_model

pytestmark = needs_onnx

#: the Jetson Nano's GPU as the real 8.2.1 capture names it (tests/fixtures/trtexec/device_8.2.1_nano.txt)
NANO = "NVIDIA Tegra X1:5.3"


def _header(engine):
    with open(engine) as handle:
        return json.loads(handle.read().split(" ", 1)[1])


def _one_error_line(result, *words):
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.strip().splitlines() if not line.startswith("edgeattn: warning:")]
    assert len(lines) == 1 and lines[0].startswith("edgeattn: error:"), result.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize("version", ["8.2.1", "10.3.0"])
def test_int8_weak_typing_passes_int8_and_fp16_to_trtexec(invoke, fake_trtexec, tmp_path, write_model, no_jetson,
                                                          version):
    model = write_model(qdq_matmul_model(), "model.int8.onnx")
    result = invoke(["build", model, "--precision", "int8", "--backend", "trtexec", "--trtexec",
                     fake_trtexec(version)], expect=0)
    engine = str(tmp_path / "model.int8.engine")
    header = _header(engine)
    assert header["int8"] and header["fp16"] and header["qdq_nodes"] == 4
    manifest = json.load(open(engine + ".json"))
    command = manifest["tensorrt"]["trtexec"]["command"]
    assert "--int8" in command and "--fp16" in command and not any(a.startswith("--calib") for a in command)
    precision = manifest["precision"]
    assert precision["precision"] == "int8" and precision["typing"] == "weak"
    assert precision["quantization"]["qdq_nodes"] == 4
    assert "--int8" in precision["enforced_by"] or version == "8.2.1"
    assert "precision  int8 (weak)" in result.stdout


def test_int8_strongly_typed_for_tensorrt_11_takes_the_qdq_graph_without_flags(invoke, fake_trtexec, tmp_path,
                                                                              write_model, no_jetson):
    model = write_model(qdq_matmul_model())
    invoke(["build", model, "--precision", "int8", "--backend", "trtexec", "--trtexec", fake_trtexec("11.1.0")],
           expect=0)
    manifest = json.load(open(str(tmp_path / "model.int8.engine.json")))
    assert manifest["source_onnx"]["variant"] == "int8-qdq-strongly-typed"
    command = manifest["tensorrt"]["trtexec"]["command"]
    assert "--int8" not in command and "--fp16" not in command  # 11.x parses neither (real 11.1 help)
    assert manifest["precision"]["typing"] == "strong"
    assert manifest["precision"]["quantization"]["outside_qdq"].startswith("fp32")
    header = _header(str(tmp_path / "model.int8.engine"))
    assert header["qdq_nodes"] == 4 and not header["int8"]


def test_int8_on_a_model_without_qdq_says_to_run_quantize(invoke, fake_trtexec, tmp_path, write_model):
    model = write_model(matmul_model(features=8))
    _one_error_line(invoke(["build", model, "--precision", "int8", "--backend", "trtexec", "--trtexec",
                            fake_trtexec("10.3.0")]), "no Q/DQ nodes", "edgeattn quantize")
    assert os.listdir(str(tmp_path)) == ["model.onnx", "trt"]


def test_fp16_on_a_quantized_model_is_refused(invoke, fake_trtexec, tmp_path, write_model):
    model = write_model(qdq_matmul_model())
    _one_error_line(invoke(["build", model, "--precision", "fp16", "--backend", "trtexec", "--trtexec",
                            fake_trtexec("10.3.0")]), "is quantized", "--precision int8")


def test_int8_refused_on_the_jetson_nano_and_no_engine_left(invoke, fake_trtexec, tmp_path, write_model):
    """The device is known only from trtexec's own device block (no nvidia-smi here): refused after the build,
    and the engine is not kept."""
    model = write_model(qdq_matmul_model())
    _one_error_line(invoke(["build", model, "--precision", "int8", "--backend", "trtexec", "--trtexec",
                            fake_trtexec("8.2.1", device=NANO)]), "compute capability 5.3", "no INT8",
                    "--precision fp16")
    assert sorted(os.listdir(str(tmp_path))) == ["model.onnx", "trt"]


@pytest.mark.parametrize("capability,supported", [("5.3", False), ("6.2", False), ("6.1", True), ("7.2", True),
                                                  ("8.7", True), ((8, 7), True), (None, None), ("x", None)])
def test_int8_support_by_compute_capability(capability, supported):
    from edgeattn.engine.precision import int8_supported

    assert int8_supported(capability) is supported


def test_int8_refused_before_building_when_the_gpu_is_known(invoke, fake_trtexec, tmp_path, write_model,
                                                            monkeypatch):
    import edgeattn.probes as probes

    monkeypatch.setattr(probes, "cuda_device", lambda *a, **k: {"name": "Jetson TX2 (Pascal)",
                                                                "compute_capability": "6.2"})
    model = write_model(qdq_matmul_model())
    _one_error_line(invoke(["build", model, "--precision", "int8", "--backend", "trtexec", "--trtexec",
                            fake_trtexec("8.2.1")]), "Jetson TX2", "6.2")


def test_doctor_names_the_int8_support(monkeypatch):
    import edgeattn.doctor as doctor

    monkeypatch.setattr(doctor, "cuda_device", lambda *a, **k: {"name": "NVIDIA Tegra X1",
                                                                "compute_capability": "5.3", "source": "test"})
    check = doctor._check_cuda_device(None)
    assert "INT8: no" in check["summary"] and check["int8"] is False
    monkeypatch.setattr(doctor, "cuda_device", lambda *a, **k: {"name": "Orin", "compute_capability": "8.7",
                                                                "source": "test"})
    assert "INT8: yes" in doctor._check_cuda_device(None)["summary"]


def test_quantize_then_build_int8(invoke, fake_trtexec, tmp_path, write_model, no_jetson):
    """The workflow: edgeattn quantize's output builds as INT8 (its Q/DQ nodes reach trtexec)."""
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="/stem/Conv", pads=[1, 1, 1, 1])],
                              "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [weight])
    model = write_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    quantized = str(tmp_path / "model.int8.onnx")
    invoke(["quantize", model, "--calib", "random", "--calib-size", 4, "-o", quantized], expect=0)
    invoke(["build", quantized, "--precision", "int8", "--backend", "trtexec", "--trtexec", fake_trtexec("10.3.0")],
           expect=0)
    assert _header(str(tmp_path / "model.int8.engine"))["qdq_nodes"] == 4


def _classifier(tmp_path, write_model, invoke):
    """A 3 x 16 x 16 -> 10 classifier (Conv, mean pool, Gemm) and its `edgeattn quantize` output beside it."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((10, 8)).astype(np.float32), "fc")]
    nodes = [helper.make_node("Conv", ["images", "w"], ["c"], name="/stem/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["c"], ["p"], name="/pool/GlobalAveragePool"),
             helper.make_node("Flatten", ["p"], ["f"], name="/pool/Flatten"),
             helper.make_node("Gemm", ["f", "fc"], ["logits"], name="/head/Gemm", transB=1)]
    graph = helper.make_graph(nodes, "classifier", [helper.make_tensor_value_info("images", TensorProto.FLOAT,
                                                                                  [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    model = write_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    invoke(["quantize", model, "--calib", "skimage", "-o", str(tmp_path / "model.int8.onnx")], expect=0)
    return model


@pytest.mark.parametrize("speedup,winner", [(2.0, "int8"), (0.8, "fp16")])
def test_precision_auto_keeps_int8_only_where_faster(invoke, fake_trtexec, tmp_path, write_model, no_jetson,
                                                     monkeypatch, speedup, winner):
    pytest.importorskip("onnxruntime")
    # the calibration and agreement pictures are scikit-image's (the images extra, not in the board-side set)
    pytest.importorskip("skimage")
    model = _classifier(tmp_path, write_model, invoke)
    monkeypatch.setenv("FAKE_TRTEXEC_INT8_SPEEDUP", str(speedup))
    result = invoke(["build", model, "--precision", "auto", "--backend", "trtexec", "--trtexec",
                     fake_trtexec("10.3.0"), "--select-warmup-s", "0", "--select-duration-s", "0.2",
                     "--min-top1", "0.5"], expect=0)
    engine = str(tmp_path / "model.auto.engine")
    manifest = json.load(open(engine + ".json"))
    selection = manifest["precision_selection"]
    assert selection["selected"] == winner and manifest["precision"]["precision"] == winner
    fp16, int8 = selection["candidates"]
    assert (fp16["precision"], int8["precision"]) == ("fp16", "int8")
    assert int8["p50_ms"] == pytest.approx(fp16["p50_ms"] / speedup, rel=0.1)  # the fake's compute time
    assert int8["top1"] >= 0.5 and fp16["top1"] == 1.0 and int8["cosine_mean"] > 0.99
    assert ("not faster" in selection["reason"]) == (winner == "fp16")
    assert _header(engine)["int8"] == (winner == "int8")
    assert "selected   {}".format(winner) in result.stdout
    assert not [p for p in os.listdir(str(tmp_path)) if p.startswith(".edgeattn-")]


@pytest.mark.parametrize("fp16,int8,winner,why", [
    ({"p50_ms": 2.0, "top1": 1.0}, {"p50_ms": 1.0, "top1": 0.98}, "fp16", "< --min-top1"),
    ({"p50_ms": 2.0, "top1": 1.0}, {"p50_ms": 1.99, "top1": 1.0}, "fp16", "not faster"),
    ({"p50_ms": 2.0, "top1": 1.0}, {"error": "no INT8 on this GPU"}, "fp16", "INT8 candidate failed"),
    ({"error": "parse failed"}, {"p50_ms": 1.0, "top1": 1.0}, "int8", "FP16 candidate failed"),
    ({"p50_ms": 2.0, "top1": 1.0}, {"p50_ms": 1.5, "top1": 0.99}, "int8", "INT8 1.5 ms < FP16 2 ms"),
])
def test_precision_choice(fp16, int8, winner, why):
    from edgeattn.engine.precision_selection import choose

    got, reason = choose(dict({"error": None}, **fp16), dict({"error": None}, **int8), 0.99)
    assert got == winner and why in reason, reason


def test_precision_auto_needs_the_quantized_model(invoke, fake_trtexec, tmp_path, write_model):
    model = write_model(matmul_model(features=8))
    _one_error_line(invoke(["build", model, "--precision", "auto", "--backend", "trtexec", "--trtexec",
                            fake_trtexec("10.3.0")]), "model.int8.onnx", "edgeattn quantize")
