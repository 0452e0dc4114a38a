"""`edgeattn sweep --preset elfatt-table8|9` and the paper table `edgeattn report` prints beside a sweep.

Oracles: the paper's Tables VIII/IX (their printed ratios must follow from their FPS columns by the paper's rule,
FPS / slowest FPS of the column), a stub benchmark whose throughput
is a known function of the model (the report's ratios are checked against it), and one real host-cpu run: the
exports through the real `edgeattn export` subprocess and the benchmark on ONNX Runtime, with the preset's model
list replaced by two tiny ViTs (the paper's models take minutes to export on two cores; the full command is in
the README).
"""
import os

import pytest

import stubbench
from edgeattn import profiles
from edgeattn.errors import EdgeAttnError
from edgeattn.report.paper_tables import paper_table_markdown
from edgeattn.sweep import presets, run_sweep
from edgeattn._subprocess import CommandResult


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
def test_printed_ratios_follow_from_the_fps_columns(name):
    preset = presets.get_preset(name)
    assert len(preset.rows) == 7 and preset.precisions == ("fp32", "fp16")
    for precision in preset.precisions:
        slowest = min(row.paper[precision][0] for row in preset.rows)
        for row in preset.rows:
            fps, printed = row.paper[precision]
            assert abs(fps / slowest - float(printed.rstrip("x"))) <= 0.1, (row.label, precision)


def test_presets_fix_the_paper_protocol():
    table8, table9 = presets.get_preset("elfatt-table8"), presets.get_preset("elfatt-table9")
    assert (table8.batch, table9.batch) == (128, 1)
    assert [row.key for row in table8.rows][-1] == "efficientvit_b2_r288"
    assert presets.preset_modes(table8, profiles.load_profile("agx-orin-64gb")) == [0]
    assert presets.preset_modes(table9, profiles.load_profile("nano-4gb")) == [0]
    assert presets.preset_modes(table8, profiles.load_profile("host-cpu")) is None
    with pytest.raises(EdgeAttnError, match="unknown preset 'table8'; presets: elfatt-table8, elfatt-table9"):
        presets.get_preset("table8")


def test_missing_models_are_exported_with_the_preset_resolution_and_batch(tmp_path):
    preset = presets.get_preset("elfatt-table9")
    commands = []

    def runner(args, timeout):
        commands.append(args)
        open(args[args.index("-o") + 1], "wb").close()
        return CommandResult(args, 0, "", "")

    existing = presets.model_path(str(tmp_path), preset.rows[0], 1)
    os.makedirs(os.path.dirname(existing))
    open(existing, "wb").close()
    paths = presets.ensure_models(preset, str(tmp_path), 1, runner=runner)
    assert paths[0] == existing and all(os.path.isfile(p) for p in paths)
    assert len(commands) == 6  # the first row was there already
    last = commands[-1]
    assert last[last.index("export"):] == ["export", "--arch", "efficientvit_b2", "--resolution", "288", "--batch",
                                           "1", "-o", os.path.join(str(tmp_path), "batch1",
                                                                   "efficientvit_b2_r288.onnx")]


def test_a_failed_export_is_one_line_and_no_export_names_the_command(tmp_path):
    preset = presets.get_preset("elfatt-table8")

    def failing(args, timeout):
        return CommandResult(args, 2, "", "edgeattn: error: torch is not installed\n")

    with pytest.raises(EdgeAttnError, match="exporting cswin_t24181_agent for preset elfatt-table8 failed: "
                                            "edgeattn: error: torch is not installed"):
        presets.ensure_models(preset, str(tmp_path), 128, runner=failing)
    with pytest.raises(EdgeAttnError, match="7 model file.*edgeattn export --arch cswin_t24181_agent --resolution "
                                            "224 --batch 128"):
        presets.ensure_models(preset, str(tmp_path), 128, export=False)


def test_report_puts_the_paper_beside_ours_with_each_column_baseline(plain_host, tmp_path):
    """Stub throughputs: our ratio must be our FPS over the slowest of our column, next to the paper's."""
    preset = presets.get_preset("elfatt-table9")
    models = []
    for row in preset.rows:
        path = tmp_path / (row.key + ".onnx")
        path.write_bytes(b"onnx")
        models.append(str(path))
    out = tmp_path / "sweep"
    run_sweep(models, profile="host-cpu", modes="1", precisions="fp32", settle_s=0, repeats=1, duration_s=0.01,
              out_dir=str(out), bench=stubbench.make_bench(sleep_s=0.0), echo=lambda line: None)
    presets.write_preset_record(str(out), preset, 1)
    text = paper_table_markdown(str(out))
    fps = {row.key: stubbench.expected_fps(row.key, threads=1) for row in preset.rows}
    slowest = min(fps.values())
    lines = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
             for line in text.splitlines() if line.startswith("| CSWin") or line.startswith("| Eff")}
    elfatt = lines["CSWin-T24181-ELFATT (cswin_t24181_elfatt)"]
    assert elfatt[:4] == ["6.2", "2.0x", "{:.1f}".format(fps["cswin_t24181_elfatt"]),
                          "{:.2f}x".format(fps["cswin_t24181_elfatt"] / slowest)]
    assert elfatt[4:] == ["5.8", "1.7x", "-", "-"]  # ONNX Runtime on the CPU runs fp32 only
    assert "FP32 baseline (slowest in the column): paper CSWin-T24181-GLOBAL (3.2 FPS)" in text
    assert "mixed/FP16 baseline (slowest in the column): paper CSWin-T24181-GLOBAL (3.5 FPS); ours not measured" in text
    assert "Table IX (NVIDIA Jetson Nano, JetPack 4.6.6, batch 1, MAXN) vs this sweep, mode 1 thread" in text


