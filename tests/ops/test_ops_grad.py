"""Every attention module of :mod:`edgeattn.ops` is differentiable: float64 ``torch.autograd.gradcheck`` on small
shapes against finite differences, with respect to the input and every parameter, in reference mode and (for the
four TensorRT-contract ops) through the ``torch.ops.edgeattn.*`` custom ops.

gradcheck's fast mode compares one random projection of the analytic Jacobian with the numerical one (Chen et al.,
the ``fast_mode`` of PyTorch's gradcheck), which keeps each module at a fraction of a second while a wrong or
missing backward still fails it.
"""
import pytest
import torch
from torch.autograd import gradcheck
from torch.func import functional_call

import edgeattn.ops as ops
from edgeattn.ops.config import use_plugin_ops

DIM = 8
HW = (4, 4)

#: name -> (module factory, takes (B, N, C) tokens with hw (True) or a (B, C, H, W) map (False))
MODULES = {
    "softmax": (lambda: ops.MultiHeadSoftmaxAttention(DIM, 2), True),
    "cswin": (lambda: ops.CrossShapedWindowAttention(DIM, 2, split_size=2), True),
    "blockify": (lambda: ops.BlockifyAttention(DIM, 2, window_size=2), True),
    "effatt": (lambda: ops.EfficientAttention(DIM, 2), True),
    "elfatt": (lambda: ops.ELFATTAttention(DIM, num_heads=2, window_size=2), True),
    "litemla": (lambda: ops.LiteMLA(DIM, DIM, dim=4, scales=(3,)), False),
    "litemla_qt": (lambda: ops.LiteMLA(DIM, DIM, dim=4, scales=(3,), kernel="quadratic_taylor"), False),
    "soft": (lambda: ops.SOFTAttention(DIM, 2, sampling_ratio=2, newton_iters=6), True),
    "flurka": (lambda: ops.FLuRKAAttention(DIM, 2, num_tokens=16, rank=4), True),
    "multispot": (lambda: ops.MultiSpotAttention(DIM, 2, region_size=2, topk=16, pool_levels=((2, None),)), True),
    "swin": (lambda: ops.ShiftedWindowAttention(DIM, 2, window_size=2, shift_size=1), True),
    "agent": (lambda: ops.AgentAttention(DIM, 2, agent_num=4, resolution=HW), True),
    "flatten": (lambda: ops.FocusedLinearAttention(DIM, 2, resolution=HW, kernel_size=3), True),
}
#: the modules whose cores have a torch.ops.edgeattn custom op (the TensorRT contract)
PLUGIN_MODULES = ("blockify", "effatt", "elfatt", "litemla", "soft")


def _module_and_input(name):
    torch.manual_seed(0)
    factory, tokens = MODULES[name]
    module = factory().double().eval()  # eval: LiteMLA's BatchNorm uses its running statistics
    for parameter in module.parameters():  # off the initialisation (zeros, ones) so every path carries signal
        parameter.data.add_(0.1 * torch.randn_like(parameter))
    shape = (2, HW[0] * HW[1], DIM) if tokens else (2, DIM) + HW
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    args = (HW,) if tokens else ()
    return module, x, args


def _gradcheck_module(module, x, args):
    names = [name for name, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for p in module.parameters()]

    def forward(x, *values):
        return functional_call(module, dict(zip(names, values)), (x,) + args)

    return gradcheck(forward, (x,) + tuple(params), eps=1e-6, atol=1e-5, rtol=1e-4, fast_mode=True)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_gradient_matches_finite_differences(name):
    module, x, args = _module_and_input(name)
    assert _gradcheck_module(module, x, args)


@pytest.mark.parametrize("name", PLUGIN_MODULES)
def test_custom_op_gradient_matches_finite_differences(name):
    module, x, args = _module_and_input(name)
    with use_plugin_ops():
        assert _gradcheck_module(module, x, args)


def test_elfatt_buffer_path_and_autograd_path_agree():
    """The eager inference path (both heads written into one buffer, matmul out=) and the path autograd takes
    (concatenated heads) compute the same values."""
    module, x, args = _module_and_input("elfatt")
    with torch.no_grad():
        buffered = module(x, *args)
    differentiable = module(x, *args)
    assert differentiable.requires_grad
    torch.testing.assert_close(differentiable.detach(), buffered, rtol=0, atol=1e-12)


def test_tiny_elfatt_model_trains():
    """The user's report: ``loss.backward()`` on vit_tiny_elfatt failed in efficient_attention's out= path."""
    from edgeattn.models import create_model

    torch.manual_seed(0)
    model = create_model("vit_tiny_elfatt", img_size=32, num_classes=3, patch_size=4)
    images, labels = torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 0])
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    assert all(g is not None and torch.isfinite(g).all() for g in grads.values())
    assert grads["blocks.0.attn.get_v_global.weight"].abs().sum() > 0
    assert grads["blocks.0.attn.get_v_local.weight"].abs().sum() > 0
