"""Power and telemetry summaries over tegrastats/INA3221 samples: per rail mean/min/max, the total, GPU load and
frequency, temperatures, time span and energy. ``edgeattn power LOG`` and the sweep use the same functions.

Which rail is the total (rbonghi/jetson_stats ``jtop/core/power.py`` ``total_power``): ``VDD_IN`` or ``POM_5V_IN``
when present (module
input); otherwise the sum of the rails, labelled as such: on AGX Orin there is no input rail and the sum reads
less than a meter at the supply. Energy is integrated from the samples' own instantaneous values; tegrastats'
second rail value is its running average since start and is not used (rbonghi/jetson_stats issue #85).
"""
import io
import os

from .. import filekind
from ..errors import EdgeAttnError
from .tegrastats import parse_line

TOTAL_RAILS = ("VDD_IN", "POM_5V_IN")


def total_power_mw(rails_mw, total_rail=None):
    """(total mW, label) for one sample's rails; (None, None) without rails."""
    if not rails_mw:
        return None, None
    for name in ((total_rail,) if total_rail else ()) + TOTAL_RAILS:
        if name and name in rails_mw:
            return rails_mw[name], name
    names = sorted(rails_mw)
    return sum(rails_mw[n] for n in names), "sum of rails ({})".format("+".join(names))


def _stats(values, scale=1.0, digits=3):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"mean": round(sum(values) / len(values) * scale, digits), "min": round(min(values) * scale, digits),
            "max": round(max(values) * scale, digits), "samples": len(values)}


def _integrate_j(points):
    """Trapezoid integral of (time s, power W) points, J; None with fewer than two distinct times."""
    points = sorted(points)
    if len(points) < 2 or points[-1][0] <= points[0][0]:
        return None
    energy = 0.0
    for (t0, p0), (t1, p1) in zip(points, points[1:]):
        energy += (t1 - t0) * (p0 + p1) / 2.0
    return energy


def summarise_samples(timed_samples, unparsed=0, total_rail=None, time_source=None):
    """Summarise ``[(time or None, sample), ...]`` (tegrastats samples or INA3221 readings).

    Returns a JSON-serialisable dict: ``samples``, ``unparsed_lines``, ``time_span`` (None without times),
    ``rails_w`` {name: mean/min/max/samples}, ``total_w`` (with the ``rail`` it came from), ``energy_j``,
    ``gpu`` {util_pct, freq_mhz}, ``temperatures_c`` {sensor: mean/min/max}, ``cpu_load_pct``.
    """
    rails, totals, labels, points = {}, [], set(), []
    gpu_util, gpu_freq, emc_util, temps, cpu_load = [], [], [], {}, []
    times = [t for t, _ in timed_samples if t is not None]
    for stamp, sample in timed_samples:
        rails_mw = getattr(sample, "rails_mw", None) or {}
        for name, value in rails_mw.items():
            rails.setdefault(name, []).append(value)
        total, label = total_power_mw(rails_mw, total_rail)
        if total is not None:
            totals.append(total)
            labels.add(label)
            if stamp is not None:
                points.append((stamp, total / 1000.0))
        gpu_util.append(getattr(sample, "gpu_util_pct", None))
        gpu_freq.append(getattr(sample, "gpu_freq_mhz", None))
        engines = getattr(sample, "engines", None) or {}
        if "EMC" in engines:
            emc_util.append(engines["EMC"]["util_pct"])
        for name, value in (getattr(sample, "temperatures", None) or {}).items():
            temps.setdefault(name, []).append(value)
        cores = [c["load_pct"] for c in (getattr(sample, "cpus", None) or []) if c]
        if cores:
            cpu_load.append(sum(cores) / float(len(cores)))
    span = None
    if times:
        span = {"start_unix": min(times), "end_unix": max(times), "duration_s": round(max(times) - min(times), 3),
                "source": time_source}
    total_label = None
    if labels:
        total_label = labels.pop() if len(labels) == 1 else "mixed: " + ", ".join(sorted(labels))
    total_stats = _stats(totals, 0.001)
    if total_stats is not None:
        total_stats["rail"] = total_label
    energy = _integrate_j(points)
    return {
        "samples": len(timed_samples),
        "unparsed_lines": unparsed,
        "time_span": span,
        "rails_w": {name: _stats(values, 0.001) for name, values in sorted(rails.items())},
        "total_w": total_stats,
        "energy_j": round(energy, 3) if energy is not None else None,
        "gpu": {"util_pct": _stats(gpu_util), "freq_mhz": _stats(gpu_freq)},
        "emc_util_pct": _stats(emc_util),
        "temperatures_c": {name: _stats(values) for name, values in sorted(temps.items())},
        "cpu_load_pct": _stats(cpu_load),
    }


