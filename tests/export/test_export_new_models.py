"""Export of the Swin / CSWin Agent+FLatten / Multi-Spot ViT zoo: ONNX Runtime parity against PyTorch FP32, the
custom ops the plugin form must (and must not) contain, and standard ops everywhere else.

Full-size exports cost 20-60 s each on two cores. The Swin-T and CSWin-T models of the new families export in full,
randomised, with and without plugins, in test_export_models.py (which also holds how many custom nodes of each kind
swin_t_elfatt and cswin_t24181_agent carry, see EXPECTED_CUSTOM_OPS there); the one model exported nowhere else,
vit_base_patch16_384_ms_top64_s16 (Multi-Spot at 384), runs end to end through ``edgeattn export --arch NAME``
here (marked slow). Every attention kind of the new models then exports in one small network per skeleton (and
every Table 1 Multi-Spot setting in a small ViT), with randomised parameters (norm affines, biases, agent biases,
FLatten scales and positional encodings, relative position tables), through the same exporter.

Parity gates: about 10x the max relative error a correct export of that configuration measured here (ORT CPU,
2-core AMD EPYC), as in test_export_models.py.
"""
import json

import pytest

torch = pytest.importorskip("torch")

from edgeattn.export.exporter import export_onnx  # noqa: E402
from edgeattn.models import cswin, swin, vit  # noqa: E402
from random_params import randomise_parameters  # noqa: E402

#: one small network per skeleton carrying every new attention kind: Swin (256x256 with 7x7 windows, so the W-MSA
#: blocks pad and shift at every stage) and CSWin (stage 3 mixes VaniATT, ELFATT and CSWin stripes of width 7)
SWIN_KINDS = [["local", "local"], ["agent", "local"], ["flatten", "global", "effatt"], ["local", "effatt"]]
CSWIN_KINDS = [["agent"], ["flatten"], ["global", "elfatt", "local"], ["local_last"]]


def small_swin():
    return swin.SwinTransformer("s", 256, 10, 32, [len(k) for k in SWIN_KINDS], (1, 2, 4, 8), SWIN_KINDS, 7)


def small_cswin():
    return cswin.CSWinTransformer("c", 224, 10, 32, [len(k) for k in CSWIN_KINDS], (2, 2, 4, 8), CSWIN_KINDS,
                                  [0, 0, 7, 7])


#: Multi-Spot's top-k is discontinuous: a key whose score ties another within float error can be selected in one
#: runtime and not the other. ViT-B/16 Multi-Spot moves by ~1e-5 relative between PyTorch FP32 and FP64 alone
#: (plain ViT-B/16: 6e-7), so its gate is the exporter's own 1e-4 instead of 10x a measured error.
MULTISPOT_GATE = 1e-4

#: name -> (builder of a small model, input size, custom ops the plugin form must contain, parity gate)
SMALL_MODELS = {
    "swin_mixed": (small_swin, 256, {"EdgeAttnEfficientAttention": 2}, 5.4e-6),
    "cswin_mixed": (small_cswin, 224, {"EdgeAttnEfficientAttention": 1, "EdgeAttnBlockifyAttention": 1}, 4.0e-6),
}
for _setting, (_name, _topk, _pooled, _) in vit.MULTISPOT_SETTINGS.items():
    SMALL_MODELS["vit_" + _setting] = (
        (lambda topk=_topk, pooled=_pooled: vit.VisionTransformer(
            "v", 384, 10, embed_dim=64, depth=2, num_heads=2,
            multispot={"region_size": 6, "topk": topk, "pool_side": {None: None, 16: 4, 4: 2}[pooled]})),
        384, {}, MULTISPOT_GATE)

#: full-size models exported through the CLI: arch -> (resolution, custom ops of the plugin form, parity gate). Every
#: new model (and the base models at 384) was exported once with randomised parameters: max relative error 4e-7 ..
#: 1.2e-6, except Multi-Spot top-64 + S16 (1.6e-5, see MULTISPOT_GATE). The Swin-T/CSWin-T ones are exported (with
#: their custom-node counts) in test_export_models.py; exporting them here too cost ~27 s of the suite.
REPRESENTATIVES = {
    "vit_base_patch16_384_ms_top64_s16": (384, {}, MULTISPOT_GATE),
}


def distinguishing(model):
    """randomise_parameters plus the zoo's own small- or zero-initialised tensors (agent biases, FLatten scale and
    positional encoding, relative position tables, ViT class token and position embedding)."""
    randomise_parameters(model, seed=0, scales=False)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.rsplit(".", 1)[-1] in ("an_bias", "na_bias", "ah_bias", "aw_bias", "ha_bias", "wa_bias",
                                           "positional_encoding", "relative_position_bias_table", "cls_token",
                                           "pos_embed"):
                param.copy_(torch.randn(param.shape, generator=generator) * 0.3)
            elif name.endswith(".scale") and param.dim() == 3:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.5)
    return model.eval()


@pytest.fixture(scope="module")
def small_exports(tmp_path_factory):
    directory = tmp_path_factory.mktemp("small")
    cache = {}

    def get(name, plugins):
        if (name, plugins) not in cache:
            build, size, _, _ = SMALL_MODELS[name]
            torch.manual_seed(0)
            model = distinguishing(build())
            summary = export_onnx(model, directory / "{}{}.onnx".format(name, "" if plugins else ".noplugins"),
                                  img_size=size, plugins=plugins, check=True)
            cache[(name, plugins)] = summary
        return cache[(name, plugins)]

    return get


@pytest.mark.parametrize("plugins", [True, False], ids=["plugins", "noplugins"])
@pytest.mark.parametrize("name", sorted(SMALL_MODELS))
def test_small_model_exports_with_parity(small_exports, name, plugins):
    _, _, custom_ops, gate = SMALL_MODELS[name]
    summary = small_exports(name, plugins)
    assert summary.parity["max_rel"] <= gate, summary.parity
    assert summary.custom_ops == (custom_ops if plugins else {})


#: a model without custom ops has one export: its plugin form is the standard-op export
REPRESENTATIVE_CASES = [(arch, plugins) for arch, (_, ops, _) in sorted(REPRESENTATIVES.items())
                        for plugins in ((True, False) if ops else (True,))]


@pytest.mark.slow
@pytest.mark.parametrize("arch,plugins", REPRESENTATIVE_CASES,
                         ids=["{}-{}".format(a, "plugins" if p else "noplugins") for a, p in REPRESENTATIVE_CASES])
def test_representative_exports_through_the_cli(invoke, tmp_path, arch, plugins):
    size, custom_ops, gate = REPRESENTATIVES[arch]
    out, summary_path = tmp_path / "model.onnx", tmp_path / "summary.json"
    args = ["export", "--arch", arch, "--resolution", size, "-o", out, "--summary-json", summary_path]
    invoke(args + ([] if plugins else ["--no-plugins"]), expect=0)
    summary = json.loads(summary_path.read_text())
    assert out.exists() and summary["parity"]["max_rel"] <= gate, summary["parity"]
    assert summary["custom_ops"] == (custom_ops if plugins else {})
