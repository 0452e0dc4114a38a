"""Parameter and multiply-accumulate (MAC) counts, the way the papers' tables count them.

Why one module: the counter (forward hooks plus a shape-only meta dispatch) and the per-module glue that feeds
:mod:`edgeattn.cost` with each attention module's hyper-parameters are one mechanism; the formulas themselves live
in :mod:`edgeattn.cost`.

What is counted (batch 1, one forward pass at ``img_size`` x ``img_size``):

* every ``nn.Linear`` / ``nn.Conv1d`` / ``nn.Conv2d`` that runs as a module, found by forward hooks: a Linear
  costs ``in_features`` MACs per output element, a convolution ``in_channels / groups * prod(kernel)`` MACs per
  output element (biases are not MACs);
* every attention core, analytically, per attention module type of :mod:`edgeattn.ops` (formulas below, one per
  type, fed with the token count, map size and the module's own hyper-parameters seen in that call), including the
  parametric convolutions those modules apply functionally (the LePE depthwise 3x3 conv: 9 MACs per channel and
  token) and fixed-weight matmuls (FLuRKA's sequence compression E, Performer's random features).

What is NOT counted: normalisations (LayerNorm, BatchNorm), activations, softmax / exp / the elementwise kernel
feature maps, divisions by normalisers, residual and position-embedding additions, pooling, reshapes. This is the
fvcore "MAC = FLOP" convention the ELFATT, EfficientViT, SOFT and FLuRKA tables use, minus fvcore's norm
handles: on CSWin-T24181 fvcore's LayerNorm count adds about 0.02 G, which is most of the gap between our
counts and the ELFATT paper's (its Table I MACs sit 0.017-0.024 G above our analytic 4.073 G for CSWin-T24181
without the attention cores).

The result separates the attention cores (``attention_core``) and, inside them, the softmax attention cores
(``softmax_core``: full softmax, CSWin stripes, blockify windows) because the ELFATT paper reports each model
twice: "nFA" = every MAC, "FA" = without the softmax cores, which its counter cannot see inside FlashAttention.
So ``fa = total - softmax_core``. ``iterative`` is the Newton-Raphson pseudo-inverse inside SOFT (also part of
``attention_core``); the SOFT paper's table leaves it out.
"""
import contextlib
import copy
import math

import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode

from .. import cost
from ..cost import multi_spot_macs


#: One-line statement of the counting convention (printed by ``edgeattn models --json``).
COUNTING_NOTE = ("MACs of one image (batch 1): Linear/Conv layers by forward hooks, attention cores analytically per "
                 "edgeattn.ops module type (incl. LePE depthwise convs and fixed-weight matmuls); norms, activations, "
                 "softmax/exp/feature maps, normaliser divisions, additions and pooling are not counted. "
                 "macs_fa = macs - softmax attention cores (the ELFATT paper's FA column); newton_raphson_macs is part "
                 "of macs (SOFT's pseudo-inverse, left out by the SOFT paper's table).")

#: attention module class name -> formula(module, x, hw, tally)
_FORMULAS = {}
#: the attention nn.Modules of edgeattn.ops (a model using one without a formula here is a bug, not a zero)
_OPS_ATTENTION_MODULES = ("MultiHeadSoftmaxAttention", "CrossShapedWindowAttention", "BlockifyAttention",
                          "EfficientAttention", "ELFATTAttention", "LiteMLA", "SOFTAttention", "FLuRKAAttention",
                          "MultiSpotAttention", "ShiftedWindowAttention", "AgentAttention", "FocusedLinearAttention",
                          "ViTAttention")


def count_params(model):
    """Number of parameters (trainable or frozen; buffers are not parameters)."""
    return int(sum(p.numel() for p in model.parameters()))


def formula(*class_names):
    """Register the attention-core formula for the named edgeattn.ops module classes."""

    def decorate(fn):
        for name in class_names:
            _FORMULAS[name] = fn
        return fn

    return decorate


