"""Helpers shared by the Jetson board I/O tests, the sweep tests and the security tests: verbatim captures, fake
boards and their fast sampling (sweep_timing).

Imported by name from test modules (tests/ is on sys.path through the root conftest), so it must have a name no
other test directory uses; test modules must never import from ``conftest``.
"""
import os
import sys

import pytest

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(TESTS_DIR, "fixtures", "jetson")
sys.path.insert(0, os.path.join(TESTS_DIR, "fakes", "nvpmodel"))
import fakeharness  # noqa: E402
from sweep_timing import FAST_INTERVAL_MS  # noqa: E402


def capture(relative):
    """A capture from tests/fixtures/jetson without its '#@' citation header."""
    with open(os.path.join(FIXTURES, relative), "r", encoding="utf-8") as handle:
        return "".join(line for line in handle if not line.startswith("#@"))


@pytest.fixture
def fake_board(tmp_path, monkeypatch):
    """Factory: fake_board(name, **state) -> FakeBoard with its environment applied to this process."""
    made = []

    def make(name, **kwargs):
        board = fakeharness.FakeBoard(tmp_path / name, name, **kwargs)
        for key, value in board.env.items():
            monkeypatch.setenv(key, value)
        made.append(board)
        return board

    yield make
    for board in made:
        board.kill_leftovers()


@pytest.fixture
def fast_sampling(monkeypatch):
    """Let a sweep sample at FAST_INTERVAL_MS (see sweep_timing): the minimum interval lowered for this test only."""
    from edgeattn.jetson import ina3221, tegrastats

    monkeypatch.setattr(tegrastats, "MIN_INTERVAL_MS", FAST_INTERVAL_MS)
    monkeypatch.setattr(ina3221, "MIN_INTERVAL_S", FAST_INTERVAL_MS / 1000.0)
    return FAST_INTERVAL_MS
