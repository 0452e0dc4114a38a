"""`edgeattn build --plugins on|off|auto` against the fake trtexec.

The fake prices every layer of an engine by op type (``FAKE_TRTEXEC_OP_COSTS_MS``): a custom node that became a
plugin under its own op type, a decomposed one under the op types of its standard-op body. The test models give
each custom-op family a body made of a marker op nobody else uses (LiteMLA -> Sigmoid, SOFT -> Tanh), so a cost
table decides which variant of each family is faster, and the expected winner is found here by brute force over
every subset of families from the same table - independently of the search in ``plugin_selection``. The real
decompositions (the exporter's function bodies, with their TfIdfVectorizer/If selections) are checked against ONNX
Runtime running the original model.
"""
import itertools
import json
import os
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from bench_helpers import needs_ort, write_plugin_library  # noqa: E402
from edgeattn.engine import build_engine, decomposition, plugin_selection  # noqa: E402
from edgeattn.errors import EdgeAttnError  # noqa: E402

LITE = "EdgeAttnLiteMLA"
SOFT = "EdgeAttnSoftKernelAttention"
BLOCKIFY = "EdgeAttnBlockifyAttention"
MARKER = {LITE: "Sigmoid", SOFT: "Tanh"}
BASE_MS = 2.0  # the fake's FAKE_TRTEXEC_COMPUTE_MS default
MATMUL_MS = 0.25
#: the fake's per-iteration jitter: compute x (1 + 0.04 sin + 0.02 U[0, 1)), so a median lies in [-4 %, +6 %]
JITTER = (0.96, 1.06)


def _creator(op):
    return (op, "1", "edgeattn")


