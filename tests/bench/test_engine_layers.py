"""`edgeattn inspect ENGINE|LAYERS.json` and `edgeattn bench --layers` against real trtexec exports
(tests/fixtures/trtexec/README.md names their sources), read directly and replayed by the fake trtexec; the
TensorRT Python path through a stand-in ``tensorrt`` module (its API surface only, not TensorRT's behaviour)."""
import json
import os
import sys
import types

import pytest

from bench_helpers import FIXTURES, matmul_model, needs_onnx, read_fixture
from edgeattn.tensorrt.layers import INSPECT_ENGINE_SCHEMA, describe_layers, layer_times, tensor_precision
from edgeattn.errors import EdgeAttnError
from edgeattn.trtexec.exports import parse_layer_info, parse_profile

MOBILENET = os.path.join(FIXTURES, "layers_trex_mobilenet_qat.graph.json")
MOBILENET_PROFILE = os.path.join(FIXTURES, "profile_trex_mobilenet_qat.profile.json")
RESNET = os.path.join(FIXTURES, "layers_trex_resnet_a100_fp16.graph.json")
NAMES_84 = os.path.join(FIXTURES, "layers_names_8.4_hackathon_issue18.json")
TRUNCATED_10 = os.path.join(FIXTURES, "layers_names_10.0.1_truncated_issue4048.json")


def _text(path):
    with open(path) as handle:
        return handle.read()


def _one_error_line(result):
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edgeattn: error: "), result.stderr
    return lines[0]


# ------------------------------------------------------------------ the parser and the description, real files
def test_detailed_int8_layer_info():
    raw = json.loads(_text(MOBILENET))
    desc = describe_layers(parse_layer_info(_text(MOBILENET)), "m")
    assert desc["schema"] == INSPECT_ENGINE_SCHEMA and desc["detailed"] and desc["layer_count"] == len(raw["Layers"])
    assert desc["bindings"] == ["input1", "1179"]
    # TREx's rule, applied here by hand: a layer's precision is its first input's data type
    expected = {}
    for layer in raw["Layers"]:
        text = layer["Inputs"][0]["Format/Datatype"]
        key = "int8" if "Int8" in text else "fp16" if "FP16" in text else "fp32" if "FP32" in text else None
        expected[key] = expected.get(key, 0) + 1
    assert desc["precision_totals"] == expected and set(expected) == {"int8", "fp16", "fp32"}
    first, conv = desc["layers"][0], desc["layers"][1]
    assert (first["name"], first["type"], first["group"]) == ("QuantizeLinear_2", "Reformat", "reformat")
    assert first["precision"] == "fp32" and first["outputs"][0]["precision"] == "int8"
    assert conv["tactic"] == "volta_int8x4_icudnn_int8x4_128x32_relu_xregs_medium_c32_nn_v1"
    assert conv["fused_from"] == ["features.0.0.weight", "QuantizeLinear_8", "Conv_12", "PWN(Clip_16)"]
    assert desc["layers"][2]["tactic"] == "0x0000000000000001"  # no TacticName: the TacticValue
    assert len(desc["reformats"]) == sum(1 for layer in raw["Layers"] if layer["LayerType"] == "Reformat")
    assert desc["other_layers"] == {"CaskConvolution": 36, "CudaDepthwiseConvolution": 17, "TiledPooling": 1,
                                    "NoOp": 1}
    assert desc["plugins"] == [] and desc["fused_regions"] == []


def test_fp16_copy_nodes_name_the_layer_they_feed():
    desc = describe_layers(parse_layer_info(_text(RESNET)), "r")
    assert desc["precision_totals"] == {"fp16": 35, "fp32": 1}
    first = desc["reformats"][0]
    assert first["for"] == {"side": "input", "layer": "Conv_0 + Relu_1"}
    assert (first["from_precision"], first["to_precision"]) == ("fp32", "fp16")


def test_names_only_layer_info_of_8_4():
    info = parse_layer_info(_text(NAMES_84))
    assert not info["detailed"] and len(info["layers"]) == 12 and info["bindings"] == ["x:0", "z:0"]
    desc = describe_layers(info, "n")
    assert desc["precision_totals"] == {"unknown": 12}
    assert [r["for"] for r in desc["reformats"]] == [{"side": "output", "layer": "MaxPool2d"},
                                                    {"side": "input", "layer": "MaxPool2d_1"}]


