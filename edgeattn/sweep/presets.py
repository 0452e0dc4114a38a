"""The ELFATT paper's edge tables as sweep presets: ``edgeattn sweep --preset elfatt-table8`` / ``elfatt-table9``.

A preset fixes what the paper measured: the seven models of Tables VIII/IX (six CSWin-T24181 attention variants at
224 and EfficientViT-B2 at 288), the batch (128 on the AGX Orin, 1 on the Nano), the precisions (FP32 and "mixed
precision", run here as FP16 engines) and the board and power mode (Orin 60 W MAXN, Nano 10 W MAXN); the paper's
FPS and speedup ratios per row come along so that ``edgeattn report`` can print ours beside them
(:mod:`edgeattn.report.paper_tables`). The paper divides each FPS by the slowest model's FPS in the same column,
so the baseline changes from column to column; the report names it.

The ONNX files are ``<models_dir>/batch<N>/<row>.onnx``; missing ones are exported with ``edgeattn export`` in a
subprocess (that step needs torch; on a board without it, export elsewhere and copy the files there). Nothing here
imports torch: this module runs on the device side (Python 3.8, click/PyYAML/numpy).
"""
import os
import sys

from .._io import read_json, write_json
from .._subprocess import run_command
from ..errors import EdgeAttnError

PAPER = "ELFATT (Zhang et al., arXiv 2501.06098)"
PRESET_FILE = "preset.json"
#: a full-size export on a slow CPU (Swin-B / CSWin-B class) stays well under this
EXPORT_TIMEOUT_S = 3600


class PresetRow(object):
    """One table row: the paper's label, our registry arch and resolution, the paper's (FPS, printed ratio) per
    precision column ("fp32", "fp16" = the paper's mixed precision)."""

    def __init__(self, label, arch, resolution, fp32, fp16):
        self.label = label
        self.arch = arch
        self.resolution = resolution
        self.paper = {"fp32": fp32, "fp16": fp16}

    @property
    def key(self):
        """The ONNX file stem, i.e. the model name in the sweep's results."""
        return self.arch if self.resolution == 224 else "{}_r{}".format(self.arch, self.resolution)


class Preset(object):
    def __init__(self, name, table, platform, profile, mode_name, batch, rows):
        self.name = name
        self.table = table
        self.platform = platform
        self.profile = profile
        self.mode_name = mode_name
        self.batch = batch
        self.precisions = ("fp32", "fp16")
        self.rows = rows

    @property
    def title(self):
        return "{} Table {} ({}, batch {}, {})".format(PAPER, self.table, self.platform, self.batch, self.mode_name)

    def row(self, key):
        for row in self.rows:
            if row.key == key:
                return row
        return None


def _rows(values):
    """Rows in the paper's order from (label, arch, resolution, (fps32, ratio32), (fps16, ratio16))."""
    return [PresetRow(*v) for v in values]


PRESETS = {
    "elfatt-table8": Preset("elfatt-table8", "VIII", "NVIDIA Jetson AGX Orin, JetPack 6.1", "agx-orin-64gb",
                            "MAXN", 128, _rows([
                                ("CSWin-T24181-Agent", "cswin_t24181_agent", 224, (158, "1.5x"), (295, "1.3x")),
                                ("CSWin-T24181-EFFATT", "cswin_t24181_effatt", 224, (156, "1.4x"), (305, "1.3x")),
                                ("CSWin-T24181-ELFATT", "cswin_t24181_elfatt", 224, (174, "1.6x"), (355, "1.6x")),
                                ("CSWin-T24181-FLatten", "cswin_t24181_flatten", 224, (138, "1.3x"), (229, "1.0x")),
                                ("CSWin-T24181-GLOBAL", "cswin_t24181_global", 224, (108, "1.0x"), (298, "1.3x")),
                                ("CSWin-T24181-LOCAL", "cswin_t24181_local", 224, (167, "1.5x"), (309, "1.3x")),
                                ("EfficientViT-B2", "efficientvit_b2", 288, (198, "1.8x"), (282, "1.2x")),
                            ])),
    "elfatt-table9": Preset("elfatt-table9", "IX", "NVIDIA Jetson Nano, JetPack 4.6.6", "nano-4gb", "MAXN", 1,
                            _rows([
                                ("CSWin-T24181-Agent", "cswin_t24181_agent", 224, (4.9, "1.5x"), (4.5, "1.3x")),
                                ("CSWin-T24181-EFFATT", "cswin_t24181_effatt", 224, (5.8, "1.8x"), (5.5, "1.6x")),
                                ("CSWin-T24181-ELFATT", "cswin_t24181_elfatt", 224, (6.2, "2.0x"), (5.8, "1.7x")),
                                ("CSWin-T24181-FLatten", "cswin_t24181_flatten", 224, (4.7, "1.5x"), (4.0, "1.1x")),
                                ("CSWin-T24181-GLOBAL", "cswin_t24181_global", 224, (3.2, "1.0x"), (3.5, "1.0x")),
                                ("CSWin-T24181-LOCAL", "cswin_t24181_local", 224, (5.0, "1.6x"), (4.2, "1.2x")),
                                ("EfficientViT-B2", "efficientvit_b2", 288, (5.5, "1.7x"), (5.7, "1.6x")),
                            ])),
}


def get_preset(name):
    preset = PRESETS.get(name)
    if preset is None:
        raise EdgeAttnError("unknown preset {!r}; presets: {}".format(name, ", ".join(sorted(PRESETS))))
    return preset


