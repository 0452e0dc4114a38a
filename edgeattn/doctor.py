"""``edgeattn doctor``: what this machine can do, one check per piece (``ok: False`` with what its absence
disables), from the probes of :mod:`edgeattn.probes` and :func:`edgeattn.trtexec.locate.find_trtexec`.

Every check is tolerant: a missing package, tool or device is reported, never raised. Heavy modules (torch,
tensorrt, onnxruntime) are imported only by the checks that need them.
"""
import os
import platform
import sys

from ._subprocess import which
from ._version import __version__
from .errors import EdgeAttnError
from .probes import cpu_info, cuda_device, distribution_version, host_info, jetson_board, jetson_power_mode, \
    module_version, python_info
from .trtexec.locate import find_trtexec


def _check(ok, summary, disables=None, **details):
    entry = {"ok": bool(ok), "summary": summary, "disables": None if ok else disables}
    entry.update(details)
    return entry


def _import_error(error):
    return "{}: {}".format(type(error).__name__, str(error).splitlines()[0] if str(error) else "")


def _check_torch():
    try:
        import torch
    except Exception as error:  # ImportError, or a broken CUDA build raising OSError
        return _check(False, "torch not importable ({})".format(_import_error(error)),
                      "export, ops-bench and the reference operators (device-side commands do not need torch)")
    cuda = bool(torch.cuda.is_available())
    return _check(True, "torch {} (CUDA {})".format(torch.__version__, "available" if cuda else "not available"),
                  version=str(torch.__version__), cuda_available=cuda,
                  cuda_version=getattr(torch.version, "cuda", None))


def _check_onnx():
    try:
        import onnx
    except Exception as error:
        return _check(False, "onnx not importable ({})".format(_import_error(error)),
                      "export and inspect, and FP16 builds for TensorRT >= 11 (they rewrite the ONNX with casts)")
    return _check(True, "onnx {}".format(onnx.__version__), version=str(onnx.__version__))


def _check_onnxruntime():
    try:
        import onnxruntime as ort
    except Exception as error:
        return _check(False, "onnxruntime not importable ({})".format(_import_error(error)),
                      "benchmarking ONNX files (edgeattn bench MODEL.onnx), export --check and host-cpu sweeps")
    providers = list(ort.get_available_providers())
    problem = _gpu_provider_problem(ort, providers)
    if problem:
        return _check(False, "onnxruntime {} lists {} but {}".format(ort.__version__, ", ".join(providers), problem),
                      "ONNX Runtime on the GPU (bench --provider cuda|tensorrt would time the CPU)",
                      version=str(ort.__version__), providers=providers)
    return _check(True, "onnxruntime {} (providers: {})".format(ort.__version__, ", ".join(providers)),
                  version=str(ort.__version__), providers=providers)


def _gpu_provider_problem(ort, providers):
    """Whether a session asked for the listed CUDA provider keeps it (ONNX Runtime drops a provider it cannot
    initialise and runs on the CPU), tried on the tiny model ONNX Runtime ships (``onnxruntime.datasets``)."""
    if "CUDAExecutionProvider" not in providers:
        return None
    from .bench.onnxruntime_backend import fallback_problem

    asked = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    try:
        from onnxruntime.datasets import get_example

        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(get_example("mul_1.onnx"), options, providers=asked)
    except Exception as error:  # onnxruntime raises its own pybind exception classes
        return "a CUDA session fails: {}".format(_import_error(error))
    problem = fallback_problem(asked, list(session.get_providers()))
    return "a session asked for CUDA runs on {} only".format(", ".join(session.get_providers())) if problem \
        else None


def _check_tensorrt():
    try:
        import tensorrt as trt
    except Exception as error:
        return _check(False, "tensorrt (Python) not importable ({})".format(_import_error(error)),
                      "--backend tensorrt for build and bench (trtexec can stand in)")
    where = os.path.dirname(getattr(trt, "__file__", "") or "") or None
    return _check(True, "tensorrt {} ({})".format(trt.__version__, where), version=str(trt.__version__),
                  path=where)


def _check_cuda_python():
    for module_name in ("cuda.bindings.runtime", "cuda.cudart"):
        try:
            __import__(module_name)
        except Exception:
            continue
        version = distribution_version("cuda-python", "cuda-bindings")
        return _check(True, "cuda-python {} ({})".format(version, module_name), version=version,
                      module=module_name)
    return _check(False, "cuda-python not importable",
                  "nothing when torch with CUDA is present; otherwise CUDA buffers and events for "
                  "`edgeattn bench --backend tensorrt`")


def _check_cuda_device(board):
    device = cuda_device(allow_torch="torch" in sys.modules, board=board)
    if device is None:
        return _check(False, "no CUDA device found (torch, nvidia-smi, device tree)",
                      "TensorRT build and bench, and the ONNX Runtime CUDA/TensorRT providers; "
                      "ONNX Runtime CPU still works")
    from .engine.precision import int8_supported

    int8 = int8_supported(device.get("compute_capability"))
    return _check(True, "{} (compute capability {}, via {}){}".format(
        device.get("name"), device.get("compute_capability"), device.get("source"),
        {True: "; INT8: yes", False: "; INT8: no (TensorRT has no INT8 below compute capability 6.1 or on 6.2): "
                                     "build --precision fp16", None: ""}[int8]), int8=int8, **device)