@pytest.mark.parametrize("text, reason", [
    (_text(TRUNCATED_10), "not a complete JSON document"),
    (_text(MOBILENET)[:-200], "not a complete JSON document"),
    (_text(MOBILENET_PROFILE), "without the \"Layers\" list"),
    ('{"Layers": ["a", {"Name": "b"}]}', "mixes names and objects"),
    ('{"Layers": [{"LayerType": "Reformat"}]}', "without a \"Name\""),
])
def test_layer_info_refuses_cut_and_foreign_files(text, reason):
    with pytest.raises(EdgeAttnError, match=reason):
        parse_layer_info(text)


def test_plugin_layers_named_by_op_with_their_reformats():
    # The real 8.4 names file with two of its layers renamed to our custom node (the ONNX parser names a plugin
    # layer after its node): "Reformatting CopyNode for Input Tensor 0 to MaxPool2d_1" then feeds the plugin.
    data = json.loads(_text(NAMES_84))
    data["Layers"] = [name.replace("MaxPool2d_1", "/blocks.0/attn/EdgeAttnLiteMLA") if "MaxPool2d_1__" not in name
                      else name for name in data["Layers"]]
    desc = describe_layers(parse_layer_info(json.dumps(data)), "p")
    assert len(desc["plugins"]) == 1
    plugin = desc["plugins"][0]
    assert (plugin["op_type"], plugin["version"], plugin["ours"]) == ("EdgeAttnLiteMLA", "1", True)
    assert plugin["reformats_around"] == ["Reformatting CopyNode for Input Tensor 0 to /blocks.0/attn/EdgeAttnLiteMLA"]
    # detailed info: a plugin layer type (TREx's colour table lists "PluginV2") not named after our ops
    raw = json.loads(_text(MOBILENET))
    raw["Layers"][0]["LayerType"] = "PluginV2"
    other = describe_layers(parse_layer_info(json.dumps(raw)), "q", custom_ops=[
        {"op_type": "EdgeAttnLiteMLA", "plugin_version": "1", "plugin_namespace": "edgeattn"}])
    assert [(p["layer"], p["ours"], p["op_type"]) for p in other["plugins"]] == [("QuantizeLinear_2", False, None)]


def test_myelin_regions_and_what_they_swallowed():
    # Names from real captures: the 8.5.2 Xavier --dumpProfile log (tests/fixtures/trtexec), and the Metadata of a
    # TensorRT 10.1 detailed layer quoted in https://github.com/NVIDIA/TensorRT/issues/4020.
    lines = read_fixture("log_8.5.2_xavier_dumpprofile.txt").splitlines()
    names = [line.split("]", 2)[2].strip().rsplit(None, 4)[0] for line in lines if "ForeignNode" in line]
    assert names == ["{ForeignNode[lstm_W...Max_reduce_min]}",
                     "Reformatting CopyNode for Output Tensor 1 to {ForeignNode[lstm_W...Max_reduce_min]}"]
    desc = describe_layers({"layers": names, "bindings": [], "detailed": False}, "f")
    (region,) = desc["fused_regions"]
    assert region["swallowed"] == ["lstm_W", "Max_reduce_min"] and not region["swallowed_complete"]
    assert desc["reformats"][0]["for"]["layer"] == names[0]
    metadata = ("[ONNX Layer: resnetv15_stage4_conv2_fwd]\u001e[ONNX Layer: resnetv15_stage4_batchnorm2_fwd]\u001e"
                "[ONNX Layer: resnetv15_stage4__plus0]\u001e[ONNX Layer: resnetv15_stage4_activation0]")
    myelin = describe_layers({"layers": [{"Name": "{ForeignNode[a...b]}", "LayerType": "Myelin",
                                          "Metadata": metadata}], "bindings": [], "detailed": True}, "g")
    assert myelin["fused_regions"][0]["swallowed"] == ["resnetv15_stage4_conv2_fwd", "resnetv15_stage4_batchnorm2_fwd",
                                                       "resnetv15_stage4__plus0", "resnetv15_stage4_activation0"]
    assert myelin["fused_regions"][0]["swallowed_complete"]


@pytest.mark.parametrize("text, precision", [
    ("Row major linear FP32", "fp32"), ("Channel major FP16 format where channel % 8 == 0", "fp16"),
    ("Thirty-two wide channel vectorized row major Int8 format", "int8"), ("Half", "fp16"), ("Float", "fp32"),
    ("Row major linear UInt8 format", "uint8"), ("Row major linear BFloat16 format", "bf16"), ("Unknown format", None),
])
def test_tensor_precision_words(text, precision):
    assert tensor_precision(text) == precision


