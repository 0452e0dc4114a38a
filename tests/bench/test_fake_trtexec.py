"""The fake trtexec replays the real formats: its output is compared line shape by line shape with the captures in
tests/fixtures/trtexec (numbers and timestamps abstracted), and its option handling with trtexec's
``samples/common/sampleOptions.cpp`` (NVIDIA/TensorRT, per release branch)."""
import json
import re
import subprocess

import pytest

from bench_helpers import matmul_model, read_fixture, write_plugin_library

_TIMESTAMP = re.compile(r"^\[\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\] ")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]\d+)?")


def shape(line):
    return _NUMBER.sub("N", _TIMESTAMP.sub("", line)).rstrip()


def shapes(text, start=None, stop=None):
    lines = [shape(line) for line in text.splitlines() if line.strip()]
    if start is not None:
        lines = lines[next(i for i, line in enumerate(lines) if start in line):]
    if stop is not None:
        lines = lines[:next(i for i, line in enumerate(lines) if stop in line) + 1]
    return lines


def is_subsequence(needles, haystack):
    position = 0
    for needle in needles:
        try:
            position = haystack.index(needle, position) + 1
        except ValueError:
            return False
    return True


def run(path, *args):
    proc = subprocess.run([path] + list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def engine_and_model(tmp_path, write_model):
    return str(tmp_path / "m.engine"), write_model(matmul_model(features=8))


def _build_and_time(fake, tmp_path, model):
    engine = str(tmp_path / "m.engine")
    rc, out, err = run(fake, "--onnx=" + model, "--saveEngine=" + engine, "--minShapes=x:1x8", "--optShapes=x:2x8",
                       "--maxShapes=x:4x8", "--buildOnly" if fake.count("8.2") or fake.count("8.4") else
                       "--skipInference")
    assert rc == 0, err
    times = str(tmp_path / "times.json")
    rc, out, err = run(fake, "--loadEngine=" + engine, "--shapes=x:2x8", "--exportTimes=" + times,
                       "--iterations=30", "--duration=0", "--warmUp=20")
    assert rc == 0, err
    return out, err, times


@pytest.mark.parametrize("version,fixture,start", [
    ("8.2.1", "summary_8.2_xavier_nx.txt", "=== Performance summary ==="),
    ("8.4.0", "summary_8.4.0_xavier.txt", "=== Performance summary ==="),
    ("10.3.0", "tail_10.3.0_jetson.txt", "=== Performance summary ==="),
])
def test_summary_block_matches_real_capture(fake_trtexec, tmp_path, write_model, version, fixture, start):
    out, _err, _times = _build_and_time(fake_trtexec(version), tmp_path, write_model(matmul_model(features=8)))
    real = [line for line in shapes(read_fixture(fixture), start=start) if not line.startswith("&&&&")]
    fake = [line for line in shapes(out, start=start) if not line.startswith("&&&&")]
    assert fake[:len(real)] == real


def test_three_percentiles_from_8_5(fake_trtexec, tmp_path, write_model):
    out, _err, _times = _build_and_time(fake_trtexec("8.6.2"), tmp_path, write_model(matmul_model(features=8)))
    latency = [line for line in shapes(out) if line.startswith("[I] Latency:")]
    assert latency == [line for line in shapes(read_fixture("summary_8.6_desktop.txt")) if "Latency:" in line]
    trace = [line for line in shapes(out) if "Average on N runs" in line][:1]
    assert trace == shapes(read_fixture("trace_8.6_orin_jp6dp.txt"))[:1]


def test_8_2_trace_and_device_block(fake_trtexec, tmp_path, write_model):
    fake = fake_trtexec("8.2.1", device="NVIDIA Tegra X1:5.3")
    out, _err, _times = _build_and_time(fake, tmp_path, write_model(matmul_model(features=8)))
    real_log = read_fixture("log_8.2.1_nano_build.txt")
    assert shapes(out, "=== Device Information ===", "TensorRT version:") == \
        shapes(real_log, "=== Device Information ===", "TensorRT version:")
    real_trace = [line for line in shapes(real_log) if "Average on N runs" in line][:1]
    assert [line for line in shapes(out) if "Average on N runs" in line][:1] == real_trace
    assert shapes(out)[0].startswith("&&&& RUNNING TensorRT.trtexec [TensorRT vN] # ")


def test_10_16_device_block_and_build_banner(fake_trtexec, tmp_path, write_model):
    fake = fake_trtexec("10.16.2")
    rc, out, err = run(fake, "--onnx=" + write_model(matmul_model(features=8)), "--saveEngine=" +
                       str(tmp_path / "e"), "--optShapes=x:1x8", "--skipInference")
    assert rc == 0
    real = read_fixture("device_10.16.2_orin_nx.txt")
    assert shapes(out, "=== Device Information ===", "Loading standard plugins") == \
        shapes(real, "=== Device Information ===", "Loading standard plugins")
    assert out.splitlines()[0].startswith("&&&& RUNNING TensorRT.trtexec [TensorRT v101602] [b10] # ")
    # the broadcast warnings of the real run go to stderr
    assert [line for line in shapes(real) if line.startswith("[W]")] == \
        [line.replace("tensor x", "tensor image") for line in shapes(err) if line.startswith("[W]")]
    assert "Skipped inference phase since --skipInference is added." in out


@pytest.mark.parametrize("version,keys,warmups_in_file", [
    ("8.2.1", 13, True), ("8.4.0", 12, True), ("8.6.2", 12, False), ("10.3.0", 12, False)])
def test_export_times_layout(fake_trtexec, tmp_path, write_model, version, keys, warmups_in_file):
    _out, _err, times = _build_and_time(fake_trtexec(version), tmp_path, write_model(matmul_model(features=8)))
    text = open(times).read()
    records = json.loads(text)
    assert len(records[0]) == keys
    real = json.loads(read_fixture("times_trex_a100_8.4.txt") + "]")
    if keys == 12:
        assert list(records[0]) == list(real[0])
    else:
        assert list(records[0]) == list(real[0]) + ["endToEndMs"]
    assert text.startswith("[\n  { \"startEnqMs\" : ") and "\n, { " in text and text.endswith("}\n]\n")
    assert any(r["startComputeMs"] < 20 for r in records) == warmups_in_file


def test_deserialization_failure_sequence_10x(fake_trtexec, tmp_path):
    garbage = tmp_path / "model.plan"
    garbage.write_bytes(b"\x00plan from another OS")
    rc, out, err = run(fake_trtexec("10.0.1"), "--loadEngine=" + str(garbage))
    assert rc == 1
    real = [line for line in shapes(read_fixture("error_deserialize_10.0.1.txt")) if not line.startswith("&&&&")]
    assert [line for line in shapes(err) if line.startswith("[E]")] == real
    assert out.splitlines()[-1].startswith("&&&& FAILED TensorRT.trtexec [TensorRT v100001] # ")


def test_missing_onnx_sequence_8_2(fake_trtexec, tmp_path):
    missing = str(tmp_path / "hitnet.onnx")
    rc, _out, err = run(fake_trtexec("8.2.1"), "--onnx=" + missing)
    assert rc == 1
    real = read_fixture("error_missing_onnx_8.2.txt").replace(
        "/home/nvidia/Downloads/play_with_tensorrt-master/pj_tensorrt_depth_stereo_hitnet/build/resource//model/"
        "hitnet_eth3d_480x640.onnx", missing)
    assert shapes(real) == shapes(err)[:3]


def test_missing_plugin_sequence_8_0(fake_trtexec, tmp_path, write_model):
    model = write_model(matmul_model(features=8, with_custom=True))
    rc, out, err = run(fake_trtexec("8.0.3"), "--onnx=" + model, "--fp16", "--workspace=64", "--buildOnly")
    assert rc == 1
    real = [line for line in shapes(read_fixture("error_missing_plugin_8.0.3.txt"))
            if not (line.startswith("&&&&") or "While parsing node" in line or line == "...")]
    real = [line for line in real if "Begin node" not in line and "End node" not in line]

    def renamed(text):
        return [line.replace("EdgeAttnLiteMLA", "Round").replace("plugin_namespace: edgeattn", "plugin_namespace:")
                for line in shapes(text)]

    # [I] lines go to stdout, [E] lines (and their continuation lines) to stderr: compare per stream.
    assert is_subsequence([line for line in real if line.startswith("[I]")], renamed(out))
    assert is_subsequence([line for line in real if not line.startswith("[I]")], renamed(err))


def test_help_and_no_arguments(fake_trtexec):
    fake = fake_trtexec("8.6.2")
    rc, out, _err = run(fake, "--help")
    assert rc == 0 and "&&&& RUNNING" in out and "PASSED" not in out
    rc, out, _err = run(fake)
    assert rc == 0 and out.rstrip().splitlines()[-1].startswith("&&&& PASSED")


@pytest.mark.parametrize("version,option,failed_line", [
    ("8.2.1", "--staticPlugins=/x.so", True), ("8.2.1", "--memPoolSize=workspace:64", True),
    ("10.3.0", "--workspace=64", True), ("10.3.0", "--buildOnly", True), ("11.0.0", "--fp16", True),
    ("11.1.0", "--fp16", False),
])
def test_unknown_options_fail_like_the_real_versions(fake_trtexec, version, option, failed_line):
    rc, out, err = run(fake_trtexec(version), "--onnx=x.onnx", option)
    assert rc == 1
    key, _, value = option.partition("=")
    assert "[E] Unknown option: {} {}".format(key, value) in err
    assert ("&&&& FAILED" in out) == failed_line


@pytest.mark.parametrize("version,option,warning", [
    ("8.6.2", "--plugins", "--plugins flag has been deprecated, use --staticPlugins flag instead."),
    ("8.6.2", "--workspace=64", "--workspace flag has been deprecated by --memPoolSize flag."),
])
def test_deprecation_warnings(fake_trtexec, tmp_path, write_model, version, option, warning):
    if option == "--plugins":
        option = "--plugins=" + write_plugin_library(tmp_path / "lib.so")
    rc, _out, err = run(fake_trtexec(version), "--onnx=" + write_model(matmul_model(features=8)), option,
                        "--skipInference")
    assert rc == 0 and "[W] " + warning in err


def test_no_gpu(fake_trtexec):
    rc, out, _err = run(fake_trtexec("10.3.0", device="none"), "--loadEngine=x")
    assert rc == 1 and "Cannot find any available devices (GPUs)!" in out and "FAILED" not in out
    rc, _out, err = run(fake_trtexec("8.2.1", device="none"), "--loadEngine=x")
    assert rc == -6 and "Cuda failure" in err


@pytest.mark.parametrize("version,inlined", [("8.6.2", False), ("10.3.0", True), ("10.16.2", False)])
def test_local_function_precedence(fake_trtexec, tmp_path, write_model, version, inlined):
    # TensorRT 9.0-10.6 inline a same-named local function and never call the plugin (docs/custom-ops.md).
    lib = write_plugin_library(tmp_path / "lib.so")
    model = write_model(matmul_model(features=8, with_custom=True, with_function=True))
    engine = str(tmp_path / "e")
    plugin_flag = "--plugins=" if tuple(int(p) for p in version.split(".")) < (8, 6) else "--staticPlugins="
    rc, _out, err = run(fake_trtexec(version), "--onnx=" + model, "--saveEngine=" + engine, plugin_flag + lib,
                        "--skipInference")
    assert rc == 0, err
    header = json.loads(open(engine).read().split(" ", 1)[1])
    assert (header["inlined_functions"] == ["EdgeAttnLiteMLA"]) == inlined
