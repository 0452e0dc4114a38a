"""Each CUDA kernel through the C ABI (ctypes + torch CUDA tensors) against the PyTorch reference operators.

Reference: edgeattn.ops functional cores evaluated in FP64 on the same (FP16-rounded,
for the FP16 cases) inputs. Criteria:
  FP32: max |kernel - ref64| <= 1e-4 * max |ref64|
  FP16: max |kernel - ref64| <= 2 * max |torch_fp16 - ref64| (+ a 1e-6 * max|ref64| floor), where torch_fp16 is
        the same reference operator run on the FP16 tensors (PyTorch's own FP16 answer).
Shapes: CSWin-T24181 stages (maps 56/28/14/7 at 224, scaled by 384/224 and 512/224; channels 64/128/256/512,
heads 2/4/8/16; the ELFATT branches get half the channels and heads), odd batch sizes, plus one edge case per
kernel (misaligned base pointers, ragged sizes, windows larger than the map, global-memory Newton path...).
Kernel paths: every FP16 case runs twice, with the scalar kernels forced (edgeattn_set_kernel_path, the sm_53
path) and with the tensor-core kernels forced (sm_80+ only: skipped on older GPUs); blockify also a third time, on
its one-warp-per-unit tensor-core kernel (tensor_core_warp; tensor_core runs its pipelined kernel where head_dim and
channels are multiples of 8 and the tensors 16-byte aligned); FP32 runs the scalar kernels (there is no TF32 path). A profiler check confirms which kernel each setting launches.
Marked `gpu`: skipped on machines without CUDA (like CI).
"""

import pytest

torch = pytest.importorskip("torch")

from edgeattn.ops.blockify import blockify_attention  # noqa: E402
from edgeattn.ops.efficient_attention import efficient_attention  # noqa: E402
from edgeattn.ops.litemla import lite_mla_attention  # noqa: E402
from edgeattn.ops.soft import soft_kernel_attention  # noqa: E402
from edgeattn.plugins.kernels_abi import KernelsLibrary  # noqa: E402
from kernel_reference_check import assert_matches_reference  # noqa: E402

pytestmark = pytest.mark.gpu

RESOLUTIONS = (224, 384, 512)
STAGES = ((56, 64, 2), (28, 128, 4), (14, 256, 8), (7, 512, 16))  # (map side at 224, channels, heads)
BLOCK_SIZES = (7, 7, 14, 7)  # ELFATT 49-49-196-49


def stage_shapes():
    """(resolution, stage index, map side, ELFATT-branch channels, branch heads) for every CSWin-T24181 stage."""
    for resolution in RESOLUTIONS:
        for index, (side224, channels, heads) in enumerate(STAGES):
            side = side224 * resolution // 224
            yield resolution, index, side, channels // 2, heads // 2


@pytest.fixture(scope="module")
def kernels(gpu_kernels_library):
    return KernelsLibrary(gpu_kernels_library)


#: (dtype, kernel path): FP32 has scalar kernels only; FP16 runs on both paths
DTYPE_PATHS = [pytest.param(torch.float32, "scalar", id="fp32"),
               pytest.param(torch.float16, "scalar", id="fp16-scalar"),
               pytest.param(torch.float16, "tensor_core", id="fp16-tensor_core")]
#: blockify has two tensor-core kernels: the pipelined one (tensor_core) and the one-warp-per-unit one
BLOCKIFY_DTYPE_PATHS = DTYPE_PATHS + [pytest.param(torch.float16, "tensor_core_warp", id="fp16-tensor_core_warp")]


@pytest.fixture
def kernel_path(kernels):
    """``kernel_path(name)`` forces "scalar", "tensor_core" or "tensor_core_warp" for the test (skips tensor cores
    below sm_80)."""
    def apply(path):
        if path.startswith("tensor_core") and torch.cuda.get_device_capability() < (8, 0):
            pytest.skip("tensor-core kernels need sm_80+; this GPU is sm_{}{}".format(
                *torch.cuda.get_device_capability()))
        kernels.set_kernel_path(path)
    yield apply
    kernels.set_kernel_path("auto")


