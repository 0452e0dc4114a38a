"""Optimization profiles from ``--shapes NAME:MIN,OPT,MAX`` and the ONNX graph inputs."""
from ..errors import EdgeAttnError
from ..console import warn


def parse_dims(text, spec):
    parts = text.strip().lower().split("x")
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        raise EdgeAttnError("bad shape {!r} in --shapes {}: use dimensions like 1x3x224x224".format(text, spec))
    if any(d < 1 for d in dims):
        raise EdgeAttnError("bad shape {!r} in --shapes {}: dimensions must be >= 1".format(text, spec))
    return dims


def parse_shape_spec(spec):
    """``NAME:MIN,OPT,MAX`` (or ``NAME:DIMS`` for a fixed shape) -> ``(name, min, opt, max)``.

    The name is everything before the last colon, so names like ``input:0`` work.
    """
    name, sep, shapes = spec.rpartition(":")
    if not sep or not name:
        raise EdgeAttnError("bad --shapes {!r}: expected NAME:MIN,OPT,MAX such as "
                            "input:1x3x224x224,4x3x224x224,8x3x224x224".format(spec))
    pieces = [p for p in shapes.split(",")]
    if len(pieces) == 1:
        pieces = pieces * 3
    if len(pieces) != 3:
        raise EdgeAttnError("bad --shapes {!r}: give one shape or three (MIN,OPT,MAX)".format(spec))
    low, opt, high = (parse_dims(p, spec) for p in pieces)
    if not len(low) == len(opt) == len(high):
        raise EdgeAttnError("bad --shapes {!r}: MIN, OPT and MAX have different ranks".format(spec))
    if not all(a <= b <= c for a, b, c in zip(low, opt, high)):
        raise EdgeAttnError("bad --shapes {!r}: need MIN <= OPT <= MAX in every dimension".format(spec))
    return name, low, opt, high


def resolve_shape_profile(graph_inputs, specs):
    """One optimization profile ``[(name, min, opt, max)]`` for every graph input.

    Given shapes must name graph inputs, match their rank and their static dimensions. Inputs without a spec use
    their static shape; dynamic dimensions without a spec become 1 (trtexec's rule), with a warning.
    """
    parsed = {}
    for spec in specs or ():
        name, low, opt, high = parse_shape_spec(spec)
        if name in parsed:
            raise EdgeAttnError("--shapes gives {!r} twice".format(name))
        parsed[name] = (low, opt, high)
    inputs = {entry["name"]: entry for entry in graph_inputs}
    for name in parsed:
        if name not in inputs:
            raise EdgeAttnError("--shapes names {!r}, which is not an input of the model (inputs: {})".format(
                name, ", ".join(sorted(inputs)) or "none"))
    profile = []
    for entry in graph_inputs:
        name, shape = entry["name"], entry["shape"]
        if shape is None:
            if name not in parsed:
                raise EdgeAttnError("input {!r} has no shape in the model; give --shapes {}:MIN,OPT,MAX".format(
                    name, name))
            profile.append((name,) + parsed[name])
            continue
        if name in parsed:
            low, opt, high = parsed[name]
            if len(low) != len(shape):
                raise EdgeAttnError("--shapes {}: rank {} but the input has rank {} ({})".format(
                    name, len(low), len(shape), "x".join(str(d) for d in shape)))
            for axis, dim in enumerate(shape):
                if isinstance(dim, int) and dim >= 0 and not low[axis] == opt[axis] == high[axis] == dim:
                    raise EdgeAttnError("--shapes {}: dimension {} is fixed to {} in the model".format(
                        name, axis, dim))
            profile.append((name, low, opt, high))
            continue
        dims = [d if isinstance(d, int) and d >= 0 else 1 for d in shape]
        if dims != list(shape):
            warn("input {!r} has dynamic dimensions ({}) and no --shapes; building for {} only".format(
                name, "x".join(str(d) for d in shape), "x".join(str(d) for d in dims)))
        profile.append((name, dims, list(dims), list(dims)))
    return profile


def profile_record(profile):
    """The manifest form: ``{"inputs": {name: {"min", "opt", "max"}}}``."""
    return {"inputs": {name: {"min": list(low), "opt": list(opt), "max": list(high)}
                       for name, low, opt, high in profile}}
