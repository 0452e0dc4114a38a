"""deploy/jetson/build_plugins.sh against fake Jetson filesystems (EDGEATTN_SYSROOT) and fake nvcc/cmake.

The nv_tegra_release lines and device-tree compatible strings are the formats documented for real boards
(L4T R32/R35/R36 release files; NUL-separated compatible lists with nvidia,tegra210/194/234).
"""
import os
import shutil
import stat

import pytest

from edgeattn._subprocess import run_command
from plugin_test_utils import REPO_ROOT

SCRIPT = os.path.join(REPO_ROOT, "deploy", "jetson", "build_plugins.sh")

NANO_RELEASE = "# R32 (release), REVISION: 7.1, GCID: 29689809, BOARD: t210ref, EABI: aarch64, DATE: Wed Feb  2 21:33:23 UTC 2022"
XAVIER_RELEASE = "# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64, DATE: Tue Aug  1 19:57:35 UTC 2023"
ORIN_RELEASE = "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, DATE: Wed Jan  8 01:49:37 UTC 2025"
NANO_COMPATIBLE = b"nvidia,p3450-0000\x00nvidia,jetson-nano\x00nvidia,tegra210\x00"
XAVIER_COMPATIBLE = b"nvidia,p3509-0000+p3668-0001\x00nvidia,tegra194\x00"
ORIN_COMPATIBLE = b"nvidia,p3768-0000+p3767-0005-super\x00nvidia,tegra234\x00"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


def write_executable(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def nvinfer_version_header(major, minor, patch, indirect=False):
    if indirect:  # the TensorRT >= 10.x layout: NV_TENSORRT_MAJOR is defined through TRT_*_ENTERPRISE
        return ("#define TRT_MAJOR_ENTERPRISE {0}\n#define TRT_MINOR_ENTERPRISE {1}\n#define TRT_PATCH_ENTERPRISE {2}\n"
                "#define NV_TENSORRT_MAJOR TRT_MAJOR_ENTERPRISE //!< major\n"
                "#define NV_TENSORRT_MINOR TRT_MINOR_ENTERPRISE //!< minor\n"
                "#define NV_TENSORRT_PATCH TRT_PATCH_ENTERPRISE //!< patch\n").format(major, minor, patch)
    return ("#define NV_TENSORRT_MAJOR {} //!< TensorRT major version.\n#define NV_TENSORRT_MINOR {} //!< minor\n"
            "#define NV_TENSORRT_PATCH {} //!< patch\n#define NV_TENSORRT_BUILD 0\n").format(major, minor, patch)


def make_sysroot(root, release=None, compatible=None, trt=None, cuda="10.2", trt_indirect=False):
    """A fake board: /etc/nv_tegra_release, /proc/device-tree/compatible, TensorRT headers, /usr/local/cuda/bin/nvcc."""
    if release is not None:
        (root / "etc").mkdir(parents=True, exist_ok=True)
        (root / "etc" / "nv_tegra_release").write_text(release + "\n")
    if compatible is not None:
        (root / "proc" / "device-tree").mkdir(parents=True, exist_ok=True)
        (root / "proc" / "device-tree" / "compatible").write_bytes(compatible)
    if trt is not None:
        include = root / "usr" / "include" / "aarch64-linux-gnu"
        include.mkdir(parents=True, exist_ok=True)
        (include / "NvInferVersion.h").write_text(nvinfer_version_header(*trt, indirect=trt_indirect))
    if cuda is not None:
        write_executable(root / "usr" / "local" / "cuda" / "bin" / "nvcc",
                         "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
                         "echo 'Cuda compilation tools, release {0}, V{0}.100'\n".format(cuda))
    return root


def run_script(args, sysroot, extra_env=None):
    env = dict(os.environ, EDGEATTN_SYSROOT=str(sysroot))
    env.pop("CUDA_HOME", None)
    env.update(extra_env or {})
    return run_command([shutil.which("bash"), SCRIPT] + list(args), timeout=60, env=env)


def facts(result):
    return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line and not line.startswith("+"))


