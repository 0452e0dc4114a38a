"""Helpers shared by the plugin tests (tool discovery, CMake builds). No torch: these run under Python 3.8 too."""
import os
import shutil

from edgeattn._subprocess import run_command

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGINS_DIR = os.path.join(REPO_ROOT, "plugins")
CI_ARCHS = "75;87;90"
BUILD_TIMEOUT_S = 600


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


def cmake_build(source_dir, build_dir, defines, target=None, jobs=2, timeout=BUILD_TIMEOUT_S):
    """Configure and build with CMake; returns (configure_result, build_result)."""
    cmake = shutil.which("cmake")
    args = [cmake, "-S", source_dir, "-B", build_dir]
    args += ["-D{}={}".format(key, value) for key, value in sorted(defines.items())]
    nvcc = find_nvcc()
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


