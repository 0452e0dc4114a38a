"""``edgeattn build``: ONNX -> TensorRT engine + manifest, with the TensorRT Python builder or trtexec.

Why one module: ``on``/``off`` and ``auto`` builds run the same steps in the same order (variant, decomposition,
precision, build, manifest, rename); ``auto`` only repeats them per candidate, so both stay in one place.

Order of work: read and check the ONNX (the onnx package, without external weights), resolve the optimization
profile, the plugin mode (``--plugins on|off|auto``, :mod:`.plugin_selection`) and the plugin library, replace the
custom ops that run without plugins by their standard-op decomposition, pick the ONNX variant the target TensorRT
needs (docs/custom-ops.md: TensorRT 9.0-10.6 inline a same-named local function instead of calling the
plugin), apply the precision policy, build into a temporary file, then write the manifest and
rename the engine into place; ``auto`` builds and times each candidate in a temporary directory first and moves
only the fastest into place. A failure at any step leaves no engine and no manifest behind.
"""
import contextlib
import json
import os
import shlex
import tempfile
import time

from .. import onnx_graph
from .._io import atomic_path, sha256_file, write_json
from .._version import __version__
from ..console import warn
from ..errors import EdgeAttnError
from ..tensorrt import plugin_library
from ..tensorrt.inspector import PROFILING_VERBOSITY
from ..tensorrt.manifest import MANIFEST_SCHEMA, manifest_path
from .precision import PrecisionPolicy, int8_supported, make_strongly_typed_fp16, qdq_node_count
from .profiles import profile_record, resolve_shape_profile

BUILD_BACKENDS = ("auto", "tensorrt", "trtexec")
#: TensorRT versions whose ONNX parser inlines a model-local function instead of calling the plugin of the same
#: name (9.0-10.6); <= 8.6 has no function support at all, so stripping is harmless there too; >= 10.7 prefers
#: a registered plugin (10.15+: when the node carries plugin_namespace, which our exporter always sets).
STRIP_FUNCTIONS_BELOW = (10, 7)
DEFAULT_BUILD_TIMEOUT_S = 7200


def default_engine_path(onnx_path, precision):
    """``model.onnx`` -> ``model.engine`` (FP32), ``model.fp16.engine`` (FP16), ``model.int8.engine`` (INT8, also
    from ``model.int8.onnx``)."""
    base = os.path.splitext(onnx_path)[0]
    if precision in ("fp16", "int8", "auto") and not base.endswith("." + precision):
        base += "." + precision
    return base + ".engine"


def require_int8_device(device, onnx_path):
    """Refuse INT8 on a GPU TensorRT has no INT8 for (``device``: ``{"name", "compute_capability"}`` or None)."""
    if device and int8_supported(device.get("compute_capability")) is False:
        raise EdgeAttnError("{} (compute capability {}) has no INT8 in TensorRT (INT8 needs compute capability 6.1 "
                            "or newer, not 6.2): build {} with --precision fp16 instead".format(
                                device.get("name") or "this GPU", device.get("compute_capability"), onnx_path))


def _check_int8_model(nodes, onnx_path, precision):
    """``--precision int8`` needs explicit quantization in the graph; fp32/fp16 a graph without it."""
    count = qdq_node_count(nodes)
    if precision == "int8" and not count:
        raise EdgeAttnError("{} has no Q/DQ nodes; INT8 builds take an explicitly quantized model: run `edgeattn "
                            "quantize {} -o MODEL.int8.onnx` first".format(onnx_path, onnx_path))
    if precision != "int8" and count:
        raise EdgeAttnError("{} is quantized ({} Q/DQ nodes); build it with --precision int8, or build the FP32 "
                            "export for {}".format(onnx_path, count, precision))
    return count