class _Tally(object):
    def __init__(self):
        self.layers = 0
        self.attention_core = 0
        self.softmax_core = 0
        self.iterative = 0
        self.functional = 0
        self.by_type = {}
        self.fired = set()

    def add_core(self, module, macs, softmax=False, iterative=0):
        self.attention_core += int(macs)
        if softmax:
            self.softmax_core += int(macs)
        self.iterative += int(iterative)
        name = type(module).__name__
        self.by_type[name] = self.by_type.get(name, 0) + int(macs)

    def add_functional(self, child, macs):
        """A parametric conv/linear child applied functionally (its hook never fired): count it here."""
        if child is None or child in self.fired:
            return
        self.functional += int(macs)


def _layer_macs(module, output):
    if isinstance(module, nn.Linear):
        return output.numel() * module.in_features
    if isinstance(module, (nn.Conv1d, nn.Conv2d)):
        return output.numel() * (module.in_channels // module.groups) * int(math.prod(module.kernel_size))
    return 0


def _meta_copy(model, img_size):
    """The same architecture for ``img_size`` on the meta device (no storage, no arithmetic): the model itself when
    it is a registry model already on the meta device at that size, rebuilt from the registry when it came from
    create_model, else a deep copy moved to meta."""
    arch = getattr(model, "edgeattn_arch", None)
    on_meta = all(p.device.type == "meta" for p in model.parameters())
    if arch is not None and not (on_meta and model.edgeattn_config.get("img_size") == img_size):
        from ._registry import create_model

        config = dict(model.edgeattn_config, img_size=img_size)
        with torch.device("meta"):
            return create_model(arch, **config)
    if on_meta:
        return model
    return copy.deepcopy(model).to("meta")


#: the float32 pointwise ops whose meta kernels _ShapeOnlyMeta replaces (aten overload names)
_POINTWISE_OPS = ("add.Tensor", "add.Scalar", "sub.Tensor", "sub.Scalar", "rsub.Scalar", "mul.Tensor", "mul.Scalar",
                  "div.Tensor", "div.Scalar", "neg.default", "abs.default", "reciprocal.default", "exp.default",
                  "log.default", "sqrt.default", "rsqrt.default", "pow.Tensor_Scalar", "tanh.default",
                  "sigmoid.default", "relu.default", "gelu.default", "silu.default", "elu.default",
                  "hardswish.default", "hardtanh.default", "clamp.default", "clamp_min.default")


def _meta_empty(shape):
    return torch.empty(shape, dtype=torch.float32, device="meta")


def _float32(tensors):
    return all(t.dtype == torch.float32 for t in tensors)


def _broadcasts_to(shape, target):
    try:
        return tuple(torch.broadcast_shapes(shape, target)) == tuple(target)
    except RuntimeError:
        return False


class _ShapeOnlyMeta(TorchDispatchMode):
    """Answers the float32 pointwise ops, LayerNorm, matrix products and softmax of a meta forward with an empty
    tensor of the result's shape.

    torch runs the meta kernels of these ops in Python (its reference implementations: about 100 us per add, 500 us
    per addmm, 570 us per LayerNorm, 900 us per softmax), which made them most of the time of a meta forward, while
    counting needs only their shapes. The results are contiguous float32 tensors (pointwise ones of the inputs'
    broadcast shape), as torch's meta kernels give them for float32 inputs and Python scalars. A matrix product
    whose sizes disagree (inner sizes, or a bias that does not broadcast) goes to torch's own kernel, which raises as
    a real forward would. Everything else (views, convolutions, reductions, integer and boolean tensors, in-place
    and out= forms) still runs its own meta kernel. Counts are unchanged (tests/models/test_complexity.py compares
    both ways); counting every registered model at 224, 384 and 512 takes 2.6x less time."""

    _ops = None  # the OpOverloads of _POINTWISE_OPS, resolved once

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        aten = torch.ops.aten
        if func in self.pointwise_ops() and "out" not in kwargs:
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            if tensors and _float32(tensors):
                return _meta_empty(torch.broadcast_shapes(*[t.shape for t in tensors]))
        elif func is aten.native_layer_norm.default and args[0].dtype == torch.float32:
            x, normalized = args[0], args[1]
            statistics = tuple(x.shape[:x.dim() - len(normalized)]) + (1,) * len(normalized)
            return _meta_empty(x.shape), _meta_empty(statistics), _meta_empty(statistics)
        elif func is aten.addmm.default or func is aten.mm.default:  # addmm: (bias, a, b)
            a, b = args[-2:]
            if _float32(args) and a.dim() == b.dim() == 2 and a.shape[1] == b.shape[0]:
                shape = (a.shape[0], b.shape[1])
                if func is aten.mm.default or _broadcasts_to(args[0].shape, shape):
                    return _meta_empty(shape)
        elif func is aten.bmm.default:
            a, b = args
            if (_float32(args) and a.dim() == b.dim() == 3 and a.shape[0] == b.shape[0]
                    and a.shape[2] == b.shape[1]):
                return _meta_empty((a.shape[0], a.shape[1], b.shape[2]))
        elif func is aten._safe_softmax.default:  # (x, dim, dtype=None)
            dtype = args[2] if len(args) > 2 else kwargs.get("dtype")
            if args[0].dtype == torch.float32 and dtype in (None, torch.float32):
                return _meta_empty(args[0].shape)
        elif func is aten._softmax.default:  # (x, dim, half_to_float)
            if args[0].dtype == torch.float32 and not args[2]:
                return _meta_empty(args[0].shape)
        return func(*args, **kwargs)

    @classmethod
    def pointwise_ops(cls):
        if cls._ops is None:
            ops = set()
            for name in _POINTWISE_OPS:
                packet, overload = name.split(".")
                op = getattr(getattr(torch.ops.aten, packet, None), overload, None)
                if op is not None:
                    ops.add(op)
            cls._ops = frozenset(ops)
        return cls._ops


def _shape_only_meta():
    """The dispatch mode count_macs runs its meta forward in (a no-op context with SHAPE_ONLY_META off)."""
    return _ShapeOnlyMeta() if SHAPE_ONLY_META else contextlib.nullcontext()


#: False: count with torch's own meta kernels throughout (what the tests compare the shortcut with)
SHAPE_ONLY_META = True


def count_macs(model, img_size, batch=1):
    """MACs of one forward pass on a ``batch`` x 3 x ``img_size`` x ``img_size`` input.

    Returns ``dict(total, fa, attention_core, softmax_core, iterative, layers, functional, by_attention_type,
    img_size, batch)``: ``total`` = layers + attention cores + functional convs; ``fa`` = ``total - softmax_core``.
    Runs on the meta device (the model itself when it is a registry model on meta at ``img_size``, else a meta
    copy), so it is fast for any model size; raises EdgeAttnError if the model cannot take ``img_size``.
    """
    meta_model = _meta_copy(model, img_size)
    was_training = meta_model.training
    meta_model.eval()
    tally = _Tally()
    handles = []
    try:
        for module in meta_model.modules():
            if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)):
                handles.append(module.register_forward_hook(_leaf_hook(tally)))
            fn = _FORMULAS.get(type(module).__name__)
            if fn is not None:
                handles.append(module.register_forward_hook(_attention_hook(tally, fn), with_kwargs=True))
            elif type(module).__name__ in _OPS_ATTENTION_MODULES:
                raise RuntimeError("no MAC formula for attention module {}".format(type(module).__name__))
        with torch.no_grad(), _shape_only_meta():
            meta_model(torch.zeros(batch, 3, img_size, img_size, device="meta"))
    finally:
        for handle in handles:
            handle.remove()
        meta_model.train(was_training)
    total = tally.layers + tally.attention_core + tally.functional
    return {
        "total": total,
        "fa": total - tally.softmax_core,
        "attention_core": tally.attention_core,
        "softmax_core": tally.softmax_core,
        "iterative": tally.iterative,
        "layers": tally.layers,
        "functional": tally.functional,
        "by_attention_type": dict(tally.by_type),
        "img_size": img_size,
        "batch": batch,
    }


