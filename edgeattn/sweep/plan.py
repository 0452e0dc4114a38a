"""What a sweep measures: its options (:class:`SweepOptions`), the board profile, the models, the (model,
precision) variants and the order of the power modes.

Nothing here touches the board or the sweep directory; :mod:`.runner` runs the plan, :mod:`.engines` builds the
engines it names.
"""
import os

from dataclasses import dataclass
from typing import Optional, Sequence, Union

from .. import profiles as profiles_io
from ..errors import EdgeAttnError
from ..jetson import board as board_io

PRECISIONS = ("fp32", "fp16", "int8")
#: the file name `edgeattn quantize` gives a model's Q/DQ version (``model.onnx`` -> ``model.int8.onnx``)
QUANTIZED_SUFFIX = ".int8.onnx"
ENGINE_SUFFIXES = (".engine", ".plan", ".trt")
ONNX_SUFFIXES = (".onnx",)
AS_BUILT = "as-built"


@dataclass
class SweepOptions(object):
    """Everything ``run_sweep`` was asked (its keyword arguments of the same names) except the injected functions.

    :meth:`record` is what the resume file and ``results.json`` keep of it; ``--resume`` reads that record back
    instead of these values (``allow_engine_host_code`` is never read back: only the user's flag allows it).
    """
    models: Sequence[str] = ()
    profile: str = "auto"
    modes: Union[str, Sequence[int]] = "all"
    precisions: Union[str, Sequence[str]] = ("fp32",)
    backend: str = "auto"
    clocks: str = "default"
    settle_s: float = 30.0
    repeats: int = 3
    allow_reboot: bool = False
    resume: bool = False
    out_dir: str = "runs/sweep"
    duration_s: Optional[float] = 10.0
    warmup_s: float = 2.0
    batch: int = 1
    power_source: str = "auto"
    interval_ms: int = 500
    temp_limit_c: float = 85.0
    overwrite: bool = False
    allow_engine_host_code: bool = False
    plugin_mode: Optional[str] = None
    layers: bool = False  # also record each measurement's per-layer times (bench --layers)

    def record(self):
        """The options as the resume file stores them (models as absolute paths, modes and precisions parsed)."""
        return {
            "models": [os.path.abspath(m) for m in self.models], "profile": self.profile,
            "modes": parse_modes(self.modes), "precisions": parse_precisions(self.precisions),
            "backend": self.backend, "clocks": self.clocks, "settle_s": float(self.settle_s),
            "repeats": int(self.repeats), "allow_reboot": bool(self.allow_reboot), "duration_s": self.duration_s,
            "warmup_s": self.warmup_s, "batch": int(self.batch), "power_source": self.power_source,
            "interval_ms": int(self.interval_ms), "temp_limit_c": float(self.temp_limit_c),
            "plugins": self.plugin_mode, "layers": bool(self.layers),
        }


def parse_modes(text):
    """``all`` or ``0,2,3`` -> "all" or [0, 2, 3]."""
    if text is None or str(text).strip().lower() == "all":
        return "all"
    if isinstance(text, (list, tuple)):
        return [int(v) for v in text]
    ids = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit():
            raise EdgeAttnError("--modes takes 'all' or mode IDs like 0,2,3; got {!r}".format(text))
        ids.append(int(part))
    if not ids:
        raise EdgeAttnError("--modes is empty")
    return ids


def parse_precisions(text):
    values = [p.strip().lower() for p in (text.split(",") if isinstance(text, str) else text) if p.strip()]
    bad = [p for p in values if p not in PRECISIONS]
    if bad or not values:
        raise EdgeAttnError("--precision takes a comma list of {}; got {!r}".format(", ".join(PRECISIONS), text))
    return list(dict.fromkeys(values))


def resolve_board_profile(name, root):
    """``auto``: the profile matching the detected board, or host-cpu where no Jetson is found."""
    if name and name != "auto":
        return profiles_io.load_profile(name), None
    board = board_io.detect_board(root)
    if board is None:
        return profiles_io.load_profile(profiles_io.HOST_CPU), None
    profile = profiles_io.match_board(board)
    if profile is None:
        raise EdgeAttnError("no profile matches this board (model {!r}, compatible {}); pass --profile NAME (see "
                            "`edgeattn profiles`)".format(board.model, ", ".join(board.compatible) or "none"))
    return profile, board


