"""An engine's layer information through TensorRT's ``IEngineInspector`` (TensorRT >= 8.2), and per-layer times
through ``IProfiler``, for ``edgeattn inspect ENGINE`` and ``edgeattn bench --layers``.

UNVERIFIED on a GPU: no TensorRT here; it follows the TensorRT 8.2-10.x Python API (``create_engine_inspector``,
``get_engine_information(LayerInformationFormat.JSON)``, ``ICudaEngine.profiling_verbosity``, ``IProfiler
.report_layer_time``) and is tested against a stand-in module. The inspector's JSON is the document trtexec's
``--exportLayerInfo`` writes (trtexec calls the same inspector), so one parser reads both.
"""
from ..errors import EdgeAttnError
from .api import deserialize_engine, import_tensorrt, load_plugins, tensorrt_version

#: ``edgeattn build --profiling-verbosity`` values -> TensorRT's ``ProfilingVerbosity`` member names
PROFILING_VERBOSITY = {"detailed": "DETAILED", "layer_names_only": "LAYER_NAMES_ONLY", "none": "NONE"}


def engine_layer_info(engine_path, data, plugin_library=None, allow_engine_host_code=False):
    """``(JSON text of every layer, TensorRT version)`` for the serialized engine ``data``: layer objects when it
    was built with detailed profiling verbosity, names only (or nothing) otherwise."""
    trt = import_tensorrt("`edgeattn inspect ENGINE`")
    version = tensorrt_version(trt)
    if tuple(version) < (8, 2):
        raise EdgeAttnError("TensorRT {} has no engine inspector (it came with 8.2); use trtexec "
                            "--exportLayerInfo on a newer TensorRT".format(version))
    load_plugins(trt, plugin_library)
    engine = deserialize_engine(trt, data, engine_path, version, allow_engine_host_code=allow_engine_host_code)
    inspector = engine.create_engine_inspector()
    return inspector.get_engine_information(trt.LayerInformationFormat.JSON), version


def profile_layers(trt, context, enqueue, synchronize, runs):
    """Mean milliseconds per layer over ``runs`` synchronous enqueues with an ``IProfiler`` attached (no CUDA graph:
    TensorRT reports layer times per enqueue), as ``[{"name", "averageMs", "medianMs", "percentage"}]`` in the
    engine's layer order."""
    times = {}
    order = []

    class Profiler(trt.IProfiler):
        def __init__(self):
            trt.IProfiler.__init__(self)

        def report_layer_time(self, layer_name, ms):
            if layer_name not in times:
                times[layer_name] = []
                order.append(layer_name)
            times[layer_name].append(float(ms))

    context.profiler = Profiler()
    try:
        for _ in range(int(runs)):
            enqueue()
            synchronize()
    finally:
        context.profiler = None
    total = sum(sum(values) / len(values) for values in times.values())
    layers = []
    for name in order:
        values = sorted(times[name])
        mean = sum(values) / len(values)
        layers.append({"name": name, "averageMs": mean, "medianMs": values[len(values) // 2],
                       "percentage": 100.0 * mean / total if total > 0 else 0.0})
    return layers
