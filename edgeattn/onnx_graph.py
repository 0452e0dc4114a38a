"""What the board-side commands read from ONNX files, through the ``onnx`` package.

``edgeattn build`` hands TensorRT the variant of a model its version needs (TensorRT 9.0-10.6 inline a model-local
function instead of calling our plugin, so the functions are removed first), validates ``--shapes`` against the
graph inputs and lists the custom ops a model needs; ``edgeattn inspect`` and the trtexec bench backend read the
same facts. None of that needs the weights, so files are loaded with ``load_external_data=False``: a model whose
weights live in external files is read without them, and a variant written beside it still finds them.

``onnx`` is imported inside the functions: ``edgeattn doctor``, ``profiles``, ``sweep`` and ``power`` run without it,
and a missing ``onnx`` is one error line naming the package (``MissingDependencyError``).
"""
import os

from . import filekind
from .errors import EdgeAttnError, MissingDependencyError

#: Domains whose ops TensorRT imports natively; anything else goes to the plugin registry.
STANDARD_DOMAINS = ("", "ai.onnx")

_INSTALL_HINT = "Install it with `pip install onnx` (a dependency of edgeattn; deploy/jetson/setup.sh installs it)."


def import_onnx(needed_for="reading ONNX models"):
    """The ``onnx`` module, or :class:`MissingDependencyError` naming the package and what needed it."""
    try:
        import onnx
    except ImportError:
        raise MissingDependencyError("onnx", needed_for, _INSTALL_HINT)
    return onnx


def load_model(path, needed_for="reading ONNX models"):
    """The ModelProto at ``path`` without external weight data; one-line errors for missing or corrupt files."""
    onnx = import_onnx(needed_for)
    from google.protobuf.message import DecodeError

    path = os.fspath(path)
    if not os.path.exists(path):
        raise EdgeAttnError("no such file: {}".format(path))
    filekind.require(path, ("onnx",), "an ONNX model", command=_command_of(needed_for))
    if os.path.isdir(path):
        raise EdgeAttnError("{} is a directory, not an ONNX file".format(path))
    try:
        # the format is fixed: onnx.load picks protobuf's JSON or text reader from a .json/.txt suffix
        model = onnx.load(path, format="protobuf", load_external_data=False)
    except OSError as error:
        raise EdgeAttnError("cannot read {}: {}".format(path, error.strerror or error))
    except (DecodeError, RuntimeWarning, ValueError) as error:
        raise EdgeAttnError("{} is not a valid ONNX model ({})".format(path, _first_line(error)))
    if not _is_model(model):
        raise EdgeAttnError("{} is not a valid ONNX model (no graph in it)".format(path))
    return model


def _command_of(needed_for):
    """"`edgeattn inspect`" for the refusal line; None when the caller names a purpose, not a command."""
    return needed_for if needed_for.startswith("`edgeattn ") else None


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _is_model(model):
    # protobuf parses many byte strings as a message of unknown fields; an ONNX model has an IR version and a graph
    return model.ir_version > 0 and model.HasField("graph")


def is_onnx_model(data):
    """True if ``data`` parses as an ONNX ModelProto with a graph (tells ONNX files from engine plans); False also
    when ``onnx`` is not installed, so that engines stay usable without it."""
    try:
        import onnx
        from google.protobuf.message import DecodeError
    except ImportError:
        return False
    model = onnx.ModelProto()
    try:
        model.ParseFromString(bytes(data))
    except (DecodeError, RuntimeWarning, ValueError):
        return False
    return _is_model(model)


def model_info(model):
    """Header facts: ``ir_version``, ``opset_imports`` ({domain: version}), ``has_functions``, ``function_names``
    (TensorRT keys functions by name only), ``producer_name`` and ``producer_version``."""
    return {"ir_version": int(model.ir_version),
            "opset_imports": {opset.domain: int(opset.version) for opset in model.opset_import},
            "has_functions": len(model.functions) > 0,
            "function_names": [function.name for function in model.functions],
            "producer_name": model.producer_name, "producer_version": model.producer_version}


