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


def os_error_reason(error):
    """The reason part of an OSError ("Permission denied", "No space left on device"), without the path."""
    return error.strerror or str(error) or type(error).__name__


def describe_os_error(error, path=None):
    """One line naming the path and the reason of ``error``; ``path`` when the error itself names none (a write
    to an open handle) or when the caller knows the user-facing path better (a temporary file beside it)."""
    named = path if path is not None else getattr(error, "filename", None)
    other = getattr(error, "filename2", None) if path is None else None
    reason = os_error_reason(error)
    if named is not None and other is not None:
        return "{} -> {}: {}".format(named, other, reason)
    if named is not None:
        return "{}: {}".format(named, reason)
    return reason


class OutputError(EdgeAttnError):
    """An output file could not be written (read-only place, permission, a directory in the way, disk full)."""

    def __init__(self, path, error):
        super().__init__("cannot write {}".format(describe_os_error(error, path)))
        self.path = path
        self.errno = getattr(error, "errno", None)