def marker_model(families=(LITE,), batch="batch", features=8):
    """x -> MatMul -> one custom node per family (plugin keys as the exporter writes them), each with a local
    function whose body is that family's marker op; serialized bytes."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h0"], name="/fc/MatMul")]
    bodies = []
    for index, family in enumerate(families):
        nodes.append(helper.make_node(family, ["h{}".format(index)], ["h{}".format(index + 1)],
                                      name="/blocks.{}/attn/{}".format(index, family), domain="trt.plugins",
                                      plugin_version="1", plugin_namespace="edgeattn"))
        bodies.append(helper.make_function("trt.plugins", family, ["a"], ["b"],
                                           [helper.make_node(MARKER[family], ["a"], ["b"])],
                                           [helper.make_opsetid("", 17)]))
    out = "h{}".format(len(families))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, features])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [batch, features])],
        [numpy_helper.from_array(rng.standard_normal((features, features)).astype(np.float32), "W")])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("trt.plugins", 1)]
    model = helper.make_model(graph, opset_imports=opsets, functions=bodies, ir_version=8)
    return model.SerializeToString()


def real_body_model(batch="batch"):
    """A LiteMLA (quadratic Taylor kernel) feeding a blockify attention with masked padding (5x5 tokens in 3x3
    windows), with the exporter's own function bodies attached: both select their path through string attributes
    (TfIdfVectorizer + If) and the blockify body also through shape arithmetic."""
    from edgeattn.export import functions
    from edgeattn.schemas import get_schema

    def attributes(op, given):
        resolved = get_schema(op).resolve_attributes(given)
        resolved.update(plugin_version="1", plugin_namespace="edgeattn")
        return resolved

    nodes = [
        helper.make_node(LITE, ["qkv"], ["lite"], name="/stage/attn/" + LITE, domain="trt.plugins",
                         **attributes(LITE, {"head_dim": 4, "kernel": "quadratic_taylor", "qt_alpha": [0.5],
                                             "qt_beta": [0.75], "qt_gamma": [0.25]})),
        helper.make_node("Constant", [], ["tokens_shape"], name="/stage/tokens_shape",
                         value=numpy_helper.from_array(np.array([0, 4, 25], dtype=np.int64))),
        helper.make_node("Reshape", ["lite", "tokens_shape"], ["flat"], name="/stage/Reshape"),
        helper.make_node("Transpose", ["flat"], ["tokens"], name="/stage/Transpose", perm=[0, 2, 1]),
        helper.make_node(BLOCKIFY, ["tokens", "tokens", "tokens"], ["y"], name="/stage/local/" + BLOCKIFY,
                         domain="trt.plugins",
                         **attributes(BLOCKIFY, {"num_heads": 2, "height": 5, "width": 5, "window_size": 3,
                                                 "padding": "masked"})),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("qkv", TensorProto.FLOAT, [batch, 12, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 25, 4])])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("trt.plugins", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=8)
    functions.attach_functions(model)
    return model


def _costs(table):
    return ",".join("{}={}".format(op, ms) for op, ms in sorted(table.items()))


def expected_compute_ms(table, families, plugin_ops):
    """What the fake charges per iteration for an engine of ``marker_model(families)`` running ``plugin_ops`` as
    plugins and the other families as their marker bodies."""
    layers = [family if family in plugin_ops else MARKER[family] for family in families]
    return BASE_MS + MATMUL_MS + sum(table.get(op, 0.0) for op in layers)


def brute_force_winner(table, families, tolerance=plugin_selection.TIE_TOLERANCE, buildable=lambda subset: True):
    """Every (buildable) subset of families timed from the cost table; the fastest, ties going to fewer plugins."""
    subsets = [frozenset(c) for r in range(len(families) + 1) for c in itertools.combinations(families, r)
               if buildable(frozenset(c))]
    times = {s: expected_compute_ms(table, families, s) for s in subsets}
    best = min(times.values())
    return min((s for s in subsets if times[s] <= best * (1 + tolerance)), key=lambda s: (len(s), times[s]))


@pytest.fixture
def setup(tmp_path, monkeypatch, fake_trtexec, plugins_stub, no_jetson, write_model):
    """A fake trtexec 10.3.0 (JetPack 6.1/6.2), a plugin library with both families' creators, and the op costs."""
    monkeypatch.delenv("EDGEATTN_PLUGIN_LIB", raising=False)
    monkeypatch.delenv("FAKE_TRTEXEC_OP_COSTS_MS", raising=False)

    class Setup(object):
        trtexec = fake_trtexec("10.3.0")
        library = write_plugin_library(tmp_path / "libedgeattn_plugins.so", [_creator(LITE), _creator(SOFT)])

        @staticmethod
        def costs(table):
            monkeypatch.setenv("FAKE_TRTEXEC_OP_COSTS_MS", _costs(dict(table, MatMul=MATMUL_MS)))

        @staticmethod
        def model(*args, **kwargs):
            return write_model(marker_model(*args, **kwargs))

    return Setup


def _build(invoke, setup, model, *extra, expect=0):
    return invoke(["build", model, "--backend", "trtexec", "--trtexec", setup.trtexec, "--shapes", "x:1x8,2x8,4x8",
                   "--select-warmup-s", "0", "--select-duration-s", "0.05"] + list(extra), expect=expect)


def _engine_header(engine):
    with open(engine) as handle:
        return json.loads(handle.read().split(" ", 1)[1])


def _manifest(engine):
    with open(engine + ".json") as handle:
        return json.load(handle)


def _no_leftovers(directory):
    hidden = [name for name in os.listdir(str(directory)) if name.startswith(".")]
    assert not hidden, hidden


def _check_candidate_timings(selection, table, families):
    """Each candidate's recorded median is the cost of *its own* engine (within the fake's jitter)."""
    for candidate in selection["candidates"]:
        if candidate["status"] == "failed":
            continue
        want = expected_compute_ms(table, families, candidate["plugin_ops"])
        got = candidate["gpu_compute_ms"]["p50"]
        assert want * JITTER[0] <= got <= want * JITTER[1], (candidate["name"], got, want)
        assert candidate["iterations"] >= 10 and candidate["latency_ms"]["p50"] > got


def test_help_documents_the_plugin_modes(invoke):
    text = " ".join(invoke(["build", "--help"], expect=0).stdout.split())
    for phrase in ("--plugins on|off|auto", "--plugin-lib LIB", "no plugin library needed", "keep the fastest",
                   "Default: auto where this machine can time engines", "--select-duration-s"):
        assert phrase in text