@pytest.fixture(autouse=True)
def exact_reference_math():
    previous = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False  # the LePE conv of the reference must not drop to TF32
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = previous


def device_tensor(shape, dtype, scale=1.0, misaligned=False, seed=0):
    """Random CUDA tensor; misaligned=True puts its data one element past an allocation boundary."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    values = (torch.randn(*shape, generator=generator, dtype=torch.float64) * scale).to(dtype)
    if not misaligned:
        return values.cuda().contiguous()
    storage = torch.empty(values.numel() + 1, dtype=dtype, device="cuda")
    view = storage[1:].view(*shape)
    view.copy_(values.cuda())
    assert view.data_ptr() % 16 != 0
    return view


def empty_like(reference, misaligned=False):
    """An output buffer poisoned with NaN: the caching allocator hands a test the block the previous test (same
    shape, same inputs, the other kernel path) left its correct answer in, so an unwritten element would pass."""
    if not misaligned:
        return torch.full_like(reference, float("nan"))
    storage = torch.full((reference.numel() + 1,), float("nan"), dtype=reference.dtype, device="cuda")
    return storage[1:].view(*reference.shape)


def workspace(nbytes):
    """Workspace filled with 0xFF bytes (NaN in FP16 and FP32), as TensorRT hands it over: never zeroed."""
    return torch.full((max(int(nbytes), 1),), 255, dtype=torch.uint8, device="cuda")


def stream():
    return torch.cuda.current_stream().cuda_stream


def dtype_name(dtype):
    return {torch.float32: "float32", torch.float16: "float16"}[dtype]


def check(result, reference_fn, inputs, dtype, label):
    """Compare a kernel result with the FP64 reference (and PyTorch's own FP16 answer for FP16)."""
    torch.cuda.synchronize()
    assert_matches_reference(result, reference_fn, inputs, dtype, label)


# ---- blockify attention ------------------------------------------------------------------------------------------
def run_blockify(kernels, q, k, v, weight, bias, height, width, heads, window, scale, padding, misaligned=False):
    out = empty_like(q, misaligned)
    b, _, c = q.shape
    kernels.blockify_attention(
        q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), b, height, width, c, heads, window, scale=scale,
        padding=padding, dtype=dtype_name(q.dtype), lepe_weight=weight.data_ptr() if weight is not None else None,
        lepe_bias=bias.data_ptr() if bias is not None else None, stream=stream())
    return out


@pytest.mark.parametrize("dtype, path", BLOCKIFY_DTYPE_PATHS)
@pytest.mark.parametrize("resolution, stage, side, channels, heads", list(stage_shapes()))
def test_blockify_attention_cswin_stages(kernels, kernel_path, dtype, path, resolution, stage, side, channels, heads):
    kernel_path(path)
    window = BLOCK_SIZES[stage]
    padding = "none" if side % window == 0 else ("zeros" if stage % 2 == 0 else "masked")
    batch = 3 if side <= 64 else 1
    has_lepe = stage != 2
    n = side * side
    q, k, v = (device_tensor((batch, n, channels), dtype, seed=i) for i in range(3))
    weight = device_tensor((channels, 1, 3, 3), dtype, scale=0.3, seed=3) if has_lepe else None
    bias = device_tensor((channels,), dtype, scale=0.1, seed=4) if has_lepe else None
    out = run_blockify(kernels, q, k, v, weight, bias, side, side, heads, window, 0.0, padding)

    def reference(q_, k_, v_, w_, b_):
        return blockify_attention(q_, k_, v_, num_heads=heads, height=side, width=side, window_size=window,
                                  scale=None, lepe_weight=w_, lepe_bias=b_, padding=padding)

    check(out, reference, [q, k, v, weight, bias], dtype,
          "blockify {}px stage {} {} pad={}".format(resolution, stage + 1, dtype, padding))


