"""The CUDA implementations of the torch.ops.edgeattn.* custom ops (edgeattn/plugins/cuda_ops.py), without a GPU.

Everything short of a CUDA launch: the registration for the CUDA dispatch key beside the reference implementation
and the fake (meta) one; the boundary checks (device, dtype, contiguity, shapes) with one clear error each; the
marshalling of every argument into the C ABI, recorded by a fake library; and the same code run end to end over the
CPU emulation of the kernels (host pointers, KernelOps(device_type="cpu")), checked against the PyTorch reference
ops with the GPU tests' FP32 criterion. On a GPU, tests/plugins/test_plugins_kernels_gpu.py runs the registered ops
and captures them in a CUDA graph.
"""
import pytest

torch = pytest.importorskip("torch")

from edgeattn.ops._common import OpShapeError  # noqa: E402
from edgeattn.ops.blockify import blockify_attention  # noqa: E402
from edgeattn.ops.efficient_attention import efficient_attention  # noqa: E402
from edgeattn.ops.litemla import lite_mla_attention  # noqa: E402
from edgeattn.ops.soft import soft_kernel_attention  # noqa: E402
from edgeattn.plugins import cuda_ops, kernels_abi  # noqa: E402
from test_plugins_kernels_emulated import emulated_kernels, emulated_library, kernels  # noqa: E402,F401


class FakeKernels(object):
    """Records each launcher call's arguments (kernels_abi.KernelsLibrary's signatures) and returns ``status``."""

    WORKSPACE = {"efficient_attention": 4096, "lite_mla": 512, "soft_kernel_attention": 12288}

    def __init__(self, status=0):
        self.calls = []
        self.status = status

    def _record(self, name, *args, **kwargs):
        self.calls.append((name, args, kwargs))
        if self.status:
            raise kernels_abi.KernelError("edgeattn_" + name, self.status, "planted failure")
        return 0

    def efficient_attention_workspace_size(self, *args):
        self.calls.append(("efficient_attention_workspace_size", args, {}))
        return self.WORKSPACE["efficient_attention"]

    def lite_mla_workspace_size(self, *args):
        self.calls.append(("lite_mla_workspace_size", args, {}))
        return self.WORKSPACE["lite_mla"]

    def soft_kernel_attention_workspace_size(self, *args):
        self.calls.append(("soft_kernel_attention_workspace_size", args, {}))
        return self.WORKSPACE["soft_kernel_attention"]

    def blockify_attention(self, *args, **kwargs):
        return self._record("blockify_attention", *args, **kwargs)

    def efficient_attention(self, *args, **kwargs):
        return self._record("efficient_attention", *args, **kwargs)

    def lite_mla(self, *args, **kwargs):
        return self._record("lite_mla", *args, **kwargs)

    def soft_kernel_attention(self, *args, **kwargs):
        return self._record("soft_kernel_attention", *args, **kwargs)


def _launch(fake):
    launches = [call for call in fake.calls if not call[0].endswith("_workspace_size")]
    assert len(launches) == 1, fake.calls
    return launches[0]


def _tokens(*shape, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)


# ---- registration --------------------------------------------------------------------------------------------------
def test_register_adds_a_cuda_kernel_beside_the_reference_and_fake_impls():
    fake = FakeKernels()
    ops = cuda_ops.register(fake)
    assert cuda_ops.register(fake) is ops and cuda_ops.registered("cuda") is ops  # registering again: a no-op
    for name in cuda_ops.OP_NAMES:
        qualified = "edgeattn::" + name
        assert torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "CUDA"), name
    # CPU tensors still run the reference, never the kernels
    q = _tokens(1, 49, 32)
    out = torch.ops.edgeattn.efficient_attention(q, q, q, 2)
    torch.testing.assert_close(out, efficient_attention(q, q, q, num_heads=2))
    assert fake.calls == []


def test_the_fake_impls_give_the_output_shapes_on_meta_tensors():
    q = torch.empty(2, 3136, 64, device="meta", dtype=torch.float16)
    assert torch.ops.edgeattn.blockify_attention(q, q, q, None, None, 2, 56, 56, 7, 0.0, "none").shape == q.shape
    assert torch.ops.edgeattn.efficient_attention(q, q, q, 2).shape == q.shape
    landmarks = torch.empty(2, 49, 64, device="meta", dtype=torch.float16)
    assert torch.ops.edgeattn.soft_kernel_attention(q, landmarks, q, 2, 20, 1).shape == q.shape
    qkv = torch.empty(2, 96, 14, 14, device="meta", dtype=torch.float16)
    out = torch.ops.edgeattn.lite_mla(qkv, 16, "relu", 1e-15, [1.0], [1.0], [1.0])
    assert out.shape == (2, 32, 14, 14) and out.dtype == torch.float16