def test_auto_picks_the_plugin_when_it_is_faster(invoke, setup, tmp_path):
    table = {LITE: 0.5, "Sigmoid": 3.0}
    setup.costs(table)
    model = setup.model((LITE,))
    result = _build(invoke, setup, model, "--plugins", "auto", "--plugin-lib", setup.library)
    engine = str(tmp_path / "model.engine")
    selection = _manifest(engine)["plugin_selection"]
    assert brute_force_winner(table, [LITE]) == {LITE}
    assert selection["mode"] == "auto" and selection["plugin_ops"] == [LITE] and selection["standard_ops"] == []
    assert [c["name"] for c in selection["candidates"]] == ["plugins: EdgeAttnLiteMLA", "plugins: none"]
    assert [c["status"] for c in selection["candidates"]] == ["selected", "rejected"]
    assert selection["selected"] == "plugins: EdgeAttnLiteMLA"
    assert selection["metric"] == "gpu_compute_ms.p50" and selection["timing"]["batch"] == 2
    assert "slower than the selected candidate" in selection["candidates"][1]["reason"]
    assert selection["ops"][LITE]["runs_as"] == "plugin"
    _check_candidate_timings(selection, table, [LITE])
    # The engine that was kept is the plugin engine, and its manifest says so.
    header = _engine_header(engine)
    assert header["plugins"] == [list(_creator(LITE))] and header["local_functions"] == 0
    manifest = _manifest(engine)
    assert manifest["custom_ops"][0]["op_type"] == LITE and manifest["plugins"]["sha256"]
    assert manifest["engine"]["file"] == "model.engine" and manifest["source_onnx"]["decomposed_ops"] == []
    assert "--plugins auto" in manifest["rebuild_command"]
    assert "plugin ops EdgeAttnLiteMLA (auto: --plugins auto)" in result.stdout
    _no_leftovers(tmp_path)


def test_auto_picks_the_plain_graph_when_the_plugin_is_slower(invoke, setup, tmp_path):
    table = {LITE: 3.0, "Sigmoid": 0.5}
    setup.costs(table)
    model = setup.model((LITE,))
    _build(invoke, setup, model, "--plugins", "auto", "--plugin-lib", setup.library)
    engine = str(tmp_path / "model.engine")
    manifest = _manifest(engine)
    selection = manifest["plugin_selection"]
    assert brute_force_winner(table, [LITE]) == frozenset()
    assert selection["plugin_ops"] == [] and selection["standard_ops"] == [LITE]
    assert selection["selected"] == "plugins: none" and selection["ops"][LITE]["runs_as"] == "standard ops"
    _check_candidate_timings(selection, table, [LITE])
    header = _engine_header(engine)
    assert header["plugins"] == [] and header["inlined_functions"] == []
    # The shipped engine needs no plugin library: the manifest names none and lists no custom op.
    assert manifest["plugins"] is None and manifest["custom_ops"] == []
    assert manifest["source_onnx"]["decomposed_ops"] == [LITE]
    assert selection["decomposition"] == {LITE: "the model-local function"}
    _no_leftovers(tmp_path)


@pytest.mark.parametrize("table", [
    {LITE: 0.5, "Sigmoid": 3.0, SOFT: 4.0, "Tanh": 1.0},  # LiteMLA plugin wins, SOFT decomposed wins
    {LITE: 2.0, "Sigmoid": 0.2, SOFT: 0.3, "Tanh": 5.0},  # the other way round
    {LITE: 0.1, "Sigmoid": 1.0, SOFT: 0.1, "Tanh": 1.0},  # both plugins
])
def test_auto_chooses_per_family(invoke, setup, tmp_path, table):
    families = [LITE, SOFT]
    setup.costs(table)
    _build(invoke, setup, setup.model(tuple(families)), "--plugins", "auto", "--plugin-lib", setup.library)
    engine = str(tmp_path / "model.engine")
    selection = _manifest(engine)["plugin_selection"]
    want = brute_force_winner(table, families)
    # Two families: the search is exhaustive (4 candidates), so it must find the brute-force winner.
    assert len(selection["candidates"]) == 4
    assert {frozenset(c["plugin_ops"]) for c in selection["candidates"]} == {
        frozenset(), frozenset([LITE]), frozenset([SOFT]), frozenset(families)}
    assert set(selection["plugin_ops"]) == want
    assert [c["status"] for c in selection["candidates"]].count("selected") == 1
    _check_candidate_timings(selection, table, families)
    assert sorted(tuple(p) for p in _engine_header(engine)["plugins"]) == sorted(_creator(op) for op in want)
    for family in families:
        assert selection["ops"][family]["runs_as"] == ("plugin" if family in want else "standard ops")
        assert "with the plugin: best median GPU compute" in selection["ops"][family]["reason"]


