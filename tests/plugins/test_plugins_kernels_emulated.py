"""The CUDA kernels, run on the CPU by the CUDA emulation (tests/plugins/emulation/), against the PyTorch reference
operators. No GPU needed: this is what CI knows about the kernels' logic.

The kernel sources are compiled by g++ with the emulation header (build_emulated.py; cached per source digest) into
a library with the same C ABI as libedgeattn_kernels.so, driven through edgeattn.plugins.kernels_abi with host
buffers. Every launch runs twice, with blocks, warps and threads scheduled in index order and in reverse order (each
warp running ahead of the others as far as its barriers allow), and both results must be bitwise identical (a
missing __syncthreads, a warp racing ahead, or an inter-block dependency changes one of them).
Buffers are guarded: inputs sit between NaN guards (an out-of-bounds read poisons the output), outputs start as NaN
(every element must be written) with sentinel guards, the workspace starts as NaN (no reliance on zeroed
memory) and inputs must come back unchanged. The emulator turns divergent barriers, deadlocks, misaligned float4
accesses, shared-memory overruns, wild pointers and illegal launch configurations into a launch error.

Kernel paths: the emulated device's compute capability is selectable (edgeattn_emu_set_compute_capability), so the
blockify cases run on the scalar path (sm_53, Jetson Nano) and the tensor-core path (sm_87, Orin: warp-collective
mma.sync/ldmatrix executed by the PTX ISA's fragment tables); a variant with a planted fragment-layout bug must fail.

Accuracy criteria (those of test_plugins_kernels_gpu.py): FP32 max |kernel - ref64| <= 1e-4 * max |ref64|;
FP16 max |kernel - ref64| <= 2 * max |torch_fp16 - ref64| + 1e-6 * max |ref64|, ref64 the reference in FP64 on the
same (FP16-rounded) inputs and torch_fp16 PyTorch's own answer on the FP16 tensors.

What this does not prove: timing, occupancy, real concurrency between blocks, warps or lanes (only the sequential
schedules), the GPU memory model, bank conflicts, register limits, alignment of scalar accesses, or CUDA's exact
math library (exp2f/rsqrtf here are the host's) -- see tests/plugins/emulation/README.md.
"""
import ctypes
import os
import sys

import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402

from edgeattn.ops.blockify import blockify_attention  # noqa: E402
from edgeattn.ops.efficient_attention import efficient_attention  # noqa: E402
from edgeattn.ops.litemla import lite_mla_attention  # noqa: E402
from edgeattn.ops.soft import soft_kernel_attention  # noqa: E402
from edgeattn._subprocess import run_command  # noqa: E402
from edgeattn.plugins import kernels_abi  # noqa: E402
from emulation import build_emulated  # noqa: E402
from emulation.emulated_kernels import EmulatedKernels  # noqa: E402
from kernel_reference_check import assert_matches_reference  # noqa: E402

GUARD_ELEMENTS = 64
OUTPUT_SENTINEL = -7.75  # exact in FP16 and FP32; a stray write changes it
DTYPES = [torch.float32, torch.float16]
DTYPE_IDS = ["fp32", "fp16"]


# ---- the emulated library ----------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def emulated_library():
    compiler = build_emulated.find_compiler()
    if compiler is None:
        pytest.skip("no g++/c++ on PATH: the CPU emulation of the CUDA kernels cannot be built")
    try:
        return build_emulated.cached_build(compiler)
    except build_emulated.RewriteError as error:
        pytest.fail("rewriting the kernel sources for the emulation failed: {}".format(error))


@pytest.fixture(scope="module")
def emulated_kernels(emulated_library):
    return EmulatedKernels(emulated_library)


def _fresh(library):
    library.reset()
    library.set_schedule(False)
    library.set_block_order(0)
    library.set_compute_capability(7, 5)
    library.set_kernel_path("auto")


@pytest.fixture
def kernels(emulated_kernels):
    """The emulated library with a fresh context (no sticky fault, empty launch log), the default schedule, an
    sm_75 device and the automatic kernel path."""
    _fresh(emulated_kernels)
    yield emulated_kernels
    _fresh(emulated_kernels)


#: the scalar path (Jetson Nano, sm_53) and the tensor-core path (Jetson Orin, sm_87)
CAPABILITIES = [(5, 3), (8, 7)]
CAPABILITY_IDS = ["sm53", "sm87"]


# ---- guarded host buffers ------------------------------------------------------------------------------------------
def _bits(tensor):
    return tensor.view(torch.int16 if tensor.element_size() == 2 else torch.int32).clone()


class Buffers(object):
    """Host tensors inside larger allocations: inputs between NaN guards, outputs NaN-filled between sentinels."""

    def __init__(self):
        self._inputs = []
        self._outputs = []

    def _storage(self, count, dtype, fill, misaligned):
        storage = torch.full((count + 2 * GUARD_ELEMENTS + 1,), fill, dtype=dtype)
        start = GUARD_ELEMENTS + (1 if misaligned else 0)
        return storage, start

    def input(self, tensor, misaligned=False):
        storage, start = self._storage(tensor.numel(), tensor.dtype, float("nan"), misaligned)
        view = storage[start:start + tensor.numel()].view(tensor.shape)
        view.copy_(tensor)
        self._inputs.append((storage, _bits(storage)))
        return view

    def output(self, shape, dtype, misaligned=False):
        count = int(np.prod(shape))
        storage, start = self._storage(count, dtype, OUTPUT_SENTINEL, misaligned)
        view = storage[start:start + count].view(*shape)
        view.fill_(float("nan"))
        self._outputs.append((storage, start, count, _bits(storage)))
        return view

    def workspace(self, nbytes):
        """NaN-filled FP32 words (a kernel that reads workspace it did not write gets NaN); returns a pointer."""
        words = (int(nbytes) + 3) // 4
        storage = torch.full((words + GUARD_ELEMENTS,), float("nan"), dtype=torch.float32)
        storage[words:] = OUTPUT_SENTINEL
        self._outputs.append((storage, 0, words, _bits(storage)))
        return storage.data_ptr()

    def check(self, label):
        for storage, before in self._inputs:
            assert torch.equal(_bits(storage), before), "{}: an input (or its guard) was written".format(label)
        for storage, start, count, before in self._outputs:
            after = _bits(storage)
            assert torch.equal(after[:start], before[:start]) and torch.equal(
                after[start + count:], before[start + count:]), "{}: write outside an output/workspace".format(label)


def ptr(tensor):
    return None if tensor is None else tensor.data_ptr()


def dtype_name(dtype):
    return {torch.float32: "float32", torch.float16: "float16"}[dtype]


def random_tensor(shape, dtype, scale=1.0, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator, dtype=torch.float64) * scale).to(dtype)


def run_both_schedules(kernels, launch, label):
    """Runs ``launch(buffers) -> (status, output tensor)`` in the forward and the reverse warp-greedy schedule on
    fresh buffers; the two outputs must be bitwise identical, fully written, and nothing outside them touched.
    Returns (output, launch log of the reverse run: the second call, so a launcher's one-time setup on the stream,
    such as the linear passes' launch state, is not in it)."""
    results = []
    for reverse in (False, True):
        kernels.reset()
        kernels.set_schedule(reverse)
        buffers = Buffers()
        status, output = launch(buffers)
        assert status == kernels_abi.STATUS_SUCCESS, "{} ({} schedule): status {}: {} | {}".format(
            label, "reverse" if reverse else "forward", status, kernels.last_error(), kernels.fault())
        assert kernels.fault() == "", "{}: {}".format(label, kernels.fault())
        buffers.check(label)
        assert not torch.isnan(output).any(), "{}: output elements left unwritten (or NaN)".format(label)
        results.append((output.clone(), list(kernels.launches())))
    (forward, _), (reverse_output, log) = results
    assert torch.equal(_bits(forward), _bits(reverse_output)), (
        "{}: the result depends on the block/warp/thread schedule (missing barrier, a warp racing ahead, or an "
        "inter-block dependency)".format(label))
    return forward, log


# ---- the emulator itself -------------------------------------------------------------------------------------------
def _f32(values):
    return np.ascontiguousarray(values, dtype=np.float32)


def _p(array):
    return array.ctypes.data_as(ctypes.c_void_p)


def test_emulated_library_exports_the_c_abi_and_reports_itself(kernels):
    assert kernels.abi_version() == kernels_abi.ABI_VERSION
    assert "cpu-emulation" in kernels.build_info()


def test_half_conversion_is_ieee_round_to_nearest_even(kernels):
    """__float2half_rn / __half2float of the emulation against numpy's IEEE conversions: every half value, every
    tie between neighbouring halves (and one float ulp either side), overflow, subnormals and random floats."""
    every_half = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    as_float = np.empty(65536, dtype=np.float32)
    kernels.emu.edgeattn_emu_half_to_float(_p(every_half), _p(as_float), 65536)
    expected = every_half.view(np.float16).astype(np.float32)
    finite = ~np.isnan(expected)
    assert np.array_equal(as_float[finite].view(np.uint32), expected[finite].view(np.uint32))
    assert np.isnan(as_float[~finite]).all()

    finite_halves = every_half.view(np.float16)[np.isfinite(every_half.view(np.float16))]
    ordered = np.unique(finite_halves.astype(np.float64))
    midpoints = ((ordered[:-1] + ordered[1:]) / 2).astype(np.float32)  # exact in FP32
    around = np.concatenate([midpoints, np.nextafter(midpoints, np.float32(np.inf)),
                             np.nextafter(midpoints, np.float32(-np.inf))])
    rng = np.random.default_rng(0)
    random = np.concatenate([
        rng.standard_normal(200000).astype(np.float32) * np.float32(10.0) ** rng.integers(-9, 6, 200000),
        np.array([65504, 65519.99, 65520, 65536, 1e9, np.inf, -np.inf, 2 ** -24, 2 ** -25, 2 ** -25 * 1.0000001,
                  2 ** -26, 2 ** -14, 2 ** -14 * (1 - 2 ** -11), 0.0, -0.0, 1e-30], dtype=np.float32)])
    values = _f32(np.concatenate([around, -around, random, -random]))
    out = np.empty(values.size, dtype=np.uint16)
    with np.errstate(over="ignore"):
        reference = values.astype(np.float16).view(np.uint16)
    kernels.emu.edgeattn_emu_float_to_half(_p(values), _p(out), values.size)
    mismatch = np.nonzero(out != reference)[0]
    assert mismatch.size == 0, "float {!r}: emulation 0x{:04x}, numpy 0x{:04x}".format(
        values[mismatch[0]], out[mismatch[0]], reference[mismatch[0]])
    nan_in = _f32([np.nan, -np.nan])
    nan_out = np.empty(2, dtype=np.uint16)
    kernels.emu.edgeattn_emu_float_to_half(_p(nan_in), _p(nan_out), 2)
    assert np.isnan(nan_out.view(np.float16)).all()


