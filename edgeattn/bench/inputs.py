"""Random benchmark inputs from a model's input metadata.

A dynamic first dimension is the batch (``--batch``); any other dynamic dimension has no sensible default for a
vision model (resolution is baked into attention windows), so it is an error that names the input.
"""
import numpy as np

from ..errors import EdgeAttnError

#: ONNX Runtime type strings -> numpy dtypes
ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int16)": np.int16, "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_,
}


def _is_static(dim):
    return isinstance(dim, int) and not isinstance(dim, bool) and dim >= 0


def resolve_shape(name, shape, batch):
    """Concrete dims for one input: dynamic dim 0 -> ``batch``; a static dim 0 must equal ``batch``."""
    if shape is None:
        raise EdgeAttnError("input {!r} has no shape information; export the model with static shapes".format(name))
    dims = []
    for axis, dim in enumerate(shape):
        if _is_static(dim):
            if axis == 0 and dim != batch:
                raise EdgeAttnError(
                    "input {!r} has a fixed batch of {} but --batch is {}; export with a dynamic batch "
                    "(`edgeattn export --batch dynamic`) or use --batch {}".format(name, dim, batch, dim))
            dims.append(dim)
        elif axis == 0:
            dims.append(batch)
        else:
            raise EdgeAttnError(
                "input {!r} has a dynamic dimension {} ({!r}) besides the batch: export the model at a fixed "
                "resolution".format(name, axis, dim))
    return dims


def random_array(shape, dtype, rng):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(size=shape) < 0.5
    if dtype.kind in "iu":
        # Small non-negative values stay valid as indices, lengths or token ids.
        return rng.integers(0, 8, size=shape).astype(dtype)
    raise EdgeAttnError("cannot generate random data of type {}".format(dtype))


def random_feeds(inputs, batch, seed=0):
    """``{name: array}`` for ``inputs`` = ``[(name, numpy dtype, shape)]``."""
    rng = np.random.default_rng(seed)
    return {name: random_array(resolve_shape(name, shape, batch), dtype, rng) for name, dtype, shape in inputs}
