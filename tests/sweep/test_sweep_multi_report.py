"""`edgeattn report DIR DIR... -o OUT` over real sweep output: fake-board sweeps of two boards (the project's
fake Jetson harness and stub benchmark, whose throughput is a known function of model and mode), joined by run
context, and the joins it refuses."""
import json
import os

import pytest

import stubbench
from sweep_timing import scaled
from edgeattn.sweep import run_sweep


@pytest.fixture
def board_sweep(fake_board, fast_sampling, tmp_path):
    boards = {}

    def _sweep(board, models, modes, name):
        if board not in boards:
            boards[board] = fake_board(board)
        else:
            for key, value in boards[board].env.items():
                os.environ[key] = value  # monkeypatched by fake_board: restored after the test
        paths = []
        for model in models:
            path = tmp_path / "{}.onnx".format(model)
            path.write_bytes(b"onnx")
            paths.append(str(path))
        out = str(tmp_path / name)
        outcome = run_sweep(paths, backend="onnxruntime", modes=modes, settle_s=0, repeats=1,
                            duration_s=scaled(0.3), interval_ms=fast_sampling, out_dir=out,
                            bench=stubbench.make_bench(), echo=lambda line: None)
        assert outcome.status == "complete"
        return out

    return _sweep


def _have_matplotlib():
    try:
        import matplotlib  # noqa: F401  (the plots need the report extra; the device-side run has none)
    except ImportError:
        return False
    return True


def _one_error_line(result):
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edgeattn: error: "), result.stderr
    return lines[0]


def test_report_over_two_boards(board_sweep, invoke, tmp_path):
    nano = board_sweep("orin-nano-8gb", ["m1", "m2"], "0,1", "nano")
    agx = board_sweep("agx-orin-64gb", ["m1"], "2", "agx")
    out = tmp_path / "joined"
    plots = _have_matplotlib()
    result = invoke(["report", nano, agx, "-o", str(out), "--no-html"] + ([] if plots else ["--no-plots"]),
                    expect=0)
    report = (out / "report.md").read_text()
    contexts = [json.load(open(os.path.join(d, "results.json")))["sweep"]["board"] for d in (nano, agx)]
    for board in contexts:
        assert "{}, JetPack {}".format(board["model"], board["jetpack"]) in report
    # every cell is the stub benchmark's throughput for that model and mode, whichever board measured it
    rows = {}
    for directory, board in zip((nano, agx), contexts):
        for row in json.load(open(os.path.join(directory, "results.json")))["rows"]:
            rows[(board["model"], row["mode_name"], row["model"])] = row
    section = report.split("### Throughput", 1)[1].split("###", 1)[0]
    table = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in section.splitlines()
             if line.startswith("|") and not line.startswith("| ---")]
    columns = table[0][1:]
    assert len(columns) == 3 and [row[0] for row in table[1:]] == ["m1", "m2"]
    checked = 0
    for cells in table[1:]:
        for column, value in zip(columns, cells[1:]):
            board_label, mode = column.rsplit(" · ", 1)
            board = next(b["model"] for b in contexts if board_label.startswith(b["model"]))
            row = rows.get((board, mode, cells[0]))
            if row is None:
                assert value == "-"
            else:
                assert float(value) == pytest.approx(stubbench.expected_fps(cells[0], mode_id=row["mode_id"]))
                checked += 1
    assert checked == len(rows) == 5
    assert "Energy per item (J)" in report and "wrote {}".format(out / "report.md") in result.stdout
    if plots:
        svg = (out / "plots" / "multi_fp32.svg").read_text()
        assert 'id="throughput:m1"' in svg and 'id="energy:m2"' in svg


def test_report_refuses_two_sweeps_claiming_the_same_cells(board_sweep, invoke, tmp_path):
    first = board_sweep("orin-nano-8gb", ["m1"], "0", "a")
    second = board_sweep("orin-nano-8gb", ["m1"], "0,1", "b")
    out = tmp_path / "joined"
    line = _one_error_line(invoke(["report", first, second, "-o", str(out)], expect=2))
    assert "both measure m1 fp32 in mode 15W" in line and not out.exists()


def test_report_refuses_sweeps_without_a_shared_model(board_sweep, invoke, tmp_path):
    nano = board_sweep("orin-nano-8gb", ["m1"], "0", "nano")
    agx = board_sweep("agx-orin-64gb", ["m2"], "2", "agx")
    line = _one_error_line(invoke(["report", nano, agx, "-o", str(tmp_path / "joined")], expect=2))
    assert "shares no model with the other sweeps" in line


def test_several_directories_need_an_output(invoke, tmp_path):
    line = _one_error_line(invoke(["report", str(tmp_path / "a"), str(tmp_path / "b")], expect=2))
    assert "need -o OUT" in line


def test_sweep_layers_reach_the_report(fake_board, fast_sampling, tmp_path, invoke):
    """`sweep --layers` asks each measurement for its per-layer times and `report` shows the breakdown; the stub
    benchmark answers with the per-layer record of the real TREx MobileNetV2 exports (what bench --layers makes of
    them)."""
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
    from bench_helpers import FIXTURES
    from edgeattn.tensorrt.layers import layer_times
    from edgeattn.trtexec.exports import parse_layer_info, parse_profile

    with open(os.path.join(FIXTURES, "profile_trex_mobilenet_qat.profile.json")) as handle:
        profile = parse_profile(handle.read())
    with open(os.path.join(FIXTURES, "layers_trex_mobilenet_qat.graph.json")) as handle:
        info = parse_layer_info(handle.read())
    record = layer_times(profile["layers"], info, top=5)
    stub = stubbench.make_bench()
    asked = []

    def bench(path, layers_top=None, **kwargs):
        asked.append(layers_top)
        result = stub(path, **kwargs)
        result["layers"] = record if layers_top else None
        return result

    fake_board("orin-nano-8gb")
    model = tmp_path / "m1.onnx"
    model.write_bytes(b"onnx")
    out = str(tmp_path / "out")
    run_sweep([str(model)], backend="onnxruntime", modes="0", settle_s=0, repeats=1, duration_s=scaled(0.3),
              interval_ms=fast_sampling, out_dir=out, bench=bench, echo=lambda line: None, layers=True)
    assert asked == [5]
    invoke(["report", out, "--no-plots", "--no-html"], expect=0)
    report = open(os.path.join(out, "report.md")).read()
    assert "fp32: per-layer time share" in report
    line = next(l for l in report.splitlines() if l.startswith("| m1 | 15W |"))
    assert "81.5%" in line and "17.5%" in line and record["top"][0]["name"] in line
