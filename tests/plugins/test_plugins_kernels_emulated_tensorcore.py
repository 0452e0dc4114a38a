"""The tensor-core paths of the linear-attention kernels (EFFATT, LiteMLA ReLU / quadratic Taylor) and of SOFT, run on
the CPU by the CUDA emulation, against the PyTorch reference.

Every case runs on the emulated Jetson Nano (sm_53: the scalar kernels, the reference path) and Jetson Orin (sm_87:
mma.sync m16n8k16 through plugins/common/mma.cuh, whose warp-collective semantics and PTX fragment layouts the
emulator implements), each in the forward and the reverse warp-greedy schedule (bitwise identical results required),
with guarded buffers and the GPU tests' acceptance criterion (tests/plugins/kernel_reference_check.py): FP16 max error
<= 2 x PyTorch's own FP16 error against the FP64 reference. Shapes: token counts that are not multiples of 16 or 64,
odd batches, one to 13 token splits, head_dim 8..64, landmark counts 1..144.

Beyond the shared cases: inputs that stress what the tensor-core path adds (a sharp token softmax, quadratic features
of |x| > 256 that overflow f16 without the per-row power-of-two scaling, contexts far from 1 in magnitude, landmarks
pooled from the queries as SOFT++ makes them), and two variants of the kernels built with a planted bug: the f16
operand split reduced to one rounding (the error the hi + lo split removes, measured: it must fail the criterion and
degrade the Newton-Raphson inverse by orders of magnitude) and a fragment-layout bug (must fail every tensor-core op).
"""
import pytest

torch = pytest.importorskip("torch")

from edgeattn.ops.soft import gaussian_kernel, newton_pinv  # noqa: E402
from edgeattn.plugins import kernels_abi  # noqa: E402
from test_plugins_kernels_emulated import (  # noqa: E402,F401  (fixtures are found by name in this module)
    CAPABILITIES, CAPABILITY_IDS, EFFATT_CASES, LITE_MLA_CASES, SOFT_CASES, effatt_inputs, emulated_kernels,
    emulated_library, kernel_records, kernels, linear_first_launches, lite_mla_case_inputs, newton_result,
    planted_bug_failure, planted_kernels, planted_variant, random_tensor, run_efficient, run_lite_mla, run_soft,
    soft_inputs)

TENSOR_CORE = (8, 7)

# The hi + lo split of FP32 operands (plugins/common/splitTensorCore.cuh) reduced to a single f16 rounding.
SINGLE_ROUNDING = (
    ("common/splitTensorCore.cuh", "    *lo = __float2half_rn(x - __half2float(high));\n",
     "    *lo = __float2half_rn(0.0F); // planted: one f16 rounding\n"),
)


def uses_tensor_cores(capability):
    return capability >= (8, 0)


def assert_linear_kernels(log, tensor_cores, label):
    """One fused launch when every head is one token split, else (tensor cores) the single launch of the work
    queue, or the tickets' memset, the reduction (whose last block per head merges the splits) and the persistent
    output pass; one split whose fused block's shared memory does not fit takes the reduction and the output pass
    without the memset. Returns the kernel names."""
    names = [record.split(" ")[0].split("<")[0] for record in log]
    mma = "Mma" if tensor_cores else ""
    fused = ["linearFused{}Kernel".format(mma)]
    passes = ["linearReduce{}Kernel".format(mma), "linearOutput{}Kernel".format(mma)]
    single = ["linearSingleLaunch{}Kernel".format(mma)]
    assert names in (fused, single, ["cudaMemsetAsync"] + passes, passes), (label, log)
    if names == passes:
        assert "grid=(1," in log[0], (label, log)
    return names


def assert_soft_kernels(log, tensor_cores, landmarks, label):
    names = [record.split(" ")[0].split("<")[0] for record in log]
    if not tensor_cores:
        expected = ["softNewtonKernel", "softPass1Kernel", "softProjectKernel", "softPass2Kernel"]
    elif landmarks <= 64:
        expected = ["softNewtonMmaKernel", "softPass1MmaKernel", "softProjectKernel", "softPass2MmaKernel"]
    else:  # M > 64: the batched GEMM tiles (test_plugins_kernels_emulated_soft.py), setup + 2 products per step
        products = len(names) - 4
        expected = (["softNewtonGemmSetupKernel"] + ["softNewtonGemmMmaKernel"] * products
                    + ["softPass1MmaKernel", "softProjectKernel", "softPass2MmaKernel"])
        assert products % 2 == 0, (label, log)
    assert names == expected, (label, log)


