"""``edgeattn quantize`` on the trained tiny ELFATT model (tests/fixtures/models, benchmarks/train_tiny.py).

References: the held-out digits the checkpoint never saw (accuracy measured with ONNX Runtime FP32), the FP32
graph's own structure (which nodes are Linear/Conv with weights, the trt.plugins nodes and their attributes), and
TensorRT's rules for explicit quantization (INT8, zero point 0, per-channel weights, one Q/DQ pair per consumer).
Both models are exported once per module (16 x 16 inputs, a few seconds each).
"""
import json
import os

import numpy as np
import pytest

from quantize_helpers import export_checkpoint, one_conv_model, ort_logits, train_tiny, write_pictures

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
CALIB = 32


@pytest.fixture(scope="module")
def digits():
    module = train_tiny()
    pictures, labels = module.digits_pictures()
    train, _ = module.split_indices(len(pictures))
    _, _, test_x, test_y = module.digits_split()
    return {"train_pictures": pictures[train], "test_x": test_x, "test_y": test_y}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, digits):
    root = tmp_path_factory.mktemp("quantize")
    write_pictures(str(root / "calib"), digits["train_pictures"][:CALIB])
    return root


@pytest.fixture(scope="module")
def plugin_onnx(workdir):
    return export_checkpoint(str(workdir / "digits.onnx"), plugins=True)


@pytest.fixture(scope="module")
def standard_onnx(workdir):
    return export_checkpoint(str(workdir / "digits.noplugins.onnx"), plugins=False)


@pytest.fixture(scope="module")
def linear_int8(plugin_onnx, workdir):
    from edgeattn.quantize import quantize_file

    out = str(workdir / "digits.int8.onnx")
    summary = quantize_file(plugin_onnx, out, calib=str(workdir / "calib"), calib_size=CALIB)
    return out, summary


def _accuracy(logits, labels):
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def _cosine(a, b):
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _consumers(model):
    found = {}
    for node in model.graph.node:
        for name in node.input:
            found.setdefault(name, []).append(node)
    return found


def _producers(model):
    return {out: node for node in model.graph.node for out in node.output}


def test_int8_keeps_held_out_accuracy_within_one_point(plugin_onnx, linear_int8, digits):
    fp32 = _accuracy(ort_logits(plugin_onnx, digits["test_x"]), digits["test_y"])
    int8 = _accuracy(ort_logits(linear_int8[0], digits["test_x"]), digits["test_y"])
    assert fp32 >= 0.95, "the shipped checkpoint is trained (benchmarks/results/train_tiny.json)"
    assert abs(fp32 - int8) <= 0.01, (fp32, int8)


def test_quantizing_softmax_layernorm_and_adds_too_is_visibly_worse(standard_onnx, workdir, digits):
    """--ops all (Softmax, LayerNorm, residual Adds, GELU's Mul ...) against the default --ops linear, on the
    export without plugins so the attention's Softmax is in the graph. On ten easy digit classes top-1 survives
    both; the logits do not: the cosine error (1 - cosine to FP32) grows several-fold."""
    from edgeattn.quantize import quantize_file

    reference = ort_logits(standard_onnx, digits["test_x"])
    errors = {}
    for ops in ("linear", "all"):
        out = str(workdir / "digits.noplugins.{}.onnx".format(ops))
        summary = quantize_file(standard_onnx, out, calib=str(workdir / "calib"), calib_size=CALIB, ops=ops)
        logits = ort_logits(out, digits["test_x"])
        errors[ops] = 1.0 - _cosine(logits, reference)
        if ops == "all":
            assert {"Softmax", "LayerNormalization", "Add"} <= set(summary["quantized_op_types"])
    assert np.mean(errors["all"]) > 4 * np.mean(errors["linear"]), {k: float(np.mean(v)) for k, v in
                                                                     errors.items()}
    assert np.max(errors["all"]) > 2 * np.max(errors["linear"])


