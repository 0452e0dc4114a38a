"""Nothing executable comes from data files: an engine manifest names the plugin library it was built with but never
supplies a path to load, a library with another sha256 is refused before it is loaded, and host code embedded in
an engine runs only with --allow-engine-host-code.

The libraries are real shared objects compiled here whose constructor appends to a marker file: if a library is
ever loaded, its marker says so. Every run that might load one is a fresh process (a loaded library cannot be
unloaded from the test process)."""
import hashlib
import json
import os
import subprocess
import sys
import types

import pytest

from bench_helpers import install_trtexec, matmul_model
from security_support import build_marker_library
from edgeattn.engine import build_engine
from edgeattn.errors import EdgeAttnError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = "import sys; from edgeattn.cli import main; main(sys.argv[1:])"


def _sha256(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def _edgeattn(args, cwd, env_extra=None):
    env = dict(os.environ, PYTHONPATH=REPO)
    for name in ("EDGEATTN_PLUGIN_LIB",):
        env.pop(name, None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", CLI] + [str(a) for a in args], cwd=str(cwd), env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)


@pytest.fixture
def libraries(tmp_path):
    """Two marker libraries: "planted" (what a manifest points at) and "trusted" (what the user configured)."""
    made = {}
    for name in ("planted", "trusted"):
        directory = tmp_path / name
        directory.mkdir()
        marker = str(tmp_path / "{}.loaded".format(name))
        made[name] = {"path": build_marker_library(directory, marker), "marker": marker}
    return made


@pytest.fixture
def engine(tmp_path):
    """An engine (fake trtexec 10.3.0) whose manifest is then edited the way an attacker would."""
    trtexec = install_trtexec(tmp_path / "trt", "10.3.0")
    model = tmp_path / "m.onnx"
    model.write_bytes(matmul_model(features=8))
    path = str(tmp_path / "m.engine")
    build_engine(str(model), path, backend="trtexec", trtexec=trtexec)
    return {"path": path, "manifest": path + ".json", "trtexec": trtexec}


def _plant(engine, plugins):
    with open(engine["manifest"]) as handle:
        manifest = json.load(handle)
    manifest["plugins"] = plugins
    manifest["custom_ops"] = [{"op_type": "EdgeAttnLiteMLA", "domain": "trt.plugins", "count": 1}]
    with open(engine["manifest"], "w") as handle:
        json.dump(manifest, handle)


def _bench(engine, cwd, *extra, **env):
    return _edgeattn(["bench", engine["path"], "--backend", "trtexec", "--trtexec", engine["trtexec"],
                      "--iterations", "2", "--warmup-s", "0", "--quiet"] + list(extra), cwd, env)


def test_the_marker_library_really_marks_a_load(libraries, tmp_path):
    """The control: loading the library through edgeattn's loader runs its constructor."""
    code = "import edgeattn.plugins as p; p.load_plugin_library({!r})".format(libraries["trusted"]["path"])
    subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=REPO), check=True,
                   stdin=subprocess.DEVNULL, timeout=60)
    assert open(libraries["trusted"]["marker"]).read() == "loaded\n"


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative-to-cwd"])
def test_a_manifest_path_is_never_loaded(libraries, engine, tmp_path, relative):
    planted = libraries["planted"]
    # the old manifest format: a path (resolved against the current directory) and that file's own hash
    _plant(engine, {"path": "libedgeattn_plugins.so" if relative else planted["path"],
                    "sha256": _sha256(planted["path"])})
    result = _bench(engine, os.path.dirname(planted["path"]))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    # only the trusted places are searched: here none holds a library (or a checkout build does, and its hash is
    # not the planted one's); either way the planted file was never loaded
    assert result.stderr.startswith(("edgeattn: error: cannot find the edgeattn plugin library",
                                     "edgeattn: error: plugin library {}".format(
                                         os.path.join(REPO, "plugins", "build"))))
    assert not os.path.exists(planted["marker"])


def test_a_library_with_another_hash_is_refused_before_loading(libraries, engine, tmp_path):
    planted, trusted = libraries["planted"], libraries["trusted"]
    _plant(engine, {"name": "libedgeattn_plugins.so", "version": None, "sha256": _sha256(planted["path"])})
    for how in ("env", "flag"):
        if how == "env":
            result = _bench(engine, tmp_path, EDGEATTN_PLUGIN_LIB=trusted["path"])
        else:
            result = _bench(engine, tmp_path, "--plugin-lib", trusted["path"])
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert "is not the one this engine was built with" in result.stderr and "it was not loaded" in result.stderr
        assert not os.path.exists(trusted["marker"]) and not os.path.exists(planted["marker"])
    # the same library with the hash the manifest names is loaded (its marker appears): the refusal above was
    # the hash check, not some other failure
    _plant(engine, {"name": "libedgeattn_plugins.so", "version": None, "sha256": _sha256(trusted["path"])})
    _bench(engine, tmp_path, EDGEATTN_PLUGIN_LIB=trusted["path"])
    assert open(trusted["marker"]).read() == "loaded\n"
    assert not os.path.exists(planted["marker"])


def test_the_loader_checks_an_expected_hash_before_loading(libraries):
    trusted = libraries["trusted"]
    code = ("import edgeattn.plugins as p\n"
            "try:\n    p.load_plugin_library({!r}, expected_sha256='0' * 64)\n"
            "except p.EdgeAttnError as e:\n    print(e.format_message())\n").format(trusted["path"])
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=REPO), check=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, universal_newlines=True, timeout=60)
    assert "not the expected 000000000000...; it was not loaded" in out.stdout
    assert not os.path.exists(trusted["marker"])


