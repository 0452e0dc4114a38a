"""Model checkpoints: our own safe format, and the state dicts that timm and the papers' official code write.

Why one module: saving, reading (``torch.save`` or safetensors, wrapper keys, ``module.`` prefixes, the trust
rule), converting an official layout and the strict build-and-load are one path with one refusal (a file that does
not fit names the unmatched keys on both sides and the layouts tried); the layouts themselves live in
:mod:`edgeattn.models.layouts`.

Our format is a plain dictionary written with ``torch.save`` and read back with ``torch.load(weights_only=True)``,
which never executes code from the file::

    {"format": "edgeattn.checkpoint", "format_version": 1, "arch": <registered name>,
     "config": <JSON-able kwargs for create_model>, "state_dict": {name: tensor}, "edgeattn_version": "x.y.z"}

(``save_checkpoint(model, "x.safetensors")`` writes the same as a safetensors file with arch and config in its
metadata.)

Other checkpoints load when the architecture is known (``arch=`` / ``--arch``, or a registered name in the file's
``arch`` entry): a bare state dict, or the first of the wrappers ``model``, ``state_dict``, ``model_ema``,
``state_dict_ema``, ``module`` that holds one (``key=`` picks another), from ``torch.save`` files or
``.safetensors``. ``module.`` (DistributedDataParallel) and ``_orig_mod.`` (``torch.compile``) prefixes are
stripped. The keys may be ours or an official layout (timm, mit-han-lab EfficientViT, microsoft CSWin,
fudan-zvg SOFT), recognised and converted by the declared rules of :mod:`edgeattn.models.layouts`; a layout
that needs other numerics than our defaults builds the model with them (timm's LiteMLA eps). The file must fit
the architecture exactly: every key used, every weight present, every shape equal, or nothing is loaded.

Files that can only be read by unpickling arbitrary Python objects (a whole pickled ``nn.Module``) and TorchScript
archives (``torch.jit.save``) run code from the file when loaded; they are accepted only with
``trust_pickle=True`` (CLI: ``--trust-pickle``), and then with a warning. The one class besides tensors and
containers that is read without it is ``argparse.Namespace``, which timm's training scripts store as ``args``
(unpickling it only sets attributes). Every failure is one EdgeAttnError line.
"""
import argparse
import io
import json
import os
import pickletools
import struct
import warnings
import zipfile

from .. import filekind
from .._io import atomic_path
from .._version import __version__
from ..errors import EdgeAttnError, MissingDependencyError

FORMAT_NAME = "edgeattn.checkpoint"
FORMAT_VERSION = 1
#: where training scripts put the weights, in the order they are looked for
WRAPPER_KEYS = ("model", "state_dict", "model_ema", "state_dict_ema", "module")
#: key prefixes added by DistributedDataParallel and torch.compile
STRIPPED_PREFIXES = ("module.", "_orig_mod.")
_KEY_LIST_LIMIT = 5
_TRUST_HINT = ("loading it executes code stored in the file; pass trust_pickle=True (CLI: --trust-pickle) only if "
               "you trust where it came from")
_ARCH_HINT = "pass arch=NAME (CLI: --arch NAME); `edgeattn models` lists the architectures"


def save_checkpoint(model, path):
    """Write ``model`` (built by :func:`edgeattn.models.create_model`) to ``path`` atomically; a ``.safetensors``
    path writes a safetensors file (arch and config in its metadata), anything else our torch.save format."""
    import torch

    arch = getattr(model, "edgeattn_arch", None)
    config = getattr(model, "edgeattn_config", None)
    if not arch or config is None:
        raise EdgeAttnError(
            "cannot save a checkpoint for a model without edgeattn_arch/edgeattn_config; build it with "
            "edgeattn.models.create_model")
    state_dict = {name: tensor.detach().to("cpu").contiguous().clone()
                  for name, tensor in model.state_dict().items()}
    if os.fspath(path).endswith(".safetensors"):
        save_file = _import_safetensors("writing .safetensors checkpoints").save_file
        metadata = {"format": FORMAT_NAME, "format_version": str(FORMAT_VERSION), "arch": arch,
                    "config": json.dumps(dict(config)), "edgeattn_version": __version__}
        with atomic_path(path) as tmp:
            save_file(state_dict, tmp, metadata=metadata)
        return os.fspath(path)
    payload = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "arch": arch,
        "config": dict(config),
        "state_dict": state_dict,
        "edgeattn_version": __version__,
    }
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)
    return os.fspath(path)


