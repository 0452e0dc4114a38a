"""Build the CUDA kernels of plugins/ for the CPU emulation (tests only): libedgeattn_kernels_emulated.so.

The kernel sources the CMake project builds into libedgeattn_kernels.so (the ``KERNELS`` lists of
``edgeattn_add_op``) and the headers they include are copied into a temporary tree, where the constructs C++
cannot express are rewritten (the real sources are never edited):

  kernel<<<grid, block, smem, stream>>>(args);  ->  ::cuda_emu::launch("kernel", __PRETTY_FUNCTION__, &kernel,
                                                        ::cuda_emu::LaunchConfig(grid, block, smem, stream), args);
  extern __shared__ T name[];                   ->  T* const name = ::cuda_emu::dynamicShared<T>();
  __shared__ T name[N];                         ->  per-block storage from ::cuda_emu::staticShared
  *reinterpret_cast<float4 const*>(p)           ->  ::cuda_emu::vectorRef(...)  (16-byte alignment checked)
  __launch_bounds__(n) kernel(...) {            ->  kernel(...) { EDGEATTN_EMU_LAUNCH_BOUNDS(n)

Line numbers are preserved and ``#line`` names the original file, so compiler messages and barrier sites point
at plugins/. The copies are compiled as C++17 with g++ (``-include cuda_emulation.h``, stand-in CUDA headers
from ``include/``) together with the emulator runtime and ``selftest_kernels.cu`` into one shared library that
exports the C ABI of include/edgeattn/kernels.h plus the ``edgeattn_emu_*`` test hooks.

A build may also apply ``mutations`` (relative path under plugins/, old text, new text) to the copies: the tests
build a variant with a planted fragment-layout bug that the kernel tests must catch. The path
``emulation/cuda_emulation.cpp`` plants a bug in the emulator runtime instead (its self-tests must catch it).

The kernel sources are compiled with ``-fsanitize=thread`` but linked without its runtime: the emulator defines the
``__tsan_read*/__tsan_write*`` hooks g++ calls before each memory access and counts the bytes that fall inside the
global-memory regions a caller watches (``edgeattn_emu_watch_global``), per launch.

Usage: ``python tests/plugins/emulation/build_emulated.py [--output DIR]`` (prints the library path).
Python 3.8 compatible; external tools run through edgeattn._subprocess.run_command.
"""
import argparse
import concurrent.futures
import hashlib
import os
import re
import shutil
import sys
import tempfile

EMULATION_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(EMULATION_DIR)))
PLUGINS_DIR = os.path.join(REPO_ROOT, "plugins")
LIBRARY_NAME = "libedgeattn_kernels_emulated.so"
HEADER = os.path.join(EMULATION_DIR, "cuda_emulation.h")
RUNTIME = os.path.join(EMULATION_DIR, "cuda_emulation.cpp")
SELFTEST = os.path.join(EMULATION_DIR, "selftest_kernels.cu")
SHIM_DIR = os.path.join(EMULATION_DIR, "include")
COPIED_SUFFIXES = (".cu", ".cuh", ".h")
#: the mutation path that plants a bug in the emulator runtime itself (its tests must catch it)
EMULATOR_MUTATION_PATH = "emulation/cuda_emulation.cpp"
CXX_FLAGS = ["-std=c++17", "-O1", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wno-unused-function",
             "-Wno-unused-variable", "-Wno-unknown-pragmas"]
# The kernel sources (not the emulator runtime) are instrumented: g++ calls the emulator's __tsan_read/write hooks
# before every memory access it keeps, which counts global-memory traffic (no ThreadSanitizer runtime is linked).
TRAFFIC_FLAGS = ["-fsanitize=thread", "--param=tsan-instrument-func-entry-exit=0"]
BUILD_TIMEOUT_S = 600

for _path in (REPO_ROOT, os.path.dirname(EMULATION_DIR)):
    if _path not in sys.path:
        sys.path.insert(0, _path)
from edgeattn._subprocess import run_command  # noqa: E402
from plugin_test_utils import build_lock  # noqa: E402


