"""CI checks of the kernels library (no GPU, no TensorRT): it compiles for sm_75/87/90, exports exactly the C ABI of
include/edgeattn/kernels.h, carries SASS for each arch (HMMA tensor-core instructions in sm_87/sm_90, none in
sm_75), builds in a scalar-only configuration, and its launchers validate arguments and report errors without
touching a GPU.
"""
import ctypes
import glob
import hashlib
import importlib.util
import os
import re
import shutil
import struct

import pytest

from edgeattn._subprocess import run_command
from edgeattn.plugins import kernels_abi
from plugin_test_utils import PLUGINS_DIR, REPO_ROOT, cached_text, tool_version

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
    assert sass == {75, 80, 87, 90}, "SASS archs in the fatbin: {}".format(sorted(sass))
    assert ptx == {90}, "PTX (forward compatibility) should be the highest arch only: {}".format(sorted(ptx))


def test_exported_symbols_are_exactly_the_c_abi(kernels_build):
    declared = header_functions()
    assert len(declared) == 19, sorted(declared)
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
    assert "archs 75,80,87,90; tensor cores sm_80+" in kernels.build_info()
    assert kernels.status_string(kernels_abi.STATUS_WORKSPACE_TOO_SMALL) == "workspace too small"


# ---- SASS: tensor-core instructions where they belong ---------------------------------------------------------------
def find_cuobjdump(nvcc):
    """(cuobjdump, environment) or None. cuobjdump -sass runs nvdisasm: a full toolkit has both next to nvcc; the
    `test` extra installs both from PyPI (nvidia-cuda-cuobjdump / -nvdisasm, under site-packages/nvidia/cu13/bin),
    found in this interpreter's packages or in the checkout's .venv (the README's test command creates it; the
    Python 3.8 device-side pass runs without those packages). $EDGEATTN_CUOBJDUMP names the tool explicitly."""
    directories = [os.path.dirname(os.environ["EDGEATTN_CUOBJDUMP"])] if os.environ.get("EDGEATTN_CUOBJDUMP") else []
    directories += [os.path.dirname(os.path.realpath(nvcc)), os.path.dirname(nvcc)]
    if os.environ.get("CUDA_HOME"):
        directories.append(os.path.join(os.environ["CUDA_HOME"], "bin"))
    directories.append("/usr/local/cuda/bin")
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        directories += sorted(glob.glob(os.path.join(root, "cu*", "bin")))
    directories += sorted(glob.glob(os.path.join(REPO_ROOT, ".venv", "lib", "python3*", "site-packages", "nvidia",
                                                 "cu*", "bin")))
    on_path = shutil.which("cuobjdump")
    candidates = ([on_path] if on_path else []) + [os.path.join(d, "cuobjdump") for d in directories]
    tools = [c for c in candidates if os.path.isfile(c) and os.access(c, os.X_OK)]
    disassemblers = [os.path.join(d, "nvdisasm") for d in [os.path.dirname(t) for t in tools] + directories]
    disassemblers = [d for d in disassemblers if os.path.isfile(d) and os.access(d, os.X_OK)]
    if shutil.which("nvdisasm"):
        disassemblers.insert(0, shutil.which("nvdisasm"))
    if not tools or not disassemblers:
        return None
    environment = dict(os.environ, NVDISASM_PATH=os.path.dirname(disassemblers[0]),
                       PATH=os.pathsep.join([os.path.dirname(disassemblers[0]), os.environ.get("PATH", "")]))
    return tools[0], environment


def cuobjdump_text(cuobjdump, library, kind, options, arch=""):
    """cuobjdump's output for ``options`` (e.g. ["-sass", "-arch", arch]) on the library, cached (cached_text) as
    ``kind`` under a hash of the library's bytes, cuobjdump's version and ``arch``: each test reads the same dump."""
    tool, environment = cuobjdump

    def produce():
        result = run_command([tool] + list(options) + [library], timeout=300, env=environment)
        assert result.returncode == 0, result.output[-3000:]
        return result.stdout

    digest = hashlib.sha256()
    with open(library, "rb") as handle:
        digest.update(handle.read())
    digest.update((tool_version(tool) + arch).encode())
    return cached_text(kind, digest.hexdigest()[:16], produce)


