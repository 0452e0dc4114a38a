"""The op contract applied to ONNX nodes: emit a custom node exactly as its schema says, and check emitted ones.

A custom node has op_type = schema op_type (prefixed, never a built-in name), domain = schema domain
(``trt.plugins``), the string attributes ``plugin_version`` and ``plugin_namespace`` (TensorRT's creator lookup
keys) and every schema attribute, always written out (defaults filled in by ``OpSchema.resolve_attributes``) with
the ONNX attribute type the schema names: int -> INT, float -> FLOAT, string -> STRING and the list forms.
Writing defaults explicitly keeps the plugin creator and the model-local function independent of default values.

The checker works on a plain description of a node (op_type, domain, attribute types and values, inputs, outputs);
:func:`node_problems` feeds it an ``onnx.NodeProto``. This module imports onnx only inside the functions that take
or make ``NodeProto`` objects, so the board-side commands import it without onnx.
"""
from ..errors import EdgeAttnError
from ..schemas import all_schemas, get_schema

#: the custom ops and their model-local function bodies use opset-13 semantics (single-axis Softmax, ReduceSum
#: with an axes input, Squeeze/Unsqueeze/Split with inputs)
MIN_OPSET = 13

PLUGIN_VERSION_ATTR = "plugin_version"
PLUGIN_NAMESPACE_ATTR = "plugin_namespace"

#: schema attribute type -> ONNX AttributeProto.AttributeType number (onnx.proto; stable since IR 3)
ONNX_ATTRIBUTE_TYPES = {"float": 1, "int": 2, "string": 3, "floats": 6, "ints": 7, "strings": 8}
_TYPE_NAMES = {number: name for name, number in ONNX_ATTRIBUTE_TYPES.items()}

#: suffixes of TorchScript's ``g.op(..., name_<suffix>=value)`` per schema attribute type
TORCHSCRIPT_SUFFIX = {"int": "i", "float": "f", "string": "s", "ints": "i", "floats": "f", "strings": "s"}


def custom_op_types():
    """op_type -> schema (version 1) of every custom op in the contract."""
    return {schema.op_type: schema for (op_type, version), schema in all_schemas().items() if version == "1"}


def custom_domains():
    return {schema.domain for schema in custom_op_types().values()}


def is_custom(op_type, domain):
    """A node is custom if its op_type has a schema or it lives in a schema's domain (``trt.plugins``)."""
    return op_type in custom_op_types() or domain in custom_domains()


def attribute_types(op_type, version="1"):
    """Attribute name -> schema type, plugin keys included (both strings)."""
    schema = get_schema(op_type, version)
    types = {attr.name: attr.type for attr in schema.attributes}
    types[PLUGIN_VERSION_ATTR] = "string"
    types[PLUGIN_NAMESPACE_ATTR] = "string"
    return types


def node_attributes(op_type, given):
    """The complete attribute dict of a custom node: the schema attributes (validated, defaults filled, schema
    order) followed by plugin_version and plugin_namespace."""
    schema = get_schema(op_type)
    attributes = schema.resolve_attributes(given)
    attributes[PLUGIN_VERSION_ATTR] = schema.version
    attributes[PLUGIN_NAMESPACE_ATTR] = schema.namespace
    return attributes


def expected_input_count(schema, attributes):
    """Number of inputs a node with these attributes carries: the required ones plus each optional input whose
    ``present_if`` attribute is set (optional inputs come last in the schemas)."""
    return sum(1 for spec in schema.inputs
               if not spec.optional or (spec.present_if and attributes.get(spec.present_if)))


