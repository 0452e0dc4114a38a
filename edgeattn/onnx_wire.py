"""ONNX files without the ``onnx`` package: a small reader and writer of the protobuf wire format.

The board has neither ``onnx`` nor ``protobuf`` guaranteed, yet ``edgeattn build`` must hand TensorRT the right variant
of a model (TensorRT 9.0-10.6 inline a model-local function instead of calling our plugin, so the functions are
removed first), validate ``--shapes`` against the graph inputs, and list the custom ops a model needs. All of that
only needs a few fields of ``ModelProto``, read straight from the encoded bytes:

* ``strip_local_functions`` copies every top-level field except ``functions`` (field 25), byte for byte, so the
  rest of the file - weights included - is untouched;
* ``read_model_info`` / ``read_graph_io`` / ``read_custom_nodes`` decode the header, the graph inputs/outputs and the
  non-standard nodes, skipping initializer payloads without copying them;
* ``make_model`` and friends write the minimal models the tests and the benchmark need (no ``onnx.helper`` on the
  board).

Field numbers are those of onnx/onnx.proto (stable since IR version 3).
"""
import struct

from .errors import EdgeAttnError

# Wire types.
_VARINT, _FIXED64, _LEN, _START_GROUP, _END_GROUP, _FIXED32 = 0, 1, 2, 3, 4, 5

# ModelProto
_MODEL_IR_VERSION = 1
_MODEL_PRODUCER_NAME = 2
_MODEL_PRODUCER_VERSION = 3
_MODEL_GRAPH = 7
_MODEL_OPSET_IMPORT = 8
_MODEL_FUNCTIONS = 25
# OperatorSetIdProto
_OPSET_DOMAIN = 1
_OPSET_VERSION = 2
# FunctionProto
_FUNCTION_NAME = 1
_FUNCTION_DOMAIN = 10
# GraphProto
_GRAPH_NODE = 1
_GRAPH_NAME = 2
_GRAPH_INITIALIZER = 5
_GRAPH_INPUT = 11
_GRAPH_OUTPUT = 12
# NodeProto
_NODE_INPUT = 1
_NODE_OUTPUT = 2
_NODE_NAME = 3
_NODE_OP_TYPE = 4
_NODE_ATTRIBUTE = 5
_NODE_DOMAIN = 7
# AttributeProto
_ATTR_NAME = 1
_ATTR_F = 2
_ATTR_I = 3
_ATTR_S = 4
_ATTR_T = 5
_ATTR_FLOATS = 7
_ATTR_INTS = 8
_ATTR_STRINGS = 9
_ATTR_TYPE = 20
# TensorProto
_TENSOR_DIMS = 1
_TENSOR_DATA_TYPE = 2
_TENSOR_NAME = 8
_TENSOR_RAW_DATA = 9
# ValueInfoProto / TypeProto / TypeProto.Tensor / TensorShapeProto / Dimension
_VALUE_INFO_NAME = 1
_VALUE_INFO_TYPE = 2
_TYPE_TENSOR = 1
_TENSOR_TYPE_ELEM_TYPE = 1
_TENSOR_TYPE_SHAPE = 2
_SHAPE_DIM = 1
_DIM_VALUE = 1
_DIM_PARAM = 2

#: TensorProto.DataType -> numpy dtype name (the element types a benchmark can feed)
ELEM_TYPES = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
    10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16",
}
_ELEM_TYPE_IDS = {name: number for number, name in ELEM_TYPES.items()}

#: AttributeProto.AttributeType
ATTR_FLOAT, ATTR_INT, ATTR_STRING, ATTR_TENSOR = 1, 2, 3, 4
ATTR_FLOATS, ATTR_INTS, ATTR_STRINGS = 6, 7, 8

#: Domains whose ops TensorRT imports natively; anything else goes to the plugin registry.
STANDARD_DOMAINS = ("", "ai.onnx")