def sass_functions(cuobjdump, library, arch):
    """{mangled function name: SASS text} of the library's code for ``arch`` (e.g. "sm_87")."""
    sass = cuobjdump_text(cuobjdump, library, "sass", ["-sass", "-arch", arch], arch)
    functions = {}
    for block in re.split(r"\n\s*Function : ", sass)[1:]:
        name, _, body = block.partition("\n")
        functions[name.strip()] = body
    assert functions, "no SASS for {} in {}".format(arch, library)
    return functions


@pytest.fixture(scope="module")
def cuobjdump(nvcc):
    found = find_cuobjdump(nvcc)
    if found is None:
        pytest.skip("cuobjdump/nvdisasm not found: install the `test` extra (nvidia-cuda-cuobjdump, "
                    "nvidia-cuda-nvdisasm) or a full CUDA toolkit to inspect SASS")
    return found


TENSOR_CORE_SASS = re.compile(r"\b(HMMA|LDSM)\b")
#: the tensor-core kernels of EFFATT / LiteMLA (common/linearAttentionTensorCore.cuh) and SOFT
LINEAR_AND_SOFT_MMA_KERNELS = ("linearReduceMmaKernel", "linearOutputMmaKernel", "linearFusedMmaKernel",
                               "linearSingleLaunchMmaKernel", "softNewtonMmaKernel", "softPass1MmaKernel",
                               "softPass2MmaKernel", "softNewtonGemmMmaKernel")


def test_sass_has_tensor_core_instructions_on_sm87_and_sm90_only(kernels_build, cuobjdump):
    """The issue's acceptance check: HMMA (and LDSM, ldmatrix) in the sm_87 and sm_90 SASS, only in the tensor-core
    kernels; none anywhere in the sm_75 SASS (guarded device code, never launched there)."""
    library = kernels_build["library"]
    for arch in ("sm_87", "sm_90"):
        functions = sass_functions(cuobjdump, library, arch)
        tensor = {name for name, body in functions.items() if "HMMA" in body}
        assert tensor and all("MmaKernel" in name for name in tensor), (arch, sorted(tensor))
        assert any("blockifyMmaKernel" in name for name in tensor), sorted(tensor)
        assert all("LDSM" in functions[name] for name in tensor if "blockifyMmaKernel" in name)
        for kernel in LINEAR_AND_SOFT_MMA_KERNELS:  # every instantiation of them
            instances = [name for name in functions if kernel in name]
            assert instances and all(name in tensor and "LDSM" in functions[name] for name in instances), (
                arch, kernel, instances)
        scalar = [name for name in functions if "MmaKernel" not in name]
        assert scalar and not any(TENSOR_CORE_SASS.search(functions[name]) for name in scalar)
    functions = sass_functions(cuobjdump, library, "sm_75")
    assert any("blockifyMmaKernel" in name for name in functions)  # compiled, with an empty body
    assert not [name for name, body in functions.items() if TENSOR_CORE_SASS.search(body)]


def test_scalar_only_configuration_builds_without_tensor_core_kernels(scalar_only_kernels_build):
    """EDGEATTN_CUDA_ARCHS=75 (AUTO: no arch >= 80) compiles the scalar kernels only, with C++14, and says so; the
    same C ABI; forcing the tensor-core path fails cleanly, before any CUDA call."""
    library = scalar_only_kernels_build["library"]
    assert {sm for kind, sm in fatbin_entries(library) if kind == FATBIN_KIND_ELF} == {75}
    with open(library, "rb") as handle:
        assert b"blockifyMmaKernel" not in handle.read()
    assert exported_functions(library) == header_functions()
    scalar_only = kernels_abi.KernelsLibrary(library)
    assert "archs 75; tensor cores off" in scalar_only.build_info()
    try:
        scalar_only.set_kernel_path("tensor_core")
        status = scalar_only.blockify_attention(FAKE, FAKE, FAKE, FAKE, 1, 7, 7, 32, 1, 7, dtype="float16",
                                                check=False)
        assert status == kernels_abi.STATUS_UNSUPPORTED
        assert "built without tensor-core kernels" in scalar_only.last_error()
    finally:
        scalar_only.set_kernel_path("auto")


def test_full_build_has_the_tensor_core_kernels(kernels_build):
    with open(kernels_build["library"], "rb") as handle:
        assert b"blockifyMmaKernel" in handle.read()


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