def _choose_backend(backend, trtexec):
    """``("tensorrt", trt, version, None)`` or ``("trtexec", None, version, path)``."""
    from ..trtexec import probe_version

    if backend not in BUILD_BACKENDS:
        raise EdgeAttnError("unknown build backend {!r} (choose {})".format(backend, ", ".join(BUILD_BACKENDS)))
    if backend in ("auto", "tensorrt"):
        from ..tensorrt.api import import_tensorrt, tensorrt_version

        try:
            trt = import_tensorrt("`edgeattn build --backend tensorrt`")
            return "tensorrt", trt, tensorrt_version(trt), None
        except EdgeAttnError:
            if backend == "tensorrt":
                raise
    from ..trtexec.locate import find_trtexec

    path, searched = find_trtexec(trtexec)
    if path is None:
        if backend == "auto":
            raise EdgeAttnError("neither TensorRT's Python bindings nor trtexec were found (searched {}); "
                                "`edgeattn doctor` shows what this machine has".format(", ".join(searched)))
        raise EdgeAttnError("trtexec not found (searched {}); pass --trtexec PATH".format(", ".join(searched)))
    return "trtexec", None, probe_version(path), path


def _rebuild_command(onnx_path, engine_path, precision, plugins, shapes, backend, workspace_mb, timing_cache,
                     version_compatible, trtexec=None, plugin_mode=None, profiling_verbosity=None):
    args = ["edgeattn", "build", os.path.abspath(onnx_path), "-o", os.path.abspath(engine_path), "--precision",
            precision]
    if plugin_mode:
        args += ["--plugins", plugin_mode]
    if plugins:
        args += ["--plugin-lib", os.path.abspath(plugins)]
    for spec in shapes or ():
        args += ["--shapes", spec]
    if backend != "auto":
        args += ["--backend", backend]
    if trtexec:
        args += ["--trtexec", os.path.abspath(trtexec)]
    if workspace_mb is not None:
        args += ["--workspace", str(workspace_mb)]
    if timing_cache:
        args += ["--timing-cache", os.path.abspath(timing_cache)]
    if version_compatible:
        args.append("--version-compatible")
    if profiling_verbosity:
        args += ["--profiling-verbosity", profiling_verbosity]
    return " ".join(shlex.quote(str(a)) for a in args)


