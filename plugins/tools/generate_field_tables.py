#!/usr/bin/env python3
"""Generate plugins/common/generated/fieldTables.h from the op schemas (export/schemas/*.yaml).

The header holds one ``edgeattn::OpSpec`` per schema (name, version, namespace, attributes with types, defaults
and allowed values, input/output counts). Plugin creators take their field lists from it, so TensorRT sees
exactly the schema's attributes. The header is committed; tests/plugins/test_field_tables.py regenerates it and
fails if the committed copy differs, so edit the schemas and rerun:

    python3 plugins/tools/generate_field_tables.py            # rewrite the header
    python3 plugins/tools/generate_field_tables.py --check    # exit 1 if the committed header is stale
"""
import argparse
import os
import sys

PLUGINS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(PLUGINS_DIR)
HEADER_PATH = os.path.join(PLUGINS_DIR, "common", "generated", "fieldTables.h")
OP_PREFIX = "EdgeAttn"

_TYPE_ENUM = {
    "int": "AttributeType::kInt",
    "float": "AttributeType::kFloat",
    "string": "AttributeType::kString",
    "ints": "AttributeType::kInts",
    "floats": "AttributeType::kFloats",
}


def _load_schemas(schema_dir):
    try:
        from edgeattn.schemas import load_schema_file
    except ImportError:  # run from a checkout without `pip install -e .`
        sys.path.insert(0, REPO_ROOT)
        from edgeattn.schemas import load_schema_file
    paths = sorted(
        os.path.join(schema_dir, name) for name in os.listdir(schema_dir) if name.endswith(".yaml")
    )
    return [load_schema_file(path) for path in paths]


def _float_literal(value):
    text = repr(float(value))
    if "e" not in text and "." not in text:
        text += ".0"
    return text + "F"


def _string_literal(value):
    escaped = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return '"{}"'.format(escaped)


def _identifier(op_type, version):
    base = op_type[len(OP_PREFIX):] if op_type.startswith(OP_PREFIX) else op_type
    return base if str(version) == "1" else "{}V{}".format(base, version)


def _render_op(schema):
    ident = _identifier(schema.op_type, schema.version)
    lines = ["// {} v{} ({})".format(schema.op_type, schema.version, os.path.basename(schema.path))]
    rows = []
    for attr in schema.attributes:
        if attr.type not in _TYPE_ENUM:
            raise ValueError("{}: attribute {} has type {!r}, which the plugin glue does not support".format(
                schema.op_type, attr.name, attr.type))
        prefix = "k{}_{}".format(ident, attr.name)
        default_int, default_float, default_string = "0", "0.0F", "nullptr"
        default_floats, nb_default_floats, default_ints, nb_default_ints = "nullptr", "0", "nullptr", "0"
        allowed_ints, nb_allowed_ints, allowed_strings, nb_allowed_strings = "nullptr", "0", "nullptr", "0"
        if not attr.required:
            if attr.type == "int":
                default_int = str(int(attr.default))
            elif attr.type == "float":
                default_float = _float_literal(attr.default)
            elif attr.type == "string":
                default_string = _string_literal(attr.default)
            elif attr.type == "floats":
                lines.append("static float const {}_default[] = {{{}}};".format(
                    prefix, ", ".join(_float_literal(v) for v in attr.default)))
                default_floats, nb_default_floats = prefix + "_default", str(len(attr.default))
            elif attr.type == "ints":
                lines.append("static int32_t const {}_default[] = {{{}}};".format(
                    prefix, ", ".join(str(int(v)) for v in attr.default)))
                default_ints, nb_default_ints = prefix + "_default", str(len(attr.default))
        if attr.values is not None:
            if attr.type == "int":
                lines.append("static int32_t const {}_values[] = {{{}}};".format(
                    prefix, ", ".join(str(int(v)) for v in attr.values)))
                allowed_ints, nb_allowed_ints = prefix + "_values", str(len(attr.values))
            elif attr.type == "string":
                lines.append("static char const* const {}_values[] = {{{}}};".format(
                    prefix, ", ".join(_string_literal(v) for v in attr.values)))
                allowed_strings, nb_allowed_strings = prefix + "_values", str(len(attr.values))
            else:
                raise ValueError("{}: allowed values are supported for int and string attributes only".format(
                    schema.op_type))
        rows.append("    {{{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}}},".format(
            _string_literal(attr.name), _TYPE_ENUM[attr.type], "true" if attr.required else "false",
            default_int, default_float, default_string, default_floats, nb_default_floats, default_ints,
            nb_default_ints, allowed_ints, nb_allowed_ints, allowed_strings, nb_allowed_strings))
    lines.append("static AttributeSpec const k{}Attributes[] = {{".format(ident))
    lines.extend(rows)
    lines.append("};")
    min_inputs = sum(1 for spec in schema.inputs if not spec.optional)
    lines.append("static OpSpec const k{0}Spec = {{{1}, {2}, {3}, k{0}Attributes, {4}, {5}, {6}, {7}}};".format(
        ident, _string_literal(schema.op_type), _string_literal(schema.version), _string_literal(schema.namespace),
        len(schema.attributes), min_inputs, len(schema.inputs), len(schema.outputs)))
    return "\n".join(lines)


def render(schema_dir=None):
    """The header text for the schemas in ``schema_dir`` (default: export/schemas of this checkout)."""
    schema_dir = schema_dir or os.path.join(REPO_ROOT, "export", "schemas")
    schemas = _load_schemas(schema_dir)
    parts = [
        "// GENERATED by plugins/tools/generate_field_tables.py from export/schemas/*.yaml. Do not edit:",
        "// change the schema and rerun `python3 plugins/tools/generate_field_tables.py`.",
        "#ifndef EDGEATTN_GENERATED_FIELD_TABLES_H",
        "#define EDGEATTN_GENERATED_FIELD_TABLES_H",
        "",
        '#include "common/attributeSpec.h"',
        "",
        "namespace edgeattn",
        "{",
        "namespace generated",
        "{",
        "",
    ]
    for schema in schemas:
        parts.append(_render_op(schema))
        parts.append("")
    parts.append("static OpSpec const* const kAllOpSpecs[] = {{{}}};".format(
        ", ".join("&k{}Spec".format(_identifier(s.op_type, s.version)) for s in schemas)))
    parts.append("static int32_t const kNbOpSpecs = {};".format(len(schemas)))
    parts.extend(["", "} // namespace generated", "} // namespace edgeattn", "",
                  "#endif // EDGEATTN_GENERATED_FIELD_TABLES_H", ""])
    return "\n".join(parts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schema-dir", default=None, help="directory of op schemas (default: export/schemas)")
    parser.add_argument("--output", default=HEADER_PATH, help="header to write (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if the header is stale")
    args = parser.parse_args(argv)
    text = render(args.schema_dir)
    if args.check:
        try:
            with open(args.output) as handle:
                current = handle.read()
        except OSError:
            current = None
        if current != text:
            sys.stderr.write("{} is stale: run python3 plugins/tools/generate_field_tables.py\n".format(args.output))
            return 1
        return 0
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    tmp = args.output + ".tmp"
    with open(tmp, "w") as handle:
        handle.write(text)
    os.replace(tmp, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