def model_dir(models_dir, batch):
    return os.path.join(models_dir, "batch{}".format(batch))


def model_path(models_dir, row, batch):
    return os.path.join(model_dir(models_dir, batch), row.key + ".onnx")


def export_command(row, path, batch):
    """``edgeattn export`` for one row, as an argument list run with this interpreter."""
    return [sys.executable, "-c", "from edgeattn.cli import main; main()", "export", "--arch", row.arch,
            "--resolution", str(row.resolution), "--batch", str(batch), "-o", path]


def ensure_models(preset, models_dir, batch, echo=None, export=True, runner=run_command):
    """The preset's ONNX files for ``batch``, exporting the missing ones (``export``) or naming the commands that
    would (one line, no export). Returns the paths in the paper's row order."""
    echo = echo or (lambda line: None)
    paths = [model_path(models_dir, row, batch) for row in preset.rows]
    missing = [(row, path) for row, path in zip(preset.rows, paths) if not os.path.isfile(path)]
    if missing and not export:
        raise EdgeAttnError("{} model file(s) missing in {}, e.g. {}; export them with `edgeattn export --arch {} "
                            "--resolution {} --batch {} -o {}` (or drop --no-export)".format(
                                len(missing), model_dir(models_dir, batch), missing[0][1], missing[0][0].arch,
                                missing[0][0].resolution, batch, missing[0][1]))
    for index, (row, path) in enumerate(missing):
        echo("exporting {} ({}/{}): {} at {}x{}, batch {}".format(row.label, index + 1, len(missing), row.arch,
                                                                   row.resolution, row.resolution, batch))
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        result = runner(export_command(row, path, batch), timeout=EXPORT_TIMEOUT_S)
        if result.returncode != 0 or not os.path.isfile(path):
            lines = [line for line in result.output.splitlines() if line.strip()]
            raise EdgeAttnError("exporting {} for preset {} failed: {}".format(
                row.arch, preset.name, lines[-1] if lines else "exit status {}".format(result.returncode)))
    return paths


def preset_modes(preset, profile):
    """Mode IDs of the paper's power mode when ``profile`` is the paper's board, else None (the caller's --modes)."""
    if profile is None or profile.name != preset.profile:
        return None
    for table in profile.mode_tables.values():
        ids = [mode.id for mode in table.modes if mode.name == preset.mode_name]
        if ids:
            return ids
    return None


def prepare_sweep(name, models, out_dir, profile, models_dir, batch, precisions, modes, given, resume=False,
                  overwrite=False, echo=None, runner=run_command):
    """What ``edgeattn sweep --preset NAME`` runs: returns (model paths, batch, precisions, modes).

    The preset's batch, precisions and (on the paper's board) power mode apply unless the caller gave them
    (``given``: names of the options set on the command line); missing ONNX files are exported first. The sweep
    directory gets ``preset.json`` so that ``edgeattn report`` prints the paper's table beside ours; a sweep
    without a preset that overwrites one drops it.
    """
    record = os.path.join(out_dir, PRESET_FILE)
    if name is None:
        if overwrite and os.path.isfile(record):
            os.unlink(record)
        return models, batch, precisions, modes
    preset = get_preset(name)
    if models:
        raise EdgeAttnError("--preset {} chooses its own models; give no MODELS with it".format(name))
    if resume:
        raise EdgeAttnError("--resume continues a sweep with the models it saved; drop --preset")
    if os.path.isfile(os.path.join(out_dir, "results.json")) and not overwrite:
        raise EdgeAttnError("{} already holds a sweep; pass --overwrite to replace it, or choose another -o".format(
            out_dir))
    if "batch" not in given:
        batch = preset.batch
    if "precisions" not in given:
        precisions = ",".join(preset.precisions)
    if "modes" not in given:
        from ..jetson import default_root
        from .plan import resolve_board_profile

        ids = preset_modes(preset, resolve_board_profile(profile, default_root())[0])
        if ids:
            modes = ",".join(str(i) for i in ids)
    paths = ensure_models(preset, models_dir, batch, echo=echo, runner=runner)
    os.makedirs(out_dir, exist_ok=True)
    write_preset_record(out_dir, preset, batch)
    return paths, batch, precisions, modes


def given_options(ctx, names):
    """The option names among ``names`` that the command line set (click >= 8 knows; click 7 compares with the
    defaults)."""
    given = set()
    for param in ctx.command.params:
        if param.name not in names:
            continue
        source = getattr(ctx, "get_parameter_source", None)
        if source is not None:
            if str(source(param.name)).rsplit(".", 1)[-1] not in ("DEFAULT", "DEFAULT_MAP"):
                given.add(param.name)
        elif ctx.params.get(param.name) != param.default:
            given.add(param.name)
    return given


def write_preset_record(out_dir, preset, batch):
    """Remember in the sweep directory which preset (and batch) made it, for ``edgeattn report``."""
    write_json(os.path.join(out_dir, PRESET_FILE), {"preset": preset.name, "batch": batch,
                                                    "models": {row.key: row.label for row in preset.rows}})


def read_preset_record(out_dir):
    """(preset, record) written by :func:`write_preset_record`, or (None, None)."""
    path = os.path.join(out_dir, PRESET_FILE)
    if not os.path.isfile(path):
        return None, None
    record = read_json(path, "a preset record edgeattn wrote")
    try:
        return get_preset(record["preset"]), record
    except (KeyError, TypeError, EdgeAttnError) as error:
        raise EdgeAttnError("{} is not a preset record edgeattn wrote ({})".format(path, error))
