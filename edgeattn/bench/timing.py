"""The timed loop shared by the in-process backends (ONNX Runtime, TensorRT Python).

Every iteration's host latency is recorded (``time.perf_counter`` around the step); a step may also return its
own device time (CUDA events) which is kept separately. The loop does as little as possible per iteration - two
clock reads, one list append, one comparison - so its bookkeeping stays far below 1 % of a millisecond-scale
model (``benchmarks/bench_overhead.py`` measures this).
"""
import time

#: in duration mode at least this many timed iterations are run, however slow the model (trtexec does the same)
MIN_ITERATIONS = 10
_PROGRESS_INTERVAL_S = 0.5


class TimedRun(object):
    """What the loop recorded: host samples (ms), optional device samples (ms), wall-clock window, warm-up count."""

    __slots__ = ("samples_ms", "device_ms", "start_unix", "end_unix", "elapsed_s", "warmup_iterations",
                 "warmup_s")

    def __init__(self, samples_ms, device_ms, start_unix, end_unix, elapsed_s, warmup_iterations, warmup_s):
        self.samples_ms = samples_ms
        self.device_ms = device_ms
        self.start_unix = start_unix
        self.end_unix = end_unix
        self.elapsed_s = elapsed_s
        self.warmup_iterations = warmup_iterations
        self.warmup_s = warmup_s


def check_run_length(duration_s, iterations, default_duration_s=3.0):
    """Validate the run length; returns ``(duration_s, iterations)`` with exactly one of them set."""
    if duration_s is not None and iterations is not None:
        raise ValueError("give either a duration or an iteration count, not both")
    if iterations is not None:
        if int(iterations) != iterations or iterations < 1:
            raise ValueError("iterations must be a positive integer, got {!r}".format(iterations))
        return None, int(iterations)
    if duration_s is None:
        duration_s = default_duration_s
    if not duration_s > 0:
        raise ValueError("duration must be positive, got {!r}".format(duration_s))
    return float(duration_s), None


def run_timed(step, warmup_s=1.0, duration_s=None, iterations=None, progress=None):
    """Run ``step()`` for a warm-up period, then for ``duration_s`` seconds (at least :data:`MIN_ITERATIONS`
    iterations) or exactly ``iterations`` times, recording each iteration.

    ``step`` returns None or the iteration's device time in ms. ``progress(fraction, message)`` is called at most
    every 0.5 s and once at the end of each phase.
    """
    duration_s, iterations = check_run_length(duration_s, iterations)
    if warmup_s is None or warmup_s < 0:
        raise ValueError("warm-up must be >= 0 s, got {!r}".format(warmup_s))
    perf = time.perf_counter

    # Warm-up: at least one call when a warm-up is asked for (first-call allocations, lazy initialisation).
    warmup_count = 0
    if warmup_s > 0:
        if progress is not None:
            progress(0.0, "warm-up {:g} s".format(warmup_s))
        warmup_end = perf() + warmup_s
        while True:
            step()
            warmup_count += 1
            if perf() >= warmup_end:
                break

    samples = []
    device = []
    append = samples.append
    append_device = device.append
    if progress is not None:
        progress(0.0, "timing")
    start_unix = time.time()
    start = perf()
    next_report = start + _PROGRESS_INTERVAL_S
    end_time = start + duration_s if duration_s is not None else None
    count = 0
    while True:
        t0 = perf()
        device_ms = step()
        t1 = perf()
        append((t1 - t0) * 1000.0)
        if device_ms is not None:
            append_device(device_ms)
        count += 1
        if iterations is not None:
            if count >= iterations:
                break
        elif t1 >= end_time and count >= MIN_ITERATIONS:
            break
        if progress is not None and t1 >= next_report:
            next_report = t1 + _PROGRESS_INTERVAL_S
            if iterations is not None:
                progress(count / float(iterations), "{} / {} iterations".format(count, iterations))
            else:
                progress(min((t1 - start) / duration_s, 1.0), "{} iterations".format(count))
    elapsed = perf() - start
    end_unix = time.time()
    if progress is not None:
        progress(1.0, "{} iterations in {:.2f} s".format(count, elapsed))
    return TimedRun(samples, device if device else None, start_unix, end_unix, elapsed, warmup_count,
                    float(warmup_s))
