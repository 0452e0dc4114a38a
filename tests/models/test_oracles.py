"""Whole models against references that share none of the project's modules.

EfficientViT-B0..B3 run against timm's ``efficientvit_b*`` (mit-han-lab's architecture, re-implemented by timm) with
the same weights moved over by a declared key table; QT-ViT against the same timm backbone with its LiteMLA kernel
replaced by the QT-ViT poster's feature map. CSWin (GLOBAL, LOCAL, EFFATT, ELFATT), SOFT++, FLuRKA and the tiny
ViTs against the written-out functional forwards of ``oracle_functional.py`` on the model's own state dict.

Every model first gets :func:`random_params.randomise_parameters` (norm affines, BatchNorm statistics, biases and
QT coefficients away from their constant initial values), and the functional oracles run in float64, so that a
dropped norm, a swapped parameter or a transposed window cannot hide below the tolerance. The ``check_*`` functions
are what the planted-bug tests (tests/mutation/) call.
"""
import re

import pytest

torch = pytest.importorskip("torch")

import oracle_functional as ref  # noqa: E402
from edgeattn.models import create_model  # noqa: E402
from random_params import randomise_parameters  # noqa: E402

#: max |model - oracle| / max |oracle| over the logits. The float64 oracles agree to rounding (measured <= 2e-15)
#: except FLuRKA (4e-13: the Performer's max stabilisers leave T2T's eps = 1e-8 in place, see test_blocks.py)
FLOAT64_TOL = 1e-10
#: timm's LiteMLA computes its attention in float32 whatever the model dtype (measured <= 3e-7)
TIMM_TOL = 1e-5


def relative_error(got, want):
    return float((got - want).abs().max() / want.abs().max())


def build(arch, img_size=224, dtype=torch.float64, **cfg):
    """The registered model with seeded weights and :func:`randomise_parameters`, in ``dtype``, plus its state
    dict (parameters and persistent buffers)."""
    torch.manual_seed(0)
    model = create_model(arch, img_size=img_size, **cfg)
    randomise_parameters(model, seed=1)
    model = model.to(dtype).eval()
    return model, model.state_dict()


def images(height, width, dtype=torch.float64, batch=2):
    return torch.randn(batch, 3, height, width, generator=torch.Generator().manual_seed(2), dtype=torch.float64).to(dtype)


def assert_close(arch, got, want, tol):
    assert got.shape == want.shape, (arch, tuple(got.shape), tuple(want.shape))
    error = relative_error(got, want)
    assert error <= tol, "{}: model and independent oracle differ: max rel {:.3g} > {:g}".format(arch, error, tol)
    return error


# ---- functional oracles ---------------------------------------------------------------------------------------
CSWIN_CASES = [
    # (model, input side, oracle spec, attention): the paper's layouts at 224 (49-49-196-49 ELFATT windows, 1-2-7-7
    # stripes) for T24181; B36292 at 64 (its window rule gives 16-16-16-4 tokens there) and the released CSWin-T
    # at 96 (stripes 1-2-3-3) to keep float64 forwards of 73M and 22M parameters cheap
    ("cswin_t24181_global", 224, "t24181", "global"), ("cswin_t24181_local", 224, "t24181", "local"),
    ("cswin_t24181_effatt", 224, "t24181", "effatt"), ("cswin_t24181_elfatt", 224, "t24181", "elfatt"),
    ("cswin_b36292_global", 64, "b36292", "global"), ("cswin_b36292_elfatt", 64, "b36292", "elfatt"),
    ("cswin_64_12211_tiny", 96, "64_12211", "local"),
]


def check_cswin(arch, img_size, size_name=None, attention=None):
    case = next(case for case in CSWIN_CASES if case[0] == arch)
    size_name, attention = size_name or case[2], attention or case[3]
    model, sd = build(arch, img_size)
    x = images(img_size, img_size, batch=1)
    with torch.no_grad():
        return assert_close(arch, model(x), ref.cswin_forward(sd, x, size_name, attention), FLOAT64_TOL)


