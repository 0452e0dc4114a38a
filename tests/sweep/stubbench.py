"""A stand-in for edgeattn.bench.run_benchmark (its edgeattn.bench/1 record) with a throughput the tests control.

Its throughput is a known function of the model and the board's current mode (read from the fake board's state)
or the thread budget, so tests can check what the sweep and the report do with it. It sleeps for the timed
phase, so power samples really fall into its window; with ``hold_file`` it holds the phase until that file exists
instead (a test that needs a sweep in progress ends it when its checks are done, not after a guessed duration).
"""
import json
import os
import time

from edgeattn.errors import EdgeAttnError

#: items/s of each stub model at mode 0 / 1 thread
BASE_FPS = {"global": 10.0, "elfatt": 16.0, "effatt": 14.0, "m1": 10.0, "m2": 20.0}


def current_fake_mode():
    state_dir = os.environ.get("FAKE_JETSON_STATE")
    if not state_dir:
        return None
    with open(os.path.join(state_dir, "state.json")) as handle:
        return json.load(handle)["mode"]


def expected_fps(model_name, mode_id=None, threads=None, precision="fp32"):
    factor = (mode_id + 1) if mode_id is not None else (threads or 1)
    return BASE_FPS.get(model_name, 5.0) * factor * (2.0 if precision == "fp16" else 1.0)


#: how long a held benchmark waits for its hold file before it fails the sweep (a test that never released it)
HOLD_TIMEOUT_S = 120.0


def make_bench(calls=None, fail_at=None, sleep_s=None, hold_file=None):
    """A bench function; ``fail_at``: the 1-based call that raises EdgeAttnError (a failure mid-sweep);
    ``hold_file``: each timed phase lasts until this path exists (at least ``sleep_s``/``duration_s``)."""
    calls = calls if calls is not None else []

    def run_benchmark(model_path, backend="auto", batch=1, warmup_s=1.0, duration_s=None, iterations=None,
                      threads=None, cuda_graph=True, plugins=None, progress=None):
        calls.append({"model_path": model_path, "backend": backend, "threads": threads, "duration_s": duration_s,
                      "mode": current_fake_mode()})
        if fail_at is not None and len(calls) == fail_at:
            raise EdgeAttnError("stub benchmark failure on call {}".format(len(calls)))
        base = os.path.basename(model_path)
        name = base.split(".")[0]
        precision = "fp16" if ".fp16." in base else "fp32"
        fps = expected_fps(name, current_fake_mode(), threads, precision)
        start = time.time()
        time.sleep(sleep_s if sleep_s is not None else (duration_s or 0.1))
        if hold_file:
            _wait_for_file(hold_file)
        end = time.time()
        latency = 1000.0 / fps * batch
        stats = {k: latency for k in ("mean", "min", "max", "p50", "p90", "p95", "p99")}
        stats.update({"std": 0.0, "cov": 0.0})
        return {
            "schema": "edgeattn.bench/1",
            "model": {"path": model_path, "name": name, "sha256": "0" * 64,
                      "kind": "engine" if model_path.endswith(".engine") else "onnx"},
            "backend": "tensorrt" if model_path.endswith(".engine") else "onnxruntime",
            "provider": "CPUExecutionProvider", "batch": batch, "threads": threads, "precision": precision,
            "iterations": 10, "warmup_s": warmup_s, "latency_ms": stats, "throughput_items_per_s": fps,
            "gpu_compute_ms": None, "samples_ms": [latency] * 10,
            "window": {"start_unix": start, "end_unix": end},
            "context": {"stub": True},
        }

    run_benchmark.calls = calls
    return run_benchmark


def _wait_for_file(path):
    deadline = time.time() + HOLD_TIMEOUT_S
    while not os.path.exists(path):
        if time.time() > deadline:
            raise EdgeAttnError("stub benchmark: {} did not appear within {:g} s".format(path, HOLD_TIMEOUT_S))
        time.sleep(0.02)


def fake_engine_builder(onnx_path, engine_path, precision="fp32", **kwargs):
    """Stands in for edgeattn.build's API: writes a placeholder engine file."""
    with open(engine_path, "w") as handle:
        handle.write("fake engine of {} at {}\n".format(onnx_path, precision))
    return {"engine": engine_path, "precision": precision}
