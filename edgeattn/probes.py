"""What this machine is, for run records, manifests and ``edgeattn doctor``: Python and package versions, the CPU,
the host, the first CUDA device and, on a Jetson, the board, its power mode and clocks.

Every probe is tolerant: a missing package, tool or device gives ``None``, never an exception. Heavy modules (torch)
are imported only by the probe that needs them; Jetson facts come from ``edgeattn.jetson`` (board detection,
nvpmodel, jetson_clocks) when that package is importable.
"""
import os
import platform
import socket
import sys

from ._subprocess import run_command, which
from ._version import __version__
from .errors import EdgeAttnError

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
