"""The acceptance criterion every kernel result is held to (GPU tests and the CPU-emulated tests alike).

FP32: max error <= 1e-4 x max |reference| against the FP64 reference. FP16 I/O: max error <= 2 x the error
PyTorch itself makes computing the same reference op on the FP16 inputs (plus a 1e-6 relative floor).
Imports torch: only for test modules that already required it.
"""
import math

FP32_RELATIVE = 1e-4


def assert_matches_reference(result, reference_fn, inputs, dtype, label):
    import torch

    exact = reference_fn(*[t.double() if t is not None else None for t in inputs])
    scale = exact.abs().max().item()
    error = (result.double() - exact).abs().max().item()
    assert math.isfinite(error), "{}: non-finite output".format(label)
    if dtype == torch.float32:
        assert error <= FP32_RELATIVE * scale, "{}: FP32 max error {:.3e} > 1e-4 * {:.3e}".format(label, error, scale)
    else:
        torch_fp16 = reference_fn(*inputs)
        torch_error = (torch_fp16.double() - exact).abs().max().item()
        bound = 2.0 * torch_error + 1e-6 * scale
        assert error <= bound, "{}: FP16 max error {:.3e} > 2 x PyTorch FP16 error {:.3e}".format(
            label, error, torch_error)
