"""Registry-driven tests: every registered model builds, runs, round-trips through a checkpoint, and takes (or
clearly refuses) the resolutions its structure allows."""
import pytest

torch = pytest.importorskip("torch")

from edgeattn import load_checkpoint, save_checkpoint  # noqa: E402
from edgeattn.errors import EdgeAttnError  # noqa: E402
from edgeattn.models import create_model, is_model, list_models, model_info  # noqa: E402

#: names the README, docs, presets, benchmarks and tests use; all must exist.
FIXED_NAMES = [
    "cswin_t24181_global", "cswin_t24181_local", "cswin_t24181_effatt", "cswin_t24181_elfatt",
    "cswin_b36292_global", "cswin_b36292_elfatt",
    "efficientvit_b0", "efficientvit_b1", "efficientvit_b2", "efficientvit_b3", "qtvit_1", "qtvit_2", "qtvit_3",
    "softpp_tiny", "softpp_small", "softpp_medium", "softpp_large",
    "cswin_64_12211_tiny", "cswin_64_24322_small", "cswin_96_24322_base", "cswin_144_24322_large",  # released.py
    "soft_norm_small", "soft_norm_medium", "soft_norm_large",
    "flurka_t2t7_linformer_performer", "flurka_t2t7_linformer_rnn",
    "vit_tiny_softmax", "vit_tiny_elfatt",
    # the ELFATT paper's Table I zoo and the Multi-Spot ViT-B/16 (tests/models/test_zoo_*.py)
    "cswin_t24181_agent", "cswin_t24181_flatten", "cswin_b36292_local", "cswin_b36292_effatt", "cswin_b36292_agent",
    "cswin_b36292_flatten",
    "swin_t_local", "swin_t_global", "swin_t_effatt", "swin_t_elfatt", "swin_t_agent", "swin_t_flatten",
    "swin_b_local", "swin_b_global", "swin_b_effatt", "swin_b_elfatt", "swin_b_agent", "swin_b_flatten",
    "vit_base_patch16_384", "vit_base_patch16_384_ms_top64", "vit_base_patch16_384_ms_top64_s16",
    "vit_base_patch16_384_ms_top96_s16", "vit_base_patch16_384_ms_top96_s4",
]

#: the Multi-Spot paper's Table 1 settings exist for a 24x24 patch grid (384x384) only
GRID_384_ONLY = ["vit_base_patch16_384_ms_top64", "vit_base_patch16_384_ms_top64_s16",
                 "vit_base_patch16_384_ms_top96_s16", "vit_base_patch16_384_ms_top96_s4"]
#: models of more than ~70M parameters: their forward + checkpoint round trip is marked slow
HEAVY = ["cswin_b36292_global", "cswin_b36292_elfatt", "cswin_b36292_local", "cswin_b36292_effatt",
         "cswin_b36292_agent", "cswin_b36292_flatten", "swin_b_local", "swin_b_global", "swin_b_effatt",
         "swin_b_elfatt", "swin_b_agent", "swin_b_flatten", "vit_base_patch16_384"] + GRID_384_ONLY


def _marked(names):
    return [pytest.param(name, marks=pytest.mark.slow) if name in HEAVY else name for name in names]

#: small enough for a real forward pass at 384 and 512 in a unit test
SMALL_MODELS = ["vit_tiny_softmax", "vit_tiny_elfatt", "efficientvit_b0", "qtvit_1"]


def test_fixed_names_registered():
    missing = [name for name in FIXED_NAMES if not is_model(name)]
    assert not missing
    assert sorted(FIXED_NAMES) == list_models()


def test_memory_heavy_models_are_the_largest_registered():
    """tests/conftest.py runs the tests of these models one after another on one worker, to keep the suite under
    3 GB: a newly registered large model must join them (and a smaller one must not slow that worker down)."""
    from edgeattn.models.complexity import count_params
    from memory_support import MEMORY_HEAVY_MODELS, MEMORY_HEAVY_PARAMETERS

    counts = {}
    for name in list_models():
        with torch.device("meta"):
            counts[name] = count_params(create_model(name))
    assert {name for name, count in counts.items() if count >= MEMORY_HEAVY_PARAMETERS} == MEMORY_HEAVY_MODELS


