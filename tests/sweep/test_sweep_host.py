"""host-cpu sweeps (thread budgets, no board tools) and the `edgeattn sweep` command line."""
import json
import os
import signal

import pytest

import stubbench
from sweep_timing import scaled
from edgeattn.errors import EdgeAttnError
from edgeattn.sweep import run_sweep, runner


def _model(tmp_path, name):
    path = tmp_path / "{}.onnx".format(name)
    path.write_bytes(b"onnx")
    return str(path)


def test_host_cpu_sweep_runs_thread_budgets(plain_host, tmp_path):
    bench = stubbench.make_bench(sleep_s=0.01)
    lines = []
    outcome = run_sweep([_model(tmp_path, "m1"), _model(tmp_path, "m2")], profile="auto", modes="1,2",
                        precisions="fp32,fp16", settle_s=0, repeats=2, duration_s=0.01,
                        out_dir=str(tmp_path / "out"), bench=bench, echo=lines.append)
    assert outcome.status == "complete" and len(outcome.rows) == 2 * 2 * 2
    assert lines[0].startswith("profile: host-cpu")
    assert sorted(set(call["threads"] for call in bench.calls)) == [1, 2]
    for row in outcome.rows:
        assert row["precision"] == "fp32" and row["mode_threads"] == row["mode_id"]
        assert row["throughput_items_per_s"] == stubbench.expected_fps(row["model"], threads=row["mode_id"])
        assert row["power"]["source"] == "none" and row["energy_per_item_j"] is None
        assert row["throttled"] is None
    assert any("fp16: skipped, ONNX Runtime on the CPU runs fp32 and int8 (Q/DQ) only" in line for line in lines)
    data = json.load(open(str(tmp_path / "out" / "results.json")))
    assert "m1 fp16: skipped, ONNX Runtime on the CPU runs fp32 and int8 (Q/DQ) only" in data["notes"]
    assert data["restore"]["mode"]["ok"] and data["status"] == "complete"


def test_int8_runs_the_quantized_file_beside_the_model(plain_host, tmp_path):
    """--precision fp32,int8 on the host: m1.int8.onnx (edgeattn quantize's name) is m1's int8 column; m2 has none
    and is skipped with a note; a quantized file given itself runs as int8 only."""
    bench = stubbench.make_bench(sleep_s=0.01)
    m1, m2 = _model(tmp_path, "m1"), _model(tmp_path, "m2")
    quantized = _model(tmp_path, "m1.int8")
    lines = []
    outcome = run_sweep([m1, m2], profile="host-cpu", modes="1", precisions="fp32,int8", settle_s=0, repeats=1,
                        duration_s=0.01, out_dir=str(tmp_path / "out"), bench=bench, echo=lines.append)
    assert sorted((row["model"], row["precision"]) for row in outcome.rows) == [
        ("m1", "fp32"), ("m1", "int8"), ("m2", "fp32")]
    assert sorted(set(call["model_path"] for call in bench.calls)) == sorted([m1, quantized, m2])
    assert any("m2 int8: skipped, no m2.int8.onnx beside it" in line for line in lines)
    only = run_sweep([quantized], profile="host-cpu", modes="1", precisions="fp32,int8", settle_s=0, repeats=1,
                     duration_s=0.01, out_dir=str(tmp_path / "out2"), bench=bench, echo=lines.append)
    assert [(row["model"], row["precision"]) for row in only.rows] == [("m1.int8", "int8")]


def test_progress_shows_mode_model_repeat_and_eta(plain_host, tmp_path):
    lines = []
    run_sweep([_model(tmp_path, "m1")], profile="host-cpu", modes="1", settle_s=0, repeats=3, duration_s=0.01,
              out_dir=str(tmp_path / "out"), bench=stubbench.make_bench(sleep_s=0.01), echo=lines.append)
    progress = [line for line in lines if line.startswith("[")]
    assert progress[0] == "[1/3] mode 1 1 thread | m1 fp32 | repeat 1/3 | ETA ?"
    assert progress[2].startswith("[3/3] mode 1 1 thread | m1 fp32 | repeat 3/3 | ETA ") and "?" not in progress[2]


@pytest.mark.parametrize("kwargs, message", [
    (dict(clocks="max"), "--clocks max needs a Jetson"),
    (dict(modes="99"), "mode(s) 99 not on this board; its modes are: 1 1 thread"),
    (dict(modes="a,b"), "--modes takes 'all' or mode IDs"),
    (dict(precisions="int4"), "--precision takes a comma list of fp32, fp16, int8"),
    (dict(repeats=0), "--repeats must be at least 1"),
    (dict(precisions="fp16"), "nothing to measure"),
    # the product's minimum (the fake-board tests lower it for themselves only, tests/sweep_timing.py)
    (dict(interval_ms=499), "the power sampling interval must be at least 500 ms"),
])
def test_bad_options_fail_before_anything_runs(plain_host, tmp_path, kwargs, message):
    bench = stubbench.make_bench()
    with pytest.raises(EdgeAttnError) as info:
        run_sweep([_model(tmp_path, "m1")], profile="host-cpu", out_dir=str(tmp_path / "out"), bench=bench,
                  echo=lambda line: None, **kwargs)
    assert message in str(info.value)
    assert bench.calls == [] and not (tmp_path / "out" / "results.json").exists()