class RewriteError(Exception):
    """A construct of the CUDA source that the rewriter cannot handle (the build must not guess)."""


def find_compiler():
    """g++ (or c++) from $CXX or PATH, or None."""
    for candidate in (os.environ.get("CXX"), "g++", "c++"):
        if candidate:
            path = shutil.which(candidate)
            if path:
                return path
    return None


def host_flags():
    """-mfma where the build machine has FMA (x86-64): fmaf becomes one instruction instead of a libm call, which
    makes the FMA-bound kernels several times faster, and a * b + c contracts to an FMA like nvcc's default.
    (aarch64 has FMA in its baseline.)"""
    try:
        with open("/proc/cpuinfo") as handle:
            flags = set(handle.read().split())
    except OSError:
        return []
    return ["-mfma"] if os.uname()[4] == "x86_64" and "fma" in flags else []


def kernel_sources():
    """Paths (relative to plugins/) of the .cu files the CMake project compiles into the kernels library."""
    sources = []
    for root, dirs, files in os.walk(PLUGINS_DIR):
        dirs[:] = sorted(d for d in dirs if d not in ("build", "cmake"))
        for name in sorted(files):
            if name not in ("CMakeLists.txt",):
                continue
            with open(os.path.join(root, name)) as handle:
                text = handle.read()
            for block in re.findall(r"edgeattn_add_op\((.*?)\)", text, re.S):
                match = re.search(r"KERNELS\s+(.*?)(?:\bPLUGINS\b|$)", block, re.S)
                if not match:
                    continue
                for token in match.group(1).split():
                    if token.endswith(".cu"):
                        sources.append(os.path.relpath(os.path.join(root, token), PLUGINS_DIR))
    if not sources:
        raise RewriteError("no KERNELS sources found in the CMake lists under {}".format(PLUGINS_DIR))
    return sorted(set(sources))


def copied_files():
    """Every .cu/.cuh/.h under plugins/ (kernels and the headers they may include), relative to plugins/."""
    files = []
    for root, dirs, names in os.walk(PLUGINS_DIR):
        dirs[:] = sorted(d for d in dirs if d not in ("build", "cmake"))
        for name in sorted(names):
            if name.endswith(COPIED_SUFFIXES):
                files.append(os.path.relpath(os.path.join(root, name), PLUGINS_DIR))
    return files


# ---- rewriting ----------------------------------------------------------------------------------------------------
def _matching(text, start, open_char, close_char):
    """Index of the bracket closing the one at ``start`` (which must be ``open_char``)."""
    depth = 0
    for index in range(start, len(text)):
        char = text[index]
        if char == open_char:
            depth += 1
        elif char == close_char:
            depth -= 1
            if depth == 0:
                return index
    raise RewriteError("unbalanced {}{} starting at offset {}".format(open_char, close_char, start))


def _same_lines(original, replacement):
    """``replacement`` padded with newlines so the rewritten file keeps the original line numbers."""
    missing = original.count("\n") - replacement.count("\n")
    if missing < 0:
        raise RewriteError("a rewrite added lines: {!r}".format(replacement))
    return replacement + "\n" * missing


def _kernel_expression_start(text, end):
    """Start of the kernel expression (``name`` or ``ns::name<args>``) that ends right before ``end``."""
    index = end
    while index > 0 and text[index - 1].isspace():
        index -= 1
    if index > 0 and text[index - 1] == ">":
        depth = 0
        while index > 0:
            index -= 1
            if text[index] == ">":
                depth += 1
            elif text[index] == "<":
                depth -= 1
                if depth == 0:
                    break
        else:
            raise RewriteError("unbalanced template arguments before <<< at offset {}".format(end))
    while index > 0 and (text[index - 1].isalnum() or text[index - 1] in "_:"):
        index -= 1
    return index