def test_equally_fast_candidates_ship_fewer_plugins(invoke, setup, tmp_path):
    setup.costs({LITE: 1.0, "Sigmoid": 1.0})
    _build(invoke, setup, setup.model((LITE,)), "--plugins", "auto", "--plugin-lib", setup.library)
    selection = _manifest(str(tmp_path / "model.engine"))["plugin_selection"]
    assert selection["plugin_ops"] == []
    assert "with more ops as plugins" in selection["candidates"][0]["reason"]


def test_a_failing_candidate_is_recorded_not_fatal(invoke, setup, tmp_path):
    """The library lacks SOFT's creator: every candidate running SOFT as a plugin fails in the parser."""
    families = [LITE, SOFT]
    table = {LITE: 0.5, "Sigmoid": 3.0, SOFT: 0.1, "Tanh": 3.0}  # all plugins would win if it could build
    setup.costs(table)
    partial = write_plugin_library(tmp_path / "partial.so", [_creator(LITE)])
    result = _build(invoke, setup, setup.model(tuple(families)), "--plugins", "auto", "--plugin-lib", partial)
    selection = _manifest(str(tmp_path / "model.engine"))["plugin_selection"]
    failed = {c["name"]: c for c in selection["candidates"] if c["status"] == "failed"}
    assert set(failed) == {"plugins: EdgeAttnLiteMLA, EdgeAttnSoftKernelAttention",
                           "plugins: EdgeAttnSoftKernelAttention"}
    for candidate in failed.values():
        assert "no plugin for op EdgeAttnSoftKernelAttention" in candidate["error"]
        assert candidate["latency_ms"] is None
    assert set(selection["plugin_ops"]) == brute_force_winner(table, families, buildable=lambda s: SOFT not in s)
    assert selection["plugin_ops"] == [LITE]
    assert "failed: " in result.stderr
    _no_leftovers(tmp_path)


def test_auto_without_any_plugin_library_ships_the_plain_graph(invoke, setup, tmp_path):
    setup.costs({LITE: 0.1, "Sigmoid": 3.0})
    _build(invoke, setup, setup.model((LITE,)))  # default mode with trtexec: auto
    manifest = _manifest(str(tmp_path / "model.engine"))
    selection = manifest["plugin_selection"]
    assert selection["mode"] == "auto" and selection["requested"] is None
    assert selection["reason"].startswith("default")
    assert selection["plugin_ops"] == [] and "plugin library not found" in selection["plugin_library_error"]
    assert selection["candidates"][0]["status"] == "failed" and manifest["plugins"] is None
    assert "--plugins" not in manifest["rebuild_command"]


