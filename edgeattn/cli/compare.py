"""``edgeattn compare A B``: same inputs through two models (ONNX, engine, or checkpoint + --arch); exit 1 when
their outputs disagree."""
import json

import click

from ..errors import EdgeAttnError
from .options import allow_engine_host_code_option, backend_option, plugin_lib_option, trtexec_option


@click.command(name="compare")
@click.argument("model_a", metavar="A")
@click.argument("model_b", metavar="B")
@click.option("--arch", metavar="NAME", default=None,
              help="Architecture of a checkpoint side holding a state dict (timm, official or edgeattn keys).")
@click.option("--checkpoint-key", metavar="KEY", default=None,
              help="Entry of a checkpoint dictionary that holds the weights.")
@click.option("--inputs", "count", type=int, default=None, metavar="N",
              help="Number of seeded standard-normal inputs (default 8).")
@click.option("--images", metavar="DIR|skimage", default=None,
              help="Real pictures instead: every picture in DIR, or 'skimage' for scikit-image's sample "
                   "photographs; resized, centre-cropped and ImageNet-normalised.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--atol", type=float, default=1e-4, show_default=True,
              help="Absolute tolerance (an element fails when outside both --atol and --rtol; Polygraphy's "
                   "element-wise check).")
@click.option("--rtol", type=float, default=1e-3, show_default=True, help="Relative tolerance, relative to B.")
@click.option("--min-top1", type=float, default=None, metavar="FRACTION",
              help="Fail when fewer than this fraction of inputs have the same top-1 class (e.g. 0.99).")
@backend_option(("auto", "tensorrt", "trtexec"),
                help="How engines run: TensorRT's Python runtime (through Polygraphy) or trtexec.")
@plugin_lib_option(help="edgeattn plugin library for engines with custom ops.", refuse_old_spelling=True)
@trtexec_option()
@click.option("--trust-pickle", is_flag=True,
              help="Also accept pickled modules / TorchScript checkpoints (this executes code from the file).")
@allow_engine_host_code_option(help="Let TensorRT run host code embedded in a version-compatible engine.")
@click.option("--json", "json_path", metavar="OUT", default=None,
              help="Write the report as JSON to OUT ('-' for stdout, instead of the summary).")
@click.option("--layers", is_flag=True,
              help="Also compare every intermediate tensor both sides share by name, in topological order, with "
                   "the same tolerances: the first one outside them (node, op type, error), the worst ones, and "
                   "what could not be matched. An engine is rebuilt from the ONNX its manifest names with every "
                   "tensor marked as an output (TensorRT's Python API); tensors it does not return are listed as "
                   "fused.")
@click.option("--quiet", is_flag=True, help="No progress on stderr.")
def compare(model_a, model_b, arch, checkpoint_key, count, images, seed, atol, rtol, min_top1, backend, plugin_lib,
            trtexec_path, trust_pickle, allow_engine_host_code, layers, json_path, quiet):
    """Run A and B on the same inputs and compare their outputs; B is the reference.

    Each of A and B is an ONNX file (ONNX Runtime CPU), a TensorRT engine (TensorRT Python or trtexec), or a
    checkpoint (PyTorch FP32; a state dict needs --arch). Reports Polygraphy's max absolute/relative errors,
    cosine similarity, top-1 agreement and top-5 overlap. Exit status 0 when they agree, 1 when outside
    --atol/--rtol or below --min-top1, 2 for bad input.

    \b
    Examples:
      edgeattn compare b0.onnx b0.noplugins.onnx
      edgeattn compare model.fp16.engine model.onnx --images skimage --atol 0.05 --rtol 0.05 --min-top1 0.9
      edgeattn compare b0.onnx efficientvit_b0.safetensors --arch efficientvit_b0
    """
    from .._io import check_output_path, outputs_now, write_json
    from ..compare import compare_models, format_report
    from ..engine import build_marked_engine

    if images is not None and count is not None:
        raise EdgeAttnError("give --inputs N or --images, not both")
    if json_path and json_path != "-":
        check_output_path(json_path)

    def progress(message):
        if not quiet:
            click.echo("edgeattn compare: {}".format(message), err=True)

    report = compare_models(model_a, model_b, arch=arch, checkpoint_key=checkpoint_key, count=count, images=images,
                            seed=seed, atol=atol, rtol=rtol, min_top1=min_top1, backend=backend, plugins=plugin_lib,
                            trtexec=trtexec_path, trust_pickle=trust_pickle,
                            allow_engine_host_code=allow_engine_host_code, progress=progress, layers=layers,
                            marked_build=build_marked_engine)
    if json_path == "-":
        click.echo(json.dumps(report, indent=2))
    else:
        if json_path:  # before the summary: a report that cannot be kept prints only the error
            with outputs_now():  # the report of a failed comparison (exit 1) is kept too
                write_json(json_path, report)
        click.echo("\n".join(format_report(report)))
    if not report["passed"]:
        raise SystemExit(1)
