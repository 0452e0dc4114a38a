"""The registered PyTorch CUDA ops (edgeattn.plugins.cuda_ops) on a GPU: torch.ops.edgeattn.* on CUDA tensors run
the kernels (not the reference) and match the PyTorch reference with the GPU tests' FP16 criterion, eagerly and
replayed from a CUDA graph on new inputs (the ops launch on torch's current stream and allocate only through torch's
caching allocator, so capture records them), and a whole ELFATT model runs with the custom ops on.
Marked `gpu`: skipped on machines without CUDA (like CI); the CPU side is tests/plugins/test_plugins_cuda_ops.py.
"""
import pytest

torch = pytest.importorskip("torch")

from edgeattn.ops.efficient_attention import efficient_attention  # noqa: E402
from edgeattn.plugins import cuda_ops  # noqa: E402
from kernel_reference_check import assert_matches_reference  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def ops(gpu_kernels_library):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return cuda_ops.register(gpu_kernels_library)


def _check(out, q, k, v, label):
    assert_matches_reference(out, lambda *tensors: efficient_attention(*tensors, num_heads=2), [q, k, v],
                             torch.float16, label)


def test_the_custom_op_on_cuda_tensors_runs_the_kernels(ops):
    q, k, v = (torch.randn(2, 3136, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        out = torch.ops.edgeattn.efficient_attention(q, k, v, 2)
        torch.cuda.synchronize()
    names = [event.name for event in profile.events()]
    assert any("linear" in name and "Kernel" in name for name in names), sorted(set(names))[:20]
    _check(out, q, k, v, "eager")


def test_the_custom_ops_replay_from_a_cuda_graph(ops):
    q, k, v = (torch.randn(2, 3136, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    torch.ops.edgeattn.efficient_attention(q, k, v, 2)  # warm-up outside capture (device query, caches)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = torch.ops.edgeattn.efficient_attention(q, k, v, 2)
    for seed in (1, 2):
        generator = torch.Generator(device="cuda").manual_seed(seed)
        for tensor in (q, k, v):
            tensor.copy_(torch.randn(tensor.shape, device="cuda", dtype=torch.float16, generator=generator))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _check(out, q, k, v, "graph replay {}".format(seed))


def test_a_whole_elfatt_model_runs_on_the_kernels(ops):
    from edgeattn.models import create_model
    from edgeattn.ops.config import use_plugin_ops

    model = create_model("cswin_t24181_elfatt", img_size=224).eval().half().cuda()
    images = torch.randn(2, 3, 224, 224, device="cuda", dtype=torch.float16)
    with torch.inference_mode():
        reference = model(images).float()
        with use_plugin_ops():
            ours = model(images).float()
    assert torch.isfinite(ours).all()
    assert (ours - reference).abs().max().item() <= 0.05 * reference.abs().max().item() + 1e-3
