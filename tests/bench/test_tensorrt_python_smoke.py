"""Smoke test of the TensorRT *Python* builder path against a stand-in ``tensorrt`` module.

This does NOT verify TensorRT behaviour (no TensorRT or GPU here): the stand-in only mirrors the documented API
surface the builder calls, so the test catches broken control flow in our thin layer - the precision policy
pinning layers by type and by ONNX node name, parse failures listing the registered creators, the manifest - and
nothing more. The real API is exercised only on a device.
"""
import json
import sys
import types

import pytest

import tensorrt_support
from bench_helpers import layernorm_model, matmul_model, qdq_matmul_model
from edgeattn.engine import build_engine
from edgeattn.errors import EdgeAttnError


def _fake_tensorrt(layers, parse_ok=True, version="10.3.0"):
    creator = types.SimpleNamespace(name="EdgeAttnBlockifyAttention", plugin_version="1", plugin_namespace="edgeattn")
    trt = tensorrt_support.tensorrt_module(version, [creator])
    trt.float32, trt.float16, trt.int32 = "float32", "float16", "int32"
    state = {"flags": [], "profiles": [], "pool": None}

    class Network(object):
        num_layers = len(layers)

        def get_layer(self, index):
            return layers[index]

    class Parser(object):
        num_errors = 0 if parse_ok else 1

        def __init__(self, network, logger):
            pass

        def parse(self, data, path):
            state["parsed_path"] = path
            return parse_ok

        def get_error(self, index):
            return "In node 2 (checkFallbackPluginImporter): INVALID_NODE: creator && \"Plugin not found, are the " \
                   "plugin name, version, and namespace correct?\""

    Builder = tensorrt_support.builder_class(state, Network, lambda network, config: b"serialized plan")
    trt.Builder, trt.OnnxParser = Builder, Parser
    return trt, state


class _Layer(object):
    def __init__(self, name, layer_type, dtype="float16"):
        self.name = name
        self.type = "LayerType." + layer_type
        self.num_outputs = 1
        self._outputs = [types.SimpleNamespace(dtype=dtype)]
        self.precision = None
        self.output_types = {}

    def get_output(self, index):
        return self._outputs[index]

    def set_output_type(self, index, dtype):
        self.output_types[index] = dtype


@pytest.fixture
def fake_trt(monkeypatch):
    def _install(layers, **kwargs):
        trt, state = _fake_tensorrt(layers, **kwargs)
        monkeypatch.setitem(sys.modules, "tensorrt", trt)
        for module in ("torch", "cuda", "cuda.bindings", "cuda.bindings.runtime", "cuda.cudart"):
            monkeypatch.setitem(sys.modules, module, None)
        import edgeattn.tensorrt.api as api

        monkeypatch.setattr(api, "_LOGGER", None)
        monkeypatch.setattr(api, "_NVIDIA_PLUGINS_READY", False)
        return state

    return _install


def test_fp16_weak_typing_pins_island_layers(fake_trt, tmp_path, write_model, isolated_path, no_jetson):
    layers = [_Layer("/fc/MatMul", "MATRIX_MULTIPLY"), _Layer("/norm/ReduceMean", "REDUCE"),
              _Layer("/norm/Sub", "ELEMENTWISE"), _Layer("/norm/Sqrt", "UNARY"), _Layer("/norm/Mul", "ELEMENTWISE"),
              _Layer("/attn/Softmax", "SOFTMAX"), _Layer("(Unnamed Layer* 7) [Shape]", "SHAPE", dtype="int32")]
    state = fake_trt(layers)
    engine = str(tmp_path / "m.engine")
    manifest = build_engine(write_model(layernorm_model()), engine, precision="fp16", backend="tensorrt",
                            workspace_mb=64)
    pinned = {layer.name for layer in layers if layer.precision == "float32"}
    assert pinned == {"/norm/ReduceMean", "/norm/Sub", "/norm/Sqrt", "/attn/Softmax"}
    assert all(layer.output_types == {0: "float32"} for layer in layers if layer.name in pinned)
    assert state["flags"] == ["FP16", "OBEY"] and state["pool"] == ("workspace", 64 << 20)
    assert state["profiles"] == [("x", [2, 8, 16], [2, 8, 16], [2, 8, 16])]
    assert open(engine, "rb").read() == b"serialized plan"
    assert manifest["tensorrt"]["builder"] == "tensorrt-python" and manifest["tensorrt"]["version"] == "10.3.0"
    assert manifest["precision"]["pinned_layers"] == sorted(pinned, key=[l.name for l in layers].index)
    assert json.load(open(engine + ".json"))["precision"]["typing"] == "weak"


