"""The plugin library in a real TensorRT plugin registry: TensorRT-RTX from PyPI.

TensorRT-RTX (``tensorrt-rtx-cu13-libs`` + ``tensorrt-rtx-cu13-bindings``, x86-64 Linux wheels, import name
``tensorrt_rtx``/``tensorrt_rtx_bindings``) runs its plugin registry and ONNX parser without a GPU. Its
``IPluginRegistry::loadLibrary`` loads ``libedgeattn_plugins_dynamic.so`` built here against the TensorRT 11.1
headers (glue objects from plugin_test_utils.glue_build, shared with test_plugins_glue.py, plus the kernels library),
and then, for every custom node of every registered model as ``edgeattn export`` emits it (at 224x224, or
384x384 for a model that needs it):

* a creator with the node's op_type, ``plugin_version`` and ``plugin_namespace`` is in the registry, and its field
  names and TensorRT types are exactly the node's attributes (the lookup keys plugin_version/plugin_namespace are
  not fields);
* creating the plugin from the node's attribute values, converted as the ONNX parser converts them (INT -> INT32,
  FLOAT -> FLOAT32, STRING -> CHAR with its NUL, FLOATS -> FLOAT32[n]), succeeds and yields a plugin with that
  identity; each wrong variant derived from the schema (a field of the wrong type, a value outside the allowed set,
  a required field left out) fails with one error naming the op and the field, through TensorRT's logger;
* TensorRT-RTX's own ONNX parser, given the node as a one-node model, finds the creator and creates the plugin from
  the node's attributes; a node with a mistyped attribute makes the parse fail cleanly with the plugin's error.

TensorRT-RTX builds no networks with plugin layers (its INetworkDefinition has no addPluginV3), and its parser
aborts the process right after a plugin was created, so every parse runs in its own process and the check stops
at "plugin created". The nodes come from the exporter's emission code (``contract.make_node`` on the arguments of
the ``torch.ops.edgeattn`` calls each model makes, shape-only on the meta device where the arguments do not depend
on weights), anchored by one real export whose nodes must be identical.
"""
import importlib.util
import json
import os
import resource
import subprocess
import sys

import pytest

from plugin_test_utils import (REPO_ROOT, cuda_include_dir, find_cxx, find_nvcc, glue_build, header_version,
                               link_dynamic_plugin_library, trt_include_dir)

#: export resolutions, in order of preference: the exporter's default, then the one the Multi-Spot ViTs need
RESOLUTIONS = (224, 384)
# With the glue tests of the same headers (test_plugins_glue.py), so the 11.1 glue build is shared on one worker.
pytestmark = pytest.mark.xdist_group("glue-trt11.1")
ANCHOR_ARCH = "vit_tiny_elfatt"
RTX_TIMEOUT_S = 120
#: what the ONNX parser makes of each ONNX attribute type (onnx-tensorrt ``loadFields`` in
#: onnxOpImporters.cpp: INT narrowed to INT32, STRING to CHAR), by AttributeProto.AttributeType number
PARSER_FIELD_KIND = {1: "FLOAT32", 2: "INT32", 3: "CHAR", 6: "FLOAT32", 7: "INT32"}
PLUGIN_KEYS = ("plugin_version", "plugin_namespace")
RTX_MODULES = ("tensorrt_rtx", "tensorrt_rtx_bindings")

