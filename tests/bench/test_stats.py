"""Latency statistics and the timed loop, checked against independent definitions."""
import math
import statistics

import numpy as np
import pytest

from edgeattn.bench.stats import STAT_KEYS, latency_stats, throughput
from edgeattn.bench import timing
from edgeattn.bench.timing import MIN_ITERATIONS, check_run_length, run_timed


def _linear_percentile(values, q):
    """The textbook linear-interpolation percentile (Hyndman & Fan type 7), written out."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = int(math.floor(position))
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@pytest.mark.parametrize("seed,count", [(0, 1), (1, 2), (2, 7), (3, 100), (4, 1001)])
def test_stats_match_reference_definitions(seed, count):
    rng = np.random.default_rng(seed)
    samples = list(rng.lognormal(mean=1.0, sigma=0.3, size=count))
    stats = latency_stats(samples)
    assert list(stats) == list(STAT_KEYS)
    assert stats["mean"] == pytest.approx(statistics.fmean(samples) if hasattr(statistics, "fmean")
                                          else sum(samples) / len(samples), rel=1e-12)
    assert stats["min"] == min(samples) and stats["max"] == max(samples)
    for key, q in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99)):
        assert stats[key] == pytest.approx(_linear_percentile(samples, q), rel=1e-12)
        assert stats[key] == pytest.approx(float(np.percentile(samples, q)), rel=1e-12)
    assert stats["std"] == pytest.approx(statistics.pstdev(samples), rel=1e-9, abs=1e-12)
    assert stats["cov"] == pytest.approx(statistics.pstdev(samples) / (sum(samples) / count), rel=1e-9, abs=1e-12)


def test_stats_known_values():
    stats = latency_stats([1.0, 2.0, 3.0, 4.0])
    assert stats["p50"] == 2.5 and stats["mean"] == 2.5
    assert stats["std"] == pytest.approx(math.sqrt(1.25))
    assert stats["cov"] == pytest.approx(math.sqrt(1.25) / 2.5)
    assert latency_stats([5.0])["cov"] == 0.0


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf")]])
def test_stats_reject_bad_samples(bad):
    with pytest.raises(ValueError):
        latency_stats(bad)


def test_throughput():
    assert throughput(300, 1.5) == 200.0
    assert throughput(10, 0.0) == 0.0


def test_run_length_rules():
    assert check_run_length(None, None) == (3.0, None)
    assert check_run_length(2, None) == (2.0, None)
    assert check_run_length(None, 5) == (None, 5)
    for duration, iterations in ((1.0, 5), (0.0, None), (-1.0, None), (None, 0), (None, 2.5)):
        with pytest.raises(ValueError):
            check_run_length(duration, iterations)


def test_timed_loop_iterations_mode_records_every_iteration():
    calls = []
    reports = []

    def step():
        calls.append(1)
        return 0.5 * len(calls)

    run = run_timed(step, warmup_s=0.0, iterations=25, progress=lambda f, m: reports.append((f, m)))
    assert len(run.samples_ms) == 25 and len(calls) == 25
    assert run.device_ms == [0.5 * i for i in range(1, 26)]
    assert all(s >= 0 for s in run.samples_ms)
    assert run.warmup_iterations == 0
    assert run.start_unix <= run.end_unix and run.elapsed_s >= sum(run.samples_ms) / 1000.0
    assert reports[0][0] == 0.0 and reports[-1][0] == 1.0


def test_timed_loop_duration_mode_has_minimum_iterations_and_warmup():
    calls = []
    run = run_timed(lambda: calls.append(1), warmup_s=0.01, duration_s=0.001)
    assert run.warmup_iterations >= 1
    assert len(run.samples_ms) >= MIN_ITERATIONS
    assert run.device_ms is None
    assert len(calls) == run.warmup_iterations + len(run.samples_ms)


class _SteppedClock(object):
    """The loop's clocks, advanced only by the step: every step takes exactly ``step_s`` (a power of two, so the
    sums are exact). Stands in for the ``time`` module of edgeattn.bench.timing: no test sleeps on a wall clock."""

    def __init__(self, step_s):
        self.now = 0.0
        self.step_s = step_s
        self.calls = 0

    def perf_counter(self):
        return self.now

    def time(self):
        return 1000.0 + self.now

    def step(self):
        self.now += self.step_s
        self.calls += 1
        return float(self.calls)  # "device time": the call's number, to tell which calls were recorded


def test_warmup_lasts_its_seconds_and_none_of_its_iterations_are_recorded(monkeypatch):
    """1 s of warm-up at 0.125 s per step is 8 calls; the 2 s timed phase is the next 16 calls, each 125 ms."""
    clock = _SteppedClock(0.125)
    monkeypatch.setattr(timing, "time", clock)
    run = run_timed(clock.step, warmup_s=1.0, duration_s=2.0)
    assert run.warmup_iterations == 8 and run.warmup_s == 1.0
    assert run.samples_ms == [125.0] * 16 and run.elapsed_s == 2.0
    assert run.device_ms == [float(n) for n in range(9, 25)]  # calls 1-8 were the warm-up
    assert (run.start_unix, run.end_unix) == (1001.0, 1003.0)
    assert clock.calls == run.warmup_iterations + len(run.samples_ms)


def test_duration_shorter_than_one_iteration_still_times_the_minimum(monkeypatch):
    """A 1 ms duration with 125 ms iterations: the duration is over after the first one, yet MIN_ITERATIONS run."""
    clock = _SteppedClock(0.125)
    monkeypatch.setattr(timing, "time", clock)
    run = run_timed(clock.step, warmup_s=0.0, duration_s=0.001)
    assert run.warmup_iterations == 0
    assert run.samples_ms == [125.0] * MIN_ITERATIONS and clock.calls == MIN_ITERATIONS
    assert run.elapsed_s == 0.125 * MIN_ITERATIONS