@contextlib.contextmanager
def _variant_file(onnx_path, payload):
    """``onnx_path`` itself, or a temporary file beside it holding ``payload`` (beside it so that external weight
    files still resolve); removed afterwards."""
    if payload is None:
        yield onnx_path
        return
    directory = os.path.dirname(os.path.abspath(onnx_path))
    try:
        fd, path = tempfile.mkstemp(prefix=".edgeattn-", suffix=".onnx", dir=directory)
    except OSError:
        fd, path = tempfile.mkstemp(prefix="edgeattn-", suffix=".onnx")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def build_engine(onnx_path, engine_path=None, precision="fp32", plugins=None, shapes=(), backend="auto",
                 workspace_mb=None, timing_cache=None, version_compatible=False, trtexec=None, timeout=None,
                 progress=None, plugin_mode="on", selection_warmup_s=1.0, selection_duration_s=3.0,
                 profiling_verbosity=None, int8_onnx=None, images=None, min_top1=None):
    """Build a TensorRT engine from ``onnx_path``; returns the manifest written beside it.

    ``precision``: fp32, fp16, int8 (``onnx_path`` holds Q/DQ nodes) or auto (the FP16 engine of ``onnx_path``
    against the INT8 engine of ``int8_onnx``, default MODEL.int8.onnx beside it; INT8 is kept only where it is
    faster and its top-1 agreement with the FP32 ONNX on ``images`` is at least ``min_top1``:
    :mod:`.precision_selection`).

    ``shapes``: ``NAME:MIN,OPT,MAX`` strings; ``backend``: auto (TensorRT Python if importable, else trtexec),
    tensorrt or trtexec; ``plugins``: our plugin library (default: ``edgeattn.plugins``' search, needed only if
    the engine runs custom ops as plugins); ``plugin_mode``: ``on`` (every custom op as a plugin), ``off`` (their
    standard-op decompositions, no plugin library), ``auto`` (build and time candidates with and without each
    custom-op family, keep the fastest: :mod:`.plugin_selection`; each candidate is timed for
    ``selection_warmup_s`` + ``selection_duration_s``) or None (``edgeattn build``'s default: auto where this
    machine can time candidates, else on); ``progress(message)`` is told each step. ``profiling_verbosity``:
    ``detailed`` (every layer's type, precision, tactic and tensors stay in the engine for ``edgeattn inspect``),
    ``layer_names_only`` (TensorRT's default) or ``none``.
    """
    from . import decomposition, plugin_selection

    say = progress or (lambda message: None)
    if precision == "auto":
        options = dict(plugins=plugins, shapes=shapes, backend=backend, workspace_mb=workspace_mb,
                       timing_cache=timing_cache, version_compatible=version_compatible, trtexec=trtexec,
                       timeout=timeout, progress=progress, plugin_mode=plugin_mode,
                       selection_warmup_s=selection_warmup_s, selection_duration_s=selection_duration_s,
                       profiling_verbosity=profiling_verbosity)
        return _build_precision_auto(os.fspath(onnx_path), engine_path, options, int8_onnx, images, min_top1, say)
    policy = PrecisionPolicy(precision)
    if plugin_mode is not None and plugin_mode not in plugin_selection.MODES:
        raise EdgeAttnError("unknown plugin mode {!r} (choose {})".format(plugin_mode,
                                                                          ", ".join(plugin_selection.MODES)))
    onnx_path = os.fspath(onnx_path)
    model = onnx_graph.load_model(onnx_path, "`edgeattn build`")
    graph_io = onnx_graph.graph_io(model)
    custom_ops = onnx_graph.custom_ops(model)
    _check_int8_model(onnx_graph.graph_nodes(model), onnx_path, precision)
    engine_path = os.fspath(engine_path) if engine_path else default_engine_path(onnx_path, precision)
    if os.path.abspath(engine_path) == os.path.abspath(onnx_path):
        raise EdgeAttnError("the engine would overwrite the ONNX file; choose another -o")
    if workspace_mb is not None and workspace_mb < 1:
        raise EdgeAttnError("--workspace must be >= 1 MiB, got {}".format(workspace_mb))
    if timing_cache and os.path.isdir(timing_cache):
        raise EdgeAttnError("--timing-cache {} is a directory".format(timing_cache))
    if not selection_duration_s > 0 or selection_warmup_s < 0:
        raise EdgeAttnError("candidate timing needs a duration > 0 s and a warm-up >= 0 s, got {:g} s and {:g} s"
                            .format(selection_duration_s, selection_warmup_s))
    profile = resolve_shape_profile(graph_io["inputs"], shapes)

    backend, trt, version, trtexec_path = _choose_backend(backend, trtexec)
    say("TensorRT {} via {}".format(version, "trtexec " + trtexec_path if trtexec_path else "Python bindings"))
    if policy.int8:
        from ..probes import cuda_device

        require_int8_device(cuda_device(), onnx_path)  # where it is known before the build; else after it
    if version_compatible and tuple(version) < (8, 6):
        raise EdgeAttnError("--version-compatible needs TensorRT >= 8.6; this is {}".format(version))
    if profiling_verbosity is not None and profiling_verbosity not in PROFILING_VERBOSITY:
        raise EdgeAttnError("unknown profiling verbosity {!r} (choose {})".format(
            profiling_verbosity, ", ".join(PROFILING_VERBOSITY)))
    if profiling_verbosity and tuple(version) < (8, 2):
        raise EdgeAttnError("--profiling-verbosity needs TensorRT >= 8.2; this is {}".format(version))

    families = plugin_selection.op_families(custom_ops)
    mode, mode_reason, timer = _plugin_mode(plugin_mode, families, backend, trtexec_path)
    say("plugins: {} ({})".format(mode, mode_reason))
    job = _BuildJob(onnx_path, engine_path, policy, profile, graph_io, backend, trt, version, trtexec_path,
                    workspace_mb, timing_cache, version_compatible, timeout, say,
                    rebuild=dict(precision=precision, plugins=plugins, shapes=shapes, trtexec=trtexec,
                                 plugin_mode=mode if plugin_mode is not None and families else None),
                    profiling_verbosity=profiling_verbosity)

    if mode == "auto" and families:
        return _build_fastest(job, model, families, custom_ops, plugins, mode_reason, timer, selection_warmup_s,
                              selection_duration_s)
    if mode == "off":
        if plugins:
            warn("--plugins off: the plugin library {} is not used".format(plugins))
        library = None
        built, sources = decomposition.decompose(model, families)
    else:
        library = plugin_library.resolve(plugins, custom_ops=custom_ops,
                                         load=True if backend == "tensorrt" else "optional")
        for op in custom_ops:
            if not op["has_namespace_attribute"]:
                warn("custom op {} has no plugin_namespace attribute; TensorRT >= 10.15 then prefers a "
                     "model-local function over the plugin (re-export with `edgeattn export`)".format(op["op_type"]))
        built, sources = model, {}
    with atomic_path(engine_path) as engine_tmp:
        manifest = _build_variant(job, built, engine_tmp, library, decomposed=sorted(sources))
        plugin_ops = [] if mode == "off" else families
        manifest["plugin_selection"] = {
            "mode": mode, "requested": plugin_mode, "reason": mode_reason, "custom_ops": families,
            "plugin_ops": plugin_ops, "standard_ops": sorted(set(families) - set(plugin_ops)),
            "decomposition": sources, "candidates": None}
        write_json(manifest_path(engine_path), manifest)
    return manifest


