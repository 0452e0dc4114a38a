"""The run context recorded with every benchmark, so results from different machines merge and compare.

::

    {"host": {"hostname", "os", "machine"},
     "cpu": {"model", "cores_logical", "cores_available", "machine"},
     "python": {"version", "implementation", "executable"},
     "versions": {"edgeattn", "python", "numpy", "onnxruntime", "tensorrt", "torch", "onnx", "click", "pyyaml"},
     "device": {"name", "compute_capability", "source"} | null,        # the GPU the backend ran on
     "jetson": {"board": {...}, "power_mode": {"id", "name"} | null, "clocks": {...} | null} | null,
     "env": {"OMP_NUM_THREADS": ..., "CUDA_VISIBLE_DEVICES": ..., ...},   # only the variables that are set
     "created_unix": float, "created_utc": "YYYY-MM-DDTHH:MM:SSZ"}
"""
import os
import time

from ..probes import cpu_info, host_info, jetson_context, package_versions, python_info

#: environment variables that change what a benchmark measures
RELEVANT_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
                "CUDA_MODULE_LOADING", "ORT_TENSORRT_FP16_ENABLE", "EDGEATTN_PLUGIN_LIB", "EDGEATTN_TRTEXEC")


def run_context(device=None, with_jetson=True):
    now = time.time()
    return {
        "host": host_info(),
        "cpu": cpu_info(),
        "python": python_info(),
        "versions": package_versions(),
        "device": device,
        "jetson": jetson_context() if with_jetson else None,
        "env": {name: os.environ[name] for name in RELEVANT_ENV if name in os.environ},
        "created_unix": now,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
    }
