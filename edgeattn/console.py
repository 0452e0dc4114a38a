"""Messages of build and bench on stderr: one-line warnings (stdout stays for results; progress is
:mod:`edgeattn.progress`)."""
import click


def warn(message):
    """``edgeattn: warning: <message>`` on stderr, as one line."""
    click.echo("edgeattn: warning: {}".format(" ".join(str(message).split())), err=True)
