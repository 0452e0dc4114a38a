"""TensorRT Python backend: CUDA events around each enqueue (or CUDA-graph launch), host time around the whole
iteration.

UNVERIFIED: no TensorRT and no GPU in this repository's CI. It follows the TensorRT 8.2-10.x Python API
(``execute_async_v3`` with tensor addresses from 8.5, ``execute_async_v2`` with bindings before) and is kept
thin; the manifest preflight it runs first is tested.
"""
import numpy as np

from ..errors import EdgeAttnError
from ..tensorrt import manifest as manifest_module
from ..tensorrt.api import deserialize_engine, import_tensorrt, load_plugins, tensorrt_version
from ..tensorrt.cuda import open_cuda
from .inputs import random_array
from .timing import run_timed


def _io_tensors(engine, trt):
    """``[(name, is_input, dtype, shape)]`` for both API generations."""
    tensors = []
    if hasattr(engine, "num_io_tensors"):
        for index in range(engine.num_io_tensors):
            name = engine.get_tensor_name(index)
            is_input = engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
            tensors.append((name, is_input, trt.nptype(engine.get_tensor_dtype(name)),
                            list(engine.get_tensor_shape(name))))
    else:  # TensorRT < 8.5
        for index in range(engine.num_bindings):
            tensors.append((engine.get_binding_name(index), engine.binding_is_input(index),
                            trt.nptype(engine.get_binding_dtype(index)), list(engine.get_binding_shape(index))))
    return tensors


#: enqueues of the profiling run of ``bench --layers`` (after the timed run, without a CUDA graph)
PROFILE_RUNS = 50


def _layer_times(trt, engine, context, enqueue, cuda, manifest, top):
    """Per-layer times from an IProfiler run apart from the timed one, joined with the engine inspector's layers."""
    from ..tensorrt.inspector import profile_layers
    from ..tensorrt.layers import layer_times
    from ..trtexec.exports import parse_layer_info

    profile = profile_layers(trt, context, enqueue, cuda.synchronize, PROFILE_RUNS)
    info = None
    if hasattr(engine, "create_engine_inspector"):
        try:
            info = parse_layer_info(engine.create_engine_inspector().get_engine_information(
                trt.LayerInformationFormat.JSON))
        except EdgeAttnError:
            info = None
    record = layer_times(profile, info, custom_ops=(manifest or {}).get("custom_ops"), top=top)
    record["source"] = "TensorRT IProfiler ({} enqueues after the timed run, no CUDA graph)".format(PROFILE_RUNS)
    record["profiled_runs"] = PROFILE_RUNS
    return record


def run(engine_path, data, manifest, batch, plugin_library, warmup_s, duration_s, iterations, cuda_graph,
        progress, allow_engine_host_code=False, layers_top=None):
    trt = import_tensorrt("`edgeattn bench --backend tensorrt`")
    version = tensorrt_version(trt)
    cuda = open_cuda()
    device = cuda.device()
    manifest_module.preflight(engine_path, manifest, version, device)
    load_plugins(trt, plugin_library)
    try:
        return _run(trt, version, cuda, device, engine_path, data, manifest, batch, warmup_s, duration_s,
                    iterations, cuda_graph, progress, allow_engine_host_code, layers_top)
    finally:
        cuda.release()


def _run(trt, version, cuda, device, engine_path, data, manifest, batch, warmup_s, duration_s, iterations,
         cuda_graph, progress, allow_engine_host_code, layers_top):
    engine = deserialize_engine(trt, data, engine_path, version, allow_engine_host_code=allow_engine_host_code)
    context = engine.create_execution_context()
    profile_shapes = dict(manifest_module.check_batch(manifest, batch) or []) if manifest else {}
    tensors = _io_tensors(engine, trt)
    rng = np.random.default_rng(0)
    addresses = {}
    for name, is_input, dtype, shape in tensors:
        if not is_input:
            continue
        dims = profile_shapes.get(name) or [batch if (i == 0 and d < 0) else d for i, d in enumerate(shape)]
        if any(d < 0 for d in dims):
            raise EdgeAttnError("input {!r} has dynamic dims {} and the engine has no manifest profile".format(
                name, shape))
        if hasattr(context, "set_input_shape"):
            context.set_input_shape(name, dims)
        else:
            context.set_binding_shape(engine.get_binding_index(name), dims)
        array = random_array(dims, dtype, rng)
        addresses[name] = cuda.malloc(array.nbytes)
        cuda.upload(addresses[name], array)
    for name, is_input, dtype, _shape in tensors:
        if is_input:
            continue
        if hasattr(context, "get_tensor_shape"):
            dims = list(context.get_tensor_shape(name))
        else:
            dims = list(context.get_binding_shape(engine.get_binding_index(name)))
        addresses[name] = cuda.malloc(int(np.prod(dims)) * np.dtype(dtype).itemsize)

    if hasattr(context, "set_tensor_address"):
        for name, address in addresses.items():
            context.set_tensor_address(name, address)

        def enqueue():
            if not context.execute_async_v3(cuda.handle):
                raise EdgeAttnError("TensorRT enqueue failed")
    else:
        bindings = [addresses[engine.get_binding_name(i)] for i in range(engine.num_bindings)]

        def enqueue():
            if not context.execute_async_v2(bindings=bindings, stream_handle=cuda.handle):
                raise EdgeAttnError("TensorRT enqueue failed")

    enqueue()  # first run outside capture: TensorRT finishes shape-dependent setup here
    cuda.synchronize()
    launch = enqueue
    if cuda_graph:
        cuda.capture(enqueue)
        launch = cuda.launch
    start, end = cuda.event(), cuda.event()
    record, elapsed = cuda.record, cuda.elapsed_ms

    def step():
        record(start)
        launch()
        record(end)
        return elapsed(start, end)

    timed = run_timed(step, warmup_s=warmup_s, duration_s=duration_s, iterations=iterations, progress=progress)
    layers = _layer_times(trt, engine, context, enqueue, cuda, manifest, layers_top) if layers_top else None
    return {
        "timed": timed,
        "provider": "TensorRT {} ({})".format(version, cuda.name),
        "precision": ((manifest or {}).get("precision") or {}).get("precision"),
        "threads": None,
        "device": device,
        "inputs": {name: list(dims) for name, dims in profile_shapes.items()} or None,
        "layers": layers,
        "extra": {"tensorrt": {"version": str(version), "cuda": cuda.name, "cuda_graph": bool(cuda_graph)}},
    }
