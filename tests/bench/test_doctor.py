"""`edgeattn doctor` on a machine with nothing GPU-side, and with fake trtexec / nvpmodel / Jetson helpers."""
import json
import os
import stat
import sys

import pytest

from bench_helpers import install_trtexec, write_plugin_library
from edgeattn.doctor import diagnose, format_report
from edgeattn.probes import cpu_info, cuda_device

# `nvpmodel -q` on a Jetson Nano (tests/fixtures/jetson/nvpmodel/query_nano_jp4_fan_warn.txt, a published capture from
# a real device).
NVPMODEL_Q = "NVPM WARN: fan mode is not set!\nNV Power Mode: MAXN\n0\n"


@pytest.fixture
def nothing_gpu_side(isolated_path, monkeypatch):
    for module in ("torch", "tensorrt", "cuda", "cuda.bindings", "cuda.bindings.runtime", "cuda.cudart"):
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.delenv("EDGEATTN_PLUGIN_LIB", raising=False)
    return isolated_path


def _fake_nvpmodel(bindir):
    path = os.path.join(str(bindir), "nvpmodel")
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\ncat <<'EOF'\n{}EOF\n".format(NVPMODEL_Q))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def test_nothing_gpu_side(nothing_gpu_side, plugins_stub, no_jetson):
    report = diagnose()
    checks = report["checks"]
    assert report["schema"] == "edgeattn.doctor/1"
    assert checks["python"]["ok"] and checks["numpy"]["ok"]
    for name in ("torch", "tensorrt", "cuda_python", "cuda_device", "trtexec", "plugins", "jetson", "nvpmodel"):
        assert not checks[name]["ok"], name
        assert checks[name]["disables"], name  # every missing piece says what it disables
    assert "ONNX Runtime CPU still works" in checks["cuda_device"]["disables"]
    assert "/usr/src/tensorrt/bin/trtexec" in checks["trtexec"]["summary"]
    assert "not found" in checks["plugins"]["summary"]
    json.dumps(report)
    text = format_report(report)
    assert "Missing pieces disable:" in text and "cuda_device" in text


def test_not_a_jetson_and_no_loader(nothing_gpu_side, no_plugins_module, monkeypatch):
    import types

    import edgeattn

    package = types.ModuleType("edgeattn.jetson")
    package.__path__ = []
    board = types.ModuleType("edgeattn.jetson.board")
    board.detect_board = lambda root="/": None
    monkeypatch.setitem(sys.modules, "edgeattn.jetson", package)
    monkeypatch.setitem(sys.modules, "edgeattn.jetson.board", board)
    monkeypatch.setitem(sys.modules, "edgeattn.jetson.nvpmodel", None)
    monkeypatch.setattr(edgeattn, "jetson", package, raising=False)
    checks = diagnose()["checks"]
    assert checks["jetson"]["summary"] == "not a Jetson (no Tegra device tree)"
    assert checks["plugins"]["summary"].startswith("plugin loader unavailable")


def test_jetson_with_fake_tools(nothing_gpu_side, plugins_stub, jetson_stub, tmp_path, monkeypatch):
    trtexec = install_trtexec(tmp_path / "trt", "10.3.0")
    os.symlink(trtexec, str(nothing_gpu_side / "trtexec"))
    _fake_nvpmodel(nothing_gpu_side)
    library = write_plugin_library(tmp_path / "libedgeattn_plugins.so")
    monkeypatch.setenv("EDGEATTN_PLUGIN_LIB", library)
    checks = diagnose()["checks"]
    assert checks["trtexec"]["ok"] and checks["trtexec"]["version"] == "10.3.0"
    assert checks["trtexec"]["path"] == str(nothing_gpu_side / "trtexec")
    assert checks["nvpmodel"]["ok"] and checks["nvpmodel"]["mode"] == {"id": 0, "name": "MAXN"}
    assert checks["jetson"]["ok"] and checks["jetson"]["l4t_release"] == "36.4.3"
    assert checks["jetson"]["summary"] == "NVIDIA Jetson AGX Orin Developer Kit (L4T 36.4.3, JetPack 6.2)"
    # No nvidia-smi and no torch: the GPU is known from the device tree.
    assert checks["cuda_device"]["ok"]
    assert (checks["cuda_device"]["name"], checks["cuda_device"]["compute_capability"]) == ("Orin", "8.7")
    assert checks["plugins"]["ok"]
    assert checks["plugins"]["creators"] == [{"name": "EdgeAttnLiteMLA", "version": "1", "namespace": "edgeattn"}]


def test_cuda_device_from_nvidia_smi(isolated_path, no_jetson):
    script = isolated_path / "nvidia-smi"
    script.write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 9.0, 550.54.15'\n")
    script.chmod(0o755)
    assert cuda_device() == {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0",
                             "driver": "550.54.15", "source": "nvidia-smi", "count": 1}


def test_cpu_info_on_arm(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd42\n\n")
    assert cpu_info(str(cpuinfo))["model"] == "ARM Cortex-A78AE"


def test_cli_doctor(invoke, nothing_gpu_side, plugins_stub, no_jetson):
    result = invoke(["doctor", "--json"], expect=0)
    report = json.loads(result.stdout)
    assert set(report["checks"]) >= {"python", "torch", "onnx", "onnxruntime", "tensorrt", "cuda_device", "trtexec",
                                     "plugins", "jetson", "nvpmodel"}
    result = invoke(["doctor"], expect=0)
    assert "trtexec" in result.stdout and "Missing pieces disable:" in result.stdout


def test_cuda_device_with_an_old_driver_falls_back_to_the_device_tree(isolated_path):
    """nvidia-smi before driver 510 rejects the compute_cap field (exit 2) and answers name and driver only; on a
    Jetson the SoC then gives the capability (tegra234: 8.7)."""
    script = isolated_path / "nvidia-smi"
    script.write_text("#!/bin/sh\ncase \"$1\" in *compute_cap*) echo 'Field \"compute_cap\" is not a valid field "
                      "to query.' >&2; exit 2;; esac\necho 'Orin (nvgpu), 540.4.0'\n")
    script.chmod(0o755)
    board = {"soc": "tegra234", "model": "NVIDIA Jetson AGX Orin Developer Kit"}
    device = cuda_device(board=board)
    assert (device["compute_capability"], device["source"]) == ("8.7", "device tree (tegra234)")
    assert cuda_device(board={"soc": None, "model": "x86 box"}) == {
        "name": "Orin (nvgpu)", "compute_capability": None, "driver": "540.4.0", "source": "nvidia-smi"}
