"""The buffer a power/telemetry sampler thread fills and a sweep reads: ``(time, sample)`` pairs in arrival order,
and how many readings gave no sample (an unparsable tegrastats line, an INA3221 read that returned nothing)."""
import threading


class SampleBuffer(object):
    def __init__(self):
        self._lock = threading.Lock()
        self._samples = []
        self.unparsed = 0

    def add(self, stamp, sample):
        """Keep ``sample`` taken at ``stamp``; None counts as a reading that gave no sample."""
        with self._lock:
            if sample is None:
                self.unparsed += 1
            else:
                self._samples.append((stamp, sample))

    def between(self, since=None, until=None):
        """The ``(time, sample)`` pairs with ``since <= time <= until`` (either bound open when None)."""
        with self._lock:
            return [(t, s) for t, s in self._samples
                    if (since is None or t >= since) and (until is None or t <= until)]

    def forget_before(self, stamp):
        """Drop the samples taken before ``stamp`` (a sweep keeps only what its pending windows need)."""
        with self._lock:
            self._samples = [(t, s) for t, s in self._samples if t >= stamp]


class BufferedSampler(object):
    """What the samplers (tegrastats, INA3221) share: reading their :class:`SampleBuffer`, dropping old samples,
    use as a context manager. Each sampler has its own ``start``/``stop`` and sets ``self._buffer``."""

    _buffer = None

    @property
    def unparsed(self):
        """Readings that gave no sample (a line that was no tegrastats sample, an INA3221 poll that read no rail)."""
        return self._buffer.unparsed

    def samples(self, since=None, until=None):
        return self._buffer.between(since, until)

    def forget_before(self, stamp):
        """Drop the samples received before ``stamp``: a sweep keeps only what its pending windows need, so that
        hours of sampling do not pile up in memory (benchmarks/long_sweep.py)."""
        self._buffer.forget_before(stamp)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False