@pytest.mark.parametrize("arch,img_size,size_name,attention", CSWIN_CASES)
def test_cswin_matches_functional_forward(arch, img_size, size_name, attention):
    check_cswin(arch, img_size, size_name, attention)


VIT_CASES = [("vit_tiny_softmax", (224, 224)), ("vit_tiny_elfatt", (224, 224)),
             # built for 224 (a 14x14 position embedding), run on a 10x18 grid: rows shrink, columns grow
             ("vit_tiny_softmax", (160, 288))]


def check_vit(arch, hw=(224, 224)):
    """Tiny ViTs (4 blocks, 2 heads, patch 16; ELFATT: 1 EFFATT + 1 blockify head, 7 x 7 windows at 224)."""
    model, sd = build(arch)
    x = images(*hw)
    attention = arch.rsplit("_", 1)[1]
    with torch.no_grad():
        want = ref.vit_forward(sd, x, depth=4, heads=2, patch=16, attention=attention, window=7)
        return assert_close(arch, model(x), want, FLOAT64_TOL)


@pytest.mark.parametrize("arch,hw", VIT_CASES)
def test_vit_matches_functional_forward(arch, hw):
    check_vit(arch, hw)


SOFT_CASES = [("softpp_tiny", 160, "softmax"), ("softpp_small", 128, "soft"), ("soft_norm_small", 128, "softmax")]


def check_soft(arch, img_size, stage4):
    """SOFT++ Tiny and the released soft_norm_small (softmax stage 4 with class token) and Small (Table 1: sp 1x1
    SOFT stage 4), at
    sizes whose stage maps the landmark convs tile (25 and 16 landmarks per stage), batch 2 (the Newton-Raphson
    step must be per matrix, not per batch)."""
    model, sd = build(arch, img_size)
    x = images(img_size, img_size)
    with torch.no_grad():
        return assert_close(arch, model(x), ref.soft_forward(sd, x, arch, stage4), FLOAT64_TOL)


@pytest.mark.parametrize("arch,img_size,stage4", SOFT_CASES)
def test_softpp_matches_functional_forward(arch, img_size, stage4):
    check_soft(arch, img_size, stage4)


def test_softpp_position_embeddings_are_resized_for_another_input():
    """Built for 160 (stage grids 40-20-10-5), run at 128 (32-16-8-4): every stage's embedding is resized
    bilinearly to the stage map, stage 4's class-token entry kept apart (the released code's behaviour)."""
    model, sd = build("softpp_tiny", 160)
    x = images(128, 128, batch=1)
    with torch.no_grad():
        assert_close("softpp_tiny", model(x), ref.soft_forward(sd, x, "softpp_tiny", "softmax"), FLOAT64_TOL)


FLURKA_CASES = [("flurka_t2t7_linformer_performer", "performer"), ("flurka_t2t7_linformer_rnn", "elu")]


def check_flurka(arch, feature_map):
    model, sd = build(arch)
    x = images(224, 224)
    with torch.no_grad():
        # the blocks' normaliser eps is the project's documented default for the compute dtype (1e-12 in float64)
        return assert_close(arch, model(x), ref.flurka_forward(sd, x, feature_map, eps=1e-12), FLOAT64_TOL)


@pytest.mark.parametrize("arch,feature_map", FLURKA_CASES)
def test_flurka_matches_functional_forward(arch, feature_map):
    check_flurka(arch, feature_map)


# ---- timm oracles ---------------------------------------------------------------------------------------------
#: our EfficientViT names -> timm's (declared, checked to be a bijection with equal shapes below)
TIMM_EFFICIENTVIT_KEYS = [
    (r"^input_stem\.0\.", "stem.in_conv."),
    (r"^input_stem\.(\d+)\.", lambda m: "stem.res{}.".format(int(m.group(1)) - 1)),
    (r"^stages\.(\d+)\.0\.(inverted_conv|depth_conv|point_conv)\.", r"stages.\1.blocks.0.main.\2."),
    (r"^stages\.(\d+)\.(\d+)\.main\.", r"stages.\1.blocks.\2.main."),
    (r"^stages\.(\d+)\.(\d+)\.(context_module|local_module)\.", r"stages.\1.blocks.\2.\3."),
    (r"^head_conv\.", "head.in_conv."),
    (r"^head_fc\.", "head.classifier.0."),
    (r"^head_norm\.", "head.classifier.1."),
    (r"^classifier\.", "head.classifier.4."),
]
QT_PARAMETER = re.compile(r"\.qt_(alpha|beta|gamma)$")


