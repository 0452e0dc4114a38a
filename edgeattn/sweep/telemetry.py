"""Telemetry during a sweep: which samplers run, settling after a mode switch, throttling flags.

Settling: NVIDIA gives no settling time; clock writes take about a second (NVIDIA-AI-IOT/jetson_benchmarks sleeps
1 s after setting clocks) and thermal throttling needs tens of seconds of load to show. So after a switch, wait until
the GPU temperature and
GPU clock have stayed within a tolerance over a short sliding window, or until the time cap. Without telemetry
(host CPU, no tegrastats) the sweep waits the full cap.

Throttling: a measurement is flagged when the hottest chip sensor reached the temperature limit,
or when the GPU clock, while busy, fell below 90 % of the reference (the locked clock from ``jetson_clocks
--show`` when clocks are locked, else the highest clock seen in the same window).
"""
import collections
import time

from ..jetson import ina3221, tegrastats
from ..jetson.power import samples_in_window, window_summary

BUSY_UTIL_PCT = 50
#: how long a sweep waits for its samplers' first samples before measuring anyway (one interval is the norm)
FIRST_SAMPLE_TIMEOUT_S = 5.0
CLOCK_DROP_FRACTION = 0.9


def _stopped(sampler):
    """A sampler whose reader has ended delivers nothing more: not worth waiting for."""
    return hasattr(sampler, "running") and not sampler.running


def _poll_s(sampler):
    return min(0.05, sampler.interval_s / 4.0)


#: a sampler silent for this many intervals (and at least SILENT_MIN_S) has stalled: a loaded machine delays a line
#: by an interval or two, not by ten
SILENT_INTERVALS = 10
SILENT_MIN_S = 2.0


def _delivery_problem(sampler, now, started):
    """Why ``sampler`` stopped delivering samples before the sweep ended (None when it did not); ``started``: when
    the samplers were started."""
    samples = sampler.samples()
    last = samples[-1][0] if samples else None
    since = "since {}".format(time.strftime("%H:%M:%S", time.localtime(last))) if last else "from the start"
    if _stopped(sampler):
        return "{} exited during the sweep: no power samples {}".format(sampler.source, since)
    quiet_since = last if last is not None else started
    if quiet_since is not None and now - quiet_since > max(SILENT_INTERVALS * sampler.interval_s, SILENT_MIN_S):
        return "{} stopped printing samples {:.0f} s before the end of the sweep: no power samples {}".format(
            sampler.source, now - quiet_since, since)
    return None


def _clock_time(stamp):
    return time.strftime("%H:%M:%S", time.localtime(stamp)) + ".{:d}".format(int(stamp * 10) % 10)


def no_power_reason(sampler, start, end):
    """Why the measurement window [``start``, ``end``] got no power from ``sampler``: what the sampler did, in words a
    user reading results.csv after an unattended sweep can act on."""
    samples = sampler.samples()
    last = samples[-1][0] if samples else None
    after = "after {}".format(_clock_time(last)) if last is not None else "before the window ended"
    if _stopped(sampler):
        status = getattr(sampler, "returncode", None)
        return "{} exited{} and printed no line {}".format(
            sampler.source, " (exit status {})".format(status) if status is not None else "", after)
    if last is None or last < end:
        return "{} printed no line {} (it still runs: stalled)".format(sampler.source, after)
    return "no {} sample covers this {:.3g} s window (interval {:g} s)".format(sampler.source, end - start,
                                                                               sampler.interval_s)


