"""Registry-driven export tests: every registered model (a size variant through its stand-in, see STAND_INS), with
and without plugins, at 224; and non-square maps through every custom op.

Oracles: PyTorch FP32 (ORT parity, max|ort - torch| / max|torch| over the logits, gated per model in PARITY_GATES
at about ten times what a correct export of that model measures), PyTorch's dispatcher (which custom-op calls a
plugin-mode forward makes, with which arguments), the YAML op schemas (node contract, checked through
onnx-graphsurgeon), and the standalone TorchScript export of each replaced reference core (how many Softmax/Exp
nodes the plugin took out of the graph).

Parameters that distinguish: every model gets :func:`random_params.randomise_parameters` (attention scales
included) before it is exported, so a swapped QT coefficient, a dropped norm affine or a mis-mapped LePE weight
moves the logits by far more than the gate; the non-square maps catch a height/width mix-up that a square map hides.

Exports are shared per module, one per model and variant (seed 0); the fixture keeps only what the tests read (the
graph without initializers, the custom nodes as onnx-graphsurgeon sees them, the TensorRT variant's graph) and
deletes the file. A model whose plugin-mode forward calls no custom op exports once: with no custom-op call its
plugin-mode trace is the plain trace. The tests of one model run back to back, and under pytest-xdist this whole
module on one worker (tests/conftest.py work_unit and xdist_scope: the first parameter of every test here is the
model), so no model is exported twice.
"""
import collections
import io
import warnings

import numpy as np
import onnx
import pytest

from edgeattn import onnx_graph
from edgeattn.export import contract
from edgeattn.export.exporter import check_model, export_onnx, load_torch_model
from edgeattn.models import list_models
from edgeattn.schemas import get_schema

from export_helpers import capture_custom_op_calls, expected_attributes, export_images
from memory_support import release_freed_memory
from random_params import randomise_parameters

#: Registered size variants not exported here, each with the model whose export covers it: the same module classes
#: and attention kinds at other widths and depths (test_stand_ins_share_the_architecture checks that on the meta
#: device), so the same symbolics, custom nodes and functions. An export costs ~0.1 s per million parameters and
#: variant on this machine; these ~1.6G parameters would double this module's time without reaching new code.
#: (Their gates stay in PARITY_GATES: taking a model out of here exports it.)
STAND_INS = {
    "cswin_64_12211_tiny": "cswin_t24181_local", "cswin_64_24322_small": "cswin_t24181_local",
    "cswin_96_24322_base": "cswin_t24181_local", "cswin_144_24322_large": "cswin_t24181_local",
    "cswin_b36292_local": "cswin_t24181_local", "cswin_b36292_agent": "cswin_t24181_agent",
    "cswin_b36292_effatt": "cswin_t24181_effatt", "cswin_b36292_flatten": "cswin_t24181_flatten",
    "soft_norm_small": "softpp_tiny", "soft_norm_medium": "softpp_tiny", "soft_norm_large": "softpp_tiny",
    "swin_b_agent": "swin_t_agent", "swin_b_effatt": "swin_t_effatt", "swin_b_elfatt": "swin_t_elfatt",
    "swin_b_flatten": "swin_t_flatten", "swin_b_global": "swin_t_global", "swin_b_local": "swin_t_local",
    # ViT-B/16 at 384 with and without Multi-Spot: exported at 384 through the CLI in test_export_new_models.py
    "vit_base_patch16_384": "vit_base_patch16_384_ms_top64_s16",
    "vit_base_patch16_384_ms_top64": "vit_base_patch16_384_ms_top64_s16",
    "vit_base_patch16_384_ms_top96_s16": "vit_base_patch16_384_ms_top64_s16",
    "vit_base_patch16_384_ms_top96_s4": "vit_base_patch16_384_ms_top64_s16",
}
#: stand-ins exported in full elsewhere (test_export_new_models.py REPRESENTATIVES)
EXPORTED_ELSEWHERE = ("vit_base_patch16_384_ms_top64_s16",)
MODELS = [name for name in list_models() if name not in STAND_INS and name not in EXPORTED_ELSEWHERE]
RESOLUTION = 224
#: ops that make up a softmax-style attention core when exported with standard ops
CORE_OPS = ("Softmax", "Exp")