def test_barriers_shared_memory_and_indices(kernels):
    values = _f32(np.arange(3 * 256) % 97)
    sums = np.zeros(3, dtype=np.float32)
    assert kernels.emu.edgeattn_emu_selftest_block_sum(_p(values), _p(sums), 3, 256) == 0
    assert np.array_equal(sums, values.reshape(3, 256).sum(axis=1))

    out = np.zeros(2 * 3 * 4 * 5 * 2 * 3, dtype=np.uint32)
    assert kernels.emu.edgeattn_emu_selftest_indices(_p(out), 2, 3, 4, 5, 2, 3) == 0
    block, thread = np.divmod(np.arange(out.size), 30)
    assert np.array_equal(out, block * 100000 + thread)

    uninitialised = np.zeros(64, dtype=np.float32)
    assert kernels.emu.edgeattn_emu_selftest_uninitialised_shared(_p(uninitialised), 64) == 0
    assert np.isnan(uninitialised).all(), "shared memory must start as garbage (NaN), like on a GPU"


def test_a_missing_barrier_changes_the_result_between_schedules(kernels):
    """What makes the forward/reverse comparison of every kernel test meaningful."""
    outputs = {}
    for reverse in (False, True):
        kernels.set_schedule(reverse)
        for barrier in (0, 1):
            out = np.zeros(64, dtype=np.float32)
            assert kernels.emu.edgeattn_emu_selftest_neighbour(_p(out), 64, barrier) == 0
            outputs[reverse, barrier] = out
    expected = _f32((np.arange(64) + 1) % 64)
    assert np.array_equal(outputs[False, 1], expected) and np.array_equal(outputs[True, 1], expected)
    assert not np.array_equal(outputs[False, 0], outputs[True, 0], equal_nan=True)


def test_block_order_permutes_the_arrival_at_a_ticket_counter(kernels):
    """Blocks run in index order, reversed, or in a seeded permutation (edgeattn_emu_set_block_order). A sum that
    adds the blocks' partials in arrival order (float atomicAdd) changes its bits with the order; the
    last-block-to-arrive pattern the linear-attention reductions use (partials stored, a ticket taken, the last
    block adds them in block order) gives numpy's left-to-right float32 sum of the partials in every order."""
    blocks, per_block = 37, 5
    values = _f32(np.random.default_rng(3).standard_normal(blocks * per_block) * np.logspace(0, 6, blocks * per_block))
    partials_expected = np.zeros(blocks, dtype=np.float32)
    for b in range(blocks):
        for i in range(per_block):
            partials_expected[b] = np.float32(partials_expected[b] + values[b * per_block + i])
    expected = np.float32(0.0)
    for partial in partials_expected:
        expected = np.float32(expected + partial)
    results = {}
    for fixed in (1, 0):
        for reverse, seed in ((False, 0), (True, 0), (False, 1), (False, 2), (False, 3)):
            kernels.set_schedule(reverse)
            kernels.set_block_order(seed)
            partials = np.full(blocks, np.nan, dtype=np.float32)
            ticket = np.zeros(1, dtype=np.uint32)
            out = np.zeros(1, dtype=np.float32)
            assert kernels.emu.edgeattn_emu_selftest_ticket_sum(_p(values), _p(partials), _p(ticket), _p(out),
                                                                 blocks, per_block, fixed) == 0
            results[fixed, reverse, seed] = out[0]
            if fixed:
                assert ticket[0] == blocks and np.array_equal(partials, partials_expected)
                assert out[0].tobytes() == expected.tobytes(), (reverse, seed, out[0], expected)
    arrival_order = {results[0, reverse, seed].tobytes() for reverse, seed in ((False, 0), (True, 0), (False, 1),
                                                                               (False, 2), (False, 3))}
    assert len(arrival_order) > 1, "permuted block orders must change an arrival-order float sum"


def test_warp_greedy_schedule_exposes_warps_running_ahead(kernels):
    """Two block reductions in a row through shared scratch: without blockReduceMax's leading barrier, warp 0 can
    overwrite the first result while another warp still has to read it. Round-robin schedules (every warp one
    barrier per pass) hide that race; the warp-greedy forward schedule the kernel tests use exposes it, and the
    project's blockReduceMax is right in every schedule."""
    threads = 256
    values = _f32(np.random.default_rng(1).standard_normal(threads))
    expected = (values.max(), (-values).max())
    correct = {}
    for racy in (0, 1):
        for reverse in (False, True):
            for round_robin in (False, True):
                kernels.set_schedule(reverse, round_robin)
                first, second = np.zeros(threads, dtype=np.float32), np.zeros(threads, dtype=np.float32)
                assert kernels.emu.edgeattn_emu_selftest_two_reductions(
                    _p(values), _p(first), _p(second), threads, racy) == 0, kernels.fault()
                correct[racy, reverse, round_robin] = bool((first == expected[0]).all() and
                                                           (second == expected[1]).all())
    assert all(correct[0, reverse, rr] for reverse in (False, True) for rr in (False, True))
    assert correct[1, False, True] and correct[1, True, True]  # lockstep-like schedules miss the race
    assert not correct[1, False, False]  # warp 0 running ahead overwrites scratch[0]


@pytest.mark.parametrize("threads", [32, 64, 256, 512])
def test_warp_shuffles_ballot_and_block_reduce_max(kernels, threads):
    """__shfl_xor_sync / __shfl_down_sync / __shfl_sync / __ballot_sync, deviceUtils' warpReduceMax and
    blockReduceMax (the SOFT Newton step size), in both schedules."""
    values = _f32(np.random.default_rng(threads).standard_normal(threads))
    for reverse in (False, True):
        kernels.set_schedule(reverse)
        maxima, sums, block_max = (np.zeros(threads, dtype=np.float32) for _ in range(3))
        ballots = np.zeros(threads, dtype=np.uint32)
        assert kernels.emu.edgeattn_emu_selftest_warp(
            _p(values), _p(maxima), _p(sums), _p(ballots), _p(block_max), threads) == 0, kernels.fault()
        warps = values.reshape(-1, 32)
        assert np.array_equal(maxima, np.repeat(warps.max(axis=1), 32))
        np.testing.assert_allclose(sums, np.repeat(warps.sum(axis=1), 32), rtol=1e-5, atol=1e-5)
        bits = (warps > 0).astype(np.uint64) << np.arange(32, dtype=np.uint64)
        assert np.array_equal(ballots, np.repeat(bits.sum(axis=1), 32).astype(np.uint32))
        assert (block_max == values.max()).all()


def guide_shuffle_source(mode, arg, width, lane):
    """The lane whose value a lane receives, as the CUDA C++ Programming Guide ("Warp Shuffle Functions") defines
    the four shuffles for a full mask: the warp is cut into groups of ``width`` lanes; __shfl_sync reads lane
    arg % width of the caller's group; __shfl_up_sync lane - arg and __shfl_down_sync lane + arg, or the caller's
    own value where that leaves its group; __shfl_xor_sync lane ^ arg, or the caller's own value where that lies in
    a later group (an earlier group may be read)."""
    start = lane - lane % width
    if mode == "idx":
        return start + arg % width
    if mode == "up":
        return lane - arg if lane % width >= arg else lane
    if mode == "down":
        return lane + arg if lane % width + arg < width else lane
    source = lane ^ arg
    return lane if source >= start + width else source


SHUFFLE_MODES = {"idx": 0, "up": 1, "down": 2, "xor": 3}


@pytest.mark.parametrize("mode, arg, width", [
    ("idx", 5, 32), ("idx", 45, 32), ("idx", 13, 8), ("up", 1, 32), ("up", 3, 8), ("up", 16, 16),
    ("down", 1, 32), ("down", 16, 32), ("down", 3, 8), ("xor", 1, 32), ("xor", 16, 32), ("xor", 2, 4),
    ("xor", 4, 4), ("xor", 24, 16)])