def test_layer_times_group_shares_from_a_real_profile():
    profile = parse_profile(_text(MOBILENET_PROFILE))
    info = parse_layer_info(_text(MOBILENET))
    times = layer_times(profile["layers"], info, top=3)
    total = sum(layer["averageMs"] for layer in profile["layers"])
    reformat = sum(layer["averageMs"] for layer in profile["layers"]
                   if layer["name"] in {l["Name"] for l in json.loads(_text(MOBILENET))["Layers"]
                                        if l["LayerType"] == "Reformat"})
    assert times["total_ms"] == pytest.approx(total) and times["layer_count"] == 73
    assert times["groups"]["reformat"]["share"] == pytest.approx(reformat / total)
    assert sum(g["share"] for g in times["groups"].values()) == pytest.approx(1.0)
    slowest = max(profile["layers"], key=lambda layer: layer["averageMs"])
    assert times["top"][0]["name"] == slowest["name"] and len(times["top"]) == 3
    assert times["top"][0]["group"] == "gemm_conv" and times["top"][0]["precision"] == "int8"


def test_layer_times_groups_attention_and_plugins_by_name():
    profile = [{"name": "/blocks.0/attn/EdgeAttnLiteMLA", "averageMs": 2.0},
               {"name": "{ForeignNode[/blocks.1/attn/qkv/MatMul.../blocks.1/attn/Softmax]}", "averageMs": 1.0},
               {"name": "/head/fc/MatMul", "averageMs": 0.5},
               {"name": "Reformatting CopyNode for Input Tensor 0 to /blocks.0/attn/EdgeAttnLiteMLA", "averageMs": 0.25},
               {"name": "/pool/GlobalAveragePool", "averageMs": 0.25}]
    groups = layer_times(profile)["groups"]
    assert {name: entry["ms"] for name, entry in groups.items()} == {
        "plugins": 2.0, "attention": 1.0, "gemm_conv": 0.5, "reformat": 0.25, "other": 0.25}


# ------------------------------------------------------------------ the CLI
def test_inspect_layer_file_text_and_json(invoke):
    result = invoke(["inspect", MOBILENET], expect=0)
    assert "layers    73 (detailed)" in result.stdout and "precision int8 53, fp16 15, fp32 5" in result.stdout
    assert "QuantizeLinear_2 (fp32 -> int8)" in result.stdout
    data = json.loads(invoke(["inspect", NAMES_84, "--json"], expect=0).stdout)
    assert data["schema"] == INSPECT_ENGINE_SCHEMA and data["layer_count"] == 12 and not data["detailed"]


@pytest.mark.parametrize("path, reason", [
    (TRUNCATED_10, "not a complete JSON document"),
    (MOBILENET_PROFILE, "without the \"Layers\" list"),
])
def test_inspect_bad_layer_files(invoke, path, reason):
    result = invoke(["inspect", path], expect=2)
    assert reason in _one_error_line(result) and result.stdout == ""


@pytest.fixture
def built_engine(invoke, fake_trtexec, tmp_path, write_model, no_jetson):
    trtexec = fake_trtexec("10.3.0")
    model = write_model(matmul_model(features=8))
    invoke(["build", model, "--backend", "trtexec", "--trtexec", trtexec, "--profiling-verbosity", "detailed"],
           expect=0)
    return str(tmp_path / "model.engine"), trtexec


@needs_onnx
def test_build_passes_profiling_verbosity_and_records_it(built_engine):
    engine, _ = built_engine
    with open(engine + ".json") as handle:
        manifest = json.load(handle)
    assert "--profilingVerbosity=detailed" in manifest["tensorrt"]["trtexec"]["command"]
    assert manifest["tensorrt"]["profiling_verbosity"] == "detailed"
    assert "--profiling-verbosity detailed" in manifest["rebuild_command"]


@needs_onnx
def test_inspect_engine_through_trtexec(invoke, built_engine, monkeypatch):
    engine, trtexec = built_engine
    monkeypatch.setenv("FAKE_TRTEXEC_LAYER_INFO", MOBILENET)
    data = json.loads(invoke(["inspect", engine, "--trtexec", trtexec, "--json"], expect=0).stdout)
    assert data["tensorrt_version"] == "10.3.0" and data["layer_count"] == 73 and data["detailed"]
    monkeypatch.setenv("FAKE_TRTEXEC_LAYER_INFO", NAMES_84)  # an engine built with layer names only
    line = _one_error_line(invoke(["inspect", engine, "--trtexec", trtexec], expect=2))
    assert "without detailed profiling verbosity" in line and "--profiling-verbosity detailed" in line


@needs_onnx
def test_inspect_engine_of_another_tensorrt_is_refused_before_loading(invoke, built_engine, fake_trtexec,
                                                                      monkeypatch):
    engine, _ = built_engine
    monkeypatch.setenv("FAKE_TRTEXEC_LAYER_INFO", MOBILENET)
    line = _one_error_line(invoke(["inspect", engine, "--trtexec", fake_trtexec("8.6.2")], expect=2))
    assert "engine built with TensorRT 10.3.0" in line and "this machine has TensorRT 8.6.2" in line
    assert "rebuild with `edgeattn build" in line