def _build_precision_auto(onnx_path, engine_path, options, int8_onnx, images, min_top1, say):
    """``--precision auto``: see :mod:`.precision_selection`."""
    from . import precision_selection

    engine_path = os.fspath(engine_path) if engine_path else default_engine_path(onnx_path, "auto")
    for destination in (engine_path, manifest_path(engine_path)):
        from .._io import check_output_path

        check_output_path(destination)
    backend, _, _, trtexec_path = _choose_backend(options["backend"], options["trtexec"])
    timer, why_not = _timer(backend, trtexec_path)
    if timer is None:
        raise EdgeAttnError("--precision auto times the FP16 and the INT8 engine on this machine's GPU, but {}; "
                            "build --precision fp16 or int8".format(why_not))

    def build(source, engine_file, precision):
        from .._io import outputs_now

        with outputs_now():  # a scratch candidate, timed right away: not held back for the command's commit
            return build_engine(source, engine_file, precision=precision, **options)

    return precision_selection.build_auto(
        onnx_path, engine_path, build, timer, int8_onnx=int8_onnx,
        images=images or precision_selection.DEFAULT_IMAGES,
        min_top1=precision_selection.DEFAULT_MIN_TOP1 if min_top1 is None else min_top1,
        plugins=options["plugins"], warmup_s=options["selection_warmup_s"],
        duration_s=options["selection_duration_s"], timeout=options["timeout"], say=say)


class _BuildJob(object):
    """What every candidate engine of one ``edgeattn build`` shares."""

    def __init__(self, onnx_path, engine_path, policy, profile, graph_io, backend, trt, version, trtexec_path,
                 workspace_mb, timing_cache, version_compatible, timeout, say, rebuild, profiling_verbosity=None,
                 mark_every_tensor=False):
        self.onnx_path = onnx_path
        self.engine_path = engine_path
        self.policy = policy
        self.profile = profile
        self.graph_io = graph_io
        self.backend = backend
        self.trt = trt
        self.version = version
        self.trtexec_path = trtexec_path
        self.workspace_mb = workspace_mb
        self.timing_cache = timing_cache
        self.version_compatible = version_compatible
        self.timeout = timeout
        self.say = say
        self.rebuild = rebuild
        self.profiling_verbosity = profiling_verbosity
        self.mark_every_tensor = mark_every_tensor


