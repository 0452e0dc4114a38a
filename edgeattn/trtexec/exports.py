"""Parsers of trtexec's JSON exports (``samples/common/sampleReporting.cpp`` of NVIDIA/TensorRT).

trtexec writes these files by hand with ``std::ofstream``: one record per line (``[``, ``  { ... }``, ``, { ... }``,
``]``), numbers in C++ default format, names unescaped. A file is parsed as JSON first; if that fails (a layer name
with a quote, ``nan`` from a zero total, a run killed mid-write) each complete record line is parsed on its own.
"""
import json
import math
import re

from ..errors import EdgeAttnError

#: keys of one ``--exportTimes`` record, all versions (``endToEndMs`` only in 8.0/8.2)
TIME_KEYS = ("startEnqMs", "endEnqMs", "startH2dMs", "endH2dMs", "startComputeMs", "endComputeMs", "startD2hMs",
             "endD2hMs", "h2dMs", "computeMs", "d2hMs", "latencyMs")

_NON_JSON_NUMBER = re.compile(r"(?<![\w\"])(-?nan|-?inf)(?![\w\"])", re.IGNORECASE)
_PROFILE_RECORD = re.compile(
    r"\{ \"name\" : \"(?P<name>.*)\", \"timeMs\" : (?P<time>\S+), \"averageMs\" : (?P<avg>\S+)"
    r"(?:, \"medianMs\" : (?P<median>\S+))?, \"percentage\" : (?P<pct>\S+) \}\s*$")


def _number(text):
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _records_by_line(text):
    """Complete ``{ ... }`` records of a trtexec export, one per line (tolerates truncation and bad escapes)."""
    records = []
    for line in text.splitlines():
        body = line.strip()
        if body.startswith(","):
            body = body[1:].strip()
        if not (body.startswith("{") and body.endswith("}")):
            continue
        record = _json_or_none(body)
        if record is not None:
            records.append(record)
        else:
            match = _PROFILE_RECORD.search(body)
            if match:
                records.append({"name": match.group("name"), "timeMs": _number(match.group("time")),
                                "averageMs": _number(match.group("avg")),
                                "medianMs": _number(match.group("median")) if match.group("median") else None,
                                "percentage": _number(match.group("pct"))})
    return records


def _none_if_not_finite(text):
    value = float(text)
    return value if math.isfinite(value) else None


def _json_or_none(text, finite=False):
    """JSON as written, else with C++'s ``nan``/``inf`` tokens read as null; None if neither parses.

    ``finite``: Python's reader also takes ``NaN``, ``Infinity`` and numbers beyond float's range (``1e309``) as
    non-finite floats; read them as null too, for a document whose values go into a record as they are."""
    hooks = {"parse_constant": lambda _: None, "parse_float": _none_if_not_finite} if finite else {}
    for candidate in (text, _NON_JSON_NUMBER.sub("null", text)):
        try:
            return json.loads(candidate, **hooks)
        except (ValueError, RecursionError):  # RecursionError: arrays or objects nested thousands deep
            continue
    return None


def load_records(text, what):
    """The records of a trtexec JSON export (``what``: its option, for the message): the JSON list, or, when the
    file does not parse as a whole (truncated, C++ number tokens in odd places), its complete records line by line."""
    data = _json_or_none(text)
    if isinstance(data, list):
        return data
    records = _records_by_line(text)
    if not records:
        raise EdgeAttnError("trtexec {} export holds no records".format(what))
    return records


def parse_times(text):
    """Records of an ``--exportTimes`` file (list of dicts with :data:`TIME_KEYS`, plus ``endToEndMs`` on 8.x).

    Raises :class:`EdgeAttnError` if no record has the timing keys."""
    records = [r for r in load_records(text, "--exportTimes") if _is_time_record(r)]
    if not records:
        raise EdgeAttnError("trtexec --exportTimes export has no timing records")
    return records


#: no timing of a run is anywhere near 10^12 ms (31 years); a larger value is damage, and sums of such values
#: would overflow to infinity
_MAX_MS = 1e12


def _finite(value):
    # abs() first: math.isfinite of an int beyond float's range raises OverflowError (a count of 400 digits)
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < _MAX_MS