def test_report_preset_errors(plain_host, tmp_path):
    model = tmp_path / "other.onnx"
    model.write_bytes(b"onnx")
    run_sweep([str(model)], profile="host-cpu", modes="1", settle_s=0, repeats=1, duration_s=0.01,
              out_dir=str(tmp_path / "sweep"), bench=stubbench.make_bench(sleep_s=0.0), echo=lambda line: None)
    assert paper_table_markdown(str(tmp_path / "sweep")) is None
    with pytest.raises(EdgeAttnError, match="none of preset elfatt-table8's models"):
        paper_table_markdown(str(tmp_path / "sweep"), "elfatt-table8")


@pytest.fixture
def tiny_preset(monkeypatch):
    """elfatt-table9 with its models replaced by two tiny ViTs (labels and paper numbers kept)."""
    preset = presets.get_preset("elfatt-table9")
    rows = [presets.PresetRow(preset.rows[4].label, "vit_tiny_softmax", 224, *[preset.rows[4].paper[p] for p in
                                                                                ("fp32", "fp16")]),
            presets.PresetRow(preset.rows[2].label, "vit_tiny_elfatt", 224, *[preset.rows[2].paper[p] for p in
                                                                               ("fp32", "fp16")])]
    tiny = presets.Preset("elfatt-table9", preset.table, preset.platform, preset.profile, preset.mode_name,
                          preset.batch, rows)
    monkeypatch.setitem(presets.PRESETS, "elfatt-table9", tiny)
    return tiny


def test_preset_sweep_runs_for_real_on_host_cpu(plain_host, tiny_preset, invoke, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    out, models_dir = tmp_path / "run", tmp_path / "models"
    result = invoke(["sweep", "--preset", "elfatt-table9", "--models-dir", models_dir, "--profile", "host-cpu",
                     "--modes", "1", "--repeats", "1", "--duration-s", "0.3", "--warmup-s", "0.1", "--settle-s", "0",
                     "-o", out], expect=0)
    assert "exporting CSWin-T24181-GLOBAL (1/2): vit_tiny_softmax at 224x224, batch 1" in result.stderr
    assert sorted(os.listdir(str(models_dir / "batch1"))) == ["vit_tiny_elfatt.onnx", "vit_tiny_softmax.onnx"]
    report = invoke(["report", out, "--no-plots", "--no-html"], expect=0)
    assert "Table IX (NVIDIA Jetson Nano, JetPack 4.6.6, batch 1, MAXN) vs this sweep" in report.stdout
    row = next(line for line in report.stdout.splitlines() if line.startswith("| CSWin-T24181-GLOBAL"))
    cells = [c.strip() for c in row.split("|")[2:-1]]
    assert cells[:2] == ["3.2", "1.0x"] and float(cells[2]) > 0 and cells[3].endswith("x")
    assert (out / "paper_table.md").exists()
    # the models exist now: a second run reuses them, and MODELS beside --preset is refused
    again = invoke(["sweep", "--preset", "elfatt-table9", "--models-dir", models_dir, "--profile", "host-cpu",
                    "--modes", "1", "--repeats", "1", "--duration-s", "0.1", "--settle-s", "0", "-o", out,
                    "--overwrite"], expect=0)
    assert "exporting" not in again.stderr
    refused = invoke(["sweep", "--preset", "elfatt-table9", str(models_dir / "batch1" / "vit_tiny_elfatt.onnx"),
                      "-o", tmp_path / "x"], expect=2)
    assert "chooses its own models" in refused.stderr and not (tmp_path / "x").exists()


#: ELFATT paper (arXiv 2501.06098) Tables VIII (AGX Orin, batch 128) and IX (Nano, batch 1), transcribed here from
#: the paper's text: label -> (FPS FP32, ratio, FPS mixed precision, ratio)
PAPER_TABLE_VIII = {
    "CSWin-T24181-Agent": (158, "1.5x", 295, "1.3x"), "CSWin-T24181-EFFATT": (156, "1.4x", 305, "1.3x"),
    "CSWin-T24181-ELFATT": (174, "1.6x", 355, "1.6x"), "CSWin-T24181-FLatten": (138, "1.3x", 229, "1.0x"),
    "CSWin-T24181-GLOBAL": (108, "1.0x", 298, "1.3x"), "CSWin-T24181-LOCAL": (167, "1.5x", 309, "1.3x"),
    "EfficientViT-B2": (198, "1.8x", 282, "1.2x")}
PAPER_TABLE_IX = {
    "CSWin-T24181-Agent": (4.9, "1.5x", 4.5, "1.3x"), "CSWin-T24181-EFFATT": (5.8, "1.8x", 5.5, "1.6x"),
    "CSWin-T24181-ELFATT": (6.2, "2.0x", 5.8, "1.7x"), "CSWin-T24181-FLatten": (4.7, "1.5x", 4.0, "1.1x"),
    "CSWin-T24181-GLOBAL": (3.2, "1.0x", 3.5, "1.0x"), "CSWin-T24181-LOCAL": (5.0, "1.6x", 4.2, "1.2x"),
    "EfficientViT-B2": (5.5, "1.7x", 5.7, "1.6x")}


@pytest.mark.parametrize("name,table", [("elfatt-table8", PAPER_TABLE_VIII), ("elfatt-table9", PAPER_TABLE_IX)])
def test_preset_numbers_are_the_papers(name, table):
    preset = presets.get_preset(name)
    assert [row.label for row in preset.rows] == sorted(table)  # the paper lists the rows alphabetically
    for row in preset.rows:
        fps32, ratio32, fps16, ratio16 = table[row.label]
        assert row.paper == {"fp32": (fps32, ratio32), "fp16": (fps16, ratio16)}, row.label
        assert row.resolution == (288 if row.label == "EfficientViT-B2" else 224)
