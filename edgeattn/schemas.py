"""The op contract: one YAML schema per custom op in ``export/schemas/``.

The exporter emits nodes from these schemas, the plugin creators expose exactly their attributes as plugin
fields, and the tests check both against them. This module only reads and validates the files (PyYAML, no
torch/onnx), so it also runs on the board.
"""
import os

import yaml

from ._paths import schema_dir
from .errors import EdgeAttnError

#: attribute types a TensorRT ONNX parser can turn into PluginFields (int, float, string and lists of them)
ATTRIBUTE_TYPES = ("int", "float", "string", "ints", "floats", "strings")
DTYPES = ("float32", "float16")
_REQUIRED_KEYS = ("op_type", "version", "domain", "namespace", "inputs", "outputs", "attributes")


class Attribute(object):
    __slots__ = ("name", "type", "required", "default", "values", "doc")

    def __init__(self, name, type, required=False, default=None, values=None, doc=None):
        self.name = name
        self.type = type
        self.required = bool(required)
        self.default = default
        self.values = list(values) if values is not None else None
        self.doc = doc

    def __repr__(self):
        return "Attribute({!r}, {!r})".format(self.name, self.type)


class TensorSpec(object):
    __slots__ = ("name", "shape", "dtypes", "optional", "present_if", "dtype_same_as")

    def __init__(self, name, shape, dtypes=None, optional=False, present_if=None, dtype_same_as=None):
        self.name = name
        self.shape = list(shape)
        self.dtypes = list(dtypes) if dtypes else None
        self.optional = bool(optional)
        self.present_if = present_if
        self.dtype_same_as = dtype_same_as


class OpSchema(object):
    """One op's contract. ``plugin_version``/``plugin_namespace`` are the TensorRT creator lookup keys."""

    def __init__(self, data, path):
        self.path = path
        self.raw = data
        self.op_type = data["op_type"]
        self.version = str(data["version"])
        self.domain = data["domain"]
        self.namespace = data["namespace"]
        self.summary = data.get("summary", "")
        self.semantics = data.get("semantics", "")
        self.inputs = [TensorSpec(**spec) for spec in data["inputs"]]
        self.outputs = [TensorSpec(**spec) for spec in data["outputs"]]
        self.attributes = [Attribute(**spec) for spec in data["attributes"]]

    @property
    def attribute_names(self):
        return [a.name for a in self.attributes]

    def attribute(self, name):
        for attr in self.attributes:
            if attr.name == name:
                return attr
        raise KeyError(name)

    def defaults(self):
        return {a.name: a.default for a in self.attributes if not a.required}

    def resolve_attributes(self, given):
        """Fill defaults and check names, types and allowed values; returns a new dict (schema order)."""
        unknown = sorted(set(given) - set(self.attribute_names))
        if unknown:
            raise EdgeAttnError("{}: unknown attribute(s) {}".format(self.op_type, ", ".join(unknown)))
        resolved = {}
        for attr in self.attributes:
            if attr.name in given:
                value = given[attr.name]
            elif attr.required:
                raise EdgeAttnError("{}: attribute {!r} is required".format(self.op_type, attr.name))
            else:
                value = attr.default
            value = _coerce(self.op_type, attr, value)
            if attr.values is not None and value not in attr.values:
                raise EdgeAttnError(
                    "{}: attribute {}={!r} is not one of {}".format(self.op_type, attr.name, value, attr.values)
                )
            resolved[attr.name] = value
        return resolved


def _coerce(op_type, attr, value):
    def fail():
        raise EdgeAttnError("{}: attribute {} must be {}, got {!r}".format(op_type, attr.name, attr.type, value))

    scalar = {"int": int, "float": float, "string": str}
    if attr.type in scalar:
        kind = scalar[attr.type]
        if isinstance(value, bool) or isinstance(value, (list, tuple)):
            fail()
        if kind is int and not (isinstance(value, int) or float(value).is_integer()):
            fail()
        if kind is str and not isinstance(value, str):
            fail()
        return kind(value)
    kind = scalar[attr.type[:-1]]
    if not isinstance(value, (list, tuple)):
        fail()
    return [kind(v) for v in value]


def _validate(data, path):
    missing = [key for key in _REQUIRED_KEYS if key not in data]
    if missing:
        raise EdgeAttnError("op schema {} lacks {}".format(path, ", ".join(missing)))
    for spec in data["attributes"]:
        if spec.get("type") not in ATTRIBUTE_TYPES:
            raise EdgeAttnError("op schema {}: attribute {} has type {!r}, not one of {}".format(
                path, spec.get("name"), spec.get("type"), ATTRIBUTE_TYPES))
        if not spec.get("required") and "default" not in spec:
            raise EdgeAttnError("op schema {}: optional attribute {} needs a default".format(path, spec.get("name")))
    for spec in data["inputs"]:
        for dtype in spec.get("dtypes") or []:
            if dtype not in DTYPES:
                raise EdgeAttnError("op schema {}: input {} has dtype {!r}".format(path, spec.get("name"), dtype))
    expected = os.path.splitext(os.path.basename(path))[0]
    if version_suffix(data) != "" and not expected.endswith(version_suffix(data)):
        raise EdgeAttnError("op schema {} must be named {}{}.yaml".format(path, data["op_type"], version_suffix(data)))


def version_suffix(data):
    """Version 1 lives in ``<op_type>.yaml``; later versions (immutable, new creators) in ``<op_type>_v<N>.yaml``."""
    return "" if str(data["version"]) == "1" else "_v{}".format(data["version"])


def load_schema_file(path):
    try:
        with open(path) as handle:
            data = yaml.safe_load(handle)
    except (OSError, yaml.YAMLError) as error:
        raise EdgeAttnError("cannot read op schema {}: {}".format(path, error))
    if not isinstance(data, dict):
        raise EdgeAttnError("op schema {} is not a mapping".format(path))
    _validate(data, path)
    return OpSchema(data, path)


_CACHE = {}


def all_schemas():
    """Every op schema, keyed by (op_type, version)."""
    directory = schema_dir()
    if directory not in _CACHE:
        schemas = {}
        for name in sorted(os.listdir(directory)):
            if name.endswith(".yaml"):
                schema = load_schema_file(os.path.join(directory, name))
                schemas[(schema.op_type, schema.version)] = schema
        _CACHE[directory] = schemas
    return dict(_CACHE[directory])


def get_schema(op_type, version="1"):
    try:
        return all_schemas()[(op_type, str(version))]
    except KeyError:
        known = ", ".join("{} v{}".format(*key) for key in sorted(all_schemas()))
        raise EdgeAttnError("no op schema for {} v{} (known: {})".format(op_type, version, known))
