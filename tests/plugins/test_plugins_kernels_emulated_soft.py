"""SOFT's Newton-Raphson on batched tensor-core GEMM tiles (plugins/softKernelAttention/softNewtonGemm.cuh: the
`tensor_core` path for M > 64 landmarks), run on the CPU by the CUDA emulation.

The whole op (setup, 2 x newton_iters product launches, the tensor-core token passes) against the FP64 PyTorch
reference with the GPU tests' FP16 criterion (tests/plugins/kernel_reference_check.py), in several schedules and CTA
orders (forward and reverse warp-greedy, seeded block permutations, round-robin) whose outputs must have the same
bits; the Newton-Raphson inverse alone against the FP64 iteration on landmarks pooled from a smooth query map
(cond(A) 12 and 2400 at M = 144) within 4x PyTorch's FP32 error; which kernels each path runs; and a variant of
the kernels with bugs planted in the new kernel (a missing epilogue term, the lo term of an operand dropped, a
missing cp.async wait, a missing barrier after the split), each of which the tests here must catch.
"""
import pytest

torch = pytest.importorskip("torch")

from edgeattn.ops.soft import gaussian_kernel, newton_pinv, soft_kernel_attention  # noqa: E402
from edgeattn.plugins import kernels_abi  # noqa: E402
from kernel_reference_check import assert_matches_reference  # noqa: E402
from test_plugins_kernels_emulated import (  # noqa: E402,F401  (fixtures are found by name in this module)
    Buffers, _bits, dtype_name, emulated_kernels, emulated_library, kernels, newton_result, planted_variant, ptr,
    soft_inputs)
from test_plugins_kernels_emulated_tensorcore import pooled_soft_inputs  # noqa: E402

ORIN = (8, 7)
GEMM = "softKernelAttention/softNewtonGemm.cuh"
#: (reverse, round_robin, block-order seed)
ORDERS = ((False, False, 0), (True, False, 0), (False, False, 1), (False, True, 2))


def launch_names(log):
    return [record.split(" ")[0].split("<")[0] for record in log]


def gemm_launches(iters):
    """The tensor_core path for M > 64: setup, 2 products per step, then the tensor-core token passes."""
    return (["softNewtonGemmSetupKernel"] + ["softNewtonGemmMmaKernel"] * (2 * iters)
            + ["softPass1MmaKernel", "softProjectKernel", "softPass2MmaKernel"])


def run_soft_orders(kernels, q, landmarks, v, heads, iters, symmetric, path="tensor_core", orders=ORDERS):
    """The op under each of ``orders`` on an sm_87 device and kernel path ``path``, guarded buffers; the outputs must
    be fully written and bit-identical, and the first within the FP16 criterion. Returns the launch log."""
    batch, tokens, channels = q.shape
    m = landmarks.shape[1]
    nbytes = kernels.soft_kernel_attention_workspace_size(batch, tokens, m, channels, heads)
    label = "soft{} B={} N={} M={} C={} heads={} iters={} {}".format(
        "++" if symmetric else "", batch, tokens, m, channels, heads, iters, path)
    outputs = []
    for reverse, round_robin, seed in orders:
        kernels.reset()
        kernels.set_compute_capability(*ORIN)
        kernels.set_kernel_path(path)
        kernels.set_schedule(reverse, round_robin)
        kernels.set_block_order(seed)
        buffers = Buffers()
        qb, lb, vb = (buffers.input(t, True) for t in (q, landmarks, v))
        out = buffers.output(q.shape, q.dtype, True)
        status = kernels.soft_kernel_attention(
            ptr(qb), ptr(lb), ptr(vb), ptr(out), batch, tokens, m, channels, heads, buffers.workspace(nbytes), nbytes,
            newton_iters=iters, symmetric_norm=1 if symmetric else 0, dtype=dtype_name(q.dtype), check=False)
        assert status == kernels_abi.STATUS_SUCCESS, (label, status, kernels.last_error(), kernels.fault())
        assert kernels.fault() == "", (label, kernels.fault())
        buffers.check(label)
        assert not torch.isnan(out).any(), "{}: output elements left unwritten (or NaN)".format(label)
        outputs.append((out.clone(), list(kernels.launches())))
    kernels.set_block_order(0)
    kernels.set_schedule(False)
    first, log = outputs[0]
    for order, (out, _) in zip(orders[1:], outputs[1:]):
        assert torch.equal(_bits(first), _bits(out)), (
            "{}: the output depends on the schedule / CTA order {}".format(label, order))

    def reference(q_, l_, v_):
        return soft_kernel_attention(q_, l_, v_, num_heads=heads, newton_iters=iters, symmetric_norm=bool(symmetric))

    assert_matches_reference(first, reference, [q, landmarks, v], q.dtype, label)
    return log


