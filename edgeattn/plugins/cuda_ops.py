"""CUDA implementations of the ``torch.ops.edgeattn.*`` custom ops on the edgeattn kernels (the C ABI of
``libedgeattn_kernels.so`` through :mod:`edgeattn.plugins.kernels_abi`), so a registered model runs on any NVIDIA
GPU with the same kernels its TensorRT plugins run.

    from edgeattn.plugins import cuda_ops
    cuda_ops.register()                     # $EDGEATTN_KERNELS_LIB or plugins/build/libedgeattn_kernels.so
    with edgeattn.ops.config.use_plugin_ops():
        logits = model.cuda().half()(images.cuda().half())

:func:`register` adds, for the CUDA dispatch key of each of the four ops, an implementation beside the reference one
(standard torch ops, which every other device keeps) and the ``register_fake`` shape function. Each call checks its
tensors at the boundary (one CUDA device; float32 or float16, all of one dtype; contiguous: a clear
:class:`~edgeattn.ops._common.OpShapeError` otherwise, never a silent copy), allocates the output and the workspace
through torch's caching allocator on that device, and enqueues the kernels on torch's current stream. Nothing
synchronises the host and nothing allocates outside torch, so the calls can be captured in a CUDA graph. A failing
launcher raises :class:`~edgeattn.plugins.kernels_abi.KernelError` with the library's one-line reason.

:class:`KernelOps` is the same code with the device type as a parameter: over the CPU emulation of the kernels
(``tests/plugins/emulation``, host pointers) the tests run every line of it on CPU tensors, launch included.
"""
import contextlib
import threading

from . import kernels_abi

#: the custom ops (``edgeattn::<name>``) this module implements
OP_NAMES = ("blockify_attention", "efficient_attention", "lite_mla", "soft_kernel_attention")

_DTYPES = ("float32", "float16")  # kernels_abi.DTYPES names, as torch spells them
_LOCK = threading.Lock()
_REGISTERED = {}


def _torch():
    import torch
    return torch


def _shape_error(message):
    from ..ops import OpShapeError
    return OpShapeError(message)