@pytest.mark.parametrize("dtype, path", BLOCKIFY_DTYPE_PATHS)
@pytest.mark.parametrize("padding", ["zeros", "masked"])
def test_blockify_attention_edge_cases(kernels, kernel_path, dtype, path, padding):
    """Misaligned pointers, head_dim 13 (generic path), a window larger than a 5x9 map, explicit scale."""
    kernel_path(path)
    height, width, heads, channels, window, batch = 5, 9, 3, 39, 11, 5
    q, k, v = (device_tensor((batch, height * width, channels), dtype, misaligned=True, seed=10 + i) for i in range(3))
    weight = device_tensor((channels, 1, 3, 3), dtype, scale=0.3, misaligned=True, seed=13)
    bias = device_tensor((channels,), dtype, scale=0.1, misaligned=True, seed=14)
    out = run_blockify(kernels, q, k, v, weight, bias, height, width, heads, window, 0.37, padding, misaligned=True)

    def reference(q_, k_, v_, w_, b_):
        return blockify_attention(q_, k_, v_, num_heads=heads, height=height, width=width, window_size=window,
                                  scale=0.37, lepe_weight=w_, lepe_bias=b_, padding=padding)

    check(out, reference, [q, k, v, weight, bias], dtype, "blockify edge {} {}".format(padding, dtype))


def model_windows():
    """(resolution, stage, side, branch channels, branch heads, window) with CSWin-T24181-ELFATT's default windows at
    384 and 512 (stage-4 side; stage-3 side for stage 3: 12-12-24-12, 16-16-32-16): windows of 144 to 1024 keys."""
    for resolution in (384, 512):
        sides = [resolution // 4, resolution // 8, resolution // 16, resolution // 32]
        for index, (_, channels, heads) in enumerate(STAGES):
            window = sides[2] if index == 2 else sides[3]
            yield resolution, index, sides[index], channels // 2, heads // 2, window


@pytest.mark.parametrize("dtype, path", BLOCKIFY_DTYPE_PATHS)
@pytest.mark.parametrize("resolution, stage, side, channels, heads, window", list(model_windows()))
def test_blockify_attention_model_windows(kernels, kernel_path, dtype, path, resolution, stage, side, channels,
                                          heads, window):
    """The windows the model uses at 384 and 512 (several key chunks per window: the tensor-core kernel's
    four-tiles-per-pass variant), LePE on, batch 2."""
    kernel_path(path)
    q, k, v = (device_tensor((2, side * side, channels), dtype, seed=80 + i) for i in range(3))
    weight = device_tensor((channels, 1, 3, 3), dtype, scale=0.3, seed=83)
    bias = device_tensor((channels,), dtype, scale=0.1, seed=84)
    out = run_blockify(kernels, q, k, v, weight, bias, side, side, heads, window, 0.0, "none")

    def reference(q_, k_, v_, w_, b_):
        return blockify_attention(q_, k_, v_, num_heads=heads, height=side, width=side, window_size=window,
                                  scale=None, lepe_weight=w_, lepe_bias=b_, padding="none")

    check(out, reference, [q, k, v, weight, bias], dtype,
          "blockify {}px stage {} window {} {} {}".format(resolution, stage + 1, window, dtype, path))


# ---- EFFATT ----------------------------------------------------------------------------------------------------------
def run_efficient(kernels, q, k, v, heads, misaligned=False):
    b, n, c = q.shape
    out = empty_like(q, misaligned)
    nbytes = kernels.efficient_attention_workspace_size(b, n, c, heads)
    ws = workspace(nbytes)
    kernels.efficient_attention(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), b, n, c, heads,
                                ws.data_ptr(), nbytes, dtype=dtype_name(q.dtype), stream=stream())
    return out


@pytest.mark.parametrize("dtype, path", DTYPE_PATHS)
@pytest.mark.parametrize("resolution, stage, side, channels, heads", list(stage_shapes()))
def test_efficient_attention_cswin_stages(kernels, kernel_path, dtype, path, resolution, stage, side, channels, heads):
    kernel_path(path)
    batch = 3 if side <= 64 else 1
    q, k, v = (device_tensor((batch, side * side, channels), dtype, scale=2.0, seed=20 + i) for i in range(3))
    out = run_efficient(kernels, q, k, v, heads)
    check(out, lambda q_, k_, v_: efficient_attention(q_, k_, v_, num_heads=heads), [q, k, v], dtype,
          "effatt {}px stage {} {}".format(resolution, stage + 1, dtype))