REGISTRY_CHECK = r"""
import json, sys
import numpy as np
try:
    import tensorrt_rtx as trt
except ImportError:
    import tensorrt_rtx_bindings as trt


class Logger(trt.ILogger):
    def __init__(self):
        trt.ILogger.__init__(self)
        self.messages = []

    def log(self, severity, message):
        if severity <= trt.ILogger.WARNING:
            self.messages.append(message)


DTYPES = {"INT32": np.int32, "FLOAT32": np.float32}


def field(name, kind, value, keep):
    if kind == "CHAR":
        data = np.frombuffer(value.encode() + b"\0", dtype=np.int8)
    else:
        data = np.asarray(value if isinstance(value, list) else [value], dtype=DTYPES[kind])
    keep.append(data)  # a PluginField holds only a pointer to the array's memory
    return trt.PluginField(name, data, getattr(trt.PluginFieldType, kind))


def creator_keys(registry):
    return {(c.name, c.plugin_version, c.plugin_namespace) for c in registry.all_creators}


request = json.load(open(sys.argv[1]))
logger = Logger()
builder = trt.Builder(logger)  # while it lives, TensorRT's ILoggerFinder (setLoggerFinder) hands out this logger
registry = trt.get_plugin_registry()
before = creator_keys(registry)
handle = registry.load_library(request["library"])
out = {"version": trt.__version__, "loaded": handle is not None, "load_messages": list(logger.messages)}
out["creators"] = [
    {"name": c.name, "version": c.plugin_version, "namespace": c.plugin_namespace, "kind": c.interface_info.kind,
     "fields": [[f.name, f.type.name] for f in c.field_names]}
    for c in registry.all_creators if (c.name, c.plugin_version, c.plugin_namespace) not in before]
del logger.messages[:]
out["second_load_refused"] = registry.load_library(request["library"]) is None
out["second_load_messages"] = list(logger.messages)
results = []
for case in request["cases"]:
    del logger.messages[:]
    creator = registry.get_creator(case["name"], case["version"], case["namespace"])
    result = {"id": case["id"], "found": creator is not None}
    if creator is not None:
        arrays = []
        fields = trt.PluginFieldCollection([field(name, kind, value, arrays) for name, kind, value in case["fields"]])
        plugin = creator.create_plugin(case["node_name"], fields, trt.TensorRTPhase.BUILD)
        result["created"] = plugin is not None
        if plugin is not None:
            core = plugin.get_capability_interface(trt.PluginCapabilityType.CORE)
            build = plugin.get_capability_interface(trt.PluginCapabilityType.BUILD)
            result["identity"] = [core.plugin_name, core.plugin_version, core.plugin_namespace]
            result["num_outputs"] = build.num_outputs
    result["messages"] = list(logger.messages)
    results.append(result)
out["cases"] = results
registry.deregister_library(handle)
out["left_after_deregister"] = sorted(list(k) for k in creator_keys(registry) - before)
print(json.dumps(out))
"""

PARSE_ONE = r"""
import json, sys
try:
    import tensorrt_rtx as trt
except ImportError:
    import tensorrt_rtx_bindings as trt


class Logger(trt.ILogger):
    def __init__(self):
        trt.ILogger.__init__(self)

    def log(self, severity, message):
        # flushed line by line: the parser may abort the process right after creating the plugin
        print(json.dumps({"severity": int(severity), "message": message}), flush=True)


logger = Logger()
builder = trt.Builder(logger)
registry = trt.get_plugin_registry()
if registry.load_library(sys.argv[1]) is None:
    sys.exit("load_library failed")
network = builder.create_network(0)
parser = trt.OnnxParser(network, logger)
with open(sys.argv[2], "rb") as handle:
    parsed = parser.parse(handle.read())
layers = [str(network.get_layer(i).type) for i in range(network.num_layers)]
print(json.dumps({"parsed": bool(parsed), "errors": [parser.get_error(i).desc() for i in range(parser.num_errors)],
                  "layers": layers}), flush=True)
"""


def _rtx_module():
    for name in RTX_MODULES:
        if importlib.util.find_spec(name) is not None:
            return name
    return None


@pytest.fixture(scope="module")
def rtx():
    module = _rtx_module()
    if module is None:
        pytest.skip("TensorRT-RTX is not installed (pip install tensorrt-rtx-cu13-libs==1.7.1.116 "
                    "tensorrt-rtx-cu13-bindings==1.7.1.116: x86-64 Linux wheels, in the test extra there)")
    return module


@pytest.fixture(scope="module")
def dynamic_library(rtx, kernels_build, tmp_path_factory):
    """libedgeattn_plugins_dynamic.so built against the TensorRT 11.1 headers (the API TensorRT-RTX 1.7 loads)."""
    include, origin = trt_include_dir("11.1")
    if not os.path.isfile(os.path.join(include, "NvInferVersion.h")):
        pytest.skip("no TensorRT 11.1 headers at {} ({})".format(include, origin))
    assert header_version(include).startswith("11.1.")
    cxx = find_cxx()
    nvcc = find_nvcc()
    cuda_include = cuda_include_dir(nvcc) if nvcc else None
    if cxx is None or cuda_include is None:
        pytest.skip("needs a C++ compiler and the CUDA headers")
    build = glue_build("11.1", include, cxx, cuda_include)
    failed = sorted(name for name, result in build["results"].items() if result.returncode != 0)
    assert not failed, "the glue does not compile against TensorRT 11.1 (see test_plugins_glue.py): {}".format(failed)
    output = str(tmp_path_factory.mktemp("rtx") / "libedgeattn_plugins_dynamic.so")
    return link_dynamic_plugin_library(cxx, build["objects"], 11, kernels_build["library"], output)