class WireError(EdgeAttnError):
    """The bytes are not a well-formed protobuf message of the expected type."""


# ---------------------------------------------------------------------------------------------------------------
# Decoding


def _read_varint(buf, pos, end):
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise WireError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("varint longer than 10 bytes")


def _iter_fields(buf, start=0, end=None):
    """Yield ``(field_number, wire_type, value, field_start, field_end)`` for each field of one message.

    ``value`` is the integer for varint/fixed fields and a ``(start, end)`` span for length-delimited ones, so large
    payloads (initializers) are skipped without copying.
    """
    if end is None:
        end = len(buf)
    pos = start
    while pos < end:
        field_start = pos
        key, pos = _read_varint(buf, pos, end)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0 at byte {}".format(field_start))
        if wire_type == _VARINT:
            value, pos = _read_varint(buf, pos, end)
        elif wire_type == _FIXED64:
            if pos + 8 > end:
                raise WireError("truncated fixed64 field {}".format(number))
            value = struct.unpack_from("<Q", buf, pos)[0]
            pos += 8
        elif wire_type == _FIXED32:
            if pos + 4 > end:
                raise WireError("truncated fixed32 field {}".format(number))
            value = struct.unpack_from("<I", buf, pos)[0]
            pos += 4
        elif wire_type == _LEN:
            length, pos = _read_varint(buf, pos, end)
            if pos + length > end:
                raise WireError("field {} claims {} bytes, only {} left".format(number, length, end - pos))
            value = (pos, pos + length)
            pos += length
        else:
            # Groups are not used by onnx.proto; anything else means this is not an ONNX file.
            raise WireError("unsupported wire type {} (field {})".format(wire_type, number))
        yield number, wire_type, value, field_start, pos


def _text(buf, span):
    try:
        return bytes(buf[span[0]:span[1]]).decode("utf-8")
    except UnicodeDecodeError:
        raise WireError("string field is not UTF-8")


def _signed64(value):
    return value - (1 << 64) if value >= (1 << 63) else value


def _view(data):
    if isinstance(data, memoryview):
        return data
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError("expected bytes, got {}".format(type(data).__name__))
    return memoryview(data)


def _check_model(buf):
    """Walk the top level once; raise :class:`WireError` unless it looks like a ModelProto with a graph."""
    seen_graph = False
    for number, wire_type, _value, _s, _e in _iter_fields(buf):
        if number == _MODEL_GRAPH:
            if wire_type != _LEN:
                raise WireError("ModelProto.graph has the wrong wire type")
            seen_graph = True
        elif number in (_MODEL_IR_VERSION,) and wire_type != _VARINT:
            raise WireError("ModelProto.ir_version has the wrong wire type")
    if not seen_graph:
        raise WireError("no graph in the model")


def strip_local_functions(data):
    """Return ``data`` (ModelProto bytes) without its model-local functions (field 25); everything else is kept
    byte for byte. Raises :class:`WireError` if ``data`` is not a ModelProto."""
    buf = _view(data)
    _check_model(buf)
    pieces = []
    run_start = 0
    for number, _wire_type, _value, field_start, field_end in _iter_fields(buf):
        if number == _MODEL_FUNCTIONS:
            pieces.append(buf[run_start:field_start])
            run_start = field_end
    pieces.append(buf[run_start:])
    return b"".join(bytes(piece) for piece in pieces)


