"""User-facing errors.

Every failure a user can cause (missing or corrupt file, unknown architecture, bad resolution, missing plugin
library, engine built by another TensorRT, ...) is raised as :class:`EdgeAttnError`. The CLI prints it as one line
on stderr and exits with status 2; library callers can catch it like any exception.
"""
import click


class EdgeAttnError(click.ClickException):
    """A problem with the user's input or environment, reported as one line and exit status 2."""

    exit_code = 2

    def __init__(self, message):
        # One line: the CLI contract is "one clear line on stderr".
        super().__init__(" ".join(str(message).split()))

    def show(self, file=None):
        click.echo("edgeattn: error: {}".format(self.format_message()), file=file, err=True)


class MissingDependencyError(EdgeAttnError):
    """An optional dependency (torch, onnx, onnxruntime, tensorrt) is needed for what was asked."""

    def __init__(self, package, needed_for, hint=None):
        message = "{} is not installed; it is needed for {}.".format(package, needed_for)
        if hint:
            message += " " + hint
        super().__init__(message)
        self.package = package
