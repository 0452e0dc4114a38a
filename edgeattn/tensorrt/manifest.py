"""The engine manifest: ``<engine file>.json`` beside every engine ``edgeattn build`` writes.

A TensorRT engine only loads on the TensorRT version (and GPU architecture) that built it, and an engine with our
custom ops needs the same plugin library. The manifest records all of that so ``edgeattn bench`` can refuse an
engine *before* deserializing it, with the exact rebuild command, instead of failing deep inside TensorRT.

File name: the engine's full file name plus ``.json`` (``model.engine`` -> ``model.engine.json``,
``model.plan`` -> ``model.plan.json``). A manifest is untrusted data (it travels with the engine): nothing in
it is ever loaded or executed; its plugin record only lets ``bench`` refuse a library with another sha256 before
loading it, and its engine sha256 lets ``sweep --resume`` find damaged engines. Format (schema
``edgeattn.engine/1``)::

    {"schema": "edgeattn.engine/1",
     "engine": {"file", "sha256", "size_bytes"},
     "source_onnx": {"path", "sha256", "variant": "as-exported" | "local-functions-stripped" |
                     "fp16-strongly-typed", "decomposed_ops": [op_type, ...] (replaced by their standard-op
                     decomposition before that), "ir_version", "opset_imports"},
     "tensorrt": {"version": "10.3.0", "builder": "tensorrt-python" | "trtexec", "trtexec": {"path", "version"} | null,
                  "version_compatible": bool},
     "device": {"name", "compute_capability"} | null,
     "jetson": {"model", "compatible", "l4t_release", "jetpack", "module_id", "power_mode"} | null,
     "plugins": {"name", "version", "sha256", "creators": [{"name", "version", "namespace"}] | null,
                 "creators_source": "tensorrt" | "schemas" | null} | null,   # names the library, no path
     "custom_ops": [{"op_type", "domain", "plugin_version", "plugin_namespace", "count", ...}],  # run as plugins
     "plugin_selection": {"mode": "on" | "off" | "auto", "requested": mode | null (the default), "reason",
                          "custom_ops": the source's op types, "plugin_ops", "standard_ops", "decomposition":
                          {op_type: where its decomposition came from}, "candidates": null (on/off) |
                          [{"name", "plugin_ops", "standard_ops", "status": "selected" | "rejected" | "failed",
                            "reason", "error", "build_seconds", "engine_sha256", "onnx_variant", "iterations",
                            "latency_ms": {...}, "gpu_compute_ms": {...}, "throughput_items_per_s"}],
                          auto only: "selected", "selected_because", "ops": {op_type: {"runs_as", "reason"}},
                          "strategy", "metric", "tie_tolerance", "timing", "plugin_library_error"},
     "precision": {"precision", "typing", ...},      # PrecisionPolicy.describe()
     "profiles": [{"inputs": {name: {"min": [...], "opt": [...], "max": [...]}}}],
     "inputs": [{"name", "elem_type", "shape"}], "outputs": [...],
     "workspace_mb", "timing_cache", "edgeattn_version", "built_at" (ISO 8601 UTC), "build_seconds",
     "rebuild_command": "edgeattn build ..."}
"""
import hashlib
import os

from .._io import read_json, sha256_file
from ..errors import EdgeAttnError

MANIFEST_SCHEMA = "edgeattn.engine/1"


def manifest_path(engine_path):
    """``model.engine`` -> ``model.engine.json``."""
    return os.fspath(engine_path) + ".json"


def read_manifest(engine_path):
    """The manifest beside ``engine_path``, or None if there is none. A corrupt manifest is an error."""
    path = manifest_path(engine_path)
    if not os.path.exists(path):
        return None
    manifest = read_json(path, "an edgeattn engine manifest", schema=MANIFEST_SCHEMA, what="the engine manifest")
    problem = manifest_problem(manifest)
    if problem:
        raise EdgeAttnError("engine manifest {} is malformed: {}".format(path, problem))
    return manifest


def recorded_engine_sha256(manifest):
    """The sha256 the manifest recorded for its engine file, or None."""
    return ((manifest or {}).get("engine") or {}).get("sha256")