def timm_state_dict(sd, timm_keys):
    """Our state dict under timm's names (the QT coefficients, which timm has no place for, left out)."""
    converted = {}
    for key, value in sd.items():
        if QT_PARAMETER.search(key):
            continue
        for pattern, replacement in TIMM_EFFICIENTVIT_KEYS:
            if re.match(pattern, key):
                converted[re.sub(pattern, replacement, key)] = value
                break
        else:
            raise AssertionError("no timm name for {}".format(key))
    assert set(converted) == set(timm_keys), sorted(set(converted) ^ set(timm_keys))[:10]
    return converted


class QTKernel(torch.nn.Module):
    """QT-ViT's compact quadratic Taylor feature map (poster, "Reduce the time complexity"), on timm's
    (B, groups, N, d) layout: phi(x) = [alpha x*x, beta sqrt(4/d) x, gamma]; one coefficient per layer or per
    head group."""

    def __init__(self, alpha, beta, gamma):
        super().__init__()
        self.coefficients = [c.detach().reshape(1, -1, 1, 1) for c in (alpha, beta, gamma)]

    def forward(self, x):
        alpha, beta, gamma = (c.to(x.dtype) for c in self.coefficients)
        d = x.shape[-1]
        constant = gamma.expand(x.shape[0], x.shape[1], x.shape[2], 1)
        return torch.cat([alpha * x * x, beta * (4.0 / d) ** 0.5 * x, constant], dim=-1)


def timm_reference(arch, model, sd, variant):
    """timm's efficientvit_<variant> holding our weights; for QT-ViT its LiteMLA kernels replaced by QTKernel
    with each layer's coefficients. LiteMLA eps is set to the model's (mit-han-lab's 1e-15; timm's own default
    is 1e-5)."""
    from timm_support import import_timm

    timm = import_timm()
    reference = timm.create_model("efficientvit_" + variant, pretrained=False, num_classes=1000).eval()
    reference.load_state_dict(timm_state_dict(sd, reference.state_dict().keys()), strict=True)
    ours = [m for m in model.modules() if type(m).__name__ == "LiteMLA"]
    theirs = [m for m in reference.modules() if type(m).__name__ == "LiteMLA"]
    assert len(ours) == len(theirs) > 0
    for mine, timm_module in zip(ours, theirs):
        timm_module.eps = mine.eps
        if arch.startswith("qtvit"):
            timm_module.kernel_func = QTKernel(mine.qt_alpha, mine.qt_beta, mine.qt_gamma)
    return reference


TIMM_CASES = [
    ("efficientvit_b0", "b0", (224, 224)), ("efficientvit_b1", "b1", (96, 160)),
    ("efficientvit_b2", "b2", (96, 160)), ("efficientvit_b3", "b3", (96, 160)),
    ("qtvit_1", "b1", (224, 224)), ("qtvit_2", "b2", (96, 160)), ("qtvit_3", "b3", (96, 160)),
]


def check_timm(arch, variant, hw, **cfg):
    model, sd = build(arch, dtype=torch.float32, **cfg)
    reference = timm_reference(arch, model, sd, variant)
    x = images(*hw, dtype=torch.float32)
    with torch.no_grad():
        return assert_close(arch, model(x), reference(x), TIMM_TOL)


@pytest.mark.parametrize("arch,variant,hw", TIMM_CASES)
def test_efficientvit_and_qtvit_match_timm(arch, variant, hw):
    check_timm(arch, variant, hw)


def test_qtvit_per_head_coefficients_match_timm():
    """qt_params="head": one alpha/beta/gamma per head group (the QTKernel broadcasts them per group)."""
    check_timm("qtvit_1", "b1", (96, 96), qt_params="head")