NO_GPU = pytest.mark.skipif(os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvhost-ctrl-gpu"),
                            reason="a GPU is present: launching with fake pointers would fault")


@NO_GPU
def test_launch_failure_without_a_gpu_is_reported_not_crashed(kernels):
    status = kernels.efficient_attention(FAKE, FAKE, FAKE, FAKE, 1, 64, 64, 2, FAKE, 1 << 30, check=False)
    assert status == kernels_abi.STATUS_CUDA_ERROR
    assert "linearFusedKernel" in kernels.last_error()  # N = 64: one split, one fused launch


@NO_GPU
@pytest.mark.parametrize("path", ["auto", "tensor_core"])
def test_kernel_path_query_without_a_gpu_is_reported_not_crashed(kernels, path):
    """An FP16 blockify launch asks the device for its compute capability first (cached per device); without a GPU
    that query fails with a CUDA error naming it, and the next (FP32, scalar) launch reports its own failure."""
    kernels.set_kernel_path(path)
    try:
        status = kernels.blockify_attention(FAKE, FAKE, FAKE, FAKE, 1, 7, 7, 32, 1, 7, dtype="float16", check=False)
        assert status == kernels_abi.STATUS_CUDA_ERROR
        assert "cudaGetDevice failed" in kernels.last_error()
        status = kernels.blockify_attention(FAKE, FAKE, FAKE, FAKE, 1, 7, 7, 32, 1, 7, dtype="float32", check=False)
        assert status == kernels_abi.STATUS_CUDA_ERROR and "blockifyAttentionKernel" in kernels.last_error()
    finally:
        kernels.set_kernel_path("auto")


def test_kernel_path_setting_round_trips(kernels):
    try:
        for name in ("scalar", "tensor_core", "tensor_core_warp", "auto"):
            assert kernels.set_kernel_path(name) == kernels_abi.STATUS_SUCCESS and kernels.kernel_path() == name
        assert kernels.set_kernel_path(4, check=False) == kernels_abi.STATUS_INVALID_ARGUMENT
        assert "kernel path 4" in kernels.last_error() and kernels.kernel_path() == "auto"
    finally:
        kernels.set_kernel_path("auto")


def test_thread_kernel_path_wins_over_the_process_setting_and_is_validated(kernels):
    """The per-thread path (a TensorRT plugin's tactic around its launch): initially inherit; set and read back;
    refused values leave it; with the process-wide setting "scalar", a thread set to tensor_core launches FP16
    blockify through the device query (the tensor-core path's first step: a CUDA error here, no GPU) while inherit
    takes the scalar kernel straight to its launch."""
    try:
        assert kernels.thread_kernel_path() == "inherit"
        for name in ("scalar", "tensor_core", "auto", "inherit"):
            kernels.set_thread_kernel_path(name)
            assert kernels.thread_kernel_path() == name
        assert kernels.set_thread_kernel_path(5, check=False) == kernels_abi.STATUS_INVALID_ARGUMENT
        assert "thread kernel path 5" in kernels.last_error() and kernels.thread_kernel_path() == "inherit"
        kernels.set_kernel_path("scalar")
        kernels.set_thread_kernel_path("tensor_core")
        status = kernels.blockify_attention(FAKE, FAKE, FAKE, FAKE, 1, 7, 7, 32, 1, 7, dtype="float16", check=False)
        assert status == kernels_abi.STATUS_CUDA_ERROR and "cudaGetDevice failed" in kernels.last_error()
        kernels.set_thread_kernel_path("inherit")
        status = kernels.blockify_attention(FAKE, FAKE, FAKE, FAKE, 1, 7, 7, 32, 1, 7, dtype="float16", check=False)
        assert status == kernels_abi.STATUS_CUDA_ERROR and "blockifyAttentionKernel" in kernels.last_error()
    finally:
        kernels.set_thread_kernel_path("inherit")
        kernels.set_kernel_path("auto")


@NO_GPU
def test_device_arch_without_a_gpu_is_a_cuda_error(kernels):
    with pytest.raises(kernels_abi.KernelError) as caught:
        kernels.device_arch()
    assert caught.value.status == kernels_abi.STATUS_CUDA_ERROR and "cudaGetDevice failed" in str(caught.value)


