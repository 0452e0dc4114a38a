"""Swin-T/B LOCAL and ViT-B/16 against timm: a timm model (random init, pretrained=False) with every
constant-initialised parameter redrawn, its state dict loaded into ours unchanged (same keys, strict), same logits.

timm is the independent oracle: its Swin (shifted windows, relative position bias, patch merging order, padding)
and ViT (class token, position embedding, LayerNorm eps 1e-6) share no code with edgeattn. The Multi-Spot
substitution is checked for what it must preserve on the same weights.
"""
import pytest

torch = pytest.importorskip("torch")

from timm_support import import_timm  # noqa: E402
from random_params import randomise_parameters  # noqa: E402

from edgeattn.models import create_model  # noqa: E402
from edgeattn.models.vit import VisionTransformer, logit_shift, substitute_multispot  # noqa: E402

timm = import_timm()

#: (our arch, timm name, resolution)
TIMM_PAIRS = [
    ("swin_t_local", "swin_tiny_patch4_window7_224", 224),
    ("swin_b_local", "swin_base_patch4_window7_224", 224),
    ("swin_b_local", "swin_base_patch4_window12_384", 384),
    ("vit_base_patch16_384", "vit_base_patch16_384", 384),
]


def distinguishing_timm_model(name, seed, **kwargs):
    """timm's model with norms/biases randomised and the small-init tables (relative position bias, class token,
    position embedding) redrawn at a scale where a wrong index or order moves the logits."""
    torch.manual_seed(seed)
    model = randomise_parameters(timm.create_model(name, pretrained=False, **kwargs), seed=seed)
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for key, param in model.named_parameters():
            if key.endswith(("relative_position_bias_table", "cls_token", "pos_embed")):
                param.copy_(torch.randn(param.shape, generator=generator) * 0.5)
    return model.eval()


@pytest.mark.parametrize("arch,timm_name,size", TIMM_PAIRS, ids=[p[1] for p in TIMM_PAIRS])
def test_timm_state_dict_loads_unchanged_and_gives_timm_logits(arch, timm_name, size):
    reference = distinguishing_timm_model(timm_name, seed=3)
    ours = create_model(arch, img_size=size).eval()
    state = reference.state_dict()
    assert list(ours.state_dict()) == list(state)
    ours.load_state_dict(state, strict=True)
    images = torch.randn(1 if size > 224 else 2, 3, size, size, generator=torch.Generator().manual_seed(4))
    with torch.inference_mode():
        expected, got = reference(images), ours(images)
    assert expected.abs().max() > 0.5  # logits that depend on the weights, not a near-zero output
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-4 * float(expected.abs().max()))


def test_swin_pads_and_shifts_like_timm_where_the_windows_do_not_tile_the_map():
    """Swin-T with 7x7 windows at 256: the stage maps 64-32-16-8 are padded at the bottom/right to 70-35-21-14 after
    the cyclic shift (timm's order; the shift mask is computed on the padded map), and stage 4 (8 > 7) is shifted
    too. Same logits as timm's Swin-T built for 256 (a map the 224/384 pairs above never pad)."""
    reference = distinguishing_timm_model("swin_tiny_patch4_window7_224", seed=3, img_size=256)
    ours = create_model("swin_t_local", img_size=256, window_size=7).eval()
    assert [[block.attn.shift_size for block in stage.blocks] for stage in ours.layers] == \
        [[block.shift_size[0] for block in stage.blocks] for stage in reference.layers]
    ours.load_state_dict(reference.state_dict(), strict=True)
    images = torch.randn(1, 3, 256, 256, generator=torch.Generator().manual_seed(4))
    with torch.inference_mode():
        expected, got = reference(images), ours(images)
    assert expected.abs().max() > 0.5
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-4 * float(expected.abs().max()))


@pytest.mark.parametrize("arch,timm_name,size", TIMM_PAIRS, ids=[p[1] for p in TIMM_PAIRS])
def test_layer_norm_eps_and_gelu_form_match_timm_module_for_module(arch, timm_name, size):
    """What the logits comparison above cannot see at its tolerance: LayerNorm's eps (timm's ViT uses 1e-6, its
    Swin PyTorch's 1e-5; the other value moves the logits by ~1e-5 relative) and the GELU form (exact vs tanh).
    Every LayerNorm and GELU of timm's model sits under the same name in ours (the state dicts share their keys)."""
    with torch.device("meta"):
        ours = create_model(arch, img_size=size)
        reference = timm.create_model(timm_name, pretrained=False)
    theirs = dict(reference.named_modules())
    norms = {name: module for name, module in ours.named_modules() if isinstance(module, torch.nn.LayerNorm)}
    assert set(norms) == {name for name, module in theirs.items() if isinstance(module, torch.nn.LayerNorm)}
    for name, module in norms.items():
        assert module.eps == theirs[name].eps, (name, module.eps, theirs[name].eps)
    gelus = {name: module for name, module in ours.named_modules() if isinstance(module, torch.nn.GELU)}
    assert gelus and set(gelus) == {name for name, module in theirs.items() if isinstance(module, torch.nn.GELU)}
    for name, module in gelus.items():
        assert module.approximate == theirs[name].approximate, name


