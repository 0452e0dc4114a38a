"""The time scale of the sweep tests on fake boards.

A sweep on a real board waits on its samplers: each measurement window must hold a tegrastats (or INA3221) sample,
and a window's end is only covered half an interval after it. At the product's 500 ms minimum interval that is
sleep and nothing else on a fake board, so the sweep and security tests run the same sweeps five times faster: the
``fast_sampling`` fixture (tests/jetson_support.py) lowers the minimum for the test only, the sweep asks the fake
tegrastats for ``--interval 100`` (which the fake honours like the real tool), and every duration and settle time of
a test is scaled with it. The real minimum and its validation stay tested (tests/sweep/test_sweep_host.py,
tests/jetson/test_tegrastats.py), and one board sweep still runs at the real 500 ms (tests/sweep/test_sweep_boards.py).
"""
#: the product's minimum (edgeattn.jetson.tegrastats.MIN_INTERVAL_MS) and the tests' sampling interval
REAL_INTERVAL_MS = 500
FAST_INTERVAL_MS = 100
#: seconds of the real board's time per second of these tests
SCALE = REAL_INTERVAL_MS / FAST_INTERVAL_MS


def scaled(seconds):
    """A duration written for the real 500 ms interval, at the tests' interval."""
    return seconds / SCALE