# ---- the whole op ----------------------------------------------------------------------------------------------------
GEMM_CASES = [
    # (label, batch, tokens, landmarks, channels, heads, symmetric, iters): P = M rounded up to 16
    ("M=80 d64 soft: 2x2 tiles, the last ones 16 wide", 1, 100, 80, 64, 1, False, 6),
    ("M=70 d16 soft++: 6 problems, odd batch", 3, 70, 70, 32, 2, True, 3),
    ("M=65 one step: the first update is the last", 1, 64, 65, 16, 1, True, 1),
    ("M=65 no steps: M from X_0 in the setup", 1, 64, 65, 16, 1, True, 0),
]


@pytest.mark.parametrize("case", GEMM_CASES, ids=[case[0] for case in GEMM_CASES])
def test_gemm_newton_matches_reference_in_every_order(kernels, case):
    label, batch, tokens, m, channels, heads, symmetric, iters = case
    q, landmarks, v = soft_inputs(batch, tokens, m, channels, heads, torch.float16)
    log = run_soft_orders(kernels, q, landmarks, v, heads, iters, symmetric)
    assert launch_names(log) == gemm_launches(iters), (label, log)
    tiles_per_side = (-(-m // 16) * 16 + 63) // 64
    assert "grid=({},{},1)".format(heads, batch) in log[0], log  # the setup: one CTA per problem
    assert all("grid=({},{},{})".format(tiles_per_side ** 2, heads, batch) in record for record in log[1:1 + 2 * iters])


def test_gemm_newton_on_pooled_landmarks_144(kernels):
    """M = 144 (3 x 3 tiles, the last row and column of tiles 16 wide), SOFT++ landmarks pooled from a smooth
    24 x 24 query map, 20 steps: the shape of CSWin's 384^2 stages."""
    q, landmarks, v = pooled_soft_inputs(1, 24, 2, 32, 1)
    log = run_soft_orders(kernels, q, landmarks, v, 1, 20, True, orders=ORDERS[:2])
    assert launch_names(log) == gemm_launches(20), log


# ---- the inverse itself ----------------------------------------------------------------------------------------------
def newton_errors(library, side, pool):
    """(GEMM-tiled error, PyTorch FP32 error), each max |X_20 - X_20 in FP64| / max |X_20 in FP64|."""
    q, landmarks, _ = pooled_soft_inputs(1, side, pool, 32, 1)
    A = gaussian_kernel(landmarks.double()[0], landmarks.double()[0])
    exact = newton_pinv(A, 20)
    scale = exact.abs().max().item()
    torch_error = (newton_pinv(A.float(), 20).double() - exact).abs().max().item() / scale
    result = newton_result(library, ORIN, q, landmarks, 20, path="tensor_core")
    log = library.launches()
    assert launch_names(log)[:2] == ["softNewtonGemmSetupKernel", "softNewtonGemmMmaKernel"], log
    return (result - exact).abs().max().item() / scale, torch_error


@pytest.mark.parametrize("side, pool", [(24, 2), (96, 8)], ids=["M144-cond12", "M144-cond2400"])
def test_gemm_newton_keeps_fp32_accuracy(kernels, side, pool):
    """With the hi + lo split the tiled iteration stays within 4x PyTorch's FP32 iteration against FP64 (measured
    0.6-0.7x in the emulation, whose mma sums exactly; a GPU's FP32 accumulation adds a few ulps)."""
    error, torch_error = newton_errors(kernels, side, pool)
    assert error <= 4 * torch_error + 1e-7, (error, torch_error)


# ---- which kernels each path runs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("path, m, newton", [
    ("tensor_core", 80, "softNewtonGemmSetupKernel"),
    ("tensor_core_warp", 80, "softNewtonKernel"),  # the scalar iteration beside the tensor-core token passes
    ("auto", 80, "softNewtonKernel"),              # the default table keeps the measured kernels (kernelPath.cu)
    ("tensor_core", 64, "softNewtonMmaKernel"),    # M <= 64: one CTA per problem on both tensor-core paths
    ("tensor_core_warp", 64, "softNewtonMmaKernel"),
    ("scalar", 80, "softNewtonKernel"),
])
def test_each_path_runs_its_newton_kernels(kernels, path, m, newton):
    orders = ORDERS[:2] if path == "tensor_core_warp" else ORDERS[:1]
    q, landmarks, v = soft_inputs(1, 40, m, 16, 1, torch.float16)
    log = run_soft_orders(kernels, q, landmarks, v, 1, 2, True, path=path, orders=orders)
    names = launch_names(log)
    assert names[0] == newton, log
    passes = ["softPass1Kernel", "softProjectKernel", "softPass2Kernel"]
    assert names[-3:] == (passes if path == "scalar" else ["softPass1MmaKernel", "softProjectKernel",
                                                            "softPass2MmaKernel"]), log


