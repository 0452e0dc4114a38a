"""`edgeattn build` and `edgeattn bench` on the trtexec backend, against fake trtexec installs of TensorRT 8.2,
8.6 and 10.x."""
import hashlib
import json
import os
import re
import subprocess

import numpy as np
import pytest

from bench_helpers import EDGEATTN_CREATOR, matmul_model, write_plugin_library
from edgeattn.bench import run_benchmark
from edgeattn.engine import build_engine
from edgeattn.errors import EdgeAttnError
from edgeattn.trtexec.version import TrtVersion

VERSIONS = ["8.2.1", "8.6.2", "10.3.0"]


def _engine_header(path):
    with open(path) as handle:
        return json.loads(handle.read().split(" ", 1)[1])


def _summary_value(text, label, key):
    line = next(line for line in text.splitlines() if "] [I] {}: ".format(label) in line)
    return float(re.search(r"\b{} = ([0-9.e+-]+) ms".format(key), line).group(1))


@pytest.mark.parametrize("version", VERSIONS)
def test_bench_engine_samples_come_from_the_export(fake_trtexec, tmp_path, write_model, no_jetson, version):
    trtexec = fake_trtexec(version)
    model = write_model(matmul_model(features=16))
    engine = str(tmp_path / "m.engine")
    manifest = build_engine(model, engine, backend="trtexec", trtexec=trtexec,
                            shapes=["x:1x16,2x16,4x16"])
    assert manifest["tensorrt"]["version"] == version
    result = run_benchmark(engine, backend="trtexec", trtexec=trtexec, batch=4, warmup_s=0.05, iterations=40)
    assert result["backend"] == "trtexec" and result["provider"] == "trtexec " + version
    assert result["iterations"] == 40 and result["inputs"] == {"x": [4, 16]}
    assert result["context"]["device"] == {"name": "Orin", "compute_capability": "8.7", "source": "trtexec"}
    assert result["manifest"] == engine + ".json"

    # Independent check: run the same command, read its export with json and its own console summary.
    command = [a for a in result["trtexec"]["command"] if not a.startswith("--exportTimes=")]
    export = str(tmp_path / "times.json")
    proc = subprocess.run(command + ["--exportTimes=" + export], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    records = json.load(open(export))
    timed = [r for r in records if r["startComputeMs"] >= 50.0]  # trtexec's own warm-up rule
    assert len(timed) == 40
    np.testing.assert_allclose(result["samples_ms"], [r["latencyMs"] for r in timed], rtol=1e-9)
    np.testing.assert_allclose(result["gpu_compute_samples_ms"], [r["computeMs"] for r in timed], rtol=1e-9)
    # trtexec's printed summary (6 significant digits) agrees with statistics computed from the samples.
    gpu = result["gpu_compute_ms"]
    for key in ("min", "max", "mean"):
        assert gpu[key] == pytest.approx(_summary_value(proc.stdout, "GPU Compute Time", key), rel=1e-5)
    assert result["latency_ms"]["max"] == pytest.approx(_summary_value(proc.stdout, "Latency", "max"), rel=1e-5)
    walltime = float(re.search(r"Total Host Walltime: ([0-9.e+-]+) s", proc.stdout).group(1))
    assert result["throughput_items_per_s"] == pytest.approx(4 * 40 / walltime, rel=1e-4)
    assert result["window"]["end_unix"] - result["window"]["start_unix"] == pytest.approx(walltime, rel=1e-4)


@pytest.mark.parametrize("version,flag", [("8.2.1", "--plugins="), ("8.6.2", "--staticPlugins="),
                                          ("10.3.0", "--staticPlugins=")])
def test_build_with_plugins_and_manifest(fake_trtexec, tmp_path, write_model, plugins_stub, no_jetson, version, flag,
                                        monkeypatch):
    trtexec = fake_trtexec(version)
    library = write_plugin_library(tmp_path / "libedgeattn_plugins.so")
    model = write_model(matmul_model(features=8, with_custom=True, with_function=True))
    engine = str(tmp_path / "out" / "m.engine")
    manifest = build_engine(model, engine, plugins=library, backend="trtexec", trtexec=trtexec,
                            shapes=["x:1x8,2x8,8x8"], workspace_mb=256, timing_cache=str(tmp_path / "tc.bin"))
    command = manifest["tensorrt"]["trtexec"]["command"]
    assert flag + os.path.abspath(library) in command
    assert ("--workspace=256" if TrtVersion(version) < (8, 4) else "--memPoolSize=workspace:256") in command
    assert "--timingCacheFile=" + str(tmp_path / "tc.bin") in command
    header = _engine_header(engine)
    # The plugin, not an inlined function, must carry the op: functions stripped for TensorRT < 10.7.
    assert header["plugins"] == [list(EDGEATTN_CREATOR)] and header["local_functions"] == 0
    assert manifest["source_onnx"]["variant"] == "local-functions-stripped"
    # the manifest names the library (name, sha256) and never records a path that could be loaded later
    assert "path" not in manifest["plugins"] and manifest["plugins"]["name"] == "libedgeattn_plugins.so"
    assert manifest["plugins"]["creators"] == [{"name": "EdgeAttnLiteMLA", "version": "1", "namespace": "edgeattn"}]
    assert manifest["plugins"]["sha256"] == hashlib.sha256(open(library, "rb").read()).hexdigest()
    assert manifest["custom_ops"][0]["op_type"] == "EdgeAttnLiteMLA"
    assert manifest["profiles"] == [{"inputs": {"x": {"min": [1, 8], "opt": [2, 8], "max": [8, 8]}}}]
    assert manifest["device"] == {"name": "Orin", "compute_capability": "8.7"}
    assert sorted(os.listdir(str(tmp_path / "out"))) == ["m.engine", "m.engine.json"]  # no temp files left
    on_disk = json.load(open(engine + ".json"))
    assert on_disk == json.loads(json.dumps(manifest))
    # The engine runs with the library given explicitly, or found by the usual search (EDGEATTN_PLUGIN_LIB here),
    # once its sha256 matches the one the manifest names.
    result = run_benchmark(engine, backend="trtexec", trtexec=trtexec, batch=2, warmup_s=0.01, iterations=12,
                           plugins=library)
    assert result["trtexec"]["plugins"]["path"] == os.path.abspath(library)
    monkeypatch.setenv("EDGEATTN_PLUGIN_LIB", library)
    result = run_benchmark(engine, backend="trtexec", trtexec=trtexec, batch=2, warmup_s=0.01, iterations=12)
    assert result["trtexec"]["plugins"]["path"] == os.path.abspath(library)


def test_functions_are_kept_for_tensorrt_10_7_and_later(fake_trtexec, tmp_path, write_model, plugins_stub,
                                                        no_jetson):
    library = write_plugin_library(tmp_path / "lib.so")
    model = write_model(matmul_model(features=8, with_custom=True, with_function=True))
    manifest = build_engine(model, str(tmp_path / "m.engine"), plugins=library, backend="trtexec",
                            trtexec=fake_trtexec("10.16.2"))
    assert manifest["source_onnx"]["variant"] == "as-exported"
    header = _engine_header(str(tmp_path / "m.engine"))
    assert header["local_functions"] == 1 and header["inlined_functions"] == []


@pytest.mark.parametrize("version", VERSIONS)
def test_missing_plugin_names_the_op_and_the_creators(fake_trtexec, tmp_path, write_model, plugins_stub, version):
    library = write_plugin_library(tmp_path / "lib.so", creators=[("EdgeAttnBlockifyAttention", "1", "edgeattn")])
    model = write_model(matmul_model(features=8, with_custom=True))
    engine = tmp_path / "m.engine"
    with pytest.raises(EdgeAttnError) as info:
        build_engine(model, str(engine), plugins=library, backend="trtexec", trtexec=fake_trtexec(version))
    message = info.value.format_message()
    assert "no plugin for op EdgeAttnLiteMLA" in message
    assert "edgeattn::EdgeAttnBlockifyAttention v1" in message and "--plugin-lib" in message
    assert not engine.exists() and not (tmp_path / "m.engine.json").exists()
    assert [p for p in os.listdir(str(tmp_path)) if p.startswith(".")] == []


def test_plugin_library_is_required_for_custom_ops(fake_trtexec, tmp_path, write_model, no_plugins_module):
    model = write_model(matmul_model(features=8, with_custom=True))
    with pytest.raises(EdgeAttnError, match="needs the edgeattn plugin library.*EdgeAttnLiteMLA.*--plugin-lib"):
        build_engine(model, str(tmp_path / "m.engine"), backend="trtexec", trtexec=fake_trtexec("8.6.2"))
    # Without edgeattn.plugins an explicit library still works.
    library = write_plugin_library(tmp_path / "lib.so")
    manifest = build_engine(model, str(tmp_path / "m.engine"), plugins=library, backend="trtexec",
                            trtexec=fake_trtexec("8.6.2"))
    assert manifest["plugins"]["creators"] is None and manifest["plugins"]["name"] == "lib.so"


def test_version_mismatch_on_engine_load_without_manifest(fake_trtexec, tmp_path, write_model):
    model = write_model(matmul_model(features=8, batch=1))
    engine = str(tmp_path / "m.engine")
    build_engine(model, engine, backend="trtexec", trtexec=fake_trtexec("8.6.2"))
    os.unlink(engine + ".json")  # no preflight possible: trtexec itself must refuse the engine
    with pytest.raises(EdgeAttnError) as info:
        run_benchmark(engine, backend="trtexec", trtexec=fake_trtexec("10.3.0"), warmup_s=0, iterations=5)
    message = info.value.format_message()
    assert message.startswith("trtexec 10.3.0 cannot load the engine")
    assert "Version tag does not match. Note: Current Version: 237, Serialized Engine Version: 232" in message
    assert "rebuild" in message


def test_patch_mismatch_8_2(fake_trtexec, tmp_path, write_model):
    model = write_model(matmul_model(features=8, batch=1))
    engine = str(tmp_path / "m.engine")
    build_engine(model, engine, backend="trtexec", trtexec=fake_trtexec("8.2.3"))
    os.unlink(engine + ".json")
    with pytest.raises(EdgeAttnError, match="expecting library version 8.2.1 got 8.2.3"):
        run_benchmark(engine, backend="trtexec", trtexec=fake_trtexec("8.2.1"), warmup_s=0, iterations=5)


def test_manifest_preflight_stops_before_trtexec_runs(fake_trtexec, tmp_path, write_model):
    model = write_model(matmul_model(features=8, batch=1))
    engine = str(tmp_path / "m.engine")
    build_engine(model, engine, backend="trtexec", trtexec=fake_trtexec("10.3.0"))
    with pytest.raises(EdgeAttnError) as info:
        run_benchmark(engine, backend="trtexec", trtexec=fake_trtexec("8.6.2"), warmup_s=0, iterations=5)
    message = info.value.format_message()
    assert message.startswith("engine built with TensorRT 10.3.0 on Orin (sm_87); this machine has TensorRT 8.6.2")
    assert "rebuild with `edgeattn build {} -o {} --precision fp32 --backend trtexec --trtexec {}`".format(
        model, engine, fake_trtexec("10.3.0")) in message


def test_engine_from_another_device(fake_trtexec, tmp_path, write_model):
    model = write_model(matmul_model(features=8, batch=1))
    engine = str(tmp_path / "m.engine")
    build_engine(model, engine, backend="trtexec", trtexec=fake_trtexec("10.3.0", device="NVIDIA A100:8.0"))
    os.unlink(engine + ".json")
    with pytest.raises(EdgeAttnError, match="incompatible device, expecting compute 8.7 got compute 8.0"):
        run_benchmark(engine, backend="trtexec", trtexec=fake_trtexec("10.3.0"), warmup_s=0, iterations=5)


def test_engine_without_its_plugin(fake_trtexec, tmp_path, write_model, plugins_stub):
    library = write_plugin_library(tmp_path / "lib.so")
    model = write_model(matmul_model(features=8, batch=1, with_custom=True))
    engine = str(tmp_path / "m.engine")
    build_engine(model, engine, plugins=library, backend="trtexec", trtexec=fake_trtexec("10.3.0"))
    manifest = json.load(open(engine + ".json"))
    other = write_plugin_library(tmp_path / "other.so", creators=[("Something", "1", "")])
    manifest["plugins"] = None
    manifest["custom_ops"] = []
    json.dump(manifest, open(engine + ".json", "w"))
    with pytest.raises(EdgeAttnError, match="IPluginCreator is not registered|creator is not registered"):
        run_benchmark(engine, backend="trtexec", trtexec=fake_trtexec("10.3.0"), plugins=other, warmup_s=0,
                      iterations=5)


@pytest.mark.parametrize("version", ["8.2.1", "10.3.0", "10.16.2"])
def test_bad_shapes(fake_trtexec, tmp_path, write_model, version):
    trtexec = fake_trtexec(version)
    model = write_model(matmul_model(features=8))
    engine = str(tmp_path / "m.engine")
    build_engine(model, engine, backend="trtexec", trtexec=trtexec, shapes=["x:1x8,2x8,4x8"])
    # Outside the manifest's profile: refused before trtexec runs.
    with pytest.raises(EdgeAttnError, match=r"batch 8 is outside the engine's profile for input 'x' \(batch 1..4\)"):
        run_benchmark(engine, backend="trtexec", trtexec=trtexec, batch=8, warmup_s=0, iterations=5)
    # Without the manifest trtexec itself rejects the shape; the message explains it.
    os.unlink(engine + ".json")
    from edgeattn.trtexec import flags, probe_version, run_trtexec
    from edgeattn.trtexec.log import explain_failure

    v = probe_version(trtexec)
    result = run_trtexec(flags.bench_command(trtexec, v, engine, False, str(tmp_path / "t.json"),
                                             shapes=[("x", [8, 8])], iterations=5), timeout=60)
    assert result.returncode == 1
    message = explain_failure(result.output, result.returncode, version=v)
    assert "outside the engine's optimization profile" in message and "--shapes" in message
    result = run_trtexec(flags.bench_command(trtexec, v, engine, False, str(tmp_path / "t.json"),
                                             shapes=[("input", [1, 8])], iterations=5), timeout=60)
    assert "'input' is not an input of the engine" in explain_failure(result.output, result.returncode, v)


@pytest.mark.parametrize("version", ["8.2.1", "10.3.0"])
def test_missing_onnx_file_inside_trtexec(fake_trtexec, tmp_path, version):
    from edgeattn.trtexec import flags, probe_version, run_trtexec
    from edgeattn.trtexec.log import explain_failure

    trtexec = fake_trtexec(version)
    v = probe_version(trtexec)
    missing = str(tmp_path / "gone.onnx")
    result = run_trtexec(flags.build_command(trtexec, v, missing, str(tmp_path / "e")), timeout=60)
    assert result.returncode == 1
    assert explain_failure(result.output, 1, v).endswith("cannot open the ONNX file " + missing)


@pytest.mark.parametrize("version,expected", [("10.3.0", "found no CUDA device"), ("8.2.1", "killed by SIGABRT")])
def test_no_gpu(fake_trtexec, tmp_path, write_model, version, expected):
    model = write_model(matmul_model(features=8, batch=1))
    with pytest.raises(EdgeAttnError, match=expected):
        build_engine(model, str(tmp_path / "m.engine"), backend="trtexec",
                     trtexec=fake_trtexec(version, device="none"))
    assert not (tmp_path / "m.engine").exists()


def test_bench_onnx_through_trtexec_with_custom_ops(fake_trtexec, tmp_path, write_model, plugins_stub, no_jetson):
    library = write_plugin_library(tmp_path / "lib.so")
    model = write_model(matmul_model(features=8, with_custom=True))
    result = run_benchmark(model, backend="trtexec", trtexec=fake_trtexec("8.6.2"), plugins=library, batch=2,
                           warmup_s=0.01, duration_s=0.05)
    assert result["model"]["kind"] == "onnx" and result["precision"] == "fp32"
    assert result["iterations"] >= 10 and result["inputs"] == {"x": [2, 8]}
    assert "--staticPlugins=" + os.path.abspath(library) in result["trtexec"]["command"]


def test_trtexec_not_found(isolated_path, write_model):
    with pytest.raises(EdgeAttnError, match="trtexec not found"):
        run_benchmark(write_model(matmul_model(features=8)), backend="trtexec")
    with pytest.raises(EdgeAttnError, match="trtexec not found or not executable"):
        run_benchmark(write_model(matmul_model(features=8)), backend="trtexec", trtexec="/nonexistent/trtexec")


def test_every_trtexec_run_has_a_timeout(fake_trtexec, tmp_path, write_model, no_jetson, monkeypatch):
    """A wedged GPU or a hung trtexec must end a build or a benchmark with an error, never hang it: every trtexec
    run gets a finite timeout (a build's default is the 7200 s that `edgeattn build --timeout` documents)."""
    import math

    import edgeattn.trtexec as trtexec_module

    real = trtexec_module.run_command
    runs = []

    def recording(args, timeout=None, **kwargs):
        runs.append((args, timeout))
        return real(args, timeout=timeout, **kwargs)

    monkeypatch.setattr(trtexec_module, "run_command", recording)
    trtexec = fake_trtexec("10.3.0")
    model = write_model(matmul_model(features=8))
    engine = str(tmp_path / "m.engine")

    def timeouts(option):
        return [timeout for args, timeout in runs if any(a.startswith(option) for a in args)]

    build_engine(model, engine, backend="trtexec", trtexec=trtexec)
    assert timeouts("--saveEngine=") == [7200]
    run_benchmark(engine, backend="trtexec", trtexec=trtexec, warmup_s=0, iterations=3)
    assert len(timeouts("--exportTimes=")) == 1
    assert all(timeout is not None and 0 < timeout < math.inf for _, timeout in runs), runs