def test_linear_mode_quantizes_only_weighted_linear_nodes_as_tensorrt_expects(plugin_onnx, linear_int8):
    fp32, int8 = onnx.load(plugin_onnx), onnx.load(linear_int8[0])
    initializers = {init.name: init for init in fp32.graph.initializer}
    linear = {node.name: node for node in fp32.graph.node
              if node.op_type in ("MatMul", "Gemm", "Conv") and node.input[1] in initializers}
    assert len(linear) == linear_int8[1]["quantized_nodes"] > 0
    consumers, producers = _consumers(int8), _producers(int8)
    int8_init = {init.name: init for init in int8.graph.initializer}
    fed = set()
    for node in int8.graph.node:
        if node.op_type == "DequantizeLinear":
            users = consumers.get(node.output[0], [])
            assert len(users) == 1, "one dedicated Q/DQ pair per consumer"
            assert users[0].name in linear, "only Linear/Conv inputs are quantized, not {}".format(users[0].op_type)
            fed.add(users[0].name)
        if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
            zero = onnx.numpy_helper.to_array(int8_init[node.input[2]])
            assert zero.dtype == np.int8 and not zero.any()
    assert fed == set(linear)
    for name, node in linear.items():
        quantized = next(n for n in int8.graph.node if n.name == name)
        weight_dq = producers[quantized.input[1]]
        weight_q = producers[weight_dq.input[0]]
        assert weight_q.input[0] == node.input[1], "the FP32 weight keeps a Q/DQ pair (TensorRT folds it)"
        weight = onnx.numpy_helper.to_array(initializers[node.input[1]])
        channels = weight.shape[0] if node.op_type in ("Conv", "Gemm") else weight.shape[1]
        assert onnx.numpy_helper.to_array(int8_init[weight_dq.input[1]]).shape == (channels,), "per channel"
        activation_q = producers[producers[quantized.input[0]].input[0]]
        assert onnx.numpy_helper.to_array(int8_init[activation_q.input[1]]).shape == (), "per-tensor activation"
        if len(node.input) > 2:
            assert quantized.input[2] == node.input[2], "biases stay FP32"
    plugins = [n for n in fp32.graph.node if n.domain == "trt.plugins"]
    assert len(plugins) == 6
    for node in plugins:
        kept = next(n for n in int8.graph.node if n.name == node.name)
        assert (kept.op_type, list(kept.input), list(kept.output)) == (node.op_type, list(node.input),
                                                                       list(node.output))
        assert [a.SerializeToString() for a in kept.attribute] == [a.SerializeToString() for a in node.attribute]
    assert [f.name for f in int8.functions] == [f.name for f in fp32.functions]


def test_summary_and_cli_output(plugin_onnx, workdir, invoke):
    out = workdir / "cli.int8.onnx"
    summary_json = workdir / "cli.json"
    result = invoke(["quantize", plugin_onnx, "--calib", workdir / "calib", "--calib-size", 8,
                     "--calib-method", "percentile", "-o", out, "--summary-json", summary_json], expect=0)
    assert "6 trt.plugins node(s) left in FP" in result.stdout
    assert "Collecting tensor data" not in result.stdout  # ONNX Runtime's progress prints are kept off stdout
    summary = json.loads(summary_json.read_text())
    assert summary["calibration"] == dict(summary["calibration"], count=8, method="percentile", source="images")
    assert summary["agreement_vs_fp32"]["top1"] == 1.0
    assert out.exists()


def _one_line_error(result, *words):
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edgeattn: error:"), result.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_bad_input_is_one_line_and_no_file(plugin_onnx, linear_int8, workdir, invoke, tmp_path):
    out = tmp_path / "out.onnx"
    _one_line_error(invoke(["quantize", linear_int8[0], "--calib", "random", "-o", out]), "already quantized")
    empty = tmp_path / "empty"
    empty.mkdir()
    _one_line_error(invoke(["quantize", plugin_onnx, "--calib", empty, "-o", out]), "no pictures")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "a.png").write_bytes(b"not a picture")
    _one_line_error(invoke(["quantize", plugin_onnx, "--calib", broken, "-o", out]), "could be read")
    grey = one_conv_model(str(tmp_path / "grey.onnx"), channels=1)
    _one_line_error(invoke(["quantize", grey, "--calib", workdir / "calib", "-o", out]), "3 channels", "takes 1")
    _one_line_error(invoke(["quantize", plugin_onnx, "-o", out]), "--calib")
    (tmp_path / "junk.onnx").write_bytes(b"\x00junk")
    _one_line_error(invoke(["quantize", tmp_path / "junk.onnx", "--calib", "random", "-o", out]), "not an ONNX")
    assert not out.exists()
    assert sorted(os.listdir(str(tmp_path))) == ["broken", "empty", "grey.onnx", "junk.onnx"]