def _elem_type_name(elem_type):
    """numpy dtype name of a TensorProto.DataType (the element types a benchmark can feed), else the number."""
    if not elem_type:
        return None
    from onnx import helper

    try:
        return helper.tensor_dtype_to_np_dtype(elem_type).name
    except (KeyError, TypeError, ValueError):
        return elem_type


def _value_info(value):
    tensor = value.type.tensor_type
    shape = None
    if tensor.HasField("shape"):
        shape = []
        for dim in tensor.shape.dim:
            if dim.HasField("dim_value"):
                shape.append(int(dim.dim_value))
            elif dim.HasField("dim_param"):
                shape.append(dim.dim_param)
            else:
                shape.append(None)
    return {"name": value.name, "elem_type": _elem_type_name(tensor.elem_type), "shape": shape}


def graph_io(model):
    """Graph inputs (initializers excluded, as older exporters list them as inputs too) and outputs.

    ``{"inputs": [...], "outputs": [...]}``; each entry has ``name``, ``elem_type`` (numpy dtype name, or the raw
    number if numpy has none) and ``shape`` (per dimension an int, a dim_param string or None; None if unknown).
    """
    initializers = {tensor.name for tensor in model.graph.initializer}
    return {"inputs": [_value_info(v) for v in model.graph.input if v.name not in initializers],
            "outputs": [_value_info(v) for v in model.graph.output]}


def attribute_value(attribute):
    """Python value of a scalar or list attribute (strings decoded); None for tensors, graphs and other types."""
    from onnx import AttributeProto, helper

    if attribute.type not in (AttributeProto.FLOAT, AttributeProto.INT, AttributeProto.STRING,
                              AttributeProto.FLOATS, AttributeProto.INTS, AttributeProto.STRINGS):
        return None
    value = helper.get_attribute_value(attribute)
    if isinstance(value, bytes):
        return _decode(value)
    if isinstance(value, (list, tuple)):
        return [_decode(v) if isinstance(v, bytes) else v for v in value]
    return value


def _decode(raw):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def graph_nodes(model, custom_only=False):
    """The main graph's nodes in order as dicts: ``op_type``, ``domain``, ``name``, ``inputs``, ``outputs`` and
    ``attributes`` (see :func:`attribute_value`). With ``custom_only`` only nodes outside the standard ONNX domains
    (the ones TensorRT resolves through its plugin registry)."""
    nodes = []
    for node in model.graph.node:
        if custom_only and node.domain in STANDARD_DOMAINS:
            continue
        nodes.append({"op_type": node.op_type, "domain": node.domain, "name": node.name,
                      "inputs": list(node.input), "outputs": list(node.output),
                      "attributes": {attribute.name: attribute_value(attribute) for attribute in node.attribute}})
    return nodes


def custom_ops(model):
    """The distinct plugin lookups a model needs, as TensorRT's parser forms them (op type,
    ``plugin_version`` or "1", ``plugin_namespace`` or ""; docs/custom-ops.md):
    ``[{"op_type", "domain", "plugin_version", "plugin_namespace", "has_namespace_attribute", "count"}]``."""
    found = {}
    for node in graph_nodes(model, custom_only=True):
        attributes = node["attributes"]
        version = attributes.get("plugin_version")
        namespace = attributes.get("plugin_namespace")
        key = (node["op_type"], node["domain"], version or "1", namespace or "", namespace is not None)
        found[key] = found.get(key, 0) + 1
    return [
        {"op_type": op_type, "domain": domain, "plugin_version": version, "plugin_namespace": namespace,
         "has_namespace_attribute": has_ns, "count": count}
        for (op_type, domain, version, namespace, has_ns), count in found.items()
    ]


def strip_local_functions(model):
    """Serialized ``model`` without its model-local functions; everything else (external-data references
    included) is kept. ``model`` itself is left as it was."""
    functions = list(model.functions)
    del model.functions[:]
    try:
        return model.SerializeToString()
    finally:
        model.functions.extend(functions)
