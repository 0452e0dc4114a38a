"""trtexec version, log, export and command-line handling, against the real captures in tests/fixtures/trtexec."""
import pytest

from bench_helpers import read_fixture
from edgeattn.errors import EdgeAttnError
from edgeattn.trtexec import flags
from edgeattn.trtexec.exports import parse_profile, parse_times, timed_iterations, times_include_warmup, \
    trace_samples
from edgeattn.trtexec.log import error_lines, explain_failure, parse_device
from edgeattn.trtexec.version import TrtVersion, decode_version_number, parse_banners, version_from_output


@pytest.mark.parametrize("number,expected", [
    (8001, "8.0.1"), (8003, "8.0.3"), (8201, "8.2.1"), (8400, "8.4.0"), (8412, "8.4.12"), (8502, "8.5.2"),
    (8602, "8.6.2"), (100001, "10.0.1"), (100300, "10.3.0"), (101303, "10.13.3"), (101602, "10.16.2"),
    (110100, "11.1.0"),
])
def test_banner_numbers(number, expected):
    # NV_TENSORRT_VERSION: MAJOR*1000+MINOR*100+PATCH for 8.x, MAJOR*10000+MINOR*100+PATCH from 10.x (NvInferVersion.h)
    assert str(decode_version_number(number)) == expected


def test_real_banners():
    banners = parse_banners(read_fixture("banners_3.1.txt"))
    assert [(b["status"], str(b["version"]), b["build"]) for b in banners] == [
        ("RUNNING", "8.2.1", None), ("PASSED", "8.2.1", None), ("FAILED", "10.0.1", None),
        ("RUNNING", "10.13.3", 9)]
    assert banners[3]["command"].startswith("./trtexec --onnx=ISTD_NS.onnx")


def test_version_prefers_the_version_line():
    assert str(version_from_output(read_fixture("log_8.2.1_nano_build.txt"))) == "8.2.1"
    assert str(version_from_output(read_fixture("device_10.16.2_orin_nx.txt"))) == "10.16.2"
    assert version_from_output(read_fixture("device_10.16.2_orin_nx.txt")).build == 10
    assert str(version_from_output(read_fixture("log_8.5.2_xavier_dumpprofile.txt"))) == "8.5.2"
    start = version_from_output(read_fixture("start_10.3.0_orin_nx.txt"))  # banner only; 10.3 has no [bN]
    assert str(start) == "10.3.0" and start.build is None
    assert version_from_output("no banner here") is None
    assert TrtVersion("8.6.2.3") == (8, 6, 2) and TrtVersion("10.3") >= (10, 3)


def test_device_blocks():
    nano = parse_device(read_fixture("device_8.2.1_nano.txt"))
    assert (nano["name"], nano["compute_capability"], nano["sms"], nano["memory_mib"]) == (
        "NVIDIA Tegra X1", "5.3", 1, 3955)
    orin_nx = parse_device(read_fixture("device_10.16.2_orin_nx.txt"))
    assert (orin_nx["name"], orin_nx["compute_capability"], orin_nx["sms"]) == ("Orin", "8.7", 8)
    assert orin_nx["uuid"] == "GPU-f5507ee1-b6b1-556b-8350-83af993dbffd"
    xavier = parse_device(read_fixture("log_8.5.2_xavier_dumpprofile.txt"))
    assert (xavier["name"], xavier["compute_capability"]) == ("Xavier", "7.2")
    assert parse_device(read_fixture("device_10.3.0_agx_orin.txt")) is None  # excerpt starts below the name


def test_export_times_real_excerpt():
    # The trex capture is an excerpt (no closing "]"): parsed record by record.
    records = parse_times(read_fixture("times_trex_a100_8.4.txt"))
    assert len(records) == 3
    assert [r["computeMs"] for r in records] == [0.873472, 0.8448, 0.843776]
    assert [r["latencyMs"] for r in records] == [0.873472, 0.8448, 0.843776]
    series = trace_samples(records)
    assert series["span_ms"] == pytest.approx(5.14765 - 2.57741)
    assert series["enqueue_ms"] == pytest.approx([2.70722 - 2.67333, 2.72443 - 2.71417, 3.59504 - 3.58635])
    complete = read_fixture("times_trex_a100_8.4.txt") + "]\n"
    assert parse_times(complete) == records


