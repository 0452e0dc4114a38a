"""Building with trtexec: the same build as the Python builder, through command-line flags for its version."""
from ..console import warn
from ..errors import EdgeAttnError
from ..tensorrt.plugin_library import creator_tuples
from ..trtexec import flags, run_trtexec
from ..trtexec.log import explain_failure, parse_device
from ..trtexec.version import version_from_output


def build(trtexec, version, onnx_file, engine_file, policy, typing, islands, profile, workspace_mb, timing_cache,
          version_compatible, library, timeout, source_path, profiling_verbosity=None):
    """Run trtexec to write ``engine_file``; returns ``{"device", "tensorrt_version", "enforced_by", "command"}``."""
    weak_fp16 = policy.fp16 and typing == "weak"
    weak_int8 = policy.int8 and typing == "weak"
    enforced_by = None
    if weak_fp16:
        if flags.supports(version, "--layerPrecisions"):
            enforced_by = "trtexec {}--fp16 --precisionConstraints=obey --layerPrecisions/--layerOutputTypes " \
                          "(ONNX node names)".format("--int8 " if weak_int8 else "")
        else:
            enforced_by = "none: trtexec {} has no --layerPrecisions (8.4+)".format(version)
            warn("trtexec {} cannot pin layers to FP32 (--layerPrecisions needs TensorRT 8.4); LayerNorm and "
                 "softmax may run in FP16. Use --backend tensorrt to apply the FP32 islands".format(version))
    elif policy.int8:
        enforced_by = "the Q/DQ graph's types (strongly typed)"
    elif policy.fp16:
        enforced_by = "explicit casts in the ONNX (strongly typed)"
    args = flags.build_command(
        trtexec, version, onnx_file, engine_file, fp16=weak_fp16, fp32_layers=sorted(islands) if weak_fp16 else (),
        plugin_library=library["path"] if library else None, profile=profile, workspace_mb=workspace_mb,
        timing_cache=timing_cache, version_compatible=version_compatible, profiling_verbosity=profiling_verbosity,
        int8=weak_int8)
    result = run_trtexec(args, timeout=timeout)
    if result.returncode != 0:
        raise EdgeAttnError(explain_failure(result.output, result.returncode, version=version,
                                            model_path=source_path,
                                            plugin_library=library["path"] if library else None,
                                            creators=creator_tuples(library)))
    device = parse_device(result.stdout)
    return {
        "device": {"name": device["name"], "compute_capability": device["compute_capability"]} if device else None,
        "tensorrt_version": version_from_output(result.output) or version,
        "enforced_by": enforced_by,
        "command": args,
    }
