"""ONNX Runtime benchmarks for real on CPU, through the API and the CLI."""
import json
import os

import numpy as np
import pytest

from bench_helpers import matmul_model, needs_ort
from edgeattn.bench import RESULT_SCHEMA, run_benchmark
from edgeattn.errors import EdgeAttnError

pytestmark = needs_ort

#: the edgeattn.bench/1 keys every result has (docs/outputs.md)
INTERFACE_KEYS = {"schema", "model", "backend", "provider", "batch", "threads", "precision", "iterations",
                  "warmup_s", "latency_ms", "throughput_items_per_s", "gpu_compute_ms", "samples_ms", "window",
                  "context"}


def test_result_format_and_statistics_from_recorded_iterations(write_model, no_jetson):
    path = write_model(matmul_model(features=32))
    progress = []
    result = run_benchmark(path, batch=3, warmup_s=0.02, iterations=40, threads=1,
                           progress=lambda f, m: progress.append(f))
    assert INTERFACE_KEYS <= set(result)
    assert result["schema"] == RESULT_SCHEMA
    assert result["model"]["kind"] == "onnx" and result["model"]["name"] == "model"
    assert result["model"]["path"] == os.path.abspath(path) and len(result["model"]["sha256"]) == 64
    assert (result["backend"], result["provider"]) == ("onnxruntime", "CPUExecutionProvider")
    assert (result["batch"], result["threads"], result["precision"]) == (3, 1, "fp32")
    assert result["inputs"] == {"x": [3, 32]}
    samples = np.array(result["samples_ms"])
    assert result["iterations"] == 40 == len(samples)
    stats = result["latency_ms"]
    assert stats["mean"] == pytest.approx(samples.mean(), rel=1e-6)
    assert stats["std"] == pytest.approx(samples.std(), rel=1e-5)
    assert stats["cov"] == pytest.approx(samples.std() / samples.mean(), rel=1e-5)
    for key, q in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99)):
        assert stats[key] == pytest.approx(np.percentile(samples, q), rel=1e-5)
    assert stats["min"] == pytest.approx(samples.min(), rel=1e-5)
    assert result["gpu_compute_ms"] is None
    window = result["window"]
    assert window["start_unix"] < window["end_unix"]
    assert window["end_unix"] - window["start_unix"] >= samples.sum() / 1000.0 * 0.99
    assert result["throughput_items_per_s"] == pytest.approx(3 * 40 / result["duration_s"], rel=1e-9)
    context = result["context"]
    assert context["python"]["version"] and context["cpu"]["cores_logical"] >= 1
    assert context["versions"]["onnxruntime"] and context["versions"]["edgeattn"]
    assert context["jetson"] is None
    assert progress[0] == 0.0 and progress[-1] == 1.0
    json.dumps(result)  # serialisable


def test_jetson_context_is_recorded_when_on_a_jetson(write_model, jetson_stub, isolated_path):
    nvpmodel = isolated_path / "nvpmodel"
    nvpmodel.write_text("#!/bin/sh\necho 'NV Power Mode: MAXN'\necho 0\n")
    nvpmodel.chmod(0o755)
    result = run_benchmark(write_model(matmul_model(features=8)), warmup_s=0, iterations=3)
    jetson = result["context"]["jetson"]
    assert jetson["board"]["model"] == "NVIDIA Jetson AGX Orin Developer Kit"
    assert jetson["power_mode"] == {"id": 0, "name": "MAXN"}
    assert jetson["clocks"] == {"gpu": {"cur_hz": 1300500000}}


def test_custom_op_with_local_function_runs_in_onnxruntime(write_model, no_jetson):
    result = run_benchmark(write_model(matmul_model(features=8, with_custom=True, with_function=True)),
                           warmup_s=0, iterations=5)
    assert result["iterations"] == 5


def test_tensorrt_variant_gives_a_clear_error(write_model):
    path = write_model(matmul_model(features=8, with_custom=True, with_function=False))
    with pytest.raises(EdgeAttnError, match="EdgeAttnLiteMLA.*without their local functions"):
        run_benchmark(path, warmup_s=0, iterations=2)


def test_fixed_batch_and_bad_arguments(write_model):
    path = write_model(matmul_model(batch=2, features=8))
    assert run_benchmark(path, batch=2, warmup_s=0, iterations=2)["inputs"] == {"x": [2, 8]}
    with pytest.raises(EdgeAttnError, match="fixed batch of 2"):
        run_benchmark(path, batch=4, warmup_s=0, iterations=2)
    with pytest.raises(EdgeAttnError, match="not both"):
        run_benchmark(path, duration_s=1.0, iterations=3)
    with pytest.raises(EdgeAttnError, match="batch must be"):
        run_benchmark(path, batch=0)
    with pytest.raises(EdgeAttnError, match="ONNX Runtime runs ONNX files"):
        engine = write_model(b"\x00\x01plan", "model.engine")
        run_benchmark(engine, backend="onnxruntime")


def test_cli_bench_writes_json(invoke, tmp_path, write_model, no_jetson):
    path = write_model(matmul_model(features=16))
    out = tmp_path / "runs" / "result.json"
    result = invoke(["bench", path, "--iterations", "12", "--warmup-s", "0", "--threads", "1", "--json", str(out)],
                    expect=0)
    data = json.loads(out.read_text())
    assert data["iterations"] == 12 and data["threads"] == 1
    assert "throughput" in result.stdout and str(out) in result.stdout
    assert result.stderr == ""  # progress is drawn on a terminal only (tests/test_progress.py), never in a pipe
    result = invoke(["bench", path, "--iterations", "3", "--warmup-s", "0", "--json", "-", "--quiet"], expect=0)
    assert json.loads(result.stdout)["iterations"] == 3
    assert result.stderr == ""


@pytest.mark.parametrize("case", ["missing", "corrupt", "directory", "both-lengths", "bad-duration"])
def test_cli_bench_bad_input(invoke, tmp_path, write_model, case):
    out = tmp_path / "out.json"
    args = ["bench"]
    if case == "missing":
        args.append(str(tmp_path / "nope.onnx"))
    elif case == "corrupt":
        args.append(write_model(matmul_model()[:-7], "corrupt.onnx"))
    elif case == "directory":
        args.append(str(tmp_path))
    else:
        args.append(write_model(matmul_model(features=8)))
        args += ["--duration-s", "1", "--iterations", "2"] if case == "both-lengths" else ["--duration-s", "0"]
    result = invoke(args + ["--json", str(out)], expect=2)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edgeattn: error: "), result.stderr
    assert not out.exists()
    assert list(tmp_path.glob(".out.json*")) == []