def rewrite_launches(text):
    """``kernel<<<config>>>(args);`` -> ``::cuda_emu::launch("kernel", __PRETTY_FUNCTION__, &kernel,
    LaunchConfig(config), args);`` (the caller's signature names the template arguments in the launch log)."""
    count = 0
    while True:
        open_at = text.find("<<<")
        if open_at < 0:
            return text, count
        close_at = text.find(">>>", open_at)
        if close_at < 0:
            raise RewriteError("<<< without >>> at offset {}".format(open_at))
        start = _kernel_expression_start(text, open_at)
        kernel = text[start:open_at].strip()
        if not kernel or not re.match(r"[A-Za-z_]", kernel):
            raise RewriteError("cannot find the kernel before <<< at offset {}".format(open_at))
        config = text[open_at + 3:close_at].strip()
        paren = close_at + 3
        while text[paren].isspace():
            paren += 1
        if text[paren] != "(":
            raise RewriteError("launch of {} without an argument list".format(kernel))
        paren_end = _matching(text, paren, "(", ")")
        arguments = text[paren + 1:paren_end].strip()
        name = " ".join(kernel.split())
        replacement = '::cuda_emu::launch("{}", __PRETTY_FUNCTION__, &{}, ::cuda_emu::LaunchConfig({}){})'.format(
            name, name, " ".join(config.split()), ", " + " ".join(arguments.split()) if arguments else "")
        text = text[:start] + _same_lines(text[start:paren_end + 1], replacement) + text[paren_end + 1:]
        count += 1


DYNAMIC_SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([\w:]+)\s+(\w+)\s*\[\s*\]\s*;")
STATIC_SHARED = re.compile(r"__shared__\s+([\w:<>, ]+?)\s+(\w+)\s*((?:\[[^\];]*\])*)\s*;")


def rewrite_shared(text):
    text, dynamic = DYNAMIC_SHARED.subn(
        lambda m: "{0}* const {1} = ::cuda_emu::dynamicShared<{0}>();".format(m.group(1), m.group(2)), text)

    def static(match):
        element, name, dims = match.group(1).strip(), match.group(2), match.group(3)
        array_type = "{}{}".format(element, dims) if dims else element
        return ("static char {1}EmuKey_; {0} (&{1}){2} = ::cuda_emu::staticShared<{0}{2}>(&{1}EmuKey_);".format(
            element, name, dims) if dims else
            "static char {1}EmuKey_; {0}& {1} = ::cuda_emu::staticShared<{2}>(&{1}EmuKey_);".format(
                element, name, array_type))

    text, static_count = STATIC_SHARED.subn(static, text)
    return text, dynamic + static_count


VECTOR_DEREF = re.compile(r"\*\s*reinterpret_cast<\s*((?:const\s+)?(?:float4|float2|int4)(?:\s+const)?\s*\*)\s*>\s*\(")


def rewrite_vector_accesses(text):
    count = 0
    while True:
        match = VECTOR_DEREF.search(text)
        if not match:
            return text, count
        paren = match.end() - 1
        paren_end = _matching(text, paren, "(", ")")
        pointer_type = " ".join(match.group(1).split())
        replacement = "::cuda_emu::vectorRef(reinterpret_cast<{}>({}))".format(
            pointer_type, text[paren + 1:paren_end])
        text = text[:match.start()] + _same_lines(text[match.start():paren_end + 1], replacement) + \
            text[paren_end + 1:]
        count += 1


def rewrite_launch_bounds(text):
    count = 0
    while True:
        at = text.find("__launch_bounds__(")
        if at < 0:
            return text, count
        paren = at + len("__launch_bounds__")
        paren_end = _matching(text, paren, "(", ")")
        bounds = " ".join(text[paren + 1:paren_end].split())
        signature = re.compile(r"\s*[\w:]+\s*\(").match(text, paren_end + 1)
        if not signature:
            raise RewriteError("__launch_bounds__ not followed by a kernel name at offset {}".format(at))
        params_end = _matching(text, signature.end() - 1, "(", ")")
        brace = re.compile(r"\s*\{").match(text, params_end + 1)
        if not brace:
            raise RewriteError("kernel with __launch_bounds__ has no body right after its parameters")
        body_at = brace.end()
        text = (text[:at] + text[paren_end + 1:body_at] + " EDGEATTN_EMU_LAUNCH_BOUNDS({})".format(bounds)
                + text[body_at:])
        count += 1


