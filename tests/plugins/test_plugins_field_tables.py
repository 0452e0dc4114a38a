"""The plugin creators expose exactly the op schema's attributes.

Chain of custody: export/schemas/*.yaml -> plugins/tools/generate_field_tables.py -> the committed
plugins/common/generated/fieldTables.h -> each op class's spec() -> Creator<Op> builds getFieldNames() (and parses
and serializes fields) from spec() only. These tests check every link from the source text; the behavioural check
(running the creators compiled against real TensorRT headers) is in test_plugins_glue.py.
"""
import importlib.util
import os
import re
import shutil

import pytest
import yaml

from plugin_test_utils import PLUGINS_DIR, REPO_ROOT

GENERATOR = os.path.join(PLUGINS_DIR, "tools", "generate_field_tables.py")
HEADER = os.path.join(PLUGINS_DIR, "common", "generated", "fieldTables.h")
SCHEMA_DIR = os.path.join(REPO_ROOT, "export", "schemas")


def load_generator():
    spec = importlib.util.spec_from_file_location("generate_field_tables", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read(path):
    with open(path) as handle:
        return handle.read()


def schemas():
    result = []
    for name in sorted(os.listdir(SCHEMA_DIR)):
        if name.endswith(".yaml"):
            with open(os.path.join(SCHEMA_DIR, name)) as handle:
                result.append(yaml.safe_load(handle))
    return result


def op_folder_sources():
    """{op_type: (header text, cpp text)} for every op folder with a *Plugin.h."""
    found = {}
    for folder in sorted(os.listdir(PLUGINS_DIR)):
        path = os.path.join(PLUGINS_DIR, folder)
        header = os.path.join(path, folder + "Plugin.h")
        if os.path.isfile(header):
            found[folder] = (read(header), read(os.path.join(path, folder + "Plugin.cpp")))
    return found


def test_committed_header_equals_a_fresh_generation():
    assert read(HEADER) == load_generator().render(SCHEMA_DIR), (
        "plugins/common/generated/fieldTables.h is stale: run python3 plugins/tools/generate_field_tables.py")


def test_a_schema_change_makes_the_committed_header_stale(tmp_path):
    """The comparison above can fail: change one attribute default and the generation no longer matches."""
    changed_dir = tmp_path / "schemas"
    shutil.copytree(SCHEMA_DIR, str(changed_dir))
    path = changed_dir / "EdgeAttnSoftKernelAttention.yaml"
    data = yaml.safe_load(path.read_text())
    for attribute in data["attributes"]:
        if attribute["name"] == "newton_iters":
            attribute["default"] = 21
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    generator = load_generator()
    regenerated = generator.render(str(changed_dir))
    assert regenerated != read(HEADER)
    assert '{"newton_iters", AttributeType::kInt, false, 21,' in regenerated
    assert generator.main(["--schema-dir", str(changed_dir), "--output", HEADER, "--check"]) == 1
    assert generator.main(["--output", HEADER, "--check"]) == 0


def test_generated_table_lists_every_schema_attribute_in_order():
    header = read(HEADER)
    type_names = {"int": "kInt", "float": "kFloat", "string": "kString", "ints": "kInts", "floats": "kFloats"}
    for schema in schemas():
        ident = schema["op_type"][len("EdgeAttn"):]
        block = re.search(r"k{}Attributes\[\] = \{{(.*?)\n\}};".format(ident), header, re.S)
        assert block, "no attribute table for " + schema["op_type"]
        rows = re.findall(r'\{"(\w+)", AttributeType::(\w+), (true|false),', block.group(1))
        expected = [(a["name"], type_names[a["type"]], "true" if a.get("required") else "false")
                    for a in schema["attributes"]]
        assert rows == expected, schema["op_type"]
        spec_line = re.search(r'k{}Spec = \{{"(\w+)", "(\w+)", "(\w+)", k{}Attributes, (\d+),'.format(ident, ident),
                              header)
        assert spec_line.groups() == (schema["op_type"], str(schema["version"]), schema["namespace"],
                                      str(len(schema["attributes"])))


def test_every_schema_has_an_op_folder_whose_spec_is_the_generated_table():
    folders = op_folder_sources()
    for schema in schemas():
        ident = schema["op_type"][len("EdgeAttn"):]
        folder = ident[0].lower() + ident[1:]
        assert folder in folders, "no plugins/{}/ for {}".format(folder, schema["op_type"])
        header, cpp = folders[folder]
        assert "static OpSpec const& spec();" in header
        assert "OpSpec const& {}Op::spec()\n{{\n    return generated::k{}Spec;\n}}".format(ident, ident) in cpp
        assert "static Creator<{}Op> creator;".format(ident) in cpp
        assert os.path.isfile(os.path.join(PLUGINS_DIR, folder, "README.md"))
    assert len(folders) == len(schemas())


def test_creators_take_field_names_and_serialized_fields_from_the_spec_only():
    templates = read(os.path.join(PLUGINS_DIR, "common", "pluginTemplates.h"))
    common = read(os.path.join(PLUGINS_DIR, "common", "pluginCommon.cpp"))
    # both creator flavours (V3 and V2) build their field list from Op::spec() ...
    assert templates.count("mFieldNames(Op::spec())") == 2
    assert templates.count("return mFieldNames.collection();") == 2
    # ... and parse fields against it (createPlugin, deserializePlugin)
    assert templates.count("parseAttributes(Op::spec(), toFieldViews(fc))") == 2
    assert "deserializeAttributes(Op::spec(), serialData, serialLength)" in templates
    # FieldNameTable walks the spec's attributes and nothing else
    table = re.search(r"FieldNameTable::FieldNameTable\(OpSpec const& spec\)\n\{(.*?)\n\}", common, re.S).group(1)
    assert "spec.attributes[i]" in table and '"' not in table
    # no hand-written PluginField lists anywhere in the plugin sources
    for root, dirs, files in os.walk(PLUGINS_DIR):
        dirs[:] = [d for d in dirs if d != "build"]
        for name in files:
            if name.endswith((".cpp", ".h", ".cu", ".cuh")):
                text = read(os.path.join(root, name))
                assert not re.search(r'PluginField\(\s*"', text), os.path.join(root, name)
                assert not re.search(r'emplace_back\(\s*"', text), os.path.join(root, name)


def test_registration_lists_every_op_once():
    registration = read(os.path.join(PLUGINS_DIR, "common", "pluginRegistration.cpp"))
    entries = re.findall(r"\{&(\w+)Op::spec\(\), (\w+)Creator\(\)\}", registration)
    idents = sorted(schema["op_type"][len("EdgeAttn"):] for schema in schemas())
    assert sorted(op for op, _ in entries) == idents
    for op, creator in entries:
        assert creator == op[0].lower() + op[1:]


@pytest.mark.parametrize("bad_type", ["strings"])
def test_generator_refuses_attribute_types_the_glue_cannot_parse(tmp_path, bad_type):
    changed_dir = tmp_path / "schemas"
    shutil.copytree(SCHEMA_DIR, str(changed_dir))
    path = changed_dir / "EdgeAttnEfficientAttention.yaml"
    data = yaml.safe_load(path.read_text())
    data["attributes"].append({"name": "tags", "type": bad_type, "default": ["a"]})
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ValueError, match="does not support"):
        load_generator().render(str(changed_dir))