def test_warnings_random_calibration_and_unmatched_exclude(tmp_path, invoke):
    model = one_conv_model(str(tmp_path / "conv.onnx"))
    out = tmp_path / "conv.int8.onnx"
    result = invoke(["quantize", model, "--calib", "random", "--calib-size", 4, "--exclude", "/nowhere/*",
                     "-o", out], expect=0)
    assert "not representative" in result.stderr
    assert "'/nowhere/*' matches no node" in result.stderr
    assert out.exists()
    _one_line_error(invoke(["quantize", model, "--calib", "random", "--exclude", "Conv", "-o", tmp_path / "x.onnx"]),
                    "nothing to quantize")


def test_exclude_keeps_matching_nodes_in_float(plugin_onnx, workdir):
    from edgeattn.quantize import quantize_file

    out = str(workdir / "excluded.onnx")
    summary = quantize_file(plugin_onnx, out, calib=str(workdir / "calib"), calib_size=8,
                            exclude=["/blocks.1/*", "Gemm"])
    int8 = onnx.load(out)
    consumers = _consumers(int8)
    quantized = {consumers[n.output[0]][0].name for n in int8.graph.node if n.op_type == "DequantizeLinear"}
    assert quantized and not any(name.startswith("/blocks.1/") for name in quantized)
    assert not any(n.op_type == "Gemm" and n.name in quantized for n in int8.graph.node)
    assert any(name.startswith("/blocks.0/") for name in quantized)
    assert set(summary["excluded_nodes"]) == {n.name for n in onnx.load(plugin_onnx).graph.node
                                              if n.name.startswith("/blocks.1/") and n.name in
                                              set(summary["excluded_nodes"])} | {"/head/Gemm"}


def test_sensitivity_table_matches_quantizing_each_group_alone(plugin_onnx, workdir, invoke, digits):
    table_path = workdir / "sensitivity.json"
    result = invoke(["quantize", plugin_onnx, "--calib", workdir / "calib", "--calib-size", 8, "--sensitivity",
                     "-o", table_path], expect=0)
    table = json.loads(table_path.read_text())
    assert [row["group"] for row in table["groups"]] == ["patch_embed", "blocks.0", "blocks.1", "blocks.2", "head"]
    assert "recommended exclusions" in result.stdout
    for row in table["groups"]:
        assert row["exclude"] == (row["top1"] < 0.99 or row["cosine_mean"] < 0.999)
    assert table["exclude"] == [row["pattern"] for row in table["groups"] if row["exclude"]]
    # independently: blocks.1 alone = every other group excluded, measured here with numpy on the same 8 pictures
    from edgeattn.compare import preprocess
    from edgeattn.quantize import quantize_file

    others = [row["pattern"] for row in table["groups"] if row["group"] != "blocks.1"]
    alone = str(workdir / "blocks1.onnx")
    quantize_file(plugin_onnx, alone, calib=str(workdir / "calib"), calib_size=8, exclude=others)
    pictures = np.stack([preprocess(p, 16, 16) for p in digits["train_pictures"][:8]])
    cosine = _cosine(ort_logits(alone, pictures), ort_logits(plugin_onnx, pictures))
    row = next(r for r in table["groups"] if r["group"] == "blocks.1")
    assert row["cosine_mean"] == pytest.approx(float(np.mean(cosine)), abs=1e-6)
    # --exclude-from applies a table's recommendations (here: one written by hand)
    table["exclude"] = ["/blocks.2/*"]
    table_path.write_text(json.dumps(table))
    out = workdir / "from-table.onnx"
    invoke(["quantize", plugin_onnx, "--calib", workdir / "calib", "--calib-size", 8, "--exclude-from", table_path,
            "-o", out], expect=0)
    int8 = onnx.load(str(out))
    consumers = _consumers(int8)
    quantized = {consumers[n.output[0]][0].name for n in int8.graph.node if n.op_type == "DequantizeLinear"}
    assert not any(name.startswith("/blocks.2/") for name in quantized)
    assert any(name.startswith("/blocks.1/") for name in quantized)


