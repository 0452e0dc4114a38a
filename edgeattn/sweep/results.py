"""Sweep results: one row per model x mode x precision x repeat, in results.json and results.csv.

Each finished row is appended to the sweep's row journal (rows.jsonl, :mod:`.journal`) at once; results.json and
results.csv are written from the journal, atomically (never a half-written file), when a mode ends or is skipped,
before a reboot and when the sweep ends, is interrupted or fails. results.json keeps the full rows (bench
statistics, power, telemetry, run context); results.csv flattens them to the columns in :data:`CSV_COLUMNS` plus one
``power_<RAIL>_w`` column per rail seen (inserted after ``power_total_w``). Both are written one row at a time from
the journal: memory does not grow with the sweep.
"""
import csv
import json
import os

from .. import filekind
from .._io import atomic_write, read_json
from ..errors import EdgeAttnError
from .journal import JOURNAL_FILE, RowJournal, json_default

RESULTS_SCHEMA = "edgeattn.sweep/1"
RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"

LATENCY_KEYS = ("mean", "std", "cov", "min", "p50", "p90", "p95", "p99", "max")

#: Columns of results.csv, in order. ``power_<RAIL>_w`` columns follow ``power_total_w``.
CSV_COLUMNS = (
    ["model", "precision", "mode_id", "mode_name", "mode_budget_w", "threads", "clocks", "repeat",
     "backend", "provider", "batch", "iterations", "throughput_items_per_s"]
    + ["latency_{}_ms".format(k) if k != "cov" else "latency_cov" for k in LATENCY_KEYS]
    + ["gpu_compute_mean_ms",
       "power_source", "power_samples", "power_approximate", "power_reason", "power_total_rail", "power_total_w",
       "energy_per_item_j", "items_per_s_per_w",
       "gpu_util_mean_pct", "gpu_freq_mean_mhz", "gpu_freq_min_mhz", "gpu_freq_max_mhz", "gpu_temp_max_c",
       "temp_max_c", "temp_max_sensor", "throttled", "throttle_reasons", "settled", "settle_waited_s",
       "window_start_unix", "window_end_unix", "started_unix",
       "profile", "board_model", "l4t_release", "jetpack", "model_path", "model_sha256", "engine_path"]
)


def row_key(row):
    """Identity of a measurement, used to skip finished ones on --resume."""
    return (row["model_key"], int(row["mode_id"]), row["precision_requested"], int(row["repeat"]))


def _object(value):
    """``value`` when it is a JSON object, else an empty one: the CSV columns of a damaged part stay empty."""
    return value if isinstance(value, dict) else {}


def flatten_row(row, context):
    """One results.csv record (a dict keyed by column) for a full JSON row."""
    latency = _object(row.get("latency_ms"))
    gpu_compute = _object(row.get("gpu_compute_ms"))
    power = _object(row.get("power"))
    telemetry = _object(row.get("telemetry"))
    window = _object(row.get("window"))
    settle = _object(row.get("settle"))
    board = _object(context.get("board"))
    flat = {
        "model": row.get("model"), "precision": row.get("precision"), "mode_id": row.get("mode_id"),
        "mode_name": row.get("mode_name"), "mode_budget_w": row.get("mode_budget_w"), "threads": row.get("threads"),
        "clocks": row.get("clocks"), "repeat": row.get("repeat"), "backend": row.get("backend"),
        "provider": row.get("provider"), "batch": row.get("batch"), "iterations": row.get("iterations"),
        "throughput_items_per_s": row.get("throughput_items_per_s"),
        "gpu_compute_mean_ms": gpu_compute.get("mean"),
        "power_source": power.get("source"), "power_samples": power.get("samples"),
        "power_approximate": power.get("approximate"), "power_reason": power.get("reason"),
        "power_total_rail": power.get("total_rail"),
        "power_total_w": power.get("total_w"),
        "energy_per_item_j": row.get("energy_per_item_j"), "items_per_s_per_w": row.get("items_per_s_per_w"),
        "gpu_util_mean_pct": telemetry.get("gpu_util_mean_pct"),
        "gpu_freq_mean_mhz": telemetry.get("gpu_freq_mean_mhz"),
        "gpu_freq_min_mhz": telemetry.get("gpu_freq_min_mhz"), "gpu_freq_max_mhz": telemetry.get("gpu_freq_max_mhz"),
        "gpu_temp_max_c": telemetry.get("gpu_temp_max_c"), "temp_max_c": telemetry.get("temp_max_c"),
        "temp_max_sensor": telemetry.get("temp_max_sensor"),
        "throttled": row.get("throttled"), "throttle_reasons": "; ".join(
            str(reason) for reason in (row.get("throttle_reasons") if isinstance(row.get("throttle_reasons"), list)
                                       else [])),
        "settled": settle.get("settled"), "settle_waited_s": settle.get("waited_s"),
        "window_start_unix": window.get("start_unix"), "window_end_unix": window.get("end_unix"),
        "started_unix": row.get("started_unix"),
        "profile": context.get("profile"), "board_model": board.get("model"),
        "l4t_release": board.get("l4t_release"), "jetpack": board.get("jetpack"),
        "model_path": row.get("model_path"), "model_sha256": row.get("model_sha256"),
        "engine_path": row.get("engine_path"),
    }
    for key in LATENCY_KEYS:
        flat["latency_{}_ms".format(key) if key != "cov" else "latency_cov"] = latency.get(key)
    for rail, value in _object(power.get("rails_w")).items():
        flat["power_{}_w".format(rail)] = value
    return flat


