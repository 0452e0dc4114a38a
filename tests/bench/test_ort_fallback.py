"""ONNX Runtime dropping a GPU provider it cannot initialise and running on the CPU: a warning in bench (and
compare, which opens its sessions the same way), tested with a stand-in session whose providers we choose."""
import sys
import types

import numpy as np

from bench_helpers import matmul_model, needs_onnx
from edgeattn.bench.onnxruntime_backend import fallback_problem


def test_fallback_problem_names_the_lost_providers():
    asked = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert fallback_problem(asked, asked) is None
    assert fallback_problem(["CPUExecutionProvider"], ["CPUExecutionProvider"]) is None
    problem = fallback_problem(asked, ["CPUExecutionProvider"])
    assert "could not initialise CUDAExecutionProvider" in problem and "not GPU results" in problem


def _stand_in_onnxruntime(used):
    ort = types.ModuleType("onnxruntime")
    ort.__version__ = "1.20.0"
    ort.get_available_providers = lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]
    ort.SessionOptions = lambda: types.SimpleNamespace(log_severity_level=0, intra_op_num_threads=0,
                                                       inter_op_num_threads=0)

    class Session(object):
        def __init__(self, path, options, providers=None):
            self.asked = providers

        def get_providers(self):
            return list(used)

        def get_inputs(self):
            return [types.SimpleNamespace(name="x", type="tensor(float)", shape=["batch", 8])]

        def run(self, names, feeds):
            return [np.zeros((1, 8), np.float32)]

    ort.InferenceSession = Session
    return ort


@needs_onnx
def test_bench_warns_when_the_session_fell_back_to_the_cpu(invoke, write_model, monkeypatch):
    model = write_model(matmul_model(features=8))
    monkeypatch.setitem(sys.modules, "onnxruntime", _stand_in_onnxruntime(["CPUExecutionProvider"]))
    result = invoke(["bench", model, "--provider", "cuda", "--iterations", "10", "--warmup-s", "0"], expect=0)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("edgeattn: warning: ")]
    assert len(warnings) == 1 and "could not initialise CUDAExecutionProvider" in warnings[0]
    assert "[CPUExecutionProvider]" in result.stdout


@needs_onnx
def test_bench_is_quiet_when_the_session_kept_the_gpu(invoke, write_model, monkeypatch):
    model = write_model(matmul_model(features=8))
    monkeypatch.setitem(sys.modules, "onnxruntime", _stand_in_onnxruntime(
        ["CUDAExecutionProvider", "CPUExecutionProvider"]))
    monkeypatch.setattr("edgeattn.probes.cuda_device", lambda: None)
    result = invoke(["bench", model, "--provider", "cuda", "--iterations", "10", "--warmup-s", "0"], expect=0)
    assert "warning" not in result.stderr


def test_doctor_reports_a_cuda_provider_that_falls_back(monkeypatch):
    from edgeattn import doctor

    ort = _stand_in_onnxruntime(["CPUExecutionProvider"])
    datasets = types.ModuleType("onnxruntime.datasets")
    datasets.get_example = lambda name: "/nonexistent/" + name  # the stand-in session never opens it
    ort.datasets = datasets
    monkeypatch.setitem(sys.modules, "onnxruntime", ort)
    monkeypatch.setitem(sys.modules, "onnxruntime.datasets", datasets)
    check = doctor._check_onnxruntime()
    assert not check["ok"] and "a session asked for CUDA runs on CPUExecutionProvider only" in check["summary"]
    monkeypatch.setitem(sys.modules, "onnxruntime", _stand_in_onnxruntime(
        ["CUDAExecutionProvider", "CPUExecutionProvider"]))
    monkeypatch.setitem(sys.modules, "onnxruntime.datasets", datasets)
    assert doctor._check_onnxruntime()["ok"]