def test_warp_shuffles_read_the_lane_the_cuda_guide_names(kernels, mode, arg, width):
    """Lane by lane over two warps: each lane shuffles its own thread index, so the result names the lane it read,
    including the out-of-range and sub-warp (width < 32) cases the warp reductions above never reach."""
    threads = 64
    expected = _f32([32 * (t // 32) + guide_shuffle_source(mode, arg, width, t % 32) for t in range(threads)])
    for reverse in (False, True):
        kernels.set_schedule(reverse)
        out = np.full(threads, np.nan, dtype=np.float32)
        assert kernels.emu.edgeattn_emu_selftest_shuffle_modes(_p(out), threads, SHUFFLE_MODES[mode], arg,
                                                                width) == 0, kernels.fault()
        assert np.array_equal(out, expected), (mode, arg, width, out.tolist())


@pytest.mark.parametrize("name, call, status, message", [
    ("divergent __syncthreads", lambda e, o: e.edgeattn_emu_selftest_divergent_barrier(_p(o)), 719,
     "divergent __syncthreads"),
    ("__syncthreads after an exit", lambda e, o: e.edgeattn_emu_selftest_barrier_after_exit(_p(o)), 719,
     "after 1 thread(s) of the block exited"),
    ("half a warp in a full-mask shuffle", lambda e, o: e.edgeattn_emu_selftest_deadlock(_p(o)), 719, "deadlock"),
    ("full-mask shuffle in a partial warp", lambda e, o: e.edgeattn_emu_selftest_shuffle(_p(o), 48), 719,
     "does not exist (partial warp)"),
    ("misaligned float4", lambda e, o: e.edgeattn_emu_selftest_vector_load(ctypes.c_void_p(o.ctypes.data + 4),
                                                                            _p(o)), 716, "misaligned 16-byte"),
    ("dynamic shared memory overrun", lambda e, o: e.edgeattn_emu_selftest_shared_overrun(26), 700,
     "write past the end of the dynamic shared memory (104 bytes"),
    ("static shared array overrun", lambda e, o: e.edgeattn_emu_selftest_static_overrun(10), 700,
     "write past the end of a static __shared__ array of 40 bytes"),
    ("wild pointer", lambda e, o: e.edgeattn_emu_selftest_wild_pointer(_p(o)), 700, "invalid memory access"),
    ("block above __launch_bounds__", lambda e, o: e.edgeattn_emu_selftest_launch_bounds(_p(o), 256), 701,
     "__launch_bounds__(128)"),
    ("dynamic shared memory > 48 KiB", lambda e, o: e.edgeattn_emu_selftest_dynamic_shared(
        _p(o), ctypes.c_size_t(48 * 1024 + 4), 0), 1, "dynamic shared memory above the per-block limit"),
    ("static + dynamic shared memory > 48 KiB", lambda e, o: e.edgeattn_emu_selftest_static_plus_dynamic(
        _p(o), ctypes.c_size_t(20000)), 701, "exceeds the per-block limit"),
    ("2048 threads per block", lambda e, o: e.edgeattn_emu_selftest_indices(_p(o), 1, 1, 1, 2048, 1, 1), 9,
     "invalid launch configuration"),
    ("mma in a partial warp", lambda e, o: e.edgeattn_emu_selftest_mma_threads(_p(o), 16), 719,
     "does not exist (partial warp)"),
    ("half a warp in an mma, half in a shuffle", lambda e, o: e.edgeattn_emu_selftest_mma_divergent(_p(o)), 719,
     "different warp operations"),
    ("ldmatrix from global memory", lambda e, o: e.edgeattn_emu_selftest_bad_ldmatrix(_p(o), 0), 700,
     "is not in shared memory"),
    ("ldmatrix row not 16-byte aligned", lambda e, o: e.edgeattn_emu_selftest_bad_ldmatrix(_p(o), 1), 716,
     "is not 16-byte aligned"),
    ("gridDim.y > 65535", lambda e, o: e.edgeattn_emu_selftest_indices(_p(o), 1, 65536, 1, 1, 1, 1), 9,
     "invalid launch configuration"),
])
def test_emulator_turns_undefined_behaviour_into_launch_errors(kernels, name, call, status, message):
    out = np.zeros(4096, dtype=np.float32)
    got_status = call(kernels.emu, out)
    fault = kernels.fault()
    assert got_status == status, "{}: status {} ({})".format(name, got_status, fault)
    assert message in fault, "{}: {!r}".format(name, fault)


def test_legal_variants_of_the_faulting_kernels_run(kernels):
    out = np.zeros(4096, dtype=np.float32)
    aligned = _f32(np.arange(8))
    assert kernels.emu.edgeattn_emu_selftest_vector_load(_p(aligned), _p(out)) == 0 and out[0] == 6.0
    assert kernels.emu.edgeattn_emu_selftest_launch_bounds(_p(out), 128) == 0
    assert kernels.emu.edgeattn_emu_selftest_dynamic_shared(_p(out), ctypes.c_size_t(48 * 1024 + 4), 1) == 0
    assert kernels.emu.edgeattn_emu_selftest_static_plus_dynamic(_p(out), ctypes.c_size_t(4096)) == 0
    assert kernels.emu.edgeattn_emu_selftest_shuffle(_p(out), 64) == 0
    assert np.array_equal(out[:64], _f32(np.arange(64) ^ 1))
    assert kernels.emu.edgeattn_emu_selftest_static_overrun(9) == 0
    assert kernels.emu.edgeattn_emu_selftest_mma_threads(_p(out), 64) == 0 and (out[:64] == 1.0).all()
    assert kernels.fault() == ""


def test_a_device_fault_is_sticky_like_a_corrupted_cuda_context(kernels):
    out = np.zeros(64, dtype=np.float32)
    assert kernels.emu.edgeattn_emu_selftest_wild_pointer(_p(out)) == 700
    assert kernels.emu.edgeattn_emu_selftest_shuffle(_p(out), 64) == 700  # every later launch fails too
    nbytes = kernels.efficient_attention_workspace_size(1, 4, 4, 1)
    workspace = np.zeros(nbytes // 4 + 1, dtype=np.float32)
    status = kernels.efficient_attention(out.ctypes.data, out.ctypes.data, out.ctypes.data, out.ctypes.data, 1, 4,
                                         4, 1, workspace.ctypes.data, nbytes, check=False)
    assert status == kernels_abi.STATUS_CUDA_ERROR
    assert "linearFusedKernel" in kernels.last_error() and "invalid memory access" in kernels.last_error()
    kernels.reset()
    assert kernels.emu.edgeattn_emu_selftest_shuffle(_p(out), 64) == 0


def test_kernel_parameters_above_4kb_do_not_compile(tmp_path):
    """CUDA < 12.1 (JetPack 4.6 / 5.x) rejects kernels with more than 4 KB of parameters; nvcc 13 accepts up to
    32 KB, so the emulation build is where CI sees it (LinearAttentionParams carries the QT coefficients)."""
    compiler = build_emulated.find_compiler()
    if compiler is None:
        pytest.skip("no g++/c++ on PATH")
    template = ("struct Params {{ float values[{}]; }};\n"
                "__global__ void k(Params const p) {{ (void) p; }}\n"
                "void launch(Params const& p) {{ k<<<1, 32>>>(p); }}\n")
    results = {}
    for floats in (1000, 1100):
        source = tmp_path / "params{}.cu".format(floats)
        rewritten, counts = build_emulated.rewrite_source(template.format(floats), str(source))
        assert counts["launches"] == 1
        source.write_text(rewritten)
        results[floats] = run_command(
            [compiler, "-std=c++17", "-fsyntax-only", "-x", "c++", "-include", build_emulated.HEADER, str(source)],
            timeout=120)
    assert results[1000].returncode == 0, results[1000].output[-2000:]
    assert results[1100].returncode != 0 and "kernel parameters above 4 KB" in results[1100].output


# ---- tensor-core instructions ----------------------------------------------------------------------------------------
# The fragment tables of mma.m16n8k16 with f16/bf16 inputs and f32 accumulators, written out here from the PTX ISA
# ("Matrix Fragments for mma.m16n8k16 with floating point type"; groupID = %laneid >> 2, threadID_in_group =
# %laneid % 4), independently of the emulator's and plugins/common/mma.cuh's code. Each gives (row, col) per element.
def ptx_fragment_a(lane):
    group, thread = lane >> 2, lane % 4
    return [(group if i in (0, 1, 4, 5) else group + 8, thread * 2 + (i & 1) + (8 if i >= 4 else 0))
            for i in range(8)]


def ptx_fragment_b(lane):
    group, thread = lane >> 2, lane % 4
    return [(thread * 2 + (i & 1) + (8 if i >= 2 else 0), group) for i in range(4)]


def ptx_fragment_c(lane):
    group, thread = lane >> 2, lane % 4
    return [(group if i < 2 else group + 8, thread * 2 + (i & 1)) for i in range(4)]


# A few lanes spelled out element by element (the PTX ISA's mma.m16n8k16 fragment tables,
# docs.nvidia.com/cuda/parallel-thread-execution, worked out for lane 5 too).
PTX_LANES = {
    0: {"a": [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)],
        "b": [(0, 0), (1, 0), (8, 0), (9, 0)], "c": [(0, 0), (0, 1), (8, 0), (8, 1)]},
    5: {"a": [(1, 2), (1, 3), (9, 2), (9, 3), (1, 10), (1, 11), (9, 10), (9, 11)],
        "b": [(2, 1), (3, 1), (10, 1), (11, 1)], "c": [(1, 2), (1, 3), (9, 2), (9, 3)]},
    31: {"a": [(7, 6), (7, 7), (15, 6), (15, 7), (7, 14), (7, 15), (15, 14), (15, 15)],
         "b": [(6, 7), (7, 7), (14, 7), (15, 7)], "c": [(7, 6), (7, 7), (15, 6), (15, 7)]},
}


def _tables(a_of, b_of, c_of):
    return [np.ascontiguousarray([f(lane) for lane in range(32)], dtype=np.int32) for f in (a_of, b_of, c_of)]


def _exact_inputs(rng, shape, kind):
    """Random values that f16 (or bf16) represents exactly, as float32."""
    values = rng.standard_normal(shape).astype(np.float32)
    if kind == "f16":
        return values.astype(np.float16).astype(np.float32)
    return (values.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)


def _run_mma_table(kernels, a, b, c, tables, bf16):
    d = np.full((16, 8), np.nan, dtype=np.float32)
    status = kernels.emu.edgeattn_emu_selftest_mma_table(_p(a), _p(b), _p(c), _p(d), *[_p(t) for t in tables],
                                                         1 if bf16 else 0)
    assert status == 0, kernels.fault()
    return d


def test_ptx_fragment_tables_cover_each_element_once_and_match_the_spelled_out_lanes():
    for lane, expected in PTX_LANES.items():
        assert ptx_fragment_a(lane) == expected["a"]
        assert ptx_fragment_b(lane) == expected["b"]
        assert ptx_fragment_c(lane) == expected["c"]
    for table, shape in ((ptx_fragment_a, (16, 16)), (ptx_fragment_b, (16, 8)), (ptx_fragment_c, (16, 8))):
        cells = [cell for lane in range(32) for cell in table(lane)]
        assert sorted(cells) == [(r, c) for r in range(shape[0]) for c in range(shape[1])]


@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_mma_fragments_sit_where_the_ptx_isa_puts_them(kernels, kind):
    """Each lane builds its fragments from full matrices through the tables above, the wrapper's mma runs, D goes
    back through the C table: D must be A B + C (exact inputs, exact products: FP32 rounding only). The same with
    groupID and threadID_in_group swapped in the tables must fail, so a layout bug cannot pass this test."""
    rng = np.random.default_rng(12)
    a, b = _exact_inputs(rng, (16, 16), kind), _exact_inputs(rng, (16, 8), kind)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    expected = (a.astype(np.float64) @ b.astype(np.float64) + c).astype(np.float32)
    for reverse in (False, True):
        kernels.set_schedule(reverse)
        d = _run_mma_table(kernels, a, b, c, _tables(ptx_fragment_a, ptx_fragment_b, ptx_fragment_c), kind == "bf16")
        np.testing.assert_allclose(d, expected, rtol=1e-6, atol=1e-6)

    def swapped(table):
        return lambda lane: table((lane % 8) * 4 + lane // 8)

    wrong = _run_mma_table(kernels, a, b, c, _tables(swapped(ptx_fragment_a), ptx_fragment_b, ptx_fragment_c),
                           kind == "bf16")
    assert not np.allclose(wrong, expected, rtol=1e-3, atol=1e-3)
    wrong = _run_mma_table(kernels, a, b, c, _tables(ptx_fragment_a, swapped(ptx_fragment_b), ptx_fragment_c),
                           kind == "bf16")
    assert not np.allclose(wrong, expected, rtol=1e-3, atol=1e-3)


def test_mma_rounds_fp32_inputs_to_nearest_even_half(kernels):
    """The wrapper's packHalf2 rounds FP32 to nearest even (ties included), as __float2half_rn does on a GPU."""
    a = np.zeros((16, 16), dtype=np.float32)
    b = np.zeros((16, 8), dtype=np.float32)
    ties = np.float32(1.0) + np.float32(2.0 ** -11) * np.array([1, 3, 5, 7], dtype=np.float32)  # halfway cases
    a[0, :4] = ties
    b[:4, 0] = 1.0
    c = np.zeros((16, 8), dtype=np.float32)
    d = _run_mma_table(kernels, a, b, c, _tables(ptx_fragment_a, ptx_fragment_b, ptx_fragment_c), False)
    assert d[0, 0] == ties.astype(np.float16).astype(np.float64).sum()


def _ldmatrix_expected(rows, row_of_lane, count, trans):
    """Register j of lane l, from the PTX ISA's description of ldmatrix .m8n8 .b16: matrix j is the rows addressed
    by lanes 8j..8j+7; lane l receives row l / 4, elements 2 (l % 4) and + 1 (.trans: rows 2 (l % 4) and + 1 of
    column l / 4), the lower index in the low half."""
    expected = np.zeros((32, 4), dtype=np.uint32)
    for j in range(count):
        matrix = rows[row_of_lane[8 * j:8 * j + 8]]
        for lane in range(32):
            if trans:
                lo, hi = matrix[2 * (lane % 4), lane // 4], matrix[2 * (lane % 4) + 1, lane // 4]
            else:
                lo, hi = matrix[lane // 4, 2 * (lane % 4)], matrix[lane // 4, 2 * (lane % 4) + 1]
            expected[lane, j] = int(lo) | (int(hi) << 16)
    return expected


@pytest.mark.parametrize("count, trans", [(4, False), (4, True), (2, False), (2, True)])
def test_ldmatrix_distributes_rows_as_the_ptx_isa_says(kernels, count, trans):
    rng = np.random.default_rng(count + 10 * trans)
    rows = rng.integers(0, 1 << 15, size=(8 * count, 8)).astype(np.uint16)  # no NaN patterns
    row_of_lane = np.ascontiguousarray(
        np.concatenate([rng.permutation(8 * count), np.zeros(32 - 8 * count, dtype=np.int64)]), dtype=np.int32)
    expected = _ldmatrix_expected(rows, row_of_lane, count, trans)
    for reverse in (False, True):
        kernels.set_schedule(reverse)
        out = np.zeros((32, 4), dtype=np.uint32)
        assert kernels.emu.edgeattn_emu_selftest_ldmatrix(_p(rows), _p(row_of_lane), _p(out), count, int(trans),
                                                           1) == 0, kernels.fault()
        assert np.array_equal(out[:, :count], expected[:, :count])


def test_ldmatrix_without_syncwarp_reads_rows_not_yet_written(kernels):
    """Each lane stages one row, then ldmatrix reads rows of other lanes: without __syncwarp in between, a lane that
    runs ahead reads a row its neighbour has not written (poisoned shared memory), in at least one schedule."""
    rng = np.random.default_rng(3)
    rows = rng.integers(0, 1 << 15, size=(32, 8)).astype(np.uint16)
    row_of_lane = np.ascontiguousarray((np.arange(32) + 9) % 32, dtype=np.int32)
    expected = _ldmatrix_expected(rows, row_of_lane, 4, False)
    correct = {}
    for with_sync in (1, 0):
        for reverse in (False, True):
            kernels.set_schedule(reverse)
            out = np.zeros((32, 4), dtype=np.uint32)
            assert kernels.emu.edgeattn_emu_selftest_ldmatrix(_p(rows), _p(row_of_lane), _p(out), 4, 0,
                                                               with_sync) == 0, kernels.fault()
            correct[with_sync, reverse] = np.array_equal(out, expected)
    assert correct[1, False] and correct[1, True]
    assert not (correct[0, False] and correct[0, True])


def test_mma_cuh_recipes_from_shared_memory(kernels):
    """The recipes documented in mma.cuh: A by ldmatrix.x4 from a row-major tile, B by ldmatrix.x2 from an N x K
    tile and by ldmatrix.x2.trans from a K x N tile, D through cRow/cCol: both products are A B."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    b_t = np.ascontiguousarray(b.T)
    d1, d2 = np.full((16, 8), np.nan, dtype=np.float32), np.full((16, 8), np.nan, dtype=np.float32)
    assert kernels.emu.edgeattn_emu_selftest_mma_from_shared(
        _p(a.view(np.uint16)), _p(b_t.view(np.uint16)), _p(b.view(np.uint16)), _p(d1), _p(d2)) == 0, kernels.fault()
    expected = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(d1, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(d2, expected, rtol=1e-6, atol=1e-6)


# ---- kernel path selection -------------------------------------------------------------------------------------------
def _tiny_blockify(kernels, dtype):
    """Launches blockify on a 7x7 map (one window, head_dim 16) and returns (status, launch log)."""
    q = random_tensor((1, 49, 16), dtype)
    out = torch.empty_like(q)
    status = kernels.blockify_attention(ptr(q), ptr(q), ptr(q), ptr(out), 1, 7, 7, 16, 1, 7,
                                        dtype=dtype_name(dtype), check=False)
    return status, kernels.launches()


@pytest.mark.parametrize("capability, code_arch, path, dtype, expected", [
    ((5, 3), 0, "auto", torch.float16, "blockifyAttentionKernel"),
    ((7, 5), 0, "auto", torch.float16, "blockifyAttentionKernel"),
    ((8, 0), 0, "auto", torch.float16, "blockifyFlashMmaKernel"),
    ((8, 7), 0, "auto", torch.float16, "blockifyFlashMmaKernel"),
    ((9, 0), 0, "auto", torch.float16, "blockifyFlashMmaKernel"),
    ((8, 7), 0, "auto", torch.float32, "blockifyAttentionKernel"),       # no TF32: FP32 stays scalar
    ((8, 7), 72, "auto", torch.float16, "blockifyAttentionKernel"),      # library without sm_80+ code for Orin
    ((8, 7), 0, "scalar", torch.float16, "blockifyAttentionKernel"),
    ((8, 7), 0, "tensor_core", torch.float16, "blockifyFlashMmaKernel"),
    ((8, 7), 0, "tensor_core_warp", torch.float16, "blockifyMmaKernel"),
    ((7, 5), 0, "tensor_core_warp", torch.float16, "sm_75"),
    ((8, 7), 0, "tensor_core", torch.float32, "blockifyAttentionKernel"),  # FP32 has no tensor-core kernel
    ((5, 3), 0, "tensor_core", torch.float16, "device is sm_53"),
    ((8, 7), 75, "tensor_core", torch.float16, "compiled for compute_75"),
])
def test_launchers_pick_the_kernel_path_by_compute_capability(kernels, capability, code_arch, path, dtype,
                                                              expected):
    kernels.set_compute_capability(*capability, code_arch=code_arch)
    kernels.set_kernel_path(path)
    status, log = _tiny_blockify(kernels, dtype)
    if expected.endswith("Kernel"):
        assert status == kernels_abi.STATUS_SUCCESS, kernels.last_error()
        assert len(log) == 1 and log[0].startswith(expected), log
    else:
        assert status == kernels_abi.STATUS_UNSUPPORTED and log == []
        assert expected in kernels.last_error() and "forced" in kernels.last_error()


def test_set_compute_capability_selects_one_device_per_capability(kernels):
    """The brief C hook: the same ordinal for the same capability every time (the launchers cache per ordinal), a
    new one per capability, and the launch follows the device."""
    kernels.emu.edgeattn_emu_set_compute_capability.argtypes = [ctypes.c_int, ctypes.c_int]
    orin = kernels.emu.edgeattn_emu_set_compute_capability(8, 7)
    nano = kernels.emu.edgeattn_emu_set_compute_capability(5, 3)
    assert orin != nano and kernels.emu.edgeattn_emu_set_compute_capability(8, 7) == orin
    assert kernels.set_compute_capability(8, 7) == orin and kernels.set_compute_capability(8, 7, 72) != orin
    for capability, expected in (((8, 7), "blockifyFlashMmaKernel"), ((5, 3), "blockifyAttentionKernel"),
                                 ((8, 7), "blockifyFlashMmaKernel")):
        kernels.reset()
        kernels.emu.edgeattn_emu_set_compute_capability(*capability)
        status, log = _tiny_blockify(kernels, torch.float16)
        assert status == 0 and log[0].startswith(expected), log


def test_kernel_path_setting_is_validated(kernels):
    assert kernels.kernel_path() == "auto"
    assert kernels.set_kernel_path(7, check=False) == kernels_abi.STATUS_INVALID_ARGUMENT
    assert "kernel path 7" in kernels.last_error() and kernels.kernel_path() == "auto"
    kernels.set_kernel_path("scalar")
    assert kernels.kernel_path() == "scalar"


@pytest.mark.parametrize("value, expected_path, launch_status", [
    ("scalar", "scalar", kernels_abi.STATUS_SUCCESS),
    ("tensor_core", "tensor_core", kernels_abi.STATUS_UNSUPPORTED),  # the default emulated device is sm_75
    ("tensor_core_warp", "tensor_core_warp", kernels_abi.STATUS_UNSUPPORTED),
    ("fast", -1, kernels_abi.STATUS_INVALID_ARGUMENT),
])
def test_kernel_path_from_the_environment(emulated_library, value, expected_path, launch_status):
    """$EDGEATTN_KERNEL_PATH is read once per process: each value in a fresh interpreter."""
    script = (
        "import numpy\n"
        "from edgeattn.plugins import kernels_abi\n"
        "k = kernels_abi.KernelsLibrary({library!r})\n"
        "q, out = numpy.zeros(49 * 16, dtype=numpy.float16), numpy.zeros(49 * 16, dtype=numpy.float16)\n"
        "status = k.blockify_attention(q.ctypes.data, q.ctypes.data, q.ctypes.data, out.ctypes.data, 1, 7, 7, 16, 1, "
        "7, dtype='float16', check=False)\n"
        "print(repr(k.kernel_path()), status, k.last_error())\n").format(library=emulated_library)
    environment = dict(os.environ, EDGEATTN_KERNEL_PATH=value)
    result = run_command([sys.executable, "-c", script], timeout=120, env=environment)
    assert result.returncode == 0, result.output[-3000:]
    path, status = result.stdout.split()[:2]
    assert path == repr(expected_path) and int(status) == launch_status, result.stdout


# ---- blockify attention --------------------------------------------------------------------------------------------
def run_blockify(kernels, q, k, v, weight, bias, height, width, heads, window, scale, padding, misaligned=False):
    batch, _, channels = q.shape

    def launch(buffers):
        qb, kb, vb = (buffers.input(t, misaligned) for t in (q, k, v))
        wb = buffers.input(weight, misaligned) if weight is not None else None
        bb = buffers.input(bias, misaligned) if bias is not None else None
        out = buffers.output(q.shape, q.dtype, misaligned)
        status = kernels.blockify_attention(
            ptr(qb), ptr(kb), ptr(vb), ptr(out), batch, height, width, channels, heads, window, scale=scale,
            padding=padding, dtype=dtype_name(q.dtype), lepe_weight=ptr(wb), lepe_bias=ptr(bb), check=False)
        return status, out

    label = "blockify {}x{} ws{} C={} heads={} pad={} lepe={} {}".format(
        height, width, window, channels, heads, padding, weight is not None, q.dtype)
    out, log = run_both_schedules(kernels, launch, label)

    def reference(q_, k_, v_, w_, b_):
        return blockify_attention(q_, k_, v_, num_heads=heads, height=height, width=width, window_size=window,
                                  scale=scale or None, lepe_weight=w_, lepe_bias=b_, padding=padding)

    assert_matches_reference(out, reference, [q, k, v, weight, bias], q.dtype, label)
    return log


def blockify_inputs(batch, tokens, channels, lepe, dtype):
    q, k, v = (random_tensor((batch, tokens, channels), dtype, seed=i) for i in range(3))
    weight = random_tensor((channels, 1, 3, 3), dtype, 0.3, seed=3) if lepe else None
    bias = random_tensor((channels,), dtype, 0.1, seed=4) if lepe else None
    return q, k, v, weight, bias


BLOCKIFY_CASES = [
    # (label, batch, height, width, channels, heads, window, padding, lepe, scale, misaligned)
    ("14x14 ws7 d32 lepe", 3, 14, 14, 64, 2, 7, "none", True, 0.0, False),
    ("21x14 ws7 d32 no-lepe", 1, 21, 14, 64, 2, 7, "none", False, 0.0, False),
    ("14x14 ws7 d16 lepe", 2, 14, 14, 48, 3, 7, "none", True, 0.0, False),
    ("14x14 ws7 d64", 1, 14, 14, 64, 1, 7, "none", True, 0.0, False),
    ("14x14 ws7 d96 two key tiles", 1, 14, 14, 96, 1, 7, "none", True, 0.0, False),
    ("10x13 ws7 d13 zeros", 3, 10, 13, 39, 3, 7, "zeros", True, 0.0, False),
    ("10x13 ws7 d13 masked", 3, 10, 13, 39, 3, 7, "masked", True, 0.0, False),
    ("10x13 ws7 d48 masked no-lepe", 1, 10, 13, 96, 2, 7, "masked", False, 0.0, False),
    ("17x17 ws17 query chunks", 1, 17, 17, 32, 2, 17, "none", True, 0.0, False),
    ("5x9 ws11 zeros misaligned", 5, 5, 9, 39, 3, 11, "zeros", True, 0.37, True),
    ("5x9 ws11 masked misaligned", 5, 5, 9, 39, 3, 11, "masked", True, 0.37, True),
]


#: (emulated device, kernel path) of the blockify cases: the scalar kernel (sm_53), the tensor-core path on sm_87
#: (the pipelined blockifyFlashMmaKernel where head_dim and channels are multiples of 8 and the tensors 16-byte
#: aligned, else blockifyMmaKernel), and sm_87 forced onto the one-warp-per-unit blockifyMmaKernel
BLOCKIFY_PATHS = [((5, 3), "auto"), ((8, 7), "auto"), ((8, 7), "tensor_core_warp")]
BLOCKIFY_PATH_IDS = ["sm53", "sm87", "sm87-warp"]


def expected_blockify_kernel(head_dim, dtype, capability, window, path="auto", channels=None, misaligned=False):
    """The launch-log text of the kernel (and template path) the launcher must pick: the flash kernel pads head_dim
    to 16/32/64/128; the one-warp-per-unit tensor-core kernel also, and carries 4 query tiles per staged key chunk
    when the window spans several chunks (64/64/32/16 keys) and head_dim <= 32."""
    if dtype == torch.float16 and capability >= (8, 0):
        pad = 16 if head_dim <= 16 else 32 if head_dim <= 32 else 64 if head_dim <= 64 else 128
        channels = head_dim if channels is None else channels
        if path != "tensor_core_warp" and head_dim % 8 == 0 and channels % 8 == 0 and not misaligned:
            return "blockifyFlashMmaKernel<kHeadDimPad> [with int kHeadDimPad = {};".format(pad)
        chunk = {16: 64, 32: 64, 64: 32, 128: 16}[pad]
        passes = 4 if pad <= 32 and window * window > chunk else 1
        return "[with int kHeadDimPad = {}; int kTilesPerPass = {};".format(pad, passes)
    exact = {16: "16; bool kExact = true", 32: "32; bool kExact = true", 64: "64; bool kExact = true"}.get(
        head_dim, "{}; bool kExact = false".format(32 if head_dim < 32 else 64 if head_dim < 64 else 128))
    return "kMaxHeadDim = " + exact


def _runs_another_kernel(case, dtype, capability, path):
    """A forced path other than auto is worth a case only where it runs another kernel than auto does: FP16 cases
    auto sends to the flash kernel (FP32 is scalar only; a case that is not flash-eligible already runs the
    one-warp kernel on auto)."""
    label, batch, height, width, channels, heads, window, padding, lepe, scale, misaligned = case
    return path == "auto" or (dtype == torch.float16 and "Flash" in expected_blockify_kernel(
        channels // heads, dtype, capability, window, "auto", channels, misaligned))


BLOCKIFY_MATRIX = [pytest.param(dtype, case, capability, path, id="{}-{}-{}".format(case[0], dtype_id, path_id))
                   for case in BLOCKIFY_CASES
                   for dtype, dtype_id in zip(DTYPES, DTYPE_IDS)
                   for (capability, path), path_id in zip(BLOCKIFY_PATHS, BLOCKIFY_PATH_IDS)
                   if _runs_another_kernel(case, dtype, capability, path)]


@pytest.mark.parametrize("dtype, case, capability, path", BLOCKIFY_MATRIX)
def test_blockify_attention_matches_reference(kernels, dtype, case, capability, path):
    """Scalar path (sm_53; and FP32 on sm_87): every template path (head_dim 16/32/64 exact, < 32 / < 64 / <= 128
    generic), LePE on/off, the three padding modes (none on a divisible map; zeros and masked on non-divisible ones
    and on a window larger than the map), several key tiles per window, several query chunks per window (289
    queries, 256 threads), explicit scale. Tensor-core path (FP16 on sm_87): head_dim padded to 16/32/64/128, one
    to five key chunks per window (staged once or per query tile), 16-row query tiles cut by the window and the map,
    vector and element-wise staging (aligned and misaligned pointers, head_dim 13), spare warps in the last block;
    the flash kernel where head_dim and channels are multiples of 8 and the pointers aligned (FP32 and the other
    cases stay on the scalar / one-warp kernels)."""
    label, batch, height, width, channels, heads, window, padding, lepe, scale, misaligned = case
    kernels.set_compute_capability(*capability)
    kernels.set_kernel_path(path)
    q, k, v, weight, bias = blockify_inputs(batch, height * width, channels, lepe, dtype)
    log = run_blockify(kernels, q, k, v, weight, bias, height, width, heads, window, scale, padding, misaligned)
    expected = expected_blockify_kernel(channels // heads, dtype, capability, window, path, channels, misaligned)
    assert len(log) == 1 and expected in log[0], log


TENSOR_CORE_BLOCKIFY_CASES = [
    # (label, batch, height, width, channels, heads, window, padding, lepe, query scale)
    ("24x24 ws12 d32 (384 px stage 1)", 1, 24, 24, 64, 2, 12, "none", True, 1.0),
    ("28x28 ws14 d32 masked", 1, 26, 27, 32, 1, 14, "masked", True, 1.0),
    ("14x14 ws7 d32 sharp softmax", 2, 14, 14, 32, 1, 7, "none", False, 6.0),
]


@pytest.mark.parametrize("capability, path", BLOCKIFY_PATHS, ids=BLOCKIFY_PATH_IDS)
@pytest.mark.parametrize("case", TENSOR_CORE_BLOCKIFY_CASES, ids=[case[0] for case in TENSOR_CORE_BLOCKIFY_CASES])
def test_blockify_attention_window_sizes_and_sharp_softmax_fp16(kernels, case, capability, path):
    """Windows of 144 and 196 keys (three and four key chunks, 9 and 13 query tiles, masked padding on a ragged
    map), and large scores (q x 6: a near one-hot softmax, where P's rounding matters most), FP16 on both paths."""
    kernels.set_compute_capability(*capability)
    kernels.set_kernel_path(path)
    label, batch, height, width, channels, heads, window, padding, lepe, query_scale = case
    q, k, v, weight, bias = blockify_inputs(batch, height * width, channels, lepe, torch.float16)
    q = (q.float() * query_scale).half()
    log = run_blockify(kernels, q, k, v, weight, bias, height, width, heads, window, 0.0, padding)
    expected = expected_blockify_kernel(channels // heads, torch.float16, capability, window, path, channels)
    assert len(log) == 1 and expected in log[0], log


# A fragment-layout bug planted in the kernels' side of the contract (mma.cuh's lane -> groupID/threadID_in_group,
# with the two swapped the way a row-major/column-major mix-up of the lane grid would): the emulator still executes
# mma by the PTX ISA's tables, so the tensor-core kernel now puts Q in the wrong fragment slots, masks and stores the
# wrong columns, and the kernel tests must fail. The scalar path does not use mma.cuh and must still pass.
PLANTED_LAYOUT_BUG = (
    ("common/mma.cuh", "    return lane >> 2;\n", "    return lane & 7; // planted: groupID\n"),
    ("common/mma.cuh", "    return lane & 3;\n", "    return lane >> 3; // planted: threadID_in_group\n"),
)


def planted_variant(mutations, planted):
    """Fixture body: the emulated library built with ``mutations`` (a bug planted in copies of the kernel sources,
    described by ``planted``), fresh before and after the module's tests."""
    try:
        library = build_emulated.cached_build(mutations=mutations)
    except build_emulated.RewriteError as error:
        pytest.fail("{} no longer applies: {}".format(planted, error))
    variant = EmulatedKernels(library)
    _fresh(variant)
    yield variant
    _fresh(variant)


def planted_bug_failure(variant, run):
    """The message with which ``run()`` (a kernel test on ``variant``) fails on the tensor-core path (sm_87), after it
    passed on the scalar path (sm_53) of the same library."""
    variant.set_compute_capability(5, 3)
    run()
    variant.set_compute_capability(8, 7)
    with pytest.raises(AssertionError) as caught:
        run()
    return str(caught.value)


@pytest.fixture(scope="module")
def planted_kernels(emulated_library):
    yield from planted_variant(PLANTED_LAYOUT_BUG, "the planted fragment-layout bug of mma.cuh")


@pytest.mark.parametrize("case", [BLOCKIFY_CASES[0], BLOCKIFY_CASES[6]],
                         ids=[BLOCKIFY_CASES[0][0], BLOCKIFY_CASES[6][0]])
def test_a_planted_fragment_layout_bug_fails_the_kernel_tests(planted_kernels, case):
    label, batch, height, width, channels, heads, window, padding, lepe, scale, misaligned = case
    q, k, v, weight, bias = blockify_inputs(batch, height * width, channels, lepe, torch.float16)
    message = planted_bug_failure(planted_kernels, lambda: run_blockify(
        planted_kernels, q, k, v, weight, bias, height, width, heads, window, scale, padding, misaligned))
    assert "FP16 max error" in message or "left unwritten" in message or "depends on the block/warp" in message, \
        message
    # case 0 runs the pipelined kernel, case 6 (head_dim 13) the one-warp kernel: both use mma.cuh's layout
    expected = "blockifyFlashMmaKernel" if case is BLOCKIFY_CASES[0] else "blockifyMmaKernel"
    assert planted_kernels.launches()[0].startswith(expected), planted_kernels.launches()


# ---- EFFATT --------------------------------------------------------------------------------------------------------
#: a stream handle no call uses otherwise: launched while "capturing", it never gets the linear passes' launch state
#: (common/launchState.h), so the tensor-core path takes its memset-and-two-kernels form
CAPTURED_STREAM = 0xC0FFEE


def efficient_launch(kernels, q, k, v, heads, misaligned=False, captured=False, stream=0):
    """``launch(buffers) -> (status, output)`` of one EFFATT call on fresh buffers, on `stream` (a handle; the
    emulator runs every stream in order); `captured`: on CAPTURED_STREAM while the emulator reports a CUDA graph
    capture."""
    batch, tokens, channels = q.shape
    nbytes = kernels.efficient_attention_workspace_size(batch, tokens, channels, heads)

    def launch(buffers):
        qb, kb, vb = (buffers.input(t, misaligned) for t in (q, k, v))
        out = buffers.output(q.shape, q.dtype, misaligned)
        kernels.set_capturing(captured)
        status = kernels.efficient_attention(ptr(qb), ptr(kb), ptr(vb), ptr(out), batch, tokens, channels, heads,
                                             buffers.workspace(nbytes), nbytes, dtype=dtype_name(q.dtype),
                                             stream=CAPTURED_STREAM if captured else stream, check=False)
        kernels.set_capturing(False)
        return status, out

    return launch


def run_efficient(kernels, q, k, v, heads, misaligned=False, captured=False, stream=0):
    """EFFATT (efficient_launch) through both schedules against the reference."""
    batch, tokens, channels = q.shape
    launch = efficient_launch(kernels, q, k, v, heads, misaligned, captured, stream)
    label = "effatt B={} N={} C={} heads={} {}".format(batch, tokens, channels, heads, q.dtype)
    out, log = run_both_schedules(kernels, launch, label)
    assert_matches_reference(out, lambda q_, k_, v_: efficient_attention(q_, k_, v_, num_heads=heads), [q, k, v],
                             q.dtype, label)
    return log


def kernel_records(log):
    """The kernel launches of a launch log (without the memsets and copies the emulator records beside them)."""
    return [record for record in log if not record.startswith(("cudaMemset", "cudaMemcpy"))]


def shortest_split(head_dim, feature_dim):
    """The fewest tokens a split may hold, by the rule plugins/common/linearAttention.cuh states (linearSplits): at
    least 256, and enough that the split's partial (2 dk + dk d FP32 values, written and read once) is at most 1/8
    of its tokens' FP16 bytes (q, k, v read and out written: 4 d values per token)."""
    partial_traffic = 2 * (2 * feature_dim + feature_dim * head_dim) * 4
    token_bytes = 4 * head_dim * 2
    return max(256, -(-8 * partial_traffic // token_bytes))


def expected_splits(tokens, head_dim, feature_dim=None):
    """Splits of a head: as many of at least shortest_split tokens as fit (one when fewer than two fit), at most
    256."""
    return max(1, min(256, tokens // shortest_split(head_dim, head_dim if feature_dim is None else feature_dim)))


def linear_first_launches(tokens, heads, batch, head_dim):
    """What the linear-attention passes may launch first (EFFATT): one fused block per (head, batch) when the head's
    tokens are one split (or, where the fused block's shared memory does not fit, the reduction of that one split),
    else the single launch (a persistent grid) or the reduction over (splits, heads, batch)."""
    splits = expected_splits(tokens, head_dim)
    if splits == 1:
        return [("linearFused", "grid=({},{},1)".format(heads, batch)),
                ("linearReduce", "grid=(1,{},{})".format(heads, batch))]
    return [("linearSingleLaunch", "grid=("), ("linearReduce", "grid=({},{},{})".format(splits, heads, batch))]


def effatt_inputs(batch, tokens, channels, dtype):
    return [random_tensor((batch, tokens, channels), dtype, 2.0, seed=20 + i) for i in range(3)]


EFFATT_CASES = [
    # (label, batch, tokens, channels, heads, misaligned)
    ("N=1", 3, 1, 32, 1, False),
    ("N=49 d32", 3, 49, 64, 2, False),
    ("N=513 d20 two splits", 3, 513, 60, 3, True),
    ("N=600 d64", 1, 600, 64, 1, False),  # one split, whose fused block does not fit: reduction + output pass
    ("N=784 d13", 1, 784, 39, 3, False),
    ("N=3136 d32 11 splits", 1, 3136, 32, 1, False),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", EFFATT_CASES, ids=[case[0] for case in EFFATT_CASES])
def test_efficient_attention_matches_reference(kernels, dtype, case):
    """One to 11 token splits (online softmax across tiles and splits), ragged last tiles, head_dim 13/20/32/64."""
    label, batch, tokens, channels, heads, misaligned = case
    q, k, v = effatt_inputs(batch, tokens, channels, dtype)
    log = run_efficient(kernels, q, k, v, heads, misaligned)
    first = kernel_records(log)[0]
    assert any(first.startswith(name + "Kernel") and grid in first
               for name, grid in linear_first_launches(tokens, heads, batch, channels // heads)), log


def test_efficient_attention_past_the_split_cap(kernels):
    """N = 65537 > 256 splits of 256 tokens: the cap of 256 splits, each of 264 tokens (257 rounded up to 8) but
    the last, so 249 (FP32, head_dim 8: one large case; the reduction's grid shows them in the memset-and-two-kernels
    form, taken while capturing)."""
    assert expected_splits(65537, 8) == 256
    q, k, v = effatt_inputs(1, 65537, 8, torch.float32)
    log = run_efficient(kernels, q, k, v, 1, captured=True)
    assert "grid=(249,1,1)" in kernel_records(log)[0], log


@pytest.mark.parametrize("capability", CAPABILITIES, ids=CAPABILITY_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_efficient_attention_large_logits(kernels, dtype, capability):
    """q and k ~ N(0, 1) x 200 (|x| up to ~800: exp overflows FP32 past 88.7): both softmaxes (q over its features,
    k over the tokens, across tiles and splits) must subtract their max as PyTorch's softmax does, or the kernel
    returns inf / inf = NaN. Scalar and tensor-core paths."""
    kernels.set_compute_capability(*capability)
    q, k, v = (random_tensor((2, 300, 64), dtype, scale, seed=70 + i) for i, scale in enumerate((200.0, 200.0, 1.0)))
    assert q.abs().max() > 500 and k.abs().max() > 500
    run_efficient(kernels, q, k, v, 2)


@pytest.mark.parametrize("capability", CAPABILITIES, ids=CAPABILITY_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_efficient_attention_keys_far_below_zero(kernels, dtype, capability):
    """k = -250 + N(0, 3) for every token (two splits): softmax over the tokens is shift invariant, so the answer is
    an ordinary one, but exp(k) is 0 in FP32 (below 1e-45) unless each feature's maximum over all tokens is
    subtracted: per split, and again where the splits are merged (a running maximum started at 0 rather than -inf
    leaves every weight 0, and the output 0 / 0). Scalar and tensor-core paths."""
    kernels.set_compute_capability(*capability)
    q = random_tensor((2, 300, 64), dtype, 1.0, seed=80)
    k = (random_tensor((2, 300, 64), torch.float64, 3.0, seed=81) - 250.0).to(dtype)
    v = random_tensor((2, 300, 64), dtype, 1.0, seed=82)
    assert k.max() < -200
    run_efficient(kernels, q, k, v, 2)


# ---- LiteMLA -------------------------------------------------------------------------------------------------------
def run_lite_mla(kernels, qkv, head_dim, kernel, eps, alpha, beta, gamma, misaligned=False):
    batch, channels_in, height, width = qkv.shape
    nbytes = kernels.lite_mla_workspace_size(batch, channels_in, height, width, head_dim, kernel)

    def launch(buffers):
        qkv_b = buffers.input(qkv, misaligned)
        out = buffers.output((batch, channels_in // 3, height, width), qkv.dtype, misaligned)
        status = kernels.lite_mla(ptr(qkv_b), ptr(out), batch, channels_in, height, width, head_dim,
                                  buffers.workspace(nbytes), nbytes, kernel=kernel, eps=eps, qt_alpha=alpha,
                                  qt_beta=beta, qt_gamma=gamma, dtype=dtype_name(qkv.dtype), check=False)
        return status, out

    label = "litemla {} B={} C={} {}x{} d={} {}".format(kernel, batch, channels_in, height, width, head_dim,
                                                      qkv.dtype)
    out, log = run_both_schedules(kernels, launch, label)

    def reference(qkv_):
        return lite_mla_attention(qkv_, head_dim=head_dim, kernel=kernel, eps=eps, qt_alpha=alpha, qt_beta=beta,
                                  qt_gamma=gamma)

    assert_matches_reference(out, reference, [qkv], qkv.dtype, label)
    return log


LITE_MLA_CASES = [
    # (label, kernel, head_dim, groups, batch, height, width, coefficients)
    ("relu d16 G8", "relu", 16, 8, 1, 7, 9, "layer"),
    ("relu d32 G2 two splits", "relu", 32, 2, 3, 16, 17, "layer"),
    ("relu d8 G3", "relu", 8, 3, 2, 14, 14, "layer"),
    ("qt d16 G5 per-group", "quadratic_taylor", 16, 5, 3, 7, 9, "group"),
    ("qt d32 G2 per-layer", "quadratic_taylor", 32, 2, 1, 14, 14, "layer"),
    ("qt d8 G4 per-group two splits", "quadratic_taylor", 8, 4, 1, 16, 17, "group"),
    ("qt d64 G2 per-group", "quadratic_taylor", 64, 2, 1, 7, 7, "group"),
]


def lite_mla_case_inputs(case, dtype=torch.float16, scale=1.0):
    """qkv of a LITE_MLA_CASES case and its QT coefficients (per layer, or per group)."""
    label, kernel, head_dim, groups, batch, height, width, coefficients = case
    qkv = random_tensor((batch, groups * 3 * head_dim, height, width), dtype, scale, seed=40)
    qkv[:, :head_dim, 0, 0] = -1.0  # a ReLU query row of zeros: 0 / (0 + eps)
    if coefficients == "group":
        alpha = [0.5 + 0.125 * g for g in range(groups)]
        beta = [1.0 - 0.0625 * g for g in range(groups)]
        gamma = [1.0 + 0.25 * g for g in range(groups)]
    else:
        alpha, beta, gamma = (0.75,), (1.25,), (0.5,)
    return qkv, alpha, beta, gamma


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", LITE_MLA_CASES, ids=[case[0] for case in LITE_MLA_CASES])
def test_lite_mla_matches_reference(kernels, dtype, case):
    """ReLU and quadratic-Taylor kernels, per-layer and per-group coefficients, G = 2..8, NCHW token-minor loads,
    1 to 8 reduction groups per block (head_dim 64 QT: one group, 544 threads, 16-token output tiles), two splits,
    and the ReLU all-zero query row (0 / (0 + eps) = 0)."""
    label, kernel, head_dim = case[:3]
    qkv, alpha, beta, gamma = lite_mla_case_inputs(case, dtype)
    log = run_lite_mla(kernels, qkv, head_dim, kernel, 1e-6, alpha, beta, gamma, misaligned=True)
    feature_map = "kRelu" if kernel == "relu" else "kQuadraticTaylor"
    assert all(feature_map in record for record in kernel_records(log)), log


@pytest.mark.parametrize("capability", CAPABILITIES, ids=CAPABILITY_IDS)
@pytest.mark.parametrize("case", [LITE_MLA_CASES[0], LITE_MLA_CASES[3]],
                         ids=[LITE_MLA_CASES[0][0], LITE_MLA_CASES[3][0]])
def test_lite_mla_uses_the_eps_attribute(kernels, case, capability):
    """out = num / (den + eps) with the node's eps, not a built-in 1e-15: eps = 50 is comparable to the
    denominators here (timm's LiteMLA uses 1e-5, which matters as much for small ReLU features)."""
    kernels.set_compute_capability(*capability)
    label, kernel, head_dim = case[:3]
    qkv, alpha, beta, gamma = lite_mla_case_inputs(case, torch.float32)
    eps = 50.0
    with_eps, without_eps = (lite_mla_attention(qkv.double(), head_dim=head_dim, kernel=kernel, eps=value,
                                                qt_alpha=alpha, qt_beta=beta, qt_gamma=gamma) for value in (eps, 1e-15))
    assert (with_eps - without_eps).abs().max() > 1e-2 * without_eps.abs().max()  # eps is visible at this size
    run_lite_mla(kernels, qkv, head_dim, kernel, eps, alpha, beta, gamma)


# ---- SOFT / SOFT++ -------------------------------------------------------------------------------------------------
def run_soft(kernels, q, landmarks, v, heads, iters, symmetric, misaligned=False):
    batch, tokens, channels = q.shape
    m = landmarks.shape[1]
    nbytes = kernels.soft_kernel_attention_workspace_size(batch, tokens, m, channels, heads)

    def launch(buffers):
        qb, lb, vb = (buffers.input(t, misaligned) for t in (q, landmarks, v))
        out = buffers.output(q.shape, q.dtype, misaligned)
        status = kernels.soft_kernel_attention(
            ptr(qb), ptr(lb), ptr(vb), ptr(out), batch, tokens, m, channels, heads, buffers.workspace(nbytes),
            nbytes, newton_iters=iters, symmetric_norm=1 if symmetric else 0, dtype=dtype_name(q.dtype), check=False)
        return status, out

    label = "soft{} B={} N={} M={} C={} heads={} iters={} {}".format(
        "++" if symmetric else "", batch, tokens, m, channels, heads, iters, q.dtype)
    out, log = run_both_schedules(kernels, launch, label)

    def reference(q_, l_, v_):
        return soft_kernel_attention(q_, l_, v_, num_heads=heads, newton_iters=iters, symmetric_norm=bool(symmetric))

    assert_matches_reference(out, reference, [q, landmarks, v], q.dtype, label)
    return log


def soft_inputs(batch, tokens, m, channels, heads, dtype):
    d = channels // heads
    return (random_tensor((batch, tokens, channels), dtype, d ** -0.25, seed=60),
            random_tensor((batch, m, channels), dtype, d ** -0.25, seed=61),
            random_tensor((batch, tokens, channels), dtype, seed=62))


SOFT_CASES = [
    # (label, batch, tokens, landmarks, channels, heads, symmetric, iters, Newton in shared memory)
    ("M=49 d32 soft++ shared", 3, 196, 49, 64, 2, True, 20, "true"),
    ("M=49 d32 soft shared", 1, 300, 49, 64, 2, False, 20, "true"),
    ("M=49 d64 soft++ shared", 1, 196, 49, 64, 1, True, 20, "true"),
    ("M=144 d32 soft++ global", 1, 576, 144, 32, 1, True, 7, "false"),
    ("M=53 d20 soft global", 3, 1000, 53, 40, 2, False, 20, "false"),
    ("M=1 d24 soft++", 3, 100, 1, 48, 2, True, 20, "true"),
    ("M=16 no newton steps", 1, 64, 16, 32, 1, True, 0, "true"),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", SOFT_CASES, ids=[case[0] for case in SOFT_CASES])
def test_soft_kernel_attention_matches_reference(kernels, dtype, case):
    """Newton-Raphson in shared memory (M = 49) and in the workspace (M = 53 with head_dim 20, M = 144), SOFT and
    SOFT++, zero to 20 iterations, one landmark, several landmark chunks and token splits, odd batches."""
    label, batch, tokens, m, channels, heads, symmetric, iters, newton_shared = case
    q, landmarks, v = soft_inputs(batch, tokens, m, channels, heads, dtype)
    log = run_soft(kernels, q, landmarks, v, heads, iters, symmetric, misaligned=True)
    assert log[0].startswith("softNewtonKernel<T, {}>".format(newton_shared)), log


def newton_result(library, capability, q, landmarks, iters, path=None):
    """M = NR-pinv(A) as the Newton kernels leave it in the workspace (its first buffer, [problem][Mp][Mp] FP32, Mp = M
    rounded up to 4: softKernelAttentionKernel.cu), for SOFT (symmetric_norm 0, so M = X), batch 1, one head, on the
    emulated device of `capability` with `path` forced (None: the one set_compute_capability selects). The launch
    log is library.launches()."""
    library.reset()
    library.set_compute_capability(*capability)
    if path is not None:
        library.set_kernel_path(path)
    batch, tokens, channels = q.shape
    m = landmarks.shape[1]
    v = torch.zeros_like(q)
    out = torch.empty_like(q)
    nbytes = library.soft_kernel_attention_workspace_size(batch, tokens, m, channels, 1)
    workspace = torch.full((nbytes // 4 + 64,), float("nan"))
    library.soft_kernel_attention(q.data_ptr(), landmarks.data_ptr(), v.data_ptr(), out.data_ptr(), batch, tokens,
                                  m, channels, 1, workspace.data_ptr(), nbytes, newton_iters=iters, symmetric_norm=0,
                                  dtype="float16")
    padded = (m + 3) // 4 * 4
    return workspace[:padded * padded].view(padded, padded)[:m, :m].double()


# ---- CSWin-T24181 stage shapes at 224^2 (the GPU tests' first resolution) -----------------------------------------
CSWIN_224 = ((56, 64, 2, 7), (28, 128, 4, 7), (14, 256, 8, 14), (7, 512, 16, 7))  # side, channels, heads, block


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("stage", range(4), ids=["stage1", "stage2", "stage3", "stage4"])
def test_cswin_224_stage_shapes(kernels, dtype, stage):
    """The stage shapes test_plugins_kernels_gpu.py runs at 224^2 (ELFATT branches with half the channels and
    heads, SOFT on the full width with 8x8..1x1 landmark grids, LiteMLA groups of 32), batch 3; FP16 blockify on
    the scalar (sm_53) and the tensor-core (sm_87) path."""
    side, channels, heads, window = CSWIN_224[stage]
    tokens = side * side
    q, k, v, weight, bias = blockify_inputs(3, tokens, channels // 2, stage != 2, dtype)
    for capability in CAPABILITIES if dtype == torch.float16 else CAPABILITIES[:1]:
        kernels.set_compute_capability(*capability)
        log = run_blockify(kernels, q, k, v, weight, bias, side, side, heads // 2, window, 0.0, "none")
        assert expected_blockify_kernel(channels // heads, dtype, capability, window, channels=channels // 2) in log[0], \
            log
    kernels.set_compute_capability(7, 5)
    run_efficient(kernels, *effatt_inputs(3, tokens, channels // 2, dtype), heads=heads // 2)
    qkv = random_tensor((3, 2 * channels // 32 * 3 * 32, side, side), dtype, seed=40)
    for kernel in ("relu", "quadratic_taylor"):
        run_lite_mla(kernels, qkv, 32, kernel, 1e-15, (1.0,), (1.0,), (1.0,))
    m = (side // (8, 4, 2, 1)[stage]) ** 2
    log = run_soft(kernels, *soft_inputs(3, tokens, m, channels, heads, dtype), heads=heads, iters=20, symmetric=True)
    assert m == 49 and log[0].startswith("softNewtonKernel<T, true>"), log


# ---- argument validation -------------------------------------------------------------------------------------------
FAKE = 0x10000  # never dereferenced: every case fails validation before a launch


@pytest.mark.parametrize("call, status, message", [
    (lambda k: k.blockify_attention(FAKE, FAKE, FAKE, FAKE, 1, 10, 13, 39, 3, 7, padding="none", check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "multiples of window_size"),
    (lambda k: k.blockify_attention(FAKE, FAKE, FAKE, FAKE, 1, 14, 14, 64, 2, 0, check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "window_size must be positive"),
    (lambda k: k.blockify_attention(FAKE, FAKE, FAKE, FAKE, 1, 14, 14, 64, 2, 7, scale=float("inf"), check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "scale must be finite"),
    (lambda k: k.blockify_attention(FAKE, FAKE, FAKE, FAKE, 1, 14, 14, 512, 2, 7, check=False),
     kernels_abi.STATUS_UNSUPPORTED, "head_dim 256"),
    (lambda k: k.blockify_attention(None, FAKE, FAKE, FAKE, 1, 14, 14, 64, 2, 7, check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "device pointers"),
    (lambda k: k.blockify_attention(FAKE, FAKE, FAKE, FAKE, 1, 14, 14, 64, 2, 7, lepe_bias=FAKE, check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "lepe_weight and lepe_bias"),
    (lambda k: k.efficient_attention(FAKE, FAKE, FAKE, FAKE, 1, 49, 64, 3, FAKE, 1 << 30, check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "multiple of num_heads"),
    (lambda k: k.efficient_attention(FAKE, FAKE, FAKE, FAKE, 1, 49, 128, 1, FAKE, 1 << 30, check=False),
     kernels_abi.STATUS_UNSUPPORTED, "head_dim 128"),
    (lambda k: k.efficient_attention(FAKE, FAKE, FAKE, FAKE, 1, 49, 64, 2, None, 1 << 30, check=False),
     kernels_abi.STATUS_WORKSPACE_TOO_SMALL, "need"),
    (lambda k: k.lite_mla(FAKE, FAKE, 1, 96, 7, 7, 16, FAKE, 1 << 30, eps=-1.0, check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "eps"),
    (lambda k: k.lite_mla(FAKE, FAKE, 1, 96, 7, 7, 16, FAKE, 1 << 30, kernel=7, check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "kernel 7"),
    (lambda k: k.lite_mla(FAKE, FAKE, 1, 96, 7, 7, 16, FAKE, 1 << 30, kernel="quadratic_taylor", qt_alpha=None,
                          qt_beta=None, qt_gamma=None, check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "1 or G = 2 entries"),
    (lambda k: k.lite_mla(FAKE, FAKE, 1, 3 * 16 * 200, 7, 7, 16, FAKE, 1 << 30, kernel="quadratic_taylor",
                          qt_alpha=[1.0] * 200, qt_beta=[1.0] * 200, qt_gamma=[1.0] * 200, check=False),
     kernels_abi.STATUS_UNSUPPORTED, "at most 128"),
    (lambda k: k.lite_mla(FAKE, FAKE, 1, 96, 7, 7, 16, FAKE, 8, check=False),
     kernels_abi.STATUS_WORKSPACE_TOO_SMALL, "need"),
    (lambda k: k.soft_kernel_attention(FAKE, FAKE, FAKE, FAKE, 1, 196, 49, 64, 2, FAKE, 1 << 30, symmetric_norm=2,
                                       check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "symmetric_norm"),
    (lambda k: k.soft_kernel_attention(FAKE, FAKE, FAKE, FAKE, 1, 196, 0, 64, 2, FAKE, 1 << 30, check=False),
     kernels_abi.STATUS_INVALID_ARGUMENT, "at least one landmark"),
    (lambda k: k.soft_kernel_attention(FAKE, FAKE, FAKE, FAKE, 1, 196, 5000, 64, 2, FAKE, 1 << 30, check=False),
     kernels_abi.STATUS_UNSUPPORTED, "num_landmarks 5000"),
    (lambda k: k.soft_kernel_attention(FAKE, FAKE, FAKE, FAKE, 1, 196, 49, 64, 2, FAKE, 64, check=False),
     kernels_abi.STATUS_WORKSPACE_TOO_SMALL, "need"),
])
def test_launchers_reject_bad_arguments_without_launching(kernels, call, status, message):
    assert call(kernels) == status
    assert message in kernels.last_error()
    assert kernels.launches() == [], "a launcher launched kernels before rejecting its arguments"


@pytest.mark.parametrize("op", ["soft", "efficient", "lite_mla"])
def test_misaligned_workspace_is_rejected_not_faulted(kernels, op):
    """Regression: softProjectKernel reads M and Y1 from the workspace with float4 loads, and the launcher took any
    workspace pointer, so a workspace that was not 16-byte aligned made the kernel fault (a misaligned-address
    error that poisons the CUDA context) instead of failing validation. Every workspace launcher now rejects it."""
    data = torch.zeros(4 * 4096)  # inputs from element 0, the output from element 2048 (<= 4096 elements each)
    nbytes = {"soft": kernels.soft_kernel_attention_workspace_size(1, 64, 49, 64, 2),
              "efficient": kernels.efficient_attention_workspace_size(1, 64, 64, 2),
              "lite_mla": kernels.lite_mla_workspace_size(1, 96, 7, 7, 16)}[op]
    space = torch.zeros(nbytes // 4 + 16)
    for offset, expected in ((0, kernels_abi.STATUS_SUCCESS), (4, kernels_abi.STATUS_INVALID_ARGUMENT),
                             (8, kernels_abi.STATUS_INVALID_ARGUMENT)):
        kernels.reset()
        workspace = space.data_ptr() + offset
        if op == "soft":
            status = kernels.soft_kernel_attention(data.data_ptr(), data.data_ptr(), data.data_ptr(),
                                                   data.data_ptr() + 8192, 1, 64, 49, 64, 2, workspace, nbytes,
                                                   check=False)
        elif op == "efficient":
            status = kernels.efficient_attention(data.data_ptr(), data.data_ptr(), data.data_ptr(),
                                                 data.data_ptr() + 8192, 1, 64, 64, 2, workspace, nbytes, check=False)
        else:
            status = kernels.lite_mla(data.data_ptr(), data.data_ptr() + 8192, 1, 96, 7, 7, 16, workspace, nbytes,
                                      check=False)
        assert status == expected, (offset, kernels.last_error(), kernels.fault())
        assert kernels.fault() == ""
        if expected != kernels_abi.STATUS_SUCCESS:
            assert "16-byte aligned" in kernels.last_error() and kernels.launches() == []


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_pointers_not_aligned_to_the_element_size_are_rejected(kernels, dtype):
    """A GPU faults on a misaligned scalar access (x86, and so the emulation, does not): the launchers check it."""
    data = torch.zeros(4096)
    odd = data.data_ptr() + 1
    base = data.data_ptr()
    nbytes = 1 << 16
    workspace = torch.zeros(nbytes // 4).data_ptr()
    calls = [
        lambda: kernels.blockify_attention(base, odd, base, base, 1, 7, 7, 32, 1, 7, dtype=dtype, check=False),
        lambda: kernels.efficient_attention(base, base, base, odd, 1, 8, 32, 1, workspace, nbytes, dtype=dtype,
                                            check=False),
        lambda: kernels.lite_mla(odd, base, 1, 48, 4, 4, 16, workspace, nbytes, dtype=dtype, check=False),
        lambda: kernels.soft_kernel_attention(base, odd, base, base, 1, 8, 4, 32, 1, workspace, nbytes, dtype=dtype,
                                              check=False),
    ]
    for call in calls:
        assert call() == kernels_abi.STATUS_INVALID_ARGUMENT
        assert "must be aligned to" in kernels.last_error()
    assert kernels.launches() == []


def test_empty_problems_launch_nothing(kernels):
    assert kernels.efficient_attention(None, None, None, None, 1, 0, 64, 2, None, 0, check=False) == 0
    assert kernels.soft_kernel_attention(None, None, None, None, 0, 196, 49, 64, 2, None, 0, check=False) == 0
    assert kernels.lite_mla(None, None, 0, 96, 7, 7, 16, None, 0, check=False) == 0
    assert kernels.launches() == []
