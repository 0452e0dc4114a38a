"""File-kind recognition (edgeattn.filekind) on real files of every kind edgeattn reads and writes."""
import glob
import json
import os
import pickle
import struct
import zipfile

import pytest

from bench_helpers import matmul_model
from edgeattn import filekind
from edgeattn.sweep.results import ResultStore
from edgeattn.sweep.state import save_state

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(TESTS)
FIXTURES = os.path.join(TESTS, "fixtures")


def _kind(path):
    return filekind.sniff(str(path)).name


def test_onnx_models_and_their_truncations(tmp_path):
    data = matmul_model(features=8)
    for size in (len(data), len(data) // 2, 3):
        path = tmp_path / "m.onnx"
        path.write_bytes(data[:size])
        assert _kind(path) == "onnx", size
    # protobuf bytes that do not start with ir_version are not taken for a model
    assert filekind.sniff_bytes(b"\x08\x07\x09\x01") .name != "onnx"


@pytest.mark.parametrize("pattern, expected", [
    ("jetson/tegrastats/*.log", "tegrastats-log"),
    ("trtexec/log_*.txt", "trtexec-log"),
    ("trtexec/summary_*.txt", "trtexec-log"),
    ("trtexec/device_*.txt", "trtexec-log"),
])
def test_real_captures(pattern, expected):
    paths = sorted(glob.glob(os.path.join(FIXTURES, pattern)))
    assert paths
    for path in paths:
        assert _kind(path) == expected, path


def test_every_shipped_profile_and_nothing_else_is_a_profile():
    for path in sorted(glob.glob(os.path.join(REPO, "profiles", "*.yaml"))):
        assert _kind(path) == ("text" if path.endswith("schema.yaml") else "profile"), path


def test_records_edgeattn_writes(tmp_path):
    store = ResultStore(str(tmp_path / "sweep"), context={"profile": "host-cpu"})
    for i in range(1, 101):  # > HEAD_BYTES
        store.add({"model": "m", "model_key": "m", "mode_id": 0, "precision_requested": "fp32", "padding": "x" * 1000,
                   "repeat": i})
    store.save()
    assert _kind(store.journal.path) == "sweep-rows"
    assert os.path.getsize(store.json_path) > filekind.HEAD_BYTES
    assert _kind(store.json_path) == "sweep-results"
    assert _kind(tmp_path / "sweep") == "sweep-directory"
    save_state(str(tmp_path / "sweep"), {"plan": [0]})
    assert _kind(tmp_path / "sweep" / "sweep-state.json") == "sweep-state"
    os.unlink(store.json_path)
    assert _kind(tmp_path / "sweep") == "sweep-directory"  # an interrupted sweep: its resume file and journal
    os.unlink(os.path.join(str(tmp_path / "sweep"), "sweep-state.json"))
    assert _kind(tmp_path / "sweep") == "sweep-directory"  # its journal alone
    manifest = tmp_path / "m.engine.json"
    manifest.write_text(json.dumps({"schema": "edgeattn.engine/1", "engine": {}}))
    assert _kind(manifest) == "manifest"
    bench = tmp_path / "b.json"
    bench.write_text(json.dumps({"schema": "edgeattn.bench/1"}))
    assert filekind.sniff(str(bench)) == ("edgeattn-json", "a benchmark record (`edgeattn bench --json`) (schema "
                                                           "edgeattn.bench/1)")
    times = tmp_path / "times.json"
    times.write_text('[\n  { "startEnqMs" : 1.0, "latencyMs" : 2.0 }\n]\n')
    assert _kind(times) == "trtexec-export"


def test_schema_ids_of_the_code_are_all_known():
    from edgeattn.tensorrt.manifest import MANIFEST_SCHEMA
    from edgeattn.profiles import PROFILE_SCHEMA_ID
    from edgeattn.sweep.results import RESULTS_SCHEMA
    from edgeattn.sweep.state import STATE_SCHEMA

    for schema, name in ((MANIFEST_SCHEMA, "manifest"), (PROFILE_SCHEMA_ID, "profile"),
                         (RESULTS_SCHEMA, "sweep-results"), (STATE_SCHEMA, "sweep-state")):
        assert filekind.sniff_bytes(json.dumps({"schema": schema}).encode()).name == name


def test_checkpoints_and_binary_formats(tmp_path):
    archive = tmp_path / "ckpt.pt"
    with zipfile.ZipFile(str(archive), "w") as handle:
        handle.writestr("ckpt/data.pkl", pickle.dumps({}))
    assert _kind(archive) == "zip"
    for protocol in (2, 3, 4, 5):
        assert filekind.sniff_bytes(pickle.dumps({"a": 1}, protocol=protocol)).name == "pickle"
    header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    assert filekind.sniff_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4).name == "safetensors"
    # a header length beyond the file is not a safetensors file
    assert filekind.sniff_bytes(struct.pack("<Q", 10 ** 6) + header).name != "safetensors"
    assert filekind.sniff_bytes(b"ftrt" + bytes(range(256))).name == "engine"
    assert filekind.sniff_bytes(bytes(range(256)) * 4).name == "binary"


def test_plain_paths(tmp_path):
    assert _kind(tmp_path / "nothing") == "missing"
    assert _kind(tmp_path) == "directory"
    (tmp_path / "empty").write_bytes(b"")
    assert _kind(tmp_path / "empty") == "empty"
    (tmp_path / "notes.txt").write_text("a few words\n")
    assert _kind(tmp_path / "notes.txt") == "text"


def test_require_lets_unknown_files_through_and_refuses_known_ones(tmp_path):
    from edgeattn.errors import EdgeAttnError

    (tmp_path / "notes.txt").write_text("a few words\n")
    assert filekind.require(str(tmp_path / "notes.txt"), ("onnx",), "an ONNX model").name == "text"
    log = os.path.join(FIXTURES, "jetson", "tegrastats", "agx_orin_jp5.log")
    with pytest.raises(EdgeAttnError) as caught:
        filekind.require(log, ("onnx",), "an ONNX model", command="`edgeattn inspect`")
    assert str(caught.value) == ("`edgeattn inspect` expects an ONNX model: {} is a tegrastats log; read it with "
                                 "`edgeattn power LOG`".format(log))