def load_checkpoint(path, trust_pickle=False, map_location="cpu", arch=None, key=None):
    """Rebuild the model stored at ``path`` and return it in eval mode.

    ``arch``: the registered architecture of a state dict (for our own format it must agree with the file).
    ``key``: the entry of a wrapper dictionary that holds the weights (default: the first of
    :data:`WRAPPER_KEYS`). ``trust_pickle=True`` additionally accepts whole pickled modules and TorchScript
    archives (with a warning); those are returned as they were saved. The returned model carries
    ``edgeattn_source``: where the weights came from (see :func:`describe_source`).
    """
    import torch

    path = os.fspath(path)
    if not os.path.exists(path):
        raise EdgeAttnError("checkpoint not found: {}".format(path))
    if os.path.isdir(path):
        raise EdgeAttnError("checkpoint path is a directory, not a file: {}".format(path))
    if os.path.getsize(path) == 0:
        raise EdgeAttnError("checkpoint {} is empty (0 bytes): truncated or not written".format(path))
    filekind.require(path, ("zip", "safetensors", "pickle"), "a PyTorch checkpoint")

    if _is_safetensors(path):
        tensors, metadata = _read_safetensors(path)
        if metadata.get("format") == FORMAT_NAME:
            payload = _payload_from_metadata(path, tensors, metadata)
            return _model_from_payload(path, payload, map_location, arch=arch, file_format="safetensors")
        return _model_from_state_dict(path, tensors, arch, key, map_location, "safetensors",
                                      file_arch=metadata.get("arch"))

    kind = _sniff(path)
    if kind == "torchscript":
        if not trust_pickle:
            raise EdgeAttnError("{} is a TorchScript archive, not an edgeattn checkpoint; {}".format(path, _TRUST_HINT))
        warnings.warn("loading TorchScript archive {} with trust_pickle=True: it runs code from the file".format(path),
                      stacklevel=2)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # torch >= 2.9 deprecates TorchScript
                module = torch.jit.load(path, map_location=map_location)
        except Exception as error:  # noqa: BLE001 - any failure of a corrupt archive is the user's file
            raise EdgeAttnError("cannot load TorchScript archive {}: {}".format(path, _first_line(error)))
        return module.eval()

    _refuse_names_no_code_has(path, kind)
    try:
        with torch.serialization.safe_globals([argparse.Namespace]):
            payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # noqa: BLE001 - classified below
        payload = _load_untrusted_or_fail(path, error, kind, trust_pickle, map_location)
        if isinstance(payload, torch.nn.Module):
            return payload.eval()
    if _is_edgeattn_payload(payload):
        return _model_from_payload(path, payload, map_location, arch=arch)
    file_arch = payload.get("arch") if isinstance(payload, dict) else None
    return _model_from_state_dict(path, payload, arch, key, map_location, "torch", file_arch=file_arch)


def describe_source(source):
    """One line saying where a loaded model's weights came from (``model.edgeattn_source``)."""
    if not source:
        return ""
    parts = []
    where = os.path.basename(source["path"])
    if source.get("entry"):
        where = "{!r} entry of {}".format(source["entry"], where)
        others = [name for name in source.get("other_entries") or () if name != source["entry"]]
        if others:
            where += " (also there: {})".format(", ".join(repr(name) for name in others))
    parts.append(where)
    if source.get("stripped"):
        parts.append("prefix {} stripped".format(" + ".join(repr(p) for p in source["stripped"])))
    layout = source.get("layout") or "edgeattn"
    text = "{} layout".format(layout)
    if source.get("notes"):
        text += " ({})".format(source["notes"])
    parts.append(text)
    parts.append("{} ({})".format(source["arch"], "from the file" if source.get("arch_from") == "file"
                                  else "--arch" if source.get("arch_from") == "argument" else "checkpoint"))
    if source.get("num_classes") not in (None, 1000):
        parts.append("{} classes (from the classifier)".format(source["num_classes"]))
    return "; ".join(parts)


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _corruption_detail(error):
    """A few words on why torch.load failed, instead of its multi-line advice about weights_only."""
    message = str(error)
    if "central directory" in message or "PytorchStreamReader" in message:
        return "incomplete zip archive"
    if "Weights only load failed" in message or isinstance(error, KeyError):
        return "no readable pickle data"
    if isinstance(error, EOFError):
        return "unexpected end of file"
    return "{}: {}".format(type(error).__name__, _first_line(error)[:100])


