"""tegrastats: one parser for every format from JetPack 4 to 7, and a sampler that runs tegrastats itself.

Formats (real captures in tests/fixtures/jetson/tegrastats; rbonghi/jetson_stats ``jtop/core/tegra_parse.py``):
optional ``MM-DD-YYYY HH:MM:SS`` prefix (JetPack 5+); ``RAM``/``SWAP``/``IRAM``
blocks; ``CPU [X%@F,off,...]``; engines ``NAME X%``, ``X%@F``, ``X%@[F,F]``, ``@F``, ``@[F]``, a bare number
(``APE 174``) or ``off``; temperatures ``name@T C`` in any case, ``-256C`` for absent sensors, JetPack 7's
``cpu@52.9C/52.9C``; rails ``NAME cur/avg`` (JetPack 4, mW without unit), ``curmW/avgmW`` and JetPack 7.2's three
values ``a/b/c`` (only the first two have a documented meaning: current and running average), ``NC`` channels.
Non-root runs drop some fields (frequencies, ``APE``); the parser takes what is there.

The sampler spawns ``tegrastats --interval N`` and reads its stdout; it never runs ``tegrastats --stop``, which
stops *every* tegrastats on the machine, including jtop's: it terminates its own process.
A long-running reader cannot go through ``run_command`` (which waits for the command to finish), so this is the
one place that starts a process directly: argument list, stdin closed, and always terminated in ``stop()``.
"""
import datetime
import re
import subprocess
import threading
import time

from ..errors import EdgeAttnError
from . import find_tool
from .samples import BufferedSampler, SampleBuffer

#: INA3221 averages refresh every ~430 ms (NVIDIA's ``nvpower.sh``
#: configures 512-sample averages at boot); sampling faster only repeats values.
MIN_INTERVAL_MS = 500

# Numbers are ASCII digits of bounded length: a 400-digit rail would be an infinite float, a 5000-digit load an
# int() that Python 3.11 refuses; such a token is counted as unknown instead.
_INT = r"\d{1,12}"
_FLOAT = r"\d{1,12}(?:\.\d{1,12})?"
_DATE_RE = re.compile(r"^\d{1,2}-\d{1,2}-\d{4}$", re.ASCII)
_TIME_RE = re.compile(r"^\d{1,2}:\d{2}:\d{2}$", re.ASCII)
_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_TEMP_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)@(-?" + _FLOAT + r")C(?:/(-?" + _FLOAT + r")C)?$", re.ASCII)
_NUM = r"(" + _FLOAT + r")(mW|W)?"
_RAIL_RE = re.compile(r"^" + _NUM + r"/" + _NUM + r"((?:/" + _FLOAT + r"(?:mW|W)?)*)$", re.ASCII)
_EXTRA_RE = re.compile(r"/" + _NUM, re.ASCII)
_ENGINE_RE = re.compile(r"^(?:(" + _INT + r")%)?(?:@(" + _INT + r"|\[" + _INT + r"(?:," + _INT + r")*\]))?$",
                        re.ASCII)
_BARE_INT_RE = re.compile(r"^" + _INT + r"$", re.ASCII)
_MEM_RE = re.compile(r"^(" + _INT + r")/(" + _INT + r")([kMG])B", re.ASCII)
_CPU_CORE_RE = re.compile(r"^(" + _INT + r")%(?:@(" + _INT + r"))?$", re.ASCII)

#: Sensors that are not temperatures of the chip: tegrastats prints PMIC@100C as a constant (every capture).
NON_CHIP_SENSORS = ("pmic",)
#: tegrastats prints -256C for a sensor that is absent (AGX Orin, JetPack 5; tests/fixtures/jetson/tegrastats).
ABSENT_TEMPERATURE_C = -256.0