#: (compute capability, code arch) -> the paths a call can run there (scalar first), FP16 and FP32 I/O: the tensor
#: cores need an sm_80+ device and sm_80+ code for it, and FP16 I/O
KERNEL_PATHS_BY_ARCH = {(53, 53): ["scalar"], (72, 72): ["scalar"], (75, 75): ["scalar"], (87, 72): ["scalar"],
                        (80, 80): ["scalar", "tensor_core"], (87, 87): ["scalar", "tensor_core"],
                        (90, 90): ["scalar", "tensor_core"]}
#: what AUTO takes on an sm_80+ device (plugins/README.md, "Kernel path by timing": the H200's tensor-core /
#: scalar ratios), per op and batch; below sm_80 (or without sm_80+ code) always scalar
DEFAULT_ON_SM80_PLUS = {("blockify_attention", 1): "tensor_core", ("blockify_attention", 64): "tensor_core",
                        ("efficient_attention", 1): "scalar", ("efficient_attention", 64): "scalar",
                        ("lite_mla_relu", 1): "scalar", ("lite_mla_relu", 63): "scalar",
                        ("lite_mla_relu", 64): "tensor_core", ("lite_mla_relu", 256): "tensor_core",
                        ("lite_mla_quadratic_taylor", 1): "scalar", ("lite_mla_quadratic_taylor", 64): "scalar",
                        # SOFT: the measured kernels (M > 64: the scalar Newton-Raphson); its GEMM tiles unmeasured
                        ("soft_kernel_attention", 1): "tensor_core_warp",
                        ("soft_kernel_attention", 64): "tensor_core_warp"}


def test_kernel_paths_and_the_default_table_per_arch(kernels):
    for (capability, code), expected in KERNEL_PATHS_BY_ARCH.items():
        for op in kernels_abi.OPS:
            # blockify and SOFT also have a second tensor-core path (one warp / one block per problem)
            two = op in ("blockify_attention", "soft_kernel_attention") and "tensor_core" in expected
            paths = expected + ["tensor_core_warp"] if two else expected
            assert kernels.kernel_paths(op, "float16", capability, code) == paths, (op, capability, code)
            assert kernels.kernel_paths(op, "float32", capability, code) == ["scalar"], (op, capability, code)
            for batch in (1, 64):
                wanted = DEFAULT_ON_SM80_PLUS[(op, batch)] if "tensor_core" in expected else "scalar"
                assert kernels.default_kernel_path(op, batch, capability, code) == wanted, (op, batch, capability)
    for (op, batch), wanted in DEFAULT_ON_SM80_PLUS.items():
        assert kernels.default_kernel_path(op, batch, 87) == wanted, (op, batch)
    with pytest.raises(kernels_abi.KernelError, match="not an edgeattn_op"):
        kernels.kernel_paths(9, "float16", 87)
    with pytest.raises(kernels_abi.KernelError, match="not an edgeattn_op"):
        kernels.default_kernel_path(-1, 1, 87)


def test_a_scalar_only_build_offers_no_tensor_core_path(scalar_only_kernels_build):
    scalar_only = kernels_abi.KernelsLibrary(scalar_only_kernels_build["library"])
    assert scalar_only.kernel_paths("blockify_attention", "float16", 90) == ["scalar"]
    assert scalar_only.default_kernel_path("blockify_attention", 64, 90) == "scalar"


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


# PTX instructions that sm_53 (Jetson Nano, CUDA 10.2) does not have; the scalar kernels must not need any of them.
NEWER_THAN_SM53 = re.compile(
    r"\b(cp\.async|mma\.sync|wgmma|ldmatrix|stmatrix|mbarrier|redux\.sync|setmaxnreg|elect\.sync|fence\.proxy|"
    r"cvt\.\w*\.tf32|\.bf16)\b")
HALF_ARITHMETIC = re.compile(r"^\s*(add|sub|mul|fma|max|min|neg|abs|ex2)\.[\w.]*f16", re.M)


def kernel_sources():
    return sorted(
        os.path.join(root, name) for root, dirs, files in os.walk(PLUGINS_DIR) for name in files
        if name.endswith(".cu") and "cmake" not in root and "build" not in root)


