"""The per-board lock: one edgeattn process at a time may change the power mode or the clocks.

Two sweeps on one board would each record the other's mode as "original" and restore the wrong one, so whatever
switches modes or locks clocks holds an exclusive ``flock`` on ``edgeattn-board.lock`` in ``$EDGEATTN_LOCK_DIR``,
else ``/run/lock`` (the FHS place for lock files, emptied at boot), else the system temporary directory. The lock
dies with its process, so a crash or reboot never leaves the board locked.
"""
import os
import tempfile

from .._io import exclusive_lock

LOCK_DIR_ENV = "EDGEATTN_LOCK_DIR"
BOARD_LOCK_NAME = "edgeattn-board.lock"


def lock_dir():
    explicit = os.environ.get(LOCK_DIR_ENV)
    if explicit:
        os.makedirs(explicit, exist_ok=True)
        return os.path.abspath(explicit)
    if os.path.isdir("/run/lock") and os.access("/run/lock", os.W_OK | os.X_OK):
        return "/run/lock"
    return tempfile.gettempdir()


def board_lock_path():
    return os.path.join(lock_dir(), BOARD_LOCK_NAME)


def board_lock():
    """Context manager holding the board lock; a second holder gets one line naming the first one's PID."""
    return exclusive_lock(board_lock_path(), "the board (power mode and clocks)")