def _export_helpers():
    """tests/export/export_helpers.py (custom-op capture through PyTorch's dispatcher, call -> attributes), imported
    the way pytest imports it for the export tests, so both share one module."""
    directory = os.path.join(REPO_ROOT, "tests", "export")
    if directory not in sys.path:
        sys.path.insert(0, directory)
    import export_helpers

    return export_helpers


def _custom_op_calls(helpers, arch):
    """The custom-op calls of ``arch``'s forward at the first of RESOLUTIONS the model accepts."""
    import torch

    from edgeattn.errors import EdgeAttnError
    from edgeattn.models import create_model

    refusals = []
    for size in RESOLUTIONS:
        try:
            with torch.device("meta"):
                model = create_model(arch, img_size=size).eval()
        except EdgeAttnError as error:
            refusals.append(str(error))
            continue
        try:
            return helpers.capture_custom_op_calls(model, torch.empty(1, 3, size, size, device="meta"))
        except NotImplementedError:
            # An attribute taken from a parameter's value (QT-ViT's alpha/beta/gamma) needs real tensors.
            torch.manual_seed(0)
            model = create_model(arch, img_size=size).eval()
            return helpers.capture_custom_op_calls(model, torch.zeros(1, 3, size, size))
    raise AssertionError("{} builds at none of {}: {}".format(arch, RESOLUTIONS, refusals))


def _make_node(op_type, attributes, name):
    from edgeattn.export import contract
    from edgeattn.schemas import get_schema

    schema = get_schema(op_type)
    resolved = contract.node_attributes(op_type, attributes)
    inputs = [spec.name for spec in schema.inputs][:contract.expected_input_count(schema, resolved)]
    return contract.make_node(op_type, inputs, [spec.name for spec in schema.outputs], name=name, **attributes)


def _attribute_key(node):
    from edgeattn.export import contract

    # By name: TorchScript writes a node's attributes sorted by name, make_node in schema order.
    return (node.op_type,) + tuple(sorted((a.name, a.type, json.dumps(contract.attribute_value(a)))
                                          for a in node.attribute))


@pytest.fixture(scope="module")
def exported_nodes(rtx):
    """Every distinct custom node of every registered model: [{"node", "archs", "count"}], plus the anchor."""
    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    from edgeattn.models import list_models

    helpers = _export_helpers()
    distinct = {}
    per_arch = {}
    for arch in list_models():
        calls = _custom_op_calls(helpers, arch)
        per_arch[arch] = []
        for index, (op_type, args) in enumerate(calls):
            node = _make_node(op_type, helpers.expected_attributes(op_type, args), "{}/{}".format(arch, index))
            per_arch[arch].append(node)
            entry = distinct.setdefault(_attribute_key(node), {"node": node, "archs": [], "count": 0})
            entry["count"] += 1
            if arch not in entry["archs"]:
                entry["archs"].append(arch)
    return {"distinct": list(distinct.values()), "per_arch": per_arch}


@pytest.fixture(scope="module")
def anchor_export(exported_nodes, tmp_path_factory):
    """One real ``edgeattn export --target tensorrt`` (a small model): the file and its custom nodes."""
    import onnx

    from edgeattn.export import contract
    from edgeattn.export.exporter import export_onnx, load_torch_model

    model, size = load_torch_model(arch=ANCHOR_ARCH, img_size=RESOLUTIONS[0])
    path = str(tmp_path_factory.mktemp("rtx-export") / (ANCHOR_ARCH + ".onnx"))
    export_onnx(model, path, img_size=size, plugins=True, target="tensorrt", check=False)
    return {"path": path, "nodes": contract.custom_nodes(onnx.load(path, load_external_data=False).graph)}


def _parser_fields(node):
    """[name, kind, value] per attribute as the ONNX parser hands it to createPlugin (plugin keys excluded)."""
    from edgeattn.export import contract

    return [[a.name, PARSER_FIELD_KIND[a.type], contract.attribute_value(a)]
            for a in node.attribute if a.name not in PLUGIN_KEYS]


def _lookup(node):
    from edgeattn.export import contract

    attributes = contract.decoded_attributes(node)
    return {"name": node.op_type, "version": attributes["plugin_version"], "namespace": attributes["plugin_namespace"]}


