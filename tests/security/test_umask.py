"""Outputs keep the user's umask: a file edgeattn writes ends with the permissions a plain open() would give it
(0644 under umask 022, 0640 under 027), through the one shared atomic writer; an existing file keeps its own."""
import json
import os
import stat

import pytest

from bench_helpers import install_trtexec, matmul_model
from edgeattn._io import all_or_nothing, atomic_path, atomic_write, current_umask, output_mode, write_json


@pytest.fixture(params=[0o022, 0o027])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _mode(path):
    return stat.S_IMODE(os.lstat(str(path)).st_mode)


def _plain_open_mode(directory):
    """The oracle: what open() gives a new file here under the current umask."""
    probe = os.path.join(str(directory), ".probe")
    with open(probe, "w"):
        pass
    mode = _mode(probe)
    os.unlink(probe)
    return mode


def test_umask_is_read_without_changing_it(umask):
    assert current_umask() == umask and current_umask() == umask
    assert output_mode("/nonexistent/x") == 0o666 & ~umask


def test_atomic_writers_match_plain_open(tmp_path, umask):
    expected = _plain_open_mode(tmp_path)
    assert expected == 0o666 & ~umask
    with atomic_write(str(tmp_path / "a.bin")) as handle:
        handle.write(b"x")
    with atomic_path(str(tmp_path / "b.bin")) as tmp:
        with open(tmp, "wb") as handle:
            handle.write(b"x")
    with all_or_nothing():
        write_json(str(tmp_path / "c.json"), {})
    for name in ("a.bin", "b.bin", "c.json"):
        assert _mode(tmp_path / name) == expected, name


def test_an_existing_file_keeps_its_mode(tmp_path, umask):
    path = tmp_path / "private.json"
    path.write_text("{}")
    os.chmod(str(path), 0o600)
    write_json(str(path), {"new": True})
    assert _mode(path) == 0o600 and json.loads(path.read_text()) == {"new": True}


def test_export_onnx_and_summary(invoke, tmp_path, umask):
    pytest.importorskip("torch")
    onnx_path, summary = tmp_path / "x.onnx", tmp_path / "x.json"
    invoke(["export", "--arch", "vit_tiny_softmax", "--no-check", "-o", onnx_path, "--summary-json", summary],
           expect=0)
    assert _mode(onnx_path) == _mode(summary) == 0o666 & ~umask


def test_checkpoint(tmp_path, umask):
    pytest.importorskip("torch")
    from edgeattn import save_checkpoint
    from edgeattn.models import create_model

    save_checkpoint(create_model("vit_tiny_softmax"), str(tmp_path / "c.pt"))
    assert _mode(tmp_path / "c.pt") == 0o666 & ~umask


def test_engine_and_manifest(tmp_path, umask):
    from edgeattn.engine import build_engine

    model = tmp_path / "m.onnx"
    model.write_bytes(matmul_model(features=8))
    engine = tmp_path / "m.engine"
    build_engine(str(model), str(engine), backend="trtexec", trtexec=install_trtexec(tmp_path / "trt", "10.3.0"))
    assert _mode(engine) == _mode(str(engine) + ".json") == 0o666 & ~umask


def test_bench_json(invoke, tmp_path, umask):
    pytest.importorskip("onnxruntime")
    model = tmp_path / "m.onnx"
    model.write_bytes(matmul_model(features=8))
    out = tmp_path / "b.json"
    invoke(["bench", model, "--iterations", "2", "--warmup-s", "0", "--quiet", "--json", out], expect=0)
    assert _mode(out) == 0o666 & ~umask


def test_sweep_results_state_and_report(invoke, tmp_path, umask, monkeypatch):
    pytest.importorskip("onnxruntime")
    monkeypatch.setenv("EDGEATTN_JETSON_ROOT", str(tmp_path / "emptyroot"))
    model = tmp_path / "m.onnx"
    model.write_bytes(matmul_model(features=8))
    out = tmp_path / "sweep"
    invoke(["sweep", model, "--profile", "host-cpu", "--modes", "1", "--repeats", "1", "--duration-s", "0.05",
            "--warmup-s", "0", "-o", out], expect=0)
    invoke(["report", out], expect=0)
    written = [os.path.join(directory, name) for directory, _, files in os.walk(str(out)) for name in files
               if name != ".edgeattn-sweep.lock"]
    names = sorted(os.path.relpath(path, str(out)) for path in written)
    assert {"results.json", "results.csv", "sweep-state.json", "report.md", "report.html"} <= set(names)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        pass
    else:
        assert any(name.startswith("plots" + os.sep) and name.endswith(".png") for name in names), names
    for path in written:
        assert _mode(path) == 0o666 & ~umask, path


def test_ops_bench_json(invoke, tmp_path, umask):
    pytest.importorskip("torch")
    out = tmp_path / "ops.json"
    invoke(["ops-bench", "--tokens", "49", "--repeats", "1", "--min-time", "0", "--ops", "elfatt", "--json", out],
           expect=0)
    assert _mode(out) == 0o666 & ~umask