def test_list_models_pattern():
    assert list_models("cswin_t24181_*") == sorted(n for n in FIXED_NAMES if n.startswith("cswin_t24181_"))
    assert list_models("QTVIT*") == ["qtvit_1", "qtvit_2", "qtvit_3"]
    assert list_models("nothing*") == []


def test_unknown_name_suggests():
    with pytest.raises(EdgeAttnError, match="did you mean cswin_t24181_elfatt"):
        create_model("cswin_t24181_elfat")


def test_unknown_config_key():
    with pytest.raises(EdgeAttnError, match="does not take config key.*block_size\\b"):
        create_model("cswin_t24181_elfatt", block_size=[49, 49, 196, 49])


@pytest.mark.parametrize("value", [0, -224, 224.0, True, "224"])
def test_bad_img_size_type(value):
    with pytest.raises(EdgeAttnError, match="img_size"):
        create_model("vit_tiny_softmax", img_size=value)


def test_model_info_is_json_able():
    import json

    for name in FIXED_NAMES:
        info = model_info(name)
        json.dumps(info)
        assert info["summary"] and info["family"]


@pytest.mark.parametrize("name", _marked(list_models()))
def test_forward_and_checkpoint_roundtrip(name, scratch_dir):
    """224x224 (384 for the Table 1 Multi-Spot ViTs), batch 1, CPU: finite (1, 1000) logits, and a save/load round
    trip gives identical outputs."""
    torch.manual_seed(0)
    size = 384 if name in GRID_384_ONLY else 224
    model = create_model(name, img_size=size).eval()
    assert model.edgeattn_arch == name
    with torch.device("meta"):
        rebuilt = create_model(name, **model.edgeattn_config)
    assert [(k, tuple(v.shape)) for k, v in rebuilt.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in model.state_dict().items()]
    del rebuilt
    x = torch.randn(1, 3, size, size)
    with torch.inference_mode():
        logits = model(x)
    assert logits.shape == (1, 1000) and logits.dtype == torch.float32
    assert torch.isfinite(logits).all()
    path = scratch_dir / "model.pt"
    save_checkpoint(model, path)
    del model  # the two largest models held twice took a worker past 2.5 GB
    loaded = load_checkpoint(path)
    with torch.inference_mode():
        assert torch.equal(loaded(x), logits)


@pytest.mark.parametrize("img_size", [384, 512])
@pytest.mark.parametrize("name", [n for n in list_models() if n not in GRID_384_ONLY])
def test_larger_resolutions_accepted(name, img_size, meta_counts):
    """Building at 384/512 and running the (meta-device) forward pass succeeds; MACs grow with resolution."""
    assert meta_counts(name, img_size)["total"] > meta_counts(name, 224)["total"]


@pytest.mark.parametrize("name", SMALL_MODELS)
@pytest.mark.parametrize("img_size", [384, 512])
def test_small_models_run_at_larger_resolutions(name, img_size):
    batch = 2 if name.startswith("vit") else 1  # a batch of 2 once per family is enough
    model = create_model(name, img_size=img_size, num_classes=10).eval()
    with torch.inference_mode():
        logits = model(torch.randn(batch, 3, img_size, img_size))
    assert logits.shape == (batch, 10) and torch.isfinite(logits).all()


