"""Progress of long commands (export, build, sweep, bench): a live line on a terminal, nothing in pipes.

Convention for every command: results go to stdout; warnings, errors and events worth keeping in a log (a mode
switch, a restored clock) go to stderr as plain lines; *progress* (steps, counters, ETAs, elapsed time) is drawn
with rich on stderr only when stderr is a terminal, and is transient: it disappears when the command ends. When
stderr is a pipe or a file (CI, ``2>&1 | tee log``, a notebook) no progress is written at all, so captured output
holds exactly the results and the events. ``EDGEATTN_PROGRESS=0`` silences it on a terminal too; ``TERM=dumb``
counts as no terminal.

``rich`` is a dependency of edgeattn (pure Python); without it progress is simply not shown.
"""
import os
import re
import sys

import click

#: what ``edgeattn sweep`` prints per measurement: "[3/12] mode 1 1 thread | m fp32 | repeat 1/3 | ETA 0:42"
COUNTER_LINE = re.compile(r"^\[(\d+)/(\d+)\] (.*)$")


def enabled(stream=None):
    """True when progress should be drawn on ``stream`` (default stderr)."""
    stream = sys.stderr if stream is None else stream
    if os.environ.get("EDGEATTN_PROGRESS", "").strip() == "0" or os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Progress(object):
    """A context manager drawing ``label: <current step>`` with a spinner, elapsed time and, once a total is
    known, a bar with done/total; :meth:`log` prints an event line above it (or as a plain line without it).
    ``show=False`` (a ``--quiet`` flag) draws nothing even on a terminal."""

    def __init__(self, label, total=None, stream=None, show=True):
        self.label = label
        self.total = total
        self.stream = sys.stderr if stream is None else stream
        self.active = show and enabled(self.stream)
        self._progress = None
        self._task = None
        self._console = None

    def __enter__(self):
        if not self.active:
            return self
        try:
            from rich.console import Console
            from rich.progress import BarColumn, Progress as RichProgress, SpinnerColumn, TextColumn, \
                TimeElapsedColumn
        except ImportError:
            self.active = False
            return self
        self._console = Console(file=self.stream, highlight=False)
        self._progress = RichProgress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                      TextColumn("{task.fields[counter]}"), TimeElapsedColumn(),
                                      console=self._console, transient=True)
        self._progress.start()
        self._task = self._progress.add_task(self.label, total=self.total, counter="")
        return self

    def __exit__(self, *exc):
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        return False

    def update(self, message=None, completed=None, total=None):
        """Show ``message`` as the current step; ``completed``/``total`` move the bar."""
        if self._progress is None:
            return
        fields = {}
        if message is not None:
            fields["description"] = "{}: {}".format(self.label, " ".join(str(message).split()))
        if total is not None:
            self.total = total
            fields["total"] = total
        if completed is not None:
            fields["completed"] = completed
        if self.total:
            shown = completed if completed is not None else self._progress.tasks[0].completed
            fields["counter"] = "{:g}/{:g}".format(shown, self.total)
        self._progress.update(self._task, **fields)

    def step(self, message):
        """A ``progress(message)`` callback (``edgeattn build``'s)."""
        self.update(message)

    def fraction(self, fraction, message):
        """A ``progress(fraction, message)`` callback (the bench harness's)."""
        self.update(message, completed=max(0.0, min(float(fraction), 1.0)), total=1.0)

    def log(self, line):
        """An event line on stderr, kept in logs; above the live line on a terminal."""
        if self._progress is not None:
            self._console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            click.echo(line, err=True)

    def lines(self, line):
        """An ``echo(line)`` callback for ``edgeattn sweep``: counter lines (``[i/n] ...``) move the bar and are
        not kept (they are progress), every other line is an event (:meth:`log`)."""
        match = COUNTER_LINE.match(line)
        if match is None:
            self.log(line)
        else:
            self.update(match.group(3), completed=int(match.group(1)) - 1, total=int(match.group(2)))
            if self._progress is not None:
                # one line per measurement: draw it now, or a measurement shorter than rich's refresh period
                # would never be shown
                self._progress.refresh()