def summarise_log_lines(lines):
    """Summarise tegrastats log lines (a user's file): unparseable lines are counted, never fatal."""
    timed, unparsed, bad_examples = [], 0, []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            sample = parse_line(line)
        except Exception:  # never fatal: count it (a parser bug shows up as unparsed lines, not a crash)
            sample = None
        if sample is None:
            unparsed += 1
            if len(bad_examples) < 3:
                bad_examples.append({"line": number, "text": line.rstrip("\n")[:120]})
            continue
        timed.append((sample.time_unix, sample))
    stamped = sum(1 for t, _ in timed if t is not None)
    if stamped != len(timed):
        # Mixed or missing timestamps (JetPack 4 prints none): no time axis to integrate over.
        timed = [(None, s) for _, s in timed]
    summary = summarise_samples(timed, unparsed=unparsed, time_source="timestamps" if stamped else None)
    summary["unparsed_examples"] = bad_examples
    return summary


def summarise_log(path):
    """Summarise a tegrastats log file. Bad lines are only counted, but a file without a single tegrastats
    sample (empty, binary, another kind of file) is an EdgeAttnError, as is one that cannot be read."""
    filekind.require(path, ("tegrastats-log",), "a tegrastats log")
    if os.path.isdir(path):
        raise EdgeAttnError("{} is a directory, not a tegrastats log".format(path))
    if not os.path.isfile(path):
        raise EdgeAttnError("no such tegrastats log: {}".format(path))
    try:
        with io.open(path, "r", encoding="utf-8", errors="replace") as handle:
            summary = summarise_log_lines(handle)
    except OSError as error:
        raise EdgeAttnError("cannot read {}: {}".format(path, error.strerror or error))
    if not summary["samples"]:
        first = summary["unparsed_examples"][0] if summary["unparsed_examples"] else None
        raise EdgeAttnError("{} holds no tegrastats sample ({}{})".format(
            path, "empty" if not summary["unparsed_lines"] else "{} line(s), none parsable".format(
                summary["unparsed_lines"]),
            "; line {}: {!r}".format(first["line"], first["text"][:60]) if first else ""))
    summary["path"] = os.path.abspath(path)
    return summary


# --------------------------------------------------------------------------------------------------------------
# Attribution to a measurement window
# --------------------------------------------------------------------------------------------------------------
def samples_in_window(timed_samples, start, end, interval_s):
    """Samples that describe time inside [start, end].

    A sample received at ``t`` covers (t - interval, t]; it belongs to the window when the middle of that span
    lies inside. When the window is shorter than one interval and holds no middle, the sample covering the
    window's centre is returned and ``approximate`` is True. Returns (samples, approximate).
    """
    half = interval_s / 2.0
    inside = [(t, s) for t, s in timed_samples if start <= t - half <= end]
    if inside or not timed_samples:
        return inside, False
    centre = (start + end) / 2.0
    covering = [(t, s) for t, s in timed_samples if t - interval_s <= centre <= t + interval_s]
    if not covering:
        return [], False
    best = min(covering, key=lambda pair: abs(pair[0] - half - centre))
    return [best], True


def window_summary(timed_samples, start, end, interval_s, source, total_rail=None):
    """Power and telemetry over one measurement window, as stored in a sweep result row."""
    chosen, approximate = samples_in_window(timed_samples, start, end, interval_s)
    rails, totals, label = {}, [], None
    gpu_util, gpu_freq, gpu_temp, hottest = [], [], [], (None, None)
    for _, sample in chosen:
        rails_mw = sample.rails_mw or {}
        for name, value in rails_mw.items():
            rails.setdefault(name, []).append(value)
        total, this_label = total_power_mw(rails_mw, total_rail)
        if total is not None:
            totals.append(total)
            label = this_label
        gpu_util.append(sample.gpu_util_pct)
        gpu_freq.append(sample.gpu_freq_mhz)
        gpu_temp.append(sample.gpu_temp_c)
        value, sensor = sample.hottest_c
        if value is not None and (hottest[0] is None or value > hottest[0]):
            hottest = (value, sensor)

    def mean(values, scale=1.0):
        values = [v for v in values if v is not None]
        return round(sum(values) / len(values) * scale, 4) if values else None

    def extreme(values, fn):
        values = [v for v in values if v is not None]
        return fn(values) if values else None

    return {
        "source": source,
        "samples": len(chosen),
        "approximate": approximate,
        "interval_s": interval_s,
        "rails_w": {name: mean(values, 0.001) for name, values in sorted(rails.items())},
        "total_w": mean(totals, 0.001),
        "total_rail": label,
        "gpu_util_mean_pct": mean(gpu_util),
        "gpu_freq_mean_mhz": mean(gpu_freq),
        "gpu_freq_min_mhz": extreme(gpu_freq, min),
        "gpu_freq_max_mhz": extreme(gpu_freq, max),
        "gpu_temp_max_c": extreme(gpu_temp, max),
        "temp_max_c": hottest[0],
        "temp_max_sensor": hottest[1],
    }
