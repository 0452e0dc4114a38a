"""Helpers for the build/bench/doctor tests (tests/bench, tests/engine, tests/tensorrt_runtime, tests/trtexec,
tests/compare):
tiny ONNX models written with onnx.helper, fake trtexec installs, fake plugin libraries, a stand-in for
edgeattn.plugins, the verbatim trtexec captures, and the fixtures each of those directories' conftest.py imports."""
import os
import shutil
import stat
import sys
import types

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FAKE_TRTEXEC = os.path.join(REPO, "tests", "fakes", "trtexec", "trtexec")
FIXTURES = os.path.join(REPO, "tests", "fixtures", "trtexec")
PLUGIN_MAGIC = "FAKE-PLUGIN-LIBRARY"
EDGEATTN_CREATOR = ("EdgeAttnLiteMLA", "1", "edgeattn")
#: IR version of the test models: 8 is the oldest that carries model-local functions, and every ONNX Runtime and
#: TensorRT parser the tests stand in for reads it (onnx.helper would write its own newest IR by default)
IR_VERSION = 8


def read_fixture(name):
    """A capture from tests/fixtures/trtexec without its citation header."""
    with open(os.path.join(FIXTURES, name)) as handle:
        text = handle.read()
    return text.split("# ---\n", 1)[1]


def _model_bytes(nodes, inputs, outputs, initializers, opsets, functions=()):
    from onnx import helper

    graph = helper.make_graph(nodes, "graph", inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(domain, version)
                                                    for domain, version in sorted(opsets.items())],
                              functions=list(functions), ir_version=IR_VERSION, producer_name="edgeattn-tests")
    return model.SerializeToString()


def matmul_model(batch="batch", features=64, with_custom=False, with_function=False, namespace=True, seed=0):
    """x (batch, F) -> MatMul -> Relu [-> custom EdgeAttnLiteMLA node (with or without a local function)];
    serialized ModelProto bytes."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="/fc/MatMul"),
             helper.make_node("Relu", ["h"], ["r"], name="/act/Relu")]
    opsets = {"": 17}
    functions = []
    output = "r"
    if with_custom:
        attributes = {"plugin_version": "1", "head_dim": 8}
        if namespace:
            attributes["plugin_namespace"] = "edgeattn"
        nodes.append(helper.make_node("EdgeAttnLiteMLA", ["r"], ["y"], name="/attn/EdgeAttnLiteMLA",
                                      domain="trt.plugins", **attributes))
        opsets["trt.plugins"] = 1
        output = "y"
        if with_function:
            functions.append(helper.make_function("trt.plugins", "EdgeAttnLiteMLA", ["a"], ["b"],
                                                  [helper.make_node("Relu", ["a"], ["b"])],
                                                  [helper.make_opsetid("", 17)]))
    weight = numpy_helper.from_array(rng.standard_normal((features, features)).astype(np.float32), "W")
    return _model_bytes(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, features])],
                        [helper.make_tensor_value_info(output, TensorProto.FLOAT, [batch, features])], [weight],
                        opsets, functions)


def layernorm_model(features=16):
    """MatMul -> decomposed LayerNorm (opset < 17 export style) -> Softmax: FP32 islands for the policy."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    make = helper.make_node
    nodes = [
        make("MatMul", ["x", "W"], ["h"], name="/fc/MatMul"),
        make("ReduceMean", ["h"], ["m"], name="/norm/ReduceMean", axes=[-1]),
        make("Sub", ["h", "m"], ["d"], name="/norm/Sub"),
        make("Pow", ["d", "two"], ["p"], name="/norm/Pow"),
        make("ReduceMean", ["p"], ["v"], name="/norm/ReduceMean_1", axes=[-1]),
        make("Add", ["v", "eps"], ["ve"], name="/norm/Add"),
        make("Sqrt", ["ve"], ["s"], name="/norm/Sqrt"),
        make("Div", ["d", "s"], ["n"], name="/norm/Div"),
        make("Mul", ["n", "gamma"], ["g"], name="/norm/Mul"),
        make("Softmax", ["g"], ["y"], name="/attn/Softmax", axis=-1),
    ]
    initializers = [
        numpy_helper.from_array(rng.standard_normal((features, features)).astype(np.float32), "W"),
        numpy_helper.from_array(np.array(2.0, dtype=np.float32), "two"),
        numpy_helper.from_array(np.array(1e-5, dtype=np.float32), "eps"),
        numpy_helper.from_array(rng.standard_normal(features).astype(np.float32), "gamma"),
    ]
    return _model_bytes(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, features])],
                        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, features])], initializers,
                        {"": 13})