def _leaf_hook(tally):
    def hook(module, inputs, output):
        tally.fired.add(module)
        tally.layers += _layer_macs(module, output)

    return hook


def _attention_hook(tally, fn):
    def hook(module, args, kwargs, output):
        x = args[0] if args else kwargs.get("x")
        hw = args[1] if len(args) > 1 else kwargs.get("hw")
        fn(module, x, hw, tally)

    return hook


# --------------------------------------------------------------------------------------------------------------
# Attention-core formulas: the module's hyper-parameters and the shapes seen in the call, fed to the one cost model
# (edgeattn.cost, which gives each formula). The module's own qkv/proj Linears are counted by their hooks; the
# parametric convolutions it applies functionally (LePE, DWC) are added here. Notation: B batch, N tokens,
# C channels, d head width, h heads.
# --------------------------------------------------------------------------------------------------------------

def _lepe(tally, module, batch, tokens, channels):
    conv = getattr(module, "get_v", None)
    if conv is not None:
        tally.add_functional(conv, batch * tokens * channels * conv.kernel_size[0] * conv.kernel_size[1])


def _padded(size, window):
    return size + (-size) % window


@formula("MultiHeadSoftmaxAttention")
def _softmax(module, x, hw, tally):
    b, n, c = x.shape
    tally.add_core(module, cost.softmax_attention_macs(n, n, c, batch=b), softmax=True)
    _lepe(tally, module, b, n, c)


