"""Fixtures for the sweep tests: fake boards (tests/fakes) and captures."""
from jetson_support import fake_board  # noqa: F401  (pytest fixture)