def model_nodes(data):
    """The node dicts ``edgeattn build`` works on, for serialized model bytes."""
    import onnx

    from edgeattn.onnx_graph import graph_nodes

    return graph_nodes(onnx.load_from_string(data))


def install_trtexec(root, version, device=None, compute_ms=None):
    """``root/TensorRT-<version>/bin/trtexec``: a wrapper that runs the fake under this interpreter with a VERSION
    file beside it (the fake reads its version from its install dir)."""
    bindir = os.path.join(str(root), "TensorRT-{}".format(version), "bin")
    os.makedirs(bindir, exist_ok=True)
    with open(os.path.join(bindir, "VERSION"), "w") as handle:
        handle.write(version + "\n")
    env = ["FAKE_TRTEXEC_ARGV0=\"$0\""]
    if device is not None:
        env.append("FAKE_TRTEXEC_DEVICE='{}'".format(device))
    if compute_ms is not None:
        env.append("FAKE_TRTEXEC_COMPUTE_MS={}".format(compute_ms))
    path = os.path.join(bindir, "trtexec")
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n{} exec '{}' '{}' \"$@\"\n".format(" ".join(env), sys.executable, FAKE_TRTEXEC))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def fake_trtexec(tmp_path, monkeypatch):
    """Factory: ``fake_trtexec("8.6.2")`` installs a fake and returns its path (no environment leaks in)."""
    for name in ("FAKE_TRTEXEC_VERSION", "FAKE_TRTEXEC_DEVICE", "FAKE_TRTEXEC_OUTPUT_ERROR", "EDGEATTN_TRTEXEC"):
        monkeypatch.delenv(name, raising=False)

    def _install(version, device=None, compute_ms=None):
        return install_trtexec(tmp_path / "trt", version, device=device, compute_ms=compute_ms)

    return _install