def test_bad_models(plain_host, tmp_path):
    engine = tmp_path / "x.engine"
    engine.write_bytes(b"engine")
    text = tmp_path / "notes.txt"
    text.write_text("x")
    for models, message in (([str(engine)], "is a TensorRT engine; the host-cpu profile runs ONNX"),
                            ([str(text)], "must be an ONNX file"),
                            ([str(tmp_path / "missing.onnx")], "model file not found"),
                            ([], "give at least one model")):
        with pytest.raises(EdgeAttnError, match=message):
            run_sweep(models, profile="host-cpu", out_dir=str(tmp_path / "out"), bench=stubbench.make_bench(),
                      echo=lambda line: None)


def test_overwrite_replaces_a_finished_sweep_only(plain_host, tmp_path):
    model = _model(tmp_path, "m1")
    out = str(tmp_path / "out")
    quiet = dict(profile="host-cpu", modes="1", settle_s=0, repeats=1, duration_s=0.01, out_dir=out,
                 echo=lambda line: None)
    run_sweep([model], bench=stubbench.make_bench(sleep_s=0.01), **quiet)
    with pytest.raises(EdgeAttnError, match="already holds a sweep"):
        run_sweep([model], bench=stubbench.make_bench(), **quiet)
    second = run_sweep([model, _model(tmp_path, "m2")], bench=stubbench.make_bench(), overwrite=True, **quiet)
    assert second.status == "complete"
    assert sorted(set(row["model"] for row in json.load(open(os.path.join(out, "results.json")))["rows"])) == [
        "m1", "m2"]
    # A sweep killed before it restored the board keeps the only record of the original state: never discarded.
    state = json.load(open(os.path.join(out, "sweep-state.json")))
    state["status"] = "running"
    with open(os.path.join(out, "sweep-state.json"), "w") as handle:
        json.dump(state, handle)
    with pytest.raises(EdgeAttnError, match="finish it with --resume"):
        run_sweep([model], bench=stubbench.make_bench(), overwrite=True, **quiet)
    assert os.path.exists(os.path.join(out, "results.json"))


def test_unknown_board_asks_for_a_profile(fake_board, tmp_path):
    board = fake_board("nano-4gb")
    with open(os.path.join(board.root, "proc", "device-tree", "compatible"), "wb") as handle:
        handle.write(b"nvidia,p3541-0000\0nvidia,tegra210\0")
    with pytest.raises(EdgeAttnError, match="no profile matches this board"):
        run_sweep([_model(tmp_path, "m1")], out_dir=str(tmp_path / "out"), bench=stubbench.make_bench(),
                  echo=lambda line: None)


def test_jetson_onnx_without_build_api(fake_board, fast_sampling, tmp_path, monkeypatch):
    board = fake_board("nano-4gb")
    monkeypatch.setattr(runner, "default_engine_builder", lambda plugin_mode=None: None)
    with pytest.raises(EdgeAttnError, match="build API"):
        run_sweep([_model(tmp_path, "m1")], out_dir=str(tmp_path / "out"), bench=stubbench.make_bench(),
                  echo=lambda line: None)
    assert board.calls("nvpmodel") == [] or all("-m" not in c["argv"] for c in board.calls("nvpmodel"))
    # with ONNX Runtime as the backend the ONNX file runs as it is (fp32)
    outcome = run_sweep([_model(tmp_path, "m1")], backend="onnxruntime", modes="0", settle_s=0, repeats=1,
                        duration_s=scaled(0.6), interval_ms=fast_sampling, out_dir=str(tmp_path / "out2"),
                        bench=stubbench.make_bench(), echo=lambda line: None)
    assert [r["engine_path"] for r in outcome.rows] == [None]


def test_engines_run_as_built(fake_board, fast_sampling, tmp_path):
    fake_board("orin-nano-8gb")
    engine = tmp_path / "m2.fp16.engine"
    engine.write_bytes(b"engine")
    lines = []
    outcome = run_sweep([str(engine)], modes="1", precisions="fp32,fp16", settle_s=0, repeats=1,
                        duration_s=scaled(0.6), interval_ms=fast_sampling, out_dir=str(tmp_path / "out"),
                        bench=stubbench.make_bench(), echo=lines.append)
    assert [(r["precision"], r["precision_requested"]) for r in outcome.rows] == [("fp16", "as-built")]
    assert any("precision fixed at build time" in line for line in lines)


# -- command line ----------------------------------------------------------------------------------------------
def _stub_cli(monkeypatch):
    """The stub benchmark behind `edgeattn sweep`; its models are placeholders, so only a plain readability check."""
    monkeypatch.setattr(runner, "default_bench", lambda: stubbench.make_bench(sleep_s=0.01))
    monkeypatch.setattr(runner, "default_model_check", lambda *a, **k: runner._basic_model_check)