# ---- marshalling into the C ABI ----------------------------------------------------------------------------------
def test_blockify_hands_the_kernels_its_pointers_sizes_and_attributes():
    fake = FakeKernels()
    ops = cuda_ops.KernelOps(fake, device_type="cpu")
    q, k, v = (_tokens(3, 196, 64, dtype=torch.float16, seed=s) for s in range(3))
    weight, bias = _tokens(64, 1, 3, 3, dtype=torch.float16), _tokens(64, dtype=torch.float16)
    out = ops.blockify_attention(q, k, v, weight, bias, 2, 14, 14, 7, 0.125, "masked")
    name, args, kwargs = _launch(fake)
    assert name == "blockify_attention"
    assert args == (q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), 3, 14, 14, 64, 2, 7)
    assert kwargs == {"scale": 0.125, "padding": "masked", "dtype": "float16", "lepe_weight": weight.data_ptr(),
                      "lepe_bias": bias.data_ptr(), "stream": 0}
    assert out.shape == q.shape and out.dtype == torch.float16 and out.data_ptr() not in (q.data_ptr(), k.data_ptr())
    fake.calls.clear()
    ops.blockify_attention(q, k, v, None, None, 2, 14, 14, 7, 0.0, "none")
    assert _launch(fake)[2]["lepe_weight"] is None and _launch(fake)[2]["lepe_bias"] is None


def test_the_workspace_ops_size_and_pass_their_workspace():
    fake = FakeKernels()
    ops = cuda_ops.KernelOps(fake, device_type="cpu")
    q, k, v = (_tokens(2, 49, 64, seed=s) for s in range(3))
    out = ops.efficient_attention(q, k, v, 2)
    assert fake.calls[0] == ("efficient_attention_workspace_size", (2, 49, 64, 2), {})
    name, args, kwargs = _launch(fake)
    assert args[:8] == (q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), 2, 49, 64, 2)
    assert args[9] == FakeKernels.WORKSPACE["efficient_attention"] and args[8] not in (0, None)
    assert kwargs == {"dtype": "float32", "stream": 0}

    fake.calls.clear()
    qkv = _tokens(2, 96, 7, 9)
    out = ops.lite_mla(qkv, 16, "quadratic_taylor", 1e-6, [0.5, 0.25], [1.0, 2.0], [3.0, 4.0])
    assert fake.calls[0] == ("lite_mla_workspace_size", (2, 96, 7, 9, 16, "quadratic_taylor"), {})
    name, args, kwargs = _launch(fake)
    assert args[:7] == (qkv.data_ptr(), out.data_ptr(), 2, 96, 7, 9, 16)
    assert args[8] == FakeKernels.WORKSPACE["lite_mla"] and out.shape == (2, 32, 7, 9)
    assert kwargs == {"kernel": "quadratic_taylor", "eps": pytest.approx(1e-6), "qt_alpha": [0.5, 0.25],
                      "qt_beta": [1.0, 2.0], "qt_gamma": [3.0, 4.0], "dtype": "float32", "stream": 0}

    fake.calls.clear()
    landmarks = _tokens(2, 16, 64, seed=7)
    out = ops.soft_kernel_attention(q, landmarks, v, 2, 12, 0)
    assert fake.calls[0] == ("soft_kernel_attention_workspace_size", (2, 49, 16, 64, 2), {})
    name, args, kwargs = _launch(fake)
    assert args[:9] == (q.data_ptr(), landmarks.data_ptr(), v.data_ptr(), out.data_ptr(), 2, 49, 16, 64, 2)
    assert args[10] == FakeKernels.WORKSPACE["soft_kernel_attention"]
    assert kwargs == {"newton_iters": 12, "symmetric_norm": 0, "dtype": "float32", "stream": 0}


# ---- the boundary -------------------------------------------------------------------------------------------------
def test_tensors_not_on_the_kernels_device_are_refused():
    ops = cuda_ops.KernelOps(FakeKernels(), device_type="cuda")
    q = _tokens(1, 49, 32)
    with pytest.raises(OpShapeError, match=r"edgeattn::efficient_attention: q is on cpu, .* need cuda tensors"):
        ops.efficient_attention(q, q, q, 1)