def test_warmup_filter_follows_the_version():
    assert times_include_warmup(TrtVersion("8.2.1")) and times_include_warmup(TrtVersion("8.4.0"))
    assert not times_include_warmup(TrtVersion("8.5.2"))
    records = [{"startComputeMs": t, "computeMs": 1.0, "latencyMs": 1.0} for t in (10.0, 150.0, 200.0, 250.0)]
    assert len(timed_iterations(records, TrtVersion("8.2.1"), 200.0)) == 2
    assert len(timed_iterations(records, TrtVersion("10.3.0"), 200.0)) == 4


def test_export_profile_real_excerpts():
    resnet = parse_profile(read_fixture("profile_trex_resnet_8.4.txt"))
    assert resnet["count"] == 1 and len(resnet["layers"]) == 4
    assert resnet["layers"][1] == {"name": "Conv_0 + Relu_1", "timeMs": 0.111616, "averageMs": 0.111616,
                                   "medianMs": 0.111616, "percentage": 10.9768}
    assert resnet["layers"][3]["timeMs"] == 0
    mobilenet = parse_profile(read_fixture("profile_trex_mobilenet.txt"))
    assert mobilenet["count"] == 6610 and mobilenet["layers"][0]["medianMs"] == 0.004544
    # 8.2 has no medianMs; names are written unescaped by trtexec.
    text = ('[\n  { "count" : 2 }\n'
            ', { "name" : "odd "name"", "timeMs" : 1.5, "averageMs" : 0.75, "percentage" : nan }\n]\n')
    odd = parse_profile(text)
    assert odd["layers"] == [{"name": 'odd "name"', "timeMs": 1.5, "averageMs": 0.75, "medianMs": None,
                              "percentage": None}]


def test_garbage_exports_are_errors():
    with pytest.raises(EdgeAttnError):
        parse_times("")
    with pytest.raises(EdgeAttnError):
        parse_times('[\n  { "count" : 1 }\n]\n')


def test_explain_missing_plugin_8_0_capture():
    text = read_fixture("error_missing_plugin_8.0.3.txt")
    message = explain_failure(text, 1, version=TrtVersion("8.0.3"), plugin_library="/opt/libedgeattn.so",
                              creators=[("EdgeAttnLiteMLA", "1", "edgeattn")])
    assert "op Round (version 1, namespace '')" in message
    assert "/opt/libedgeattn.so" in message and "edgeattn::EdgeAttnLiteMLA v1" in message
    assert "--plugin-lib" in message and "\n" not in message


def test_explain_deserialization_captures():
    message = explain_failure(read_fixture("error_deserialize_10.0.1.txt"), 1, version=TrtVersion("10.0.1"),
                              model_path="model.plan")
    assert "cannot load the engine model.plan" in message
    assert "incompatible serialization version" in message and "edgeattn build" in message
    message = explain_failure(read_fixture("error_device_mismatch.txt"), 1, model_path="x.engine")
    assert "incompatible device, expecting compute 8.6 got compute 8.0" in message


def test_explain_missing_onnx_capture():
    message = explain_failure(read_fixture("error_missing_onnx_8.2.txt"), 1)
    assert message.endswith("hitnet_eth3d_480x640.onnx") and "cannot open the ONNX file" in message


def test_explain_signals_and_generic_errors():
    assert "SIGABRT" in explain_failure("Cuda failure: no CUDA-capable device is detected\n", -6)
    assert "no CUDA device" in explain_failure("[01/01/2024-00:00:00] [I] Cannot find any available devices "
                                               "(GPUs)!\n", 1)
    generic = "[01/01/2024-00:00:00] [E] Something odd\n&&&& FAILED TensorRT.trtexec [TensorRT v8602] # t\n"
    assert explain_failure(generic, 1, version=TrtVersion("8.6.2")) == \
        "trtexec 8.6.2 failed (exit status 1): Something odd"
    assert error_lines("[01/01/2024-00:00:00] [E] [TRT] 3: lib says no\n") == ["lib says no"]