def test_every_candidate_failing_is_one_error_and_leaves_nothing(invoke, setup, tmp_path, write_model):
    """The decomposition needs an op TensorRT cannot import (a TfIdfVectorizer on run-time data), and there is no
    plugin library: no candidate can build."""
    body = [helper.make_node("Cast", ["a"], ["i"], to=TensorProto.INT64),
            helper.make_node("TfIdfVectorizer", ["i"], ["b"], mode="TF", min_gram_length=1, max_gram_length=1,
                             max_skip_count=0, ngram_counts=[0], ngram_indexes=list(range(8)),
                             pool_int64s=list(range(8)))]
    model = onnx.load_from_string(marker_model((LITE,)))
    del model.functions[:]
    model.functions.append(helper.make_function("trt.plugins", LITE, ["a"], ["b"], body,
                                                [helper.make_opsetid("", 17)]))
    path = write_model(model.SerializeToString(), "broken.onnx")
    result = _build(invoke, setup, path, "--plugins", "auto", expect=2)
    error = [line for line in result.stderr.splitlines() if line.startswith("edgeattn: error: ")]
    assert len(error) == 1 and result.stderr.strip().splitlines()[-1] == error[0]
    assert "every --plugins auto candidate failed" in error[0] and "TfIdfVectorizer" in error[0]
    assert "plugin library not found" in error[0]
    assert not os.path.exists(str(tmp_path / "broken.engine"))
    assert not os.path.exists(str(tmp_path / "broken.engine.json"))
    _no_leftovers(tmp_path)


def test_plugins_off_needs_no_plugin_library(invoke, setup, tmp_path):
    # No library anywhere: `on` cannot build, `off` must.
    model = setup.model((LITE, SOFT))
    result = _build(invoke, setup, model, "--plugins", "on", expect=2)
    assert "plugin library not found" in result.stderr
    _build(invoke, setup, model, "--plugins", "off")
    engine = str(tmp_path / "model.engine")
    manifest = _manifest(engine)
    command = manifest["tensorrt"]["trtexec"]["command"]
    assert not [arg for arg in command if "Plugins" in arg or arg.startswith("--plugins")]
    assert manifest["plugins"] is None and manifest["custom_ops"] == []
    assert manifest["plugin_selection"]["mode"] == "off" and manifest["plugin_selection"]["candidates"] is None
    assert manifest["source_onnx"]["decomposed_ops"] == [LITE, SOFT]
    assert _engine_header(engine)["plugins"] == []
    assert "--plugins off" in manifest["rebuild_command"]


def test_plugins_on_is_the_previous_behaviour(invoke, setup, tmp_path):
    _build(invoke, setup, setup.model((LITE,)), "--plugins", "on", "--plugin-lib", setup.library)
    manifest = _manifest(str(tmp_path / "model.engine"))
    assert manifest["plugin_selection"]["mode"] == "on" and manifest["plugin_selection"]["candidates"] is None
    assert manifest["source_onnx"]["variant"] == "local-functions-stripped"
    assert _engine_header(str(tmp_path / "model.engine"))["plugins"] == [list(_creator(LITE))]


def test_a_library_path_in_plugins_is_refused_naming_plugin_lib(invoke, setup, tmp_path):
    """`--plugins` is the mode (on, off, auto) in every command: a library path there (the old spelling of
    `edgeattn bench --plugins LIB`) is refused in one line naming --plugin-lib, before anything is built; the same
    library with --plugin-lib builds."""
    setup.costs({LITE: 0.1, "Sigmoid": 3.0})
    result = _build(invoke, setup, setup.model((LITE,)), "--plugins", setup.library, expect=2)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("edgeattn: error: --plugins takes on, off")
    assert "--plugin-lib" in result.stderr
    assert not (tmp_path / "model.engine").exists()
    _build(invoke, setup, setup.model((LITE,)), "--plugin-lib", setup.library)
    selection = _manifest(str(tmp_path / "model.engine"))["plugin_selection"]
    assert selection["mode"] == "auto" and selection["plugin_ops"] == [LITE]


@pytest.mark.parametrize("winner", ["plugin", "plain"])
def test_bench_of_the_result_uses_the_right_library(invoke, setup, tmp_path, winner):
    setup.costs({LITE: 0.1, "Sigmoid": 3.0} if winner == "plugin" else {LITE: 3.0, "Sigmoid": 0.1})
    _build(invoke, setup, setup.model((LITE,)), "--plugins", "auto", "--plugin-lib", setup.library)
    engine = str(tmp_path / "model.engine")
    out = tmp_path / "bench.json"
    args = ["bench", engine, "--trtexec", setup.trtexec, "--batch", "2", "--warmup-s", "0", "--iterations", "20",
            "--json", str(out)]
    if winner == "plugin":
        # The plugin engine cannot run without its library, and runs with it.
        invoke(args, expect=2)
        invoke(args + ["--plugin-lib", setup.library], expect=0)
        command = json.loads(out.read_text())["trtexec"]["command"]
        assert "--staticPlugins=" + os.path.abspath(setup.library) in command
    else:
        invoke(args, expect=0)
        command = json.loads(out.read_text())["trtexec"]["command"]
        assert not [arg for arg in command if "Plugins" in arg]


