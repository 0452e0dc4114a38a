"""The ``edgeattn`` command line.

Subcommands are imported only when invoked (or when their help is shown), Polygraphy-style: a machine without
torch can still run ``edgeattn bench`` on a Jetson, and a command whose optional dependency is missing is
listed with the reason instead of breaking the whole CLI.

Each entry of :data:`COMMANDS` names the module and the click command object inside it. A command module must
import only what its device-side promise allows at module level (docs/dependencies.md, the board-side rule).
"""
import importlib
import sys

import click

from .._version import __version__
from ..errors import EdgeAttnError, describe_os_error

# name -> (module, attribute, one-line summary shown in `edgeattn --help` without importing the module)
COMMANDS = {
    "ops-bench": ("edgeattn.cli.ops_bench", "ops_bench", "Time each attention operator's core on this CPU."),
    "models": ("edgeattn.cli.models", "models", "List registered models with parameters and MACs."),
    "export": ("edgeattn.cli.export", "export", "Export a model to ONNX with TensorRT-ready custom ops."),
    "quantize": ("edgeattn.cli.quantize", "quantize", "Quantize an ONNX file to INT8 Q/DQ for TensorRT (host side)."),
    "inspect": ("edgeattn.cli.inspect", "inspect_", "Describe an exported ONNX file."),
    "build": ("edgeattn.cli.build", "build", "Build a TensorRT engine (and its manifest) from ONNX."),
    "bench": ("edgeattn.cli.bench", "bench", "Benchmark an engine or ONNX file: latency distribution, throughput."),
    "compare": ("edgeattn.cli.compare", "compare", "Compare two models' outputs on the same inputs."),
    "doctor": ("edgeattn.cli.doctor", "doctor", "Report what this machine can do and what is missing."),
    "profiles": ("edgeattn.cli.profiles", "profiles", "List or show board power-mode profiles."),
    "sweep": ("edgeattn.cli.sweep", "sweep", "Benchmark models across a board's power modes."),
    "power": ("edgeattn.cli.power", "power", "Summarise a tegrastats log."),
    "report": ("edgeattn.cli.report", "report", "Tables and plots from a sweep directory."),
}


def _unavailable_command(name, summary, error):
    """A stand-in for a command whose module could not be imported: help explains, invoking fails with exit 2."""
    reason = "{}: {}".format(type(error).__name__, error)

    @click.command(
        name=name,
        help="{}\n\nUNAVAILABLE on this installation ({}).".format(summary, reason),
        short_help="[unavailable] " + summary,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=True,
    )
    @click.pass_context
    def unavailable(ctx):
        raise EdgeAttnError("`edgeattn {}` is unavailable: {}".format(name, reason))

    return unavailable


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        entry = COMMANDS.get(name)
        if entry is None:
            return None
        module_name, attribute, summary = entry
        try:
            module = importlib.import_module(module_name)
            command = getattr(module, attribute)
        except ImportError as error:
            return _unavailable_command(name, summary, error)
        return command

    def invoke(self, ctx):
        # The one place where an OSError no command anticipated (a read-only or full disk, a permission, a
        # directory where a file was expected) becomes the CLI's one-line error with exit status 2. Every command's
        # outputs form one group: a command that fails writes none of them (sweep opts out: its rows must stay).
        from .._io import all_or_nothing

        try:
            with all_or_nothing():
                return super().invoke(ctx)
        except OSError as error:
            raise EdgeAttnError(describe_os_error(error))
        except KeyboardInterrupt:
            # click's standalone main would turn it into "Aborted!" and exit 1, the status `compare` and `build
            # --check` use for "outputs disagree"; an interrupted command exits 128 + SIGINT instead.
            click.echo("edgeattn: interrupted", err=True)
            ctx.exit(130)

    def format_commands(self, ctx, formatter):
        # Summaries come from COMMANDS so `edgeattn --help` never imports torch or onnx.
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="edgeattn")
def cli():
    """edgeattn: efficient-attention vision transformers from PyTorch to TensorRT on Jetson.

    Export with custom attention ops, build FP32/FP16 engines with our plugins, benchmark, and sweep power modes.
    Without a GPU every command runs on ONNX Runtime CPU.
    """


def main(argv=None):
    try:
        cli.main(args=argv, prog_name="edgeattn", standalone_mode=True)
    except OSError as error:  # raised outside a command (e.g. writing the help text to a closed pipe)
        EdgeAttnError(describe_os_error(error)).show()
        sys.exit(EdgeAttnError.exit_code)
