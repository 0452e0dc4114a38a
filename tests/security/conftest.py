"""Fixtures for the security and bad-input tests (helpers live in security_support.py)."""
from jetson_support import fake_board, fast_sampling  # noqa: F401  (pytest fixtures)
from security_support import place  # noqa: F401  (pytest fixture)