#: ORT parity gate per model: about 10x the max relative error a correct export measured (the larger of the plugin
#: and plugin-free variants, randomised parameters, ORT 1.2x CPU, 2-core AMD EPYC), rounded up to two digits. The
#: measured errors were 2e-7 .. 1.03e-6; the planted bugs of tests/mutation/ give 1e-4 and more.
PARITY_GATES = {
    "cswin_b36292_elfatt": 5.6e-6, "cswin_b36292_global": 4.6e-6,
    "cswin_t24181_effatt": 3.2e-6, "cswin_t24181_elfatt": 6.7e-6, "cswin_t24181_global": 5.2e-6,
    "cswin_t24181_local": 4.8e-6,
    "efficientvit_b0": 6.2e-6, "efficientvit_b1": 4.9e-6, "efficientvit_b2": 8.8e-6, "efficientvit_b3": 8.2e-6,
    "flurka_t2t7_linformer_performer": 7.7e-6, "flurka_t2t7_linformer_rnn": 5.8e-6,
    "qtvit_1": 1.1e-5, "qtvit_2": 8.2e-6, "qtvit_3": 8.8e-6,
    "softpp_large": 6.2e-6, "softpp_medium": 5.6e-6, "softpp_small": 4.5e-6, "softpp_tiny": 7.2e-6,
    "vit_tiny_elfatt": 3.2e-6, "vit_tiny_softmax": 2.2e-6,
    # edgeattn/models/released.py (measured 4.4e-7 .. 1.02e-6 the same way)
    "cswin_64_12211_tiny": 6.5e-6, "cswin_64_24322_small": 5.7e-6, "cswin_96_24322_base": 4.6e-6,
    "cswin_144_24322_large": 4.5e-6, "soft_norm_small": 7.6e-6, "soft_norm_medium": 8.4e-6, "soft_norm_large": 1.1e-5,
    # edgeattn/models/cswin.py and swin.py, Agent and FLatten (measured 4.1e-7 .. 7.0e-7)
    "cswin_t24181_agent": 6.1e-6, "cswin_t24181_flatten": 4.1e-6,
    "swin_t_agent": 5.6e-6, "swin_t_effatt": 6.1e-6, "swin_t_elfatt": 5.4e-6, "swin_t_flatten": 4.4e-6,
    "swin_t_global": 7.1e-6, "swin_t_local": 4.5e-6,
}


#: custom nodes of the plugin form, by op, as the model's structure fixes them (Swin-T-ELFATT: nine ELFATT blocks, all
#: of its 12 but stage 3's three VaniATT ones, each an EFFATT + blockify pair; CSWin-T Agent: none), beside the check
#: of every model's nodes against its PyTorch forward's custom-op calls
EXPECTED_CUSTOM_OPS = {
    "swin_t_elfatt": {"EdgeAttnEfficientAttention": 9, "EdgeAttnBlockifyAttention": 9},
    "cswin_t24181_agent": {},
}


def parity_gate(arch):
    assert arch in PARITY_GATES, (
        "no ORT parity gate for {}: export it (randomised parameters), and add about 10x its max relative error "
        "to PARITY_GATES".format(arch))
    return PARITY_GATES[arch]


def prepared_model(arch, img_size=RESOLUTION):
    """The registered model with seeded weights and every constant-initialised parameter randomised."""
    model, size = load_torch_model(arch=arch, img_size=img_size, seed=0)
    return randomise_parameters(model, seed=0, scales=True), size


def recorded_calls(model, images):
    """[(op_type, expected attributes, input shapes)] of the custom-op calls a plugin-mode forward makes."""
    import torch

    calls = []
    for op_type, args in capture_custom_op_calls(model, images):
        shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in args]
        calls.append((op_type, expected_attributes(op_type, args), shapes))
    return calls