def build_ptx(build, source, arch):
    """The PTX nvcc wrote for ``source`` at compute_``arch`` while it built ``build`` (a kernels_build fixture: the
    compile kept its PTX, see tests/plugins/conftest.py), with the defines of that build's configuration."""
    base = os.path.splitext(os.path.basename(source))[0]
    # compute_<arch> in the name when the compile had several virtual archs, none when it had one
    for name in ("{}.compute_{}.ptx".format(base, arch), "{}.ptx".format(base)):
        path = os.path.join(build["ptx_dir"], name)
        if os.path.isfile(path):
            with open(path) as handle:
                ptx = handle.read()
            if ".target sm_{}".format(arch) in ptx:
                return ptx
    raise AssertionError("no compute_{} PTX of {} in {}: {}".format(
        arch, base, build["ptx_dir"], sorted(os.listdir(build["ptx_dir"]))))


def ptx_entries(ptx):
    """{entry name: body} of the kernels (.entry) in a PTX file."""
    entries = {}
    for match in re.finditer(r"\.entry\s+(\w+)\s*\(", ptx):
        end = ptx.find("\n}\n", match.end())
        entries[match.group(1)] = ptx[match.end():end]
    return entries


def test_scalar_kernels_use_nothing_beyond_sm53(kernels_build, scalar_only_kernels_build):
    """Nano (sm_53) cannot be compiled for by this nvcc (CUDA >= 13 dropped it), so check the PTX instead: for
    compute_75 (the CI build's lowest arch, where the tensor-core kernels' bodies are compiled out) no instruction
    newer than sm_53 and no half-precision arithmetic (half values are only converted) in any kernel source, and the
    same for blockify's scalar-only configuration (EDGEATTN_TENSOR_CORES=0, the JetPack 4.6 build), which has no
    tensor-core kernel at all."""
    sources = kernel_sources()
    assert len(sources) == 10  # blockify: the scalar / one-warp kernels' file and one flash file per head_dim
    # the patterns do catch what they are meant to catch
    assert NEWER_THAN_SM53.findall("cp.async.ca.shared.global [%r1], [%rd2], 16;\nmma.sync.aligned.m16n8k16")
    assert HALF_ARITHMETIC.findall("\tfma.rn.f16x2 %r1, %r2, %r3, %r4;\n\tadd.f16 %h1, %h2, %h3;")
    converting = 0
    for source in sources:
        text = build_ptx(kernels_build, source, 75)
        assert not NEWER_THAN_SM53.findall(text), (source, sorted(set(NEWER_THAN_SM53.findall(text))))
        assert not HALF_ARITHMETIC.findall(text), (source, sorted(set(HALF_ARITHMETIC.findall(text))))
        converting += "cvt.f32.f16" in text and "cvt.rn.f16.f32" in text
    assert converting == 4  # every op's FP16 path converts at load (f16 -> f32) and store (f32 -> f16)
    blockify = os.path.join(PLUGINS_DIR, "blockifyAttention", "blockifyAttentionKernel.cu")
    guarded = ptx_entries(build_ptx(kernels_build, blockify, 75))
    assert any("blockifyMmaKernel" in name for name in guarded)
    scalar_only = build_ptx(scalar_only_kernels_build, blockify, 75)
    assert ptx_entries(scalar_only) and not any("MmaKernel" in name for name in ptx_entries(scalar_only))
    assert not NEWER_THAN_SM53.findall(scalar_only)


def test_tensor_core_ptx_is_confined_to_the_tensor_core_kernels(kernels_build):
    """compute_87: blockifyMmaKernel holds the f16 m16n8k16 mma (FP32 accumulate) and ldmatrix; every other kernel of
    the source stays free of post-sm_53 instructions."""
    blockify = os.path.join(PLUGINS_DIR, "blockifyAttention", "blockifyAttentionKernel.cu")
    entries = ptx_entries(build_ptx(kernels_build, blockify, 87))
    tensor = {name: body for name, body in entries.items() if "blockifyMmaKernel" in name}
    assert len(tensor) == 6, sorted(entries)  # head_dim padded to 16, 32 (1 or 4 tiles per pass), 64, 128
    for name, body in tensor.items():
        assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in body, name
        assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in body and "ldmatrix.sync.aligned.m8n8.x4.trans" in body
        assert not HALF_ARITHMETIC.findall(body), name
    scalar = {name: body for name, body in entries.items() if name not in tensor}
    assert scalar and not any(NEWER_THAN_SM53.findall(body) for body in scalar.values())