def build_marked_engine(manifest, engine_file, plugins=None, progress=None):
    """Rebuild the engine ``manifest`` describes from its source ONNX into ``engine_file`` with every tensor of
    the network marked as an output (what Polygraphy's ``--trt-outputs mark all`` builds), through TensorRT's
    Python API: same precision policy, profile, ONNX variant, decomposed ops and plugins, so that ``edgeattn
    compare --layers`` and ``build --check`` can read the intermediate tensors TensorRT computes. Writes the
    engine and its manifest (``engine_file`` + ``.json``); returns the manifest. Marking outputs keeps TensorRT from
    fusing across them, so this engine may run other kernels than the original: it locates a divergence, it does
    not time anything."""
    from . import decomposition

    say = progress or (lambda message: None)
    source = manifest["source_onnx"]["path"]
    model = onnx_graph.load_model(source, "`edgeattn compare --layers`")
    graph_io = onnx_graph.graph_io(model)
    precision = manifest["precision"]["precision"]
    profile = [(name, entry["min"], entry["opt"], entry["max"])
               for name, entry in manifest["profiles"][0]["inputs"].items()]
    backend, trt, version, _ = _choose_backend("tensorrt", None)
    selection = manifest.get("plugin_selection") or {}
    standard_ops = selection.get("standard_ops") or manifest["source_onnx"].get("decomposed_ops") or []
    built, sources = decomposition.decompose(model, standard_ops) if standard_ops else (model, {})
    custom_ops = onnx_graph.custom_ops(built)
    library = plugin_library.resolve(plugins, manifest_plugins=manifest.get("plugins"), custom_ops=custom_ops,
                                     load=True) if custom_ops else None
    job = _BuildJob(source, engine_file, PrecisionPolicy(precision), profile, graph_io, backend, trt, version, None,
                    manifest.get("workspace_mb"), None, False, None, say,
                    rebuild=dict(precision=precision, plugins=plugins, shapes=(), trtexec=None, plugin_mode=None),
                    mark_every_tensor=True)
    say("rebuilding {} from {} with every tensor marked as an output".format(manifest["engine"]["file"], source))
    marked = _build_variant(job, built, engine_file, library, decomposed=sorted(sources),
                            strip_functions=selection.get("mode") == "auto")
    marked["every_tensor_marked"] = True
    with open(manifest_path(engine_file), "w") as handle:  # a scratch file the comparison reads back, not an output
        json.dump(marked, handle)
    return marked


def _timer(backend, trtexec_path):
    """``(bench backend, trtexec path)`` that can time candidate engines here (the harness of ``edgeattn
    bench``), or ``(None, why not)``."""
    if backend == "trtexec":
        return ("trtexec", trtexec_path), None
    try:
        from ..tensorrt.cuda import open_cuda

        open_cuda()
        return ("tensorrt", None), None
    except EdgeAttnError as error:
        reason = error.format_message()
    from ..trtexec.locate import find_trtexec

    path = find_trtexec(None)[0]
    if path:
        return ("trtexec", path), None
    return None, "no CUDA runtime for the TensorRT benchmark ({}) and no trtexec".format(reason)


def _plugin_mode(requested, families, backend, trtexec_path):
    """``(mode, why, timer)``: the plugin mode to build with; ``timer`` is set for auto."""
    if not families:
        return requested or "on", "the model has no custom ops", None
    if requested in ("on", "off"):
        return requested, "--plugins {}".format(requested), None
    timer, why_not = _timer(backend, trtexec_path)
    if requested == "auto":
        if timer is None:
            raise EdgeAttnError("--plugins auto times every candidate engine on this machine's GPU, but {}; use "
                                "--plugins on or off".format(why_not))
        return "auto", "--plugins auto", timer
    if timer is None:
        return "on", "default without a device to time candidates on: {}".format(why_not), None
    return "auto", "default where candidates can be timed on this machine", timer