def engine_manifest_problem(engine_path, manifest, data=None):
    """Why an engine does not match its manifest (damaged, truncated or replaced since it was built); None if it
    does or when there is nothing to compare. ``data``: the engine's bytes when already read."""
    want = recorded_engine_sha256(manifest)
    if not want:
        return None
    have = hashlib.sha256(data).hexdigest() if data is not None else sha256_file(engine_path)
    if have == want:
        return None
    return "{} does not match its manifest {} (sha256 {}..., built as {}...): it was damaged or replaced".format(
        engine_path, manifest_path(engine_path), have[:12], want[:12])


def embeds_host_code(manifest):
    """Whether the manifest says its engine is version-compatible, i.e. loading it runs host code (the plugin
    library) embedded in the engine file."""
    return bool(((manifest or {}).get("tensorrt") or {}).get("version_compatible"))


def host_code_refusal(engine_path):
    """The one-line refusal for an engine whose manifest says it embeds host code (version-compatible)."""
    return ("{} is a version-compatible engine: loading it runs host code (a plugin library) embedded in the "
            "engine file; pass --allow-engine-host-code only for an engine you built or trust".format(engine_path))


def check_engine(engine_path, manifest, data=None, allow_engine_host_code=False, rebuild_hint=False):
    """Refuse, before anything deserializes it, an engine whose bytes differ from its manifest's sha256 or whose
    manifest says it embeds host code when ``allow_engine_host_code`` (only ever the user's explicit flag, never
    the manifest) is off. ``rebuild_hint``: end the sha256 refusal with the manifest's rebuild command. Nothing to
    check without a manifest. Raises :class:`EdgeAttnError`."""
    problem = engine_manifest_problem(engine_path, manifest, data)
    if problem:
        if rebuild_hint:
            problem += "; rebuild it with `{}`".format(manifest.get("rebuild_command") or "edgeattn build")
        raise EdgeAttnError(problem)
    if embeds_host_code(manifest) and not allow_engine_host_code:
        raise EdgeAttnError(host_code_refusal(engine_path))


def _optional(kind):
    return lambda value: value is None or isinstance(value, kind)


def _dims(value):
    return isinstance(value, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value)


def _profile_problem(profile):
    if not isinstance(profile, dict) or not isinstance(profile.get("inputs"), dict):
        return "a profile must be an object with an 'inputs' object"
    for name, entry in profile["inputs"].items():
        if not isinstance(entry, dict) or not all(_dims(entry.get(key)) for key in ("min", "opt", "max")):
            return "profile input {!r} needs 'min', 'opt' and 'max' lists of dimensions".format(name)
        if not len(entry["min"]) == len(entry["opt"]) == len(entry["max"]):
            return "profile input {!r} has 'min', 'opt' and 'max' of different ranks".format(name)
    return None


#: what the readers of a manifest (bench, sweep --resume, compare, this module) rely on: field -> (check, what)
_FIELDS = (
    ("engine", _optional(dict), "an object"),
    ("source_onnx", _optional(dict), "an object or null"),
    ("tensorrt", _optional(dict), "an object or null"),
    ("device", _optional(dict), "an object or null"),
    ("plugins", _optional(dict), "an object or null"),
    ("precision", _optional(dict), "an object or null"),
    ("custom_ops", lambda v: v is None or (isinstance(v, list) and all(isinstance(op, dict) for op in v)),
     "a list of objects"),
    ("profiles", _optional(list), "a list"),
    ("rebuild_command", _optional(str), "a string or null"),
)
_TEXT_FIELDS = (("engine", "sha256"), ("source_onnx", "sha256"), ("tensorrt", "version"), ("device", "name"))