#: (name, img_size, config, words the one-line error must contain)
REJECTED = [
    ("cswin_t24181_elfatt", 200, {}, "stage 1 map 50x50 is not divisible by its ELFATT block side 7"),
    ("cswin_b36292_elfatt", 200, {}, "stage 1 map 50x50 is not divisible by its ELFATT block side 13"),
    ("cswin_t24181_elfatt", 384, {"block_sizes": [49, 49, 196, 49]}, "stage 1 map 96x96"),
    ("cswin_t24181_local", 384, {"split_size": [1, 2, 7, 7]}, "stage 3 map 24x24 is not divisible by its CSWin "
                                                               "stripe width 7"),
    ("cswin_t24181_local", 200, {}, "stage-3 map 13x13 is odd"),
    ("cswin_t24181_global", 16, {}, "too small"),
    ("cswin_t24181_effatt", 16, {}, "too small"),
    ("cswin_b36292_global", 16, {}, "too small"),
    ("vit_tiny_softmax", 200, {}, "not a multiple of the patch size 16"),
    ("vit_tiny_elfatt", 200, {}, "not a multiple of the patch size 16"),
    ("vit_tiny_elfatt", 224, {"window_size": 5}, "not divisible by its ELFATT window 5"),
    ("efficientvit_b0", 16, {}, "too small"),
    ("qtvit_1", 16, {}, "too small"),
    ("softpp_tiny", 200, {}, "stage 1 map 50x50 is not divisible by its landmark sampling ratio 8"),
    ("softpp_large", 200, {}, "stage 1 map 50x50"),
    ("cswin_64_12211_tiny", 200, {}, "stage-3 map 13x13 is odd"),
    ("soft_norm_small", 200, {}, "stage 1 map 50x50 is not divisible by its landmark sampling ratio 8"),
    ("flurka_t2t7_linformer_rnn", 8, {}, "too small"),
] + [(name, 200, {}, "stage-3 map 13x13 is odd") for name in (
    "cswin_t24181_agent", "cswin_t24181_flatten", "cswin_b36292_local", "cswin_b36292_agent", "cswin_b36292_flatten")
] + [("cswin_b36292_effatt", 16, {}, "too small")] + [
    (name, 200, {}, "input 200x200 must be square and a multiple of 32") for name in (
        "swin_t_local", "swin_t_global", "swin_t_effatt", "swin_t_agent", "swin_t_flatten", "swin_b_local",
        "swin_b_global", "swin_b_effatt", "swin_b_agent", "swin_b_flatten")
] + [(name, 200, {}, "stage 1 map 50x50 is not divisible by its ELFATT block side 13")
     for name in ("swin_t_elfatt", "swin_b_elfatt")] + [
    ("vit_base_patch16_384", 200, {}, "not a multiple of the patch size 16")] + [
    (name, 224, {}, "the 14x14 patch grid at 224x224 is not divisible by its Multi-Spot region side 6")
    for name in GRID_384_ONLY]


def test_every_model_has_a_rejection_case():
    assert {name for name, _, _, _ in REJECTED} >= set(list_models()) - {
        "efficientvit_b1", "efficientvit_b2", "efficientvit_b3", "qtvit_2", "qtvit_3", "softpp_small",
        "softpp_medium", "flurka_t2t7_linformer_performer", "cswin_64_24322_small", "cswin_96_24322_base",
        "cswin_144_24322_large", "soft_norm_medium", "soft_norm_large"}


@pytest.mark.parametrize("name,img_size,cfg,words", REJECTED)
def test_rejected_resolution_is_one_clear_line(name, img_size, cfg, words):
    with pytest.raises(EdgeAttnError) as info, torch.device("meta"):
        create_model(name, img_size=img_size, **cfg)
    message = info.value.format_message()
    assert words in message and "\n" not in message
    assert message.startswith(name)


@pytest.mark.parametrize("name,size,words", [
    ("cswin_t24181_elfatt", 200, "stage 1 map 50x50"),
    ("vit_tiny_softmax", 200, "patch size"),
    ("efficientvit_b0", 16, "too small"),
    ("softpp_tiny", 200, "landmark sampling ratio"),
    ("flurka_t2t7_linformer_performer", 256, "built for 224x224"),
    ("swin_t_local", 96, "stage 3 map 6x6 is smaller than its 7x7 window"),
    ("swin_t_agent", 256, "built for 224x224; its agent blocks have per-position parameters"),
    ("cswin_t24181_flatten", 256, "built for 224x224; its flatten blocks have per-position parameters"),
    ("vit_base_patch16_384", 256, "built for 384x384 .a 24x24 position embedding.; got 256x256"),
])
def test_forward_rejects_input_its_structure_cannot_take(name, size, words):
    with torch.device("meta"):
        model = create_model(name)
        with pytest.raises(EdgeAttnError, match=words):
            model(torch.zeros(1, 3, size, size))


def test_forward_rejects_non_image():
    model = create_model("vit_tiny_softmax", depth=1)
    with pytest.raises(EdgeAttnError, match="expects images shaped"):
        model(torch.zeros(1, 1, 224, 224))