def _sniff(path):
    """'torchscript', 'zip' (torch.save >= 1.6), or 'legacy' (anything else; maybe an old pickle, maybe junk)."""
    try:
        if not zipfile.is_zipfile(path):
            return "legacy"
    except zipfile.BadZipFile:  # is_zipfile itself raises for a damaged zip64 end record ("span multiple disks")
        return "zip"
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except Exception:  # noqa: BLE001 - a damaged directory (bad names, sizes, flags): torch.load reports it
        return "zip"
    if any(name.endswith("/constants.pkl") or "/code/" in name for name in names):
        return "torchscript"
    return "zip"


def _pickled_globals(path, kind, partial=False):
    """The classes/functions the checkpoint's pickle refers to, or None when it is not a readable pickle.
    ``partial``: also those named before a pickle turned out damaged."""
    try:
        if kind == "zip":
            with zipfile.ZipFile(path) as archive:
                data_name = next(name for name in archive.namelist() if name.endswith("data.pkl"))
                data = archive.read(data_name)
            return _globals_of_pickles(io.BytesIO(data), len(data), kind, partial)
        with open(path, "rb") as handle:  # read as far as the pickles go, not the tensor bytes after them
            return _globals_of_pickles(handle, os.path.getsize(path), kind, partial)
    except Exception:  # noqa: BLE001 - unreadable archive: not a pickle we can inspect
        return None


def _globals_of_pickles(stream, size, kind, partial):
    found = []
    parsed = 0
    # A legacy torch.save file is several pickles back to back followed by raw tensor bytes: walk the pickles
    # until the first one that does not parse. The first one must parse, or this is not a pickle at all.
    while stream.tell() < size and parsed < 8:
        strings = []
        names = []
        try:
            for opcode, arg, _ in pickletools.genops(stream):
                if opcode.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
                    strings.append(arg)
                elif opcode.name == "GLOBAL":
                    names.append(arg.replace(" ", "."))
                elif opcode.name == "STACK_GLOBAL" and len(strings) >= 2:
                    names.append("{}.{}".format(strings[-2], strings[-1]))
        except Exception:  # noqa: BLE001 - end of the pickles (or junk)
            if partial:
                found.extend(names)
            break
        parsed += 1
        found.extend(names)
        if kind == "zip":
            break
    return found if parsed or partial else None


#: longer than any module and qualified name a checkpoint refers to
_MAX_NAME_CHARS = 1000


def _refuse_names_no_code_has(path, kind):
    """Refuse a pickle that refers to a global no Python code can have (not a dotted identifier, or thousands of
    characters long): damage, and torch.load must not see it. torch 2.x matches its refusal message with
    ``(\\S+) must be (\\S+) to load``, which backtracks quadratically over a long name (a 100 kB name inserted into
    a legacy file took minutes of CPU)."""
    for name in _pickled_globals(path, kind, partial=True) or ():
        if len(name) > _MAX_NAME_CHARS or not all(part.isidentifier() for part in name.split(".")):
            raise EdgeAttnError("cannot read checkpoint {}: the file is truncated, corrupt or not a PyTorch checkpoint "
                                "(its pickle refers to {!r}, which is no Python name)".format(
                                    path, name[:40] + "..." if len(name) > 40 else name))


_SAFE_PREFIXES = ("collections.OrderedDict", "torch._utils._rebuild", "torch.FloatStorage", "torch.DoubleStorage",
                  "torch.HalfStorage", "torch.BFloat16Storage", "torch.LongStorage", "torch.IntStorage",
                  "torch.ShortStorage", "torch.CharStorage", "torch.ByteStorage", "torch.BoolStorage",
                  "torch.storage", "torch.float", "torch.bfloat", "torch.int", "torch.uint", "torch.bool",
                  "torch.double", "torch.half", "torch.long", "torch.device", "torch.Size", "_codecs.encode",
                  "builtins.set", "builtins.frozenset", "torch.serialization._get_layout", "torch._tensor")