class Telemetry(object):
    """The samplers of a sweep: ``power`` (tegrastats or INA3221, or None) and ``board`` (tegrastats, or None:
    GPU load/clock and temperatures). Both may be the same tegrastats sampler."""

    def __init__(self, power=None, board=None, total_rail=None, notes=None):
        self.power = power
        self.board = board
        self.total_rail = total_rail
        self.notes = list(notes or [])
        self.started_unix = None
        #: reason -> how many windows got no power for it (see :func:`no_power_reason`)
        self.gaps = collections.Counter()

    @property
    def power_source(self):
        return self.power.source if self.power is not None else "none"

    def start(self):
        self.started_unix = time.time()
        for sampler in self._unique():
            sampler.start()

    def stop(self, clock=time.time):
        """Stop the samplers; returns one line for each problem: a sampler that exited or went silent during the
        sweep (the rows measured since have no power from it), or one that could not be stopped."""
        errors = []
        for sampler in self._unique():
            problem = _delivery_problem(sampler, clock(), self.started_unix)
            if problem:
                errors.append(problem)
            try:
                sampler.stop()
            except Exception as error:  # stopping is part of restoring: keep going
                errors.append("{}: {}".format(sampler.source, error))
        return errors

    def _unique(self):
        seen = []
        for sampler in (self.power, self.board):
            if sampler is not None and all(sampler is not s for s in seen):
                seen.append(sampler)
        return seen

    def wait_for_first_samples(self, timeout_s=FIRST_SAMPLE_TIMEOUT_S, clock=time.time, sleep=time.sleep):
        """Block until every running sampler has delivered a sample (at most ``timeout_s``): a window measured
        before its sampler's first line has no power to attribute. tegrastats prints its first line one interval
        after it starts, later when the machine is busy; a stopped sampler is not waited for. Returns whether all
        delivered."""
        deadline = clock() + timeout_s
        for sampler in self._unique():
            while not sampler.samples():
                if _stopped(sampler) or clock() >= deadline:
                    return False
                sleep(_poll_s(sampler))
        return True

    def wait_for_samples_after(self, stamp, clock=time.time, sleep=time.sleep):
        """Block (at most ~2 intervals) until every sampler has a sample received after ``stamp`` plus half an
        interval, so the end of a measurement window is covered."""
        for sampler in self._unique():
            deadline = clock() + 2.5 * sampler.interval_s
            target = stamp + sampler.interval_s / 2.0
            while clock() < deadline:
                if sampler.samples(since=target) or _stopped(sampler):
                    break
                sleep(_poll_s(sampler))

    def forget_before(self, stamp):
        """Let every sampler drop its samples from before ``stamp`` (samplers without the method keep theirs)."""
        for sampler in self._unique():
            forget = getattr(sampler, "forget_before", None)
            if forget is not None:
                forget(stamp)

    def covers(self, stamp):
        """True when every sampler has delivered the sample that covers time ``stamp`` (or has stopped)."""
        for sampler in self._unique():
            if _stopped(sampler):
                continue
            if not sampler.samples(since=stamp + sampler.interval_s / 2.0):
                return False
        return True

    def window(self, start, end):
        """Power and telemetry for [start, end] (the bench result's window)."""
        summary = {"source": "none", "samples": 0, "approximate": False, "rails_w": {}, "total_w": None,
                   "total_rail": None}
        if self.power is not None:
            power = window_summary(self.power.samples(), start, end, self.power.interval_s, self.power.source,
                                   self.total_rail)
            summary = {key: power[key] for key in ("source", "samples", "approximate", "interval_s", "rails_w",
                                                   "total_w", "total_rail")}
            if summary["total_w"] is None:
                summary["reason"] = no_power_reason(self.power, start, end) if not summary["samples"] else \
                    "the {} samples of this window name no total-power rail".format(self.power.source)
                self.gaps[summary["reason"]] += 1
        telemetry = None
        busy_min = None
        if self.board is not None:
            board = window_summary(self.board.samples(), start, end, self.board.interval_s, self.board.source)
            telemetry = {key: board[key] for key in ("samples", "gpu_util_mean_pct", "gpu_freq_mean_mhz",
                                                     "gpu_freq_min_mhz", "gpu_freq_max_mhz", "gpu_temp_max_c",
                                                     "temp_max_c", "temp_max_sensor")}
            chosen, _ = samples_in_window(self.board.samples(), start, end, self.board.interval_s)
            busy = [s.gpu_freq_mhz for _, s in chosen
                    if s.gpu_freq_mhz is not None and (s.gpu_util_pct is None or s.gpu_util_pct >= BUSY_UTIL_PCT)]
            busy_min = min(busy) if busy else None
            telemetry["gpu_freq_busy_min_mhz"] = busy_min
        return summary, telemetry


