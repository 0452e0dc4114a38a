"""The paper's edge tables beside a sweep's measurements: ``edgeattn report DIR`` after ``edgeattn sweep --preset``.

For every power mode of the sweep, one table with a row per model of the preset: the paper's FPS and printed
speedup ratio, then ours, per precision column (FP32; FP16 = the paper's "mixed precision"). The speedup is the
paper's: FPS divided by the slowest model's FPS *in the same column*, so each column names its own baseline, for
the paper's numbers and for ours. Device-side: no torch, Python 3.8.
"""
import os

from .._io import atomic_write
from ..errors import EdgeAttnError
from ..sweep import presets as presets_io
from .tables import MISSING, load_sweep_tables, markdown_table

PAPER_TABLE_FILE = "paper_table.md"
PRECISION_NAMES = {"fp32": "FP32", "fp16": "mixed/FP16"}


def _slowest(values):
    """(key, value) of the smallest positive value in ``{key: value}``, or (None, None)."""
    present = [(v, k) for k, v in values.items() if v]
    if not present:
        return None, None
    value, key = min(present)
    return key, value


def paper_table_sections(preset, tables, batch=None):
    """[(title, header, rows, notes)] for each mode of the sweep: the paper's numbers and ours side by side."""
    labels = {row.key: row.label for row in preset.rows}
    sections = []
    for mode in tables.modes:
        header = ["model"]
        for precision in preset.precisions:
            name = PRECISION_NAMES[precision]
            header += ["paper {} FPS".format(name), "paper ratio", "ours {} items/s".format(name), "ours ratio"]
        ours = {p: {row.key: tables.fps(p, row.key, mode.id) for row in preset.rows} for p in preset.precisions}
        paper = {p: {row.key: row.paper[p][0] for row in preset.rows} for p in preset.precisions}
        rows = []
        for row in preset.rows:
            line = ["{} ({})".format(row.label, row.key)]
            for precision in preset.precisions:
                _, ours_base = _slowest(ours[precision])
                value = ours[precision][row.key]
                line += ["{:g}".format(row.paper[precision][0]), row.paper[precision][1],
                         MISSING if value is None else "{:.1f}".format(value),
                         MISSING if value is None or not ours_base else "{:.2f}x".format(value / ours_base)]
            rows.append(line)
        notes = []
        for precision in preset.precisions:
            name = PRECISION_NAMES[precision]
            paper_key, paper_fps = _slowest(paper[precision])
            ours_key, ours_fps = _slowest(ours[precision])
            ours_text = ("{} ({:.1f} items/s)".format(ours_key, ours_fps) if ours_key else
                         "not measured in this sweep")
            notes.append("{} baseline (slowest in the column): paper {} ({:g} FPS); ours {}".format(
                name, labels[paper_key], paper_fps, ours_text))
        title = "{} vs this sweep, mode {} (batch {})".format(preset.title, mode.name,
                                                               MISSING if batch is None else batch)
        sections.append((title, header, rows, notes))
    return sections


def paper_table_markdown(out_dir, preset_name=None):
    """The side-by-side tables for the sweep in ``out_dir`` as markdown, or None when it was not a preset sweep
    and no ``preset_name`` is given."""
    preset, record = presets_io.read_preset_record(out_dir)
    if preset_name is not None:
        preset = presets_io.get_preset(preset_name)
    if preset is None:
        return None
    data, _, tables = load_sweep_tables(out_dir)
    if not any(row.key in tables.models for row in preset.rows):
        raise EdgeAttnError("none of preset {}'s models ({}) is in the sweep in {} (its models: {})".format(
            preset.name, ", ".join(row.key for row in preset.rows), out_dir, ", ".join(tables.models)))
    batch = (record or {}).get("batch") or ((data.get("sweep") or {}).get("options") or {}).get("batch")
    lines = []
    for title, header, table_rows, notes in paper_table_sections(preset, tables, batch):
        lines += [title, "", markdown_table(header, table_rows), ""] + notes + [""]
    return "\n".join(lines).rstrip("\n")


def write_paper_table(out_dir, markdown):
    """Write ``markdown`` (from :func:`paper_table_markdown`) to ``DIR/paper_table.md``; returns the path."""
    path = os.path.join(out_dir, PAPER_TABLE_FILE)
    with atomic_write(path, "w") as handle:
        handle.write("# Paper table vs this sweep\n\n" + markdown + "\n")
    return path
