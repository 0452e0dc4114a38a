"""trtexec command lines per TensorRT version (``samples/common/sampleOptions.cpp`` of each NVIDIA/TensorRT release).

One table says in which version each option we use appeared and disappeared; the builders below only emit options
the target trtexec parses, because an unknown option makes trtexec print its help and fail (exit 1).
"""
import math

from ..errors import EdgeAttnError

_ALWAYS = (0, 0)

#: option -> (first version that parses it, first version that no longer does, or None)
OPTIONS = {
    "--onnx": (_ALWAYS, None),
    "--saveEngine": (_ALWAYS, None),
    "--loadEngine": (_ALWAYS, None),
    "--fp16": (_ALWAYS, (11, 0)),
    "--int8": (_ALWAYS, (11, 0)),
    "--stronglyTyped": ((9, 0), None),
    "--minShapes": (_ALWAYS, None),
    "--optShapes": (_ALWAYS, None),
    "--maxShapes": (_ALWAYS, None),
    "--shapes": (_ALWAYS, None),
    "--plugins": (_ALWAYS, None),  # deprecated (warning) from 8.6
    "--staticPlugins": ((8, 6), None),
    "--dynamicPlugins": ((8, 6), None),
    "--setPluginsToSerialize": ((8, 6), None),
    "--warmUp": (_ALWAYS, None),
    "--duration": (_ALWAYS, None),
    "--iterations": (_ALWAYS, None),
    "--useCudaGraph": (_ALWAYS, None),  # no-op from 11.0 (graphs are the default)
    "--noCudaGraph": ((11, 0), None),
    "--noDataTransfers": (_ALWAYS, None),  # no-op from 11.0 (no transfers is the default)
    "--includeDataTransfers": ((11, 0), None),
    "--exportTimes": (_ALWAYS, None),
    "--exportProfile": (_ALWAYS, None),
    "--separateProfileRun": (_ALWAYS, None),
    # both from TensorRT OSS 8.2 (CHANGELOG "8.2.0 EA": --nvtxMode deprecated for --profilingVerbosity; the engine
    # inspector that --exportLayerInfo calls is new in 8.2)
    "--profilingVerbosity": ((8, 2), None),
    "--exportLayerInfo": ((8, 2), None),
    "--timingCacheFile": (_ALWAYS, None),
    "--workspace": (_ALWAYS, (10, 0)),  # deprecated (warning) from 8.4
    "--memPoolSize": ((8, 4), None),
    "--precisionConstraints": ((8, 2), (11, 0)),
    "--layerPrecisions": ((8, 4), (11, 0)),
    "--layerOutputTypes": ((8, 4), (11, 0)),
    "--buildOnly": (_ALWAYS, (10, 0)),  # deprecated alias of --skipInference in 8.6
    "--skipInference": ((8, 6), None),
    "--versionCompatible": ((8, 6), None),
    "--getPlanVersionOnly": ((9, 0), None),
}


def supports(version, option):
    """True if trtexec of ``version`` parses ``option``."""
    since, removed = OPTIONS[option]
    return tuple(version) >= since and (removed is None or tuple(version) < removed)


def _require(version, option, what):
    if not supports(version, option):
        since, removed = OPTIONS[option]
        if removed is not None and tuple(version) >= removed:
            raise EdgeAttnError("{} is not available with trtexec {} ({} was removed in TensorRT {}.{})".format(
                what, version, option, *removed))
        raise EdgeAttnError("{} needs TensorRT >= {}.{}; this trtexec is {}".format(what, since[0], since[1],
                                                                                   version))


def dims_text(dims):
    return "x".join(str(int(d)) for d in dims)


def shapes_text(shapes):
    """``{"x": [1, 3, 224, 224]}`` -> ``x:1x3x224x224`` (comma-separated for several inputs)."""
    return ",".join("{}:{}".format(name, dims_text(dims)) for name, dims in shapes)


def plugin_options(version, library, serialize=False):
    """Options that load our plugin library: ``--plugins`` before 8.6, ``--staticPlugins`` from 8.6 (the
    library registers its creators when loaded). With ``serialize`` (version-compatible engines) the library is
    loaded through ``--dynamicPlugins`` and embedded with ``--setPluginsToSerialize``."""
    if not library:
        return []
    if serialize:
        _require(version, "--setPluginsToSerialize", "serializing the plugin library into the engine")
        from ..plugins import dynamic_plugin_library

        dynamic = dynamic_plugin_library(library)
        return ["--dynamicPlugins={}".format(dynamic), "--setPluginsToSerialize={}".format(dynamic)]
    if supports(version, "--staticPlugins"):
        return ["--staticPlugins={}".format(library)]
    return ["--plugins={}".format(library)]