def model_entries(models):
    entries, names = [], {}
    for given in models:
        path = os.path.abspath(given)
        if os.path.isdir(path):
            raise EdgeAttnError("{} is a directory, not a model file".format(given))
        if not os.path.isfile(path):
            raise EdgeAttnError("model file not found: {}".format(given))
        lower = path.lower()
        if lower.endswith(ONNX_SUFFIXES):
            kind = "onnx"
        elif lower.endswith(ENGINE_SUFFIXES):
            kind = "engine"
        else:
            raise EdgeAttnError("{}: a model must be an ONNX file (.onnx) or a TensorRT engine ({})".format(
                given, ", ".join(ENGINE_SUFFIXES)))
        name = os.path.splitext(os.path.basename(path))[0]
        if name in names and names[name] != path:
            raise EdgeAttnError("two models are both named {!r} ({} and {}); rename one".format(
                name, names[name], path))
        names[name] = path
        entries.append({"name": name, "path": path, "kind": kind})
    if not entries:
        raise EdgeAttnError("give at least one model (ONNX file or TensorRT engine)")
    return entries


def plan_variants(entries, precisions, profile, backend, echo):
    """(model, precision) pairs to measure and how: run the ONNX file, run an engine as it is, or build one
    engine per precision first. Returns (variants, notes)."""
    variants, notes = [], []
    onnx_runtime = (not profile.is_jetson) or backend == "onnxruntime"
    for entry in entries:
        if entry["kind"] == "engine":
            if not profile.is_jetson:
                raise EdgeAttnError("{} is a TensorRT engine; the host-cpu profile runs ONNX models on ONNX Runtime"
                                    .format(entry["path"]))
            if len(precisions) > 1 or precisions[0] != "fp32":
                notes.append("{}: a built engine has its precision fixed at build time; it runs once per mode "
                             "(precision column from the benchmark)".format(entry["name"]))
            variants.append({"model": entry, "precision": AS_BUILT, "build": False})
            continue
        quantized = entry["path"].endswith(QUANTIZED_SUFFIX)
        for precision in precisions:
            source = entry["path"]
            if precision == "int8" and not quantized:
                source = entry["path"][:-len(".onnx")] + QUANTIZED_SUFFIX if entry["path"].endswith(".onnx") else None
                if source is None or not os.path.isfile(source):
                    notes.append("{} int8: skipped, no {} beside it (run `edgeattn quantize {}` first)".format(
                        entry["name"], os.path.basename(source or entry["path"] + QUANTIZED_SUFFIX), entry["path"]))
                    continue
            elif precision != "int8" and quantized:
                notes.append("{} {}: skipped, {} is quantized (Q/DQ): it builds as int8 only".format(
                    entry["name"], precision, entry["path"]))
                continue
            if onnx_runtime and precision == "int8":  # ONNX Runtime runs the Q/DQ file itself
                variants.append({"model": entry, "precision": "int8", "build": False, "source": source})
            elif onnx_runtime:
                if precision != "fp32":
                    notes.append("{} {}: skipped, ONNX Runtime on the CPU runs fp32 and int8 (Q/DQ) only".format(
                        entry["name"], precision))
                    continue
                variants.append({"model": entry, "precision": "fp32", "build": False})
            else:
                variants.append({"model": entry, "precision": precision, "build": True, "source": source})
    for note in notes:
        echo(note)
    if not variants:
        raise EdgeAttnError("nothing to measure: every model/precision pair was skipped ({})".format("; ".join(notes)))
    return variants, notes


def order_modes(modes, current_id, needs_reboot):
    """Current mode first, then the modes it reaches live, then the other reboot groups (fewest reboots)."""
    by_id = {m.id: m for m in modes}
    ordered = []
    if current_id in by_id:
        ordered.append(by_id[current_id])
    live = [m for m in modes if m.id != current_id and not needs_reboot(current_id, m.id)]
    rest = [m for m in modes if m.id != current_id and needs_reboot(current_id, m.id)]
    ordered.extend(sorted(live, key=lambda m: m.id))
    groups = []
    for mode in sorted(rest, key=lambda m: m.id):
        key = repr(mode.group)
        if key not in groups:
            groups.append(key)
    for key in groups:
        ordered.extend(m for m in sorted(rest, key=lambda m: m.id) if repr(m.group) == key)
    return ordered