@formula("BlockifyAttention")
def _blockify(module, x, hw, tally):
    # every padded window at full size, whatever the padding mode (the papers count padded maps)
    b, _, c = x.shape
    ws = module.window_size
    tally.add_core(module, cost.window_attention_macs(hw[0], hw[1], ws, c, batch=b), softmax=True)
    _lepe(tally, module, b, _padded(hw[0], ws) * _padded(hw[1], ws), c)


@formula("EfficientAttention")
def _effatt(module, x, hw, tally):
    b, n, c = x.shape
    tally.add_core(module, cost.efficient_attention_macs(n, c, module.num_heads, batch=b))
    _lepe(tally, module, b, n, c)


@formula("ELFATTAttention")
def _elfatt(module, x, hw, tally):
    # global EFFATT heads on c1 channels (linear, not softmax), blockify heads on c2 (softmax); LePE on both
    b, n, c = x.shape
    d = c // module.num_heads
    c1 = module.num_global_heads * d
    c2 = c - c1
    ws = module.window_size
    linear, softmax = cost.elfatt_macs(hw[0], hw[1], ws, c, module.num_heads, module.num_global_heads, batch=b)
    if c1:
        tally.add_core(module, linear)
        conv = getattr(module, "get_v_global", None)
        if conv is not None:
            tally.add_functional(conv, b * n * c1 * 9)
    if c2:
        tally.add_core(module, softmax, softmax=True)
        conv = getattr(module, "get_v_local", None)
        if conv is not None:
            tally.add_functional(conv, b * _padded(hw[0], ws) * _padded(hw[1], ws) * c2 * 9)


@formula("CrossShapedWindowAttention")
def _cswin(module, x, hw, tally):
    # stripes of width split_size; the last stage is one full-map branch. LePE inside each stripe: 9 * N * C.
    b, n, c = x.shape
    height, width = hw
    if module.last_stage:
        macs = cost.softmax_attention_macs(n, n, c, batch=b)
    else:
        macs = cost.cswin_stripes_macs(height, width, module.split_size, c, batch=b)
    tally.add_core(module, macs, softmax=True)
    for branch in module.attns:
        tally.add_functional(branch.get_v, b * n * branch.get_v.in_channels * 9)