@pytest.mark.parametrize("case, pattern", [
    ("float64", r"q is float64, the edgeattn kernels take float32 or float16"),
    ("mixed", r"k is float16 but q is float32: one dtype per call"),
    ("strided", r"k \(1, 49, 32\) is not contiguous \(strides \(4704, 96, 1\)\)"),
    ("shapes", r"q, k, v must share a shape"),
])
def test_bad_tensors_are_refused_with_one_clear_error(case, pattern):
    fake = FakeKernels()
    ops = cuda_ops.KernelOps(fake, device_type="cpu")
    q = _tokens(1, 49, 32)
    k = v = q
    if case == "float64":
        q = q.double()
        k = v = q
    elif case == "mixed":
        k = q.half()
    elif case == "strided":
        k = _tokens(1, 49, 96).chunk(3, dim=-1)[1]  # a chunk of a qkv projection
    elif case == "shapes":
        k = _tokens(1, 48, 32)
    with pytest.raises(OpShapeError, match=pattern):
        ops.efficient_attention(q, k, v, 1)
    assert [c for c in fake.calls if not c[0].endswith("_workspace_size")] == []  # nothing launched


def test_a_failing_launch_raises_the_kernels_reason():
    ops = cuda_ops.KernelOps(FakeKernels(status=kernels_abi.STATUS_INVALID_ARGUMENT), device_type="cpu")
    q = _tokens(1, 49, 32)
    with pytest.raises(kernels_abi.KernelError, match="planted failure") as caught:
        ops.efficient_attention(q, q, q, 1)
    assert caught.value.status == kernels_abi.STATUS_INVALID_ARGUMENT


def test_the_model_wrappers_hand_the_ops_contiguous_tensors(monkeypatch):
    """TokenAttention splits one qkv projection into q, k, v chunks (strided views): with the custom ops on, run_*
    passes them on contiguous, so the registered CUDA ops accept a whole model's calls."""
    from edgeattn.ops.blockify import run_blockify_attention
    from edgeattn.ops.config import use_plugin_ops
    from edgeattn.ops.efficient_attention import run_efficient_attention
    from edgeattn.ops.soft import run_soft_kernel_attention
    seen = {}

    def spy(name):
        def record(*args):
            seen[name] = [a.is_contiguous() for a in args if torch.is_tensor(a)]
            return args[0]
        return record

    for name in ("blockify_attention", "efficient_attention", "soft_kernel_attention"):
        monkeypatch.setattr(torch.ops.edgeattn, name, spy(name))
    q, k, v = _tokens(1, 49, 96).chunk(3, dim=-1)
    assert not k.is_contiguous()
    with use_plugin_ops():
        run_blockify_attention(q, k, v, num_heads=1, height=7, width=7, window_size=7)
        run_efficient_attention(q, k, v, num_heads=1)
        run_soft_kernel_attention(q, k, v, num_heads=1)
    assert seen == {"blockify_attention": [True] * 3, "efficient_attention": [True] * 3,
                    "soft_kernel_attention": [True] * 3}


# ---- end to end over the emulated kernels --------------------------------------------------------------------------
def _assert_fp32_close(out, reference, label):
    reference = reference.double()
    error = (out.double() - reference).abs().max().item()
    assert error <= 1e-4 * reference.abs().max().item(), (label, error)


def test_the_ops_run_the_emulated_kernels_and_match_the_reference(kernels):
    """KernelOps over the CPU emulation of the same kernels (host pointers): every argument reaches the kernels
    right, or the result would differ from the PyTorch reference (FP32 criterion of the GPU tests)."""
    ops = cuda_ops.KernelOps(kernels, device_type="cpu")
    q, k, v = (_tokens(2, 196, 64, seed=s) for s in range(3))
    weight, bias = _tokens(64, 1, 3, 3, seed=4), _tokens(64, seed=5)
    _assert_fp32_close(ops.blockify_attention(q, k, v, weight, bias, 2, 14, 14, 7, 0.0, "masked"),
                       blockify_attention(q, k, v, num_heads=2, height=14, width=14, window_size=7,
                                          lepe_weight=weight, lepe_bias=bias, padding="masked"), "blockify")
    _assert_fp32_close(ops.efficient_attention(q, k, v, 2), efficient_attention(q, k, v, num_heads=2), "effatt")
    qkv = _tokens(2, 96, 7, 9, seed=6)
    coefficients = ([0.5, 0.25], [1.0, 0.75], [0.3, 0.6])
    _assert_fp32_close(ops.lite_mla(qkv, 16, "quadratic_taylor", 1e-6, *coefficients),
                       lite_mla_attention(qkv, head_dim=16, kernel="quadratic_taylor", eps=1e-6,
                                          qt_alpha=coefficients[0], qt_beta=coefficients[1],
                                          qt_gamma=coefficients[2]), "lite_mla")
    landmarks = _tokens(2, 16, 64, seed=8) * 0.25
    _assert_fp32_close(ops.soft_kernel_attention(q * 0.25, landmarks, v, 2, 20, 1),
                       soft_kernel_attention(q * 0.25, landmarks, v, num_heads=2, newton_iters=20,
                                             symmetric_norm=True), "soft")