@pytest.mark.parametrize("release, compatible, trt, cuda, expected", [
    (NANO_RELEASE, NANO_COMPATIBLE, (8, 2, 1), "10.2",
     {"l4t": "32.7.1", "jetpack": "4.6.1", "soc": "tegra210", "cuda_arch": "53 (from tegra210)",
      "plugin_interface": "IPluginV2DynamicExt"}),
    (XAVIER_RELEASE, XAVIER_COMPATIBLE, (8, 5, 2), "11.4",
     {"l4t": "35.4.1", "jetpack": "5.1.2", "soc": "tegra194", "cuda_arch": "72 (from tegra194)",
      "plugin_interface": "IPluginV2DynamicExt"}),
    (ORIN_RELEASE, ORIN_COMPATIBLE, (10, 3, 0), "12.6",
     {"l4t": "36.4.3", "jetpack": "6.2", "soc": "tegra234", "cuda_arch": "87 (from tegra234)",
      "plugin_interface": "IPluginV3"}),
])
def test_dry_run_prints_the_detected_setup(tmp_path, release, compatible, trt, cuda, expected):
    root = make_sysroot(tmp_path / "root", release, compatible, trt, cuda, trt_indirect=trt[0] >= 10)
    result = run_script(["--dry-run"], root)
    assert result.returncode == 0, result.output
    found = facts(result)
    for key, value in expected.items():
        assert found[key] == value, key
    assert found["tensorrt"].startswith("{}.{}.{} ".format(*trt))
    assert found["cuda"].startswith(cuda + " ")
    cmake_line = [line for line in result.stdout.splitlines() if line.startswith("+ cmake -S")][0]
    assert "-DEDGEATTN_CUDA_ARCHS={}".format(expected["cuda_arch"].split()[0]) in cmake_line
    assert "-DTENSORRT_INCLUDE_DIR={}/usr/include/aarch64-linux-gnu".format(root) in cmake_line
    assert "-DTENSORRT_LIBRARY_DIR={}/usr/lib/aarch64-linux-gnu".format(root) in cmake_line
    assert "+ cmake --build {} -- -j".format(os.path.join(REPO_ROOT, "plugins", "build")) in result.stdout
    assert "dry run: nothing built" in result.stdout


@pytest.mark.parametrize("setup, args, message", [
    (dict(), [], "not a Jetson"),
    (dict(release=ORIN_RELEASE, trt=(10, 3, 0), cuda="12.6"), [], "SoC is not in"),
    (dict(release=ORIN_RELEASE, compatible=ORIN_COMPATIBLE, trt=(10, 3, 0), cuda="11.2"), [],
     "Orin needs CUDA >= 11.4"),
    (dict(release=NANO_RELEASE, compatible=NANO_COMPATIBLE, trt=(8, 2, 1), cuda="13.0"), [],
     "cannot compile for sm_53"),
    (dict(release=NANO_RELEASE, compatible=NANO_COMPATIBLE, trt=(7, 1, 3), cuda="10.2"), [], "too old"),
    (dict(release=ORIN_RELEASE, compatible=ORIN_COMPATIBLE, cuda="12.6"), [], "libnvinfer-dev"),
    (dict(release=ORIN_RELEASE, compatible=ORIN_COMPATIBLE, trt=(10, 3, 0), cuda=None),
     ["--nvcc", "/nonexistent/bin/nvcc"], "nvcc not found"),
    (dict(release=ORIN_RELEASE, compatible=ORIN_COMPATIBLE, trt=(10, 3, 0), cuda="12.6"), ["--arch", "8x"],
     "--arch must be"),
    (dict(release=ORIN_RELEASE, compatible=ORIN_COMPATIBLE, trt=(10, 3, 0), cuda="12.6"), ["--frobnicate"],
     "unknown option"),
])
def test_unsupported_setups_fail_with_one_clear_line(tmp_path, setup, args, message):
    root = make_sysroot(tmp_path / "root", **setup)
    result = run_script(["--dry-run"] + args, root)
    assert result.returncode == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("build_plugins.sh: error: ")
    assert message in errors[0]


def test_arch_override_builds_on_a_desktop_with_a_trt_root(tmp_path):
    root = make_sysroot(tmp_path / "root", cuda="12.6")
    trt_root = tmp_path / "TensorRT-10.3"
    (trt_root / "include").mkdir(parents=True)
    (trt_root / "include" / "NvInferVersion.h").write_text(nvinfer_version_header(10, 3, 0))
    result = run_script(["--dry-run", "--arch", "86;87", "--trt-root", str(trt_root)], root)
    assert result.returncode == 0, result.output
    found = facts(result)
    assert found["cuda_arch"] == "86;87 (from --arch)" and found["l4t"] == "none"
    assert "-DEDGEATTN_TENSORRT_ROOT={}".format(trt_root) in result.stdout


def test_kernels_only_needs_no_tensorrt(tmp_path):
    root = make_sysroot(tmp_path / "root", ORIN_RELEASE, ORIN_COMPATIBLE, trt=None, cuda="12.6")
    result = run_script(["--dry-run", "--kernels-only"], root)
    assert result.returncode == 0, result.output
    assert facts(result)["tensorrt"] == "skipped (--kernels-only)"
    assert "-DEDGEATTN_KERNELS_ONLY=ON" in result.stdout