def _wrong_variants(node):
    """(label, fields, attribute the error must name) per way the schema says a node can be wrong."""
    from edgeattn.schemas import get_schema

    schema = get_schema(node.op_type)
    fields = _parser_fields(node)
    variants = []
    for index, (name, kind, value) in enumerate(fields):
        wrong = list(fields)
        if kind == "INT32":
            wrong[index] = [name, "FLOAT32", value]
        elif kind == "FLOAT32":
            wrong[index] = [name, "INT32", [int(v) for v in value] if isinstance(value, list) else int(value)]
        else:
            wrong[index] = [name, "INT32", 1]
        variants.append(("{} as {}".format(name, wrong[index][1]), wrong, name))
        allowed = schema.attribute(name).values
        if allowed:
            outside = (max(allowed) + 1) if kind == "INT32" else value + "_not_allowed"
            wrong = list(fields)
            wrong[index] = [name, kind, outside]
            variants.append(("{}={!r}".format(name, outside), wrong, name))
        if schema.attribute(name).required:
            variants.append(("without " + name, fields[:index] + fields[index + 1:], name))
    return variants


def _run_python(script, args, tmp_path, name):
    path = os.path.join(str(tmp_path), name)
    with open(path, "w") as handle:
        handle.write(script)

    def no_core_dumps():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return subprocess.run([sys.executable, path] + list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=RTX_TIMEOUT_S,
                          preexec_fn=no_core_dumps)


@pytest.fixture(scope="module")
def registry_report(dynamic_library, exported_nodes, tmp_path_factory):
    cases = []
    for number, entry in enumerate(exported_nodes["distinct"]):
        node = entry["node"]
        base = dict(_lookup(node), node_name=node.name)
        cases.append(dict(base, id="good/{}".format(number), fields=_parser_fields(node)))
        for label, fields, attribute in _wrong_variants(node):
            cases.append(dict(base, id="wrong/{}/{}".format(number, label), fields=fields, attribute=attribute))
    work = tmp_path_factory.mktemp("rtx-registry")
    request = os.path.join(str(work), "request.json")
    with open(request, "w") as handle:
        json.dump({"library": dynamic_library, "cases": cases}, handle)
    result = _run_python(REGISTRY_CHECK, [request], work, "registry_check.py")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    report["requested"] = {case["id"]: case for case in cases}
    return report


def test_exported_nodes_are_what_the_exporter_writes(exported_nodes, anchor_export):
    expected = exported_nodes["per_arch"][ANCHOR_ARCH]
    got = anchor_export["nodes"]
    assert [_attribute_key(n) for n in got] == [_attribute_key(n) for n in expected]
    ops = {entry["node"].op_type for entry in exported_nodes["distinct"]}
    from edgeattn.export import contract

    assert ops == set(contract.custom_op_types()), "some custom op is used by no registered model"


def test_library_loads_and_registers_every_creator(registry_report):
    from edgeattn.export import contract

    assert registry_report["loaded"], registry_report["load_messages"]
    assert [m for m in registry_report["load_messages"] if "[edgeattn]" in m] == []
    registered = {(c["name"], c["version"], c["namespace"]): c for c in registry_report["creators"]}
    expected = {(op, schema.version, schema.namespace) for op, schema in contract.custom_op_types().items()}
    assert set(registered) == expected
    assert {c["kind"] for c in registered.values()} == {"PLUGIN CREATOR_V3ONE"}
    # loadLibrary refuses a second copy of the same creators, and deregistering removes all of them
    assert registry_report["second_load_refused"]
    assert any("EdgeAttn" in m for m in registry_report["second_load_messages"])
    assert registry_report["left_after_deregister"] == []


def test_every_exported_node_finds_its_creator_with_exactly_its_fields(registry_report, exported_nodes):
    creators = {(c["name"], c["version"], c["namespace"]): c for c in registry_report["creators"]}
    for entry in exported_nodes["distinct"]:
        node = entry["node"]
        lookup = _lookup(node)
        creator = creators.get((lookup["name"], lookup["version"], lookup["namespace"]))
        assert creator is not None, (node.name, lookup)
        # the parser looks fields up by name, so order does not matter, but no field may be missing or extra
        fields = dict((name, kind) for name, kind in creator["fields"])
        assert len(fields) == len(creator["fields"]), creator["fields"]
        assert fields == dict((name, kind) for name, kind, _ in _parser_fields(node)), node.name


def test_every_exported_node_creates_its_plugin(registry_report, exported_nodes):
    results = {r["id"]: r for r in registry_report["cases"]}
    for number, entry in enumerate(exported_nodes["distinct"]):
        node = entry["node"]
        result = results["good/{}".format(number)]
        assert result["found"] and result["created"], (node.name, entry["archs"], result["messages"])
        lookup = _lookup(node)
        assert result["identity"] == [lookup["name"], lookup["version"], lookup["namespace"]]
        assert result["num_outputs"] == 1
        assert [m for m in result["messages"] if "[edgeattn]" in m] == [], node.name
    print("{} distinct custom nodes ({} in all) of {} models created their plugins in TensorRT-RTX {}".format(
        len(exported_nodes["distinct"]), sum(e["count"] for e in exported_nodes["distinct"]),
        len(exported_nodes["per_arch"]), registry_report["version"]))


