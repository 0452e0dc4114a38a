"""Fixtures for the sweep tests: fake boards (tests/fakes) and captures, a plain host without them, and the fast
sampling of sweep_timing."""
import os

import pytest

from jetson_support import fake_board  # noqa: F401  (pytest fixture)
from sweep_timing import FAST_INTERVAL_MS


@pytest.fixture
def fast_sampling(monkeypatch):
    """Let a sweep sample at FAST_INTERVAL_MS (see sweep_timing): the minimum interval lowered for this test only."""
    from edgeattn.jetson import ina3221, tegrastats

    monkeypatch.setattr(tegrastats, "MIN_INTERVAL_MS", FAST_INTERVAL_MS)
    monkeypatch.setattr(ina3221, "MIN_INTERVAL_S", FAST_INTERVAL_MS / 1000.0)
    return FAST_INTERVAL_MS


@pytest.fixture
def plain_host(monkeypatch, tmp_path):
    """No Jetson tools on PATH and no fake root: what a developer's machine looks like."""
    monkeypatch.setenv("PATH", os.path.dirname(os.__file__) + os.pathsep + "/usr/bin:/bin")
    monkeypatch.setenv("EDGEATTN_JETSON_ROOT", str(tmp_path / "emptyroot"))
    for name in ("FAKE_JETSON_STATE", "FAKE_JETSON_BOARD", "EDGEATTN_SUDO"):
        monkeypatch.delenv(name, raising=False)