def test_host_code_in_an_engine_needs_the_explicit_flag(tmp_path, invoke, monkeypatch):
    trtexec = install_trtexec(tmp_path / "trt", "10.3.0")
    model = tmp_path / "m.onnx"
    model.write_bytes(matmul_model(features=8))
    engine = str(tmp_path / "m.engine")
    build_engine(str(model), engine, backend="trtexec", trtexec=trtexec, version_compatible=True)
    args = ["bench", engine, "--backend", "trtexec", "--trtexec", trtexec, "--iterations", "3", "--warmup-s", "0",
            "--quiet"]
    result = invoke(args, expect=2)
    assert result.stderr.count("\n") == 1 and "version-compatible engine: loading it runs host code" in result.stderr
    assert "--allow-engine-host-code" in result.stderr
    invoke(args + ["--allow-engine-host-code"], expect=0)


class _Runtime(object):
    def __init__(self, logger):
        self.engine_host_code_allowed = False

    def deserialize_cuda_engine(self, data):
        _Runtime.seen = self.engine_host_code_allowed
        return None  # ends the run right after the decision under test


@pytest.mark.parametrize("flag", [False, True])
def test_tensorrt_runtime_allows_host_code_only_with_the_flag(flag):
    from edgeattn.bench import tensorrt_backend

    trt = types.SimpleNamespace(Runtime=_Runtime, Logger=lambda level: object())
    trt.Logger.WARNING = 0
    manifest = {"tensorrt": {"version": "10.3.0", "version_compatible": True}}
    with pytest.raises(EdgeAttnError, match="could not deserialize"):
        tensorrt_backend._run(trt, "10.3.0", None, None, "m.engine", b"plan", manifest, 1, 0, None, 1, False, None,
                              flag, None)
    assert _Runtime.seen is flag


def test_a_sweep_runs_host_code_engines_only_with_the_flag(tmp_path, invoke, fake_board, monkeypatch):
    fake_board("orin-nano-8gb")
    trtexec = install_trtexec(tmp_path / "trt", "10.3.0")
    monkeypatch.setenv("EDGEATTN_TRTEXEC", trtexec)
    model = tmp_path / "m.onnx"
    model.write_bytes(matmul_model(features=8))
    engine = str(tmp_path / "m.engine")
    build_engine(str(model), engine, backend="trtexec", trtexec=trtexec, version_compatible=True)
    out = tmp_path / "out"
    args = ["sweep", engine, "--backend", "trtexec", "--modes", "2", "--repeats", "1", "--settle-s", "0",
            "--duration-s", "0.2", "--warmup-s", "0", "--power-source", "none", "-o", out]
    result = invoke(args, expect=2)
    assert result.stderr.count("\n") == 1 and "--allow-engine-host-code" in result.stderr
    assert not out.exists()
    invoke(args + ["--allow-engine-host-code"], expect=0)
    with open(str(out / "results.json")) as handle:
        assert [row["backend"] for row in json.load(handle)["rows"]] == ["trtexec"]


def test_tensorrt_backend_refuses_a_library_with_another_hash_before_it_runs(tmp_path, monkeypatch):
    """The TensorRT Python backend loads the library into this process: a library other than the one the engine's
    manifest names (by sha256) is refused before the backend starts, as on the trtexec backend."""
    from edgeattn.bench import run_benchmark, tensorrt_backend
    from edgeattn.tensorrt.manifest import MANIFEST_SCHEMA

    started = []

    def backend(engine_path, data, manifest, batch, plugin_library, *args, **kwargs):
        started.append(plugin_library)
        raise EdgeAttnError("stand-in backend reached")

    monkeypatch.setattr(tensorrt_backend, "run", backend)
    monkeypatch.delenv("EDGEATTN_PLUGIN_LIB", raising=False)
    engine = tmp_path / "m.engine"
    engine.write_bytes(b"serialized plan")
    library = tmp_path / "libedgeattn_plugins.so"
    library.write_bytes(b"not the library the engine was built with")

    def plant(library_sha256):
        manifest = {"schema": MANIFEST_SCHEMA, "engine": {"sha256": _sha256(str(engine))},
                    "tensorrt": {"version": "10.3.0", "version_compatible": False},
                    "plugins": {"name": "libedgeattn_plugins.so", "version": None, "sha256": library_sha256},
                    "custom_ops": [{"op_type": "EdgeAttnLiteMLA", "domain": "trt.plugins", "count": 1}]}
        with open(str(engine) + ".json", "w") as handle:
            json.dump(manifest, handle)

    plant("0" * 64)
    with pytest.raises(EdgeAttnError) as caught:
        run_benchmark(str(engine), backend="tensorrt", plugins=str(library), warmup_s=0, iterations=1)
    message = caught.value.format_message()
    assert "is not the one this engine was built with" in message and "it was not loaded" in message
    assert started == []
    plant(_sha256(str(library)))  # the control: the library the manifest names goes through
    with pytest.raises(EdgeAttnError, match="stand-in backend reached"):
        run_benchmark(str(engine), backend="tensorrt", plugins=str(library), warmup_s=0, iterations=1)
    assert started == [str(library)]
