"""Fixtures for the sweep tests: fake boards (tests/fakes) and captures, a plain host without them, and the fast
sampling of sweep_timing."""
import os

import pytest

from jetson_support import fake_board, fast_sampling  # noqa: F401  (pytest fixtures)


@pytest.fixture
def plain_host(monkeypatch, tmp_path):
    """No Jetson tools on PATH and no fake root: what a developer's machine looks like."""
    monkeypatch.setenv("PATH", os.path.dirname(os.__file__) + os.pathsep + "/usr/bin:/bin")
    monkeypatch.setenv("EDGEATTN_JETSON_ROOT", str(tmp_path / "emptyroot"))
    for name in ("FAKE_JETSON_STATE", "FAKE_JETSON_BOARD", "EDGEATTN_SUDO"):
        monkeypatch.delenv(name, raising=False)
