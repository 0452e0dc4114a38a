"""The emulator's model of the instructions of plugins/common/asyncCopy.cuh (cp.async with commit/wait groups,
ex2.approx.ftz.f32) and of ldmatrix.trans, lane by lane against references written here from the PTX ISA, and its
global-memory traffic counters. Each check also runs against an emulator built with a bug planted in that
instruction's model, where it must fail.

PTX ISA ("Data Movement and Conversion Instructions: cp.async", "cp.async.commit_group", "cp.async.wait_group"):
a cp.async's destination is undefined until a cp.async.wait_group of the issuing thread completes its group;
wait_group N completes all of the thread's committed groups but the N most recent; src-size < cp-size zero-fills
the rest. The emulator poisons the destination (NaN) until then, so a missing or too lax wait shows. Below sm_80
the wrapper compiles to a synchronous copy, which the emulator models on an emulated sm_75 device.
ex2 ("Floating Point Instructions: ex2"): 2^x approximately, +-0 -> 1, -inf -> +0, +inf -> +inf, NaN -> NaN, .ftz
flushes subnormal inputs and results to zero; the emulator keeps every result within the 2^-22 relative bound and
deliberately off the exact value.
"""
import ctypes

import numpy as np
import pytest

import planted_bugs
from emulation import build_emulated
from emulation.emulated_kernels import EmulatedKernels

THREADS = 64
GROUPS = 3  # kCopyGroups of selftest_kernels.cu


def _p(array):
    return array.ctypes.data_as(ctypes.c_void_p)


@pytest.fixture(scope="module")
def emulator():
    if build_emulated.find_compiler() is None:
        pytest.skip("no g++/c++ on PATH: the CPU emulation cannot be built")
    library = EmulatedKernels(build_emulated.cached_build())
    library.reset()
    yield library
    library.reset()
    library.set_schedule(False)
    library.set_compute_capability(7, 5)


@pytest.fixture(scope="module")
def planted_emulator():
    """The variant library with the planted bugs of tests/plugins/planted_bugs.py (each off until switched on)."""
    if build_emulated.find_compiler() is None:
        pytest.skip("no g++/c++ on PATH: the CPU emulation cannot be built")
    library = EmulatedKernels(planted_bugs.variant_library())
    library.reset()
    yield library
    library.set_planted_bug(0)
    library.reset()


def _fresh(kernels, capability, reverse=False):
    kernels.reset()
    kernels.set_schedule(reverse)
    kernels.set_compute_capability(*capability)


# ---- cp.async ---------------------------------------------------------------------------------------------------
def _async_copy(kernels, pending, valid, source):
    out = np.full((GROUPS * THREADS, 4), -1.0, dtype=np.float32)
    status = kernels.emu.edgeattn_emu_selftest_async_copy(_p(source), _p(out), _p(valid), THREADS, pending)
    assert status == 0, kernels.fault()
    return out


