"""Fixtures for the plugin tests: tool discovery and one CMake build of the kernels library per session.

Nothing here imports torch: the CPU tests of this area also run under Python 3.8 with click/PyYAML/numpy only.
"""
import os
import shutil
import tempfile

import pytest

from plugin_test_utils import (CI_ARCHS, PLUGINS_DIR, build_lock, cmake_build, find_nvcc, find_nvcc_11_8,
                               kernel_sources_digest)


@pytest.fixture(scope="session")
def nvcc():
    path = find_nvcc()
    if path is None:
        pytest.skip("nvcc not found (set CUDA_HOME or put nvcc on PATH): the CUDA kernels cannot be compiled here")
    return path


@pytest.fixture(scope="session")
def cmake():
    path = shutil.which("cmake")
    if path is None:
        pytest.skip("cmake not found on PATH: the plugins/ CMake build cannot run")
    return path


def _cached_kernels_build(nvcc, archs, defines=None):
    """Build libedgeattn_kernels.so for ``archs`` once; cached in the temp dir under a hash of the plugin sources,
    the nvcc version and the archs (EDGEATTN_REBUILD_KERNELS=1 forces a rebuild). nvcc keeps the PTX it compiles
    for every source and arch on the way (``--keep``; the library is the same), which the PTX tests read: compiling
    that PTX again took ~45 s of CPU on a machine without the cache."""
    defines = dict(defines or {})
    digest = kernel_sources_digest(nvcc, archs, "ptx kept", *([sorted(defines.items())] if defines else []))
    cache_dir = os.path.join(tempfile.gettempdir(), "edgeattn-kernels-" + digest)
    library = os.path.join(cache_dir, "libedgeattn_kernels.so")
    marker = os.path.join(cache_dir, "BUILD_OK")
    ptx_dir = os.path.join(cache_dir, "ptx")
    with build_lock(cache_dir):  # one build per digest across pytest-xdist workers and the 3.8 pass
        if os.environ.get("EDGEATTN_REBUILD_KERNELS") == "1" or not os.path.isfile(marker):
            build_dir = tempfile.mkdtemp(prefix="edgeattn-kernels-build-")
            intermediates = os.path.join(build_dir, "nvcc-intermediates")
            os.mkdir(intermediates)
            try:
                configured, built = cmake_build(
                    PLUGINS_DIR, build_dir, dict(defines, EDGEATTN_CUDA_ARCHS=archs, EDGEATTN_KERNELS_ONLY="ON",
                                                 CMAKE_CUDA_FLAGS="--keep --keep-dir=" + intermediates), nvcc=nvcc)
                assert configured.returncode == 0, "cmake configure failed:\n" + configured.output[-4000:]
                assert built.returncode == 0, "kernels build failed:\n" + built.output[-6000:]
                built_library = os.path.join(build_dir, "libedgeattn_kernels.so")
                assert os.path.isfile(built_library), "build succeeded but {} is missing".format(built_library)
                staging = tempfile.mkdtemp(prefix="edgeattn-kernels-stage-")
                shutil.copy2(os.path.realpath(built_library), os.path.join(staging, "libedgeattn_kernels.so"))
                os.mkdir(os.path.join(staging, "ptx"))
                for name in os.listdir(intermediates):
                    if name.endswith(".ptx"):
                        shutil.copy2(os.path.join(intermediates, name), os.path.join(staging, "ptx", name))
                with open(os.path.join(staging, "BUILD_OK"), "w") as handle:
                    handle.write(built.output[-2000:])
                shutil.rmtree(cache_dir, ignore_errors=True)
                try:
                    os.rename(staging, cache_dir)
                except OSError:  # another session published the same build first
                    shutil.rmtree(staging, ignore_errors=True)
            finally:
                shutil.rmtree(build_dir, ignore_errors=True)
    return {"dir": cache_dir, "library": library, "ptx_dir": ptx_dir}


@pytest.fixture(scope="session")
def kernels_build(nvcc, cmake):
    """libedgeattn_kernels.so built for sm_75, sm_87 and sm_90 (kernels only, no TensorRT), as CI builds it.

    Cached (see _cached_kernels_build), so the suite's second pass (the Python 3.8 run of
    tests/test_device_side.py) reuses the identical artefact instead of paying for nvcc again.
    """
    return _cached_kernels_build(nvcc, CI_ARCHS)


@pytest.fixture(scope="session")
def scalar_only_kernels_build(nvcc, cmake):
    """libedgeattn_kernels.so for sm_75 alone: EDGEATTN_TENSOR_CORES=AUTO then compiles no tensor-core kernel (the
    configuration of a JetPack 4.6 build for 53/62/72, where only the scalar kernels exist). Cached like
    kernels_build."""
    return _cached_kernels_build(nvcc, "75")


@pytest.fixture(scope="session")
def gpu_kernels_library():
    """Path of a kernels library for this machine's GPU: $EDGEATTN_KERNELS_LIB, else a native-arch CMake build."""
    explicit = os.environ.get("EDGEATTN_KERNELS_LIB")
    if explicit:
        return explicit
    nvcc = find_nvcc()
    if nvcc is None or shutil.which("cmake") is None:
        pytest.skip("set EDGEATTN_KERNELS_LIB or install nvcc and cmake to build the kernels for this GPU")
    return _cached_kernels_build(nvcc, "native")["library"]


#: the archs of the JetPack lines' GPUs a CUDA 11.x nvcc builds: Nano (sm_53), Xavier (sm_72), Orin (sm_87)
JETSON_ARCHS = "53;72;87"


@pytest.fixture(scope="session")
def cuda_11_8_kernels_build(cmake):
    """libedgeattn_kernels.so built by Debian's CUDA 11.8 nvcc (.ci/install_cuda_11_8.sh; $EDGEATTN_NVCC_11_8) for
    sm_53, sm_72 and sm_87, with g++-11 as its host compiler (CUDA 11.8 refuses gcc 12). Cached like kernels_build."""
    nvcc = find_nvcc_11_8()
    if nvcc is None:
        pytest.skip("no CUDA 11.8 nvcc: run .ci/install_cuda_11_8.sh or set EDGEATTN_NVCC_11_8")
    host = shutil.which("g++-11")
    if host is None:
        pytest.skip("CUDA 11.8's nvcc needs a host g++ <= 11 (g++-11: .ci/install_cuda_11_8.sh installs it)")
    build = _cached_kernels_build(nvcc, JETSON_ARCHS, {"CMAKE_CUDA_HOST_COMPILER": host})
    return dict(build, nvcc=nvcc)