def read_model_info(data):
    """Header facts of a ModelProto: ``ir_version``, ``opset_imports`` ({domain: version}), ``has_functions``,
    ``function_names`` (``domain::name`` is not needed by TensorRT, which keys functions by name only), plus
    ``producer_name`` and ``producer_version``."""
    buf = _view(data)
    _check_model(buf)
    info = {"ir_version": None, "opset_imports": {}, "has_functions": False, "function_names": [],
            "producer_name": "", "producer_version": ""}
    for number, wire_type, value, _s, _e in _iter_fields(buf):
        if number == _MODEL_IR_VERSION and wire_type == _VARINT:
            info["ir_version"] = value
        elif number == _MODEL_PRODUCER_NAME and wire_type == _LEN:
            info["producer_name"] = _text(buf, value)
        elif number == _MODEL_PRODUCER_VERSION and wire_type == _LEN:
            info["producer_version"] = _text(buf, value)
        elif number == _MODEL_OPSET_IMPORT and wire_type == _LEN:
            domain, version = "", None
            for sub, sub_type, sub_value, _a, _b in _iter_fields(buf, *value):
                if sub == _OPSET_DOMAIN and sub_type == _LEN:
                    domain = _text(buf, sub_value)
                elif sub == _OPSET_VERSION and sub_type == _VARINT:
                    version = _signed64(sub_value)
            info["opset_imports"][domain] = version
        elif number == _MODEL_FUNCTIONS and wire_type == _LEN:
            info["has_functions"] = True
            name = ""
            for sub, sub_type, sub_value, _a, _b in _iter_fields(buf, *value):
                if sub == _FUNCTION_NAME and sub_type == _LEN:
                    name = _text(buf, sub_value)
            info["function_names"].append(name)
    return info


def _graph_span(buf):
    for number, wire_type, value, _s, _e in _iter_fields(buf):
        if number == _MODEL_GRAPH and wire_type == _LEN:
            return value
    raise WireError("no graph in the model")


def _read_value_info(buf, span):
    name, elem_type, shape = "", None, None
    for number, wire_type, value, _s, _e in _iter_fields(buf, *span):
        if number == _VALUE_INFO_NAME and wire_type == _LEN:
            name = _text(buf, value)
        elif number == _VALUE_INFO_TYPE and wire_type == _LEN:
            for t_number, t_type, t_value, _a, _b in _iter_fields(buf, *value):
                if t_number != _TYPE_TENSOR or t_type != _LEN:
                    continue
                for f_number, f_type, f_value, _c, _d in _iter_fields(buf, *t_value):
                    if f_number == _TENSOR_TYPE_ELEM_TYPE and f_type == _VARINT:
                        elem_type = f_value
                    elif f_number == _TENSOR_TYPE_SHAPE and f_type == _LEN:
                        shape = []
                        for d_number, d_type, d_value, _g, _h in _iter_fields(buf, *f_value):
                            if d_number != _SHAPE_DIM or d_type != _LEN:
                                continue
                            dim = None
                            for x_number, x_type, x_value, _i, _j in _iter_fields(buf, *d_value):
                                if x_number == _DIM_VALUE and x_type == _VARINT:
                                    dim = _signed64(x_value)
                                elif x_number == _DIM_PARAM and x_type == _LEN:
                                    dim = _text(buf, x_value)
                            shape.append(dim)
    return {"name": name, "elem_type": ELEM_TYPES.get(elem_type, elem_type), "shape": shape}


def read_graph_io(data):
    """Graph inputs (initializers excluded, as older exporters list them as inputs too) and outputs.

    Returns ``{"inputs": [...], "outputs": [...]}``; each entry has ``name``, ``elem_type`` (numpy dtype name, or the
    raw number if unknown) and ``shape`` (list of int, dim_param string, or None per dimension; None if unknown).
    """
    buf = _view(data)
    graph = _graph_span(buf)
    inputs, outputs, initializer_names = [], [], set()
    for number, wire_type, value, _s, _e in _iter_fields(buf, *graph):
        if wire_type != _LEN:
            continue
        if number == _GRAPH_INPUT:
            inputs.append(_read_value_info(buf, value))
        elif number == _GRAPH_OUTPUT:
            outputs.append(_read_value_info(buf, value))
        elif number == _GRAPH_INITIALIZER:
            for t_number, t_type, t_value, _a, _b in _iter_fields(buf, *value):
                if t_number == _TENSOR_NAME and t_type == _LEN:
                    initializer_names.add(_text(buf, t_value))
    return {"inputs": [i for i in inputs if i["name"] not in initializer_names], "outputs": outputs}