def manifest_problem(manifest):
    """Why a manifest cannot be used (None when it can): the first field of the wrong type. A manifest travels with
    its engine and may be damaged or edited; every field a reader relies on is checked here, once."""
    for field, check, what in _FIELDS:
        if not check(manifest.get(field)):
            return "{!r} must be {}, got {!r}".format(field, what, manifest.get(field))
    for parent, field in _TEXT_FIELDS:
        value = (manifest.get(parent) or {}).get(field)
        if value is not None and not isinstance(value, str):
            return "'{}.{}' must be a string, got {!r}".format(parent, field, value)
    capability = (manifest.get("device") or {}).get("compute_capability")
    if capability is not None and (isinstance(capability, bool) or not isinstance(capability, (str, int, float))):
        return "'device.compute_capability' must be a string, got {!r}".format(capability)
    compatible = (manifest.get("tensorrt") or {}).get("version_compatible")
    if compatible is not None and not isinstance(compatible, bool):
        return "'tensorrt.version_compatible' must be true or false, got {!r}".format(compatible)
    for index, profile in enumerate(manifest.get("profiles") or [], 1):
        problem = _profile_problem(profile)
        if problem:
            return "profile {}: {}".format(index, problem)
    return None


def _sm(capability):
    return "sm_{}".format(str(capability).replace(".", "")) if capability else None


def _where(version, device):
    text = "TensorRT {}".format(version)
    if device and (device.get("name") or device.get("compute_capability")):
        parts = [p for p in (device.get("name"), _sm(device.get("compute_capability"))) if p]
        text += " on {}".format(parts[0] if len(parts) == 1 else "{} ({})".format(*parts))
    return text


def _version_tuple(text):
    parts = []
    for piece in str(text).split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts)


def compatibility_problem(manifest, runtime_version, device=None):
    """Why an engine from ``manifest`` cannot run on TensorRT ``runtime_version`` and ``device``; None if it can.

    Plain engines need the exact TensorRT version that built them; version-compatible engines run on the same
    major version, same or newer (TensorRT's engine-compatibility rules). The GPU must have the compute capability
    the engine was built for.
    """
    built = manifest.get("tensorrt") or {}
    built_version = built.get("version")
    built_device = manifest.get("device") or {}
    problem = False
    if built_version and runtime_version is not None:
        have, want = _version_tuple(runtime_version), _version_tuple(built_version)
        if built.get("version_compatible"):
            problem = have[0] != want[0] or have < want
        else:
            problem = have != want
    capability = built_device.get("compute_capability")
    if capability and device and device.get("compute_capability") and \
            str(device["compute_capability"]) != str(capability):
        problem = True
    if not problem:
        return None
    return "engine built with {}; this machine has {}".format(_where(built_version, built_device),
                                                             _where(runtime_version, device))


def preflight(engine_path, manifest, runtime_version, device=None):
    """Raise :class:`EdgeAttnError` (exit 2) with the rebuild command if the engine cannot run here."""
    if manifest is None:
        return
    problem = compatibility_problem(manifest, runtime_version, device)
    if problem:
        command = manifest.get("rebuild_command") or "edgeattn build MODEL.onnx -o {}".format(engine_path)
        raise EdgeAttnError("{}: rebuild with `{}`".format(problem, command))


def check_batch(manifest, batch):
    """Input shapes for ``batch`` from the manifest's first profile (opt dims, batch replaced); raises if the batch
    is outside the profile. Returns ``[(name, dims)]`` or None when the manifest has no profile."""
    profiles = manifest.get("profiles") or []
    if not profiles:
        return None
    shapes = []
    for name, entry in profiles[0]["inputs"].items():
        low, opt, high = entry["min"], entry["opt"], entry["max"]
        if not low:
            shapes.append((name, []))
            continue
        if not low[0] <= batch <= high[0]:
            raise EdgeAttnError(
                "batch {} is outside the engine's profile for input {!r} (batch {}..{}); rebuild with "
                "`edgeattn build --shapes {}:{},{},{}`".format(
                    batch, name, low[0], high[0], name, "x".join(str(d) for d in [min(low[0], batch)] + low[1:]),
                    "x".join(str(d) for d in [batch] + opt[1:]),
                    "x".join(str(d) for d in [max(high[0], batch)] + high[1:])))
        shapes.append((name, [batch] + list(opt[1:])))
    return shapes