def problems(op_type, domain, attributes, types, inputs, outputs):
    """Every way a node disagrees with its op schema, as short messages (empty list: it conforms).

    ``attributes``: name -> Python value; ``types``: name -> schema type name ("int", "floats", ...) or None when
    the caller cannot tell (then the value's Python type decides); ``inputs``: input names ("" = absent).
    """
    known = custom_op_types()
    if op_type not in known:
        return ["op_type {!r} has no schema (known: {})".format(op_type, ", ".join(sorted(known)))]
    found = []
    schema = known[op_type]
    version = attributes.get(PLUGIN_VERSION_ATTR)
    if isinstance(version, str) and version != schema.version:
        try:
            schema = get_schema(op_type, version)
        except EdgeAttnError:
            found.append("plugin_version {!r} has no schema".format(version))
    if domain != schema.domain:
        found.append("domain {!r} != {!r}".format(domain, schema.domain))
    expected_types = {attr.name: attr.type for attr in schema.attributes}
    expected_types[PLUGIN_VERSION_ATTR] = expected_types[PLUGIN_NAMESPACE_ATTR] = "string"
    missing = [name for name in expected_types if name not in attributes]
    unknown = [name for name in attributes if name not in expected_types]
    if missing:
        found.append("missing attribute(s) {}".format(", ".join(missing)))
    if unknown:
        found.append("attribute(s) {} not in the schema".format(", ".join(unknown)))
    for name, value in attributes.items():
        if name not in expected_types:
            continue
        actual = types.get(name) or _python_type(value, expected_types[name])
        if actual != expected_types[name]:
            found.append("attribute {} has type {} (schema: {})".format(name, actual, expected_types[name]))
    if attributes.get(PLUGIN_VERSION_ATTR, schema.version) != schema.version:
        found.append("plugin_version {!r} != {!r}".format(attributes[PLUGIN_VERSION_ATTR], schema.version))
    if PLUGIN_NAMESPACE_ATTR in attributes and attributes[PLUGIN_NAMESPACE_ATTR] != schema.namespace:
        found.append("plugin_namespace {!r} != {!r}".format(attributes[PLUGIN_NAMESPACE_ATTR], schema.namespace))
    for attr in schema.attributes:
        if attr.name in attributes and attr.values is not None and attributes[attr.name] not in attr.values:
            found.append("attribute {}={!r} is not one of {}".format(attr.name, attributes[attr.name], attr.values))
    present = list(inputs)
    while present and not present[-1]:
        present.pop()
    if not missing:
        wanted = expected_input_count(schema, attributes)
        if len(present) != wanted or not all(present):
            found.append("{} input(s) {} (the schema expects {} for these attributes)".format(
                len(present), present, wanted))
    if len(outputs) != len(schema.outputs):
        found.append("{} output(s) (schema: {})".format(len(outputs), len(schema.outputs)))
    if op_type == "EdgeAttnLiteMLA" and attributes.get("kernel") == "quadratic_taylor":
        values = [attributes.get(name) for name in ("qt_alpha", "qt_beta", "qt_gamma")]
        lengths = [len(value) if isinstance(value, list) else None for value in values]
        if None not in lengths and (len(set(lengths)) != 1 or lengths[0] < 1):
            found.append("qt_alpha/qt_beta/qt_gamma have lengths {}; they must be equal and >= 1".format(lengths))
    return found


def _python_type(value, expected):
    """Schema type of a decoded attribute value whose ONNX type the caller does not know."""
    if isinstance(value, list):
        if not value:
            return expected if expected.endswith("s") and expected != "string" else "list"
        return {int: "ints", float: "floats", str: "strings"}.get(type(value[0]), "list")
    return {int: "int", float: "float", str: "string"}.get(type(value), type(value).__name__)


# --------------------------------------------------------------------------------------------- onnx.NodeProto


def attribute_value(attr):
    """Python value of an onnx AttributeProto: strings decoded, repeated fields as lists."""
    from onnx import helper

    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, (list, tuple)):
        return [v.decode("utf-8") if isinstance(v, bytes) else v for v in value]
    return value


def decoded_attributes(node):
    """name -> Python value of an onnx NodeProto's attributes."""
    return {attr.name: attribute_value(attr) for attr in node.attribute}


def node_problems(node):
    """:func:`problems` for an onnx NodeProto (attribute types taken from the proto)."""
    types = {attr.name: _TYPE_NAMES.get(attr.type, "ONNX type {}".format(attr.type)) for attr in node.attribute}
    return problems(node.op_type, node.domain, decoded_attributes(node), types, list(node.input),
                    list(node.output))


def make_node(op_type, inputs, outputs, name=None, **given):
    """An onnx NodeProto for ``op_type`` per its schema (used by tests and graph rewrites; the TorchScript
    symbolics in :mod:`edgeattn.export.symbolics` emit the same node through ``g.op``)."""
    from onnx import helper

    schema = get_schema(op_type)
    attributes = node_attributes(op_type, given)
    node = helper.make_node(op_type, list(inputs), list(outputs), name=name, domain=schema.domain)
    types = attribute_types(op_type)
    for key, value in attributes.items():
        node.attribute.append(helper.make_attribute(key, value, attr_type=ONNX_ATTRIBUTE_TYPES[types[key]]))
    found = node_problems(node)
    if found:
        raise EdgeAttnError("{}: {}".format(op_type, "; ".join(found)))
    return node


def custom_nodes(graph):
    """Custom nodes of an onnx GraphProto (main graph only), in graph order."""
    return [node for node in graph.node if is_custom(node.op_type, node.domain)]


def validate_model(model):
    """Raise EdgeAttnError naming every custom node of an onnx ModelProto that disagrees with its schema; return
    the number of custom nodes checked."""
    nodes = custom_nodes(model.graph)
    messages = []
    for index, node in enumerate(nodes):
        found = node_problems(node)
        if found:
            messages.append("{} ({}): {}".format(node.name or "#{}".format(index), node.op_type, "; ".join(found)))
    if messages:
        raise EdgeAttnError("custom node(s) disagree with the op schema: " + " | ".join(messages))
    return len(nodes)