@pytest.mark.parametrize("source, kernels", [
    ("efficientAttention/efficientAttentionKernel.cu", 12),  # reduce, output, fused, single launch x 3 value tiles
    ("liteMLA/liteMLAKernel.cu", 24),                        # the same for ReLU and quadratic Taylor
    # Newton + pass 1 / pass 2 x 2 value-tile counts + the GEMM-tiled Newton's two products
    ("softKernelAttention/softKernelAttentionKernel.cu", 7),
    ("blockifyAttention/blockifyFlashHd16.cu", 1),          # the pipelined blockify kernel, one head_dim each
    ("blockifyAttention/blockifyFlashHd32.cu", 1),
    ("blockifyAttention/blockifyFlashHd64.cu", 1),
    ("blockifyAttention/blockifyFlashHd128.cu", 1),
])
def test_linear_and_soft_tensor_core_ptx_is_confined_to_their_mma_kernels(kernels_build, source, kernels):
    """compute_87: every MmaKernel of the EFFATT, LiteMLA and SOFT sources holds the f16 m16n8k16 mma with FP32
    accumulation and ldmatrix, and no half arithmetic (FP32 operands are split into f16 pairs, never computed in
    f16); their scalar kernels stay free of post-sm_53 instructions."""
    entries = ptx_entries(build_ptx(kernels_build, os.path.join(PLUGINS_DIR, source), 87))
    tensor = {name: body for name, body in entries.items() if "MmaKernel" in name}
    assert len(tensor) == kernels, sorted(entries)
    for name, body in tensor.items():
        assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in body and "ldmatrix.sync.aligned" in body, name
        assert not HALF_ARITHMETIC.findall(body), name
    scalar = {name: body for name, body in entries.items() if name not in tensor}
    has_scalar = "blockifyFlash" not in source  # the flash files hold only the tensor-core kernel
    assert bool(scalar) == has_scalar and not any(NEWER_THAN_SM53.findall(body) for body in scalar.values())


CMAKE_ARCH_PROBE = """
include("{module}")
foreach(case "AUTO|80" "AUTO|86" "AUTO|53;72;87" "AUTO|75" "AUTO|53;62;72" "ON|75" "OFF|87")
    string(REPLACE "|" ";" parts "${{case}}")
    list(GET parts 0 requested)
    list(REMOVE_AT parts 0)
    edgeattn_tensor_cores(result "${{requested}}" "${{parts}}")
    message(STATUS "tensor_cores ${{case}} = ${{result}}")
endforeach()
edgeattn_resolve_cuda_archs(resolved "53,72,87,87")
message(STATUS "resolved = ${{resolved}}")
edgeattn_gencode_flags(flags "53;87")
message(STATUS "gencode = ${{flags}}")
"""


def test_cmake_arch_helpers_follow_their_contract(cmake, tmp_path):
    """plugins/cmake/EdgeattnCudaArchs.cmake in script mode (no compiler): tensor-core kernels (mma.sync m16n8k16,
    sm_80+) are built in AUTO exactly when some arch >= 80 is requested (sm_80/sm_86 desktop Ampere included);
    an explicit arch list is kept, deduplicated; every arch gets its SASS plus PTX of the highest."""
    script = tmp_path / "probe.cmake"
    script.write_text(CMAKE_ARCH_PROBE.format(module=os.path.join(PLUGINS_DIR, "cmake", "EdgeattnCudaArchs.cmake")))
    result = run_command([cmake, "-P", str(script)], timeout=60)
    assert result.returncode == 0, result.output[-3000:]
    lines = dict(line.split("-- ", 1)[1].split(" = ", 1) for line in result.output.splitlines() if " = " in line)
    assert {key: value for key, value in lines.items() if key.startswith("tensor_cores")} == {
        "tensor_cores AUTO|80": "1", "tensor_cores AUTO|86": "1", "tensor_cores AUTO|53;72;87": "1",
        "tensor_cores AUTO|75": "0", "tensor_cores AUTO|53;62;72": "0", "tensor_cores ON|75": "1",
        "tensor_cores OFF|87": "0"}
    assert lines["resolved"] == "53;72;87"
    assert lines["gencode"].split(";") == ["-gencode=arch=compute_53,code=sm_53", "-gencode=arch=compute_87,code=sm_87",
                                           "-gencode=arch=compute_87,code=compute_87"]