def test_all_mode_leaves_plugin_io_float_and_every_zero_point_zero(plugin_onnx, workdir):
    from edgeattn.quantize import quantize_file

    out = str(workdir / "digits.all.onnx")
    quantize_file(plugin_onnx, out, calib=str(workdir / "calib"), calib_size=8, ops="all")
    fp32, int8 = onnx.load(plugin_onnx), onnx.load(out)
    producers = _producers(int8)
    init = {i.name: i for i in int8.graph.initializer}
    before = {n.name: n for n in fp32.graph.node if n.domain == "trt.plugins"}
    for node in int8.graph.node:
        if node.domain == "trt.plugins":
            assert all(producers.get(name) is None or producers[name].op_type != "DequantizeLinear"
                       for name in node.input), node.name
            assert [a.SerializeToString() for a in node.attribute] == \
                [a.SerializeToString() for a in before[node.name].attribute]
        if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
            zero = onnx.numpy_helper.to_array(init[node.input[2]])
            assert zero.dtype == np.int8 and not zero.any()
    consumers = _consumers(int8)
    for node in int8.graph.node:
        if node.op_type == "DequantizeLinear" and node.input[0] not in init:
            assert len(consumers.get(node.output[0], [])) <= 1 or producers[node.input[0]].input[0] in init


def test_symmetrize_keeps_the_range_of_an_asymmetric_uint8_pair():
    """ONNX Runtime gives Softmax outputs UINT8 [0, 255] with zero point 0 whatever it is told; TensorRT needs
    INT8 with zero point 0: the rewritten pair covers the same largest magnitude."""
    from onnx import TensorProto, helper, numpy_helper

    from edgeattn.quantize.graph import check_qdq, symmetrize

    inits = [numpy_helper.from_array(np.array(1.0 / 255, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.uint8), "z"),
             numpy_helper.from_array(np.array(0.5, np.float32), "s2"),
             numpy_helper.from_array(np.array(-28, np.int8), "z2")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq"),
             helper.make_node("QuantizeLinear", ["y", "s2", "z2"], ["q2"], name="q2"),
             helper.make_node("DequantizeLinear", ["q2", "s2", "z2"], ["y2"], name="dq2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y2", TensorProto.FLOAT, [4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert len(check_qdq(model)) == 4
    assert symmetrize(model) == 2
    assert check_qdq(model) == []
    values = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    assert values["s"] == pytest.approx(1.0 / 127)  # [0, 1] -> |x| <= 1
    assert values["s2"] == pytest.approx(0.5 * 155 / 127)  # [(-128 + 28) * 0.5, (127 + 28) * 0.5] -> 77.5
    assert values["z"].dtype == values["z2"].dtype == np.int8


def test_groups_follow_blocks_and_stages():
    from edgeattn.quantize.graph import group_of

    assert group_of("/blocks.0/attn/qkv/MatMul") == ("blocks.0", "/blocks.0/*")
    assert group_of("/stages.1/stages.1.3/attn/proj/MatMul") == ("stages.1.3", "/stages.1/stages.1.3/*")
    assert group_of("/merges.0/proj/Conv") == ("merges.0", "/merges.0/*")
    assert group_of("/head/Gemm") == ("head", "/head/*")
    assert group_of("MatMul_7") == ("MatMul_7", "MatMul_7")