def _build_fastest(job, model, families, custom_ops, plugins, mode_reason, timer, warmup_s, duration_s):
    """``--plugins auto``: build and time the candidates of :func:`plugin_selection.search` in a temporary
    directory beside the engine, then move the fastest (and its manifest) into place."""
    import shutil

    from . import decomposition, plugin_selection
    from ..bench import run_benchmark  # build sits above bench: it times candidates with bench's public entry

    say = job.say
    library, library_error = None, None
    try:
        library = plugin_library.resolve(plugins, custom_ops=custom_ops,
                                         load=True if job.backend == "tensorrt" else "optional")
    except EdgeAttnError as error:
        library_error = error.format_message()
        say("no plugin library ({}): only candidates without plugins can be built".format(library_error))
    timer_backend, timer_trtexec = timer
    first_input = job.profile[0] if job.profile else None
    batch = first_input[2][0] if first_input and first_input[2] else 1
    directory = os.path.dirname(os.path.abspath(job.engine_path))
    os.makedirs(directory, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix=".edgeattn-plugins-", dir=directory)
    counter = [0]

    def evaluate(candidate):
        counter[0] += 1
        label = "candidate {} ({})".format(counter[0], candidate.name)
        if candidate.plugin_ops and library is None:
            candidate.error = "no plugin library: {}".format(library_error)
            say("{}: skipped, {}".format(label, candidate.error))
            return
        try:
            built, sources = decomposition.decompose(model, candidate.standard_ops)
            engine_file = os.path.join(workdir, "candidate-{}.engine".format(counter[0]))
            say("{}: building".format(label))
            # Functions are always stripped here: a candidate named "plugins: X" must not quietly inline X.
            candidate.manifest = _build_variant(job, built, engine_file, library if candidate.plugin_ops else None,
                                                decomposed=sorted(sources), strip_functions=True)
            # A scratch file in the private directory, read back by the timing run below: not an output, so it
            # does not wait for the command's all-or-nothing commit.
            with open(manifest_path(engine_file), "w") as handle:
                json.dump(candidate.manifest, handle)
            candidate.engine_file = engine_file
            say("{}: timing ({:g} s warm-up, {:g} s)".format(label, warmup_s, duration_s))
            candidate.bench = run_benchmark(
                engine_file, backend=timer_backend, batch=batch, warmup_s=warmup_s, duration_s=duration_s,
                plugins=library["path"] if candidate.plugin_ops else None, trtexec=timer_trtexec,
                timeout=job.timeout)
            stats = candidate.bench.get("gpu_compute_ms") or candidate.bench["latency_ms"]
            say("{}: median {:.4g} ms".format(label, stats["p50"]))
        except EdgeAttnError as error:
            candidate.error = error.format_message()
            warn("{}: failed: {}".format(label, candidate.error))  # an event for the log, not progress

    try:
        candidates = plugin_selection.search(families, evaluate)
        winner = plugin_selection.choose(candidates)
        say("selected {}: {}".format(winner.name, winner.reason))
        manifest = winner.manifest
        manifest["engine"]["file"] = os.path.basename(job.engine_path)
        manifest["plugin_selection"] = {
            "mode": "auto", "requested": job.rebuild["plugin_mode"], "reason": mode_reason,
            "custom_ops": families, "plugin_ops": sorted(winner.plugin_ops),
            "standard_ops": sorted(winner.standard_ops),
            "decomposition": decomposition.decomposition_sources(model, families),
            "selected": winner.name, "selected_because": winner.reason,
            "ops": plugin_selection.op_verdicts(families, candidates, winner),
            "strategy": plugin_selection.STRATEGY, "metric": plugin_selection.metric_key(candidates),
            "tie_tolerance": plugin_selection.TIE_TOLERANCE,
            "timing": {"harness": "edgeattn bench", "backend": timer_backend, "batch": batch,
                       "warmup_s": warmup_s, "duration_s": duration_s},
            "plugin_library_error": library_error,
            "candidates": [candidate.record() for candidate in candidates]}
        with atomic_path(job.engine_path) as engine_tmp:
            os.replace(winner.engine_file, engine_tmp)
            write_json(manifest_path(job.engine_path), manifest)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return manifest


