"""The sweep's row journal, ``DIR/rows.jsonl``: every finished measurement, appended as one JSON line and on disk
(fsync) before the sweep goes on.

Why a journal: results.json and results.csv are whole documents. Rewriting them after every measurement costs time
in proportion to the rows so far, and keeping every row in memory to rewrite them grows the process with the
sweep: a 1000-measurement sweep on a fake AGX Orin went from 0.02 s to 0.40 s per measurement and grew by 12.5 KiB
per measurement that way (benchmarks/long_sweep.py). Appending one line costs the same at the first row and at the
thousandth, and nothing stays in memory. results.json and results.csv are written from the journal when a mode
ends or is skipped, before a reboot, and when the sweep ends, is interrupted or fails; ``--resume`` reads the
journal, so a SIGKILL between two of those writes loses nothing.

Format (schema :data:`JOURNAL_SCHEMA`): line 1 is ``{"schema": "edgeattn.sweep-rows/1"}``; every further line is one
result row, the objects of results.json's ``"rows"``. A line counts only with its newline: a last line without one
(the process was killed, or the disk filled, in the middle of writing it) is ignored when read and cut off before
the next append, so its measurement is simply taken again. A failed append is cut off at once; when even that
fails the journal refuses every further append instead of writing after a broken line. A row whose identity
(:func:`edgeattn.sweep.results.row_key`) is already in the journal is ignored when read: no measurement is counted
twice.

Python 3.8 and the standard library only (the board side).
"""
import json
import os

from .._io import output_mode
from ..errors import EdgeAttnError, OutputError

JOURNAL_FILE = "rows.jsonl"
JOURNAL_SCHEMA = "edgeattn.sweep-rows/1"
_HEADER = (json.dumps({"schema": JOURNAL_SCHEMA}) + "\n").encode("utf-8")


def json_default(value):
    """What ``json.dumps`` writes for values a benchmark function may return: numpy scalars, tuples, sets."""
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


def _write_all(fd, data):
    """Write every byte of ``data`` (os.write may write part of it)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _complete_lines(path):
    """Yield ``(number, line bytes, end offset)`` for every line of ``path`` that ends with a newline; the torn last
    line (no newline) is not yielded. Lines are read one at a time: memory does not grow with the journal."""
    offset = 0
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            if not line.endswith(b"\n"):
                return
            offset += len(line)
            yield number, line, offset


def _check_header(path, line):
    try:
        header = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):  # RecursionError: json's reader, for arrays nested thousands deep
        header = None
    if not isinstance(header, dict) or header.get("schema") != JOURNAL_SCHEMA:
        raise EdgeAttnError("{} is not an edgeattn sweep row journal (its first line must be {})".format(
            path, _HEADER.decode("utf-8").strip()))


def read_rows(path, key=None, problem=None):
    """Yield the rows of the journal ``path`` in the order they were appended. ``key(row)``: a row whose key was
    seen before is skipped; ``problem(row)``: why a row cannot be used (None when it can), raised as the
    journal's error. EdgeAttnError in one line, naming the line, for a line that is not a JSON object or a row
    with a problem; a torn last line is not an error (see the module docstring)."""
    seen = set()
    try:
        for number, line, _ in _complete_lines(path):
            if number == 1:
                _check_header(path, line)
                continue
            try:
                row = json.loads(line.decode("utf-8"))
            except ValueError as error:  # UnicodeDecodeError is one too
                raise EdgeAttnError("{}: line {} is not JSON ({})".format(path, number, error))
            except RecursionError:
                raise EdgeAttnError("{}: line {} is not a result row (JSON nested too deep)".format(path, number))
            why = problem(row) if problem is not None else (
                None if isinstance(row, dict) else "is not a JSON object")
            if why:
                raise EdgeAttnError("{}: line {} {}".format(path, number, why))
            if key is not None:
                identity = key(row)
                if identity in seen:
                    continue
                seen.add(identity)
            yield row
    except OSError as error:
        raise EdgeAttnError("cannot read the sweep row journal {}: {}".format(path, error.strerror or error))


def _end_of_complete_lines(path):
    """Offset just past the last complete line (0 for an empty file); checks the header."""
    end = 0
    for number, line, offset in _complete_lines(path):
        if number == 1:
            _check_header(path, line)
        end = offset
    return end


class RowJournal(object):
    """Appends rows to ``path``; the file is opened (and created with its header) at the first append."""

    def __init__(self, path):
        self.path = path
        self._fd = None
        self._size = 0
        self._broken = None

    def exists(self):
        return os.path.isfile(self.path)

    def rows(self, key=None, problem=None):
        if not self.exists():
            return iter(())
        return read_rows(self.path, key=key, problem=problem)

    def _open(self):
        try:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            existing = os.path.isfile(self.path)
            end = _end_of_complete_lines(self.path) if existing else 0
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, output_mode(self.path))
        except OSError as error:
            raise OutputError(self.path, error)
        try:
            os.ftruncate(fd, end)  # a torn last line goes: its measurement is taken again
            os.lseek(fd, end, os.SEEK_SET)
            if end == 0:
                _write_all(fd, _HEADER)
                os.fsync(fd)
                end = len(_HEADER)
        except OSError as error:
            os.close(fd)
            raise OutputError(self.path, error)
        self._fd, self._size = fd, end

    def append(self, row):
        """Write ``row`` as one line and fsync it; OutputError (the row is not in the journal) when that fails."""
        if self._broken is not None:
            raise OutputError(self.path, self._broken)
        data = (json.dumps(row, default=json_default) + "\n").encode("utf-8")
        if self._fd is None:
            self._open()
        try:
            _write_all(self._fd, data)
            os.fsync(self._fd)
        except OSError as error:
            # a part of the line may be on disk: cut it off, so the journal ends with a complete row
            try:
                os.ftruncate(self._fd, self._size)
                os.lseek(self._fd, self._size, os.SEEK_SET)
            except OSError:
                self._broken = error
            raise OutputError(self.path, error)
        self._size += len(data)

    def close(self):
        if self._fd is not None:
            try:
                os.close(self._fd)
            finally:
                self._fd = None