# ---- the instructions the PTX asks for are in the SASS -------------------------------------------------------------
#: PTX instruction -> the SASS opcode ptxas must emit for it on sm_80+ (cp.async: LDGSTS, global->shared without a
#: register round trip; ldmatrix: LDSM; mma.sync f16: HMMA). A kernel asking for one and lacking the other would have
#: been lowered to something else (or compiled out), which the emulator, which executes the PTX semantics, cannot see.
PTX_TO_SASS = (("cp.async", "LDGSTS"), ("ldmatrix", "LDSM"), ("mma.sync", "HMMA"))


def ptx_instruction_kernels(build, arch):
    """{PTX instruction: set of kernel (entry) names whose compute_<arch> PTX uses it}, over every kernel source."""
    found = {instruction: set() for instruction, _ in PTX_TO_SASS}
    for source in kernel_sources():
        for name, body in ptx_entries(build_ptx(build, source, arch)).items():
            for instruction, _ in PTX_TO_SASS:
                if re.search(r"\b" + re.escape(instruction) + r"\b", body):
                    found[instruction].add(name)
    return found


@pytest.mark.parametrize("arch", [87, 90])
def test_new_instructions_in_the_ptx_are_in_the_sass(kernels_build, cuobjdump, arch):
    """For sm_87 (Orin) and sm_90: every kernel whose PTX has cp.async, ldmatrix or mma.sync has LDGSTS, LDSM or HMMA
    in its SASS, and no kernel has those opcodes without the PTX instruction. Today: ldmatrix and mma in the
    tensor-core kernels; cp.async where the kernels use it (a kernel that adopts it is checked from then on)."""
    functions = sass_functions(cuobjdump, kernels_build["library"], "sm_{}".format(arch))
    wanted = ptx_instruction_kernels(kernels_build, arch)
    assert wanted["mma.sync"] and wanted["ldmatrix"], wanted  # the tensor-core kernels exist in this build
    for instruction, opcode in PTX_TO_SASS:
        in_sass = {name for name, body in functions.items() if re.search(r"\b" + opcode + r"\b", body)}
        assert in_sass == wanted[instruction], (arch, instruction, opcode, sorted(wanted[instruction] - in_sass),
                                                sorted(in_sass - wanted[instruction]))


# ---- ptxas resource budgets ---------------------------------------------------------------------------------------
#: the archs whose resource usage is budgeted: A100-class sm_80, Orin sm_87, Hopper sm_90 (64K 32-bit registers and
#: at most 255 per thread on each; the kernels keep static shared memory within 48 KB, the no-opt-in limit)
BUDGET_ARCHS = ("sm_80", "sm_87", "sm_90")
REGISTERS_PER_SM = 65536
STATIC_SHARED_LIMIT = 48 * 1024
#: CUDA's largest block: the size a kernel without __launch_bounds__ must be launchable at (ptxas's assumption)
DEFAULT_BLOCK_THREADS = 1024


def resource_usage(cuobjdump, library):
    """{arch: {function: {"REG", "STACK", "SHARED", "LOCAL", ...}}} from cuobjdump --dump-resource-usage (what ptxas
    allotted each kernel of the library, read from the same build as the other tests: nothing compiled again)."""
    text = cuobjdump_text(cuobjdump, library, "resource-usage", ["--dump-resource-usage"])
    usage, arch = {}, None
    for line in text.splitlines():
        match = re.match(r"\s*arch = (sm_\d+)", line)
        if match:
            arch = match.group(1)
            usage.setdefault(arch, {})
            continue
        match = re.match(r"\s*Function (\S+):", line)
        if match:
            function = match.group(1)
            continue
        if arch and line.strip().startswith("REG:"):
            usage[arch][function] = {key: int(value) for key, value in re.findall(r"(\w+)(?:\[\d+\])?:(\d+)", line)}
    return usage


def launch_bounds(cuobjdump, library, arch):
    """{function: max threads per block its __launch_bounds__ declares} (EIATTR_MAX_THREADS in the cubin's .nv.info;
    functions that declare none are absent)."""
    text = cuobjdump_text(cuobjdump, library, "elf-info", ["-elf", "-arch", arch], arch)
    bounds = {}
    for section in re.split(r"\n\.nv\.info\.", text)[1:]:
        name = section.split(None, 1)[0]
        match = re.search(r"EIATTR_MAX_THREADS\s*\n\s*Format:\s*\S+\s*\n\s*Value:\s*(0x[0-9a-f]+) (0x[0-9a-f]+) "
                          r"(0x[0-9a-f]+)", section)
        if match:
            x, y, z = (int(value, 16) for value in match.groups())
            bounds[name] = x * y * z
    return bounds