@needs_onnx
def test_bench_layers_through_trtexec_replays_a_real_profile(invoke, built_engine, monkeypatch, tmp_path):
    engine, trtexec = built_engine
    monkeypatch.setenv("FAKE_TRTEXEC_LAYER_INFO", MOBILENET)
    monkeypatch.setenv("FAKE_TRTEXEC_PROFILE", MOBILENET_PROFILE)
    out = tmp_path / "bench.json"
    result = invoke(["bench", engine, "--trtexec", trtexec, "--iterations", "20", "--warmup-s", "0.01", "--layers",
                     "--top", "4", "--json", str(out)], expect=0)
    data = json.loads(out.read_text())
    command = data["trtexec"]["command"]
    assert "--separateProfileRun" in command and any(a.startswith("--exportProfile=") for a in command)
    expected = layer_times(parse_profile(_text(MOBILENET_PROFILE))["layers"], parse_layer_info(_text(MOBILENET)),
                           top=4)
    assert data["layers"]["groups"] == expected["groups"] and len(data["layers"]["top"]) == 4
    assert data["layers"]["profiled_runs"] == 6610 and data["iterations"] == 20
    assert "by group     gemm/conv 81.5%, reformat 17.5%, other 1.0%" in result.stdout


@needs_onnx
def test_bench_without_layers_leaves_the_profile_out(invoke, built_engine, tmp_path):
    engine, trtexec = built_engine
    out = tmp_path / "bench.json"
    invoke(["bench", engine, "--trtexec", trtexec, "--iterations", "10", "--warmup-s", "0", "--json", str(out)],
           expect=0)
    data = json.loads(out.read_text())
    assert data["layers"] is None and "--separateProfileRun" not in data["trtexec"]["command"]


@needs_onnx
def test_bench_layers_on_onnx_runtime_is_refused(invoke, write_model):
    model = write_model(matmul_model(features=8))
    line = _one_error_line(invoke(["bench", model, "--layers", "--iterations", "10"], expect=2))
    assert "TensorRT's profiler" in line


# ------------------------------------------------------------------ the TensorRT Python path (stand-in module)
def _stand_in_tensorrt(layer_json, layer_times_ms):
    trt = types.ModuleType("tensorrt")
    trt.__version__ = "10.3.0"
    trt.Logger = type("Logger", (), {"WARNING": 2, "__init__": lambda self, level=None: None})
    trt.init_libnvinfer_plugins = lambda logger, namespace: True
    trt.LayerInformationFormat = types.SimpleNamespace(JSON="JSON", ONELINE="ONELINE")
    calls = {}

    class IProfiler(object):
        def __init__(self):
            pass

    class Inspector(object):
        def get_engine_information(self, form):
            calls["format"] = form
            return layer_json

    class Engine(object):
        def create_engine_inspector(self):
            return Inspector()

    class Runtime(object):
        def __init__(self, logger):
            pass

        def deserialize_cuda_engine(self, data):
            calls["data"] = data
            return Engine()

    class Context(object):
        profiler = None

        def run(self):
            for name, ms in layer_times_ms:
                self.profiler.report_layer_time(name, ms)

    trt.IProfiler, trt.Runtime = IProfiler, Runtime
    return trt, calls, Context()


@needs_onnx
def test_inspect_engine_through_the_tensorrt_python_api(invoke, built_engine, monkeypatch):
    engine, _ = built_engine
    trt, calls, _context = _stand_in_tensorrt(_text(RESNET), [])
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    monkeypatch.setattr("edgeattn.probes.cuda_device", lambda: {"name": "Orin", "compute_capability": "8.7"})
    data = json.loads(invoke(["inspect", engine, "--backend", "tensorrt", "--json"], expect=0).stdout)
    assert calls["format"] == "JSON" and calls["data"].startswith(b"FAKE-TRT-ENGINE")
    assert data["layer_count"] == 36 and data["precision_totals"] == {"fp16": 35, "fp32": 1}


def test_iprofiler_means_per_layer():
    from edgeattn.tensorrt.inspector import profile_layers

    trt, _calls, context = _stand_in_tensorrt("", [("a", 1.0), ("b", 3.0)])
    layers = profile_layers(trt, context, context.run, lambda: None, runs=4)
    assert [(l["name"], l["averageMs"], l["percentage"]) for l in layers] == [("a", 1.0, 25.0), ("b", 3.0, 75.0)]
    assert context.profiler is None  # detached after the profiling run
