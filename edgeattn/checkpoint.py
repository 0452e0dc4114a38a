"""Safe model checkpoints.

Our format is a plain dictionary written with ``torch.save`` and read back with ``torch.load(weights_only=True)``,
which never executes code from the file::

    {"format": "edgeattn.checkpoint", "format_version": 1, "arch": <registered name>,
     "config": <JSON-able kwargs for create_model>, "state_dict": {name: tensor}, "edgeattn_version": "x.y.z"}

Files that can only be read by unpickling arbitrary Python objects (a whole pickled ``nn.Module``) and TorchScript
archives (``torch.jit.save``) run code from the file when loaded; they are accepted only with
``trust_pickle=True`` (CLI: ``--trust-pickle``), and then with a warning. Every failure is one EdgeAttnError line:
missing file, truncated or corrupt file, unknown architecture, keys that do not match the architecture, untrusted
pickle, a bare state dict that does not say which architecture it belongs to.
"""
import io
import os
import pickletools
import warnings
import zipfile

from ._io import atomic_path
from ._version import __version__
from .errors import EdgeAttnError

FORMAT_NAME = "edgeattn.checkpoint"
FORMAT_VERSION = 1
_KEY_LIST_LIMIT = 5
_TRUST_HINT = ("loading it executes code stored in the file; pass trust_pickle=True (CLI: --trust-pickle) only if "
               "you trust where it came from")


def save_checkpoint(model, path):
    """Write ``model`` (built by :func:`edgeattn.models.create_model`) to ``path`` atomically."""
    import torch

    arch = getattr(model, "edgeattn_arch", None)
    config = getattr(model, "edgeattn_config", None)
    if not arch or config is None:
        raise EdgeAttnError(
            "cannot save a checkpoint for a model without edgeattn_arch/edgeattn_config; build it with "
            "edgeattn.models.create_model")
    state_dict = {name: tensor.detach().to("cpu").contiguous().clone()
                  for name, tensor in model.state_dict().items()}
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


def load_checkpoint(path, trust_pickle=False, map_location="cpu"):
    """Rebuild the model stored at ``path`` and return it in eval mode.

    ``trust_pickle=True`` additionally accepts whole pickled modules and TorchScript archives (with a warning);
    those are returned as they were saved.
    """
    import torch

    path = os.fspath(path)
    if not os.path.exists(path):
        raise EdgeAttnError("checkpoint not found: {}".format(path))
    if os.path.isdir(path):
        raise EdgeAttnError("checkpoint path is a directory, not a file: {}".format(path))
    if os.path.getsize(path) == 0:
        raise EdgeAttnError("checkpoint {} is empty (0 bytes): truncated or not written".format(path))

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

    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # noqa: BLE001 - classified below
        payload = _load_untrusted_or_fail(path, error, kind, trust_pickle, map_location)
        if isinstance(payload, torch.nn.Module):
            return payload.eval()
    return _model_from_payload(path, payload, map_location)


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
    if not zipfile.is_zipfile(path):
        return "legacy"
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError):
        return "zip"
    if any(name.endswith("/constants.pkl") or "/code/" in name for name in names):
        return "torchscript"
    return "zip"


def _pickled_globals(path, kind):
    """The classes/functions the checkpoint's pickle refers to, or None when it is not a readable pickle."""
    try:
        if kind == "zip":
            with zipfile.ZipFile(path) as archive:
                data_name = next(name for name in archive.namelist() if name.endswith("data.pkl"))
                data = archive.read(data_name)
        else:
            with open(path, "rb") as handle:
                data = handle.read()
    except Exception:  # noqa: BLE001 - unreadable archive: not a pickle we can inspect
        return None
    stream = io.BytesIO(data)
    found = []
    parsed = 0
    # A legacy torch.save file is several pickles back to back followed by raw tensor bytes: walk the pickles
    # until the first one that does not parse. The first one must parse, or this is not a pickle at all.
    while stream.tell() < len(data) and parsed < 8:
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
            break
        parsed += 1
        found.extend(names)
        if kind == "zip":
            break
    return found if parsed else None


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


def _model_from_payload(path, payload, map_location="cpu"):
    import torch

    from .models import create_model

    if not isinstance(payload, dict):
        raise EdgeAttnError("{} does not hold an edgeattn checkpoint (found a {})".format(
            path, type(payload).__name__))
    if "arch" not in payload or "state_dict" not in payload:
        if payload and all(isinstance(value, torch.Tensor) for value in payload.values()):
            raise EdgeAttnError("{} holds a bare state dict without an architecture name; save it with "
                                "edgeattn.save_checkpoint(model, path) from a model built by create_model".format(path))
        raise EdgeAttnError("{} is not an edgeattn checkpoint: it lacks the 'arch' and 'state_dict' entries".format(
            path))
    version = payload.get("format_version", FORMAT_VERSION)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise EdgeAttnError("{} uses checkpoint format version {!r}; this edgeattn ({}) reads up to {}".format(
            path, version, __version__, FORMAT_VERSION))
    arch = payload["arch"]
    config = payload.get("config") or {}
    state_dict = payload["state_dict"]
    if not isinstance(arch, str) or not isinstance(config, dict) or not isinstance(state_dict, dict):
        raise EdgeAttnError("{} is malformed: 'arch' must be a string, 'config' and 'state_dict' dictionaries".format(
            path))
    try:
        # Build without storage first: random initialisation of a large model costs more than loading it.
        with torch.device("meta"):
            model = create_model(arch, **config)
    except EdgeAttnError as error:
        raise EdgeAttnError("checkpoint {}: {}".format(path, error.format_message()))
    _check_keys(path, arch, model, state_dict)
    persistent = set(model.state_dict())
    if any(name not in persistent for name, _ in model.named_buffers()):
        # non-persistent buffers are computed at construction and absent from the file: build for real
        model = create_model(arch, **config)
    else:
        model = model.to_empty(device=_device_of(map_location))
    model.load_state_dict(state_dict, strict=True)
    return model.eval()


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


def _check_keys(path, arch, model, state_dict):
    expected = model.state_dict()
    missing = [key for key in expected if key not in state_dict]
    unexpected = [key for key in state_dict if key not in expected]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append("missing keys: {}".format(_listed(missing)))
        if unexpected:
            parts.append("unexpected keys: {}".format(_listed(unexpected)))
        raise EdgeAttnError("checkpoint {} does not match architecture {}: {}".format(path, arch, "; ".join(parts)))
    for key, tensor in expected.items():
        stored = state_dict[key]
        if not hasattr(stored, "shape") or tuple(stored.shape) != tuple(tensor.shape):
            raise EdgeAttnError("checkpoint {} does not match architecture {}: {} has shape {}, expected {}".format(
                path, arch, key, tuple(getattr(stored, "shape", ())), tuple(tensor.shape)))