def test_cli_sweep_then_report(plain_host, tmp_path, invoke, monkeypatch):
    _stub_cli(monkeypatch)
    out = str(tmp_path / "out")
    result = invoke(["sweep", _model(tmp_path, "m1"), _model(tmp_path, "m2"), "--profile", "host-cpu", "--modes",
                     "1,2", "--settle-s", "0", "--repeats", "1", "--duration-s", "0.01", "-o", out], expect=0)
    assert "4 result row(s) in {}/results.csv".format(out) in result.stdout
    assert "next: edgeattn report {}".format(out) in result.stdout
    # events stay on stderr; the per-measurement counter is progress, drawn on a terminal only (test_progress.py)
    assert "mode 2 2 threads (2/2)" in result.stderr and "[4/4]" not in result.stderr
    try:
        import matplotlib  # noqa: F401  (the plots need the report extra; the device-side check runs without it)
        plots = True
    except ImportError:
        plots = False
    result = invoke(["report", out, "--baseline", "m1"] + ([] if plots else ["--no-plots"]), expect=0)
    report = open(os.path.join(out, "report.md")).read()
    assert "Speedup vs baseline `m1`" in report and "slowest model in the same mode" in report
    if plots:
        assert [name for name in os.listdir(os.path.join(out, "plots")) if name.endswith(".png")]


@pytest.mark.parametrize("args, message", [
    (["--resume"], "--resume needs -o DIR"),
    ([], "give at least one model"),
    (["missing.onnx", "--profile", "host-cpu"], "model file not found: missing.onnx"),
    (["{m1}", "--profile", "nope"], "unknown profile 'nope'"),
    (["{m1}", "--profile", "host-cpu", "--modes", "7,x"], "--modes takes 'all' or mode IDs"),
])
def test_cli_errors_are_one_line(plain_host, tmp_path, invoke, monkeypatch, args, message):
    _stub_cli(monkeypatch)
    monkeypatch.chdir(str(tmp_path))
    args = [a.replace("{m1}", _model(tmp_path, "m1")) for a in args]
    result = invoke(["sweep"] + args + ["-o", str(tmp_path / "out")] if "--resume" not in args else ["sweep"] + args,
                    expect=2)
    assert result.stderr.startswith("edgeattn: error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1


def test_cli_interval_below_500_ms(invoke, tmp_path):
    result = invoke(["sweep", "x.onnx", "--interval-ms", "100"], expect=2)
    assert "--interval-ms" in result.stderr


def test_the_callers_signal_handlers_are_back_after_a_sweep(plain_host, tmp_path):
    """run_sweep turns SIGINT and SIGTERM into an exception only while it runs (so that the board is restored);
    afterwards, finished or failed, a library caller's own handlers are in place again, SIGTERM as much as
    SIGINT."""
    def callers_handler(signum, frame):
        pass

    signals = (signal.SIGINT, signal.SIGTERM)
    during = []

    def bench(*args, **kwargs):
        during.append([signal.getsignal(sig) for sig in signals])
        return stubbench.make_bench(sleep_s=0)(*args, **kwargs)

    previous = [signal.signal(sig, callers_handler) for sig in signals]
    try:
        quiet = dict(profile="host-cpu", modes="1", settle_s=0, repeats=1, duration_s=0.01, echo=lambda line: None)
        outcome = run_sweep([_model(tmp_path, "m1")], out_dir=str(tmp_path / "ok"), bench=bench, **quiet)
        assert outcome.status == "complete"
        assert [signal.getsignal(sig) for sig in signals] == [callers_handler, callers_handler]
        with pytest.raises(EdgeAttnError, match="stub benchmark failure"):
            run_sweep([_model(tmp_path, "m1")], out_dir=str(tmp_path / "failed"),
                      bench=stubbench.make_bench(fail_at=1), **quiet)
        assert [signal.getsignal(sig) for sig in signals] == [callers_handler, callers_handler]
    finally:
        for sig, handler in zip(signals, previous):
            signal.signal(sig, handler)
    assert during and all(callers_handler not in handlers for handlers in during)  # the sweep's own, meanwhile


def test_int8_engines_on_a_board_are_built_from_the_quantized_file(tmp_path):
    """On a Jetson the int8 variant builds MODEL.int8.onnx into the engine cache as MODEL's int8 engine."""
    import types

    from edgeattn.sweep.engines import build_engines
    from edgeattn.sweep.plan import plan_variants

    model, quantized = _model(tmp_path, "m1"), _model(tmp_path, "m1.int8")
    entries = [{"name": "m1", "path": model, "kind": "onnx"}]
    board = types.SimpleNamespace(is_jetson=True)
    variants, notes = plan_variants(entries, ["fp16", "int8"], board, "trtexec", lambda line: None)
    assert [(v["precision"], v["source"]) for v in variants] == [("fp16", model), ("int8", quantized)] and not notes
    built = []

    def builder(source, target, precision):
        built.append((source, os.path.basename(target), precision))
        with open(target, "w") as handle:
            handle.write("engine")

    build_engines(variants, str(tmp_path / "out"), builder, lambda line: None)
    assert built == [(model, "m1.fp16.engine", "fp16"), (quantized, "m1.int8.engine", "int8")]