@formula("ShiftedWindowAttention")
def _swin_window(module, x, hw, tally):
    # every token of the (shift-invariant) padded map attends to the ws^2 tokens of its window
    b, _, c = x.shape
    window, _, padded_h, padded_w = module.geometry(*hw)
    tally.add_core(module, cost.window_attention_macs(padded_h, padded_w, window, c, batch=b), softmax=True)


@formula("AgentAttention")
def _agent(module, x, hw, tally):
    # the agent biases carry a bias term, so this is not a FlashAttention core (the ELFATT paper's Agent rows keep
    # it in the FA column). DWC: 9 MACs per channel and token.
    b, n, c = x.shape
    tally.add_core(module, cost.agent_attention_macs(n, module.agent_num, c, batch=b))
    tally.add_functional(module.dwc, b * n * c * 9)


@formula("FocusedLinearAttention")
def _flatten(module, x, hw, tally):
    # DWC k x k over d channels for each of the h heads: N * C * k^2; LePE (CSWin variant): 9 * N * C.
    b, n, c = x.shape
    tally.add_core(module, cost.focused_linear_attention_macs(n, c, module.num_heads, batch=b))
    k = module.dwc.kernel_size
    tally.add_functional(module.dwc, b * n * c * k[0] * k[1])
    if module.get_v is not None:
        tally.add_functional(module.get_v, b * n * c * 9)


@formula("MultiSpotAttention")
def _multispot(module, x, hw, tally):
    b, n, c = x.shape
    pools = [(n // (p * p), kt) for p, kt in zip(module.pool_sizes, module.pool_topk)]
    tally.add_core(module, multi_spot_macs(n, 0, c, module.region_size, min(module.topk, n), pools, batch=b))


@formula("ViTAttention")
def _vit_attention(module, x, hw, tally):
    # softmax over all 1 + H*W tokens (a FlashAttention core), or the Multi-Spot core
    b, n, c = x.shape
    if module.multispot is None:
        tally.add_core(module, cost.softmax_attention_macs(n, n, c, batch=b), softmax=True)
        return
    spot = module.multispot
    tokens = n - module.prefix_tokens
    pools = [(tokens // spot["pool_side"] ** 2, None)] if spot.get("pool_side") else []
    tally.add_core(module, multi_spot_macs(tokens, module.prefix_tokens, c, spot["region_size"], spot["topk"],
                                           pools, batch=b))


@formula("LiteMLA")
def _litemla(module, x, hw, tally):
    # per head group: heads * (1 + scales) groups of width d
    b, _, height, width = x.shape
    groups = module.heads * (1 + len(module.aggreg))
    tally.add_core(module, cost.lite_mla_macs(height * width, groups, module.dim, module.kernel, batch=b))


@formula("SOFTAttention")
def _soft(module, x, hw, tally):
    # m landmarks on the map subsampled by the sampling ratio; the per-head depthwise conv on V is applied
    # functionally: k*k MACs per channel and token.
    b, n, c = x.shape
    height, width = hw
    r = module.sampling_ratio
    m = (height // r) * (width // r)
    core, newton = cost.soft_macs(n, m, module.num_heads, module.head_dim, module.newton_iters, batch=b)
    tally.add_core(module, core, iterative=newton)
    if module.dwconv is not None:
        k = module.dwconv.kernel_size
        tally.add_functional(module.dwconv, b * n * c * k[0] * k[1])


@formula("FLuRKAAttention")
def _flurka(module, x, hw, tally):
    b, n, c = x.shape
    heads = module.num_heads
    performer = module.feature_map == "performer"
    features = module.projection.shape[0] if performer else c // heads
    tally.add_core(module, cost.flurka_macs(n, module.E1.shape[0], c, heads, features, performer, batch=b))


@formula("TokenPerformer")
def _token_performer(module, x, hw, tally):
    b, n, _ = x.shape
    features, e = module.projection.shape
    tally.add_core(module, cost.token_performer_macs(n, features, e, batch=b))