class TegraSample(object):
    """One parsed tegrastats line. Missing fields are None / empty; rails in mW, frequencies in MHz."""

    __slots__ = ("timestamp", "ram_used_mb", "ram_total_mb", "swap_used_mb", "swap_total_mb", "cpus", "engines",
                 "temperatures", "absent_sensors", "rails", "unknown_tokens")

    def __init__(self):
        self.timestamp = None
        self.ram_used_mb = None
        self.ram_total_mb = None
        self.swap_used_mb = None
        self.swap_total_mb = None
        self.cpus = []            # [{"load_pct": int, "freq_mhz": int|None}] or None for an "off" core
        self.engines = {}         # name without _FREQ -> {"util_pct", "freq_mhz", "freqs_mhz", "off"}
        self.temperatures = {}    # name as printed -> °C (absent -256C sensors excluded)
        self.absent_sensors = []
        self.rails = {}           # name -> {"cur_mw", "avg_mw", "extra_mw": [...]}; NC channels excluded
        self.unknown_tokens = 0

    # -- derived values ------------------------------------------------------------------------------------------
    @property
    def time_unix(self):
        """The printed timestamp as Unix time (local time zone), or None (JetPack 4 prints none)."""
        if not self.timestamp:
            return None
        try:
            parsed = datetime.datetime.strptime(self.timestamp, "%m-%d-%Y %H:%M:%S")
            return time.mktime(parsed.timetuple())
        except (ValueError, OverflowError):
            return None

    @property
    def rails_mw(self):
        """Instantaneous (first) value of each rail, mW."""
        return {name: rail["cur_mw"] for name, rail in self.rails.items()}

    @property
    def gpu(self):
        return self.engines.get("GR3D")

    @property
    def gpu_util_pct(self):
        gpu = self.gpu
        return gpu["util_pct"] if gpu else None

    @property
    def gpu_freq_mhz(self):
        gpu = self.gpu
        return gpu["freq_mhz"] if gpu else None

    def temperature(self, name):
        """Temperature of sensor ``name`` (case-insensitive), None when absent."""
        wanted = name.lower()
        for key, value in self.temperatures.items():
            if key.lower() == wanted:
                return value
        return None

    @property
    def gpu_temp_c(self):
        """GPU temperature, or the junction temperature ``tj`` when the GPU sensor is absent (AGX Orin JP5)."""
        value = self.temperature("gpu")
        return value if value is not None else self.temperature("tj")

    @property
    def hottest_c(self):
        """Hottest chip sensor (PMIC's constant 100C excluded), with its name; (None, None) without sensors."""
        best = (None, None)
        for key, value in self.temperatures.items():
            if key.lower() in NON_CHIP_SENSORS:
                continue
            if best[0] is None or value > best[0]:
                best = (value, key)
        return best

    def field_count(self):
        return (len(self.rails) + len(self.temperatures) + len(self.absent_sensors) + len(self.engines)
                + len(self.cpus) + (self.ram_total_mb is not None))

    def to_dict(self):
        return {
            "timestamp": self.timestamp, "ram_used_mb": self.ram_used_mb, "ram_total_mb": self.ram_total_mb,
            "swap_used_mb": self.swap_used_mb, "swap_total_mb": self.swap_total_mb, "cpus": self.cpus,
            "engines": self.engines, "temperatures": self.temperatures, "absent_sensors": self.absent_sensors,
            "rails": self.rails, "unknown_tokens": self.unknown_tokens,
        }


def _to_mw(value, unit):
    number = float(value)
    return number * 1000.0 if unit == "W" else number


def _memory_mb(token):
    match = _MEM_RE.match(token)
    if not match:
        return None, None
    scale = {"k": 1.0 / 1024.0, "M": 1.0, "G": 1024.0}[match.group(3)]
    return float(match.group(1)) * scale, float(match.group(2)) * scale


def _parse_cpus(text, sample):
    for part in text.strip("[]").split(","):
        part = part.strip()
        if part == "off":
            sample.cpus.append(None)
            continue
        match = _CPU_CORE_RE.match(part)
        if match:
            sample.cpus.append({"load_pct": int(match.group(1)),
                                "freq_mhz": int(match.group(2)) if match.group(2) else None})
        elif part:
            sample.unknown_tokens += 1


def _engine_value(token):
    """``X%``, ``X%@F``, ``X%@[F,F]``, ``@F``, ``@[F]`` or a bare number -> dict; None when not an engine value."""
    if token == "off":
        return {"util_pct": None, "freq_mhz": None, "freqs_mhz": None, "off": True}
    if _BARE_INT_RE.match(token):
        return {"util_pct": None, "freq_mhz": int(token), "freqs_mhz": None, "off": False}
    match = _ENGINE_RE.match(token)
    if not match or (match.group(1) is None and match.group(2) is None):
        return None
    util = int(match.group(1)) if match.group(1) is not None else None
    freq, freqs = None, None
    if match.group(2) is not None:
        if match.group(2).startswith("["):
            freqs = [int(f) for f in match.group(2).strip("[]").split(",")]
            freq = max(freqs)
        else:
            freq = int(match.group(2))
    return {"util_pct": util, "freq_mhz": freq, "freqs_mhz": freqs, "off": False}