def test_int8_sets_the_int8_flag_beside_the_fp16_policy(fake_trt, tmp_path, write_model, isolated_path, no_jetson):
    """Explicit quantization on weakly typed TensorRT (8.x-10.x): BuilderFlag.INT8 (no calibrator) with the FP16
    policy for the layers outside the Q/DQ pairs; a strongly typed network (11.x) gets no precision flag."""
    layers = [_Layer("/fc/MatMul", "MATRIX_MULTIPLY"), _Layer("/attn/Softmax", "SOFTMAX")]
    state = fake_trt(layers)
    manifest = build_engine(write_model(qdq_matmul_model()), str(tmp_path / "m.engine"), precision="int8",
                            backend="tensorrt")
    assert state["flags"] == ["FP16", "OBEY", "INT8"]
    assert manifest["precision"]["precision"] == "int8" and manifest["precision"]["quantization"]["qdq_nodes"] == 4
    assert "BuilderFlag.INT8 + FP16" in manifest["precision"]["enforced_by"]
    state = fake_trt(layers, version="11.1.0")
    manifest = build_engine(write_model(qdq_matmul_model()), str(tmp_path / "s.engine"), precision="int8",
                            backend="tensorrt")
    assert state["flags"] == [] and manifest["precision"]["typing"] == "strong"
    assert manifest["source_onnx"]["variant"] == "int8-qdq-strongly-typed"


def test_int8_refused_on_a_gpu_without_it_before_building(fake_trt, tmp_path, write_model, monkeypatch):
    import edgeattn.probes as probes

    state = fake_trt([])
    monkeypatch.setattr(probes, "cuda_device", lambda *a, **k: {"name": "NVIDIA Tegra X1",
                                                                "compute_capability": "5.3"})
    with pytest.raises(EdgeAttnError, match="compute capability 5.3"):
        build_engine(write_model(qdq_matmul_model()), str(tmp_path / "m.engine"), precision="int8",
                     backend="tensorrt")
    assert "parsed_path" not in state and not (tmp_path / "m.engine").exists()


def test_parse_failure_lists_registered_creators(fake_trt, tmp_path, write_model, plugins_stub):
    from bench_helpers import write_plugin_library

    fake_trt([], parse_ok=False)
    library = write_plugin_library(tmp_path / "lib.so")
    engine = tmp_path / "m.engine"
    with pytest.raises(EdgeAttnError) as info:
        build_engine(write_model(matmul_model(features=8, with_custom=True)), str(engine), plugins=library,
                     backend="tensorrt")
    message = info.value.format_message()
    assert "found no plugin" in message and "edgeattn::EdgeAttnBlockifyAttention v1" in message
    assert not engine.exists() and not (tmp_path / "m.engine.json").exists()


@pytest.mark.parametrize("runtime_version", ["10.4.0", "10.3.0"])
def test_tensorrt_bench_checks_the_manifest_before_loading_plugins_or_the_engine(monkeypatch, runtime_version):
    """An engine from another TensorRT (plain engines need the exact version that built them) is refused with the
    rebuild command before any plugin library is loaded or the plan deserialized; with the same version it goes
    on to load them (here a stand-in runtime then returns no engine)."""
    from edgeattn.bench import tensorrt_backend
    from edgeattn.tensorrt import api as tensorrt_api

    events = []
    trt = types.ModuleType("tensorrt")
    trt.__version__ = runtime_version
    trt.Logger = type("Logger", (), {"WARNING": 2, "__init__": lambda self, level=None: None})

    class Runtime(object):
        def __init__(self, logger):
            events.append("runtime")

        def deserialize_cuda_engine(self, data):
            return None

    trt.Runtime = Runtime
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    monkeypatch.setattr(tensorrt_api, "_LOGGER", None)
    orin = {"name": "Orin", "compute_capability": "8.7"}
    cuda = types.SimpleNamespace(device=lambda: dict(orin), release=lambda: events.append("released"))
    monkeypatch.setattr(tensorrt_backend, "open_cuda", lambda: cuda)
    monkeypatch.setattr(tensorrt_backend, "load_plugins", lambda trt, path: events.append(("plugins", path)))
    manifest = {"schema": "edgeattn.engine/1", "tensorrt": {"version": "10.3.0", "version_compatible": False},
                "device": orin, "rebuild_command": "edgeattn build m.onnx -o m.engine"}
    with pytest.raises(EdgeAttnError) as info:
        tensorrt_backend.run("m.engine", b"plan", manifest, 1, "/lib/libedgeattn_plugins.so", 0, None, 1, False,
                             None)
    if runtime_version == "10.4.0":
        assert info.value.format_message() == (
            "engine built with TensorRT 10.3.0 on Orin (sm_87); this machine has TensorRT 10.4.0 on Orin (sm_87): "
            "rebuild with `edgeattn build m.onnx -o m.engine`")
        assert ("plugins", "/lib/libedgeattn_plugins.so") not in events and "runtime" not in events
    else:
        assert "could not deserialize" in info.value.format_message()
        assert events[:2] == [("plugins", "/lib/libedgeattn_plugins.so"), "runtime"]