def _async_copy_inputs():
    rng = np.random.default_rng(7)
    source = rng.standard_normal((GROUPS * THREADS, 4)).astype(np.float32)
    segment = np.arange(GROUPS * THREADS)
    valid = np.ascontiguousarray(((segment % THREADS + segment // THREADS) % 5 != 0).astype(np.int32))
    return source, valid


def _expected_after_wait(source, valid, pending):
    """What thread t holds for its neighbour's segment of group g after wait_group ``pending`` and the barrier, per
    the ISA: groups older than the ``pending`` most recent are complete (src-size 0: zeros), the rest undefined
    (None)."""
    landed = np.where(valid[:, None] != 0, source, 0.0).reshape(GROUPS, THREADS, 4)
    neighbour = (np.arange(THREADS) + 1) % THREADS
    return [landed[g, neighbour] if g < GROUPS - pending else None for g in range(GROUPS)]


def check_async_copy_groups(kernels):
    source, valid = _async_copy_inputs()
    for pending in (0, 1, 2, 3):  # 3: no wait_group at all
        for reverse in (False, True):
            _fresh(kernels, (8, 7), reverse)
            out = _async_copy(kernels, pending, valid, source).reshape(GROUPS, THREADS, 4)
            for g, expected in enumerate(_expected_after_wait(source, valid, pending)):
                if expected is None:
                    assert np.isnan(out[g]).all(), "group {} read before its wait_group completed it".format(g)
                else:
                    assert np.array_equal(out[g], expected), (pending, g)


def test_cp_async_lands_when_its_group_is_waited_on(emulator):
    check_async_copy_groups(emulator)


def test_cp_async_below_sm80_is_the_synchronous_fallback(emulator):
    """asyncCopy.cuh compiles to a plain 16-byte load and store below sm_80: every group lands at once, waited on or
    not."""
    source, valid = _async_copy_inputs()
    for pending in (0, 3):
        _fresh(emulator, (7, 5))
        out = _async_copy(emulator, pending, valid, source).reshape(GROUPS, THREADS, 4)
        for g, expected in enumerate(_expected_after_wait(source, valid, 0)):
            assert np.array_equal(out[g], expected)


def test_cp_async_needs_16_byte_aligned_addresses(emulator):
    _fresh(emulator, (8, 7))
    storage = np.zeros((GROUPS * THREADS + 1) * 4, dtype=np.float32)
    out = np.zeros((GROUPS * THREADS, 4), dtype=np.float32)
    valid = np.ones(GROUPS * THREADS, dtype=np.int32)
    misaligned = ctypes.c_void_p(storage.ctypes.data + (4 if storage.ctypes.data % 16 == 0 else 0))
    assert emulator.emu.edgeattn_emu_selftest_async_copy(misaligned, _p(out), _p(valid), THREADS, 0) != 0
    assert "16-byte aligned" in emulator.fault()


# ---- ex2.approx.ftz.f32 -------------------------------------------------------------------------------------------
def _exp2_approx(kernels, values):
    values = np.ascontiguousarray(values, dtype=np.float32)
    out = np.full_like(values, -1.0)
    assert kernels.emu.edgeattn_emu_selftest_exp2_approx(_p(values), _p(out), values.size) == 0, kernels.fault()
    return out


def check_exp2_approx(kernels):
    _fresh(kernels, (8, 7))
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.uniform(-125.0, 127.0, 4000), rng.uniform(-1.0, 1.0, 2000), np.arange(-20, 21)])
    x = x.astype(np.float32)
    y = _exp2_approx(kernels, x).astype(np.float64)
    exact = np.exp2(x.astype(np.float64))
    relative = np.abs(y / exact - 1.0)
    assert relative.max() <= 2.0 ** -22, relative.max()
    # the model is deliberately inexact: callers may not depend on 2^x being correctly rounded
    correctly_rounded = exact.astype(np.float32).astype(np.float64)
    assert np.mean(y != correctly_rounded) > 0.9


def check_exp2_approx_special_values(kernels):
    _fresh(kernels, (8, 7))
    tiny = np.float32(1e-40)  # subnormal input: flushed to 0, so 2^0
    x = np.array([0.0, -0.0, tiny, -tiny, -np.inf, np.inf, np.nan, -126.5, -149.0, 128.0], dtype=np.float32)
    y = _exp2_approx(kernels, x)
    assert list(y[:4]) == [1.0, 1.0, 1.0, 1.0]
    assert y[4] == 0.0 and not np.signbit(y[4])
    assert y[5] == np.inf and np.isnan(y[6])
    assert y[7] == 0.0 and y[8] == 0.0, "subnormal results flush to zero (.ftz)"
    assert y[9] == np.inf


def test_ex2_approx_within_its_documented_error_and_not_exact(emulator):
    check_exp2_approx(emulator)


def test_ex2_approx_special_values_and_flush_to_zero(emulator):
    check_exp2_approx_special_values(emulator)


# ---- ldmatrix .trans: lane by lane (the plain and .trans tables are also checked in test_plugins_kernels_emulated)
def check_ldmatrix_trans(kernels):
    _fresh(kernels, (8, 7))
    rng = np.random.default_rng(13)
    rows = rng.integers(0, 1 << 15, size=(32, 8)).astype(np.uint16)
    row_of_lane = np.ascontiguousarray(rng.permutation(32), dtype=np.int32)
    out = np.zeros((32, 4), dtype=np.uint32)
    assert kernels.emu.edgeattn_emu_selftest_ldmatrix(_p(rows), _p(row_of_lane), _p(out), 4, 1, 1) == 0
    for lane in range(32):
        for j in range(4):
            matrix = rows[row_of_lane[8 * j:8 * j + 8]]  # row r of matrix j: the row lane 8 j + r addresses
            # .trans: lane l holds elements (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4) of matrix j
            low, high = matrix[2 * (lane % 4), lane // 4], matrix[2 * (lane % 4) + 1, lane // 4]
            assert out[lane, j] == int(low) | (int(high) << 16), (lane, j)


def test_ldmatrix_trans_lane_by_lane(emulator):
    check_ldmatrix_trans(emulator)


# ---- global-memory traffic and launch counting --------------------------------------------------------------------
def check_traffic(kernels):
    _fresh(kernels, (8, 7))
    loads = 3
    inputs = np.arange(loads * THREADS, dtype=np.float32)
    wide = np.ones((THREADS, 4), dtype=np.float32)
    out = np.zeros(THREADS, dtype=np.float32)
    for array in (inputs, wide, out):
        kernels.watch_global(array.ctypes.data, array.nbytes)
    assert kernels.emu.edgeattn_emu_selftest_traffic(_p(inputs), _p(wide), _p(out), THREADS, loads) == 0
    source, valid = _async_copy_inputs()
    copied = np.zeros_like(source)
    for array in (source, copied):
        kernels.watch_global(array.ctypes.data, array.nbytes)
    assert kernels.emu.edgeattn_emu_selftest_async_copy(_p(source), _p(copied), _p(valid), THREADS, 0) == 0
    scratch = np.zeros(1000, dtype=np.uint8)
    kernels.watch_global(scratch.ctypes.data, 600)  # only part of the memset is watched
    assert kernels.emu.edgeattn_emu_selftest_memset(_p(scratch), 0, 1000) == 0
    traffic = kernels.traffic()
    assert [t["name"] for t in traffic] == ["trafficKernel", "asyncCopyKernel", "cudaMemsetAsync"], traffic
    # 4-byte loads, one float4 per thread, one 4-byte store per thread; the shared-memory round trip is not global
    assert (traffic[0]["read_bytes"], traffic[0]["written_bytes"]) == (inputs.nbytes + wide.nbytes, out.nbytes)
    # cp.async reads its src-size bytes (0 for the zero-filled segments), the stores write every segment
    assert (traffic[1]["read_bytes"], traffic[1]["written_bytes"]) == (16 * int(valid.sum()), copied.nbytes)
    assert (traffic[2]["read_bytes"], traffic[2]["written_bytes"]) == (0, 600)


def test_traffic_counts_global_loads_stores_and_cp_async_per_launch(emulator):
    check_traffic(emulator)


def test_unwatched_memory_is_not_counted_and_reset_clears_the_regions(emulator):
    _fresh(emulator, (8, 7))
    inputs = np.ones(THREADS, dtype=np.float32)
    wide = np.ones((THREADS, 4), dtype=np.float32)
    out = np.zeros(THREADS, dtype=np.float32)
    emulator.watch_global(out.ctypes.data, out.nbytes)
    emulator.reset()
    assert emulator.emu.edgeattn_emu_selftest_traffic(_p(inputs), _p(wide), _p(out), THREADS, 1) == 0
    assert [(t["read_bytes"], t["written_bytes"]) for t in emulator.traffic()] == [(0, 0)]


# ---- the same checks against the emulator with each model broken (planted_bugs.py) ----------------------------------
@pytest.mark.parametrize("bug, check", [(5, check_async_copy_groups), (6, check_exp2_approx),
                                        (4, check_ldmatrix_trans), (7, check_traffic)],
                         ids=["cp.async deferred", "ex2 inexact", "ldmatrix.trans layout", "traffic bytes"])
def test_a_bug_planted_in_each_instruction_model_is_caught(planted_emulator, bug, check):
    check(planted_emulator)  # every bug off: the variant passes
    planted_emulator.set_planted_bug(bug)
    try:
        with pytest.raises(AssertionError):
            check(planted_emulator)
    finally:
        planted_emulator.set_planted_bug(0)