def _load_untrusted_or_fail(path, error, kind, trust_pickle, map_location):
    import torch

    message = str(error)
    refused = "Weights only load failed" in message
    unsafe = None
    if refused:
        found = _pickled_globals(path, kind)
        if found is not None:
            unsafe = [name for name in found if not name.startswith(_SAFE_PREFIXES)]
    if not unsafe:
        raise EdgeAttnError("cannot read checkpoint {}: the file is truncated, corrupt or not a PyTorch checkpoint "
                            "({})".format(path, _corruption_detail(error)))
    if not trust_pickle:
        raise EdgeAttnError("{} contains pickled Python objects (e.g. {}), not an edgeattn checkpoint; {}".format(
            path, unsafe[0], _TRUST_HINT))
    warnings.warn("unpickling {} with trust_pickle=True: it can execute code from the file".format(path),
                  stacklevel=3)
    try:
        return torch.load(path, map_location=map_location, weights_only=False)
    except Exception as trusted_error:  # noqa: BLE001
        raise EdgeAttnError("cannot unpickle {}: {}".format(path, _first_line(trusted_error)))


def _import_safetensors(needed_for):
    try:
        import safetensors.torch
    except ImportError:
        raise MissingDependencyError("safetensors", needed_for, "install it with `pip install safetensors` (part "
                                                                "of the export extra)")
    return safetensors.torch


def _is_safetensors(path):
    """A safetensors file: 8-byte little-endian header length, then that many bytes of JSON."""
    if path.endswith(".safetensors"):
        return True
    with open(path, "rb") as handle:
        head = handle.read(9)
    if len(head) < 9:
        return False
    (length,) = struct.unpack("<Q", head[:8])
    return head[8:9] == b"{" and 0 < length <= os.path.getsize(path) - 8


def _read_safetensors(path):
    _import_safetensors("reading .safetensors checkpoints")
    from safetensors import safe_open

    try:
        with safe_open(path, framework="pt", device="cpu") as handle:
            metadata = dict(handle.metadata() or {})
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    except Exception as error:  # noqa: BLE001 - safetensors raises its own error types for damaged files
        raise EdgeAttnError("cannot read safetensors file {}: {}".format(path, _first_line(error)))
    if not tensors:
        raise EdgeAttnError("safetensors file {} holds no tensors".format(path))
    return tensors, metadata


def _payload_from_metadata(path, tensors, metadata):
    try:
        config = json.loads(metadata.get("config") or "{}")
        version = int(metadata.get("format_version", FORMAT_VERSION))
    except ValueError:
        raise EdgeAttnError("{} is malformed: its edgeattn metadata (config, format_version) does not parse".format(
            path))
    return {"format": FORMAT_NAME, "format_version": version, "arch": metadata.get("arch"), "config": config,
            "state_dict": tensors, "edgeattn_version": metadata.get("edgeattn_version")}


def _is_edgeattn_payload(payload):
    return isinstance(payload, dict) and (payload.get("format") == FORMAT_NAME or (
        "edgeattn_version" in payload and "arch" in payload and "state_dict" in payload))


def _model_from_payload(path, payload, map_location="cpu", arch=None, file_format="edgeattn"):
    """Our own format: arch and config are in the file."""
    version = payload.get("format_version", FORMAT_VERSION)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise EdgeAttnError("{} uses checkpoint format version {!r}; this edgeattn ({}) reads up to {}".format(
            path, version, __version__, FORMAT_VERSION))
    stored_arch = payload.get("arch")
    config = payload.get("config") or {}
    state_dict = payload.get("state_dict")
    if not isinstance(stored_arch, str) or not isinstance(config, dict) or not _is_state_dict(state_dict):
        raise EdgeAttnError("{} is malformed: 'arch' must be a string, 'config' a dictionary and 'state_dict' a "
                            "dictionary of tensors".format(path))
    if arch and arch != stored_arch:
        raise EdgeAttnError("{} holds a {} model, not {} (drop --arch or pick the right file)".format(
            path, stored_arch, arch))
    from .layouts import NATIVE

    model = _build_and_load(path, stored_arch, config, state_dict, [NATIVE], map_location)
    model.edgeattn_source = {"path": path, "format": file_format, "entry": None, "stripped": [],
                             "layout": None, "arch": stored_arch, "arch_from": "checkpoint"}
    return model


def _is_state_dict(value):
    import torch

    return isinstance(value, dict) and bool(value) and all(
        isinstance(name, str) and isinstance(tensor, torch.Tensor) for name, tensor in value.items())


