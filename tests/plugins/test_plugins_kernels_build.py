"""CI checks of the kernels library (no GPU, no TensorRT): it compiles for sm_75/87/90, exports exactly the C ABI of
include/edgeattn/kernels.h, carries SASS for each arch, and its launchers validate arguments and report errors
without touching a GPU.
"""
import ctypes
import os
import re
import struct

import pytest

from edgeattn._subprocess import run_command
from edgeattn.plugins import kernels_abi
from plugin_test_utils import PLUGINS_DIR

HEADER = os.path.join(PLUGINS_DIR, "include", "edgeattn", "kernels.h")
FATBIN_MAGIC = 0xBA55ED50
FATBIN_KIND_PTX = 1
FATBIN_KIND_ELF = 2


def header_functions():
    """Names of the EDGEATTN_API functions declared in kernels.h."""
    with open(HEADER) as handle:
        text = handle.read()
    return set(re.findall(r"EDGEATTN_API\s+[\w\s\*]+?\b(edgeattn_\w+)\s*\(", text))


def header_define(name):
    with open(HEADER) as handle:
        match = re.search(r"#define {}\s+(\d+)".format(name), handle.read())
    return int(match.group(1))


def exported_functions(library):
    result = run_command(["nm", "-D", "--defined-only", library], timeout=60, check=True)
    names = set()
    for line in result.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in ("T", "t", "W", "i"):
            names.add(parts[2])
    return names


def fatbin_entries(library):
    """(kind, sm) of every cubin/PTX entry in the .nv_fatbin section (kind 2 = SASS ELF, 1 = PTX)."""
    sections = run_command(["readelf", "-S", "-W", library], timeout=60, check=True).stdout
    offset = size = None
    for line in sections.splitlines():
        if ".nv_fatbin" in line:
            fields = line.split("]", 1)[1].split()
            offset, size = int(fields[3], 16), int(fields[4], 16)
    assert offset is not None, "no .nv_fatbin section in {}".format(library)
    with open(library, "rb") as handle:
        handle.seek(offset)
        data = handle.read(size)
    entries = []
    position = 0
    while position + 16 <= len(data):
        magic, _, header_size, fat_size = struct.unpack_from("<IHHQ", data, position)
        if magic != FATBIN_MAGIC:
            position += 8  # fatbins are 8-byte aligned inside the section
            continue
        entry = position + header_size
        end = entry + fat_size
        while entry < end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            sm = struct.unpack_from("<I", data, entry + 28)[0]
            entries.append((kind, sm))
            entry += entry_header + payload
        position = end
    return entries


def test_kernels_compile_for_sm75_sm87_sm90(kernels_build):
    entries = fatbin_entries(kernels_build["library"])
    sass = {sm for kind, sm in entries if kind == FATBIN_KIND_ELF}
    ptx = {sm for kind, sm in entries if kind == FATBIN_KIND_PTX}
    assert sass == {75, 87, 90}, "SASS archs in the fatbin: {}".format(sorted(sass))
    assert ptx == {90}, "PTX (forward compatibility) should be the highest arch only: {}".format(sorted(ptx))


def test_exported_symbols_are_exactly_the_c_abi(kernels_build):
    declared = header_functions()
    assert len(declared) == 12, sorted(declared)
    exported = exported_functions(kernels_build["library"])
    assert exported == declared, "missing: {}; unexpected exports: {}".format(
        sorted(declared - exported), sorted(exported - declared))


def test_python_bindings_cover_the_header():
    assert set(kernels_abi._SIGNATURES) == header_functions()
    assert kernels_abi.ABI_VERSION == header_define("EDGEATTN_KERNELS_ABI_VERSION")


@pytest.fixture(scope="module")
def kernels(kernels_build):
    return kernels_abi.KernelsLibrary(kernels_build["library"])


def test_library_reports_abi_and_archs(kernels):
    assert kernels.abi_version() == header_define("EDGEATTN_KERNELS_ABI_VERSION")
    assert "archs 75,87,90" in kernels.build_info()
    assert kernels.status_string(kernels_abi.STATUS_WORKSPACE_TOO_SMALL) == "workspace too small"


FAKE = 0x10000  # a non-null "device pointer": every case below fails validation before any CUDA call


