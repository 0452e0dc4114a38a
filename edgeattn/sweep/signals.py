"""SIGINT and SIGTERM during a sweep: while it measures they become :class:`SweepInterrupted` (so the ``finally``
that restores the board runs); while it restores, further ones are noted and held back (a second Ctrl-C must not
leave the board half restored). Outside the main thread (where Python delivers no signals) both do nothing."""
import contextlib
import signal
import threading


class SweepInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived during a sweep (raised from the signal handler so that ``finally`` runs)."""

    def __init__(self, signum):
        KeyboardInterrupt.__init__(self, "signal {}".format(signum))
        self.signum = signum

    @property
    def exit_code(self):
        return 128 + int(self.signum)


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _in_main_thread():
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def raise_on_signals():
    if not _in_main_thread():
        yield
        return

    def handler(signum, frame):
        raise SweepInterrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in _SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def hold_signals(echo):
    """While restoring, a second Ctrl-C must not abandon the board half-restored: note it and carry on."""
    if not _in_main_thread():
        yield
        return
    received = []

    def handler(signum, frame):
        received.append(signum)
        echo("{} received: restoring the original power mode and clocks; please wait".format(signal_name(signum)))

    previous = {sig: signal.signal(sig, handler) for sig in _SIGNALS}
    try:
        yield received
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def signal_name(signum):
    """``SIGINT`` for 2; ``signal N`` for a number the platform does not name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "signal {}".format(signum)
