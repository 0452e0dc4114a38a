"""``edgeattn quantize``: FP32 ONNX -> explicit INT8 Q/DQ ONNX for TensorRT (host side, ONNX Runtime)."""
import os

import click

from ..errors import EdgeAttnError


def _warn(message):
    click.echo("edgeattn: warning: {}".format(" ".join(str(message).split())), err=True)


def default_output(model):
    stem = os.path.splitext(os.path.basename(model))[0]
    return stem + ".int8.onnx"


@click.command(name="quantize")
@click.argument("model", metavar="MODEL.onnx")
@click.option("-o", "--output", metavar="OUT.onnx", help="Output file (default: <MODEL stem>.int8.onnx here).")
@click.option("--calib", metavar="DIR|skimage|random",
              help="Calibration inputs: a directory of pictures (resized, centre-cropped and ImageNet-normalised "
                   "as the zoo's models expect), 'skimage' (scikit-image's 8 bundled photographs) or 'random' "
                   "(standard-normal tensors: not representative, for smoke tests).")
@click.option("--calib-size", type=int, default=32, show_default=True, metavar="N",
              help="Calibration inputs to use (the first N pictures in name order).")
@click.option("--calib-method", type=click.Choice(["max", "percentile", "entropy"]), default="max",
              show_default=True,
              help="Activation ranges: the largest |value| seen (max), the 99.99th percentile, or the KL-entropy "
                   "optimum (ONNX Runtime's calibrators).")
@click.option("--ops", type=click.Choice(["linear", "all"]), default="linear", show_default=True,
              help="linear: MatMul/Gemm/Conv with weights only (residual Adds, LayerNorm, Softmax, attention "
                   "products and trt.plugins nodes stay FP); all: every op type ONNX Runtime can quantize.")
@click.option("--exclude", "exclude", multiple=True, metavar="PATTERN",
              help="Keep nodes in FP: an op type (MatMul) or a node-name pattern ('/blocks.0/*'). Repeatable.")
@click.option("--exclude-from", type=click.Path(dir_okay=False), metavar="FILE",
              help="Exclusion patterns from a --sensitivity table (JSON) or a text file, one per line.")
@click.option("--sensitivity", is_flag=True,
              help="Do not write a model: quantize one block/stage at a time, print each one's cosine and top-1 "
                   "agreement against FP32 on the calibration inputs, and recommend exclusions (-o FILE.json "
                   "writes the table for --exclude-from).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --calib random.")
@click.option("--summary-json", metavar="FILE", help="Also write the summary as JSON.")
def quantize(model, output, calib, calib_size, calib_method, ops, exclude, exclude_from, sensitivity, seed,
             summary_json):
    """Post-training INT8 quantization of MODEL.onnx to explicit Q/DQ that TensorRT accepts.

    INT8, symmetric (zero points 0), per-channel weights, one dedicated Q/DQ pair per consumer, with ONNX Runtime's
    static quantizer; every trt.plugins node keeps its schema, attributes and FP16/FP32 inputs and outputs. The
    file is written only after the quantized graph passed the Q/DQ checks and ran in ONNX Runtime; the summary
    gives its cosine and top-1 agreement against FP32 on the calibration inputs.

    \b
    Examples:
      edgeattn quantize elfatt.onnx --calib pictures/ -o elfatt.int8.onnx
      edgeattn quantize elfatt.onnx --calib pictures/ --sensitivity -o sensitivity.json
      edgeattn quantize elfatt.onnx --calib pictures/ --exclude-from sensitivity.json
      edgeattn quantize elfatt.onnx --calib skimage --exclude '/stages.0/*' --exclude Conv
    """
    from .. import quantize as quantizer
    from .._io import check_output_path, write_json
    from ..progress import Progress

    patterns = list(exclude)
    if exclude_from:
        patterns += quantizer.read_exclusions(exclude_from)
    if sensitivity:
        if ops != "linear":
            raise EdgeAttnError("--sensitivity measures the --ops linear nodes group by group; drop --ops all")
        for destination in (output, summary_json):
            if destination:
                check_output_path(destination)
        with Progress("edgeattn quantize --sensitivity") as progress:
            table = quantizer.sensitivity(model, calib=calib, calib_size=calib_size, calib_method=calib_method,
                                          exclude=patterns, seed=seed, warn=_warn, progress=progress.step)
        click.echo(quantizer.format_sensitivity(table))
        for destination in (output, summary_json):
            if destination:
                write_json(destination, table)
        return table
    path = output or default_output(model)
    if os.path.exists(path) and os.path.exists(model) and os.path.samefile(path, model):
        raise EdgeAttnError("the output {} would overwrite the input; pick another -o".format(path))
    for destination in (path, summary_json):
        if destination:
            check_output_path(destination)
    with Progress("edgeattn quantize") as progress:
        summary = quantizer.quantize_file(model, path, calib=calib, calib_size=calib_size,
                                          calib_method=calib_method, ops=ops, exclude=patterns, seed=seed,
                                          warn=_warn, progress=progress.step)
    click.echo(quantizer.format_summary(summary))
    if summary_json:
        write_json(summary_json, summary)
    return summary
