"""Messages of build and bench on stderr: one-line warnings and progress (stdout stays for results)."""
import sys

import click


def warn(message):
    """``edgeattn: warning: <message>`` on stderr, as one line."""
    click.echo("edgeattn: warning: {}".format(" ".join(str(message).split())), err=True)


class ProgressPrinter(object):
    """A ``progress(fraction, message)`` callable that prints to stderr: an updating line on a terminal, otherwise
    a new line at the start and end of each phase and every 10 % in between (logs stay short)."""

    def __init__(self, prefix):
        self.prefix = prefix
        self._last_bucket = None

    def __call__(self, fraction, message):
        fraction = max(0.0, min(float(fraction), 1.0))
        line = "{}: {:3.0f}% {}".format(self.prefix, fraction * 100.0, message)
        if sys.stderr.isatty():
            click.echo("\r\x1b[K" + line, err=True, nl=fraction >= 1.0)
            return
        bucket = int(fraction * 10)
        if fraction <= 0.0 or fraction >= 1.0 or bucket != self._last_bucket:
            self._last_bucket = bucket
            click.echo(line, err=True)