@pytest.mark.parametrize("dtype, path", DTYPE_PATHS)
@pytest.mark.parametrize("tokens, channels, heads", [(1, 32, 1), (257, 60, 3), (65537, 32, 1)])
def test_efficient_attention_edge_cases(kernels, kernel_path, dtype, path, tokens, channels, heads):
    """One token, ragged N and head_dim 20 with misaligned pointers, and N past the 256-split cap."""
    kernel_path(path)
    q, k, v = (device_tensor((3, tokens, channels), dtype, scale=3.0, misaligned=True, seed=30 + i) for i in range(3))
    out = run_efficient(kernels, q, k, v, heads, misaligned=True)
    check(out, lambda q_, k_, v_: efficient_attention(q_, k_, v_, num_heads=heads), [q, k, v], dtype,
          "effatt edge N={} {}".format(tokens, dtype))


# ---- LiteMLA ---------------------------------------------------------------------------------------------------------
def run_lite_mla(kernels, qkv, head_dim, kernel, eps, alpha, beta, gamma, misaligned=False):
    b, c, h, w = qkv.shape
    out = empty_like(torch.empty(b, c // 3, h, w, dtype=qkv.dtype, device="cuda"), misaligned)
    nbytes = kernels.lite_mla_workspace_size(b, c, h, w, head_dim, kernel)
    ws = workspace(nbytes)
    kernels.lite_mla(qkv.data_ptr(), out.data_ptr(), b, c, h, w, head_dim, ws.data_ptr(), nbytes, kernel=kernel,
                     eps=eps, qt_alpha=alpha, qt_beta=beta, qt_gamma=gamma, dtype=dtype_name(qkv.dtype),
                     stream=stream())
    return out


@pytest.mark.parametrize("dtype, path", DTYPE_PATHS)
@pytest.mark.parametrize("kernel", ["relu", "quadratic_taylor"])
@pytest.mark.parametrize("resolution, stage, side, channels, heads", list(stage_shapes()))
def test_lite_mla_cswin_stages(kernels, kernel_path, dtype, path, kernel, resolution, stage, side, channels, heads):
    kernel_path(path)
    head_dim = 32
    groups = 2 * channels // head_dim  # the full stage width, LiteMLA-style groups of 32
    batch = 3 if side <= 64 else 1
    qkv = device_tensor((batch, groups * 3 * head_dim, side, side), dtype, seed=40)
    alpha, beta, gamma = (1.0,), (1.0,), (1.0,)
    eps = 1e-15

    def reference(qkv_):
        return lite_mla_attention(qkv_, head_dim=head_dim, kernel=kernel, eps=eps, qt_alpha=alpha, qt_beta=beta,
                                  qt_gamma=gamma)

    out = run_lite_mla(kernels, qkv, head_dim, kernel, eps, alpha, beta, gamma)
    check(out, reference, [qkv], dtype, "litemla {} {}px stage {} {}".format(kernel, resolution, stage + 1, dtype))


@pytest.mark.parametrize("dtype, path", DTYPE_PATHS)
def test_lite_mla_edge_cases(kernels, kernel_path, dtype, path):
    """head_dim 16, per-group QT coefficients, a 7x9 map, misaligned pointers, and the ReLU all-zero query row."""
    kernel_path(path)
    head_dim, groups, batch, height, width = 16, 5, 3, 7, 9
    qkv = device_tensor((batch, groups * 3 * head_dim, height, width), dtype, misaligned=True, seed=50)
    qkv[:, :head_dim, 0, 0] = -1.0  # group 0, token 0: relu(q) = 0 -> out = 0 / (0 + eps)
    alpha = [0.5, 1.0, 0.25, 0.75, 1.0]
    beta = [1.0, 0.5, 0.75, 0.25, 1.0]
    gamma = [1.0, 2.0, 1.5, 1.0, 0.5]
    for kernel in ("relu", "quadratic_taylor"):
        out = run_lite_mla(kernels, qkv, head_dim, kernel, 1e-6, alpha, beta, gamma, misaligned=True)

        def reference(qkv_):
            return lite_mla_attention(qkv_, head_dim=head_dim, kernel=kernel, eps=1e-6, qt_alpha=alpha,
                                      qt_beta=beta, qt_gamma=gamma)

        check(out, reference, [qkv], dtype, "litemla edge {} {}".format(kernel, dtype))


# ---- SOFT ------------------------------------------------------------------------------------------------------------
def run_soft(kernels, q, landmarks, v, heads, iters, symmetric, misaligned=False):
    b, n, c = q.shape
    m = landmarks.shape[1]
    out = empty_like(q, misaligned)
    nbytes = kernels.soft_kernel_attention_workspace_size(b, n, m, c, heads)
    ws = workspace(nbytes)
    kernels.soft_kernel_attention(q.data_ptr(), landmarks.data_ptr(), v.data_ptr(), out.data_ptr(), b, n, m, c, heads,
                                  ws.data_ptr(), nbytes, newton_iters=iters, symmetric_norm=1 if symmetric else 0,
                                  dtype=dtype_name(q.dtype), stream=stream())
    return out


@pytest.mark.parametrize("dtype, path", DTYPE_PATHS)
@pytest.mark.parametrize("resolution, stage, side, channels, heads", list(stage_shapes()))
def test_soft_kernel_attention_cswin_stages(kernels, kernel_path, dtype, path, resolution, stage, side, channels,
                                            heads):
    """SOFT-style 8x8/4x4/2x2/1x1 landmark grids: M = 49 at 224 (shared-memory Newton), 144 / 256 at 384 / 512
    for stage 1 (global-memory Newton path)."""
    kernel_path(path)
    channels, heads = 2 * channels, 2 * heads  # SOFT attends over the full stage width
    stride = (8, 4, 2, 1)[stage]
    m = (side // stride) ** 2
    d = channels // heads
    batch = 3 if side <= 64 else 1
    q = device_tensor((batch, side * side, channels), dtype, scale=d ** -0.25, seed=60)
    landmarks = device_tensor((batch, m, channels), dtype, scale=d ** -0.25, seed=61)
    v = device_tensor((batch, side * side, channels), dtype, seed=62)
    out = run_soft(kernels, q, landmarks, v, heads, 20, True)

    def reference(q_, l_, v_):
        return soft_kernel_attention(q_, l_, v_, num_heads=heads, newton_iters=20, symmetric_norm=True)

    check(out, reference, [q, landmarks, v], dtype,
          "soft++ {}px stage {} M={} {}".format(resolution, stage + 1, m, dtype))


@pytest.mark.parametrize("dtype, path", DTYPE_PATHS)
@pytest.mark.parametrize("m, channels, heads, symmetric, iters", [
    (1, 48, 2, True, 20),     # a single landmark, head_dim 24
    (53, 40, 2, False, 20),   # SOFT without normalisation, M not a multiple of 4, head_dim 20
    (200, 64, 2, True, 7),    # global-memory Newton path, few iterations
])
def test_soft_kernel_attention_edge_cases(kernels, kernel_path, dtype, path, m, channels, heads, symmetric, iters):
    kernel_path(path)
    d = channels // heads
    tokens, batch = 1000, 3
    q = device_tensor((batch, tokens, channels), dtype, scale=d ** -0.25, misaligned=True, seed=70)
    landmarks = device_tensor((batch, m, channels), dtype, scale=d ** -0.25, misaligned=True, seed=71)
    v = device_tensor((batch, tokens, channels), dtype, misaligned=True, seed=72)
    out = run_soft(kernels, q, landmarks, v, heads, iters, symmetric, misaligned=True)

    def reference(q_, l_, v_):
        return soft_kernel_attention(q_, l_, v_, num_heads=heads, newton_iters=iters, symmetric_norm=symmetric)

    check(out, reference, [q, landmarks, v], dtype, "soft edge M={} {}".format(m, dtype))


@pytest.mark.parametrize("dtype, path", DTYPE_PATHS)
def test_every_kernel_runs_inside_a_cuda_graph(kernels, kernel_path, dtype, path):
    """TensorRT calls enqueue while a CUDA graph is being captured (trtexec --useCudaGraph, IExecutionContext in a
    captured stream): each op launched during capture must record, not run or fail, and the graph replayed on new
    input values (same buffers) must give the reference answer for those values."""
    kernel_path(path)
    h, w, c, heads = 14, 10, 64, 2  # a 14x10 map: blockify pads the width to 14
    q, k, v = (device_tensor((2, h * w, c), dtype, seed=90 + i) for i in range(3))
    lepe_w = device_tensor((c, 1, 3, 3), dtype, scale=0.3, seed=93)
    lepe_b = device_tensor((c,), dtype, scale=0.1, seed=94)
    qkv = device_tensor((2, 6 * 32, h, w), dtype, seed=95)
    landmarks = device_tensor((2, 49, c), dtype, scale=(c // heads) ** -0.25, seed=96)
    q_soft = device_tensor((2, h * w, c), dtype, scale=(c // heads) ** -0.25, seed=97)
    launches = {
        "blockify": lambda: run_blockify(kernels, q, k, v, lepe_w, lepe_b, h, w, heads, 7, 0.0, "zeros"),
        "effatt": lambda: run_efficient(kernels, q, k, v, heads),
        "litemla": lambda: run_lite_mla(kernels, qkv, 32, "relu", 1e-15, (1.0,), (1.0,), (1.0,)),
        "soft": lambda: run_soft(kernels, q_soft, landmarks, v, heads, 20, True),
    }
    references = {
        "blockify": (lambda q_, k_, v_, w_, b_: blockify_attention(
            q_, k_, v_, num_heads=heads, height=h, width=w, window_size=7, scale=None, lepe_weight=w_, lepe_bias=b_,
            padding="zeros"), [q, k, v, lepe_w, lepe_b]),
        "effatt": (lambda q_, k_, v_: efficient_attention(q_, k_, v_, num_heads=heads), [q, k, v]),
        "litemla": (lambda qkv_: lite_mla_attention(qkv_, head_dim=32, kernel="relu", eps=1e-15, qt_alpha=(1.0,),
                                                    qt_beta=(1.0,), qt_gamma=(1.0,)), [qkv]),
        "soft": (lambda q_, l_, v_: soft_kernel_attention(q_, l_, v_, num_heads=heads, newton_iters=20,
                                                          symmetric_norm=True), [q_soft, landmarks, v]),
    }
    for name, launch in launches.items():
        launch()  # the first launch outside capture: the library's one-time device queries
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = {name: launch() for name, launch in launches.items()}
    assert kernels.last_error() == "", kernels.last_error()
    generator = torch.Generator(device="cpu").manual_seed(99)
    for tensor in (q, k, v, qkv, landmarks, q_soft):  # new values in the captured buffers
        tensor.copy_((torch.randn(tensor.shape, generator=generator, dtype=torch.float64) *
                      tensor.float().std().item()).to(dtype))
    graph.replay()
    for name, (reference, inputs) in references.items():
        check(outputs[name], reference, inputs, dtype, "{} replayed from a CUDA graph {} {}".format(name, dtype, path))


@pytest.mark.parametrize("path, expected, absent", [
    ("scalar", "blockifyAttentionKernel", "MmaKernel"),
    ("tensor_core", "blockifyFlashMmaKernel", "blockifyAttentionKernel"),
    ("tensor_core_warp", "blockifyMmaKernel", "blockifyFlashMmaKernel")])
def test_kernel_path_setting_launches_that_kernel(kernels, kernel_path, path, expected, absent):
    """The CUDA profiler sees which kernel an FP16 blockify launch ran under each forced path."""
    kernel_path(path)
    q, k, v = (device_tensor((2, 14 * 14, 64), torch.float16, seed=i) for i in range(3))
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        run_blockify(kernels, q, k, v, None, None, 14, 14, 2, 7, 0.0, "none")
        torch.cuda.synchronize()
    names = [event.name for event in profile.events()]
    if not names:
        pytest.skip("the CUDA profiler (CUPTI) recorded no kernels here")
    assert any(expected in name for name in names) and not any(absent in name for name in names), names


def test_kernels_leave_no_cuda_error(kernels):
    torch.cuda.synchronize()
    assert kernels.last_error() == ""
