"""What this machine can do: the probes behind ``edgeattn doctor``, the benchmark run context and the engine
manifest.

Every probe is tolerant: a missing package, tool or device gives ``None`` (or ``ok: False`` in the doctor report
with what it disables), never an exception. Heavy modules (torch, tensorrt, onnxruntime) are imported only by the
probes that need them. Jetson facts come from ``edgeattn.jetson`` (board detection, nvpmodel, jetson_clocks) when
that package is importable.
"""
import os
import platform
import socket
import sys

from ._subprocess import run_command, which
from ._version import __version__
from .errors import EdgeAttnError

#: Where JetPack installs trtexec (it is not on PATH there).
JETPACK_TRTEXEC = "/usr/src/tensorrt/bin/trtexec"

#: Jetson SoC -> CUDA device name as trtexec's "Selected Device:" prints it (``setCudaDevice`` in NVIDIA/TensorRT
#: ``samples/common/sampleDevice.cpp`` prints ``cudaDeviceProp.name``; real Jetson logs show these); the compute
#: capability comes from edgeattn.jetson.board. Used when no CUDA probe works (old L4T has no nvidia-smi).
JETSON_CUDA_NAMES = {"tegra210": "NVIDIA Tegra X1", "tegra194": "Xavier", "tegra234": "Orin"}

# ARM (implementer, part) -> core name, for /proc/cpuinfo on boards that print no "model name".
_ARM_CORES = {
    (0x41, 0xD03): "ARM Cortex-A53", (0x41, 0xD07): "ARM Cortex-A57", (0x41, 0xD08): "ARM Cortex-A72",
    (0x41, 0xD0C): "ARM Neoverse-N1", (0x41, 0xD42): "ARM Cortex-A78AE", (0x41, 0xD4F): "ARM Neoverse-V2",
    (0x4E, 0x004): "NVIDIA Carmel",
}


# ------------------------------------------------------------------------------------------------------------
# Small probes (used by bench context and the manifest too)


def python_info():
    return {"version": platform.python_version(), "implementation": platform.python_implementation(),
            "executable": sys.executable}


def distribution_version(*names):
    """Installed version of the first distribution found among ``names``, without importing it."""
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return None
    for name in names:
        try:
            return metadata.version(name)
        except Exception:  # PackageNotFoundError, or a broken dist-info
            continue
    return None


def module_version(module_name, *dist_names):
    """Version of a module: from the already imported module if it is loaded, else from package metadata."""
    module = sys.modules.get(module_name)
    if module is not None and getattr(module, "__version__", None):
        return str(module.__version__)
    return distribution_version(*(dist_names or (module_name,)))


def package_versions():
    """Versions that identify a benchmark's software stack (None where absent)."""
    return {
        "edgeattn": __version__,
        "python": platform.python_version(),
        "numpy": module_version("numpy"),
        "onnxruntime": module_version("onnxruntime", "onnxruntime", "onnxruntime-gpu"),
        "tensorrt": module_version("tensorrt", "tensorrt", "tensorrt-cu12", "tensorrt-cu13", "tensorrt-cu11",
                                   "tensorrt_lean"),
        "torch": module_version("torch"),
        "onnx": module_version("onnx"),
        "click": distribution_version("click"),
        "pyyaml": distribution_version("PyYAML"),
    }


def cpu_info(cpuinfo_path="/proc/cpuinfo"):
    """CPU model and core counts."""
    model = None
    implementer = part = None
    try:
        with open(cpuinfo_path) as handle:
            for line in handle:
                key, _, value = line.partition(":")
                key, value = key.strip().lower(), value.strip()
                if key == "model name" and model is None:
                    model = value
                elif key == "cpu implementer" and implementer is None:
                    implementer = _parse_int(value)
                elif key == "cpu part" and part is None:
                    part = _parse_int(value)
    except OSError:
        pass
    if model is None and implementer is not None and part is not None:
        model = _ARM_CORES.get((implementer, part), "ARM implementer {:#x} part {:#x}".format(implementer, part))
    if model is None:
        model = platform.processor() or platform.machine() or None
    try:
        available = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        available = os.cpu_count()
    return {"model": model, "cores_logical": os.cpu_count(), "cores_available": available,
            "machine": platform.machine()}


def _parse_int(text):
    try:
        return int(text, 0)
    except ValueError:
        return None


def host_info():
    return {"hostname": socket.gethostname(), "os": platform.platform(), "machine": platform.machine()}


