"""``edgeattn inspect``: describe an exported ONNX file (the onnx package, weights not loaded; no torch)."""
import json

import click


@click.command(name="inspect")
@click.argument("model", metavar="MODEL.onnx")
@click.option("--json", "as_json", is_flag=True,
              help="Print the description as JSON instead of text (schema edgeattn.inspect/1: path, size_bytes, "
                   "ir_version, producer, opset_imports, variant, inputs, outputs, node_count, custom_ops, "
                   "custom_nodes, functions, schema_problems).")
def inspect_(model, as_json):
    """Describe MODEL.onnx: IR version, opsets, inputs/outputs with shapes, custom-op nodes with their
    attributes (checked against export/schemas), model-local functions, and whether the file is the ORT
    variant (runs in ONNX Runtime as is), the TensorRT variant (no local functions) or standard ops only.
    """
    from ..export.inspection import describe_onnx, format_description

    description = describe_onnx(model)
    if as_json:
        click.echo(json.dumps(description, indent=2))
    else:
        click.echo("\n".join(format_description(description)))