def rewrite_source(text, label):
    """The emulation version of one CUDA source; ``label`` is the original path for ``#line``."""
    text, launches = rewrite_launches(text)
    text, shared = rewrite_shared(text)
    text, vectors = rewrite_vector_accesses(text)
    text, bounds = rewrite_launch_bounds(text)
    for leftover in ("<<<", "__shared__"):
        if leftover in text:
            raise RewriteError("{}: {} left after rewriting".format(label, leftover))
    return '#line 1 "{}"\n{}'.format(label, text), {
        "launches": launches, "shared": shared, "vector_accesses": vectors, "launch_bounds": bounds}


def apply_mutations(relative, text, mutations):
    """``text`` of plugins/``relative`` with each matching (path, old, new) of ``mutations`` applied once."""
    for path, old, new in mutations:
        if path != relative:
            continue
        if text.count(old) != 1:
            raise RewriteError("mutation of {}: {!r} occurs {} times, not once".format(path, old, text.count(old)))
        text = text.replace(old, new)
    return text


def write_rewritten_tree(destination, mutations=()):
    """Rewritten copies of plugins/ sources under ``destination``; returns {relative path: rewrite counts}."""
    counts = {}
    files = copied_files()
    for path, _, _ in mutations:
        if path not in files and path != EMULATOR_MUTATION_PATH:
            raise RewriteError("mutation of {}: no such kernel source under plugins/".format(path))
    for relative in files:
        with open(os.path.join(PLUGINS_DIR, relative)) as handle:
            text = apply_mutations(relative, handle.read(), mutations)
        rewritten, counts[relative] = rewrite_source(text, "plugins/" + relative)
        target = os.path.join(destination, relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as handle:
            handle.write(rewritten)
    with open(SELFTEST) as handle:
        rewritten, counts["selftest"] = rewrite_source(handle.read(), "tests/plugins/emulation/selftest_kernels.cu")
    with open(os.path.join(destination, "emulation_selftest.cu"), "w") as handle:
        handle.write(rewritten)
    return counts


# ---- build --------------------------------------------------------------------------------------------------------
def source_digest(compiler, mutations=()):
    """Hash of every input of the build: plugins/ sources, the emulator, this script, the compiler version, and
    the mutations."""
    digest = hashlib.sha256()
    for mutation in mutations:
        digest.update(repr(tuple(mutation)).encode())
    inputs = [os.path.join(PLUGINS_DIR, relative) for relative in copied_files()]
    inputs += [os.path.join(PLUGINS_DIR, relative) for relative in ("CMakeLists.txt",)]
    for root, dirs, files in os.walk(PLUGINS_DIR):
        dirs[:] = sorted(d for d in dirs if d not in ("build", "cmake"))
        inputs += [os.path.join(root, name) for name in sorted(files) if name == "CMakeLists.txt"]
    for root, dirs, files in os.walk(EMULATION_DIR):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        inputs += [os.path.join(root, name) for name in sorted(files) if name.endswith((".h", ".cpp", ".cu", ".py"))]
    for path in sorted(set(inputs)):
        digest.update(os.path.relpath(path, REPO_ROOT).encode())
        with open(path, "rb") as handle:
            digest.update(handle.read())
    digest.update(run_command([compiler, "--version"], timeout=60).stdout.encode())
    digest.update(" ".join(host_flags()).encode())
    return digest.hexdigest()[:16]


def build(output_dir, compiler=None, jobs=2, keep_sources=False, mutations=()):
    """Compile the emulated kernels library into ``output_dir``; returns its path. Raises RuntimeError."""
    compiler = compiler or find_compiler()
    if compiler is None:
        raise RuntimeError("no C++ compiler (g++/c++) found")
    work = tempfile.mkdtemp(prefix="edgeattn-emu-src-")
    try:
        tree = os.path.join(work, "plugins")
        write_rewritten_tree(tree, mutations)
        common = [compiler] + CXX_FLAGS + host_flags() + [
            "-I", SHIM_DIR, "-iquote", EMULATION_DIR, "-I", tree, "-I", os.path.join(tree, "include"), "-include", HEADER,
            '-DEDGEATTN_VERSION_STRING="emulated"', '-DEDGEATTN_CUDA_ARCHS_STRING="cpu-emulation"']
        runtime = RUNTIME
        runtime_mutations = [m for m in mutations if m[0] == EMULATOR_MUTATION_PATH]
        if runtime_mutations:
            with open(RUNTIME) as handle:
                text = apply_mutations(EMULATOR_MUTATION_PATH, handle.read(), runtime_mutations)
            runtime = os.path.join(work, "cuda_emulation.cpp")
            with open(runtime, "w") as handle:
                handle.write('#line 1 "{}"\n{}'.format(RUNTIME, text))
        units = [(os.path.join(tree, relative), True) for relative in kernel_sources()]
        units += [(os.path.join(tree, "emulation_selftest.cu"), True), (runtime, False)]
        objects = []
        commands = []
        for index, (source, is_cuda) in enumerate(units):
            obj = os.path.join(work, "unit{}.o".format(index))
            objects.append(obj)
            language = ["-x", "c++"] + TRAFFIC_FLAGS if is_cuda else []
            commands.append(common + ["-c"] + language + [source, "-o", obj])

        def compile_one(args):
            return run_command(args, timeout=BUILD_TIMEOUT_S)

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = list(pool.map(compile_one, commands))
        for args, result in zip(commands, results):
            if result.returncode != 0:
                raise RuntimeError("compiling {} failed:\n{}".format(args[-3], result.output[-6000:]))
        os.makedirs(output_dir, exist_ok=True)
        library = os.path.join(output_dir, LIBRARY_NAME)
        linked = run_command([compiler, "-shared", "-o", library] + objects + ["-Wl,--no-undefined"],
                             timeout=BUILD_TIMEOUT_S)
        if linked.returncode != 0:
            raise RuntimeError("linking {} failed:\n{}".format(library, linked.output[-6000:]))
        if keep_sources:
            shutil.copytree(tree, os.path.join(output_dir, "rewritten"))
        return library
    finally:
        shutil.rmtree(work, ignore_errors=True)


def cached_build(compiler=None, mutations=()):
    """The library, built once per input digest into $TMPDIR/edgeattn-kernels-emulated-<digest>/
    (EDGEATTN_REBUILD_KERNELS=1 forces a rebuild). Safe against a concurrent build of the same digest."""
    compiler = compiler or find_compiler()
    if compiler is None:
        raise RuntimeError("no C++ compiler (g++/c++) found")
    cache_dir = os.path.join(tempfile.gettempdir(),
                             "edgeattn-kernels-emulated-" + source_digest(compiler, mutations))
    library = os.path.join(cache_dir, LIBRARY_NAME)
    marker = os.path.join(cache_dir, "BUILD_OK")
    with build_lock(cache_dir):  # one build per digest across pytest-xdist workers and the 3.8 pass
        if os.environ.get("EDGEATTN_REBUILD_KERNELS") == "1" or not os.path.isfile(marker):
            staging = tempfile.mkdtemp(prefix="edgeattn-kernels-emulated-stage-")
            try:
                build(staging, compiler, mutations=mutations)
                with open(os.path.join(staging, "BUILD_OK"), "w") as handle:
                    handle.write("ok\n")
                shutil.rmtree(cache_dir, ignore_errors=True)
                try:
                    os.rename(staging, cache_dir)
                except OSError:  # another session published the same build first
                    pass
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return library


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", help="directory for the library (default: the cached build in $TMPDIR)")
    parser.add_argument("--keep-sources", action="store_true", help="also write the rewritten sources there")
    args = parser.parse_args(argv)
    try:
        library = build(args.output, keep_sources=args.keep_sources) if args.output else cached_build()
    except (RuntimeError, RewriteError) as error:
        sys.stderr.write("build_emulated: error: {}\n".format(error))
        return 2
    print(library)
    return 0


if __name__ == "__main__":
    sys.exit(main())