def test_auto_needs_something_to_time_with(invoke, setup, tmp_path, monkeypatch, isolated_path):
    """TensorRT's Python builder without a CUDA runtime for the benchmark and without trtexec: --plugins auto is
    refused, and the default falls back to on (and says why)."""
    from edgeattn.engine import build as build_module

    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "cuda", None)
    monkeypatch.setattr("edgeattn.tensorrt.cuda._CUDA", None)
    with pytest.raises(EdgeAttnError, match="--plugins auto times every candidate engine on this machine's GPU"):
        build_module._plugin_mode("auto", [LITE], "tensorrt", None)
    mode, reason, timer = build_module._plugin_mode(None, [LITE], "tensorrt", None)
    assert mode == "on" and timer is None and reason.startswith("default without a device to time candidates on")
    assert build_module._plugin_mode(None, [LITE], "trtexec", "/x/trtexec")[0] == "auto"
    assert build_module._plugin_mode(None, [], "trtexec", "/x/trtexec")[:2] == ("on", "the model has no custom ops")


# ---------------------------------------------------------------------------------------------------------------
# the real decompositions
# ---------------------------------------------------------------------------------------------------------------
@needs_ort
@pytest.mark.parametrize("with_functions", [True, False], ids=["local-functions", "rebuilt-from-schemas"])
def test_decomposition_computes_what_the_model_computes(with_functions):
    import collections

    import onnxruntime

    model = real_body_model()
    source = onnx.ModelProto()
    source.CopyFrom(model)
    if not with_functions:
        del source.functions[:]  # the --target tensorrt file
    plain, sources = decomposition.decompose(source, [LITE, BLOCKIFY])
    ops = collections.Counter(node.op_type for node in plain.graph.node)
    assert not plain.functions and ops["If"] == 0 and ops["TfIdfVectorizer"] == 0 and not ops[LITE]
    assert ops["Softmax"] >= 1 and ops["MatMul"] >= 2
    assert [opset.domain for opset in plain.opset_import] == [""]
    names = [node.name for node in plain.graph.node]
    assert all(names) and len(set(names)) == len(names)
    assert any(name.startswith("/stage/local/{}/Softmax".format(BLOCKIFY)) for name in names)
    assert set(sources) == {LITE, BLOCKIFY}
    assert all(("model-local" in text) == with_functions for text in sources.values())
    onnx.checker.check_model(plain, full_check=True)
    x = np.random.default_rng(3).standard_normal((3, 12, 5, 5)).astype(np.float32)

    def run(proto):
        session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, {"qkv": x})[0]

    want, got = run(model), run(plain)  # the reference: ORT running the exporter's functions
    assert got.shape == (3, 25, 4)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_decomposing_one_family_keeps_the_other(tmp_path):
    model = real_body_model()
    partly, sources = decomposition.decompose(model, [LITE])
    assert list(sources) == [LITE]
    assert [node.op_type for node in partly.graph.node if node.domain == "trt.plugins"] == [BLOCKIFY]
    assert [function.name for function in partly.functions] == [BLOCKIFY]
    assert model.functions and [n.op_type for n in model.graph.node if n.domain][:1] == [LITE]  # untouched


