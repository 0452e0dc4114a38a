"""``edgeattn doctor``: what this machine can run, and what each missing piece disables."""
import json

import click


@click.command(name="doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
def doctor(as_json):
    """Report Python, torch, onnx, onnxruntime (and its providers), TensorRT, the CUDA device and its compute
    capability, trtexec, the edgeattn plugin library (creators and versions), and on a Jetson the board, L4T,
    JetPack and current nvpmodel mode. Every missing piece says what it disables. Always exits 0."""
    from ..doctor import diagnose, format_report

    report = diagnose()
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(format_report(report))
