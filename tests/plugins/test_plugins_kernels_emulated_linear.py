"""The launch structure of the linear-attention passes (EFFATT, LiteMLA ReLU / quadratic Taylor), run on the CPU by the
CUDA emulation: the context merged by the last reduction block to arrive (a ticket counter, no combine launch), one
fused block per (batch, head) when the head is one token split (its context kept in shared memory), the persistent
output pass, and the single launch of several splits on both paths (a work queue of reductions then output chunks,
with counters in the library's per-stream launch state that reset themselves).

The merge adds the splits in split order, so the output must have the same bits whichever block arrives last: each
case runs with the blocks in index order, reversed, and in seeded pseudo-random orders (the emulator's
``edgeattn_emu_set_block_order``), warp-greedy and round-robin, on the scalar (sm_53) and tensor-core (sm_87) paths,
against the PyTorch reference with the GPU tests' FP16 criterion. A variant of the kernels with bugs planted in the
new paths (selectable at run time, so one extra build covers them all) must fail: the first block to arrive merging
instead of the last, the tickets not reset, the fused block writing only its first output tile, leaving its
context un-normalised or staging it from the workspace instead of its shared memory, a persistent
block keeping the first problem's context for the next problem, an offset slip in the 16-byte token-tile loads
(both paths), a missing cp.async.wait_group and a stage index off by one in the tensor-core path's cp.async ring,
and the 16-byte path taken for misaligned tensors.
"""
import ctypes

import pytest

torch = pytest.importorskip("torch")

from edgeattn.ops.efficient_attention import efficient_attention  # noqa: E402
from kernel_reference_check import assert_matches_reference  # noqa: E402
from test_plugins_kernels_emulated import (  # noqa: E402,F401  (fixtures are found by name in this module)
    CAPABILITIES, CAPABILITY_IDS, Buffers, _bits, effatt_inputs, emulated_kernels, emulated_library,
    efficient_launch, expected_splits, kernels, lite_mla_case_inputs, planted_variant, ptr, run_efficient,
    run_lite_mla, shortest_split)
from edgeattn.plugins import kernels_abi  # noqa: E402

#: (reverse, round_robin, block-order seed): index order, reversed, three permutations (one round-robin)
ORDERS = ((False, False, 0), (True, False, 0), (False, False, 1), (False, False, 2), (False, True, 3))


def launch_names(log):
    return [record.split(" ")[0].split("<")[0] for record in log]


def run_in_every_order(kernels, launch, label):
    """``launch(buffers) -> (status, output)`` under every ORDERS entry; returns the output, which must have the same
    bits in each, and the launch log of the last (so without a launcher's one-time setup on the stream)."""
    outputs = []
    for reverse, round_robin, seed in ORDERS:
        kernels.reset()
        kernels.set_schedule(reverse, round_robin)
        kernels.set_block_order(seed)
        buffers = Buffers()
        status, out = launch(buffers)
        assert status == kernels_abi.STATUS_SUCCESS, (label, status, kernels.last_error(), kernels.fault())
        assert kernels.fault() == "", (label, kernels.fault())
        buffers.check(label)
        assert not torch.isnan(out).any(), "{}: output elements left unwritten (or NaN)".format(label)
        outputs.append((out.clone(), list(kernels.launches())))
    first, log = outputs[0][0], outputs[-1][1]
    for (reverse, round_robin, seed), (out, _) in zip(ORDERS[1:], outputs[1:]):
        assert torch.equal(_bits(first), _bits(out)), (
            "{}: the output depends on the block arrival order (reverse={}, round_robin={}, seed={})".format(
                label, reverse, round_robin, seed))
    kernels.set_block_order(0)
    return first, log