def _rail_columns(flat):
    return [key for key in flat if key.startswith("power_") and key.endswith("_w") and key not in CSV_COLUMNS]


def _with_rails(rails):
    columns = list(CSV_COLUMNS)
    at = columns.index("power_total_w") + 1
    return columns[:at] + list(rails) + columns[at:]


def csv_columns(flat_rows):
    """The columns of results.csv for these flattened rows: one ``power_<RAIL>_w`` per rail seen, in order."""
    rails = []
    for flat in flat_rows:
        for key in _rail_columns(flat):
            if key not in rails:
                rails.append(key)
    return _with_rails(rails)


def _csv_value(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(round(value, 6))
    return str(value)


class ResultStore(object):
    """The rows of one sweep directory: :meth:`add` appends a row to the journal; :meth:`save` writes results.json
    and results.csv from it."""

    def __init__(self, out_dir, context=None):
        self.out_dir = out_dir
        self.context = dict(context or {})
        self.journal = RowJournal(os.path.join(out_dir, JOURNAL_FILE))
        self.count = 0  # rows in the journal (the store keeps no row and no key: memory stays flat)
        self.skipped = []
        self.notes = []
        self.restore = None
        self.status = "running"

    @property
    def json_path(self):
        return os.path.join(self.out_dir, RESULTS_JSON)

    @property
    def csv_path(self):
        return os.path.join(self.out_dir, RESULTS_CSV)

    def load_existing(self):
        """Take up the rows of a previous run of this directory (for --resume); returns how many there are.

        The journal holds every row that run finished; a results.json row missing from it (results.json of an
        edgeattn from before the journal) is appended to it, so that from here on the journal has them all."""
        previous = []
        if os.path.exists(self.json_path):
            data = validate_results(load_results(self.out_dir), self.json_path, ROW_FIELDS + RESUME_FIELDS)
            previous = data.get("rows", [])
            self.skipped = list(data.get("skipped", []))
            self.notes = list(data.get("notes", []))
        keys = set(row_key(row) for row in self.journal.rows(key=row_key, problem=resumable_row_problem))
        self.count = len(keys)
        for row in previous:
            if row_key(row) not in keys:
                self.add(row)
                keys.add(row_key(row))
        return self.count

    def done_keys(self, mode_id=None):
        """The keys (:func:`row_key`) of the measurements in the journal, of one mode or all, read from the journal
        (the sweep asks once per mode: nothing it keeps grows with the rows; :meth:`load_existing` has checked
        the rows of a resumed journal)."""
        return set(key for key in (row_key(row) for row in self.journal.rows())
                   if mode_id is None or key[1] == mode_id)

    def add(self, row):
        """Append ``row``, a measurement not in the journal yet, to it (on disk when this returns). The sweep adds
        each measurement once (a failed append leaves nothing and the row stays to be added again), and
        :meth:`load_existing` only the rows the journal lacks, so the journal never holds a measurement twice."""
        self.journal.append(row)
        self.count += 1

    def iter_rows(self):
        """The rows, read back from the journal one at a time, in the order they were measured (no set of keys is
        built: the journal holds each measurement once, see :meth:`add`)."""
        return self.journal.rows()

    @property
    def rows(self):
        """Every row, read from the journal (for callers that want them at once, after the sweep). A tuple: a row
        is added with :meth:`add`, and ``rows.append`` fails instead of changing a copy."""
        return tuple(self.iter_rows())

    def skip(self, entry):
        if entry not in self.skipped:
            self.skipped.append(entry)

    def save(self):
        """Write results.json and results.csv from the journal, atomically, one row at a time."""
        head = json.dumps({"schema": RESULTS_SCHEMA, "status": self.status, "sweep": self.context,
                           "skipped": self.skipped, "notes": self.notes, "restore": self.restore},
                          default=json_default)
        rails = []
        with atomic_write(self.json_path, "w") as handle:
            # one line, through json's C encoder (dumps without indent): the pure-Python encoder that indenting
            # needs costs ~0.2 s of CPU per thousand rows
            handle.write(head[:-1] + ', "rows": [')
            for index, row in enumerate(self.iter_rows()):
                handle.write((", " if index else "") + json.dumps(row, default=json_default))
                for key in _rail_columns(flatten_row(row, self.context)):
                    if key not in rails:
                        rails.append(key)
            handle.write("]}\n")
        columns = _with_rails(rails)
        with atomic_write(self.csv_path, "w") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(columns)
            for row in self.iter_rows():
                flat = flatten_row(row, self.context)
                writer.writerow([_csv_value(flat.get(column)) for column in columns])


def resumable_row_problem(row):
    """Why a row cannot be taken up by --resume (None when it can)."""
    return row_problem(row, ROW_FIELDS + RESUME_FIELDS)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value \
        and value not in (float("inf"), float("-inf"))


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _optional(check):
    return lambda value: value is None or check(value)


def _numbers_dict(value):
    return isinstance(value, dict) and all(v is None or _is_number(v) for v in value.values())


def _power(value):
    return isinstance(value, dict) and all(value.get(key) is None or _is_number(value[key])
                                           for key in ("total_w", "samples")) \
        and (value.get("rails_w") is None or _numbers_dict(value["rails_w"]))


#: What report relies on in each row: (field, required, check, what it must be). Optional fields are checked
#: when present; other fields are kept as they are.
ROW_FIELDS = (
    ("model", True, lambda v: isinstance(v, str) and v != "", "a non-empty string"),
    ("mode_id", True, _is_int, "an integer"),
    ("precision", True, lambda v: isinstance(v, str) and v != "", "a non-empty string"),
    ("repeat", True, lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    ("throughput_items_per_s", True, lambda v: _is_number(v) and v >= 0, "a number >= 0"),
    ("mode_name", False, _optional(lambda v: isinstance(v, str)), "a string"),
    ("threads", False, _optional(_is_int), "an integer or null"),
    ("mode_threads", False, _optional(_is_int), "an integer or null"),
    ("mode_budget_w", False, _optional(_is_number), "a number or null"),
    ("latency_ms", False, _optional(_numbers_dict), "an object of numbers or null"),
    ("power", False, _optional(_power), "a power record or null"),
    ("energy_per_item_j", False, _optional(_is_number), "a number or null"),
    ("items_per_s_per_w", False, _optional(_is_number), "a number or null"),
    ("throttled", False, _optional(lambda v: isinstance(v, bool)), "true, false or null"),
)
#: What --resume needs on top (the identity of a measurement, :func:`row_key`).
RESUME_FIELDS = (
    ("model_key", True, lambda v: isinstance(v, str) and v != "", "a non-empty string"),
    ("precision_requested", True, lambda v: isinstance(v, str) and v != "", "a non-empty string"),
)


def row_problem(row, fields=ROW_FIELDS):
    """Why a result row cannot be used (None when it can): the first field that is missing or of the wrong kind."""
    if not isinstance(row, dict):
        return "is a JSON {}, not an object".format(type(row).__name__)
    for field, required, check, what in fields:
        if field not in row:
            if required:
                return "has no {!r}".format(field)
            continue
        if not check(row[field]):
            return "{!r} must be {}, got {!r}".format(field, what, row[field])
    return None


def validate_results(data, path, fields=ROW_FIELDS):
    """Check what a results file holds before anything uses it; EdgeAttnError naming the first bad row."""
    rows = data.get("rows")
    if not isinstance(rows, list):
        raise EdgeAttnError("{}: 'rows' must be a list, got {!r}".format(path, type(rows).__name__))
    for index, row in enumerate(rows, 1):
        problem = row_problem(row, fields)
        if problem:
            label = ""
            if isinstance(row, dict):
                label = " (model {!r}, mode {!r}, repeat {!r})".format(row.get("model"), row.get("mode_id"),
                                                                      row.get("repeat"))
            raise EdgeAttnError("{}: result row {}{} {}".format(path, index, label, problem))
    for key in ("skipped", "notes"):
        if not isinstance(data.get(key, []), list):
            raise EdgeAttnError("{}: {!r} must be a list".format(path, key))
    for index, entry in enumerate(data.get("skipped") or [], 1):
        if not (isinstance(entry, dict) and _is_int(entry.get("mode_id")) and isinstance(entry.get("reason"), str)):
            raise EdgeAttnError("{}: skipped entry {} must have an integer 'mode_id' and a 'reason'".format(
                path, index))
    if not isinstance(data.get("sweep") or {}, dict):
        raise EdgeAttnError("{}: 'sweep' must be an object".format(path))
    return data


def load_results(out_dir):
    """Read ``out_dir/results.json``; EdgeAttnError when missing, not a sweep result, or holding a malformed row
    (the message names the row)."""
    path = out_dir if out_dir.endswith(".json") else os.path.join(out_dir, RESULTS_JSON)
    if not os.path.isdir(out_dir):
        filekind.require(out_dir, ("sweep-results",), "a sweep directory or its results.json")
    if not os.path.isfile(path):
        if os.path.lexists(out_dir) and not os.path.isdir(out_dir) and not out_dir.endswith(".json"):
            raise EdgeAttnError("{} is not a sweep directory".format(out_dir))
        raise EdgeAttnError("no sweep results at {} (run `edgeattn sweep ... -o DIR` first)".format(path))
    return validate_results(read_json(path, "an edgeattn sweep result", schema=RESULTS_SCHEMA), path)
