"""Helpers shared by the plugin tests (tool discovery, CMake builds, the cached compile of the plugin glue per
TensorRT header set). No torch: these run under Python 3.8 too."""
import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor

from edgeattn._subprocess import run_command

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGINS_DIR = os.path.join(REPO_ROOT, "plugins")
TESTS_PLUGINS_DIR = os.path.dirname(os.path.abspath(__file__))
# The rule of SHARED_DIR in tests/conftest.py (a conftest cannot be imported by name from here).
SHARED_DIR = os.environ.get("EDGEATTN_SHARED_DIR", os.path.join(os.path.dirname(REPO_ROOT), "shared"))
CI_ARCHS = "75;80;87;90"
BUILD_TIMEOUT_S = 1800  # a guard against a hung nvcc: the four-arch build takes 5-10 min on a loaded 2-core machine
COMPILE_TIMEOUT_S = 300

#: TensorRT header sets the glue is compiled against: (label, variable that overrides the default directory,
#: what runs it). The default is <shared>/third_party/tensorrt-headers/<label>/include, outside the repository.
TRT_HEADER_SETS = (
    ("8.0", "EDGEATTN_TRT_INCLUDE_8_0", "JetPack 4.6"),
    ("8.2", "EDGEATTN_TRT_INCLUDE_8_2", "JetPack 4.6.1+"),
    ("10.3", "EDGEATTN_TRT_INCLUDE_10_3", "JetPack 6.1/6.2"),
    ("11.1", "EDGEATTN_TRT_INCLUDE_11_1", "desktop TensorRT 11; TensorRT-RTX"),
)