def test_wrong_attribute_values_fail_cleanly_naming_the_field(registry_report):
    wrong = [r for r in registry_report["cases"] if r["id"].startswith("wrong/")]
    assert len(wrong) > 4 * len(registry_report["creators"])
    for result in wrong:
        case = registry_report["requested"][result["id"]]
        assert result["found"] and not result["created"], result["id"]
        ours = [m for m in result["messages"] if "[edgeattn]" in m]
        assert len(ours) == 1, (result["id"], result["messages"])
        assert "{}::createPlugin({})".format(case["name"], case["node_name"]) in ours[0], ours[0]
        assert case["attribute"] in ours[0], (result["id"], ours[0])


def _one_node_model(node, path):
    """A model holding only ``node`` (target "tensorrt": no model-local function), inputs of the schema's ranks."""
    from onnx import TensorProto, helper, save

    from edgeattn.export.exporter import DEFAULT_OPSET
    from edgeattn.schemas import get_schema

    schema = get_schema(node.op_type)

    def value_info(spec):
        return helper.make_tensor_value_info(spec.name, TensorProto.FLOAT, list(spec.shape))

    inputs = [value_info(spec) for spec in schema.inputs if spec.name in node.input]
    graph = helper.make_graph([node], "one_" + node.op_type, inputs, [value_info(s) for s in schema.outputs])
    model = helper.make_model(graph, ir_version=8, opset_imports=[
        helper.make_opsetid("", DEFAULT_OPSET), helper.make_opsetid(schema.domain, 1)])
    save(model, path)
    return path


def _parse(dynamic_library, model_path, work):
    result = _run_python(PARSE_ONE, [dynamic_library, model_path], work, "parse_one.py")
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    messages = [line for line in lines if "message" in line]
    final = next((line for line in lines if "parsed" in line), None)
    return result, messages, final


def _assert_parser_created(node, result, messages, final):
    created = "Successfully created plugin: " + node.op_type
    texts = [m["message"] for m in messages]
    assert any(created in text for text in texts), (node.name, texts[-5:], result.stderr[-2000:])
    assert [t for t in texts if "[edgeattn]" in t] == [], node.name
    if final is None:
        # TensorRT-RTX 1.7 cannot hold plugin layers: its parser aborts right after the creator succeeded.
        assert result.returncode == -6, (node.name, result.returncode, result.stderr[-2000:])
    else:
        assert final["parsed"] and "LayerType.PLUGIN_V3" in final["layers"], (node.name, final)


def test_onnx_parser_creates_every_exported_node(rtx, dynamic_library, exported_nodes, tmp_path):
    for number, entry in enumerate(exported_nodes["distinct"]):
        node = entry["node"]
        model = _one_node_model(node, os.path.join(str(tmp_path), "node{}.onnx".format(number)))
        _assert_parser_created(node, *_parse(dynamic_library, model, tmp_path))


def test_onnx_parser_creates_the_plugin_of_a_real_export(rtx, dynamic_library, anchor_export, tmp_path):
    # The parser meets the first custom node of the real file after the model's standard layers.
    _assert_parser_created(anchor_export["nodes"][0], *_parse(dynamic_library, anchor_export["path"], tmp_path))


def test_onnx_parser_fails_cleanly_on_a_mistyped_attribute(rtx, dynamic_library, exported_nodes, tmp_path):
    import copy

    from onnx import AttributeProto

    first = {}
    for entry in exported_nodes["distinct"]:
        first.setdefault(entry["node"].op_type, entry["node"])
    for op_type, node in sorted(first.items()):
        wrong = copy.deepcopy(node)
        attribute = next(a for a in wrong.attribute if a.type == AttributeProto.INT)
        attribute.type, attribute.f = AttributeProto.FLOAT, float(attribute.i)
        attribute.ClearField("i")
        model = _one_node_model(wrong, os.path.join(str(tmp_path), op_type + ".wrong.onnx"))
        result, messages, final = _parse(dynamic_library, model, tmp_path)
        assert result.returncode == 0 and final is not None, (op_type, result.returncode, result.stderr[-2000:])
        assert not final["parsed"], op_type
        ours = [m["message"] for m in messages if "[edgeattn]" in m["message"]]
        assert len(ours) == 1 and "field {} must be INT32, got FLOAT32".format(attribute.name) in ours[0], ours
        assert "{}::createPlugin({})".format(op_type, node.name) in ours[0]
        assert any("Could not create the plugin" in error for error in final["errors"]), final["errors"]