@pytest.mark.parametrize("version", ["8.2.1", "8.6.2", "10.3.0", "10.16.2"])
def test_plugins_off_builds_the_real_decomposition(invoke, setup, tmp_path, write_model, monkeypatch, version):
    """The fake, like TensorRT's parser, has no importer for TfIdfVectorizer: the build only succeeds because the
    attribute selections were folded away, on every TensorRT generation."""
    path = write_model(real_body_model(batch=1).SerializeToString(), "real.onnx")
    trtexec = setup.trtexec if version == "10.3.0" else install_version(tmp_path, version)
    invoke(["build", path, "--backend", "trtexec", "--trtexec", trtexec, "--plugins", "off"], expect=0)
    assert _engine_header(str(tmp_path / "real.engine"))["plugins"] == []
    monkeypatch.setattr(decomposition, "fold_constants", lambda model: 0)
    result = invoke(["build", path, "--backend", "trtexec", "--trtexec", trtexec, "--plugins", "off", "-o",
                     str(tmp_path / "unfolded.engine")], expect=2)
    assert "TfIdfVectorizer" in result.stderr
    _no_leftovers(tmp_path)


def install_version(tmp_path, version):
    from bench_helpers import install_trtexec

    return install_trtexec(tmp_path / "trt", version)


def test_fp16_pins_the_decomposed_softmax_by_name(invoke, setup, tmp_path, write_model):
    path = write_model(real_body_model(batch=1).SerializeToString(), "real.onnx")
    invoke(["build", path, "--backend", "trtexec", "--trtexec", install_version(tmp_path, "8.6.2"), "--plugins",
            "off", "--precision", "fp16"], expect=0)
    header = _engine_header(str(tmp_path / "real.fp16.engine"))
    pinned = {item.rsplit(":", 1)[0] for item in header["layer_precisions"].split(",")}
    assert any(name.startswith("/stage/local/{}/Softmax".format(BLOCKIFY)) for name in pinned)


def test_build_engine_api_keeps_plugins_on_by_default(setup, tmp_path, write_model):
    manifest = build_engine(setup.model((LITE,)), str(tmp_path / "m.engine"), plugins=setup.library,
                            backend="trtexec", trtexec=setup.trtexec)
    assert manifest["plugin_selection"]["mode"] == "on" and manifest["plugin_selection"]["plugin_ops"] == [LITE]
    with pytest.raises(EdgeAttnError, match="unknown plugin mode"):
        build_engine(setup.model((LITE,)), str(tmp_path / "m2.engine"), backend="trtexec", trtexec=setup.trtexec,
                     plugin_mode="sometimes")


def test_search_beyond_two_families_adds_the_combined_verdict():
    """Three families with independent (additive) costs: all-on, all-off and each one dropped in turn (5 builds),
    then the combination of the per-family verdicts, which for additive costs is the brute-force optimum."""
    families = ["A", "B", "C"]
    plugin_ms = {"A": 3.0, "B": 3.0, "C": 0.5}
    standard_ms = {"A": 1.0, "B": 1.0, "C": 2.5}

    def evaluate(candidate):
        ms = 1.0 + sum(plugin_ms[f] if f in candidate.plugin_ops else standard_ms[f] for f in families)
        stats = {"p50": ms}
        candidate.bench = {"gpu_compute_ms": stats, "latency_ms": {"p50": ms + 0.1}}

    candidates = plugin_selection.search(families, evaluate)
    tried = [frozenset(c.plugin_ops) for c in candidates]
    assert tried[:5] == [frozenset("ABC"), frozenset(), frozenset("BC"), frozenset("AC"), frozenset("AB")]
    subsets = [frozenset(c) for r in range(4) for c in itertools.combinations(families, r)]
    best = min(subsets, key=lambda s: sum(plugin_ms[f] if f in s else standard_ms[f] for f in families))
    assert best == frozenset("C")
    assert tried[5:] == [best]  # the combined verdict: only C keeps its plugin
    winner = plugin_selection.choose(candidates)
    assert winner.plugin_ops == best and winner.status == "selected"
    assert sum(c.status == "rejected" for c in candidates) == 5


def test_choose_with_every_candidate_failed_names_each_error():
    candidates = [plugin_selection.Candidate(ops, [LITE]) for ops in ([LITE], [])]
    candidates[0].error, candidates[1].error = "no plugin library: x", "TensorRT could not parse it"
    with pytest.raises(EdgeAttnError, match=r"plugins: EdgeAttnLiteMLA \(no plugin library: x\); plugins: none "
                                            r"\(TensorRT could not parse it\)"):
        plugin_selection.choose(candidates)