def gs_custom_nodes(model):
    """The trt.plugins nodes as onnx-graphsurgeon imports them: (name, op, attrs, input shapes, output count)."""
    import onnx_graphsurgeon as gs

    nodes = []
    for node in gs.import_onnx(model).nodes:
        if node.domain == "trt.plugins":
            shapes = [None if t.shape is None else tuple(t.shape) for t in node.inputs]
            nodes.append((node.name, node.op, dict(node.attrs), shapes, len(node.outputs)))
    return nodes


def without_initializers(model):
    """A new ModelProto with ``model``'s nodes, functions and opsets (what the tests read) but no weights. Parsed
    anew: a parsed message holds the memory of its whole parse until it is freed, whatever fields are cleared."""
    model.graph.ClearField("initializer")
    return onnx.load_from_string(model.SerializeToString())


class Exported(object):
    """What the tests read of one export."""

    def __init__(self, summary, calls, graph_model, gs_nodes, tensorrt_model):
        self.summary = summary
        self.calls = calls  # [(op_type, expected attributes, input shapes)] from a plugin-mode forward
        self.model = graph_model  # the exported ModelProto without initializers
        self.gs_nodes = gs_nodes
        self.tensorrt_model = tensorrt_model  # what `edgeattn build` strips the file to, without initializers


def export_for_tests(arch, directory):
    """Export ``arch`` (randomised, seed 0) at 224 with and without plugins, gate the parity of both, and return
    {plugins: Exported}; a model whose plugin-mode forward calls no custom op is exported once, for both. Raises
    EdgeAttnError or AssertionError when an export is wrong (what tests/mutation/ relies on)."""
    import torch

    model, size = prepared_model(arch)
    images = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(0))
    calls = recorded_calls(model, images)
    results = {}
    for plugins in ([True, False] if calls else [False]):
        path = directory / "{}.{}.onnx".format(arch, int(plugins))
        summary = export_onnx(model, path, img_size=size, plugins=plugins, check=True)
        check_parity(arch, summary)
        exported = onnx.load(str(path))
        path.unlink()
        gs_nodes = gs_custom_nodes(exported)  # before the weights go: the shapes of initializer inputs
        graph_model = without_initializers(exported)
        del exported
        # stripping the functions does not read the weights: strip the graph without them
        tensorrt_model = onnx.load_from_string(onnx_graph.strip_local_functions(graph_model))
        results[plugins] = Exported(summary, calls if plugins else [], graph_model, gs_nodes, tensorrt_model)
        release_freed_memory()  # the next export's peak then starts from what is live, not from this one's heap
    results.setdefault(True, results[False])
    return results


def check_parity(arch, summary):
    parity = summary.parity
    assert parity is not None and parity["max_rel"] <= parity_gate(arch), (arch, parity)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """get(arch, plugins) -> Exported. Holds the exports of one model at a time: tests/conftest.py runs the tests of
    one model back to back (and on one pytest-xdist worker), so a model is exported once and dropped before the next
    one is."""
    cache = {}
    directory = tmp_path_factory.mktemp("exports")

    def get(arch, plugins):
        if arch not in cache:
            cache.clear()
            cache[arch] = export_for_tests(arch, directory)
        return cache[arch][plugins]

    return get


@pytest.mark.parametrize("plugins", [True, False], ids=["plugins", "noplugins"])
@pytest.mark.parametrize("arch", MODELS)
def test_export_passes_ort_parity(exported, arch, plugins):
    result = exported(arch, plugins)
    check_parity(arch, result.summary)
    if plugins and arch in EXPECTED_CUSTOM_OPS:
        assert result.summary.custom_ops == EXPECTED_CUSTOM_OPS[arch]
    if not plugins or not result.calls:
        assert result.summary.custom_ops == {}
        assert not contract.custom_nodes(result.model.graph)
        assert len(result.model.functions) == 0


_PY_TYPES = {"int": int, "float": float, "string": str}


def _gs_attribute_matches(schema_type, value):
    if schema_type in _PY_TYPES:
        return type(value) is _PY_TYPES[schema_type]
    return isinstance(value, list) and all(type(v) is _PY_TYPES[schema_type[:-1]] for v in value)


