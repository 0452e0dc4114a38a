"""ctypes bindings of the kernels' C ABI (plugins/include/edgeattn/kernels.h).

Used by the GPU tests and ``benchmarks/kernels_gpu.py`` to call the CUDA kernels without TensorRT: pass device
pointers as integers (``tensor.data_ptr()``) and a CUDA stream handle (``torch.cuda.current_stream().cuda_stream``
or 0). Works with ``libedgeattn_kernels.so`` and with ``libedgeattn_plugins.so`` (which re-exports the same
functions). Stdlib only; Python 3.8.
"""
import ctypes
import os

from .._paths import repo_root
from ..errors import EdgeAttnError

KERNELS_LIBRARY_NAME = "libedgeattn_kernels.so"
KERNELS_ENV_VAR = "EDGEATTN_KERNELS_LIB"
ABI_VERSION = 2

STATUS_SUCCESS = 0
STATUS_INVALID_ARGUMENT = 1
STATUS_UNSUPPORTED = 2
STATUS_WORKSPACE_TOO_SMALL = 3
STATUS_CUDA_ERROR = 4

DTYPES = {"float32": 0, "float16": 1}
PADDINGS = {"none": 0, "zeros": 1, "masked": 2}
LITE_MLA_KERNELS = {"relu": 0, "quadratic_taylor": 1}
#: edgeattn_kernel_path: which kernels run where a tensor-core kernel exists (also $EDGEATTN_KERNEL_PATH)
KERNEL_PATHS = {"auto": 0, "scalar": 1, "tensor_core": 2, "tensor_core_warp": 3}
#: edgeattn_set_thread_kernel_path's "follow the process-wide setting"
KERNEL_PATH_INHERIT = -1
#: edgeattn_op: the op calls the default kernel-path table distinguishes
OPS = {"blockify_attention": 0, "efficient_attention": 1, "lite_mla_relu": 2, "lite_mla_quadratic_taylor": 3,
       "soft_kernel_attention": 4}

_c_int = ctypes.c_int
_c_size = ctypes.c_size_t
_c_ptr = ctypes.c_void_p
_c_float = ctypes.c_float
_c_float_p = ctypes.POINTER(ctypes.c_float)

# name -> (restype, argtypes), mirroring kernels.h
_SIGNATURES = {
    "edgeattn_kernels_abi_version": (_c_int, []),
    "edgeattn_kernels_build_info": (ctypes.c_char_p, []),
    "edgeattn_status_string": (ctypes.c_char_p, [_c_int]),
    "edgeattn_last_error": (ctypes.c_char_p, []),
    "edgeattn_set_kernel_path": (_c_int, [_c_int]),
    "edgeattn_get_kernel_path": (_c_int, []),
    "edgeattn_set_thread_kernel_path": (_c_int, [_c_int]),
    "edgeattn_get_thread_kernel_path": (_c_int, []),
    "edgeattn_device_arch": (_c_int, [ctypes.POINTER(_c_int), ctypes.POINTER(_c_int)]),
    "edgeattn_kernel_paths": (_c_int, [_c_int] * 4 + [ctypes.POINTER(_c_int), _c_int]),
    "edgeattn_default_kernel_path": (_c_int, [_c_int] * 4),
    "edgeattn_blockify_attention_workspace_size": (_c_size, [_c_int] * 6),
    "edgeattn_blockify_attention": (
        _c_int, [_c_ptr] * 6 + [_c_int] * 6 + [_c_float, _c_int, _c_int, _c_ptr]),
    "edgeattn_efficient_attention_workspace_size": (_c_size, [_c_int] * 4),
    "edgeattn_efficient_attention": (
        _c_int, [_c_ptr] * 4 + [_c_int] * 5 + [_c_ptr, _c_size, _c_ptr]),
    "edgeattn_lite_mla_workspace_size": (_c_size, [_c_int] * 6),
    "edgeattn_lite_mla": (
        _c_int, [_c_ptr, _c_ptr] + [_c_int] * 6 + [_c_float, _c_float_p, _c_float_p, _c_float_p, _c_int, _c_int,
                                                     _c_ptr, _c_size, _c_ptr]),
    "edgeattn_soft_kernel_attention_workspace_size": (_c_size, [_c_int] * 5),
    "edgeattn_soft_kernel_attention": (
        _c_int, [_c_ptr] * 4 + [_c_int] * 8 + [_c_ptr, _c_size, _c_ptr]),
}


class KernelError(EdgeAttnError):
    """A launcher returned an error status; ``status`` is the edgeattn_status value."""

    def __init__(self, function, status, detail):
        self.status = status
        super().__init__("{} failed with status {}: {}".format(function, status, detail))


