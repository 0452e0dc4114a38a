"""Checkpoint save/load: the safe format round-trips; every bad file is one clear EdgeAttnError line."""
import os
import random
import warnings

import pytest

torch = pytest.importorskip("torch")

from edgeattn import load_checkpoint, save_checkpoint  # noqa: E402  (lazy re-exports of edgeattn.models.checkpoint)
from edgeattn.errors import EdgeAttnError  # noqa: E402
from edgeattn.models import create_model  # noqa: E402

ARCH = "vit_tiny_elfatt"


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return create_model(ARCH, embed_dim=32, depth=1, num_heads=2).eval()


@pytest.fixture(scope="module")
def saved(model, tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "model.pt"
    save_checkpoint(model, path)
    return path


def _error(path, **kwargs):
    with pytest.raises(EdgeAttnError) as info:
        load_checkpoint(path, **kwargs)
    message = info.value.format_message()
    assert "\n" not in message
    return message


def test_roundtrip_same_outputs(model, saved):
    loaded = load_checkpoint(saved)
    assert not loaded.training
    assert loaded.edgeattn_arch == ARCH and loaded.edgeattn_config == model.edgeattn_config
    x = torch.randn(2, 3, 224, 224)
    with torch.inference_mode():
        assert torch.equal(model(x), loaded(x))


def test_file_format_is_plain_weights(model, saved):
    payload = torch.load(saved, weights_only=True)  # readable without unpickling any class
    assert payload["format_version"] == 1 and payload["arch"] == ARCH
    assert payload["config"]["embed_dim"] == 32
    assert set(payload["state_dict"]) == set(model.state_dict())
    assert payload["edgeattn_version"]


def test_save_requires_a_registry_model(tmp_path):
    with pytest.raises(EdgeAttnError, match="create_model"):
        save_checkpoint(torch.nn.Linear(2, 2), tmp_path / "x.pt")
    assert not os.listdir(tmp_path)


def test_missing_file(tmp_path):
    assert "not found" in _error(tmp_path / "absent.pt")


def test_empty_file(tmp_path):
    path = tmp_path / "empty.pt"
    path.write_bytes(b"")
    assert "empty" in _error(path)


def test_truncated_file(saved, tmp_path):
    path = tmp_path / "truncated.pt"
    data = saved.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert "truncated, corrupt" in _error(path)


def test_random_bytes(tmp_path):
    path = tmp_path / "random.pt"
    generator = random.Random(0)  # the same bytes every run: a failure here must reproduce
    path.write_bytes(bytes(generator.getrandbits(8) for _ in range(4096)))
    assert "truncated, corrupt" in _error(path)


def test_unknown_arch(saved, tmp_path):
    payload = torch.load(saved, weights_only=True)
    payload["arch"] = "no_such_model"
    path = tmp_path / "unknown.pt"
    torch.save(payload, path)
    assert "unknown model architecture 'no_such_model'" in _error(path)


def test_wrong_arch_lists_key_mismatch(saved, tmp_path):
    """A vit_tiny_elfatt state dict labelled vit_tiny_softmax: the ELFATT LePE keys are unexpected, the
    softmax module has none of them."""
    payload = torch.load(saved, weights_only=True)
    payload["arch"] = "vit_tiny_softmax"
    payload["config"] = {key: payload["config"][key]
                         for key in ("embed_dim", "depth", "num_heads", "mlp_ratio", "patch_size")}
    path = tmp_path / "wrong_arch.pt"
    torch.save(payload, path)
    message = _error(path)
    assert "does not match architecture vit_tiny_softmax" in message
    assert "unexpected keys: blocks.0.attn.get_v_global.weight" in message


def test_missing_keys_listed_first_few(saved, tmp_path):
    payload = torch.load(saved, weights_only=True)
    dropped = sorted(payload["state_dict"])[:7]
    for key in dropped:
        del payload["state_dict"][key]
    path = tmp_path / "missing_keys.pt"
    torch.save(payload, path)
    message = _error(path)
    assert "missing keys: " in message and "(+2 more)" in message
    assert dropped[0] in message


def test_shape_mismatch(saved, tmp_path):
    payload = torch.load(saved, weights_only=True)
    payload["state_dict"]["head.weight"] = torch.zeros(3, 3)
    path = tmp_path / "bad_shape.pt"
    torch.save(payload, path)
    assert "head.weight has shape (3, 3)" in _error(path)


def test_bare_state_dict(model, tmp_path):
    path = tmp_path / "state_dict.pt"
    torch.save(model.state_dict(), path)
    assert "bare state dict without an architecture" in _error(path)


def test_newer_format_version(saved, tmp_path):
    payload = torch.load(saved, weights_only=True)
    payload["format_version"] = 99
    path = tmp_path / "future.pt"
    torch.save(payload, path)
    assert "format version 99" in _error(path)


def test_pickled_module_needs_trust(model, tmp_path):
    path = tmp_path / "module.pt"
    torch.save(model, path)
    message = _error(path)
    assert "pickled Python objects" in message and "--trust-pickle" in message
    with pytest.warns(UserWarning, match="trust_pickle=True"):
        loaded = load_checkpoint(path, trust_pickle=True)
    x = torch.randn(1, 3, 224, 224)
    with torch.inference_mode():
        assert torch.equal(model(x), loaded(x))


def test_legacy_pickled_module_needs_trust(model, tmp_path):
    path = tmp_path / "legacy.pt"
    torch.save(model, path, _use_new_zipfile_serialization=False)
    assert "pickled Python objects" in _error(path)


def test_torchscript_needs_trust(model, tmp_path):
    path = tmp_path / "scripted.pt"
    x = torch.randn(1, 3, 224, 224)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.save(torch.jit.trace(model, x, check_trace=False), str(path))
    message = _error(path)
    assert "TorchScript archive" in message and "--trust-pickle" in message
    with pytest.warns(UserWarning, match="TorchScript"):
        loaded = load_checkpoint(path, trust_pickle=True)
    with torch.inference_mode():
        torch.testing.assert_close(loaded(x), model(x))


def test_bare_state_dict_with_arch(tmp_path):
    torch.manual_seed(1)
    default = create_model(ARCH).eval()
    path = tmp_path / "state_dict.pt"
    torch.save(default.state_dict(), path)
    loaded = load_checkpoint(path, arch=ARCH)
    assert loaded.edgeattn_source["layout"] == "edgeattn" and loaded.edgeattn_source["entry"] is None
    x = torch.randn(1, 3, 224, 224)
    with torch.inference_mode():
        assert torch.equal(loaded(x), default(x))


def test_bare_state_dict_of_other_config_is_refused(model, tmp_path):
    """A state dict carries no config: the fixture's 1-block ViT does not fit the default vit_tiny_elfatt, and is
    refused rather than half loaded."""
    path = tmp_path / "state_dict.pt"
    torch.save(model.state_dict(), path)
    message = _error(path, arch=ARCH)
    assert "does not match architecture {}".format(ARCH) in message and "missing keys: blocks.1." in message


def test_arch_argument_must_agree_with_our_format(saved):
    assert "holds a vit_tiny_elfatt model, not vit_tiny_softmax" in _error(saved, arch="vit_tiny_softmax")


def test_arch_argument_must_agree_with_the_arch_a_state_dict_file_names(model, tmp_path):
    """A wrapper that names a registered architecture ("arch": ..., as training scripts write it) and an --arch
    that names another are refused before anything is built: the weights of cswin_t24181_global fit
    cswin_t24181_effatt exactly (and swin_t_global swin_t_effatt), so letting --arch win would load a model with
    another attention without a word."""
    path = tmp_path / "named.pt"
    torch.save({"arch": ARCH, "state_dict": model.state_dict()}, path)
    assert "says its architecture is {}, not vit_tiny_softmax".format(ARCH) in _error(path, arch="vit_tiny_softmax")


def test_safetensors_roundtrip(model, tmp_path):
    path = tmp_path / "model.safetensors"
    save_checkpoint(model, path)
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        assert handle.metadata()["arch"] == ARCH
    loaded = load_checkpoint(path)
    assert loaded.edgeattn_config == model.edgeattn_config
    x = torch.randn(1, 3, 224, 224)
    with torch.inference_mode():
        assert torch.equal(model(x), loaded(x))


def test_safetensors_without_extension_is_recognised(model, tmp_path):
    path = tmp_path / "model.safetensors"
    save_checkpoint(model, path)
    renamed = tmp_path / "weights.bin"
    os.rename(path, renamed)
    assert load_checkpoint(renamed).edgeattn_arch == ARCH


def test_safetensors_arch_argument_must_agree_with_the_file(model, tmp_path):
    """As with our torch.save format: the architecture in a .safetensors file's metadata and an arch argument
    that names another are refused, not settled silently in favour of the file."""
    path = tmp_path / "model.safetensors"
    save_checkpoint(model, path)
    assert "holds a vit_tiny_elfatt model, not vit_tiny_softmax" in _error(path, arch="vit_tiny_softmax")


@pytest.mark.parametrize("version, message", [("2", "format version 2"), ("two", "is malformed")])
def test_safetensors_metadata_of_a_newer_or_broken_format_is_refused(model, tmp_path, version, message):
    from safetensors import safe_open
    from safetensors.torch import save_file

    ours = tmp_path / "model.safetensors"
    save_checkpoint(model, ours)
    with safe_open(str(ours), framework="pt") as handle:
        metadata = dict(handle.metadata())
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    metadata["format_version"] = version
    path = tmp_path / "other.safetensors"
    save_file(tensors, str(path), metadata=metadata)
    assert message in _error(path)


def test_damaged_safetensors(model, tmp_path):
    path = tmp_path / "model.safetensors"
    save_checkpoint(model, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert "cannot read safetensors file" in _error(path)


def test_pickled_class_inside_a_wrapper_needs_trust(tmp_path):
    """Only argparse.Namespace is allowed besides tensors; any other class in the file (here a pathlib path in a
    training script's metadata) still needs trust_pickle."""
    import pathlib

    path = tmp_path / "train.pt"
    torch.save({"state_dict": create_model(ARCH).state_dict(), "output_dir": pathlib.PurePosixPath("/runs")}, path)
    message = _error(path, arch=ARCH)
    assert "pickled Python objects" in message and "pathlib" in message
    with pytest.warns(UserWarning, match="trust_pickle=True"):
        loaded = load_checkpoint(path, arch=ARCH, trust_pickle=True)
    assert loaded.edgeattn_source["entry"] == "state_dict"


def test_dict_without_tensors(tmp_path):
    path = tmp_path / "meta.pt"
    torch.save({"epoch": 3, "note": "no weights"}, path)
    assert "holds no state dict" in _error(path, arch=ARCH)


def test_prefix_is_stripped_only_when_every_key_has_it(model, tmp_path):
    state = {"module." + key: value for key, value in model.state_dict().items()}
    state["head.extra"] = torch.zeros(1)
    path = tmp_path / "mixed.pt"
    torch.save(state, path)
    assert "unexpected keys: module." in _error(path, arch=ARCH)


def test_initialisation_skipped_leaves_tensors_unfilled_and_restores_torch_init():
    import torch.nn.init as init

    from edgeattn.models._registry import initialisation_skipped

    before = {name: getattr(init, name) for name in ("normal_", "trunc_normal_", "kaiming_uniform_", "zeros_")}
    marker = torch.full((4, 4), 7.0)
    with pytest.raises(RuntimeError, match="inside"), initialisation_skipped():
        assert init.normal_(marker, std=1.0) is marker and init.zeros_(marker) is marker
        assert torch.equal(marker, torch.full((4, 4), 7.0))
        raise RuntimeError("inside")
    assert {name: getattr(init, name) for name in before} == before
    init.zeros_(marker)
    assert not marker.any()


def test_initialisation_skipped_only_in_the_thread_inside_the_block():
    import threading

    import torch.nn.init as init

    from edgeattn.models._registry import initialisation_skipped

    filled = {}

    def other_thread():
        filled["other"] = init.zeros_(torch.ones(3)).sum().item()

    with initialisation_skipped(), initialisation_skipped():  # nested: the outer block restores
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        assert init.zeros_(torch.ones(3)).sum().item() == 3
    assert filled == {"other": 0}
    assert not getattr(init.zeros_, "edgeattn_skippable", False)


def test_create_model_without_weight_initialisation_draws_nothing_and_computes_buffers(initialiser_calls):
    """The registry's public way to build a model whose weights are about to be loaded: no initialiser draws a
    number, the non-persistent buffers (Swin's relative position index) equal a normal build's, and a normal
    build after it initialises again."""
    reference = create_model("swin_t_local", img_size=64)
    assert initialiser_calls, "a normal build initialises its weights"
    del initialiser_calls[:]
    model = create_model("swin_t_local", img_size=64, initialise_weights=False)
    assert initialiser_calls == []
    buffers = dict(reference.named_buffers())
    assert buffers and all(torch.equal(buffer, buffers[name]) for name, buffer in model.named_buffers())
    create_model("swin_t_local", img_size=64)
    assert initialiser_calls


@pytest.mark.parametrize("name", ["swin_t_local", "flurka_t2t7_linformer_rnn", "vit_base_patch16_384_ms_top64_s16"])
def test_load_computes_non_persistent_buffers_without_random_initialisation(name, tmp_path, initialiser_calls):
    """Models with buffers the file does not hold (Swin's relative position index, FLuRKA's sinusoid table, the
    Multi-Spot pooling ratio) are built for real on load, but without drawing random weights the file replaces:
    the buffers equal a normal build's, the weights the file's, and no initialiser ran."""
    torch.manual_seed(0)
    model = create_model(name).eval()
    path = tmp_path / "model.pt"
    save_checkpoint(model, path)
    del initialiser_calls[:]
    loaded = load_checkpoint(path)
    drawn = [shape for device, shape in initialiser_calls if device != "meta"]  # a meta build draws nothing
    assert drawn == []
    persistent = set(model.state_dict())
    extra = [key for key, _ in model.named_buffers() if key not in persistent]
    assert extra, "{} has no non-persistent buffer: pick a model that has one".format(name)
    loaded_buffers = dict(loaded.named_buffers())
    for key, value in model.named_buffers():
        assert torch.equal(loaded_buffers[key], value), key
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
