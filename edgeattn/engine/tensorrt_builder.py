"""Building with TensorRT's Python API.

UNVERIFIED: this repository's CI has no TensorRT and no GPU; the code follows the TensorRT 8.2-10.x (and 11.x
strongly typed) Python API and is deliberately thin. The trtexec builder is the tested path.
"""
import os

from .._io import atomic_write
from ..console import warn
from ..errors import EdgeAttnError
from ..tensorrt.api import format_creators, get_logger, load_plugins, registered_creators
from .precision import apply_weak_typing


def _current_device():
    try:
        from ..tensorrt.cuda import open_cuda

        return open_cuda().device()
    except EdgeAttnError:
        from ..probes import cuda_device

        return cuda_device()


def build(trt, version, onnx_bytes, onnx_file, engine_file, policy, typing, islands, profile, workspace_mb,
          timing_cache, version_compatible, library, source_path, profiling_verbosity=None, mark_every_tensor=False):
    """Parse, configure and build; writes the serialized engine to ``engine_file``. ``mark_every_tensor``: every
    layer's outputs become network outputs (Polygraphy's ``ModifyNetworkOutputs(..., MARK_ALL)``), for
    ``edgeattn compare --layers``."""
    logger = get_logger(trt)
    load_plugins(trt, library["path"] if library else None)
    builder = trt.Builder(logger)
    if builder is None:
        raise EdgeAttnError("TensorRT could not create a builder (no usable GPU?); `edgeattn doctor` shows what "
                            "this machine has")
    creation = 0
    flag_enum = trt.NetworkDefinitionCreationFlag
    if tuple(version) < (10, 0) and hasattr(flag_enum, "EXPLICIT_BATCH"):
        creation |= 1 << int(flag_enum.EXPLICIT_BATCH)
    if policy.fp16 and typing == "strong" and hasattr(flag_enum, "STRONGLY_TYPED"):
        creation |= 1 << int(flag_enum.STRONGLY_TYPED)
    network = builder.create_network(creation)
    parser = trt.OnnxParser(network, logger)
    # The path lets the parser resolve external weight files next to the model.
    if not parser.parse(onnx_bytes, os.path.abspath(onnx_file)):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        text = " | ".join(" ".join(e.split()) for e in errors) or "no error reported"
        if "Plugin not found" in text or "could not find plugin" in text:
            raise EdgeAttnError("TensorRT {} found no plugin for a custom op in {} ({}); registered creators: {}; "
                                "pass --plugin-lib LIB built for this TensorRT".format(
                                    version, source_path, text, format_creators(registered_creators(trt))))
        raise EdgeAttnError("TensorRT {} could not parse {}: {}".format(version, source_path, text))
    if mark_every_tensor:
        from ..compare.layers import mark_every_tensor as mark

        mark(builder, network, parser)

    config = builder.create_builder_config()
    if workspace_mb is not None:
        if hasattr(config, "set_memory_pool_limit"):
            config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_mb) << 20)
        else:
            config.max_workspace_size = int(workspace_mb) << 20
    optimization_profile = builder.create_optimization_profile()
    for name, low, opt, high in profile:
        optimization_profile.set_shape(name, low, opt, high)
    config.add_optimization_profile(optimization_profile)
    pinned = []
    enforced_by = None
    if policy.fp16 and typing == "weak":
        pinned = apply_weak_typing(trt, network, config, policy, islands)
        if policy.int8:  # explicit quantization: the Q/DQ layers give the scales, no calibrator
            config.set_flag(trt.BuilderFlag.INT8)
        enforced_by = "BuilderFlag.{}FP16 + {} ({} layers pinned to FP32)".format(
            "INT8 + " if policy.int8 else "",
            "OBEY_PRECISION_CONSTRAINTS" if hasattr(trt.BuilderFlag, "OBEY_PRECISION_CONSTRAINTS")
            else "STRICT_TYPES", len(pinned))
    elif policy.int8:
        enforced_by = "the Q/DQ graph's types (strongly typed network)"
    elif policy.fp16:
        enforced_by = "explicit casts in the ONNX (strongly typed network)"
    if profiling_verbosity:
        from ..tensorrt.inspector import PROFILING_VERBOSITY

        config.profiling_verbosity = getattr(trt.ProfilingVerbosity, PROFILING_VERBOSITY[profiling_verbosity])
    if version_compatible:
        if not hasattr(trt.BuilderFlag, "VERSION_COMPATIBLE"):
            raise EdgeAttnError("--version-compatible needs TensorRT >= 8.6 (this is {})".format(version))
        config.set_flag(trt.BuilderFlag.VERSION_COMPATIBLE)
        if library:
            from ..plugins import dynamic_plugin_library

            config.plugins_to_serialize = [dynamic_plugin_library(library["path"])]
    cache = None
    if timing_cache:
        data = b""
        if os.path.exists(timing_cache):
            with open(timing_cache, "rb") as handle:
                data = handle.read()
        cache = config.create_timing_cache(data)
        if not config.set_timing_cache(cache, ignore_mismatch=False):
            warn("timing cache {} does not match this TensorRT/device; starting a new one".format(timing_cache))
            cache = config.create_timing_cache(b"")
            config.set_timing_cache(cache, ignore_mismatch=True)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise EdgeAttnError("TensorRT {} failed to build an engine from {} (see the TensorRT messages above)".format(
            version, source_path))
    with open(engine_file, "wb") as handle:
        handle.write(serialized)
    if cache is not None:
        with atomic_write(timing_cache, "wb") as handle:
            handle.write(config.get_timing_cache().serialize())
    return {"device": _current_device(), "tensorrt_version": version, "enforced_by": enforced_by,
            "pinned_layers": pinned, "command": None}
