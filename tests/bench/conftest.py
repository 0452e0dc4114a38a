"""Fixtures for the build/bench/doctor tests (helpers live in bench_helpers.py)."""
import shutil
import sys
import types

import pytest

from bench_helpers import fake_trtexec, no_jetson, plugins_stub_module  # noqa: F401  (fixtures)


@pytest.fixture
def write_model(tmp_path):
    def _write(data, name="model.onnx"):
        path = tmp_path / name
        path.write_bytes(data)
        return str(path)

    return _write


@pytest.fixture
def plugins_stub(monkeypatch):
    import edgeattn

    stub = plugins_stub_module()
    monkeypatch.setitem(sys.modules, "edgeattn.plugins", stub)
    monkeypatch.setattr(edgeattn, "plugins", stub, raising=False)
    return stub


@pytest.fixture
def no_plugins_module(monkeypatch):
    import edgeattn

    monkeypatch.setitem(sys.modules, "edgeattn.plugins", None)
    monkeypatch.delattr(edgeattn, "plugins", raising=False)


@pytest.fixture
def jetson_stub(monkeypatch):
    """Stand-ins for edgeattn.jetson.{board,nvpmodel,clocks}, describing a Jetson AGX Orin (MAXN when an
    nvpmodel is on PATH)."""
    import edgeattn

    package = types.ModuleType("edgeattn.jetson")
    package.__path__ = []
    board = types.ModuleType("edgeattn.jetson.board")
    board.SOC_COMPUTE_CAPABILITY = {"tegra234": "8.7"}
    board.detect_board = lambda root="/": types.SimpleNamespace(
        model="NVIDIA Jetson AGX Orin Developer Kit", compatible=["nvidia,p3737-0000+p3701-0005", "nvidia,tegra234"],
        l4t_release="36.4.3", jetpack="6.2", module_id="p3701-0005", soc="tegra234")
    nvpmodel = types.ModuleType("edgeattn.jetson.nvpmodel")
    # Like the real helper: a mode only when an nvpmodel is on PATH.
    nvpmodel.nvpmodel_path = lambda: shutil.which("nvpmodel")
    nvpmodel.query_mode = lambda timeout=10: types.SimpleNamespace(id=0, name="MAXN") if shutil.which(
        "nvpmodel") else None
    clocks = types.ModuleType("edgeattn.jetson.clocks")
    clocks.show = lambda timeout=10: {"gpu": {"cur_hz": 1300500000}}
    for name, module in (("edgeattn.jetson", package), ("edgeattn.jetson.board", board),
                         ("edgeattn.jetson.nvpmodel", nvpmodel), ("edgeattn.jetson.clocks", clocks)):
        monkeypatch.setitem(sys.modules, name, module)
    package.board, package.nvpmodel, package.clocks = board, nvpmodel, clocks
    monkeypatch.setattr(edgeattn, "jetson", package, raising=False)
    return package


@pytest.fixture
def isolated_path(tmp_path, monkeypatch):
    """PATH holding only an empty bin directory (plus sh for wrappers): no nvidia-smi, trtexec or nvpmodel."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.delenv("EDGEATTN_TRTEXEC", raising=False)
    return bindir