def _build_variant(job, model, engine_file, library, decomposed=(), strip_functions=False):
    """Build ``model`` (the source ModelProto, or a decomposed copy of it) into ``engine_file``; returns its
    manifest (not yet written). ``strip_functions``: hand TensorRT no local functions whatever its version."""
    policy, version, backend, onnx_path, say = job.policy, job.version, job.backend, job.onnx_path, job.say
    info = onnx_graph.model_info(model)
    nodes = onnx_graph.graph_nodes(model)
    custom_ops = onnx_graph.custom_ops(model)
    trt = job.trt
    has_fp16_flag = hasattr(trt.BuilderFlag, "FP16") if trt is not None else None
    typing = policy.typing_mode(version, has_fp16_flag) if policy.fp16 else "fp32"
    islands = {} if policy.int8 and typing == "strong" else policy.fp32_islands(nodes)
    if policy.int8 and typing == "strong":  # the Q/DQ graph as it is: FP32 outside the quantized layers
        if info["has_functions"] and strip_functions:
            payload = onnx_graph.strip_local_functions(model)
        else:
            payload = model.SerializeToString() if decomposed else None
        variant = "int8-qdq-strongly-typed"
    elif typing == "strong":
        payload = make_strongly_typed_fp16(model, islands)
        variant = "fp16-strongly-typed"
    elif info["has_functions"] and (strip_functions or tuple(version) < STRIP_FUNCTIONS_BELOW):
        payload = onnx_graph.strip_local_functions(model)
        variant = "local-functions-stripped"
    else:
        payload = model.SerializeToString() if decomposed else None
        variant = "as-exported"
    say("ONNX variant: {}{}{}".format(
        variant, "; standard ops for {}".format(", ".join(decomposed)) if decomposed else "",
        "; {} FP32 island nodes".format(len(islands)) if policy.fp16 else ""))

    started = time.time()
    with _variant_file(onnx_path, payload) as onnx_file:
        say("building {} (this can take minutes)".format(os.path.basename(job.engine_path)))
        if backend == "tensorrt":
            from . import tensorrt_builder

            onnx_bytes = payload if payload is not None else model.SerializeToString()
            details = tensorrt_builder.build(trt, version, onnx_bytes, onnx_file, engine_file, policy, typing,
                                             islands, job.profile, job.workspace_mb, job.timing_cache,
                                             job.version_compatible, library, onnx_path,
                                             profiling_verbosity=job.profiling_verbosity,
                                             mark_every_tensor=job.mark_every_tensor)
        else:
            from . import trtexec_builder

            details = trtexec_builder.build(job.trtexec_path, version, onnx_file, engine_file, policy, typing,
                                            islands, job.profile, job.workspace_mb, job.timing_cache,
                                            job.version_compatible, library, job.timeout or DEFAULT_BUILD_TIMEOUT_S,
                                            onnx_path, profiling_verbosity=job.profiling_verbosity)
    if not os.path.exists(engine_file) or os.path.getsize(engine_file) == 0:
        raise EdgeAttnError("TensorRT reported success but wrote no engine for {}".format(onnx_path))
    if policy.int8:
        require_int8_device(details.get("device"), onnx_path)
    from ..probes import jetson_context

    jetson = jetson_context(with_clocks=False)
    rebuild = job.rebuild
    manifest = {
        "schema": MANIFEST_SCHEMA,
        "engine": {"file": os.path.basename(job.engine_path), "sha256": sha256_file(engine_file),
                   "size_bytes": os.path.getsize(engine_file)},
        "source_onnx": {"path": os.path.abspath(onnx_path), "sha256": sha256_file(onnx_path),
                        "variant": variant, "decomposed_ops": list(decomposed), "ir_version": info["ir_version"],
                        "opset_imports": info["opset_imports"]},
        "tensorrt": {"version": str(details["tensorrt_version"]),
                     "builder": "tensorrt-python" if backend == "tensorrt" else "trtexec",
                     "trtexec": {"path": job.trtexec_path, "version": str(version),
                                 "command": details.get("command")} if job.trtexec_path else None,
                     "version_compatible": bool(job.version_compatible),
                     "profiling_verbosity": job.profiling_verbosity},
        "device": details.get("device"),
        "jetson": dict(jetson["board"], power_mode=jetson["power_mode"]) if jetson else None,
        "plugins": plugin_library.manifest_record(library),  # named, never a path to load
        "custom_ops": custom_ops,
        "precision": policy.describe(islands, typing, details.get("enforced_by"),
                                     qdq_nodes=qdq_node_count(nodes) if policy.int8 else None),
        "profiles": [profile_record(job.profile)],
        "inputs": job.graph_io["inputs"],
        "outputs": job.graph_io["outputs"],
        "workspace_mb": job.workspace_mb,
        "timing_cache": os.path.abspath(job.timing_cache) if job.timing_cache else None,
        "edgeattn_version": __version__,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "build_seconds": round(time.time() - started, 3),
        "rebuild_command": _rebuild_command(onnx_path, job.engine_path, rebuild["precision"], rebuild["plugins"],
                                            rebuild["shapes"], "trtexec" if backend == "trtexec" else "tensorrt",
                                            job.workspace_mb, job.timing_cache, job.version_compatible,
                                            rebuild["trtexec"], plugin_mode=rebuild["plugin_mode"],
                                            profiling_verbosity=job.profiling_verbosity),
    }
    if details.get("pinned_layers") is not None:
        manifest["precision"]["pinned_layers"] = details["pinned_layers"]
    return manifest
