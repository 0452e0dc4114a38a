import os

import pytest
import yaml

from edgeattn import schemas
from edgeattn.errors import EdgeAttnError


def test_every_schema_loads_and_is_unique():
    found = schemas.all_schemas()
    assert found, "no op schemas found"
    op_types = [key[0] for key in found]
    for schema in found.values():
        assert schema.op_type.startswith("EdgeAttn"), "op types are prefixed so they never collide with built-ins"
        assert schema.domain == "trt.plugins"
        assert schema.namespace == "edgeattn"
        assert schema.attribute_names, schema.op_type
    assert len(set(found)) == len(found)
    assert len(op_types) >= 4


def test_resolve_attributes_fills_defaults_and_rejects_bad_values():
    schema = schemas.get_schema("EdgeAttnBlockifyAttention")
    resolved = schema.resolve_attributes({"num_heads": 2, "height": 14, "width": 14, "window_size": 7})
    assert resolved["padding"] == "none" and resolved["has_lepe"] == 0 and resolved["scale"] == 0.0
    with pytest.raises(EdgeAttnError):
        schema.resolve_attributes({"num_heads": 2, "height": 14, "width": 14})  # window_size is required
    with pytest.raises(EdgeAttnError):
        schema.resolve_attributes({"num_heads": 2, "height": 14, "width": 14, "window_size": 7, "padding": "x"})
    with pytest.raises(EdgeAttnError):
        schema.resolve_attributes({"num_heads": 2.5, "height": 14, "width": 14, "window_size": 7})


@pytest.mark.parametrize("name", ["num_heads", "scale", "has_lepe"])
def test_booleans_are_not_numbers_for_the_contract(name):
    """bool is an int subclass in Python, not an INT or FLOAT attribute: True must not pass as 1 / 1.0."""
    schema = schemas.get_schema("EdgeAttnBlockifyAttention")
    given = {"num_heads": 2, "height": 14, "width": 14, "window_size": 7}
    given[name] = True
    with pytest.raises(EdgeAttnError, match="must be"):
        schema.resolve_attributes(given)


def test_schema_with_bad_attribute_type_is_rejected(tmp_path):
    data = yaml.safe_load(open(schemas.get_schema("EdgeAttnEfficientAttention").path))
    data["attributes"][0]["type"] = "tensor"  # TensorRT's parser cannot pass arbitrary tensors as fields
    path = tmp_path / "EdgeAttnEfficientAttention.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(EdgeAttnError):
        schemas.load_schema_file(str(path))