@pytest.mark.parametrize("call, status, message", [
    (lambda k: k.blockify_attention(FAKE, FAKE, FAKE, FAKE, 1, 57, 56, 64, 2, 7, padding="none", check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "multiples of window_size"),
    (lambda k: k.blockify_attention(FAKE, FAKE, FAKE, FAKE, 1, 56, 56, 64, 3, 7, check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "multiple of num_heads"),
    (lambda k: k.blockify_attention(FAKE, FAKE, FAKE, FAKE, 1, 56, 56, 64, 2, 7, padding=7, check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "padding 7"),
    (lambda k: k.blockify_attention(FAKE, FAKE, FAKE, FAKE, 1, 56, 56, 64, 2, 7, lepe_weight=FAKE, check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "lepe_weight and lepe_bias"),
    (lambda k: k.blockify_attention(FAKE, FAKE, FAKE, FAKE, 1, 8, 8, 512, 2, 4, check=False),
     kernels_abi.STATUS_UNSUPPORTED, "head_dim 256"),
    (lambda k: k.efficient_attention(FAKE, FAKE, FAKE, FAKE, 2, 3136, 64, 2, FAKE, 16, check=False),
     kernels_abi.STATUS_WORKSPACE_TOO_SMALL, "need"),
    (lambda k: k.efficient_attention(FAKE, FAKE, FAKE, FAKE, 2, 3136, 64, 2, FAKE, 1 << 30, dtype=5, check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "dtype 5"),
    (lambda k: k.lite_mla(FAKE, FAKE, 1, 100, 14, 14, 16, FAKE, 1 << 30, check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "multiple of 3 * head_dim"),
    (lambda k: k.lite_mla(FAKE, FAKE, 1, 96, 14, 14, 16, FAKE, 1 << 30, kernel="quadratic_taylor",
                          qt_alpha=(1.0, 1.0, 1.0), qt_beta=(1.0, 1.0, 1.0), qt_gamma=(1.0, 1.0, 1.0), check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "1 or G = 2 entries"),
    (lambda k: k.soft_kernel_attention(FAKE, FAKE, FAKE, FAKE, 1, 3136, 49, 64, 2, FAKE, 1 << 30, newton_iters=-1,
                                       check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "newton_iters"),
    (lambda k: k.soft_kernel_attention(FAKE, FAKE, FAKE, FAKE, 1, 3136, 49, 64, 2, FAKE, 1024, check=False),
     kernels_abi.STATUS_WORKSPACE_TOO_SMALL, "need"),
])
def test_launchers_reject_bad_arguments_before_touching_the_gpu(kernels, call, status, message):
    assert call(kernels) == status
    assert message in kernels.last_error()


def test_check_true_raises_with_the_reason(kernels):
    with pytest.raises(kernels_abi.KernelError, match="window_size"):
        kernels.blockify_attention(FAKE, FAKE, FAKE, FAKE, 1, 57, 56, 64, 2, 7)


def test_empty_batch_is_a_successful_no_op(kernels):
    assert kernels.blockify_attention(None, None, None, None, 0, 56, 56, 64, 2, 7, check=False) == 0
    assert kernels.last_error() == ""
    assert kernels.efficient_attention(None, None, None, None, 0, 3136, 64, 2, None, 0, check=False) == 0


@pytest.mark.skipif(os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvhost-ctrl-gpu"),
                    reason="a GPU is present: launching with fake pointers would fault")
def test_launch_failure_without_a_gpu_is_reported_not_crashed(kernels):
    status = kernels.efficient_attention(FAKE, FAKE, FAKE, FAKE, 1, 64, 64, 2, FAKE, 1 << 30, check=False)
    assert status == kernels_abi.STATUS_CUDA_ERROR
    assert "linearReduceKernel" in kernels.last_error()


def _grid(*axes):
    combos = [[]]
    for axis in axes:
        combos = [combo + [value] for combo in combos for value in axis]
    return combos


@pytest.mark.parametrize("name, axes", [
    ("efficient_attention", ([1, 2, 3, 5, 8], [49, 255, 256, 257, 3136, 65535, 65536, 65537, 70000], [64],
                             [2])),
    ("lite_mla", ([1, 3, 7], [96, 192], [7, 14, 16, 17, 64, 257], [7, 14, 16, 260], [16], [0, 1])),
    ("soft_kernel_attention", ([1, 2, 5], [49, 256, 3136, 65537], [1, 49, 52, 53, 144, 256], [64], [2])),
])
def test_workspace_is_monotone_in_every_dimension(kernels, name, axes):
    """The plugins size the workspace for the profile's maximum shapes and run smaller shapes in it."""
    size = getattr(kernels, name + "_workspace_size")
    points = _grid(*axes)
    values = {tuple(point): size(*point) for point in points}
    assert all(value > 0 for value in values.values())
    for point, value in values.items():
        for axis in range(len(point)):
            for larger in axes[axis]:
                if larger > point[axis]:
                    bigger = list(point)
                    bigger[axis] = larger
                    assert values[tuple(bigger)] >= value, (name, point, bigger)


def test_workspace_of_blockify_is_zero(kernels):
    assert kernels.blockify_attention_workspace_size(8, 56, 56, 64, 2, 7) == 0


def test_kernels_sources_are_all_built():
    """Every .cu / plugin .cpp under plugins/ is listed in the CMake project (nothing silently left out)."""
    listed = set()
    for root, dirs, files in os.walk(PLUGINS_DIR):
        dirs[:] = [d for d in dirs if d != "build"]
        if "CMakeLists.txt" in files:
            with open(os.path.join(root, "CMakeLists.txt")) as handle:
                text = handle.read()
            for block in re.findall(r"edgeattn_add_op\((.*?)\)", text, re.S):
                for token in block.split():
                    if token.endswith((".cu", ".cpp")):
                        listed.add(os.path.normpath(os.path.join(root, token)))
    on_disk = set()
    for root, dirs, files in os.walk(PLUGINS_DIR):
        dirs[:] = [d for d in dirs if d not in ("build", "cmake")]
        for name in files:
            if name.endswith((".cu", ".cpp")) and name != "pluginRegistration.cpp":
                on_disk.add(os.path.normpath(os.path.join(root, name)))
    assert listed == on_disk, "not in CMake: {}; missing files: {}".format(
        sorted(on_disk - listed), sorted(listed - on_disk))


def test_ctypes_pointer_arguments_accept_none():
    # kernels_abi passes None for absent optional pointers (LePE); c_void_p must map it to NULL
    assert ctypes.c_void_p(None).value is None


# PTX instructions that sm_53 (Jetson Nano, CUDA 10.2) does not have; the kernels must not need any of them.
NEWER_THAN_SM53 = re.compile(
    r"\b(cp\.async|mma\.sync|wgmma|ldmatrix|stmatrix|mbarrier|redux\.sync|setmaxnreg|elect\.sync|fence\.proxy|"
    r"cvt\.\w*\.tf32|\.bf16)\b")
HALF_ARITHMETIC = re.compile(r"^\s*(add|sub|mul|fma|max|min|neg|abs|ex2)\.[\w.]*f16", re.M)


def test_kernels_use_nothing_beyond_sm53(nvcc, tmp_path):
    """Nano (sm_53) cannot be compiled for by this nvcc (CUDA >= 13 dropped it), so check the PTX instead: no
    instruction newer than sm_53 and no half-precision arithmetic (half values are only converted)."""
    sources = sorted(
        os.path.join(root, name) for root, dirs, files in os.walk(PLUGINS_DIR) for name in files
        if name.endswith(".cu") and "cmake" not in root and "build" not in root)
    assert len(sources) == 5
    # the patterns do catch what they are meant to catch
    assert NEWER_THAN_SM53.findall("cp.async.ca.shared.global [%r1], [%rd2], 16;\nmma.sync.aligned.m16n8k16")
    assert HALF_ARITHMETIC.findall("\tfma.rn.f16x2 %r1, %r2, %r3, %r4;\n\tadd.f16 %h1, %h2, %h3;")
    converting = 0
    for source in sources:
        ptx = str(tmp_path / (os.path.basename(source) + ".ptx"))
        result = run_command([nvcc, "-std=c++14", "-arch=compute_75", "-ptx", "-I" + PLUGINS_DIR,
                              "-I" + os.path.join(PLUGINS_DIR, "include"), source, "-o", ptx], timeout=300)
        assert result.returncode == 0, result.output[-3000:]
        with open(ptx) as handle:
            text = handle.read()
        assert not NEWER_THAN_SM53.findall(text), (source, sorted(set(NEWER_THAN_SM53.findall(text))))
        assert not HALF_ARITHMETIC.findall(text), (source, sorted(set(HALF_ARITHMETIC.findall(text))))
        converting += "cvt.f32.f16" in text and "cvt.rn.f16.f32" in text
    assert converting == 4  # every op's FP16 path converts at load (f16 -> f32) and store (f32 -> f16)