def test_the_tensor_core_newton_is_refused_below_sm80(kernels):
    kernels.set_compute_capability(5, 3)
    kernels.set_kernel_path("tensor_core")
    q, landmarks, v = soft_inputs(1, 40, 80, 16, 1, torch.float16)
    out = torch.empty_like(q)
    nbytes = kernels.soft_kernel_attention_workspace_size(1, 40, 80, 16, 1)
    workspace = torch.zeros(nbytes // 4 + 1)
    status = kernels.soft_kernel_attention(q.data_ptr(), landmarks.data_ptr(), v.data_ptr(), out.data_ptr(), 1, 40, 80,
                                           16, 1, workspace.data_ptr(), nbytes, dtype="float16", check=False)
    assert status == kernels_abi.STATUS_UNSUPPORTED and kernels.launches() == [], kernels.launches()
    assert "sm_53" in kernels.last_error()


# ---- planted bugs, one variant build, switched at run time ------------------------------------------------------------
PLANTED_GEMM_BUGS = {
    1: ("the epilogue without the 2 of 2 X",
        ((GEMM, "                        first = 2.0F * previous.x - first;\n",
          "                        first = (::cuda_emu::plantedBug(1) ? 1.0F : 2.0F) * previous.x - first;\n"),)),
    2: ("the lo term of the right operand dropped",
        ((GEMM, "                    mmaSplitBoth(acc[rb * 4 + ct], aHigh[rb], aLow[rb], bHigh, bLow);\n",
          "                    mmaSplitBoth(acc[rb * 4 + ct], aHigh[rb], aLow[rb], bHigh,\n"
          "                        ::cuda_emu::plantedBug(2) ? mma::FragmentB{{0U, 0U}} : bLow);\n"),)),
    3: ("a missing cp.async wait",
        ((GEMM, "            async::wait<1>(); // this thread's copies of chunk `chunk` have landed\n",
          "            if (!::cuda_emu::plantedBug(3)) async::wait<1>(); // planted\n"),)),
    4: ("a missing barrier after the split",
        ((GEMM, "        __syncthreads(); // the split chunk visible to every warp\n",
          "        if (!::cuda_emu::plantedBug(4)) __syncthreads(); // planted\n"),)),
}
PLANTED_MUTATIONS = tuple(mutation for bug in sorted(PLANTED_GEMM_BUGS) for mutation in PLANTED_GEMM_BUGS[bug][1])


@pytest.fixture(scope="module")
def planted_gemm(emulated_library):
    for variant in planted_variant(PLANTED_MUTATIONS, "the planted bugs of softNewtonGemm.cuh"):
        variant.set_planted_bug(0)
        yield variant
        variant.set_planted_bug(0)


@pytest.mark.parametrize("bug", sorted(PLANTED_GEMM_BUGS), ids=[PLANTED_GEMM_BUGS[b][0] for b in sorted(PLANTED_GEMM_BUGS)])
def test_a_bug_planted_in_the_gemm_newton_is_caught(planted_gemm, bug):
    """M = 80, two orders: the variant passes with no bug on and fails with each one; the tensor_core_warp path of
    the same library (which runs none of the new kernel) passes with it. The dropped lo term leaves the output within
    the FP16 criterion here (one f16 rounding of T is 2^-11 relative), so the inverse's FP32-accuracy test must catch
    it."""
    q, landmarks, v = soft_inputs(1, 100, 80, 64, 1, torch.float16)
    run_soft_orders(planted_gemm, q, landmarks, v, 1, 4, False, orders=ORDERS[:2])
    planted_gemm.set_planted_bug(bug)
    try:
        run_soft_orders(planted_gemm, q, landmarks, v, 1, 4, False, path="tensor_core_warp", orders=ORDERS[:1])
        with pytest.raises(AssertionError) as caught:
            run_soft_orders(planted_gemm, q, landmarks, v, 1, 4, False, orders=ORDERS[:2])
            error, torch_error = newton_errors(planted_gemm, 24, 2)
            assert error <= 4 * torch_error + 1e-7, "inverse error {:.3e} > 4 x PyTorch FP32 {:.3e}".format(
                error, torch_error)
    finally:
        planted_gemm.set_planted_bug(0)
    message = str(caught.value)
    assert any(sign in message for sign in ("FP16 max error", "non-finite", "unwritten", "depends on the schedule",
                                            "inverse error")), message