def check_plugin_nodes(gs_nodes, model, calls):
    """The custom nodes follow their schemas and carry exactly the attributes and input shapes of the custom-op
    calls the PyTorch forward made, in order; one model-local function per op_type used."""
    assert [node[1] for node in gs_nodes] == [call[0] for call in calls]
    for (name, op, attrs, input_shapes, outputs), (op_type, expected, shapes) in zip(gs_nodes, calls):
        schema = get_schema(op_type)
        types = {attr.name: attr.type for attr in schema.attributes}
        types.update(plugin_version="string", plugin_namespace="string")
        assert set(attrs) == set(types), name
        for key, value in attrs.items():
            assert _gs_attribute_matches(types[key], value), (name, key, value)
        assert attrs["plugin_version"] == schema.version
        assert attrs["plugin_namespace"] == schema.namespace
        for key, value in expected.items():
            if isinstance(value, float) or (isinstance(value, list) and value and isinstance(value[0], float)):
                assert np.allclose(attrs[key], value, rtol=1e-6), (name, key)
            else:
                assert attrs[key] == value, (name, key)
        assert len(input_shapes) == contract.expected_input_count(schema, attrs), name
        recorded = [shape for shape in shapes if shape is not None]
        for got, shape in zip(input_shapes, recorded):
            if got is not None:
                assert got == shape, (name, got, shape)
        assert outputs == 1
    # the same nodes through the exporter's own validator (ONNX attribute types included)
    for node in contract.custom_nodes(model.graph):
        assert contract.node_problems(node) == [], node.name
    # one local function per op_type used, named op_type, in trt.plugins
    assert sorted((f.domain, f.name) for f in model.functions) == sorted(
        {("trt.plugins", call[0]) for call in calls})


@pytest.mark.parametrize("arch", MODELS)
def test_plugin_nodes_follow_schema_and_model(exported, arch):
    result = exported(arch, True)
    check_plugin_nodes(result.gs_nodes, result.model, result.calls)


_REFERENCE_COUNTS = {}


def _reference_core_counts(op_type, attributes, shapes):
    """Softmax/Exp node counts of the reference core (edgeattn.ops, standard torch ops) exported on its own."""
    import torch

    key = (op_type, tuple(sorted((k, str(v)) for k, v in attributes.items())), tuple(shapes))
    if key in _REFERENCE_COUNTS:
        return _REFERENCE_COUNTS[key]
    from edgeattn.ops.blockify import blockify_attention
    from edgeattn.ops.efficient_attention import efficient_attention
    from edgeattn.ops.litemla import lite_mla_attention
    from edgeattn.ops.soft import soft_kernel_attention

    a = attributes
    tensors = [torch.randn(*shape) for shape in shapes if shape is not None]
    if op_type == "EdgeAttnBlockifyAttention":
        def core(q, k, v, *lepe):
            return blockify_attention(q, k, v, num_heads=a["num_heads"], height=a["height"], width=a["width"],
                                      window_size=a["window_size"], scale=a["scale"] or None,
                                      lepe_weight=lepe[0] if lepe else None, lepe_bias=lepe[1] if lepe else None,
                                      padding=a["padding"])
    elif op_type == "EdgeAttnEfficientAttention":
        def core(q, k, v):
            return efficient_attention(q, k, v, num_heads=a["num_heads"])
    elif op_type == "EdgeAttnLiteMLA":
        def core(qkv):
            return lite_mla_attention(qkv, head_dim=a["head_dim"], kernel=a["kernel"], eps=a["eps"],
                                      qt_alpha=a["qt_alpha"], qt_beta=a["qt_beta"], qt_gamma=a["qt_gamma"])
    else:
        def core(q, landmarks, v):
            return soft_kernel_attention(q, landmarks, v, num_heads=a["num_heads"], newton_iters=a["newton_iters"],
                                         symmetric_norm=bool(a["symmetric_norm"]))

    class Core(torch.nn.Module):
        def forward(self, *args):
            return core(*args)

    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(Core(), tuple(tensors), buffer, dynamo=False, opset_version=17)
    counts = collections.Counter(n.op_type for n in onnx.load_from_string(buffer.getvalue()).graph.node)
    _REFERENCE_COUNTS[key] = {op: counts[op] for op in CORE_OPS}
    return _REFERENCE_COUNTS[key]