def _nvidia_smi_device(timeout):
    path = which("nvidia-smi")
    if not path:
        return None
    try:
        result = run_command([path, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
                             timeout=timeout)
    except EdgeAttnError:
        return None
    if result.returncode != 0:
        # Drivers older than 510 know no compute_cap field: ask for the name alone.
        try:
            result = run_command([path, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                 timeout=timeout)
        except EdgeAttnError:
            return None
        if result.returncode != 0:
            return None
        fields = [f.strip() for f in result.stdout.strip().splitlines()[0].split(",")] if result.stdout.strip() \
            else []
        if not fields:
            return None
        return {"name": fields[0], "compute_capability": None, "driver": fields[1] if len(fields) > 1 else None,
                "source": "nvidia-smi"}
    lines = [line for line in result.stdout.strip().splitlines() if line.strip()]
    if not lines:
        return None
    fields = [f.strip() for f in lines[0].split(",")]
    if len(fields) < 2:
        return None
    return {"name": fields[0], "compute_capability": fields[1] or None,
            "driver": fields[2] if len(fields) > 2 else None, "source": "nvidia-smi",
            "count": len(lines)}


def _torch_device():
    import torch  # caller checks importability

    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability(0)
    return {"name": torch.cuda.get_device_name(0), "compute_capability": "{}.{}".format(major, minor),
            "source": "torch", "count": torch.cuda.device_count()}


def cuda_device(allow_torch=False, board=None, timeout=10):
    """The first CUDA device: ``{"name", "compute_capability", "source"}`` or None.

    Tries torch (only if already imported, or ``allow_torch``), nvidia-smi, then the Jetson SoC (``board`` from
    :func:`jetson_board`, detected here when not given). Never raises.
    """
    if "torch" in sys.modules or allow_torch:
        try:
            device = _torch_device()
            if device is not None:
                return device
        except Exception:
            pass
    device = _nvidia_smi_device(timeout)
    if device is not None and device.get("compute_capability"):
        return device
    if board is None:
        board = jetson_board()
    if board is not None and board.get("soc"):
        try:
            from .jetson.board import SOC_COMPUTE_CAPABILITY
        except ImportError:
            SOC_COMPUTE_CAPABILITY = {}
        capability = SOC_COMPUTE_CAPABILITY.get(board["soc"])
        if capability:
            return {"name": JETSON_CUDA_NAMES.get(board["soc"]) or (device or {}).get("name") or board.get("model"),
                    "compute_capability": capability, "source": "device tree ({})".format(board["soc"])}
    return device


def _as_dict(obj, fields):
    if obj is None:
        return None
    if isinstance(obj, dict):
        return dict(obj)
    if hasattr(obj, "to_dict"):
        return dict(obj.to_dict())
    return {field: getattr(obj, field, None) for field in fields}


def jetson_board(root="/"):
    """``edgeattn.jetson.board.detect_board`` as a dict, or None (not a Jetson, or the helper is unavailable)."""
    try:
        from .jetson.board import detect_board
    except ImportError:
        return None
    try:
        board = detect_board(root=root)
    except Exception:  # a probe never breaks a benchmark or the doctor
        return None
    board = _as_dict(board, ("model", "compatible", "l4t_release", "jetpack", "module_id", "soc"))
    if board is not None and board.get("compatible") is not None:
        board["compatible"] = list(board["compatible"])
    return board


def jetson_power_mode(timeout=10):
    """Current nvpmodel mode ``{"id", "name"}`` or None."""
    try:
        from .jetson.nvpmodel import query_mode
    except ImportError:
        return None
    try:
        return _as_dict(query_mode(timeout=timeout), ("id", "name"))
    except Exception:
        return None


def jetson_clocks(timeout=10):
    """Parsed ``jetson_clocks --show`` or None."""
    try:
        from .jetson.clocks import show
    except ImportError:
        return None
    try:
        return show(timeout=timeout)
    except Exception:
        return None


def jetson_context(root="/", with_clocks=True, timeout=10):
    """Board, power mode and clocks for a run record; None when not on a Jetson."""
    board = jetson_board(root=root)
    if board is None:
        return None
    return {"board": board, "power_mode": jetson_power_mode(timeout=timeout),
            "clocks": jetson_clocks(timeout=timeout) if with_clocks else None}


def find_trtexec(explicit=None):
    """Path of trtexec: ``explicit``, ``$EDGEATTN_TRTEXEC``, PATH, then JetPack's /usr/src/tensorrt/bin/trtexec.

    Returns ``(path or None, places searched)``.
    """
    searched = []
    for candidate, label in ((explicit, "--trtexec"), (os.environ.get("EDGEATTN_TRTEXEC"), "$EDGEATTN_TRTEXEC")):
        if candidate:
            searched.append("{} ({})".format(candidate, label))
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return os.path.abspath(candidate), searched
            if label == "--trtexec":
                raise EdgeAttnError("trtexec not found or not executable: {}".format(candidate))
    on_path = which("trtexec")
    searched.append("PATH")
    if on_path:
        return on_path, searched
    searched.append(JETPACK_TRTEXEC)
    if os.path.isfile(JETPACK_TRTEXEC) and os.access(JETPACK_TRTEXEC, os.X_OK):
        return JETPACK_TRTEXEC, searched
    return None, searched


# ------------------------------------------------------------------------------------------------------------
# The doctor report


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