@pytest.fixture
def no_jetson(monkeypatch):
    """Not a Jetson: detect_board finds nothing, nvpmodel reports no mode."""
    import edgeattn

    for name in ("edgeattn.jetson", "edgeattn.jetson.board", "edgeattn.jetson.nvpmodel", "edgeattn.jetson.clocks"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delattr(edgeattn, "jetson", raising=False)


def write_plugin_library(path, creators=(EDGEATTN_CREATOR,)):
    with open(str(path), "w") as handle:
        handle.write(PLUGIN_MAGIC + "\n")
        for creator in creators:
            handle.write(" ".join(creator) + "\n")
    return str(path)


class _Loaded(object):
    def __init__(self, path, sha256, creators):
        self.path = path
        self.sha256 = sha256
        self.creators = creators


def plugins_stub_module():
    """A stand-in for edgeattn.plugins (find_plugin_library, load_plugin_library); the creators come from the fake
    library file."""
    from edgeattn._io import sha256_file
    from edgeattn.errors import EdgeAttnError

    module = types.ModuleType("edgeattn.plugins")

    class PluginLibraryNotFound(EdgeAttnError):
        pass

    def find_plugin_library(explicit=None):
        candidate = explicit or os.environ.get("EDGEATTN_PLUGIN_LIB")
        if candidate and os.path.isfile(candidate):
            return os.path.abspath(candidate)
        raise PluginLibraryNotFound("edgeattn plugin library not found (looked in: {}); build it with "
                                    "deploy/jetson/build_plugins.sh".format(candidate or "$EDGEATTN_PLUGIN_LIB"))

    def load_plugin_library(path=None):
        path = find_plugin_library(path)
        with open(path) as handle:
            lines = handle.read().splitlines()
        creators = [tuple((line.split() + [""])[:3]) for line in lines[1:] if line.strip()]
        return _Loaded(path, sha256_file(path), creators)

    module.PluginLibraryNotFound = PluginLibraryNotFound
    module.find_plugin_library = find_plugin_library
    module.load_plugin_library = load_plugin_library
    module.registered_creators = lambda: []
    return module


def ort_available():
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def onnx_available():
    try:
        import onnx  # noqa: F401
    except ImportError:
        return False
    return True


needs_ort = pytest.mark.skipif(not ort_available(), reason="onnxruntime is not installed")
needs_onnx = pytest.mark.skipif(not onnx_available(), reason="onnx is not installed (device-side environment)")


def qdq_matmul_model(batch=2, features=8, seed=0):
    """x -> Q -> DQ -> MatMul (weight W -> Q -> DQ, per channel) -> Relu: the explicit-quantization pattern
    `edgeattn quantize` writes (INT8, zero points 0); serialized ModelProto bytes."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    weight = rng.standard_normal((features, features)).astype(np.float32)
    inits = [numpy_helper.from_array(weight, "W"),
             numpy_helper.from_array(np.array(0.05, np.float32), "x_scale"),
             numpy_helper.from_array(np.array(0, np.int8), "x_zero"),
             numpy_helper.from_array((np.abs(weight).max(axis=0) / 127).astype(np.float32), "W_scale"),
             numpy_helper.from_array(np.zeros(features, np.int8), "W_zero")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["xq"], name="/fc/x_Q"),
             helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zero"], ["xd"], name="/fc/x_DQ"),
             helper.make_node("QuantizeLinear", ["W", "W_scale", "W_zero"], ["wq"], name="/fc/W_Q", axis=1),
             helper.make_node("DequantizeLinear", ["wq", "W_scale", "W_zero"], ["wd"], name="/fc/W_DQ", axis=1),
             helper.make_node("MatMul", ["xd", "wd"], ["h"], name="/fc/MatMul"),
             helper.make_node("Relu", ["h"], ["r"], name="/act/Relu")]
    return _model_bytes(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, features])],
                        [helper.make_tensor_value_info("r", TensorProto.FLOAT, [batch, features])], inits,
                        {"": 17})


@pytest.fixture
def write_model(tmp_path):
    def _write(data, name="model.onnx"):
        path = tmp_path / name
        path.write_bytes(data)
        return str(path)

    return _write


@pytest.fixture
def plugins_stub(monkeypatch):
    import edgeattn

    stub = plugins_stub_module()
    monkeypatch.setitem(sys.modules, "edgeattn.plugins", stub)
    monkeypatch.setattr(edgeattn, "plugins", stub, raising=False)
    return stub


@pytest.fixture
def no_plugins_module(monkeypatch):
    import edgeattn

    monkeypatch.setitem(sys.modules, "edgeattn.plugins", None)
    monkeypatch.delattr(edgeattn, "plugins", raising=False)


@pytest.fixture
def jetson_stub(monkeypatch):
    """Stand-ins for edgeattn.jetson.{board,nvpmodel,clocks}, describing a Jetson AGX Orin (MAXN when an
    nvpmodel is on PATH)."""
    import edgeattn

    package = types.ModuleType("edgeattn.jetson")
    package.__path__ = []
    board = types.ModuleType("edgeattn.jetson.board")
    board.SOC_COMPUTE_CAPABILITY = {"tegra234": "8.7"}
    board.detect_board = lambda root="/": types.SimpleNamespace(
        model="NVIDIA Jetson AGX Orin Developer Kit", compatible=["nvidia,p3737-0000+p3701-0005", "nvidia,tegra234"],
        l4t_release="36.4.3", jetpack="6.2", module_id="p3701-0005", soc="tegra234")
    nvpmodel = types.ModuleType("edgeattn.jetson.nvpmodel")
    # Like the real helper: a mode only when an nvpmodel is on PATH.
    nvpmodel.nvpmodel_path = lambda: shutil.which("nvpmodel")
    nvpmodel.query_mode = lambda timeout=10: types.SimpleNamespace(id=0, name="MAXN") if shutil.which(
        "nvpmodel") else None
    clocks = types.ModuleType("edgeattn.jetson.clocks")
    clocks.show = lambda timeout=10: {"gpu": {"cur_hz": 1300500000}}
    for name, module in (("edgeattn.jetson", package), ("edgeattn.jetson.board", board),
                         ("edgeattn.jetson.nvpmodel", nvpmodel), ("edgeattn.jetson.clocks", clocks)):
        monkeypatch.setitem(sys.modules, name, module)
    package.board, package.nvpmodel, package.clocks = board, nvpmodel, clocks
    monkeypatch.setattr(edgeattn, "jetson", package, raising=False)
    return package


@pytest.fixture
def isolated_path(tmp_path, monkeypatch):
    """PATH holding only an empty bin directory (plus sh for wrappers): no nvidia-smi, trtexec or nvpmodel."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.delenv("EDGEATTN_TRTEXEC", raising=False)
    return bindir
