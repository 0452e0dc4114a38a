"""ONNX Runtime backend: ``perf_counter`` around ``session.run`` for every iteration.

Providers: ``auto`` takes CUDA when this onnxruntime build has it, else CPU; ``tensorrt`` (ONNX Runtime's TensorRT
execution provider, which builds its own engine per session) only when asked for. ``threads`` sets the intra-op
thread pool (the host-cpu sweep profile uses thread budgets as its "power modes"); inter-op stays at 1 because
the graphs run sequentially.
"""
import re

from ..errors import EdgeAttnError, MissingDependencyError
from .inputs import ORT_TYPES, random_feeds
from .timing import run_timed

PROVIDERS = {
    "cpu": ["CPUExecutionProvider"],
    "cuda": ["CUDAExecutionProvider", "CPUExecutionProvider"],
    "tensorrt": ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"],
}


def import_onnxruntime():
    try:
        import onnxruntime
    except ImportError:
        raise MissingDependencyError("onnxruntime", "benchmarking ONNX files",
                                     "Install it with `pip install onnxruntime` (onnxruntime-gpu for CUDA).")
    return onnxruntime


def choose_providers(ort, provider):
    available = list(ort.get_available_providers())
    if provider in (None, "auto"):
        return PROVIDERS["cuda"] if "CUDAExecutionProvider" in available else PROVIDERS["cpu"]
    if provider not in PROVIDERS:
        raise EdgeAttnError("unknown ONNX Runtime provider {!r} (choose auto, {})".format(
            provider, ", ".join(sorted(PROVIDERS))))
    wanted = PROVIDERS[provider][0]
    if wanted not in available:
        raise EdgeAttnError("this onnxruntime has no {} (available: {})".format(wanted, ", ".join(available)))
    return [p for p in PROVIDERS[provider] if p in available]


def fallback_problem(asked, used):
    """Why a session does not run where it was asked to, or None: ONNX Runtime drops an execution provider it
    cannot initialise (an onnxruntime-gpu build without the CUDA, cuDNN or TensorRT libraries it was built
    against, a GPU out of memory) with a log line only, and the session runs on the providers left, in the end the
    CPU; ``session.get_providers()`` lists the ones it kept."""
    lost = [name for name in asked if name != "CPUExecutionProvider" and name not in used]
    if not lost:
        return None
    return ("ONNX Runtime was asked for {} but the session uses {} only: it could not initialise {} (the CUDA, "
            "cuDNN or TensorRT libraries this onnxruntime build needs?); these are not GPU results".format(
                ", ".join(asked), ", ".join(used) or "nothing", ", ".join(lost)))


def open_session(ort, model, options, providers, label=None):
    """An InferenceSession on ``providers`` for ``model`` (a path, or serialized bytes named ``label``); one line
    for a failure, a warning when a GPU provider was dropped."""
    label = label or model
    try:
        session = ort.InferenceSession(model, options, providers=providers)
    except Exception as error:  # onnxruntime raises its own pybind exception classes
        raise EdgeAttnError(explain_ort_error(error, label))
    problem = fallback_problem(providers, list(session.get_providers()))
    if problem:
        from ..console import warn

        warn("{}: {}".format(label, problem))
    return session


def explain_ort_error(error, model_path):
    """One line for an ONNX Runtime failure (its messages carry a C++ source prefix and several lines)."""
    text = str(error).strip()
    text = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    custom = re.search(r"(?:No Op registered for|Could not find an implementation for) (\w+)", text) or \
        re.search(r"(?:[\w.]+:)?(\w+)(?:\(-?\d+\))? is not a registered function/op", text)
    if custom:
        op = custom.group(1)
        return ("ONNX Runtime cannot run {} in {}: the file has custom ops without their local functions (the "
                "TensorRT variant?); benchmark the ONNX Runtime variant from `edgeattn export`, or build an engine"
                .format(op, model_path))
    first = text.splitlines()[0] if text else type(error).__name__
    return "ONNX Runtime failed on {}: {}".format(model_path, first)


def run(model_path, batch, threads, provider, warmup_s, duration_s, iterations, progress):
    """Benchmark an ONNX file; returns the backend part of the result."""
    ort = import_onnxruntime()
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads is not None:
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
    providers = choose_providers(ort, provider)
    session = open_session(ort, model_path, options, providers)
    inputs = []
    for meta in session.get_inputs():
        if meta.type not in ORT_TYPES:
            raise EdgeAttnError("input {!r} has type {}, which the benchmark cannot generate".format(
                meta.name, meta.type))
        inputs.append((meta.name, ORT_TYPES[meta.type], meta.shape))
    feeds = random_feeds(inputs, batch)
    session_run = session.run

    def step():
        session_run(None, feeds)

    try:
        step()  # fail fast, outside the timed phase, with a clean message
    except Exception as error:
        raise EdgeAttnError(explain_ort_error(error, model_path))
    timed = run_timed(step, warmup_s=warmup_s, duration_s=duration_s, iterations=iterations, progress=progress)
    float_types = sorted({str(a.dtype) for a in feeds.values() if a.dtype.kind == "f"})
    precision = {"float32": "fp32", "float16": "fp16"}.get(float_types[0]) if len(float_types) == 1 else None
    return {
        "timed": timed,
        "provider": session.get_providers()[0],
        "providers": list(session.get_providers()),
        "precision": precision,
        "threads": int(threads) if threads is not None else None,
        "device": None,
        "inputs": {name: list(array.shape) for name, array in feeds.items()},
        "extra": {"onnxruntime": {"version": ort.__version__, "intra_op_threads": options.intra_op_num_threads,
                                  "inter_op_threads": options.inter_op_num_threads}},
    }
