"""Helpers shared by the reference operators: argument checks, head layout, precision policy, eps.

Precision policy (every operator in :mod:`edgeattn.ops`): FP16/BF16 inputs are upcast to FP32 at the start of
the functional core, every matmul, reduction, normaliser and Newton-Raphson step runs in FP32, and the result
is cast back to the input dtype once at the end. FP32 and FP64 inputs are computed in their own dtype. This
makes the reference a correctly rounded FP16 answer up to FP32 error, which is what the plugins are held to.
"""
import torch

from ..errors import EdgeAttnError


class OpShapeError(EdgeAttnError, ValueError):
    """A shape or attribute that an operator cannot accept (one clear line; also a ``ValueError``)."""


def require(condition, message, *args):
    """Raise :class:`OpShapeError` with ``message.format(*args)`` unless ``condition`` holds.

    While tracing for ONNX export, sizes are traced tensors; the check is skipped there (an invalid size still
    fails inside the torch ops) instead of baking a TracerWarning-laden constant into the trace.
    """
    if torch.is_tensor(condition) and exporting():
        return
    if not condition:
        raise OpShapeError(message.format(*args))


def compute_dtype(dtype):
    """The dtype the cores compute in for inputs of ``dtype``: FP32 for half types, else the dtype itself."""
    if dtype in (torch.float16, torch.bfloat16):
        return torch.float32
    return dtype


def upcast(*tensors):
    """Cast tensors to the compute dtype of the first one (a no-op, and no traced Cast, when it already is)."""
    target = compute_dtype(tensors[0].dtype)
    return tuple(t if t is None or t.dtype == target else t.to(target) for t in tensors)


def downcast(x, dtype):
    """Cast a result back to the caller's dtype (no-op when it already has it)."""
    return x if x.dtype == dtype else x.to(dtype)


def default_eps(dtype):
    """A normaliser eps that is representable and harmless in the compute dtype of ``dtype``.

    1e-15 (EfficientViT's default) flushes to zero in FP16; the cores never materialise eps in FP16 because
    they compute in FP32 for half inputs, and FP32 represents 1e-15. This default is for operators whose papers
    give no eps: 1e-6 in FP32 (far below any realistic normaliser), 1e-12 in FP64.
    """
    return 1e-12 if compute_dtype(dtype) == torch.float64 else 1e-6


def check_eps(eps, dtype):
    """``eps`` as used in the compute dtype: must be >= 0 and, if nonzero, not flush to zero there."""
    require(eps >= 0.0, "eps must be >= 0, got {}", eps)
    tiny = torch.finfo(compute_dtype(dtype)).tiny
    require(eps == 0.0 or eps >= tiny, "eps={} underflows in {} (smallest normal {})", eps, compute_dtype(dtype), tiny)
    return float(eps)


def check_tokens(name, x, num_heads=None):
    """Check a (B, N, C) token tensor (and C % num_heads == 0); returns (B, N, C)."""
    require(x.dim() == 3, "{} must have shape (B, N, C), got {}", name, tuple(x.shape))
    require(x.is_floating_point(), "{} must be a floating-point tensor, got {}", name, x.dtype)
    if num_heads is not None:
        require(num_heads >= 1, "num_heads must be >= 1, got {}", num_heads)
        require(x.shape[2] % num_heads == 0, "{}: channels {} are not divisible by num_heads={}", name,
                x.shape[2], num_heads)
    return tuple(x.shape)


def check_same_shape(reference_name, reference, **others):
    for name, tensor in others.items():
        require(tuple(tensor.shape) == tuple(reference.shape), "{} has shape {} but {} has shape {}", name,
                tuple(tensor.shape), reference_name, tuple(reference.shape))
        require(tensor.dtype == reference.dtype, "{} has dtype {} but {} has dtype {}", name, tensor.dtype,
                reference_name, reference.dtype)


def check_map(num_tokens, height, width):
    require(height >= 1 and width >= 1, "height and width must be >= 1, got {}x{}", height, width)
    require(num_tokens == height * width, "N={} tokens do not form a {}x{} map (N must equal height*width)",
            num_tokens, height, width)


def split_heads(x, num_heads):
    """(B, N, C) -> (B, h, N, d) view; channel c belongs to head c // d."""
    b, n, c = x.shape
    return x.reshape(b, n, num_heads, c // num_heads).transpose(1, 2)


def merge_heads(x):
    """(B, h, N, d) -> (B, N, h*d)."""
    b, h, n, d = x.shape
    return x.transpose(1, 2).reshape(b, n, h * d)


def grad_needed(*tensors):
    """True when autograd records an op on any of ``tensors`` (grad mode on and one of them requires grad).

    The eager cores write into preallocated buffers (``out=``) to skip a concat copy only where this is False:
    torch's ``out=`` variants have no backward, so a training step takes the plain path.
    """
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def differentiate_by_reference(op, reference):
    """Give the custom op ``op`` the gradient of ``reference``, the plain-torch function it was made from (same
    positional arguments): the backward recomputes that forward under autograd and differentiates it, so a model
    trains the same with :func:`edgeattn.ops.config.use_plugin_ops` on. Non-tensor arguments (sizes, floats,
    strings) get no gradient: LiteMLA's quadratic-Taylor parameters reach its custom op as floats (the plugin's
    attributes), so they learn only with the switch off, the default."""

    def setup_context(ctx, inputs, output):
        ctx.positions = [i for i, value in enumerate(inputs) if torch.is_tensor(value)]
        ctx.constants = [None if torch.is_tensor(value) else value for value in inputs]
        ctx.save_for_backward(*(inputs[i] for i in ctx.positions))

    def backward(ctx, grad):
        args = list(ctx.constants)
        wanted = []
        for position, saved in zip(ctx.positions, ctx.saved_tensors):
            args[position] = saved.detach().requires_grad_(ctx.needs_input_grad[position])
            if ctx.needs_input_grad[position]:
                wanted.append(position)
        grads = [None] * len(args)
        if wanted:
            with torch.enable_grad():
                out = reference(*args)
            for position, value in zip(wanted, torch.autograd.grad(out, [args[i] for i in wanted], grad,
                                                                   allow_unused=True)):
                grads[position] = value
        return tuple(grads)

    op.register_autograd(backward, setup_context=setup_context)


def exporting():
    """True while torch.onnx.export (TorchScript) or torch.jit tracing records the graph."""
    return torch.onnx.is_in_onnx_export() or torch.jit.is_tracing()


def tokens_to_image(x, height, width):
    """(B, N, C) -> (B, C, H, W) as a view in channels-last memory (no copy)."""
    b, n, c = x.shape
    return x.reshape(b, height, width, c).permute(0, 3, 1, 2)


def image_to_tokens(x):
    """(B, C, H, W) -> (B, N, C)."""
    b, c, h, w = x.shape
    return x.permute(0, 2, 3, 1).reshape(b, h * w, c)