@pytest.mark.parametrize("capability", CAPABILITIES, ids=CAPABILITY_IDS)
def test_effatt_context_merge_is_the_same_bits_in_every_block_order(kernels, capability):
    """N = 1000 (3 splits per head of head_dim 32), 2 heads, batch 2, FP16: 12 reduction blocks arrive in five
    orders, the last of each head merges its 3 partials; the output pass's persistent blocks span several heads.
    (The FP32 I/O runs the same scalar kernels; N = 3136's 11 splits are covered by the reference tests.)"""
    dtype = torch.float16
    kernels.set_compute_capability(*capability)
    q, k, v = effatt_inputs(2, 1000, 64, dtype)
    label = "effatt N=1000 sm{}{}".format(*capability)
    out, log = run_in_every_order(kernels, efficient_launch(kernels, q, k, v, 2), label)
    assert expected_splits(1000, 32, 32) == 3
    mma = "Mma" if capability >= (8, 0) else ""
    assert launch_names(log) == ["linearSingleLaunch{}Kernel".format(mma)], log  # (its own tests below)
    two_kernel, _ = run_in_every_order(kernels, efficient_launch(kernels, q, k, v, 2, captured=True), label)
    assert torch.equal(_bits(out), _bits(two_kernel)), label  # the memset-and-two-kernels form, same bits
    assert launch_names(kernels.launches()) == ["cudaMemsetAsync", "linearReduce{}Kernel".format(mma),
                                                "linearOutput{}Kernel".format(mma)], kernels.launches()
    assert kernels.launches()[0] == "cudaMemsetAsync bytes=16" and "grid=(3,2,2)" in kernels.launches()[1]
    assert_matches_reference(out, lambda q_, k_, v_: efficient_attention(q_, k_, v_, num_heads=2), [q, k, v], dtype,
                             label)