FAKE_CMAKE = """#!/bin/sh
echo "$@" >> "{log}"
if [ "$1" = "--build" ]; then
    [ -n "{fail}" ] && exit 7
    for name in {produce}; do : > "$2/$name"; done
fi
exit 0
"""


def fake_cmake(tmp_path, produce="libedgeattn_plugins.so libedgeattn_kernels.so", fail=""):
    log = tmp_path / "cmake.log"
    write_executable(tmp_path / "bin" / "cmake", FAKE_CMAKE.format(log=log, produce=produce, fail=fail))
    return str(tmp_path / "bin" / "cmake"), log


def test_build_runs_cmake_then_prints_and_installs_the_library(tmp_path):
    root = make_sysroot(tmp_path / "root", NANO_RELEASE, NANO_COMPATIBLE, (8, 2, 1), "10.2")
    cmake, log = fake_cmake(tmp_path)
    build_dir = tmp_path / "build"
    build_dir.mkdir()
    install_dir = tmp_path / "install"
    result = run_script(["--build-dir", str(build_dir), "--install-dir", str(install_dir), "--jobs", "3"], root,
                        extra_env={"CMAKE": cmake})
    assert result.returncode == 0, result.output
    calls = log.read_text().splitlines()
    assert len(calls) == 2
    assert calls[0].startswith("-S {} -B {}".format(os.path.join(REPO_ROOT, "plugins"), build_dir))
    assert "-DEDGEATTN_CUDA_ARCHS=53" in calls[0]
    assert "-DCMAKE_CUDA_COMPILER={}/usr/local/cuda/bin/nvcc".format(root) in calls[0]
    assert calls[1] == "--build {} -- -j3".format(build_dir)
    assert (install_dir / "libedgeattn_plugins.so").is_file()
    assert "library={}/libedgeattn_plugins.so".format(install_dir) in result.stdout
    assert "export EDGEATTN_PLUGIN_LIB={}/libedgeattn_plugins.so".format(install_dir) in result.stdout


def test_failing_build_returns_cmakes_status(tmp_path):
    root = make_sysroot(tmp_path / "root", ORIN_RELEASE, ORIN_COMPATIBLE, (10, 3, 0), "12.6")
    cmake, _ = fake_cmake(tmp_path, fail="yes")
    result = run_script(["--build-dir", str(tmp_path / "build")], root, extra_env={"CMAKE": cmake})
    assert result.returncode == 7


def test_build_without_the_plugin_library_is_reported(tmp_path):
    root = make_sysroot(tmp_path / "root", ORIN_RELEASE, ORIN_COMPATIBLE, (10, 3, 0), "12.6")
    cmake, _ = fake_cmake(tmp_path, produce="libedgeattn_kernels.so")
    build_dir = tmp_path / "build"
    build_dir.mkdir()
    result = run_script(["--build-dir", str(build_dir)], root, extra_env={"CMAKE": cmake})
    assert result.returncode == 2
    assert "without {}/libedgeattn_plugins.so".format(build_dir) in result.stderr


def test_help_and_syntax():
    assert run_command(["bash", "-n", SCRIPT], timeout=30).returncode == 0
    result = run_command(["bash", SCRIPT, "--help"], timeout=30)
    assert result.returncode == 0 and "--dry-run" in result.stdout and "EDGEATTN_SYSROOT" in result.stdout


@pytest.mark.parametrize("cuda, ok", [("11.3", False), ("11.4", True), ("10.2", False)])
def test_orin_needs_cuda_11_4(tmp_path, cuda, ok):
    """sm_87 (Orin) first appears in CUDA 11.4; one release earlier is refused."""
    root = make_sysroot(tmp_path / "root", ORIN_RELEASE, ORIN_COMPATIBLE, (8, 5, 2), cuda)
    result = run_script(["--dry-run"], root)
    if ok:
        assert result.returncode == 0, result.output
        assert facts(result)["cuda_arch"] == "87 (from tegra234)"
    else:
        assert result.returncode == 2, result.output
        assert "Orin needs CUDA >= 11.4" in result.stderr


@pytest.mark.parametrize("trt, interface", [
    ((8, 6, 2), "IPluginV2DynamicExt"), ((9, 3, 0), "IPluginV2DynamicExt"), ((10, 0, 1), "IPluginV3")])
def test_the_plugin_interface_follows_the_tensorrt_major(tmp_path, trt, interface):
    """IPluginV3 arrived in TensorRT 10.0 (IPluginV2DynamicExt is deprecated from 10.0 in favour of it)."""
    root = make_sysroot(tmp_path / "root", ORIN_RELEASE, ORIN_COMPATIBLE, trt, "12.2")
    result = run_script(["--dry-run"], root)
    assert result.returncode == 0, result.output
    assert facts(result)["plugin_interface"] == interface