def build_command(trtexec, version, onnx_path, engine_path, fp16=False, fp32_layers=(), plugin_library=None,
                  profile=None, workspace_mb=None, timing_cache=None, version_compatible=False,
                  profiling_verbosity=None, int8=False):
    """Argument list for building ``engine_path`` from ``onnx_path`` (no inference run).

    ``fp16``: weak typing (``--fp16``), only up to TensorRT 10.x; with ``fp32_layers`` those layers are pinned to
    FP32 and the constraints obeyed (``--precisionConstraints=obey``, 8.2+; ``--layerPrecisions`` and
    ``--layerOutputTypes``, 8.4+). From TensorRT 11 networks are strongly typed: the caller hands an FP16 ONNX and
    sets ``fp16=False``. ``profile``: list of ``(name, min, opt, max)``. ``profiling_verbosity``: ``detailed``,
    ``layer_names_only`` or ``none`` (``--profilingVerbosity``, 8.2+; trtexec's default is layer names only).
    ``int8``: ``--int8`` for a Q/DQ ONNX (explicit quantization, no calibration), up to 10.x (strongly typed 11.x
    takes the Q/DQ graph without a flag).
    """
    args = [trtexec, "--onnx={}".format(onnx_path), "--saveEngine={}".format(engine_path)]
    args.append("--skipInference" if supports(version, "--skipInference") else "--buildOnly")
    if int8:
        _require(version, "--int8", "weakly typed INT8 (--int8)")
        args.append("--int8")
    if fp16:
        _require(version, "--fp16", "weakly typed FP16 (--fp16)")
        args.append("--fp16")
        if fp32_layers:
            _require(version, "--precisionConstraints", "pinning layers to FP32")
            args.append("--precisionConstraints=obey")
            if supports(version, "--layerPrecisions"):
                names = sorted(set(fp32_layers))
                args.append("--layerPrecisions={}".format(",".join("{}:fp32".format(n) for n in names)))
                args.append("--layerOutputTypes={}".format(",".join("{}:fp32".format(n) for n in names)))
    args.extend(plugin_options(version, plugin_library, serialize=version_compatible))
    if profile:
        for option, index in (("--minShapes", 1), ("--optShapes", 2), ("--maxShapes", 3)):
            args.append("{}={}".format(option, shapes_text((entry[0], entry[index]) for entry in profile)))
    if workspace_mb is not None:
        if supports(version, "--memPoolSize"):
            args.append("--memPoolSize=workspace:{}".format(int(workspace_mb)))
        else:
            args.append("--workspace={}".format(int(workspace_mb)))
    if timing_cache:
        args.append("--timingCacheFile={}".format(timing_cache))
    if version_compatible:
        _require(version, "--versionCompatible", "--version-compatible")
        args.append("--versionCompatible")
    if profiling_verbosity:
        _require(version, "--profilingVerbosity", "--profiling-verbosity")
        args.append("--profilingVerbosity={}".format(profiling_verbosity))
    return args


def bench_command(trtexec, version, model_path, is_onnx, export_times, shapes=None, plugin_library=None,
                  warmup_s=1.0, duration_s=None, iterations=None, cuda_graph=True, export_profile=None,
                  export_layer_info=None):
    """Argument list for timing an engine (or an ONNX file, which trtexec builds first).

    Data transfers stay on (default up to 10.x, ``--includeDataTransfers`` from 11.0) so every version reports the
    same thing: latency = H2D + GPU compute + D2H. CUDA graphs: ``--useCudaGraph`` up to 10.x, default from 11.0
    (``--noCudaGraph`` turns them off). Before 8.4 ``--warmUp`` and ``--duration`` take integers.
    ``export_profile``: per-layer times from a profiling run kept apart from the timed one (``--exportProfile``
    with ``--separateProfileRun``, so the profiler's synchronisation does not slow the timed iterations);
    ``export_layer_info``: the engine's layers (``--exportLayerInfo``, 8.2+).
    """
    args = [trtexec, ("--onnx={}" if is_onnx else "--loadEngine={}").format(model_path)]
    args.extend(plugin_options(version, plugin_library))
    if shapes:
        args.append("--shapes={}".format(shapes_text(shapes)))
    integer_times = tuple(version) < (8, 4)
    warmup_ms = warmup_s * 1000.0
    args.append("--warmUp={}".format(int(math.ceil(warmup_ms)) if integer_times else "{:g}".format(warmup_ms)))
    if iterations is not None:
        args.extend(["--iterations={}".format(int(iterations)), "--duration=0"])
    else:
        duration = int(math.ceil(duration_s)) if integer_times else "{:g}".format(duration_s)
        args.append("--duration={}".format(duration))
    if tuple(version) >= (11, 0):
        args.append("--includeDataTransfers")
        if not cuda_graph:
            args.append("--noCudaGraph")
    elif cuda_graph:
        args.append("--useCudaGraph")
    args.append("--exportTimes={}".format(export_times))
    if export_profile:
        args.extend(["--separateProfileRun", "--exportProfile={}".format(export_profile)])
    if export_layer_info and supports(version, "--exportLayerInfo"):
        args.append("--exportLayerInfo={}".format(export_layer_info))
    return args


def layer_info_command(trtexec, version, engine_path, export_layer_info, plugin_library=None):
    """Argument list that loads an engine and writes its layers (``--exportLayerInfo``, 8.2+) after one short
    inference run (the export is written when the engine is set up)."""
    _require(version, "--exportLayerInfo", "reading an engine's layers with trtexec")
    args = [trtexec, "--loadEngine={}".format(engine_path)]
    args.extend(plugin_options(version, plugin_library))
    args.extend(["--exportLayerInfo={}".format(export_layer_info), "--warmUp=0", "--iterations=1", "--duration=0"])
    return args