@pytest.mark.parametrize("arch", MODELS)
def test_plugin_variant_has_no_standard_attention_core(exported, arch):
    """Every Softmax/Exp the no-plugin export has is either gone with a core a plugin replaced (as many as the
    reference core exports on its own) or still there because its attention has no plugin; none is left in
    place of a replaced core and none is lost elsewhere."""
    with_plugins, without = exported(arch, True), exported(arch, False)
    plugin_counts = collections.Counter(n.op_type for n in with_plugins.model.graph.node)
    plain_counts = collections.Counter(n.op_type for n in without.model.graph.node)
    replaced = collections.Counter()
    for op_type, attributes, shapes in with_plugins.calls:
        replaced.update(_reference_core_counts(op_type, attributes, shapes))
    for op in CORE_OPS:
        assert plugin_counts[op] == plain_counts[op] - replaced[op], (op, plugin_counts[op], plain_counts[op],
                                                                      replaced[op])


@pytest.mark.parametrize("arch", MODELS)
def test_tensorrt_variant_has_no_functions_and_keeps_plugin_keys(exported, arch):
    """What `edgeattn build` and `export --target tensorrt` do to the ORT file: functions gone, nodes intact."""
    result = exported(arch, True)
    model = result.tensorrt_model
    assert onnx_graph.model_info(model)["has_functions"] is False
    assert len(model.functions) == 0
    assert [n.SerializeToString() for n in model.graph.node] == [n.SerializeToString()
                                                                  for n in result.model.graph.node]
    for node in contract.custom_nodes(model.graph):
        attrs = contract.decoded_attributes(node)
        assert attrs["plugin_namespace"] == "edgeattn" and attrs["plugin_version"] == "1"


def architecture(arch):
    """What an export depends on besides sizes: the module classes and the attention kinds of the blocks."""
    import inspect

    import torch

    from edgeattn.models import create_model
    from edgeattn.models._registry import _entry

    size = inspect.signature(_entry(arch).builder).parameters["img_size"].default
    with torch.device("meta"):
        model = create_model(arch, img_size=size)
    classes = {"{}.{}".format(type(m).__module__, type(m).__name__) for m in model.modules()}
    kinds = {kind for stage in getattr(model, "block_kinds", []) for kind in stage}
    return classes, kinds


@pytest.mark.parametrize("arch", sorted(STAND_INS))
def test_stand_ins_share_the_architecture(arch):
    stand_in = STAND_INS[arch]
    assert stand_in in MODELS or stand_in in EXPORTED_ELSEWHERE
    assert architecture(arch) == architecture(stand_in)


def test_every_registered_model_is_exported_here_or_stood_in_for():
    from test_export_new_models import REPRESENTATIVES

    assert set(EXPORTED_ELSEWHERE) <= set(REPRESENTATIVES)
    assert set(STAND_INS) | set(MODELS) | set(EXPORTED_ELSEWHERE) == set(list_models())
    assert set(PARITY_GATES) <= set(list_models())


@pytest.mark.parametrize("padding", ["zeros", "masked"])
def test_padded_windows_export(padding, tmp_path):
    """A window that does not tile the token map (14x14 grid, 5x5 windows): the padded and masked paths of the
    blockify function against PyTorch through the whole pipeline, and the padding attribute on every node."""
    import torch

    from edgeattn.models import create_model

    torch.manual_seed(0)
    model = randomise_parameters(create_model("vit_tiny_elfatt", window_size=5, padding=padding), seed=0,
                                 scales=True)
    summary = export_onnx(model, tmp_path / "padded.onnx", img_size=224, check=True)
    check_parity("vit_tiny_elfatt", summary)
    nodes = [n for n in onnx.load(str(tmp_path / "padded.onnx")).graph.node if n.op_type == "EdgeAttnBlockifyAttention"]
    assert nodes and all(contract.decoded_attributes(n)["padding"] == padding for n in nodes)
    assert all(contract.decoded_attributes(n)["window_size"] == 5 for n in nodes)