class KernelOps(object):
    """The four ops over a kernels library (``kernels_abi.KernelsLibrary`` or anything with its methods).

    ``device_type``: where the tensors must live ("cuda"; "cpu" for the emulated library). Every method takes the
    custom op's own arguments and returns the new output tensor.
    """

    def __init__(self, library, device_type="cuda"):
        self.library = library
        self.device_type = device_type

    # ---- the boundary --------------------------------------------------------------------------------------------
    def _check(self, op, tensors):
        """tensors: [(name, tensor or None)]; returns the dtype name of the first."""
        first = None
        for name, tensor in tensors:
            if tensor is None:
                continue
            where = "edgeattn::{}: {}".format(op, name)
            if tensor.device.type != self.device_type:
                raise _shape_error("{} is on {}, the edgeattn kernels need {} tensors".format(
                    where, tensor.device, self.device_type))
            dtype = str(tensor.dtype).replace("torch.", "")
            if dtype not in _DTYPES:
                raise _shape_error("{} is {}, the edgeattn kernels take float32 or float16".format(where, dtype))
            if first is None:
                first = (name, tensor.device, dtype)
            elif tensor.device != first[1]:
                raise _shape_error("{} is on {} but {} is on {}".format(where, tensor.device, first[0], first[1]))
            elif dtype != first[2]:
                raise _shape_error("{} is {} but {} is {}: one dtype per call".format(where, dtype, first[0],
                                                                                      first[2]))
            if not tensor.is_contiguous():
                raise _shape_error("{} {} is not contiguous (strides {}): the kernels read row-major tensors; "
                                   "pass .contiguous()".format(where, tuple(tensor.shape), tuple(tensor.stride())))
        return first[2]

    def _stream(self, device):
        """The stream handle the kernels enqueue on: torch's current stream of ``device`` (0 for the emulation)."""
        if self.device_type != "cuda":
            return 0
        return _torch().cuda.current_stream(device).cuda_stream

    def _device(self, tensor):
        """Makes the tensor's device current for the launch (the C ABI launches on the current device)."""
        if self.device_type != "cuda":
            return contextlib.nullcontext()
        return _torch().cuda.device(tensor.device)

    def _workspace(self, nbytes, like):
        torch = _torch()
        return torch.empty(max(int(nbytes), 1), dtype=torch.uint8, device=like.device)

    @staticmethod
    def _require(condition, op, message, *args):
        if not condition:
            raise _shape_error("edgeattn::{}: {}".format(op, message.format(*args)))

    # ---- the ops ----------------------------------------------------------------------------------------------------
    def blockify_attention(self, q, k, v, lepe_weight, lepe_bias, num_heads, height, width, window_size, scale,
                           padding):
        op = "blockify_attention"
        dtype = self._check(op, [("q", q), ("k", k), ("v", v), ("lepe_weight", lepe_weight),
                                 ("lepe_bias", lepe_bias)])
        self._require(q.dim() == 3, op, "q must be (B, N, C), got {}", tuple(q.shape))
        self._require(k.shape == q.shape and v.shape == q.shape, op, "q, k, v must share a shape, got {} {} {}",
                      tuple(q.shape), tuple(k.shape), tuple(v.shape))
        self._require((lepe_weight is None) == (lepe_bias is None), op,
                      "lepe_weight and lepe_bias are given together or not at all")
        self._require(padding in kernels_abi.PADDINGS, op, "padding must be one of {}, got {!r}",
                      tuple(kernels_abi.PADDINGS), padding)
        b, n, c = q.shape
        out = _torch().empty_like(q)
        with self._device(q):
            self.library.blockify_attention(
                q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), b, height, width, c, num_heads,
                window_size, scale=float(scale), padding=padding, dtype=dtype,
                lepe_weight=None if lepe_weight is None else lepe_weight.data_ptr(),
                lepe_bias=None if lepe_bias is None else lepe_bias.data_ptr(), stream=self._stream(q.device))
        return out

    def efficient_attention(self, q, k, v, num_heads):
        op = "efficient_attention"
        dtype = self._check(op, [("q", q), ("k", k), ("v", v)])
        self._require(q.dim() == 3, op, "q must be (B, N, C), got {}", tuple(q.shape))
        self._require(k.shape == q.shape and v.shape == q.shape, op, "q, k, v must share a shape, got {} {} {}",
                      tuple(q.shape), tuple(k.shape), tuple(v.shape))
        b, n, c = q.shape
        out = _torch().empty_like(q)
        nbytes = self.library.efficient_attention_workspace_size(b, n, c, num_heads)
        workspace = self._workspace(nbytes, q)
        with self._device(q):
            self.library.efficient_attention(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), b, n, c,
                                             num_heads, workspace.data_ptr(), nbytes, dtype=dtype,
                                             stream=self._stream(q.device))
        return out

    def lite_mla(self, qkv, head_dim, kernel, eps, qt_alpha, qt_beta, qt_gamma):
        op = "lite_mla"
        dtype = self._check(op, [("qkv", qkv)])
        self._require(qkv.dim() == 4, op, "qkv must be (B, 3*G*head_dim, H, W), got {}", tuple(qkv.shape))
        self._require(kernel in kernels_abi.LITE_MLA_KERNELS, op, "kernel must be one of {}, got {!r}",
                      tuple(kernels_abi.LITE_MLA_KERNELS), kernel)
        self._require(len(qt_alpha) == len(qt_beta) == len(qt_gamma), op,
                      "qt_alpha, qt_beta, qt_gamma must have one length, got {}, {}, {}", len(qt_alpha),
                      len(qt_beta), len(qt_gamma))
        b, channels, height, width = qkv.shape
        out = qkv.new_empty(b, channels // 3, height, width)
        nbytes = self.library.lite_mla_workspace_size(b, channels, height, width, head_dim, kernel)
        workspace = self._workspace(nbytes, qkv)
        with self._device(qkv):
            self.library.lite_mla(qkv.data_ptr(), out.data_ptr(), b, channels, height, width, head_dim,
                                  workspace.data_ptr(), nbytes, kernel=kernel, eps=float(eps),
                                  qt_alpha=list(qt_alpha), qt_beta=list(qt_beta), qt_gamma=list(qt_gamma),
                                  dtype=dtype, stream=self._stream(qkv.device))
        return out

    def soft_kernel_attention(self, q, landmarks, v, num_heads, newton_iters, symmetric_norm):
        op = "soft_kernel_attention"
        dtype = self._check(op, [("q", q), ("landmarks", landmarks), ("v", v)])
        self._require(q.dim() == 3 and landmarks.dim() == 3, op, "q and landmarks must be (B, N, C) and (B, M, C)")
        self._require(v.shape == q.shape, op, "v has shape {} but q has {}", tuple(v.shape), tuple(q.shape))
        b, n, c = q.shape
        m = landmarks.shape[1]
        out = _torch().empty_like(q)
        nbytes = self.library.soft_kernel_attention_workspace_size(b, n, m, c, num_heads)
        workspace = self._workspace(nbytes, q)
        with self._device(q):
            self.library.soft_kernel_attention(q.data_ptr(), landmarks.data_ptr(), v.data_ptr(), out.data_ptr(), b,
                                               n, m, c, num_heads, workspace.data_ptr(), nbytes,
                                               newton_iters=int(newton_iters), symmetric_norm=int(symmetric_norm),
                                               dtype=dtype, stream=self._stream(q.device))
        return out


def custom_ops():
    """{name: the torch.library custom op object} of the four ops (importing edgeattn.ops defines them)."""
    from ..ops.blockify import blockify_attention_op
    from ..ops.efficient_attention import efficient_attention_op
    from ..ops.litemla import lite_mla_op
    from ..ops.soft import soft_kernel_attention_op
    return {"blockify_attention": blockify_attention_op, "efficient_attention": efficient_attention_op,
            "lite_mla": lite_mla_op, "soft_kernel_attention": soft_kernel_attention_op}


def register(library=None, device_type="cuda"):
    """Registers the kernels as the ``device_type`` implementation of the four custom ops; returns the KernelOps.

    ``library``: a loaded library object, a path (file or directory), or None ($EDGEATTN_KERNELS_LIB, then the
    checkout's plugins/build/). Registering again with the same library is a no-op; another library replaces it.
    """
    if library is None or isinstance(library, str):
        library = kernels_abi.KernelsLibrary(library)
    with _LOCK:
        current = _REGISTERED.get(device_type)
        if current is not None and current.library is library:
            return current
        ops = KernelOps(library, device_type)
        for name, custom_op in custom_ops().items():
            custom_op.register_kernel(device_type)(getattr(ops, name))
        _REGISTERED[device_type] = ops
        return ops


def registered(device_type="cuda"):
    """The KernelOps registered for ``device_type``, or None."""
    return _REGISTERED.get(device_type)


__all__ = ["KernelOps", "OP_NAMES", "custom_ops", "register", "registered"]