def pooled_soft_inputs(batch, side, pool, channels, heads, seed=5):
    """q on a side x side map (smoothed, scaled by head_dim ** -0.25), landmarks = pool x pool average pools of q
    (SOFT++'s sampling makes landmarks from the queries; close landmarks make A less well conditioned), v random."""
    d = channels // heads
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, channels, side, side, generator=generator, dtype=torch.float64)
    q = torch.nn.functional.avg_pool2d(q, 3, 1, 1, count_include_pad=False)
    q = q / q.std() * d ** -0.25
    landmarks = torch.nn.functional.avg_pool2d(q, pool)
    v = torch.randn(batch, side * side, channels, generator=generator, dtype=torch.float64)

    def tokens(x):
        return x.flatten(2).transpose(1, 2).contiguous()

    return tokens(q).half(), tokens(landmarks).half(), v.half()


# ---- the shared cases, on both paths -------------------------------------------------------------------------------
@pytest.mark.parametrize("capability", CAPABILITIES, ids=CAPABILITY_IDS)
@pytest.mark.parametrize("case", EFFATT_CASES, ids=[case[0] for case in EFFATT_CASES])
def test_efficient_attention_fp16_both_paths(kernels, case, capability):
    """N = 1 to 3136 (11 splits: the online token softmax merged across tiles and splits), head_dim 13/20/32/64
    (3, 5 and 9 value tiles), misaligned pointers, odd batches."""
    kernels.set_compute_capability(*capability)
    label, batch, tokens, channels, heads, misaligned = case
    log = run_efficient(kernels, *effatt_inputs(batch, tokens, channels, torch.float16), heads=heads,
                        misaligned=misaligned)
    names = assert_linear_kernels(log, uses_tensor_cores(capability), label)
    first = kernel_records(log)[0]
    if not names[0].startswith("linearSingleLaunch"):  # (a persistent grid)
        assert any(grid in first for _, grid in linear_first_launches(tokens, heads, batch, channels // heads)), log


@pytest.mark.parametrize("capability", CAPABILITIES, ids=CAPABILITY_IDS)
@pytest.mark.parametrize("case", LITE_MLA_CASES, ids=[case[0] for case in LITE_MLA_CASES])
def test_lite_mla_fp16_both_paths(kernels, case, capability):
    """ReLU and quadratic Taylor, per-layer and per-group coefficients, NCHW planes, 63 to 272 tokens. QT with
    head_dim 64 (129 features) has no tensor-core kernel (its staging exceeds 48 KB): scalar on both."""
    kernels.set_compute_capability(*capability)
    label, kernel, head_dim = case[:3]
    qkv, alpha, beta, gamma = lite_mla_case_inputs(case)
    log = run_lite_mla(kernels, qkv, head_dim, kernel, 1e-6, alpha, beta, gamma, misaligned=True)
    has_tensor_core_kernel = not (kernel == "quadratic_taylor" and head_dim == 64)
    assert_linear_kernels(log, uses_tensor_cores(capability) and has_tensor_core_kernel, label)


@pytest.mark.parametrize("capability", CAPABILITIES, ids=CAPABILITY_IDS)
@pytest.mark.parametrize("case", SOFT_CASES, ids=[case[0] for case in SOFT_CASES])
def test_soft_kernel_attention_fp16_both_paths(kernels, case, capability):
    """M = 1, 16, 49, 53 (Newton-Raphson on tensor cores in one CTA, 1 to 4 row blocks) and 144 (the batched GEMM
    tiles in the workspace, 3 landmark chunks of 48 in pass 1, 3 chunks of 64 in pass 2), SOFT and SOFT++, 0 to 20
    steps."""
    kernels.set_compute_capability(*capability)
    label, batch, tokens, m, channels, heads, symmetric, iters, _ = case
    log = run_soft(kernels, *soft_inputs(batch, tokens, m, channels, heads, torch.float16), heads=heads,
                   iters=iters, symmetric=symmetric, misaligned=True)
    assert_soft_kernels(log, uses_tensor_cores(capability), m, label)


def test_fp32_stays_on_the_scalar_kernels_on_sm87(kernels):
    """FP32 I/O has no tensor-core kernel (plugins/README.md, "Tensor cores"): sm_87 runs the scalar passes, within
    the FP32 criterion (1e-4 relative)."""
    kernels.set_compute_capability(*TENSOR_CORE)
    log = run_efficient(kernels, *effatt_inputs(3, 257, 60, torch.float32), heads=3)
    assert_linear_kernels(log, False, "effatt fp32")
    qkv = random_tensor((1, 2 * 3 * 16, 7, 9), torch.float32, seed=40)
    for kernel in ("relu", "quadratic_taylor"):
        assert_linear_kernels(run_lite_mla(kernels, qkv, 16, kernel, 1e-6, (0.75,), (1.25,), (0.5,)), False, kernel)
    log = run_soft(kernels, *soft_inputs(1, 100, 49, 64, 2, torch.float32), heads=2, iters=20, symmetric=True)
    assert_soft_kernels(log, False, 49, "soft fp32")


# ---- inputs that stress the tensor-core path -----------------------------------------------------------------------
@pytest.mark.parametrize("capability", CAPABILITIES, ids=CAPABILITY_IDS)
def test_efficient_attention_sharp_softmaxes(kernels, capability):
    """q and k of std 16: both softmaxes near one-hot, the token max jumps between tiles and splits (the
    accumulator rows are rescaled by exp(m_old - m_new) on tensor cores as in the scalar kernel)."""
    kernels.set_compute_capability(*capability)
    q, k, v = effatt_inputs(3, 600, 40, torch.float16)
    log = run_efficient(kernels, (q.float() * 8).half(), (k.float() * 8).half(), v, heads=2)
    assert_linear_kernels(log, uses_tensor_cores(capability), "sharp")


@pytest.mark.parametrize("capability", CAPABILITIES, ids=CAPABILITY_IDS)
@pytest.mark.parametrize("kernel", ["relu", "quadratic_taylor"])
def test_lite_mla_inputs_beyond_the_f16_range_of_their_features(kernels, kernel, capability):
    """|q|, |k| up to ~1500: x^2 (and the ReLU context, a sum of k v over 272 tokens) exceed 65504, the f16 maximum.
    The reference computes in FP32; the tensor-core path must not overflow either (per-feature-row power-of-two
    scales in the reduction, per-token row and per-context-column scales in the output pass)."""
    kernels.set_compute_capability(*capability)
    case = ("big", kernel, 16, 3, 3, 16, 17, "group")
    qkv, alpha, beta, gamma = lite_mla_case_inputs(case, scale=300.0)
    log = run_lite_mla(kernels, qkv, 16, kernel, 1e-6, alpha, beta, gamma)
    assert_linear_kernels(log, uses_tensor_cores(capability), kernel)
    assert qkv.float().abs().max() > 1000


@pytest.mark.parametrize("capability", CAPABILITIES, ids=CAPABILITY_IDS)
@pytest.mark.parametrize("symmetric", [True, False], ids=["softpp", "soft"])
def test_soft_with_landmarks_pooled_from_the_queries(kernels, symmetric, capability):
    """Landmarks = 2x2 average pools of a smooth 14x14 query map (49 landmarks, as SOFT++ samples them): the
    kernel matrix is far from the identity, so the Newton-Raphson products matter."""
    kernels.set_compute_capability(*capability)
    log = run_soft(kernels, *pooled_soft_inputs(3, 14, 2, 64, 2), heads=2, iters=20, symmetric=symmetric)
    assert_soft_kernels(log, uses_tensor_cores(capability), 49, "pooled")


# ---- why the operands are split (measured), and a layout bug ---------------------------------------------------------
@pytest.fixture(scope="module")
def single_rounding_kernels(emulated_library):
    yield from planted_variant(SINGLE_ROUNDING, "the single-rounding variant of splitTensorCore.cuh")


def _fails_the_fp16_criterion(run):
    with pytest.raises(AssertionError) as caught:
        run()
    assert "FP16 max error" in str(caught.value), str(caught.value)


def test_one_f16_rounding_of_the_fp32_operands_fails_the_criterion(single_rounding_kernels):
    """The same kernels with each FP32 operand (softmax numerators, contexts, Gaussian values, Y2, Newton iterates)
    rounded once to f16 instead of split into hi + lo: measured 1.3x (EFFATT N=49) and 1.4-3x (SOFT, pooled
    landmarks) the allowed FP16 error, so the split is what keeps the tensor-core path inside the criterion. The
    scalar path of the same library is unaffected."""
    variant = single_rounding_kernels
    variant.set_compute_capability(*TENSOR_CORE)
    q, k, v = effatt_inputs(3, 49, 64, torch.float16)
    _fails_the_fp16_criterion(lambda: run_efficient(variant, q, k, v, heads=2))
    soft = pooled_soft_inputs(1, 14, 2, 64, 2)
    _fails_the_fp16_criterion(lambda: run_soft(variant, *soft, heads=2, iters=20, symmetric=True))
    variant.set_compute_capability(5, 3)
    run_efficient(variant, q, k, v, heads=2)
    run_soft(variant, *soft, heads=2, iters=20, symmetric=True)


@pytest.mark.parametrize("side, pool, channels", [(14, 2, 32), (28, 4, 32), (56, 8, 32)],
                         ids=["M49-cond5", "M49-cond24", "M49-cond460"])
def test_newton_raphson_on_tensor_cores_keeps_fp32_accuracy(kernels, single_rounding_kernels, side, pool, channels):
    """The Newton-Raphson inverse itself (before the token passes round anything): with split operands its error
    against the FP64 iteration stays within 4x of PyTorch's FP32 iteration (measured 0.9-2x; the scalar kernel
    1-2.2x); one f16 rounding of the product inputs is at least 30x worse (measured 7e-4 to 5e-3 relative against
    5e-7 to 1.2e-6, ~1000x): the iteration stalls at f16 precision times the conditioning, which is why the iterates
    stay FP32 and only the products' inputs are split."""
    q, landmarks, _ = pooled_soft_inputs(1, side, pool, channels, 1)
    A = gaussian_kernel(landmarks.double()[0], landmarks.double()[0])
    exact = newton_pinv(A, 20)
    scale = exact.abs().max().item()
    torch_error = (newton_pinv(A.float(), 20).double() - exact).abs().max().item() / scale
    errors = {}
    for name, library, capability in (("tensor core", kernels, TENSOR_CORE), ("scalar", kernels, (5, 3)),
                                      ("one rounding", single_rounding_kernels, TENSOR_CORE)):
        result = newton_result(library, capability, q, landmarks, 20)
        assert library.launches()[0].startswith("softNewtonMmaKernel" if capability == TENSOR_CORE
                                                else "softNewtonKernel"), library.launches()
        errors[name] = (result - exact).abs().max().item() / scale
    assert errors["tensor core"] <= 4 * torch_error + 1e-7, (errors, torch_error)
    assert errors["scalar"] <= 4 * torch_error + 1e-7, (errors, torch_error)
    assert errors["one rounding"] >= 30 * errors["tensor core"], (errors, torch_error)


@pytest.mark.parametrize("op", ["effatt", "relu", "quadratic_taylor", "soft"])
def test_a_planted_fragment_layout_bug_fails_every_tensor_core_op(planted_kernels, op):
    """mma.cuh's groupID / threadID_in_group swapped (the other engineer's planted bug): the emulator still runs mma
    by the PTX ISA's tables, so the linear-attention and SOFT tensor-core kernels misplace rows and columns and must
    fail; the scalar kernels of the same library pass."""
    def run():
        if op == "effatt":
            return run_efficient(planted_kernels, *effatt_inputs(3, 257, 60, torch.float16), heads=3)
        if op == "soft":
            return run_soft(planted_kernels, *soft_inputs(1, 196, 49, 64, 2, torch.float16), heads=2, iters=20,
                            symmetric=True)
        qkv, alpha, beta, gamma = lite_mla_case_inputs(("planted", op, 16, 3, 3, 16, 17, "group"))
        return run_lite_mla(planted_kernels, qkv, 16, op, 1e-6, alpha, beta, gamma)

    message = planted_bug_failure(planted_kernels, run)
    assert ("FP16 max error" in message or "left unwritten" in message or "non-finite" in message
            or "depends on the block/warp" in message), message
    assert "Mma" in kernel_records(planted_kernels.launches())[0], planted_kernels.launches()


# ---- path selection --------------------------------------------------------------------------------------------
# What AUTO runs on sm_80+ (plugins/README.md, "Kernel path by timing": the H200's tensor-core / scalar ratios):
# EFFATT and LiteMLA-QT stay scalar, LiteMLA ReLU takes the tensor cores from batch 64, SOFT always.
AUTO_ON_TENSOR_CORE_DEVICES = {"effatt": "scalar", "lite_mla_qt": "scalar", "lite_mla_relu_batch1": "scalar",
                               "lite_mla_relu_batch64": "tensor core", "soft": "tensor core"}


@pytest.mark.parametrize("capability, code_arch, path, expected", [
    ((8, 7), 0, "auto", AUTO_ON_TENSOR_CORE_DEVICES),
    ((9, 0), 0, "auto", AUTO_ON_TENSOR_CORE_DEVICES),
    ((8, 7), 72, "auto", "scalar"),         # a library without sm_80+ code for the device: compute_72 PTX, no mma
    ((5, 3), 0, "auto", "scalar"),
    ((8, 7), 0, "scalar", "scalar"),
    ((8, 7), 0, "tensor_core", "tensor core"),
    ((5, 3), 0, "tensor_core", "device is sm_53"),
    ((8, 7), 75, "tensor_core", "compiled for compute_75"),
])
def test_linear_and_soft_launchers_pick_the_path_by_compute_capability(kernels, capability, code_arch, path,
                                                                       expected):
    kernels.set_compute_capability(*capability, code_arch=code_arch)
    kernels.set_kernel_path(path)
    q = random_tensor((1, 64, 32), torch.float16)
    out = torch.empty_like(q)
    workspace = torch.zeros(1 << 18)
    qkv = random_tensor((64, 96, 4, 4), torch.float16)
    out_qkv = torch.empty((64, 32, 4, 4), dtype=torch.float16)
    calls = [
        ("effatt", "linearFusedMmaKernel", lambda: kernels.efficient_attention(
            q.data_ptr(), q.data_ptr(), q.data_ptr(), out.data_ptr(), 1, 64, 32, 1, workspace.data_ptr(), 1 << 20,
            dtype="float16", check=False)),
        ("lite_mla_qt", "linearFusedMmaKernel", lambda: kernels.lite_mla(
            qkv.data_ptr(), out_qkv.data_ptr(), 1, 96, 4, 4, 16, workspace.data_ptr(), 1 << 20,
            kernel="quadratic_taylor", dtype="float16", check=False)),
        ("lite_mla_relu_batch1", "linearFusedMmaKernel", lambda: kernels.lite_mla(
            qkv.data_ptr(), out_qkv.data_ptr(), 1, 96, 4, 4, 16, workspace.data_ptr(), 1 << 20, kernel="relu",
            dtype="float16", check=False)),
        ("lite_mla_relu_batch64", "linearFusedMmaKernel", lambda: kernels.lite_mla(
            qkv.data_ptr(), out_qkv.data_ptr(), 64, 96, 4, 4, 16, workspace.data_ptr(), 1 << 20, kernel="relu",
            dtype="float16", check=False)),
        ("soft", "softNewtonMmaKernel", lambda: kernels.soft_kernel_attention(
            q.data_ptr(), q.data_ptr(), q.data_ptr(), out.data_ptr(), 1, 64, 16, 32, 1, workspace.data_ptr(), 1 << 20,
            dtype="float16", check=False)),
    ]
    for name, kernel, call in calls:
        kernels.reset()
        status = call()
        launches = kernels.launches()
        wanted = expected[name] if isinstance(expected, dict) else expected
        if wanted == "tensor core":
            assert status == kernels_abi.STATUS_SUCCESS and launches[0].startswith(kernel), (name, launches)
        elif wanted == "scalar":
            assert status == kernels_abi.STATUS_SUCCESS and "Mma" not in " ".join(launches), (name, launches)
        else:
            assert status == kernels_abi.STATUS_UNSUPPORTED and launches == [], launches
            assert expected in kernels.last_error() and "forced" in kernels.last_error()
