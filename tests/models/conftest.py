"""Shared helpers for the model-zoo tests (torch is required for this whole folder)."""
import os
import pathlib
import re
import shutil
import tempfile

import pytest

torch = pytest.importorskip("torch")

_PRINTED = re.compile(r"^\s*([0-9]+(?:\.([0-9]+))?)\s*([MG])\s*$")


def printed_value(text):
    """A number as a paper prints it ("20M", "4.44G") -> (value, half a unit of its last printed digit)."""
    match = _PRINTED.match(text)
    assert match, "cannot parse paper value {!r}".format(text)
    scale = {"M": 1e6, "G": 1e9}[match.group(3)]
    decimals = len(match.group(2) or "")
    return float(match.group(1)) * scale, 0.5 * 10 ** -decimals * scale


def matches_paper(ours, printed):
    """True when ``ours`` agrees with the printed table value within 1 %, or within the value's own rounding.

    A table that prints "20M" says 19.5M..20.5M; holding 20.39M to 1 % of 20M would demand more precision than
    the table has, so the tolerance is max(1 % of the value, half a unit of its last printed digit).
    """
    value, rounding = printed_value(printed)
    return abs(ours - value) <= max(0.01 * value, rounding)


@pytest.fixture(name="matches_paper")
def matches_paper_fixture():
    return matches_paper


@pytest.fixture(scope="session")
def meta_counts():
    """Parameter and MAC counts per (model, resolution), computed once per test session on the meta device."""
    from edgeattn.models import create_model
    from edgeattn.models.complexity import count_macs, count_params

    cache = {}

    def get(name, img_size=224, **cfg):
        key = (name, img_size, tuple(sorted(cfg.items(), key=lambda item: item[0])).__repr__())
        if key not in cache:
            with torch.device("meta"):
                model = create_model(name, img_size=img_size, **cfg)
            cache[key] = dict(count_macs(model, img_size), params=count_params(model))
        return cache[key]

    return get


#: a checkpoint round trip of the largest registered model writes ~700 MB
MEMORY_SCRATCH_FREE_BYTES = 4 << 30


@pytest.fixture
def scratch_dir(tmp_path):
    """A directory for files a test writes and reads back at once (checkpoint round trips of up to 700 MB): in
    /dev/shm (Linux's shared-memory tmpfs) when it has room, so the fsync that makes every checkpoint durable costs
    nothing (measured: 9 of 73 s over the 20 largest round trips), else the test's tmp_path. Emptied at teardown:
    what stays in /dev/shm stays in memory."""
    shm = "/dev/shm"
    try:
        room = os.path.isdir(shm) and shutil.disk_usage(shm).free > MEMORY_SCRATCH_FREE_BYTES
    except OSError:
        room = False
    if not room:
        yield tmp_path
        return
    directory = tempfile.mkdtemp(prefix="edgeattn-test-", dir=shm)
    try:
        yield pathlib.Path(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def initialiser_calls(monkeypatch):
    """[(device type, shape)] of every call of torch.nn.init's normal_, trunc_normal_, uniform_ and kaiming_uniform_
    during the test (they still initialise)."""
    import torch.nn.init as init

    calls = []

    def recording(original):
        def initialiser(tensor, *args, **kwargs):
            calls.append((tensor.device.type, tuple(tensor.shape)))
            return original(tensor, *args, **kwargs)

        return initialiser

    for name in ("normal_", "trunc_normal_", "uniform_", "kaiming_uniform_"):
        monkeypatch.setattr(init, name, recording(getattr(init, name)))
    return calls