def _check_trtexec():
    from .trtexec import probe_version

    try:
        path, searched = find_trtexec()
    except EdgeAttnError as error:
        return _check(False, error.format_message(), "--backend trtexec for build and bench")
    if path is None:
        return _check(False, "trtexec not found (searched {})".format(", ".join(searched)),
                      "--backend trtexec for build and bench", searched=searched)
    try:
        version = probe_version(path)
    except EdgeAttnError as error:
        return _check(False, "trtexec at {} does not run: {}".format(path, error.format_message()),
                      "--backend trtexec for build and bench", path=path)
    return _check(True, "trtexec {} at {}".format(version, path), path=path, version=str(version))


def _check_plugins():
    try:
        from . import plugins
    except ImportError as error:
        return _check(False, "plugin loader unavailable ({})".format(_import_error(error)),
                      "building engines from ONNX files with edgeattn custom ops")
    try:
        path = plugins.find_plugin_library()
    except EdgeAttnError as error:
        return _check(False, error.format_message(),
                      "building engines from ONNX files with edgeattn custom ops (export --no-plugins works "
                      "without them)")
    try:
        loaded = plugins.load_plugin_library(path)
    except EdgeAttnError as error:
        return _check(False, "plugin library {} does not load: {}".format(path, error.format_message()),
                      "building and running engines with edgeattn custom ops", path=path)
    creators = [{"name": n, "version": v, "namespace": ns} for n, v, ns in (loaded.creators or ())]
    listing = ", ".join("{}::{} v{}".format(c["namespace"], c["name"], c["version"]) for c in creators)
    source = getattr(loaded, "creators_source", None)
    return _check(True, "plugin library {} ({}{})".format(loaded.path, listing or "no creators listed",
                                                        "; from the op schemas, TensorRT absent"
                                                        if source == "schemas" else ""),
                  path=loaded.path, sha256=loaded.sha256, creators=creators, creators_source=source)


def _check_jetson(board):
    if board is None:
        try:
            from .jetson import board as _board_module  # noqa: F401
        except ImportError as error:
            return _check(False, "Jetson detection unavailable ({})".format(_import_error(error)),
                          "Jetson board facts in run records")
        return _check(False, "not a Jetson (no Tegra device tree)",
                      "Jetson power-mode sweeps (the host-cpu profile still works)")
    summary = "{} (L4T {}, JetPack {})".format(board.get("model"), board.get("l4t_release"), board.get("jetpack"))
    return _check(True, summary, **board)


def _check_nvpmodel():
    try:
        from .jetson.nvpmodel import nvpmodel_path
    except ImportError:
        nvpmodel_path = None
    path = (nvpmodel_path() if nvpmodel_path else None) or which("nvpmodel")
    if not path:
        return _check(False, "nvpmodel not on PATH", "power-mode switching in sweeps (host-cpu profile only)")
    mode = jetson_power_mode()
    if mode is None:
        try:
            from .jetson import nvpmodel as _nvpmodel_module  # noqa: F401
            reason = "it did not report a mode"
        except ImportError as error:
            reason = "edgeattn.jetson is unavailable ({})".format(_import_error(error))
        return _check(False, "nvpmodel at {} but the current mode is unknown: {}".format(path, reason),
                      "power-mode switching in sweeps", path=path)
    return _check(True, "nvpmodel mode {} ({}) via {}".format(mode.get("id"), mode.get("name"), path),
                  path=path, mode=mode)


def diagnose(root="/"):
    """The doctor report as one JSON-serialisable dict (schema ``edgeattn.doctor/1``)."""
    board = jetson_board(root=root)
    checks = [
        ("python", _check(sys.version_info >= (3, 8), "Python {} ({})".format(platform.python_version(),
                                                                             sys.executable),
                          "everything (edgeattn needs Python >= 3.8)", **python_info())),
        ("numpy", _check(True, "numpy {}".format(module_version("numpy")), version=module_version("numpy"))),
        ("torch", _check_torch()),
        ("onnx", _check_onnx()),
        ("onnxruntime", _check_onnxruntime()),
        ("tensorrt", _check_tensorrt()),
        ("cuda_python", _check_cuda_python()),
        ("cuda_device", _check_cuda_device(board)),
        ("trtexec", _check_trtexec()),
        ("plugins", _check_plugins()),
        ("jetson", _check_jetson(board)),
        ("nvpmodel", _check_nvpmodel()),
    ]
    return {"schema": "edgeattn.doctor/1", "edgeattn": __version__, "host": host_info(), "cpu": cpu_info(),
            "checks": dict(checks)}


def format_report(report):
    """Human-readable lines: one per check, then what the missing pieces disable."""
    lines = ["edgeattn {} on {} ({}, {} cores)".format(report["edgeattn"], report["host"]["hostname"],
                                                       report["cpu"]["model"], report["cpu"]["cores_logical"])]
    width = max(len(name) for name in report["checks"])
    for name, check in report["checks"].items():
        lines.append("  {:<{w}}  {:<7} {}".format(name, "ok" if check["ok"] else "missing", check["summary"],
                                                  w=width))
    missing = [(name, check["disables"]) for name, check in report["checks"].items()
               if not check["ok"] and check["disables"]]
    if missing:
        lines.append("")
        lines.append("Missing pieces disable:")
        for name, disables in missing:
            lines.append("  {:<{w}}  {}".format(name, disables, w=width))
    return "\n".join(lines)
