"""`sweep --resume` reuses an engine only when it still matches its manifest (and the ONNX it was built from);
a damaged or replaced engine is rebuilt, and one given directly is refused before anything runs."""
import functools
import os
import sys

import pytest

from bench_helpers import install_trtexec, matmul_model
from security_support import one_error_line
from edgeattn._io import sha256_file
from edgeattn.engine import build_engine
from edgeattn.tensorrt.manifest import read_manifest
from edgeattn.errors import EdgeAttnError
from edgeattn.sweep import run_sweep

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TESTS, "sweep"))
import stubbench  # noqa: E402


@pytest.fixture
def setup(fake_board, fast_sampling, tmp_path):
    board = fake_board("orin-nano-8gb")
    model = tmp_path / "m1.onnx"
    model.write_bytes(matmul_model(features=8))
    builds = []
    trtexec = install_trtexec(tmp_path / "trt", "10.3.0")

    def builder(onnx_path, engine_path, precision="fp32"):
        builds.append(os.path.basename(engine_path))
        return build_engine(onnx_path, engine_path, precision=precision, backend="trtexec", trtexec=trtexec)

    kwargs = dict(precisions="fp32,fp16", modes="2", settle_s=0, repeats=1, duration_s=0.05, interval_ms=fast_sampling,
                  out_dir=str(tmp_path / "out"), engine_builder=builder)
    return board, str(model), builds, kwargs


def test_resume_rebuilds_exactly_the_engines_that_do_not_match(setup):
    board, model, builds, kwargs = setup
    with pytest.raises(EdgeAttnError, match="stub benchmark failure"):
        run_sweep([model], bench=stubbench.make_bench(fail_at=2, sleep_s=0.05), echo=lambda line: None, **kwargs)
    assert sorted(builds) == ["m1.fp16.engine", "m1.fp32.engine"]
    engines = os.path.join(kwargs["out_dir"], "engines")
    damaged = os.path.join(engines, "m1.fp16.engine")
    with open(damaged, "ab") as handle:
        handle.write(b"bit rot")
    lines = []
    outcome = run_sweep([], resume=True, bench=stubbench.make_bench(sleep_s=0.05), echo=lines.append,
                        **dict(kwargs, precisions="fp32"))
    assert outcome.status == "complete" and len(outcome.rows) == 2
    assert "reusing engine {}".format(os.path.join(engines, "m1.fp32.engine")) in lines
    assert "rebuilding engine {}: it does not match the sha256 in its manifest".format(damaged) in lines
    assert builds[2:] == ["m1.fp16.engine"]
    assert sha256_file(damaged) == read_manifest(damaged)["engine"]["sha256"]


def test_an_engine_is_rebuilt_when_its_onnx_changed_or_its_manifest_is_gone(setup, tmp_path):
    board, model, builds, kwargs = setup
    run_sweep([model], bench=stubbench.make_bench(sleep_s=0.05), echo=lambda line: None, **kwargs)
    with open(model, "wb") as handle:
        handle.write(matmul_model(features=8, seed=1))
    os.unlink(os.path.join(kwargs["out_dir"], "engines", "m1.fp32.engine.json"))
    lines = []
    run_sweep([model], bench=stubbench.make_bench(sleep_s=0.05), echo=lines.append, overwrite=True, **kwargs)
    assert any(line.endswith("m1.fp32.engine: it has no manifest") for line in lines)
    assert any(line.endswith("m1.fp16.engine: {} changed since it was built".format(model)) for line in lines)
    assert sorted(builds[2:]) == ["m1.fp16.engine", "m1.fp32.engine"]


def test_a_damaged_engine_given_directly_is_refused_before_the_sweep_starts(tmp_path, invoke, fake_board):
    fake_board("orin-nano-8gb")
    trtexec = install_trtexec(tmp_path / "trt", "10.3.0")
    model = tmp_path / "m.onnx"
    model.write_bytes(matmul_model(features=8))
    engine = str(tmp_path / "m.engine")
    functools.partial(build_engine, backend="trtexec", trtexec=trtexec)(str(model), engine)
    with open(engine, "r+b") as handle:
        handle.truncate(os.path.getsize(engine) // 2)
    out = tmp_path / "out"
    line = one_error_line(invoke(["sweep", engine, "--modes", "2", "-o", out]))
    assert "m.engine does not match its manifest" in line and "damaged or replaced" in line
    assert not out.exists()
    line = one_error_line(invoke(["bench", engine, "--backend", "trtexec", "--trtexec", trtexec]))
    assert "does not match its manifest" in line and "rebuild it with `edgeattn build" in line