def test_fresh_weights_are_drawn_as_timm_draws_them():
    """A freshly built (untrained) Swin-T is initialised like timm's: Linear weights trunc-normal std 0.02 (relative
    position tables too), zero biases, unit LayerNorms, PyTorch's default conv init. Per tensor of timm's state
    dict: constant tensors (and the integer buffers) equal, random ones with the same standard deviation to within
    six times its sampling error."""
    import math

    torch.manual_seed(0)
    ours = create_model("swin_t_local").state_dict()
    theirs = timm.create_model("swin_tiny_patch4_window7_224", pretrained=False).state_dict()
    assert list(ours) == list(theirs)
    for key, expected in theirs.items():
        got = ours[key]
        if not expected.is_floating_point() or expected.numel() == 1 or float(expected.std()) == 0.0:
            assert torch.equal(got, expected), key
            continue
        ratio = float(got.std() / expected.std())
        assert abs(ratio - 1) <= 6 / math.sqrt(2 * expected.numel()) + 0.01, (key, ratio)


def test_swin_local_blocks_alternate_shifts_and_clamp_small_maps():
    """timm's rule, checked structurally: shift ws/2 in odd blocks of stages whose map is larger than the window;
    Swin-T's 7x7 stage-4 map is one unshifted window."""
    with torch.device("meta"):
        model = create_model("swin_t_local")
        reference = timm.create_model("swin_tiny_patch4_window7_224", pretrained=False)
    shifts = [[block.attn.shift_size for block in stage.blocks] for stage in model.layers]
    assert shifts == [[0, 3], [0, 3], [0, 3, 0, 3, 0, 3], [0, 0]]
    assert shifts == [[block.shift_size[0] for block in stage.blocks] for stage in reference.layers]


def tiny_vit(multispot=None):
    torch.manual_seed(5)
    return randomise_parameters(VisionTransformer("tiny", 96, 10, embed_dim=32, depth=2, num_heads=2, patch_size=16,
                                                  multispot=multispot))


def test_multispot_selecting_every_key_is_the_original_model():
    """Top-k = all 37 keys and no pooled level: the substitution is exactly softmax attention."""
    original = tiny_vit()
    every_key = tiny_vit({"region_size": 3, "topk": 37, "pool_side": None})
    every_key.load_state_dict(original.state_dict(), strict=True)
    images = torch.randn(2, 3, 96, 96, generator=torch.Generator().manual_seed(6))
    shift = logit_shift(original, every_key, images)
    assert shift["max_rel"] < 1e-5 and shift["top1_agreement"] == 1.0


def test_multispot_substitution_keeps_the_weights_and_moves_logits_less_with_more_tokens():
    """Table 1 settings on one set of weights: each substitution is training-free (the same state dict), and
    keeping more of the keys (top-16 + 2x2 pooled vs top-4 alone) stays closer to the original logits."""
    original = tiny_vit()
    images = torch.randn(4, 3, 96, 96, generator=torch.Generator().manual_seed(7))
    few = tiny_vit({"region_size": 3, "topk": 4, "pool_side": None})
    more = tiny_vit({"region_size": 3, "topk": 16, "pool_side": 2})
    for model in (few, more):
        model.load_state_dict(original.state_dict(), strict=True)
    few_shift, more_shift = logit_shift(original, few, images), logit_shift(original, more, images)
    assert 0 < more_shift["max_rel"] < few_shift["max_rel"]


def test_substitute_multispot_builds_the_registered_table_1_variant():
    with torch.device("meta"):
        original = create_model("vit_base_patch16_384", img_size=384)
        substituted = substitute_multispot(original, "ms_top96_s4")
    assert substituted.edgeattn_arch == "vit_base_patch16_384_ms_top96_s4"
    attn = substituted.blocks[0].attn
    assert attn.multispot == {"region_size": 6, "topk": 96, "pool_side": 2}
    assert list(substituted.state_dict()) == list(original.state_dict())


@pytest.mark.slow
def test_edgeattn_compare_measures_how_far_a_substitution_moves_the_logits(invoke, tmp_path):
    """The Table 1 substitution on one set of (random) ViT-B/16-384 weights, through `edgeattn compare`: the
    original against itself agrees exactly; top-64 with the pooled 4x4 tokens moves the logits, and compare
    reports by how much (max abs/rel error, cosine, top-1/top-5 agreement)."""
    import json

    from edgeattn import save_checkpoint

    original = randomise_parameters(create_model("vit_base_patch16_384"), seed=8)
    substituted = substitute_multispot(original, "ms_top64_s16")
    paths = {"original": tmp_path / "original.pt", "multispot": tmp_path / "multispot.pt"}
    save_checkpoint(original, paths["original"])
    save_checkpoint(substituted, paths["multispot"])
    del original, substituted  # compare loads both files: four ViT-B copies at once took a worker to 2.2 GB
    same = json.loads(invoke(["compare", paths["original"], paths["original"], "--inputs", "2", "--json", "-",
                              "--quiet"], expect=0).stdout)
    assert same["passed"] and same["outputs"][same["primary_output"]]["max_abs"] == 0
    moved = json.loads(invoke(["compare", paths["multispot"], paths["original"], "--inputs", "2", "--json", "-",
                               "--quiet"]).stdout)
    assert moved["cosine_mean"] < 1.0 - 1e-9 and moved["outputs"][moved["primary_output"]]["max_abs"] > 1e-4
    assert set(moved) >= {"cosine_min", "top1_agreement", "top5_agreement"}