def _unwrap(path, payload, key):
    """(state dict, the wrapper entry it came from or None, the wrapper entries present)."""
    if not isinstance(payload, dict):
        raise EdgeAttnError("{} does not hold a state dict or an edgeattn checkpoint (found a {})".format(
            path, type(payload).__name__))
    present = [name for name in WRAPPER_KEYS if _is_state_dict(payload.get(name))]
    if key is not None:
        if key not in payload:
            raise EdgeAttnError("{} has no entry {!r} (entries: {})".format(path, key, _listed(
                [str(name) for name in payload])))
        if not _is_state_dict(payload[key]):
            raise EdgeAttnError("entry {!r} of {} is not a dictionary of tensors".format(key, path))
        return payload[key], key, present
    if present:
        return payload[present[0]], present[0], present
    if _is_state_dict(payload):
        return payload, None, []
    tensors = [name for name, value in payload.items() if _is_state_dict(value)]
    raise EdgeAttnError("{} holds no state dict: none of the entries {} is a dictionary of tensors{}".format(
        path, "/".join(WRAPPER_KEYS), "; tensors are under {} (pass key=... / --checkpoint-key)".format(
            _listed([repr(name) for name in tensors])) if tensors else " (entries: {})".format(
            _listed([str(name) for name in payload]))))


def _strip_prefixes(state_dict):
    """Strip ``module.`` / ``_orig_mod.`` (in any nesting) when every key carries it."""
    stripped = []
    changed = True
    while changed:
        changed = False
        for prefix in STRIPPED_PREFIXES:
            if all(name.startswith(prefix) for name in state_dict):
                state_dict = {name[len(prefix):]: tensor for name, tensor in state_dict.items()}
                stripped.append(prefix)
                changed = True
    return state_dict, stripped


def _model_from_state_dict(path, payload, arch, key, map_location, file_format, file_arch=None):
    from ._registry import is_model

    state_dict, entry, present = _unwrap(path, payload, key)
    state_dict, stripped = _strip_prefixes(state_dict)
    if isinstance(file_arch, str) and not is_model(file_arch):
        named = file_arch
        file_arch = None
    else:
        named = None
    if arch and file_arch and arch != file_arch:
        raise EdgeAttnError("{} says its architecture is {}, not {} (drop --arch or pick the right file)".format(
            path, file_arch, arch))
    chosen = arch or file_arch
    if not chosen:
        what = "a bare state dict" if entry is None else "a state dict (in {!r})".format(entry)
        detail = (" (the file names its architecture {!r}, which is not a registered model)".format(named)
                  if named else "")
        raise EdgeAttnError("{} holds {} without an architecture name{}; {}".format(path, what, detail, _ARCH_HINT))
    from .layouts import layouts_for

    model, layout = _build_and_load(path, chosen, {}, state_dict, layouts_for(chosen), map_location,
                                    return_layout=True, infer_classes=True)
    model.edgeattn_source = {
        "path": path, "format": file_format, "entry": entry, "other_entries": present, "stripped": stripped,
        "layout": layout.name, "layout_source": layout.source, "notes": layout.notes,
        "config": dict(layout.config), "num_classes": model.edgeattn_config.get("num_classes"), "arch": chosen,
        "arch_from": "argument" if arch else "file",
        "tensors": len(state_dict)}
    return model


_META_STATES = {}


def _meta_state(arch, config, path):
    """Names and shapes of ``arch`` built with ``config``, without allocating weights (remembered: the search for
    a fitting architecture builds every model of a family)."""
    import torch

    from ._registry import create_model

    key = (arch, json.dumps(config, sort_keys=True, default=str))
    if key not in _META_STATES:
        try:
            with torch.device("meta"):
                model = create_model(arch, **config)
        except EdgeAttnError as error:
            raise EdgeAttnError("checkpoint {}: {}".format(path, error.format_message()))
        _META_STATES[key] = {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}
    return _META_STATES[key]