@pytest.mark.parametrize("capability", CAPABILITIES, ids=CAPABILITY_IDS)
@pytest.mark.parametrize("kernel", ["relu", "quadratic_taylor"])
def test_lite_mla_context_merge_is_the_same_bits_in_every_block_order(kernels, capability, kernel):
    """LiteMLA on a 30 x 30 map (900 tokens: 3 splits of head_dim 16 for both maps), 2 groups, batch 2, FP16."""
    kernels.set_compute_capability(*capability)
    case = ("orders", kernel, 16, 2, 2, 30, 30, "group")
    splits = expected_splits(900, 16, 16 if kernel == "relu" else 33)
    assert splits == 3
    qkv, alpha, beta, gamma = lite_mla_case_inputs(case)
    batch, channels_in, height, width = qkv.shape
    nbytes = kernels.lite_mla_workspace_size(batch, channels_in, height, width, 16, kernel)

    def launch(buffers):
        qkv_b = buffers.input(qkv)
        out = buffers.output((batch, channels_in // 3, height, width), qkv.dtype)
        status = kernels.lite_mla(ptr(qkv_b), ptr(out), batch, channels_in, height, width, 16,
                                  buffers.workspace(nbytes), nbytes, kernel=kernel, eps=1e-6, qt_alpha=alpha,
                                  qt_beta=beta, qt_gamma=gamma, dtype="float16", check=False)
        return status, out

    out, log = run_in_every_order(kernels, launch, "litemla {} orders".format(kernel))
    mma = "Mma" if capability >= (8, 0) else ""
    assert launch_names(log) == ["linearSingleLaunch{}Kernel".format(mma)], log
    run_lite_mla(kernels, qkv, 16, kernel, 1e-6, alpha, beta, gamma)  # the reference check (both schedules)


@pytest.mark.parametrize("kernel", ["relu", "quadratic_taylor"])
@pytest.mark.parametrize("side, misaligned", [(24, False), (8, False), (24, True)],
                         ids=["576-tokens", "64-tokens-fused", "misaligned"])
def test_tensor_core_token_tiles_move_in_16_byte_accesses(planted_linear_kernels, kernel, side, misaligned):
    """LiteMLA on side x side planes (a multiple of 8 tokens) and EFFATT rows of 32 channels: with 16-byte aligned
    tensors the tensor-core passes load and store the token tiles 8 elements at a time (misaligned ones fall back to
    2-byte accesses); the same outputs against the reference either way. The variant library's planted offset slip
    in the 16-byte loads (bug 5) changes them, which shows the 16-byte path is the one that ran."""
    variant = planted_linear_kernels
    variant.set_compute_capability(8, 7)
    case = ("vector", kernel, 16, 2, 2, side, side, "group")
    qkv, alpha, beta, gamma = lite_mla_case_inputs(case)
    variant.planted_bug.value = 0
    run_lite_mla(variant, qkv, 16, kernel, 1e-6, alpha, beta, gamma, misaligned=misaligned)
    variant.planted_bug.value = 5
    try:
        if misaligned:
            run_lite_mla(variant, qkv, 16, kernel, 1e-6, alpha, beta, gamma, misaligned=True)
        else:
            with pytest.raises(AssertionError):
                run_lite_mla(variant, qkv, 16, kernel, 1e-6, alpha, beta, gamma)
    finally:
        variant.planted_bug.value = 0


@pytest.mark.parametrize("capability", CAPABILITIES, ids=CAPABILITY_IDS)
def test_one_split_heads_take_one_fused_launch(kernels, capability):
    """N = 196 (224's stage 3), 49 (stage 4) and one token short of two splits' shortest length (head_dim 32: 543):
    one block per (batch, head) reduces, keeps the context in shared memory and writes every output tile of its head
    in a single launch, no memset; one token more (two splits) takes the single launch of the work queue."""
    kernels.set_compute_capability(*capability)
    mma = "Mma" if capability >= (8, 0) else ""
    two_splits = 2 * shortest_split(32, 32)
    assert expected_splits(two_splits - 1, 32, 32) == 1 and expected_splits(two_splits, 32, 32) == 2
    fused = ["linearFused{}Kernel".format(mma)]
    split = ["linearSingleLaunch{}Kernel".format(mma)]
    for tokens, expected in ((196, fused), (49, fused), (two_splits - 1, fused), (two_splits, split)):
        log = run_efficient(kernels, *effatt_inputs(3, tokens, 64, torch.float16), heads=2)
        assert launch_names(log) == expected, (tokens, log)
        if expected == fused:
            assert "grid=(2,3,1)" in log[0], log


def test_persistent_output_blocks_form_one_wave(kernels):
    """The output pass launches at most one wave of blocks (the emulated GPU has one multiprocessor of 2048 threads
    and 64 KiB of shared memory), each over a contiguous range of (problem, token tile) items: 3 x 2 heads x 10 tiles
    of 64 tokens at N = 600 (2 splits) on a handful of blocks, every output element written (run_efficient checks
    it against the reference). The tensor-core path's form of it, outside the single launch, runs when the stream is
    being captured before it has launch state."""
    for capability in CAPABILITIES:
        kernels.set_compute_capability(*capability)
        log = run_efficient(kernels, *effatt_inputs(3, 600, 64, torch.float16), heads=2, captured=True)
        output = log[2]
        blocks = int(output.split("grid=(")[1].split(",")[0])
        assert "linearOutput" in output and 1 <= blocks <= 16, log
        assert output.split("grid=(")[1].startswith("{},1,1)".format(blocks)), log


# ---- planted bugs in the new paths, one build, chosen at run time ----------------------------------------------------
PLANTED_LINEAR_BUGS = (
    ("common/kernelPath.cu", '#include "kernelPath.h"\n',
     '#include "kernelPath.h"\nextern "C" __attribute__((visibility("default"))) int edgeattn_planted_bug = 0;\n'),
    ("common/linearAttention.cuh", "#include <algorithm>\n#include <cmath>\n",
     '#include <algorithm>\n#include <cmath>\nextern "C" int edgeattn_planted_bug;\n'),
    # 1: the first block to arrive merges (before the other splits' partials exist)
    ("common/linearAttention.cuh", "isLast[0] = ticket == last ? 1.0F : 0.0F;",
     "isLast[0] = ticket == (edgeattn_planted_bug == 1 ? 0U : last) ? 1.0F : 0.0F;"),
    # 2: the tickets are not reset (the workspace holds garbage between enqueues)
    ("common/linearAttention.cuh", "    if (params.splits <= 1)\n",
     "    if (params.splits <= 1 || edgeattn_planted_bug == 2)\n"),
    # 3: the fused block writes only its head's first output tile
    ("common/linearAttention.cuh",
     "outputTiles<T, kMap, kTokenMajor, false, true>(p, problem * tiles, (problem + 1) * tiles, context);",
     "outputTiles<T, kMap, kTokenMajor, false, true>(p, problem * tiles, edgeattn_planted_bug == 3 ? problem * tiles + 1 "
     ": (problem + 1) * tiles, context);"),
    ("common/linearAttentionTensorCore.cuh",
     "outputTilesMma<kMap, kTokenMajor, kValueTiles, true>(p, problem * tiles, (problem + 1) * tiles, context);",
     "outputTilesMma<kMap, kTokenMajor, kValueTiles, true>(p, problem * tiles, edgeattn_planted_bug == 3 ? problem * "
     "tiles + 1 : (problem + 1) * tiles, context);"),
    # 5: the 16-byte token-tile loads read the next chunk (an offset slip), in the direct loads of both paths and in
    # the tensor-core path's cp.async ring
    ("common/linearAttention.cuh",
     "    auto const chunk = [&](int64_t offset, int n0, int c0) {\n"
     "        bool const full = kTokenMajor ? n0 < count : n0 + kVector <= count;",
     "    auto const chunk = [&](int64_t chunkOffset, int n0, int c0) {\n"
     "        int64_t const offset = chunkOffset + (edgeattn_planted_bug == 5 ? kVector : 0);\n"
     "        bool const full = kTokenMajor ? n0 < count : n0 + kVector <= count;"),
    ("common/linearAttentionTensorCore.cuh",
     "            chunk, d, tokenTile, tileBegin, p.inTokenStride, p.inChannelStride, n0, c0);\n"
     "        bool const full = kTokenMajor ? n0 < count : n0 + 8 <= count;",
     "            chunk, d, tokenTile, tileBegin, p.inTokenStride, p.inChannelStride, n0, c0)\n"
     "            + (edgeattn_planted_bug == 5 ? 8 : 0);\n"
     "        bool const full = kTokenMajor ? n0 < count : n0 + 8 <= count;"),
    # 6: the ring's cp.async.wait_group left out (the reduction's and the output pass's)
    ("common/linearAttentionTensorCore.cuh", "        if (ringStages > 0)\n        {\n            waitRing(ringStages);\n",
     "        if (ringStages > 0 && edgeattn_planted_bug != 6)\n        {\n            waitRing(ringStages);\n"),
    ("common/linearAttentionTensorCore.cuh",
     "        if (ringStages > 0)\n        {\n            waitRing(ringStages); // before any barrier",
     "        if (ringStages > 0 && edgeattn_planted_bug != 6)\n        {\n"
     "            waitRing(ringStages); // before any barrier"),
    # 7: the reduction reads the ring stage of the next tile (a stage-index slip)
    ("common/linearAttentionTensorCore.cuh",
     "visitStagedTile<kTokenMajor, 2>(p, ring + stage * layout.ringStageHalves, tokenTile, count, stageTile);",
     "visitStagedTile<kTokenMajor, 2>(p, ring + (edgeattn_planted_bug == 7 ? (stage + 1) % ringStages : stage) "
     "* layout.ringStageHalves, tokenTile, count, stageTile);"),
    ("common/linearAttentionTensorCore.cuh",
     "visitStagedTile<kTokenMajor, 1>(p, ring + stage * layout.ringStageHalves, kTile, count, stageQuery);",
     "visitStagedTile<kTokenMajor, 1>(p, ring + (edgeattn_planted_bug == 7 ? (stage + 1) % ringStages : stage) "
     "* layout.ringStageHalves, kTile, count, stageQuery);"),
    # 8: the 16-byte path taken for tensors that are not 16-byte aligned
    ("common/linearAttention.cuh", "    return pointers && strides;\n",
     "    return (pointers || edgeattn_planted_bug == 8) && strides;\n"),
    # 9: the fused block's context left un-normalised (softmax: the numerators not divided by their token sum)
    ("common/linearAttention.cuh", "            row[j] = row[j] / row[d];\n",
     "            row[j] = edgeattn_planted_bug == 9 ? row[j] : row[j] / row[d];\n"),
    # 10: the fused block's output phase stages the context from the workspace (never written by the fused launch)
    # instead of its own shared memory
    ("common/linearAttention.cuh", "    float const* const context = kFused ? fusedContext : stagedContext;",
     "    float const* const context = kFused && edgeattn_planted_bug != 10 ? fusedContext : stagedContext;"),
    ("common/linearAttention.cuh", "    if (!kFused && (item == first || tileBegin == 0))",
     "    if ((!kFused || edgeattn_planted_bug == 10) && (item == first || tileBegin == 0))"),
    ("common/linearAttentionTensorCore.cuh", "                = kFused ? fusedContext : p.context",
     "                = kFused && edgeattn_planted_bug != 10 ? fusedContext : p.context"),
    # 11: the single launch's queue does not wrap back to 0 with its last claim
    ("common/linearAttention.cuh", "        slot[0] = atomicInc(p.queue, lastClaim);",
     "        slot[0] = atomicInc(p.queue, lastClaim + (edgeattn_planted_bug == 11 ? 1U : 0U));"),
    # 12: an output chunk does not take its ready count back
    ("common/linearAttention.cuh", "        atomicSub(ready, 1U);",
     "        atomicSub(ready, edgeattn_planted_bug == 12 ? 0U : 1U);"),
    # 13: the merging block does not mark the context ready
    ("common/linearAttention.cuh", "    if (p.ready != nullptr) // single launch",
     "    if (p.ready != nullptr && edgeattn_planted_bug != 13) // single launch"),
    # 14: the tickets count up instead of wrapping back to 0 on the last arrival
    ("common/linearAttention.cuh",
     "            unsigned int const ticket = atomicInc(p.tickets + static_cast<int64_t>(batch) * p.heads + head, last);",
     "            unsigned int const ticket = edgeattn_planted_bug == 14\n"
     "                ? atomicAdd(p.tickets + static_cast<int64_t>(batch) * p.heads + head, 1U)\n"
     "                : atomicInc(p.tickets + static_cast<int64_t>(batch) * p.heads + head, last);"),
    # 4: a persistent block keeps the context of its first problem
    ("common/linearAttention.cuh", "(item == first || tileBegin == 0)) // a new problem",
     "(item == first || (tileBegin == 0 && edgeattn_planted_bug != 4))) // a new problem"),
    ("common/linearAttentionTensorCore.cuh", "        if (item == first || tileBegin == 0) // a new problem",
     "        if (item == first || (tileBegin == 0 && edgeattn_planted_bug != 4)) // a new problem"),
)


@pytest.fixture(scope="module")
def planted_linear_kernels(emulated_library):
    for variant in planted_variant(PLANTED_LINEAR_BUGS, "the planted bugs of the linear-attention launch structure"):
        variant.planted_bug = ctypes.c_int.in_dll(variant.emu, "edgeattn_planted_bug")
        yield variant
        variant.planted_bug.value = 0


PLANTED_LAUNCH_BUGS = [
    # (bug, tokens, what the failure says, name, captured: on sm_87 the memset-and-two-kernels form the tensor-core
    # path takes while a stream without launch state is captured, which has the mechanism)
    (1, 600, "left unwritten", "first-block-merges", False),
    (2, 600, "left unwritten", "tickets-not-reset", True),
    (3, 196, "left unwritten", "fused-first-tile-only", False),
    (4, 600, "FP16 max error", "stale-persistent-context", True),
    (5, 600, "left unwritten", "vector-load-offset", False),  # the slipped last chunk of a row reads the NaN guard
    (9, 196, "FP16 max error", "fused-context-not-normalised", False),
    (10, 196, "left unwritten", "fused-context-from-the-workspace", False),  # the tests fill the workspace with NaN
]
#: both paths have each mechanism (bug 5: the scalar path's 16-byte loads, the tensor-core path's cp.async ring)
PLANTED_LAUNCH_MATRIX = [pytest.param(bug, tokens, message, captured, capability,
                                      id="{}-{}".format(name, capability_id))
                         for bug, tokens, message, name, captured in PLANTED_LAUNCH_BUGS
                         for capability, capability_id in zip(CAPABILITIES, CAPABILITY_IDS)]


@pytest.mark.parametrize("bug, tokens, message, captured, capability", PLANTED_LAUNCH_MATRIX)
def test_planted_bugs_in_the_launch_structure_fail(planted_linear_kernels, bug, tokens, message, captured,
                                                    capability):
    """Each planted bug fails the kernel test on both paths; with none selected the same library passes."""
    variant = planted_linear_kernels
    variant.set_compute_capability(*capability)
    q, k, v = effatt_inputs(2, tokens, 64, torch.float16)
    variant.planted_bug.value = 0
    run_efficient(variant, q, k, v, heads=2, captured=captured)
    variant.planted_bug.value = bug
    with pytest.raises(AssertionError) as caught:
        run_efficient(variant, q, k, v, heads=2, captured=captured)
    variant.planted_bug.value = 0
    assert message in str(caught.value), str(caught.value)


# ---- the single launch: a work queue whose counters reset themselves --------------------------------------------
@pytest.mark.parametrize("capability", CAPABILITIES, ids=CAPABILITY_IDS)
def test_single_launch_gives_the_bits_of_the_two_kernel_passes(kernels, capability):
    """Several splits, both paths: EFFATT (N = 1000, 3 splits; N = 3136, 11) and LiteMLA ReLU / QT (30 x 30) run as
    one launch of linearSingleLaunch[Mma]Kernel, no memset, and give bit for bit what the memset-and-two-kernels form gives
    (the merge order is fixed; the output tiles are the same computation). The first call on a stream allocates and
    zeroes its launch state (one memset, then never again); every call leaves the counters at zero, which the
    emulated kernel checks when its last block ends (a fault otherwise), and a second call gives the same bits."""
    kernels.set_compute_capability(*capability)
    mma = "Mma" if capability >= (8, 0) else ""
    for tokens, heads, batch in ((1000, 2, 2), (3136, 1, 1)):
        q, k, v = effatt_inputs(batch, tokens, 32 * heads, torch.float16)
        stream = 0x5000 + 16 * tokens + capability[0]  # a stream no other call used: its first call sets the state up
        kernels.reset()
        run_efficient(kernels, q, k, v, heads=heads, stream=stream)  # sets the stream's state up, checks the result
        single = run_efficient(kernels, q, k, v, heads=heads, stream=stream)
        two_kernel = run_efficient(kernels, q, k, v, heads=heads, captured=True)
        assert launch_names(single) == ["linearSingleLaunch{}Kernel".format(mma)], single
        assert launch_names(two_kernel) == ["cudaMemsetAsync", "linearReduce{}Kernel".format(mma),
                                            "linearOutput{}Kernel".format(mma)], two_kernel
        outputs = []
        for run in (dict(stream=stream), dict(captured=True)):
            buffers = Buffers()
            status, out = efficient_launch(kernels, q, k, v, heads, **run)(buffers)
            assert status == kernels_abi.STATUS_SUCCESS and kernels.fault() == "", kernels.fault()
            outputs.append(out.clone())
        assert torch.equal(_bits(outputs[0]), _bits(outputs[1])), tokens
    for kernel in ("relu", "quadratic_taylor"):
        qkv, alpha, beta, gamma = lite_mla_case_inputs(("single", kernel, 16, 2, 2, 30, 30, "group"))
        log = run_lite_mla(kernels, qkv, 16, kernel, 1e-6, alpha, beta, gamma)
        assert launch_names(log) == ["linearSingleLaunch{}Kernel".format(mma)], log


def test_single_launch_sets_up_its_state_once_per_stream(kernels):
    """The launch state is allocated (cudaMalloc, which the emulator fills with garbage) and zeroed by one memset
    on the stream at its first call, and reused after; while a stream without state is being captured into a CUDA
    graph (no cudaMalloc then) the call takes the memset-and-two-kernels form instead."""
    kernels.set_compute_capability(8, 7)
    q, k, v = effatt_inputs(1, 1000, 32, torch.float16)
    stream = 0x6000
    logs = []
    for _ in range(2):
        kernels.reset()
        status, _ = efficient_launch(kernels, q, k, v, 1, stream=stream)(Buffers())
        assert status == kernels_abi.STATUS_SUCCESS and kernels.fault() == "", kernels.fault()
        logs.append(launch_names(kernels.launches()))
    assert logs == [["cudaMemsetAsync", "linearSingleLaunchMmaKernel"], ["linearSingleLaunchMmaKernel"]], logs
    kernels.set_compute_capability(5, 3)  # another (emulated) device: the same stream handle gets its own state
    for expected in (["cudaMemsetAsync", "linearSingleLaunchKernel"], ["linearSingleLaunchKernel"]):
        kernels.reset()
        status, _ = efficient_launch(kernels, q, k, v, 1, stream=stream)(Buffers())
        assert status == kernels_abi.STATUS_SUCCESS and launch_names(kernels.launches()) == expected


SINGLE_LAUNCH_BUGS = [
    (11, "left its counters set", "queue-does-not-wrap"),
    (12, "left its counters set", "ready-count-not-taken-back"),
    (13, "which no earlier block merged", "context-never-marked-ready"),
    (14, "left its counters set", "tickets-do-not-wrap"),
]


@pytest.mark.parametrize("bug, message, capability", [
    pytest.param(bug, message, capability, id="{}-{}".format(name, capability_id))
    for bug, message, name in SINGLE_LAUNCH_BUGS for capability, capability_id in zip(CAPABILITIES, CAPABILITY_IDS)])
def test_planted_bugs_in_the_single_launch_fail(planted_linear_kernels, bug, message, capability):
    """Each planted bug in the single launch's counters is a device fault in the emulation (the counters are not zero
    when the launch ends, or a chunk would wait forever on a GPU); each runs on its own stream, since a planted bug
    leaves that stream's state dirty. Not covered here: an output chunk that does not wait (blocks run one after the
    other, so the context is always merged first), and the fences (GPU only)."""
    variant = planted_linear_kernels
    variant.set_compute_capability(*capability)
    q, k, v = effatt_inputs(2, 1000, 64, torch.float16)
    stream = 0x7000 + 16 * bug + capability[0]
    variant.planted_bug.value = 0
    run_efficient(variant, q, k, v, heads=2, stream=stream)
    variant.planted_bug.value = bug
    try:
        with pytest.raises(AssertionError) as caught:
            run_efficient(variant, q, k, v, heads=2, stream=stream)
    finally:
        variant.planted_bug.value = 0
    assert message in str(caught.value), str(caught.value)


# ---- the tensor-core path's cp.async ring of token tiles, the 16-byte path's alignment check ------------------------
def lite_mla_ring_run(library, misaligned=False):
    """LiteMLA QT, head_dim 32, 2 groups on 36 x 36 (1296 tokens, a multiple of 8 as 16-byte chunks of an NCHW plane
    need: 2 splits), batch 2: a 2-stage ring in both passes (3 stages do not fit 48 KB beside the QT staging)."""
    assert expected_splits(36 * 36, 32, 65) == 2
    qkv, alpha, beta, gamma = lite_mla_case_inputs(("ring", "quadratic_taylor", 32, 2, 2, 36, 36, "group"))
    return run_lite_mla(library, qkv, 32, "quadratic_taylor", 1e-6, alpha, beta, gamma, misaligned=misaligned)


RING_RUNS = {
    # EFFATT head_dim 32: a 3-stage ring in both passes; N = 600: 3 splits of 4, 4 and 2 tiles (the ring wraps), 40
    # output tiles over a few persistent blocks; N = 196: the fused block (reduction, then output pass)
    "effatt-600-3-stages": lambda library: run_efficient(library, *effatt_inputs(2, 600, 64, torch.float16), heads=2),
    "effatt-196-fused": lambda library: run_efficient(library, *effatt_inputs(2, 196, 64, torch.float16), heads=2),
    "lite-mla-qt-2-stages": lite_mla_ring_run,
}


@pytest.mark.parametrize("run", sorted(RING_RUNS))
@pytest.mark.parametrize("bug", [6, 7], ids=["missing-wait-group", "wrong-stage-index"])
def test_planted_bugs_in_the_cp_async_ring_fail(planted_linear_kernels, bug, run):
    """sm_87, 16-byte aligned FP16 tensors: the token tiles of the reduction and the output pass stream through a
    cp.async ring (2 or 3 stages of 16-byte copies, tile t + 1 and t + 2 in flight while tile t is staged and
    multiplied); without a planted bug the same library matches the reference with the same bits in both schedules
    (run_efficient / run_lite_mla). A missing cp.async.wait_group reads stages that have not landed (the emulator's
    NaN poison), and a stage index off by one reads the tile still in flight: both must fail, which also shows the
    ring is what ran."""
    variant = planted_linear_kernels
    variant.set_compute_capability(8, 7)
    variant.planted_bug.value = 0
    RING_RUNS[run](variant)
    variant.planted_bug.value = bug
    try:
        with pytest.raises(AssertionError) as caught:
            RING_RUNS[run](variant)
    finally:
        variant.planted_bug.value = 0
    assert "left unwritten" in str(caught.value) or "max error" in str(caught.value), str(caught.value)


@pytest.mark.parametrize("capability", CAPABILITIES, ids=CAPABILITY_IDS)
def test_misaligned_tensors_take_the_element_wise_path(planted_linear_kernels, capability):
    """Tensors 2 bytes off 16-byte alignment: both paths move them element by element (the reference matches); the
    planted bug 8 takes the 16-byte path (scalar: int4 loads; tensor cores: the cp.async ring) for them anyway, which
    the emulator faults as a misaligned 16-byte access."""
    variant = planted_linear_kernels
    variant.set_compute_capability(*capability)
    q, k, v = effatt_inputs(2, 600, 64, torch.float16)
    variant.planted_bug.value = 0
    run_efficient(variant, q, k, v, heads=2, misaligned=True)
    lite_mla_ring_run(variant, misaligned=True)
    variant.planted_bug.value = 8
    try:
        with pytest.raises(AssertionError) as caught:
            run_efficient(variant, q, k, v, heads=2, misaligned=True)
    finally:
        variant.planted_bug.value = 0
    assert "align" in str(caught.value), str(caught.value)