#: (model, height, width, the custom ops its export must contain; LiteMLA by kernel): together every custom op
NON_SQUARE = [
    ("vit_tiny_elfatt", 224, 336, {"EdgeAttnBlockifyAttention", "EdgeAttnEfficientAttention"}),
    ("efficientvit_b0", 96, 160, {"EdgeAttnLiteMLA:relu"}),
    ("qtvit_1", 96, 160, {"EdgeAttnLiteMLA:quadratic_taylor"}),
    ("softpp_tiny", 160, 224, {"EdgeAttnSoftKernelAttention"}),
]


def custom_op_kinds(model):
    kinds = set()
    for node in contract.custom_nodes(model.graph):
        kernel = contract.decoded_attributes(node).get("kernel") if node.op_type == "EdgeAttnLiteMLA" else None
        kinds.add(node.op_type + (":" + kernel if kernel else ""))
    return kinds


def export_non_square(arch, height, width):
    """Export ``arch`` (randomised) for one height x width batch through export_onnx's pipeline, check ORT parity
    at the model's gate, and return (ModelProto, parity, recorded custom-op calls). Raises EdgeAttnError when ORT
    disagrees with PyTorch beyond the gate."""
    import torch

    from edgeattn.ops.config import use_plugin_ops

    model, _ = prepared_model(arch)
    images = torch.randn(1, 3, height, width, generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), use_plugin_ops(False):
        expected = model(images)
    exported = export_images(model, images, plugins=True)
    parity, _ = check_model(exported.SerializeToString(), images, expected, rel_limit=parity_gate(arch))
    return exported, parity, recorded_calls(model, images)


def check_non_square(arch, height, width, kinds):
    exported, parity, calls = export_non_square(arch, height, width)
    assert custom_op_kinds(exported) == kinds
    check_plugin_nodes(gs_custom_nodes(exported), exported, calls)
    return parity


@pytest.mark.parametrize("arch,height,width,kinds", NON_SQUARE, ids=[case[0] for case in NON_SQUARE])
def test_non_square_export(arch, height, width, kinds):
    """A height != width map through the custom ops: parity at the model's gate, and node attributes (height,
    width, shapes) equal to what the PyTorch forward passed to each op."""
    check_non_square(arch, height, width, kinds)


@pytest.mark.parametrize("symmetric_norm", [False, True], ids=["soft", "softpp"])
def test_soft_attention_exports_its_symmetric_norm(symmetric_norm):
    """Every registered SOFT model is SOFT++ (symmetric_norm = 1), so a symbolic that wrote a constant 1 would pass
    every model export: a SOFT module (Eq. 9, no D^-1/2 normalisation) must become a node with symmetric_norm = 0
    whose model-local function gives PyTorch's numbers, batch 2 on a 6 x 8 map."""
    import torch

    from edgeattn.ops import SOFTAttention
    from edgeattn.ops.config import use_plugin_ops

    class TokenMap(torch.nn.Module):  # the exporter traces one-input models
        def __init__(self):
            super().__init__()
            self.attention = SOFTAttention(32, 2, sampling_ratio=2, newton_iters=6, symmetric_norm=symmetric_norm)

        def forward(self, x):
            return self.attention(x, (6, 8))

    torch.manual_seed(0)
    model = TokenMap().eval()
    x = torch.randn(2, 48, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), use_plugin_ops(False):
        expected = model(x)
    exported = export_images(model, x, plugins=True)
    check_plugin_nodes(gs_custom_nodes(exported), exported, recorded_calls(model, x))
    nodes = contract.custom_nodes(exported.graph)
    assert [contract.decoded_attributes(node)["symmetric_norm"] for node in nodes] == [int(symmetric_norm)]
    check_model(exported.SerializeToString(), x, expected, rel_limit=1e-5)


def test_non_square_exports_cover_every_custom_op():
    from edgeattn.ops.litemla import KERNELS

    covered = set().union(*(case[3] for case in NON_SQUARE))
    expected = {op for op in contract.custom_op_types() if op != "EdgeAttnLiteMLA"}
    expected |= {"EdgeAttnLiteMLA:" + kernel for kernel in KERNELS}
    assert covered == expected