def _read_attribute(buf, span):
    """Name and value of the scalar/list attributes a plugin field can carry; other types give ``None``."""
    name, attr_type = "", None
    f = i = s = None
    floats, ints, strings = [], [], []
    for number, wire_type, value, _s, _e in _iter_fields(buf, *span):
        if number == _ATTR_NAME and wire_type == _LEN:
            name = _text(buf, value)
        elif number == _ATTR_TYPE and wire_type == _VARINT:
            attr_type = value
        elif number == _ATTR_F and wire_type == _FIXED32:
            f = struct.unpack("<f", struct.pack("<I", value))[0]
        elif number == _ATTR_I and wire_type == _VARINT:
            i = _signed64(value)
        elif number == _ATTR_S and wire_type == _LEN:
            s = bytes(buf[value[0]:value[1]])
        elif number == _ATTR_FLOATS:
            if wire_type == _FIXED32:
                floats.append(struct.unpack("<f", struct.pack("<I", value))[0])
            elif wire_type == _LEN:  # packed
                raw = bytes(buf[value[0]:value[1]])
                floats.extend(struct.unpack("<{}f".format(len(raw) // 4), raw))
        elif number == _ATTR_INTS:
            if wire_type == _VARINT:
                ints.append(_signed64(value))
            elif wire_type == _LEN:  # packed
                pos, end = value
                while pos < end:
                    item, pos = _read_varint(buf, pos, end)
                    ints.append(_signed64(item))
        elif number == _ATTR_STRINGS and wire_type == _LEN:
            strings.append(bytes(buf[value[0]:value[1]]))

    def _decode(raw):
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw

    values = {ATTR_FLOAT: f, ATTR_INT: i, ATTR_STRING: None if s is None else _decode(s),
              ATTR_FLOATS: floats, ATTR_INTS: ints, ATTR_STRINGS: [_decode(x) for x in strings]}
    if attr_type is None:  # IR < 3 files may omit the type; infer from what is set
        for candidate, present in ((ATTR_FLOAT, f is not None), (ATTR_INT, i is not None),
                                   (ATTR_STRING, s is not None), (ATTR_FLOATS, bool(floats)),
                                   (ATTR_INTS, bool(ints)), (ATTR_STRINGS, bool(strings))):
            if present:
                attr_type = candidate
                break
    return name, values.get(attr_type)


def read_nodes(data, custom_only=False):
    """The main graph's nodes in order: ``op_type``, ``domain``, ``name``, ``inputs``, ``outputs`` and
    ``attributes`` (scalar and list attributes; tensors and subgraphs are reported as None).

    With ``custom_only`` only nodes outside the standard ONNX domains are returned (the ones TensorRT resolves
    through its plugin registry)."""
    buf = _view(data)
    graph = _graph_span(buf)
    nodes = []
    for number, wire_type, value, _s, _e in _iter_fields(buf, *graph):
        if number != _GRAPH_NODE or wire_type != _LEN:
            continue
        node = {"op_type": "", "domain": "", "name": "", "inputs": [], "outputs": [], "attributes": {}}
        attribute_spans = []
        for n_number, n_type, n_value, _a, _b in _iter_fields(buf, *value):
            if n_type != _LEN:
                continue
            if n_number == _NODE_OP_TYPE:
                node["op_type"] = _text(buf, n_value)
            elif n_number == _NODE_DOMAIN:
                node["domain"] = _text(buf, n_value)
            elif n_number == _NODE_NAME:
                node["name"] = _text(buf, n_value)
            elif n_number == _NODE_INPUT:
                node["inputs"].append(_text(buf, n_value))
            elif n_number == _NODE_OUTPUT:
                node["outputs"].append(_text(buf, n_value))
            elif n_number == _NODE_ATTRIBUTE:
                attribute_spans.append(n_value)
        if custom_only and node["domain"] in STANDARD_DOMAINS:
            continue
        for span in attribute_spans:
            attr_name, attr_value = _read_attribute(buf, span)
            node["attributes"][attr_name] = attr_value
        nodes.append(node)
    return nodes


def read_custom_ops(data):
    """The distinct plugin lookups a model needs, as TensorRT's parser forms them (tensorrt.md §2.1):
    ``[{"op_type", "domain", "plugin_version", "plugin_namespace", "has_namespace_attribute", "count"}]``."""
    found = {}
    for node in read_nodes(data, custom_only=True):
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


def load_model_bytes(path):
    """Read an ONNX file and check that it parses as a ModelProto; user-facing errors for missing/corrupt files."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise EdgeAttnError("no such file: {}".format(path))
    except IsADirectoryError:
        raise EdgeAttnError("{} is a directory, not an ONNX file".format(path))
    except OSError as error:
        raise EdgeAttnError("cannot read {}: {}".format(path, error.strerror or error))
    try:
        _check_model(_view(data))
    except WireError as error:
        raise EdgeAttnError("{} is not a valid ONNX model ({})".format(path, error.format_message()))
    return data


def is_onnx_model(data):
    """True if ``data`` parses as a ModelProto with a graph (used to tell ONNX files from engine plans)."""
    try:
        _check_model(_view(data))
    except (WireError, TypeError):
        return False
    return True


# ---------------------------------------------------------------------------------------------------------------
# Encoding (minimal: what tests, the overhead benchmark and smoke checks need without onnx.helper)


def _varint(value):
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number, wire_type):
    return _varint((number << 3) | wire_type)


def _len_field(number, payload):
    if isinstance(payload, str):
        payload = payload.encode("utf-8")
    return _key(number, _LEN) + _varint(len(payload)) + payload


def _int_field(number, value):
    return _key(number, _VARINT) + _varint(int(value))


def make_attribute(name, value):
    """An AttributeProto for an int, float, string, or a list of one of those."""
    out = _len_field(_ATTR_NAME, name)
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        return out + _int_field(_ATTR_I, value) + _int_field(_ATTR_TYPE, ATTR_INT)
    if isinstance(value, float):
        return out + _key(_ATTR_F, _FIXED32) + struct.pack("<f", value) + _int_field(_ATTR_TYPE, ATTR_FLOAT)
    if isinstance(value, (str, bytes)):
        return out + _len_field(_ATTR_S, value) + _int_field(_ATTR_TYPE, ATTR_STRING)
    values = list(value)
    if values and all(isinstance(v, int) for v in values):
        return out + b"".join(_int_field(_ATTR_INTS, v) for v in values) + _int_field(_ATTR_TYPE, ATTR_INTS)
    if values and all(isinstance(v, (int, float)) for v in values):
        return (out + b"".join(_key(_ATTR_FLOATS, _FIXED32) + struct.pack("<f", v) for v in values)
                + _int_field(_ATTR_TYPE, ATTR_FLOATS))
    if values and all(isinstance(v, (str, bytes)) for v in values):
        return out + b"".join(_len_field(_ATTR_STRINGS, v) for v in values) + _int_field(_ATTR_TYPE, ATTR_STRINGS)
    raise TypeError("unsupported attribute value for {!r}: {!r}".format(name, value))


def make_node(op_type, inputs, outputs, name="", domain="", **attributes):
    """A NodeProto (bytes)."""
    out = b"".join(_len_field(_NODE_INPUT, i) for i in inputs)
    out += b"".join(_len_field(_NODE_OUTPUT, o) for o in outputs)
    if name:
        out += _len_field(_NODE_NAME, name)
    out += _len_field(_NODE_OP_TYPE, op_type)
    for attr_name in sorted(attributes):
        out += _len_field(_NODE_ATTRIBUTE, make_attribute(attr_name, attributes[attr_name]))
    if domain:
        out += _len_field(_NODE_DOMAIN, domain)
    return out


def make_value_info(name, elem_type, shape):
    """A ValueInfoProto for a tensor; ``shape`` entries are ints or dim_param strings."""
    dims = b""
    for dim in shape:
        if isinstance(dim, str):
            dims += _len_field(_SHAPE_DIM, _len_field(_DIM_PARAM, dim))
        else:
            dims += _len_field(_SHAPE_DIM, _int_field(_DIM_VALUE, dim))
    tensor_type = _int_field(_TENSOR_TYPE_ELEM_TYPE, _ELEM_TYPE_IDS[elem_type]) + _len_field(_TENSOR_TYPE_SHAPE, dims)
    return _len_field(_VALUE_INFO_NAME, name) + _len_field(_VALUE_INFO_TYPE, _len_field(_TYPE_TENSOR, tensor_type))


def make_tensor(name, array):
    """A TensorProto holding a numpy array as raw_data (little-endian)."""
    import numpy as np

    array = np.ascontiguousarray(array)
    dtype_name = array.dtype.name
    if dtype_name not in _ELEM_TYPE_IDS:
        raise TypeError("unsupported initializer dtype {}".format(dtype_name))
    out = b"".join(_int_field(_TENSOR_DIMS, d) for d in array.shape)
    out += _int_field(_TENSOR_DATA_TYPE, _ELEM_TYPE_IDS[dtype_name])
    out += _len_field(_TENSOR_NAME, name)
    out += _len_field(_TENSOR_RAW_DATA, array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())
    return out


def make_function(name, domain, inputs, outputs, nodes, opset_imports):
    """A FunctionProto (bytes): a model-local function, as the exporter attaches for ONNX Runtime."""
    out = _len_field(_FUNCTION_NAME, name)
    out += b"".join(_len_field(4, i) for i in inputs)
    out += b"".join(_len_field(5, o) for o in outputs)
    out += b"".join(_len_field(7, n) for n in nodes)
    out += b"".join(_len_field(9, _len_field(_OPSET_DOMAIN, d) + _int_field(_OPSET_VERSION, v))
                    for d, v in sorted(opset_imports.items()))
    out += _len_field(_FUNCTION_DOMAIN, domain)
    return out


def make_model(nodes, inputs, outputs, initializers=(), opset_imports=None, functions=(), ir_version=8,
               graph_name="graph", producer_name="edgeattn.onnx_wire"):
    """A ModelProto (bytes). ``nodes``/``inputs``/``outputs``/``initializers``/``functions`` are the byte strings
    returned by the ``make_*`` helpers; ``opset_imports`` maps domain to version (default ``{"": 17}``)."""
    if opset_imports is None:
        opset_imports = {"": 17}
    graph = b"".join(_len_field(_GRAPH_NODE, n) for n in nodes)
    graph += _len_field(_GRAPH_NAME, graph_name)
    graph += b"".join(_len_field(_GRAPH_INITIALIZER, t) for t in initializers)
    graph += b"".join(_len_field(_GRAPH_INPUT, v) for v in inputs)
    graph += b"".join(_len_field(_GRAPH_OUTPUT, v) for v in outputs)
    model = _int_field(_MODEL_IR_VERSION, ir_version)
    model += _len_field(_MODEL_PRODUCER_NAME, producer_name)
    model += _len_field(_MODEL_GRAPH, graph)
    model += b"".join(_len_field(_MODEL_OPSET_IMPORT, _len_field(_OPSET_DOMAIN, d) + _int_field(_OPSET_VERSION, v))
                      for d, v in sorted(opset_imports.items()))
    model += b"".join(_len_field(_MODEL_FUNCTIONS, f) for f in functions)
    return model