@contextlib.contextmanager
def build_lock(cache_dir):
    """Hold an exclusive lock on ``<cache_dir>.lock`` while a cached build is looked up, built and published: a
    concurrent pytest-xdist worker or Python 3.8 pass waits and then reuses the build instead of compiling the
    same digest again and replacing a directory that is in use."""
    import fcntl

    with open(cache_dir + ".lock", "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


#: Debian 12's CUDA 11.8 nvcc (the JetPack 5 compiler line) as .ci/install_cuda_11_8.sh leaves it
CUDA_11_8_NVCC = "/opt/edgeattn-cuda-11.8/usr/lib/nvidia-cuda-toolkit/bin/nvcc"


def find_nvcc_11_8():
    """$EDGEATTN_NVCC_11_8, else the CI install's CUDA 11.8 nvcc, or None."""
    candidate = os.environ.get("EDGEATTN_NVCC_11_8") or CUDA_11_8_NVCC
    return candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None


def find_nvcc():
    """nvcc from $CUDA_HOME, PATH or /usr/local/cuda, or None."""
    candidates = []
    if os.environ.get("CUDA_HOME"):
        candidates.append(os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc"))
    on_path = shutil.which("nvcc")
    if on_path:
        candidates.append(on_path)
    candidates.append("/usr/local/cuda/bin/nvcc")
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def find_cxx():
    for name in ("c++", "g++", "clang++"):
        path = shutil.which(name)
        if path:
            return path
    return None


def cuda_include_dir(nvcc):
    """The toolkit's include directory next to nvcc (follows a wrapper script's target when it is a symlink)."""
    for base in (os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "/usr/local/cuda"):
        include = os.path.join(base, "include")
        if os.path.isfile(os.path.join(include, "cuda_runtime_api.h")):
            return include
    return None


KERNEL_BUILD_INPUTS = (".cu", ".cuh", ".cmake", ".map", "CMakeLists.txt", "kernels.h", "kernelStatus.h",
                       "kernelPath.h")
_TOOL_VERSIONS = {}


def tool_version(tool):
    """``tool --version`` (once per process): part of every cache key of what the tool produced."""
    if tool not in _TOOL_VERSIONS:
        _TOOL_VERSIONS[tool] = run_command([tool, "--version"], timeout=60).stdout
    return _TOOL_VERSIONS[tool]


def kernel_sources_digest(nvcc, *extra):
    """Hash of everything an nvcc compile of the kernels depends on: the plugins/ kernel sources and headers, the
    nvcc version, and ``extra`` (archs, defines, the source compiled)."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(PLUGINS_DIR):
        dirs[:] = sorted(d for d in dirs if d != "build")
        for name in sorted(files):
            if not name.endswith(KERNEL_BUILD_INPUTS):
                continue  # the plugin glue, READMEs and tools do not change the kernels
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, PLUGINS_DIR).encode())
            with open(path, "rb") as handle:
                digest.update(handle.read())
    digest.update(tool_version(nvcc).encode())
    digest.update(json.dumps(extra).encode())
    return digest.hexdigest()[:16]


def cached_text(kind, digest, produce):
    """What ``produce()`` returns (the text a deterministic tool run gave), kept in the temp dir under ``digest``
    (the hash of all its inputs), so other tests, the other pytest-xdist worker, the Python 3.8 pass and later
    runs reuse it instead of running nvcc or cuobjdump again. ``produce`` asserts on failure: a failure is never
    cached. EDGEATTN_REBUILD_KERNELS=1 forces a fresh run."""
    path = os.path.join(tempfile.gettempdir(), "edgeattn-{}-{}.txt".format(kind, digest))
    with build_lock(path):
        if os.environ.get("EDGEATTN_REBUILD_KERNELS") != "1" and os.path.isfile(path):
            with open(path) as handle:
                return handle.read()
        text = produce()
        with open(path + ".tmp", "w") as handle:
            handle.write(text)
        os.replace(path + ".tmp", path)
        return text


def cmake_build(source_dir, build_dir, defines, target=None, jobs=2, timeout=BUILD_TIMEOUT_S, nvcc=None):
    """Configure and build with CMake (CUDA compiler ``nvcc``, default find_nvcc()); returns (configure_result,
    build_result)."""
    cmake = shutil.which("cmake")
    args = [cmake, "-S", source_dir, "-B", build_dir]
    args += ["-D{}={}".format(key, value) for key, value in sorted(defines.items())]
    nvcc = nvcc or find_nvcc()
    if nvcc:
        args.append("-DCMAKE_CUDA_COMPILER={}".format(nvcc))
    configured = run_command(args, timeout=timeout)
    if configured.returncode != 0:
        return configured, None
    build_args = [cmake, "--build", build_dir]
    if target:
        build_args += ["--target", target]
    build_args += ["--", "-j{}".format(jobs)]
    return configured, run_command(build_args, timeout=timeout)




# ---- TensorRT headers and the plugin glue --------------------------------------------------------------------


def trt_include_dir(label):
    """(directory, where it came from) of the TensorRT ``label`` headers: $EDGEATTN_TRT_INCLUDE_<label>, else
    the shared third-party copy next to the repository."""
    variable = dict((entry[0], entry[1]) for entry in TRT_HEADER_SETS)[label]
    explicit = os.environ.get(variable)
    if explicit:
        return explicit, variable
    return os.path.join(SHARED_DIR, "third_party", "tensorrt-headers", label, "include"), "default"


def header_version(include_dir):
    """major.minor.patch.build from NvInferVersion.h (10.x and later spell the numbers through TRT_*_ENTERPRISE)."""
    with open(os.path.join(include_dir, "NvInferVersion.h")) as handle:
        text = handle.read()

    def define(name):
        value = re.search(r"#define {}\s+(\w+)".format(name), text).group(1)
        return value if value.isdigit() else define(value)

    return "{}.{}.{}.{}".format(define("NV_TENSORRT_MAJOR"), define("NV_TENSORRT_MINOR"),
                                define("NV_TENSORRT_PATCH"), define("NV_TENSORRT_BUILD"))


def glue_sources():
    """Every C++ source of the plugin glue except the registration unit (compiled once per variant)."""
    sources = []
    for root, dirs, files in os.walk(PLUGINS_DIR):
        dirs[:] = sorted(d for d in dirs if d not in ("build", "cmake", "tools"))
        for name in sorted(files):
            if name.endswith(".cpp") and name != "pluginRegistration.cpp":
                sources.append(os.path.join(root, name))
    return sources


GLUE_INPUTS = (".cpp", ".h")
REGISTRATION_VARIANTS = ("NONE", "STATIC", "DYNAMIC")


class CompileResult(object):
    """What one compiler call said; the same fields as a CommandResult, also when it comes from the cache."""

    def __init__(self, returncode, output):
        self.returncode = returncode
        self.output = output


def _glue_jobs(major_minor):
    """(object name, source, extra flags) of every compile the glue tests need."""
    jobs = [(os.path.basename(source) + ".o", source, []) for source in glue_sources()]
    registration = os.path.join(PLUGINS_DIR, "common", "pluginRegistration.cpp")
    for variant in REGISTRATION_VARIANTS:
        if variant == "DYNAMIC" and major_minor < (8, 6):
            continue  # IPluginRegistry::loadLibrary arrived in 8.6
        jobs.append(("registration_{}.o".format(variant), registration,
                     ["-DEDGEATTN_REGISTRATION_" + variant] if variant != "NONE" else []))
    jobs.append(("glue_harness.o", os.path.join(TESTS_PLUGINS_DIR, "glue_harness.cpp"), []))
    # The fakes are test scaffolding, not glue: no -Werror, TensorRT's deprecations allowed, and every symbol
    # visible (TENSORRTAPI is empty outside TensorRT's own build, and the fake libnvinfer must export its API).
    loose = ["-Wno-error", "-Wno-deprecated-declarations", "-fvisibility=default"]
    jobs.append(("fake_nvinfer.o", os.path.join(TESTS_PLUGINS_DIR, "fake_nvinfer.cpp"), loose))
    if major_minor >= (8, 6):
        jobs.append(("load_library_emulator.o", os.path.join(TESTS_PLUGINS_DIR, "fake_nvinfer.cpp"),
                     loose + ["-DEDGEATTN_EMULATE_LOAD_LIBRARY"]))
    return jobs


def _glue_digest(cxx, flags, jobs, include, cuda_include):
    """Hash of everything the glue objects depend on: plugin sources and headers, the test sources, the TensorRT
    headers, the CUDA runtime header, the compiler and the flags."""
    digest = hashlib.sha256()
    digest.update(run_command([cxx, "--version"], timeout=60).stdout.encode())
    digest.update(json.dumps([flags, [(name, os.path.relpath(source, REPO_ROOT), extra)
                                      for name, source, extra in jobs]]).encode())
    trees = [(PLUGINS_DIR, GLUE_INPUTS), (TESTS_PLUGINS_DIR, (".cpp", ".h")), (include, (".h",))]
    for top, suffixes in trees:
        for root, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d not in ("build", "emulation"))
            for name in sorted(files):
                if name.endswith(suffixes):
                    path = os.path.join(root, name)
                    digest.update(os.path.relpath(path, top).encode())
                    with open(path, "rb") as handle:
                        digest.update(handle.read())
    with open(os.path.join(cuda_include, "cuda_runtime_api.h"), "rb") as handle:
        digest.update(handle.read())
    return digest.hexdigest()[:16]


def glue_build(label, include, cxx, cuda_include):
    """Compile the plugin glue, the registration variants, the harness and the fakes against TensorRT headers.

    Returns {"dir", "flags", "objects": name -> path, "results": name -> CompileResult, "cached"}. A build whose
    every unit compiled is kept in the temp dir under a hash of all its inputs (see _glue_digest), so the
    Python 3.8 pass of the suite and later runs reuse it (EDGEATTN_REBUILD_GLUE=1 forces a rebuild); a failed
    build is never cached.
    """
    version = header_version(include)
    major_minor = tuple(int(part) for part in version.split(".")[:2])
    flags = ["-std=c++14", "-O1", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror",
             "-I" + PLUGINS_DIR, "-I" + os.path.join(PLUGINS_DIR, "include"), "-isystem", include,
             "-isystem", cuda_include, '-DEDGEATTN_VERSION_STRING="test"']
    jobs = _glue_jobs(major_minor)
    cache_dir = os.path.join(tempfile.gettempdir(), "edgeattn-glue-{}-{}".format(
        label, _glue_digest(cxx, flags, jobs, include, cuda_include)))
    marker = os.path.join(cache_dir, "BUILD_OK.json")

    def artefacts(directory, results, cached):
        return {"dir": directory, "flags": flags, "cached": cached, "results": results,
                "objects": {name: os.path.join(directory, name) for name, _, _ in jobs}}

    with build_lock(cache_dir):  # one build per digest across pytest-xdist workers and the 3.8 pass
        if os.environ.get("EDGEATTN_REBUILD_GLUE") != "1" and os.path.isfile(marker):
            with open(marker) as handle:
                stored = json.load(handle)
            return artefacts(cache_dir, {name: CompileResult(0, output) for name, output in stored.items()}, True)

        staging = tempfile.mkdtemp(prefix="edgeattn-glue-{}-stage-".format(label))

        def one(job):
            name, source, extra = job
            result = run_command([cxx] + flags + extra + ["-c", source, "-o", os.path.join(staging, name)],
                                 timeout=COMPILE_TIMEOUT_S)
            return name, CompileResult(result.returncode, result.output)

        with ThreadPoolExecutor(max_workers=2) as pool:
            results = dict(pool.map(one, jobs))
        if any(result.returncode != 0 for result in results.values()):
            return artefacts(staging, results, False)
        with open(os.path.join(staging, "BUILD_OK.json"), "w") as handle:
            json.dump({name: result.output for name, result in results.items()}, handle)
        shutil.rmtree(cache_dir, ignore_errors=True)
        try:
            os.rename(staging, cache_dir)
        except OSError:  # another worker or session published the same build first
            shutil.rmtree(staging, ignore_errors=True)
        return artefacts(cache_dir, results, False)


def glue_objects(objects):
    """The objects of a glue_build that every plugin library links (not the registration variants or tests)."""
    return [path for name, path in sorted(objects.items())
            if not name.startswith(("registration_", "glue_harness", "fake_nvinfer", "load_library_emulator"))]


def link_dynamic_plugin_library(cxx, objects, trt_major, kernels_library, output):
    """Link libedgeattn_plugins_dynamic.so (the IPluginRegistry::loadLibrary variant) from glue_build objects and
    the kernels library, as plugins/CMakeLists.txt does: no libnvinfer, only the loadLibrary entry points."""
    map_name = "edgeattn_plugins_dynamic.map" if trt_major >= 10 else "edgeattn_plugins_dynamic_trt8.map"
    result = run_command([cxx, "-shared", "-o", output] + glue_objects(objects) + [objects["registration_DYNAMIC.o"],
                         kernels_library, "-Wl,--version-script=" + os.path.join(PLUGINS_DIR, "exports", map_name),
                         "-Wl,--no-undefined", "-Wl,-rpath," + os.path.dirname(kernels_library)],
                         timeout=COMPILE_TIMEOUT_S)
    assert result.returncode == 0, "link of {} failed:\n{}".format(output, result.output[-3000:])
    return output