def find_kernels_library(explicit=None):
    """``explicit``, else $EDGEATTN_KERNELS_LIB, else plugins/build/libedgeattn_kernels.so of the checkout."""
    candidates = []
    if explicit:
        candidates.append(str(explicit))
    elif os.environ.get(KERNELS_ENV_VAR):
        candidates.append(os.environ[KERNELS_ENV_VAR])
    else:
        candidates.append(os.path.join(repo_root(), "plugins", "build", KERNELS_LIBRARY_NAME))
    for candidate in candidates:
        if os.path.isdir(candidate):
            candidate = os.path.join(candidate, KERNELS_LIBRARY_NAME)
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    raise EdgeAttnError(
        "cannot find {} (looked in: {}); build it with `cmake -S plugins -B plugins/build "
        "-DEDGEATTN_KERNELS_ONLY=ON && cmake --build plugins/build` or set {}".format(
            KERNELS_LIBRARY_NAME, "; ".join(candidates), KERNELS_ENV_VAR))


def _float_array(values):
    if values is None:
        return None
    values = [float(v) for v in values]
    return (ctypes.c_float * len(values))(*values)


class KernelsLibrary(object):
    """Typed access to the C ABI. Launchers return the status; ``check=True`` raises :class:`KernelError`."""

    def __init__(self, path=None):
        self.path = find_kernels_library(path)
        try:
            self._lib = ctypes.CDLL(self.path)
        except OSError as error:
            raise EdgeAttnError("cannot load {}: {}".format(self.path, error))
        for name, (restype, argtypes) in _SIGNATURES.items():
            try:
                function = getattr(self._lib, name)
            except AttributeError:
                raise EdgeAttnError("{} does not export {} (not an edgeattn kernels library?)".format(self.path, name))
            function.restype = restype
            function.argtypes = argtypes
        version = self._lib.edgeattn_kernels_abi_version()
        if version != ABI_VERSION:
            raise EdgeAttnError("{} has C ABI version {}, these bindings expect {}".format(
                self.path, version, ABI_VERSION))

    # ---- information --------------------------------------------------------------------------------------------
    def abi_version(self):
        return self._lib.edgeattn_kernels_abi_version()

    def build_info(self):
        return self._lib.edgeattn_kernels_build_info().decode()

    def status_string(self, status):
        return self._lib.edgeattn_status_string(status).decode()

    def last_error(self):
        return self._lib.edgeattn_last_error().decode()

    def set_kernel_path(self, path, check=True):
        """Process-wide kernel path: "auto", "scalar", "tensor_core" or "tensor_core_warp" (or the
        edgeattn_kernel_path value)."""
        status = self._lib.edgeattn_set_kernel_path(KERNEL_PATHS.get(path, path))
        return self._finish("edgeattn_set_kernel_path", status, check)

    def kernel_path(self):
        """The current setting as a name ("auto", "scalar", "tensor_core", "tensor_core_warp"), or the raw value if
        unknown (-1 while $EDGEATTN_KERNEL_PATH holds an invalid value)."""
        value = self._lib.edgeattn_get_kernel_path()
        names = {number: name for name, number in KERNEL_PATHS.items()}
        return names.get(value, value)

    def set_thread_kernel_path(self, path, check=True):
        """The calling thread's kernel path (wins over the process-wide one): a name, a value, or "inherit"."""
        value = KERNEL_PATH_INHERIT if path == "inherit" else KERNEL_PATHS.get(path, path)
        status = self._lib.edgeattn_set_thread_kernel_path(value)
        return self._finish("edgeattn_set_thread_kernel_path", status, check)

    def thread_kernel_path(self):
        """The calling thread's setting as a name ("inherit", "auto", ...), or the raw value if unknown."""
        value = self._lib.edgeattn_get_thread_kernel_path()
        names = {number: name for name, number in KERNEL_PATHS.items()}
        names[KERNEL_PATH_INHERIT] = "inherit"
        return names.get(value, value)

    def device_arch(self):
        """(compute capability, code arch) of the current device, e.g. (87, 87); raises KernelError without one."""
        capability, code = _c_int(0), _c_int(0)
        self._finish("edgeattn_device_arch", self._lib.edgeattn_device_arch(ctypes.byref(capability),
                                                                             ctypes.byref(code)), True)
        return capability.value, code.value

    def kernel_paths(self, op, dtype, compute_capability, code_arch=None):
        """Names of the paths a call of ``op`` (an OPS name) with ``dtype`` can run on that device, scalar first."""
        code_arch = compute_capability if code_arch is None else code_arch
        buffer = (_c_int * 8)()
        count = self._lib.edgeattn_kernel_paths(OPS.get(op, op), DTYPES.get(dtype, dtype), compute_capability,
                                                code_arch, buffer, len(buffer))
        if count < 0:
            raise KernelError("edgeattn_kernel_paths", -count, self.last_error())
        names = {number: name for name, number in KERNEL_PATHS.items()}
        return [names.get(value, value) for value in buffer[:min(count, len(buffer))]]

    def default_kernel_path(self, op, batch, compute_capability, code_arch=None):
        """The path name AUTO takes for a call of ``op`` at ``batch`` on that device (the default table)."""
        code_arch = compute_capability if code_arch is None else code_arch
        value = self._lib.edgeattn_default_kernel_path(OPS.get(op, op), batch, compute_capability, code_arch)
        if value < 0:
            raise KernelError("edgeattn_default_kernel_path", -value, self.last_error())
        return {number: name for name, number in KERNEL_PATHS.items()}.get(value, value)

    def _finish(self, function, status, check):
        if check and status != STATUS_SUCCESS:
            raise KernelError(function, status, self.last_error())
        return status

    # ---- workspace sizes ------------------------------------------------------------------------------------------
    def blockify_attention_workspace_size(self, batch, height, width, channels, num_heads, window_size):
        return self._lib.edgeattn_blockify_attention_workspace_size(
            batch, height, width, channels, num_heads, window_size)

    def efficient_attention_workspace_size(self, batch, tokens, channels, num_heads):
        return self._lib.edgeattn_efficient_attention_workspace_size(batch, tokens, channels, num_heads)

    def lite_mla_workspace_size(self, batch, channels_in, height, width, head_dim, kernel="relu"):
        return self._lib.edgeattn_lite_mla_workspace_size(
            batch, channels_in, height, width, head_dim, LITE_MLA_KERNELS.get(kernel, kernel))

    def soft_kernel_attention_workspace_size(self, batch, tokens, num_landmarks, channels, num_heads):
        return self._lib.edgeattn_soft_kernel_attention_workspace_size(
            batch, tokens, num_landmarks, channels, num_heads)

    # ---- launchers (device pointers as ints) -------------------------------------------------------------------
    def blockify_attention(self, q, k, v, out, batch, height, width, channels, num_heads, window_size, scale=0.0,
                           padding="none", dtype="float32", lepe_weight=None, lepe_bias=None, stream=0, check=True):
        status = self._lib.edgeattn_blockify_attention(
            q, k, v, lepe_weight, lepe_bias, out, batch, height, width, channels, num_heads, window_size, scale,
            PADDINGS.get(padding, padding), DTYPES.get(dtype, dtype), stream)
        return self._finish("edgeattn_blockify_attention", status, check)

    def efficient_attention(self, q, k, v, out, batch, tokens, channels, num_heads, workspace, workspace_bytes,
                            dtype="float32", stream=0, check=True):
        status = self._lib.edgeattn_efficient_attention(
            q, k, v, out, batch, tokens, channels, num_heads, DTYPES.get(dtype, dtype), workspace, workspace_bytes,
            stream)
        return self._finish("edgeattn_efficient_attention", status, check)

    def lite_mla(self, qkv, out, batch, channels_in, height, width, head_dim, workspace, workspace_bytes,
                 kernel="relu", eps=1e-15, qt_alpha=(1.0,), qt_beta=(1.0,), qt_gamma=(1.0,), dtype="float32",
                 stream=0, check=True):
        alpha, beta, gamma = _float_array(qt_alpha), _float_array(qt_beta), _float_array(qt_gamma)
        count = len(alpha) if alpha is not None else 0
        status = self._lib.edgeattn_lite_mla(
            qkv, out, batch, channels_in, height, width, head_dim, LITE_MLA_KERNELS.get(kernel, kernel), eps,
            alpha, beta, gamma, count, DTYPES.get(dtype, dtype), workspace, workspace_bytes, stream)
        return self._finish("edgeattn_lite_mla", status, check)

    def soft_kernel_attention(self, q, landmarks, v, out, batch, tokens, num_landmarks, channels, num_heads,
                              workspace, workspace_bytes, newton_iters=20, symmetric_norm=1, dtype="float32",
                              stream=0, check=True):
        status = self._lib.edgeattn_soft_kernel_attention(
            q, landmarks, v, out, batch, tokens, num_landmarks, channels, num_heads, newton_iters, symmetric_norm,
            DTYPES.get(dtype, dtype), workspace, workspace_bytes, stream)
        return self._finish("edgeattn_soft_kernel_attention", status, check)
