"""Shared pytest configuration.

Nothing here imports torch or onnx at module level: the device-side tests also run under Python 3.8 with only
click, PyYAML and numpy installed.
"""
import os
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DIR = os.environ.get("EDGEATTN_SHARED_DIR", os.path.join(os.path.dirname(REPO_ROOT), "shared"))


def _cuda_available():
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items and not _cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA device (GPU tests run on a machine with one)")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture
def cli_runner():
    from click.testing import CliRunner

    try:
        # click < 8.2 (the only click on Python 3.8) mixes stderr into stdout unless told not to.
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


@pytest.fixture
def invoke(cli_runner):
    """Invoke ``edgeattn ARGS`` in-process; returns the click Result (stdout and stderr kept apart)."""
    from edgeattn.cli import cli

    def _invoke(args, input=None, env=None, expect=None):
        result = cli_runner.invoke(cli, [str(a) for a in args], input=input, env=env, catch_exceptions=False)
        if expect is not None:
            assert result.exit_code == expect, (
                "edgeattn {} exited {} (expected {})\nstdout:\n{}\nstderr:\n{}".format(
                    " ".join(map(str, args)), result.exit_code, expect, result.stdout, result.stderr)
            )
        return result

    return _invoke
