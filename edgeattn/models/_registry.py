"""The model registry: names -> builder functions, timm style.

A builder is a function ``name(img_size=224, num_classes=1000, **cfg) -> nn.Module`` decorated with
:func:`register_model`. :func:`create_model` validates the arguments against the builder's signature (an unknown
key is a user error, not a TypeError traceback), builds the model and stamps it with ``edgeattn_arch`` and
``edgeattn_config`` so that ``create_model(model.edgeattn_arch, **model.edgeattn_config)`` rebuilds the same
architecture (what checkpoints rely on).
"""
import contextlib
import difflib
import fnmatch
import inspect
import json
import threading

from ..errors import EdgeAttnError

_REGISTRY = {}


class ModelEntry(object):
    """One registered architecture: its builder plus what the listings show about it."""

    def __init__(self, name, builder, family, paper):
        self.name = name
        self.builder = builder
        self.family = family
        self.paper = paper or {}

    @property
    def summary(self):
        doc = inspect.getdoc(self.builder) or ""
        return doc.strip().splitlines()[0] if doc.strip() else self.name

    @property
    def default_img_size(self):
        """The builder's own default resolution (384 for the ViT-B/16-384 family, 224 for the rest)."""
        parameter = inspect.signature(self.builder).parameters.get("img_size")
        return parameter.default if parameter is not None and isinstance(parameter.default, int) else 224

    def config_keys(self):
        """Keyword arguments the builder accepts besides img_size and num_classes, with their defaults."""
        keys = {}
        for name, parameter in inspect.signature(self.builder).parameters.items():
            if name in ("img_size", "num_classes") or parameter.kind is not inspect.Parameter.KEYWORD_ONLY:
                continue
            keys[name] = parameter.default
        return keys


def register_model(fn=None, *, family=None, paper=None):
    """Register a model builder under its function name.

    Use as ``@register_model`` or ``@register_model(family="cswin", paper={...})``. ``paper`` holds the numbers a
    paper's table states for this exact architecture at 224x224 (``params``, ``macs``, ``macs_fa``, ``source``);
    the ``edgeattn models`` listing and the tests compare against them.
    """

    def decorate(builder):
        name = builder.__name__
        if name in _REGISTRY:
            raise ValueError("model {!r} is registered twice".format(name))
        _REGISTRY[name] = ModelEntry(name, builder, family or builder.__module__.rsplit(".", 1)[-1], paper)
        return builder

    if fn is not None:
        return decorate(fn)
    return decorate


def list_models(pattern="*"):
    """Sorted registered names matching a shell-style ``pattern`` (case-insensitive)."""
    pattern = (pattern or "*").lower()
    return sorted(name for name in _REGISTRY if fnmatch.fnmatchcase(name.lower(), pattern))


def is_model(name):
    return name in _REGISTRY


def _entry(name):
    entry = _REGISTRY.get(name)
    if entry is None:
        close = difflib.get_close_matches(str(name), list(_REGISTRY), n=3, cutoff=0.5)
        hint = "did you mean {}?".format(", ".join(close)) if close else "`edgeattn models` lists them."
        raise EdgeAttnError("unknown model architecture {!r}; {}".format(name, hint))
    return entry


def model_info(name):
    """What the registry knows about ``name`` without building it: family, summary, paper numbers, config keys."""
    entry = _entry(name)
    return {
        "name": entry.name,
        "family": entry.family,
        "summary": entry.summary,
        "paper": dict(entry.paper),
        "config_keys": {key: _jsonable(value) for key, value in entry.config_keys().items()},
    }


def _jsonable(value):
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


#: torch.nn.init's in-place initialisers (what nn.Linear/Conv/norm reset_parameters and our builders call)
_INITIALISERS = ("uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_", "dirac_",
                 "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "sparse_")


#: per thread: how many initialisation_skipped() blocks this thread is in
_SKIPPING = threading.local()


def _skippable(original):
    def initialiser(tensor, *args, **kwargs):
        if getattr(_SKIPPING, "depth", 0):
            return tensor
        return original(tensor, *args, **kwargs)

    initialiser.edgeattn_skippable = True
    initialiser.__wrapped__ = original
    return initialiser


@contextlib.contextmanager
def initialisation_skipped():
    """Build models whose weights are about to be overwritten, or that have no storage (the meta device): in this
    thread, torch.nn.init's initialisers leave the tensor as it is (allocated, not filled).

    Random initialisation is most of the cost of building a large model (1.3 of 1.5 s for cswin_144_24322_large)
    and half of building one on the meta device, where torch runs the initialisers' meta kernels in Python. A
    checkpoint load replaces every parameter and persistent buffer anyway (strict), while the non-persistent
    buffers (index tables, fixed embeddings), which no initialiser fills, are still computed. The initialisers are
    swapped for wrappers for the duration of the outermost block; the wrappers skip only in threads inside a block,
    so another thread building a model meanwhile still initialises it."""
    import torch.nn.init as init

    installed = {}
    for name in _INITIALISERS:
        current = getattr(init, name, None)
        if current is not None and not getattr(current, "edgeattn_skippable", False):
            installed[name] = current
            setattr(init, name, _skippable(current))
    _SKIPPING.depth = getattr(_SKIPPING, "depth", 0) + 1
    try:
        yield
    finally:
        _SKIPPING.depth -= 1
        for name, original in installed.items():
            setattr(init, name, original)


def create_model(name, img_size=None, num_classes=1000, *, initialise_weights=True, **cfg):
    """Build the registered architecture ``name`` for ``img_size`` x ``img_size`` RGB input (None: the builder's
    default, 224 for most models).

    ``initialise_weights=False`` is for a model whose parameters and persistent buffers are about to be replaced
    (a checkpoint load): torch.nn.init's initialisers leave them allocated but unfilled, which saves most of the
    build time of a large model; non-persistent buffers are still computed (:func:`initialisation_skipped`).

    Raises EdgeAttnError for an unknown name, an unknown or malformed config key, or an input resolution the
    architecture's structure cannot take (the message names the constraint).
    """
    entry = _entry(name)
    accepted = entry.config_keys()
    unknown = sorted(set(cfg) - set(accepted))
    if unknown:
        raise EdgeAttnError(
            "{} does not take config key(s) {}; accepted keys: {}".format(
                name, ", ".join(unknown), ", ".join(sorted(accepted)) or "none")
        )
    if img_size is None:
        img_size = entry.default_img_size
    if isinstance(img_size, bool) or not isinstance(img_size, int) or img_size <= 0:
        raise EdgeAttnError("{}: img_size must be a positive integer, got {!r}".format(name, img_size))
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes <= 0:
        raise EdgeAttnError("{}: num_classes must be a positive integer, got {!r}".format(name, num_classes))
    import torch

    # nothing to fill on the meta device (parameter counts, shape checks): torch's initialisers would only run their
    # Python meta kernels (half the time of building a model there)
    skip = not initialise_weights or torch.get_default_device().type == "meta"
    with initialisation_skipped() if skip else contextlib.nullcontext():
        model = entry.builder(img_size=img_size, num_classes=num_classes, **cfg)
    config = dict(getattr(model, "edgeattn_config", None) or {})
    config.update({"img_size": img_size, "num_classes": num_classes})
    config = _jsonable(config)
    json.dumps(config)  # a builder that stores something JSON cannot hold is a bug, caught here
    model.edgeattn_arch = name
    model.edgeattn_config = config
    return model