def _build_and_load(path, arch, config, state_dict, layouts, map_location, return_layout=False,
                    infer_classes=False):
    """Convert ``state_dict`` with the first of ``layouts`` that fits ``arch`` exactly, check every shape, build
    the model and load it (strict). Raises one EdgeAttnError line otherwise; nothing is half loaded.
    ``infer_classes``: a classifier with another number of rows sets ``num_classes`` (foreign state dicts)."""
    import torch

    from ._registry import create_model

    conversions = []
    for layout in layouts:
        layout_config = dict(config)
        layout_config.update(layout.config)
        expected = _meta_state(arch, layout_config, path)
        conversion = layout.convert(state_dict, expected)
        conversions.append(conversion)
        if conversion.fits:
            break
    else:
        raise EdgeAttnError(_mismatch_message(path, arch, conversions, state_dict))
    if conversion.bad_join is not None:
        sources, shapes = conversion.bad_join
        raise EdgeAttnError("checkpoint {}: {} cannot be joined (shapes {})".format(
            path, " + ".join(sources), ", ".join(str(s) for s in shapes)))
    classes = _class_count(conversion.state_dict, expected, layout_config) if infer_classes else None
    if classes is not None:
        # A fine-tuned classifier: only the rows of the head differ, so the class count is read from them.
        layout_config["num_classes"] = classes
        expected = _meta_state(arch, layout_config, path)
    for name, shape in expected.items():
        stored = tuple(conversion.state_dict[name].shape)
        if stored != shape:
            source = conversion.source_name(name)
            label = name if source == name else "{} (-> {})".format(source, name)
            raise EdgeAttnError("checkpoint {} does not match architecture {}: {} has shape {}, expected {}{}".format(
                path, arch, label, stored, shape, _suggestion(arch, state_dict)))
    try:
        # Build without storage first: random initialisation of a large model costs more than loading it.
        with torch.device("meta"):
            model = create_model(arch, **layout_config)
    except EdgeAttnError as error:
        raise EdgeAttnError("checkpoint {}: {}".format(path, error.format_message()))
    if any(name not in expected for name, _ in model.named_buffers()):
        # non-persistent buffers are computed at construction and absent from the file: build for real, without
        # the random initialisation the file's weights replace
        model = create_model(arch, initialise_weights=False, **layout_config)
    else:
        model = model.to_empty(device=_device_of(map_location))
    model.load_state_dict(conversion.state_dict, strict=True)
    model = model.eval()
    return (model, conversion.layout) if return_layout else model


def _class_count(state_dict, expected, config):
    """The class count of a checkpoint whose only shape differences are the first dimension of tensors that have
    ``num_classes`` rows (the classifier's weight and bias), all with the same new count; else None."""
    default = config.get("num_classes", 1000)
    counts = set()
    for name, shape in expected.items():
        stored = tuple(state_dict[name].shape)
        if stored == shape:
            continue
        if not shape or shape[0] != default or len(stored) != len(shape) or stored[1:] != shape[1:]:
            return None
        counts.add(stored[0])
    if len(counts) != 1:
        return None
    count = counts.pop()
    return count if count > 0 else None


def _mismatch_message(path, arch, conversions, state_dict):
    closest = max(conversions, key=lambda conversion: conversion.matched)
    parts = []
    if closest.missing:
        parts.append("{} missing keys: {}".format(len(closest.missing), _listed(closest.missing)))
    if closest.unmatched:
        parts.append("{} unexpected keys: {}".format(len(closest.unmatched), _listed(closest.unmatched)))
    tried = ", ".join(conversion.layout.name for conversion in conversions)
    if len(conversions) > 1:
        tried += " (closest: {}, {} of {} keys placed)".format(closest.layout.name, closest.matched,
                                                            len(state_dict))
    return "checkpoint {} does not match architecture {}: {}; layouts tried: {}{}".format(
        path, arch, "; ".join(parts), tried, _suggestion(arch, state_dict))


def _suggestion(arch, state_dict):
    """" (the weights fit X: --arch X)" when another registered model of the same family takes them exactly."""
    from ._registry import list_models, model_info
    from .layouts import layouts_for

    family = model_info(arch)["family"]
    for other in list_models():
        if other == arch or model_info(other)["family"] != family:
            continue
        for layout in layouts_for(other):
            try:
                expected = _meta_state(other, dict(layout.config), "")
            except EdgeAttnError:
                break
            conversion = layout.convert(state_dict, expected)
            if conversion.fits and all(tuple(conversion.state_dict[name].shape) == shape
                                       for name, shape in expected.items()):
                return " (the weights fit {0} in the {1} layout: --arch {0})".format(other, layout.name)
    return ""


def _device_of(map_location):
    import torch

    if isinstance(map_location, (str, torch.device)):
        return torch.device(map_location)
    return torch.device("cpu")


def _listed(keys):
    shown = ", ".join(keys[:_KEY_LIST_LIMIT])
    if len(keys) > _KEY_LIST_LIMIT:
        shown += " (+{} more)".format(len(keys) - _KEY_LIST_LIMIT)
    return shown