def test_ptxas_resource_usage_fits_the_declared_budgets(kernels_build, cuobjdump):
    """Per kernel on sm_80, sm_87 and sm_90 (ptxas's allotment in the CI build, read with cuobjdump): a block of the
    size its __launch_bounds__ declares (1024 threads without) fits the register file (registers x threads <= 64K,
    so no launch at the declared size fails for resources), static shared memory <= 48 KB, and no local memory
    (stack frame and local bytes 0; ptxas spills into the stack frame, so 0 means 0 spill bytes; issue 33 item 1)
    in any kernel."""
    library = kernels_build["library"]
    usage = resource_usage(cuobjdump, library)
    assert set(BUDGET_ARCHS) <= set(usage), sorted(usage)
    problems = []
    for arch in BUDGET_ARCHS:
        bounds = launch_bounds(cuobjdump, library, arch)
        kernels = {name: values for name, values in usage[arch].items() if "Kernel" in name}
        assert len(kernels) >= 10, sorted(usage[arch])
        for name, values in sorted(kernels.items()):
            label = "{} {}".format(arch, name)
            threads = bounds.get(name, DEFAULT_BLOCK_THREADS)
            if values["REG"] * threads > REGISTERS_PER_SM:
                problems.append("{}: {} registers x {} threads > 64K".format(label, values["REG"], threads))
            if values["SHARED"] > STATIC_SHARED_LIMIT:
                problems.append("{}: {} bytes of static shared memory > 48 KB".format(label, values["SHARED"]))
            local = max(values["STACK"], values["LOCAL"])
            if local:
                problems.append("{}: {} bytes of local memory (stack {}, local {})".format(
                    label, local, values["STACK"], values["LOCAL"]))
    assert not problems, "\n".join(problems)


#: SOFT's GEMM-tiled Newton-Raphson products (softKernelAttention/softNewtonGemm.cuh): 128 threads and 4 CTAs per SM
#: declared in __launch_bounds__, so at most 128 registers; 27 KB of static shared memory per CTA
SOFT_GEMM_NEWTON = "softNewtonGemmMmaKernel"
SOFT_GEMM_THREADS, SOFT_GEMM_MIN_BLOCKS = 128, 4


def test_soft_gemm_newton_kernels_have_their_instructions_and_budget(kernels_build, cuobjdump):
    """Both products (T = A X, and X <- 2X - X T in the epilogue) run HMMA on ldmatrix (LDSM) fragments of operands
    staged by cp.async (LDGSTS) in the sm_87 and sm_90 SASS; on sm_80/87/90 each fits 4 CTAs of 128 threads per SM
    in registers, keeps its shared memory within 48 KB (4 CTAs: 109 KB, within every sm_80+ SM's 164-228 KB) and has
    no local memory (0 spill bytes)."""
    library = kernels_build["library"]
    for arch in ("sm_87", "sm_90"):
        functions = {name: body for name, body in sass_functions(cuobjdump, library, arch).items()
                     if SOFT_GEMM_NEWTON in name}
        assert len(functions) == 2, (arch, sorted(functions))
        for name, body in functions.items():
            for opcode in ("HMMA", "LDGSTS", "LDSM"):
                assert re.search(r"\b" + opcode + r"\b", body), (arch, name, opcode)
    usage = resource_usage(cuobjdump, library)
    for arch in BUDGET_ARCHS:
        kernels = {name: values for name, values in usage[arch].items() if SOFT_GEMM_NEWTON in name}
        assert len(kernels) == 2, (arch, sorted(usage[arch]))
        for name, values in kernels.items():
            assert values["REG"] * SOFT_GEMM_THREADS * SOFT_GEMM_MIN_BLOCKS <= REGISTERS_PER_SM, (arch, name, values)
            assert values["SHARED"] <= STATIC_SHARED_LIMIT, (arch, name, values)
            assert values["STACK"] == 0 and values["LOCAL"] == 0, (arch, name, values)
        assert launch_bounds(cuobjdump, library, arch).get(next(iter(kernels))) == SOFT_GEMM_THREADS
