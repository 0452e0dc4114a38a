"""``edgeattn export``: PyTorch model -> ONNX with TensorRT-ready custom attention ops, checked against PyTorch."""
import os

import click

from ..errors import EdgeAttnError


def _parse_batch(text):
    if text is None:
        return 1
    if str(text).lower() == "dynamic":
        return "dynamic"
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise EdgeAttnError("--batch must be a positive integer or 'dynamic', got {!r}".format(text))
    return value


def default_output(model, arch, plugins, target):
    """``<checkpoint stem or arch>[.noplugins|.trt].onnx`` in the current directory."""
    stem = os.path.splitext(os.path.basename(model))[0] if model else arch
    suffix = ".noplugins" if not plugins else (".trt" if target == "tensorrt" else "")
    return stem + suffix + ".onnx"


@click.command(name="export")
@click.argument("model", required=False, metavar="[MODEL]")
@click.option("-o", "--output", metavar="OUT.onnx",
              help="Output file (default: <MODEL stem or arch>.onnx, .trt.onnx for --target tensorrt, "
                   ".noplugins.onnx for --no-plugins, in the current directory).")
@click.option("--arch", metavar="NAME",
              help="Registry model to export with random weights (seeded) when no MODEL file is given; with a "
                   "state dict (bare, in a model/state_dict/model_ema/state_dict_ema/module entry, or "
                   ".safetensors; timm, official or edgeattn key layout), its architecture; with an edgeattn "
                   "checkpoint, the architecture it must hold.")
@click.option("--checkpoint-key", metavar="KEY", default=None,
              help="Entry of the checkpoint dictionary that holds the weights (default: the first of model, "
                   "state_dict, model_ema, state_dict_ema, module).")
@click.option("--resolution", type=int, default=None, metavar="PIXELS",
              help="Square input size (default: the checkpoint's; a registry model's own, 224 or 384 for "
                   "vit_base_patch16_384*).")
@click.option("--batch", default="1", metavar="N|dynamic", show_default=True,
              help="Static batch size, or 'dynamic' for a named batch axis.")
@click.option("--opset", type=int, default=17, show_default=True,
              help="ONNX opset, 13..20 (13 for TensorRT 8.2 on the Jetson Nano).")
@click.option("--plugins/--no-plugins", default=True, show_default=True,
              help="Emit the attention cores as trt.plugins custom ops, or as standard ONNX ops only.")
@click.option("--target", type=click.Choice(["ort", "tensorrt"]), default="ort", show_default=True,
              help="ort: custom ops plus model-local functions (ONNX Runtime runs the file as is); tensorrt: the "
                   "same file without the functions (TensorRT 9.0-10.6 would inline them instead of calling the "
                   "plugin; edgeattn build strips them itself).")
@click.option("--trust-pickle", is_flag=True,
              help="Also accept pickled modules / TorchScript archives (this executes code from the file).")
@click.option("--check/--no-check", default=True, show_default=True,
              help="Run onnx.checker (full), shape inference and ONNX Runtime CPU vs PyTorch (<= 1e-4 relative) "
                   "before writing the file.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for random weights and test inputs.")
@click.option("--summary-json", metavar="FILE", help="Also write the export summary as JSON.")
def export(model, output, arch, checkpoint_key, resolution, batch, opset, plugins, target, trust_pickle, check, seed,
           summary_json):
    """Export MODEL (an edgeattn checkpoint, or a state dict with --arch), or --arch NAME with random weights.

    Each efficient-attention core becomes one node of domain trt.plugins (op_type, attributes, plugin_version
    and plugin_namespace from export/schemas). The file is written only after every check passed (nothing is
    left behind on failure); a one-screen summary follows.

    \b
    Examples:
      edgeattn export --arch cswin_t24181_elfatt -o elfatt.onnx
      edgeattn export model.pt --target tensorrt --opset 13 -o model.trt.onnx
      edgeattn export --arch cswin_t24181_elfatt --no-plugins -o elfatt.std.onnx
      edgeattn export efficientvit_b0.safetensors --arch efficientvit_b0 -o b0.onnx   # a timm checkpoint
    """
    from ..export.exporter import check_options, export_onnx, load_torch_model

    batch_value = _parse_batch(batch)
    check_options(opset, target, batch_value, 224 if resolution is None else resolution)
    if not model and not arch:
        raise EdgeAttnError("give a checkpoint file MODEL, or --arch NAME for a registry model with random weights")
    if model and not os.path.exists(model):
        raise EdgeAttnError("no such file: {}".format(model))
    path = output or default_output(model, arch, plugins, target)
    if model and os.path.exists(path) and os.path.samefile(path, model):
        raise EdgeAttnError("the output {} would overwrite the checkpoint; pick another -o".format(path))
    from .._io import check_output_path

    for destination in (path, summary_json):  # before the export, not after minutes of it
        if destination:
            check_output_path(destination)
    if checkpoint_key and not model:
        raise EdgeAttnError("--checkpoint-key needs a checkpoint file MODEL")
    from ..progress import Progress

    with Progress("edgeattn export") as progress:  # the steps on a terminal, nothing in pipes
        progress.step("loading {}".format(model or arch))
        loaded, size = load_torch_model(model or None, arch=arch, img_size=resolution, trust_pickle=trust_pickle,
                                        seed=seed, checkpoint_key=checkpoint_key)
        summary = export_onnx(loaded, path, img_size=size, batch=batch_value, opset=opset, plugins=plugins,
                              target=target, check=check, seed=seed, progress=progress.step)
    source = getattr(loaded, "edgeattn_source", None)
    lines = summary.lines()
    if source:
        from ..models.checkpoint import describe_source

        lines.insert(1, "  weights   {}".format(describe_source(source)))
    click.echo("\n".join(lines))
    if summary_json:
        from .._io import write_json

        record = summary.to_dict()
        if source:
            record["weights"] = dict(source)
        write_json(summary_json, record)
    return summary