def parse_line(line):
    """Parse one tegrastats line; None when nothing in it is recognisable. Never raises on odd text."""
    if not isinstance(line, str):
        return None
    tokens = line.split()
    sample = TegraSample()
    i = 0
    if len(tokens) >= 2 and _DATE_RE.match(tokens[0]) and _TIME_RE.match(tokens[1]):
        sample.timestamp = tokens[0] + " " + tokens[1]
        i = 2
    n = len(tokens)
    while i < n:
        token = tokens[i]
        following = tokens[i + 1] if i + 1 < n else ""
        if token in ("RAM", "SWAP") and _MEM_RE.match(following):
            used, total = _memory_mb(following)
            if token == "RAM":
                sample.ram_used_mb, sample.ram_total_mb = used, total
            else:
                sample.swap_used_mb, sample.swap_total_mb = used, total
            i += 2
            # "(lfb 634x4MB)" / "(cached 0MB)"
            if i < n and tokens[i].startswith("(") and not tokens[i].endswith(")"):
                i += 2
            continue
        if token == "IRAM" and _MEM_RE.match(following):
            i += 2
            if i < n and tokens[i].endswith(")") and not tokens[i].startswith("("):
                i += 1  # "0/252kB(lfb" "252kB)"
            continue
        if token == "MTS" and following == "fg":
            i += 5 if i + 4 < n else n - i
            continue
        if token == "CPU" and following.startswith("["):
            text = following
            i += 2
            while not text.endswith("]") and i < n:
                text += tokens[i]
                i += 1
            _parse_cpus(text, sample)
            continue
        match = _TEMP_RE.match(token)
        if match:
            value = float(match.group(2))
            if value <= ABSENT_TEMPERATURE_C + 0.5:
                sample.absent_sensors.append(match.group(1))
            else:
                sample.temperatures[match.group(1)] = value
            i += 1
            continue
        if _NAME_RE.match(token) and following:
            rail = _RAIL_RE.match(following)
            if rail:
                if token != "NC":
                    extra = [_to_mw(v, u) for v, u in _EXTRA_RE.findall(rail.group(5) or "")]
                    sample.rails[token] = {"cur_mw": _to_mw(rail.group(1), rail.group(2)),
                                           "avg_mw": _to_mw(rail.group(3), rail.group(4)), "extra_mw": extra}
                i += 2
                continue
            engine = _engine_value(following)
            if engine is not None:
                name = token[:-5] if token.endswith("_FREQ") else token
                sample.engines[name] = engine
                i += 2
                continue
        sample.unknown_tokens += 1
        i += 1
    if sample.field_count() == 0:
        return None
    return sample


def parse_lines(lines):
    """Parse many lines; returns (samples, unparsed_count, blank_count)."""
    samples, unparsed, blank = [], 0, 0
    for line in lines:
        if not line.strip():
            blank += 1
            continue
        sample = parse_line(line)
        if sample is None:
            unparsed += 1
        else:
            samples.append(sample)
    return samples, unparsed, blank


# --------------------------------------------------------------------------------------------------------------
# Running tegrastats
# --------------------------------------------------------------------------------------------------------------
def tegrastats_path():
    return find_tool("tegrastats")


def build_args(interval_ms=1000, logfile=None, tool=None):
    """Argument list for ``tegrastats --interval N [--logfile F]``; the interval must be >= 500 ms."""
    interval_ms = int(interval_ms)
    if interval_ms < MIN_INTERVAL_MS:
        raise EdgeAttnError("tegrastats interval {} ms is below {} ms: the INA3221 monitors refresh every ~430 ms, "
                            "faster sampling only repeats values".format(interval_ms, MIN_INTERVAL_MS))
    args = [tool or tegrastats_path() or "tegrastats", "--interval", str(interval_ms)]
    if logfile:
        args += ["--logfile", str(logfile)]
    return args


def stop_args(tool=None):
    """``tegrastats --stop``: stops EVERY running tegrastats, including other users' and jtop's. edgeattn never
    runs it; it is here for users who started a background ``--logfile`` run themselves."""
    return [tool or tegrastats_path() or "tegrastats", "--stop"]


class TegrastatsSampler(BufferedSampler):
    """Runs ``tegrastats --interval N`` and keeps ``(receive_time, TegraSample)`` pairs.

    Samples are timed when their line arrives (JetPack 4 prints no timestamp, later ones only to the second);
    a line describes the interval that just ended. Use as a context manager or call ``start``/``stop``.
    """

    source = "tegrastats"

    def __init__(self, interval_ms=500, tool=None, clock=time.time):
        self.args = build_args(interval_ms, tool=tool or tegrastats_path())
        if not tool and tegrastats_path() is None:
            raise EdgeAttnError("tegrastats is not installed (looked on PATH, /usr/sbin, /usr/bin)")
        self.interval_s = int(interval_ms) / 1000.0
        self._clock = clock
        self._buffer = SampleBuffer()
        self._process = None
        self._thread = None

    def start(self):
        self._process = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, universal_newlines=True, bufsize=1)
        self._thread = threading.Thread(target=self._read, name="tegrastats-reader", daemon=True)
        self._thread.start()
        return self

    def _read(self):
        stream = self._process.stdout
        try:
            for line in stream:
                received = self._clock()
                try:
                    sample = parse_line(line)
                except Exception:  # a parser bug must not kill the reader: count the line as unparsed
                    sample = None
                if sample is not None or line.strip():  # a blank line is no reading
                    self._buffer.add(received, sample)
        except (OSError, ValueError):
            pass

    @property
    def running(self):
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self):
        return self._process.pid if self._process is not None else None

    @property
    def returncode(self):
        """tegrastats' exit status once it has exited on its own (None while it runs, and after :meth:`stop`)."""
        return self._process.poll() if self._process is not None else None

    def stop(self):
        """Terminate our tegrastats (never others') and wait for it; safe to call twice."""
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=5)
        finally:
            # The reader sees end-of-file once the process is gone; close the pipe only after it finished.
            if self._thread is not None:
                self._thread.join(timeout=5)
            if process.stdout is not None:
                try:
                    process.stdout.close()
                except OSError:
                    pass