def _is_time_record(record):
    """A record of timings: ``computeMs`` and ``latencyMs`` present, and every timing key it has a finite number
    below 10^12 ms (a damaged record is dropped like a line cut by a killed run)."""
    return isinstance(record, dict) and "computeMs" in record and "latencyMs" in record and all(
        _finite(record[key]) for key in TIME_KEYS + ("endToEndMs",) if key in record)


def times_include_warmup(version):
    """Before 8.5 the trace holds the warm-up iterations too (``exportJSONTrace`` skips them from 8.5)."""
    return version is not None and tuple(version) < (8, 5)


def timed_iterations(records, version, warmup_ms):
    """The records of the timed phase: warm-ups dropped where the version exports them, with trtexec's own rule
    (an iteration whose ``startComputeMs`` is before the end of the warm-up)."""
    if times_include_warmup(version):
        return [r for r in records if r.get("startComputeMs", 0.0) >= warmup_ms]
    return list(records)


def trace_samples(records):
    """Per-iteration series from timed records: ``latency_ms`` (H2D + compute + D2H), ``compute_ms``,
    ``enqueue_ms``, and ``span_ms`` (first H2D start to last D2H end: trtexec's "Total Host Walltime")."""
    latency = [float(r["latencyMs"]) for r in records]
    compute = [float(r["computeMs"]) for r in records]
    enqueue = [float(r["endEnqMs"]) - float(r["startEnqMs"]) for r in records
               if "endEnqMs" in r and "startEnqMs" in r]
    span = 0.0
    if records and "startH2dMs" in records[0] and "endD2hMs" in records[-1]:
        span = float(records[-1]["endD2hMs"]) - float(records[0]["startH2dMs"])
    return {"latency_ms": latency, "compute_ms": compute, "enqueue_ms": enqueue, "span_ms": span}


def parse_profile(text):
    """An ``--exportProfile`` file: ``{"count": N, "layers": [{"name", "timeMs", "averageMs", "medianMs" (None
    before 8.4), "percentage"}]}``."""
    records = load_records(text, "--exportProfile")
    count = None
    layers = []
    for record in records:
        if not isinstance(record, dict):
            continue
        if "count" in record and "name" not in record:
            count = record["count"] if _finite(record["count"]) else None
        elif "name" in record:
            layers.append({"name": record["name"], "timeMs": _number_or_none(record.get("timeMs")),
                           "averageMs": _number_or_none(record.get("averageMs")),
                           "medianMs": _number_or_none(record.get("medianMs")),
                           "percentage": _number_or_none(record.get("percentage"))})
    return {"count": count, "layers": layers}


def _number_or_none(value):
    """A layer time as a number; None for a missing, non-numeric or non-finite one (``nan`` from a zero total)."""
    return value if _finite(value) else None


def parse_layer_info(text):
    """An ``--exportLayerInfo`` file (the JSON of TensorRT's ``IEngineInspector``, which trtexec writes as is):
    ``{"layers": [...], "bindings": [...], "detailed": bool}``.

    Layers are names (the default ``layer_names_only`` verbosity) or objects with ``Name``, ``LayerType``,
    ``Inputs``/``Outputs`` and, per layer kind, ``TacticName``, ``TacticValue``, ``Metadata``... (built with
    ``--profilingVerbosity=detailed``). The inspector writes one well-formed document, so a file that is not JSON
    (cut off, or another file) is refused rather than read line by line."""
    data = _json_or_none(text, finite=True)  # its dimensions, names and bindings are copied into the description
    if data is None:
        raise EdgeAttnError("not a complete JSON document (cut off, or not a trtexec --exportLayerInfo file)")
    if not isinstance(data, dict) or not isinstance(data.get("Layers"), list):
        raise EdgeAttnError("a JSON document without the \"Layers\" list of a trtexec --exportLayerInfo file")
    layers = data["Layers"]
    names = [layer for layer in layers if isinstance(layer, str)]
    objects = [layer for layer in layers if isinstance(layer, dict)]
    if len(names) + len(objects) != len(layers) or (names and objects):
        raise EdgeAttnError("its \"Layers\" list mixes names and objects or holds neither: not written by trtexec")
    if any(not isinstance(layer.get("Name"), str) for layer in objects):
        raise EdgeAttnError("a layer object without a \"Name\": not written by trtexec --exportLayerInfo")
    bindings = data.get("Bindings")
    return {"layers": layers, "bindings": list(bindings) if isinstance(bindings, list) else [],
            "detailed": bool(objects)}
