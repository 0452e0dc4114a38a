"""The kernels compile with an nvcc of the JetPack lines, not only the development machine's 13.0: Debian 12's CUDA
11.8 toolkit (non-free nvidia-cuda-toolkit 11.8.89; JetPack 5 ships 11.4, the same major line) builds every kernel
source for sm_53 (Nano) and sm_72 (Xavier), whose only path is the scalar kernels, and for sm_87 (Orin), with its
tensor-core kernels. CI gets that nvcc from .ci/install_cuda_11_8.sh (.ci/run calls it; its cost is stated there).

What it shows: no kernel uses a feature, intrinsic or C++ construct newer than CUDA 11.8 (or that 11.8's ptxas
rejects for these archs), the sm_53/sm_72 SASS holds no tensor-core instruction, and the sm_87 SASS holds the mma
and ldmatrix of the tensor-core kernels. CUDA 10.2 (JetPack 4.6, the Nano's only toolkit) is not available as a
Debian package; what keeps the sources within it is the C++14 and scalar-only configuration, checked by
test_plugins_kernels_build.py's scalar-only build.
"""
import os
import re

import pytest

from edgeattn._subprocess import run_command
from plugin_test_utils import tool_version

TENSOR_CORE_SASS = re.compile(r"\b(HMMA|LDSM)\b")


def _cuobjdump(build):
    """CUDA 11.8's own cuobjdump (beside its nvcc: <prefix>/usr/bin), which reads every arch it compiles."""
    prefix_bin = os.path.join(os.path.dirname(build["nvcc"]), "..", "..", "..", "bin")
    tool = os.path.normpath(os.path.join(prefix_bin, "cuobjdump"))
    if not os.access(tool, os.X_OK):
        pytest.fail("{} lacks cuobjdump at {} (a partial CUDA 11.8 install?)".format(build["nvcc"], tool))
    return tool


def test_cuda_11_8_is_the_compiler(cuda_11_8_kernels_build):
    assert "release 11.8" in tool_version(cuda_11_8_kernels_build["nvcc"])


def test_every_kernel_compiles_with_cuda_11_8_for_nano_xavier_and_orin(cuda_11_8_kernels_build):
    build = cuda_11_8_kernels_build
    result = run_command([_cuobjdump(build), "--list-elf", build["library"]], timeout=120)
    assert result.returncode == 0, result.output[-2000:]
    archs = sorted(set(int(arch) for arch in re.findall(r"\.sm_(\d+)\.cubin", result.stdout)))
    assert archs == [53, 72, 87], result.stdout


@pytest.mark.parametrize("arch, tensor_cores", [("sm_53", False), ("sm_72", False), ("sm_87", True)])
def test_only_the_orin_sass_has_tensor_core_instructions(cuda_11_8_kernels_build, arch, tensor_cores):
    build = cuda_11_8_kernels_build
    result = run_command([_cuobjdump(build), "-sass", "-arch", arch, build["library"]], timeout=300)
    assert result.returncode == 0, result.output[-2000:]
    functions = {}
    for block in re.split(r"\n\s*Function : ", result.stdout)[1:]:
        name, _, body = block.partition("\n")
        functions[name.strip()] = body
    assert functions, result.stdout[:2000]
    with_mma = sorted(name for name, body in functions.items() if TENSOR_CORE_SASS.search(body))
    if not tensor_cores:
        assert with_mma == [], (arch, with_mma)
    else:
        # every tensor-core kernel (blockify, EFFATT/LiteMLA, SOFT), and only those
        assert with_mma and all("Mma" in name for name in with_mma), with_mma
        for kernel in ("blockifyMmaKernel", "linearReduceMmaKernel", "linearOutputMmaKernel",
                       "linearSingleLaunchMmaKernel", "softNewtonMmaKernel", "softNewtonGemmMmaKernel"):
            assert any(kernel in name for name in with_mma), (kernel, with_mma)
