"""Registry-driven export tests: every registered model, with and without plugins, at 224.

Oracles: PyTorch FP32 (parity, inside export_onnx: max|ort - torch| / max|torch| <= 1e-4), PyTorch's dispatcher
(which custom-op calls a plugin-mode forward makes, with which arguments), the YAML op schemas (node contract,
checked through onnx-graphsurgeon), and the standalone TorchScript export of each replaced reference core
(how many Softmax/Exp nodes the plugin took out of the graph).

Exports are shared per module (one per model and variant); models are built with random weights (seed 0).
"""
import collections
import io
import warnings

import numpy as np
import onnx
import pytest

from edgeattn.export import contract
from edgeattn.export.exporter import PARITY_RTOL, export_onnx, load_model
from edgeattn.models import list_models
from edgeattn.onnx_wire import read_model_info, strip_local_functions
from edgeattn.schemas import get_schema

from export_helpers import capture_custom_op_calls, expected_attributes

MODELS = list_models()
RESOLUTION = 224
#: ops that make up a softmax-style attention core when exported with standard ops
CORE_OPS = ("Softmax", "Exp")


class Exported(object):
    def __init__(self, summary, path, calls):
        self.summary = summary
        self.path = path
        self.calls = calls  # [(op_type, expected attributes, input shapes)] from a plugin-mode forward
        self._model = None

    @property
    def model(self):
        if self._model is None:
            self._model = onnx.load(str(self.path))
        return self._model


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    import torch

    cache = {}
    directory = tmp_path_factory.mktemp("exports")

    def get(arch, plugins):
        key = (arch, plugins)
        if key not in cache:
            model, size = load_model(arch=arch, img_size=RESOLUTION, seed=0)
            path = directory / "{}{}.onnx".format(arch, "" if plugins else ".noplugins")
            summary = export_onnx(model, path, img_size=size, plugins=plugins, check=True)
            calls = []
            if plugins:
                images = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(0))
                for op_type, args in capture_custom_op_calls(model, images):
                    shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in args]
                    calls.append((op_type, expected_attributes(op_type, args), shapes))
            cache[key] = Exported(summary, path, calls)
        return cache[key]

    return get


@pytest.mark.parametrize("plugins", [True, False], ids=["plugins", "noplugins"])
@pytest.mark.parametrize("arch", MODELS)
def test_export_passes_ort_parity(exported, arch, plugins):
    result = exported(arch, plugins)
    parity = result.summary.parity
    assert parity is not None and parity["max_rel"] <= PARITY_RTOL, parity
    assert result.path.exists()
    if not plugins:
        assert result.summary.custom_ops == {}
        assert not contract.custom_nodes(result.model.graph)
        assert len(result.model.functions) == 0


def _gs_custom_nodes(path):
    import onnx_graphsurgeon as gs

    graph = gs.import_onnx(onnx.load(str(path)))
    return [node for node in graph.nodes if node.domain == "trt.plugins"]


_PY_TYPES = {"int": int, "float": float, "string": str}


def _gs_attribute_matches(schema_type, value):
    if schema_type in _PY_TYPES:
        return type(value) is _PY_TYPES[schema_type]
    return isinstance(value, list) and all(type(v) is _PY_TYPES[schema_type[:-1]] for v in value)


@pytest.mark.parametrize("arch", MODELS)
def test_plugin_nodes_follow_schema_and_model(exported, arch):
    result = exported(arch, True)
    nodes = _gs_custom_nodes(result.path)
    assert [node.op for node in nodes] == [call[0] for call in result.calls]
    for node, (op_type, expected, shapes) in zip(nodes, result.calls):
        schema = get_schema(op_type)
        types = {attr.name: attr.type for attr in schema.attributes}
        types.update(plugin_version="string", plugin_namespace="string")
        assert set(node.attrs) == set(types), node.name
        for name, value in node.attrs.items():
            assert _gs_attribute_matches(types[name], value), (node.name, name, value)
        assert node.attrs["plugin_version"] == schema.version
        assert node.attrs["plugin_namespace"] == schema.namespace
        for name, value in expected.items():
            if isinstance(value, float) or (isinstance(value, list) and value and isinstance(value[0], float)):
                assert np.allclose(node.attrs[name], value, rtol=1e-6), (node.name, name)
            else:
                assert node.attrs[name] == value, (node.name, name)
        assert len(node.inputs) == contract.expected_input_count(schema, node.attrs), node.name
        recorded = [shape for shape in shapes if shape is not None]
        for tensor, shape in zip(node.inputs, recorded):
            if tensor.shape is not None:
                assert tuple(tensor.shape) == shape, (node.name, tensor.name)
        assert len(node.outputs) == 1
    # the same nodes through the exporter's own validator (ONNX attribute types included)
    for node in contract.custom_nodes(result.model.graph):
        assert contract.node_problems(node) == [], node.name
    # one local function per op_type used, named op_type, in trt.plugins
    assert sorted((f.domain, f.name) for f in result.model.functions) == sorted(
        {("trt.plugins", call[0]) for call in result.calls})


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
    data = result.path.read_bytes()
    stripped = strip_local_functions(data)
    assert read_model_info(stripped)["has_functions"] is False
    model = onnx.load_from_string(stripped)
    assert len(model.functions) == 0
    assert [n.SerializeToString() for n in model.graph.node] == [n.SerializeToString()
                                                                  for n in result.model.graph.node]
    for node in contract.custom_nodes(model.graph):
        attrs = contract.decoded_attributes(node)
        assert attrs["plugin_namespace"] == "edgeattn" and attrs["plugin_version"] == "1"


@pytest.mark.parametrize("padding", ["zeros", "masked"])
def test_padded_windows_export(padding, tmp_path):
    """A window that does not tile the token map (14x14 grid, 5x5 windows): the padded and masked paths of the
    blockify function against PyTorch through the whole pipeline, and the padding attribute on every node."""
    import torch

    from edgeattn.models import create_model

    torch.manual_seed(0)
    model = create_model("vit_tiny_elfatt", window_size=5, padding=padding)
    summary = export_onnx(model, tmp_path / "padded.onnx", img_size=224, check=True)
    assert summary.parity["max_rel"] <= PARITY_RTOL
    nodes = [n for n in onnx.load(str(tmp_path / "padded.onnx")).graph.node if n.op_type == "EdgeAttnBlockifyAttention"]
    assert nodes and all(contract.decoded_attributes(n)["padding"] == padding for n in nodes)
    assert all(contract.decoded_attributes(n)["window_size"] == 5 for n in nodes)