def start_telemetry(root="/", power_source="auto", interval_ms=500, total_rail=None, echo=None):
    """Choose and start the samplers. ``power_source``: auto (INA3221 sysfs when found: 512-sample averages
    with their own timing, else tegrastats), tegrastats, ina3221 or none. tegrastats also runs for temperatures and
    clocks
    whenever it is installed."""
    notes = []
    board = None
    if tegrastats.tegrastats_path() is not None and power_source != "none":
        board = tegrastats.TegrastatsSampler(interval_ms=interval_ms)
    rails = ina3221.discover_rails(root) if power_source in ("auto", "ina3221") else []
    power = None
    if power_source == "ina3221" or (power_source == "auto" and rails):
        power = ina3221.Ina3221Sampler(rails, interval_s=max(interval_ms / 1000.0, ina3221.MIN_INTERVAL_S))
        notes.append("power from INA3221 sysfs rails: {}".format(", ".join(r.name for r in rails)))
    elif power_source in ("auto", "tegrastats"):
        if board is None:
            if power_source == "tegrastats":
                from ..errors import EdgeAttnError

                raise EdgeAttnError("--power-source tegrastats: tegrastats is not installed")
            notes.append("no power source (no INA3221 rails, no tegrastats): power columns stay empty")
        else:
            power = board
            notes.append("power from tegrastats rails (interval {} ms)".format(interval_ms))
    else:
        notes.append("power measurement disabled (--power-source none)")
    if board is None and power_source != "none":
        notes.append("no tegrastats: no GPU clock/temperature telemetry, settling waits the full cap")
    telemetry = Telemetry(power=power, board=board, total_rail=total_rail, notes=notes)
    try:
        telemetry.start()
    except OSError as error:
        # a sampler that cannot start must not stop the sweep: measure without it and say so
        telemetry.stop()
        notes.append("could not start power/telemetry sampling ({}): power columns stay empty".format(error))
        telemetry = Telemetry(total_rail=total_rail, notes=notes)
    if echo:
        for note in notes:
            echo(note)
    return telemetry


def settle(telemetry, cap_s, clock=time.time, sleep=time.sleep, temp_tol_c=1.0, freq_tol=0.05):
    """Wait until GPU temperature and clock are stable, or ``cap_s``. Returns {"settled", "waited_s", "reason"}."""
    start = clock()
    if cap_s <= 0:
        return {"settled": None, "waited_s": 0.0, "reason": "settling disabled (--settle-s 0)"}
    sampler = telemetry.board if telemetry is not None else None
    if sampler is None:
        sleep(cap_s)
        return {"settled": None, "waited_s": round(clock() - start, 3),
                "reason": "no temperature/clock telemetry: waited the full {:g} s".format(cap_s)}
    window_s = min(5.0, max(1.0, cap_s / 2.0))
    while True:
        now = clock()
        recent = [s for t, s in sampler.samples(since=max(start, now - window_s))]
        if len(recent) >= 2 and now - start >= window_s:
            temps = [s.gpu_temp_c for s in recent if s.gpu_temp_c is not None]
            freqs = [s.gpu_freq_mhz for s in recent if s.gpu_freq_mhz is not None]
            temp_ok = not temps or max(temps) - min(temps) <= temp_tol_c
            freq_ok = not freqs or max(freqs) - min(freqs) <= freq_tol * max(max(freqs), 1)
            if (temps or freqs) and temp_ok and freq_ok:
                return {"settled": True, "waited_s": round(now - start, 3),
                        "reason": "GPU temperature and clock stable over {:g} s".format(window_s)}
        if now - start >= cap_s:
            return {"settled": False, "waited_s": round(now - start, 3),
                    "reason": "not stable after the {:g} s cap".format(cap_s)}
        sleep(min(0.25, max(0.01, cap_s - (now - start))))


def throttling(telemetry_window, temp_limit_c, reference_gpu_mhz=None):
    """(flag, reasons) for one window. flag is None when there was no telemetry to judge by."""
    if not telemetry_window or not telemetry_window.get("samples"):
        return None, []
    reasons = []
    hottest = telemetry_window.get("temp_max_c")
    if hottest is not None and hottest >= temp_limit_c:
        reasons.append("temperature {:.1f} C on {} reached the {:g} C limit".format(
            hottest, telemetry_window.get("temp_max_sensor"), temp_limit_c))
    busy_min = telemetry_window.get("gpu_freq_busy_min_mhz")
    reference = reference_gpu_mhz or telemetry_window.get("gpu_freq_max_mhz")
    if busy_min is not None and reference and busy_min < CLOCK_DROP_FRACTION * reference:
        reasons.append("GPU clock dropped to {:g} MHz while busy (reference {:g} MHz)".format(busy_min, reference))
    return bool(reasons), reasons
