"""edgeattn.plugins: finding and loading the plugin library (CPU; no TensorRT needed, a fake one is injected)."""
import hashlib
import os
import shutil
import sys
import types

import pytest

import edgeattn.plugins as plugins
from edgeattn._subprocess import run_command
from edgeattn.errors import EdgeAttnError

FAKE_LIBRARY_SOURCE = r"""
const char* edgeattn_plugins_build_info(void) { return "fake edgeattn plugins; TensorRT 0.0.0"; }
"""


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """No library loaded yet, no EDGEATTN_PLUGIN_LIB, empty package-data and build dirs, no tensorrt module."""
    monkeypatch.setattr(plugins, "_LOADED", {})
    monkeypatch.delenv(plugins.ENV_VAR, raising=False)
    package = tmp_path / "package_lib"
    build = tmp_path / "plugins_build"
    package.mkdir()
    build.mkdir()
    monkeypatch.setattr(plugins, "_package_lib_dir", lambda: str(package))
    monkeypatch.setattr(plugins, "_build_dir", lambda: str(build))
    monkeypatch.setitem(sys.modules, "tensorrt", None)  # `import tensorrt` raises ImportError
    return {"package": package, "build": build}


@pytest.fixture(scope="module")
def fake_library(tmp_path_factory):
    """A real shared object named libedgeattn_plugins.so that exports edgeattn_plugins_build_info."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler to build a stand-in shared library")
    work = tmp_path_factory.mktemp("fakelib")
    source = work / "fake.c"
    source.write_text(FAKE_LIBRARY_SOURCE)
    library = work / plugins.LIBRARY_NAME
    run_command([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], timeout=120, check=True)
    return str(library)


def test_missing_library_lists_every_place_searched_and_how_to_build(isolated):
    with pytest.raises(plugins.PluginLibraryNotFound) as caught:
        plugins.find_plugin_library()
    message = caught.value.format_message()
    assert "\n" not in message
    assert "EDGEATTN_PLUGIN_LIB (not set)" in message
    assert str(isolated["package"] / plugins.LIBRARY_NAME) + " (package data)" in message
    assert str(isolated["build"] / plugins.LIBRARY_NAME) + " (checkout build directory)" in message
    assert "deploy/jetson/build_plugins.sh" in message and "cmake -S plugins -B plugins/build" in message
    assert len(caught.value.searched) == 3
    assert isinstance(caught.value, EdgeAttnError) and caught.value.exit_code == 2


def test_explicit_path_that_does_not_exist_is_an_error_not_a_fallback(isolated, fake_library, tmp_path):
    shutil.copy(fake_library, str(isolated["build"] / plugins.LIBRARY_NAME))
    missing = tmp_path / "nope" / "libedgeattn_plugins.so"
    with pytest.raises(plugins.PluginLibraryNotFound, match="given explicitly"):
        plugins.find_plugin_library(str(missing))


def test_env_var_that_does_not_exist_is_an_error_not_a_fallback(isolated, fake_library, monkeypatch, tmp_path):
    shutil.copy(fake_library, str(isolated["build"] / plugins.LIBRARY_NAME))
    monkeypatch.setenv(plugins.ENV_VAR, str(tmp_path / "missing.so"))
    with pytest.raises(plugins.PluginLibraryNotFound, match="EDGEATTN_PLUGIN_LIB=.*missing.so"):
        plugins.find_plugin_library()


def test_search_order_explicit_env_package_build(isolated, fake_library, monkeypatch, tmp_path):
    shutil.copy(fake_library, str(isolated["build"] / plugins.LIBRARY_NAME))
    assert plugins.find_plugin_library() == str(isolated["build"] / plugins.LIBRARY_NAME)
    shutil.copy(fake_library, str(isolated["package"] / plugins.LIBRARY_NAME))
    assert plugins.find_plugin_library() == str(isolated["package"] / plugins.LIBRARY_NAME)
    env_dir = tmp_path / "from_env"
    env_dir.mkdir()
    shutil.copy(fake_library, str(env_dir / plugins.LIBRARY_NAME))
    monkeypatch.setenv(plugins.ENV_VAR, str(env_dir))  # a directory holding the library is accepted
    assert plugins.find_plugin_library() == str(env_dir / plugins.LIBRARY_NAME)
    assert plugins.find_plugin_library(fake_library) == fake_library


def test_load_reports_path_hash_build_info_and_schema_creators(fake_library):
    loaded = plugins.load_plugin_library(fake_library)
    with open(fake_library, "rb") as handle:
        assert loaded.sha256 == hashlib.sha256(handle.read()).hexdigest()
    assert loaded.path == fake_library
    assert loaded.build_info == "fake edgeattn plugins; TensorRT 0.0.0"
    assert loaded.creators_source == "schemas"
    assert loaded.creators == [
        ("EdgeAttnBlockifyAttention", "1", "edgeattn"),
        ("EdgeAttnEfficientAttention", "1", "edgeattn"),
        ("EdgeAttnLiteMLA", "1", "edgeattn"),
        ("EdgeAttnSoftKernelAttention", "1", "edgeattn"),
    ]
    assert loaded.to_dict()["creators"][0] == ["EdgeAttnBlockifyAttention", "1", "edgeattn"]
    assert plugins.registered_creators() == []  # no TensorRT: no registry to ask


def test_load_once_per_process(fake_library, tmp_path):
    first = plugins.load_plugin_library(fake_library)
    assert plugins.load_plugin_library(fake_library) is first
    assert plugins.loaded_plugin_library() is first
    other = tmp_path / plugins.LIBRARY_NAME
    shutil.copy(fake_library, str(other))
    with pytest.raises(EdgeAttnError, match="already loaded"):
        plugins.load_plugin_library(str(other))


def test_unloadable_file_gives_one_clear_line(tmp_path):
    broken = tmp_path / plugins.LIBRARY_NAME
    broken.write_bytes(b"not an ELF file")
    with pytest.raises(EdgeAttnError) as caught:
        plugins.load_plugin_library(str(broken))
    message = caught.value.format_message()
    assert message.startswith("cannot load the edgeattn plugin library {}".format(broken))
    assert "\n" not in message
    assert plugins.loaded_plugin_library() is None


class _Creator(object):
    def __init__(self, name, version, namespace):
        self.name = name
        self.plugin_version = version
        self.plugin_namespace = namespace


def _fake_tensorrt(attribute):
    creators = [_Creator("EdgeAttnLiteMLA", "1", "edgeattn"), _Creator("EdgeAttnBlockifyAttention", "1", "edgeattn"),
                _Creator("GridAnchor_TRT", "1", "")]
    registry = types.SimpleNamespace(**{attribute: creators})
    return types.SimpleNamespace(get_plugin_registry=lambda: registry)


@pytest.mark.parametrize("attribute", ["all_creators", "plugin_creator_list"])  # TensorRT 10 / TensorRT 8
def test_creators_come_from_the_tensorrt_registry_when_available(fake_library, monkeypatch, attribute):
    monkeypatch.setitem(sys.modules, "tensorrt", _fake_tensorrt(attribute))
    loaded = plugins.load_plugin_library(fake_library)
    assert loaded.creators_source == "tensorrt"
    assert loaded.creators == [("EdgeAttnBlockifyAttention", "1", "edgeattn"), ("EdgeAttnLiteMLA", "1", "edgeattn")]
    assert plugins.registered_creators(namespace=None) == [
        ("EdgeAttnBlockifyAttention", "1", "edgeattn"), ("EdgeAttnLiteMLA", "1", "edgeattn"),
        ("GridAnchor_TRT", "1", "")]


def test_module_is_device_side_clean():
    """Stdlib-only imports at module level (the device path runs without torch/onnx/tensorrt)."""
    for name in ("__init__.py", "kernels_abi.py"):
        with open(os.path.join(os.path.dirname(plugins.__file__), name)) as handle:
            top_level_imports = [line for line in handle if line.startswith(("import ", "from "))]
        assert not any(heavy in line for line in top_level_imports
                       for heavy in ("torch", "tensorrt", "onnx", "numpy")), name