@pytest.mark.parametrize("version,present,absent", [
    ("8.2.1", ["--plugins", "--workspace", "--buildOnly", "--fp16", "--precisionConstraints"],
     ["--staticPlugins", "--memPoolSize", "--skipInference", "--layerPrecisions", "--versionCompatible",
      "--noCudaGraph"]),
    ("8.6.2", ["--staticPlugins", "--memPoolSize", "--skipInference", "--layerPrecisions", "--versionCompatible",
               "--workspace", "--buildOnly"], ["--stronglyTyped", "--noCudaGraph"]),
    ("10.3.0", ["--staticPlugins", "--memPoolSize", "--stronglyTyped", "--fp16"], ["--workspace", "--buildOnly"]),
    ("11.1.0", ["--noCudaGraph", "--includeDataTransfers"], ["--fp16", "--precisionConstraints",
                                                              "--layerPrecisions"]),
])
def test_option_table_follows_trtexec_md(version, present, absent):
    v = TrtVersion(version)
    assert all(flags.supports(v, option) for option in present)
    assert not any(flags.supports(v, option) for option in absent)


def test_build_commands_per_version(tmp_path):
    static = tmp_path / "libedgeattn_plugins.so"
    dynamic = tmp_path / "libedgeattn_plugins_dynamic.so"
    static.write_bytes(b"")
    dynamic.write_bytes(b"")
    profile = [("x", [1, 3, 8, 8], [2, 3, 8, 8], [4, 3, 8, 8])]
    old = flags.build_command("trtexec", TrtVersion("8.2.1"), "m.onnx", "m.engine", fp16=True,
                              fp32_layers=["/n/ReduceMean"], plugin_library="lib.so", profile=profile,
                              workspace_mb=512, timing_cache="tc.bin")
    assert old == ["trtexec", "--onnx=m.onnx", "--saveEngine=m.engine", "--buildOnly", "--fp16",
                   "--precisionConstraints=obey", "--plugins=lib.so", "--minShapes=x:1x3x8x8",
                   "--optShapes=x:2x3x8x8", "--maxShapes=x:4x3x8x8", "--workspace=512", "--timingCacheFile=tc.bin"]
    new = flags.build_command("trtexec", TrtVersion("10.3.0"), "m.onnx", "m.engine", fp16=True,
                              fp32_layers=["b", "a"], plugin_library=str(static), workspace_mb=512,
                              version_compatible=True)
    assert new == ["trtexec", "--onnx=m.onnx", "--saveEngine=m.engine", "--skipInference", "--fp16",
                   "--precisionConstraints=obey", "--layerPrecisions=a:fp32,b:fp32", "--layerOutputTypes=a:fp32,b:fp32",
                   "--dynamicPlugins={}".format(dynamic), "--setPluginsToSerialize={}".format(dynamic),
                   "--memPoolSize=workspace:512", "--versionCompatible"]
    # The self-registering library must never be serialized: without the dynamic build there is no command.
    dynamic.unlink()
    with pytest.raises(EdgeAttnError, match="libedgeattn_plugins_dynamic.so"):
        flags.build_command("trtexec", TrtVersion("10.3.0"), "m.onnx", "m.engine", plugin_library=str(static),
                            version_compatible=True)
    with pytest.raises(EdgeAttnError, match="removed in TensorRT 11.0"):
        flags.build_command("trtexec", TrtVersion("11.1.0"), "m.onnx", "m.engine", fp16=True)
    with pytest.raises(EdgeAttnError, match="needs TensorRT >= 8.6"):
        flags.build_command("trtexec", TrtVersion("8.2.1"), "m.onnx", "m.engine", version_compatible=True)


def test_bench_commands_per_version():
    old = flags.bench_command("t", TrtVersion("8.2.1"), "m.engine", False, "times.json", shapes=[("x", [2, 8])],
                              plugin_library="lib.so", warmup_s=0.25, duration_s=1.5)
    assert old == ["t", "--loadEngine=m.engine", "--plugins=lib.so", "--shapes=x:2x8", "--warmUp=250",
                   "--duration=2", "--useCudaGraph", "--exportTimes=times.json"]
    mid = flags.bench_command("t", TrtVersion("10.3.0"), "m.onnx", True, "t.json", warmup_s=0.25, iterations=50,
                              cuda_graph=False)
    assert mid == ["t", "--onnx=m.onnx", "--warmUp=250", "--iterations=50", "--duration=0", "--exportTimes=t.json"]
    new = flags.bench_command("t", TrtVersion("11.1.0"), "m.engine", False, "t.json", duration_s=2.5,
                              cuda_graph=False)
    assert new == ["t", "--loadEngine=m.engine", "--warmUp=1000", "--duration=2.5", "--includeDataTransfers",
                   "--noCudaGraph", "--exportTimes=t.json"]
