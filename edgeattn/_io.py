"""File helpers shared by every command that writes results: atomic writes, all-or-nothing groups of outputs,
output permissions, advisory locks, content hashes, and reading back the JSON records edgeattn writes.

Every output goes through :func:`atomic_write` or :func:`atomic_path`: the data is written to a temporary file in
the destination's directory, flushed to disk, given the permissions a plain ``open()`` would have given it, and
renamed over the destination. A failure (read-only place, permission, a directory in the way, disk full) raises
:class:`edgeattn.errors.OutputError` naming the destination, and no partial or temporary file stays behind.

Why one module of ~400 lines: the atomic writes, the all-or-nothing output groups, the permissions and the locks
share one pending-files registry and one error mapping; split apart they would each need the other's internals.
"""
import contextlib
import errno
import hashlib
import json
import math
import os
import stat
import tempfile
import threading

from .errors import EdgeAttnError, OutputError, describe_os_error

_PENDING = threading.local()


# ----------------------------------------------------------------------------------------------------------------
# permissions
# ----------------------------------------------------------------------------------------------------------------
def current_umask():
    """This process's umask. Read from /proc where possible: setting and resetting it is racy with threads."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def output_mode(path):
    """The permission bits ``open(path, "w")`` would leave: an existing regular file keeps its own, a new file
    gets 0666 minus the umask (mkstemp's 0600 would hide results from a teammate or a web server)."""
    try:
        info = os.lstat(path)
    except OSError:
        info = None
    if info is not None and stat.S_ISREG(info.st_mode):
        return stat.S_IMODE(info.st_mode)
    return 0o666 & ~current_umask()


# ----------------------------------------------------------------------------------------------------------------
# atomic outputs
# ----------------------------------------------------------------------------------------------------------------
def _prepare(path):
    """Absolute destination, its directory (created when missing) and the directories this call created, deepest
    first; refuses a directory in the way."""
    path = os.path.abspath(os.fspath(path))
    if os.path.isdir(path):
        raise OutputError(path, IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)))
    directory = os.path.dirname(path)
    missing = []
    parent = directory
    while not os.path.lexists(parent) and parent != os.path.dirname(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as error:
        _remove_empty(missing)
        raise OutputError(path, error)
    pending = getattr(_PENDING, "created", None)
    if pending is not None:
        pending.extend(missing)
    return path, directory, missing


def _remove_empty(directories):
    """Remove directories an output created, deepest first, as long as they are empty (a failed command leaves
    no empty ``plots/`` behind)."""
    for directory in sorted(set(directories), key=len, reverse=True):
        with contextlib.suppress(OSError):
            os.rmdir(directory)


def _temporary(path, directory, created, suffix=""):
    base = os.path.basename(path)
    try:
        return tempfile.mkstemp(prefix=".{}.".format(base), suffix=".tmp" + suffix, dir=directory)
    except OSError as error:
        _remove_empty(created)
        raise OutputError(path, error)


def _fsync_path(tmp):
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _publish(tmp, path):
    """Rename ``tmp`` onto ``path`` now, or at the end of the enclosing :func:`all_or_nothing` block."""
    pending = getattr(_PENDING, "moves", None)
    if pending is None:
        os.replace(tmp, path)
        return
    for index, (earlier_tmp, earlier_path) in enumerate(pending):
        if earlier_path == path:  # written twice in one group: the last version wins
            with contextlib.suppress(OSError):
                os.unlink(earlier_tmp)
            del pending[index]
            break
    pending.append((tmp, path))


def _converted(error, path):
    """An OSError about our own file operations becomes one line naming the destination; an OSError that names
    another file (the caller read an input inside the block) is left for the CLI boundary to report."""
    if isinstance(error, OSError) and getattr(error, "filename", None) is None:
        return OutputError(path, error)
    return None


@contextlib.contextmanager
def _naming_destination(path):
    """An OSError of the block about our own output (see :func:`_converted`) becomes an OutputError naming ``path``."""
    try:
        yield
    except OSError as error:
        converted = _converted(error, path)
        if converted is None:
            raise
        raise converted


@contextlib.contextmanager
def atomic_write(path, mode="wb"):
    """Yield a file object whose contents replace ``path`` only if the block finishes without an exception.

    The data goes to a temporary file in the same directory (so the final rename is atomic) and is removed on
    error or interruption; a failed command never leaves a partial output file behind. The file ends with the
    permissions of :func:`output_mode`.
    """
    path, directory, created = _prepare(path)
    fd, tmp = _temporary(path, directory, created)
    try:
        with _naming_destination(path):
            os.fchmod(fd, output_mode(path))
            with os.fdopen(fd, mode) as handle:
                fd = None
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
        try:
            _publish(tmp, path)
        except OSError as error:
            raise OutputError(path, error)
    except BaseException:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        _remove_empty(created)
        raise


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path next to ``path``; it is renamed onto ``path`` on success and deleted otherwise.

    For writers that insist on a file name (torch.onnx.export, TensorRT serializers, trtexec --saveEngine). As in
    :func:`atomic_write`, an OSError of the block that names no file becomes an OutputError naming ``path``.
    """
    path, directory, created = _prepare(path)
    ext = os.path.splitext(path)[1]
    fd, tmp = _temporary(path, directory, created, suffix=ext)
    os.close(fd)
    try:
        with _naming_destination(path):  # the writer's own failure (a full disk) names the destination
            yield tmp
        try:
            _fsync_path(tmp)
            os.chmod(tmp, output_mode(path))
            _publish(tmp, path)
        except OSError as error:
            raise OutputError(path, error)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        _remove_empty(created)
        raise


def _commit(moves):
    """Rename every temporary file into place; if one rename fails, put back what the earlier ones replaced."""
    done = []  # (path, backup or None)
    try:
        for tmp, path in moves:
            backup = None
            if os.path.lexists(path):
                backup = "{}.{}.bak".format(tmp, os.getpid())
                try:
                    os.link(path, backup, follow_symlinks=False)
                except OSError:
                    backup = None
            os.replace(tmp, path)
            done.append((path, backup))
    except OSError as error:
        for path, backup in reversed(done):
            with contextlib.suppress(OSError):
                if backup is not None:
                    os.replace(backup, path)
                else:
                    os.unlink(path)
        for tmp, _ in moves:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        failed = moves[len(done)][1]
        raise OutputError(failed, error)
    for _, backup in done:
        if backup is not None:
            with contextlib.suppress(OSError):
                os.unlink(backup)


@contextlib.contextmanager
def all_or_nothing():
    """Group the outputs of one command: every :func:`atomic_write` / :func:`atomic_path` inside the block stays
    a temporary file until the block ends, then all are renamed into place; if anything fails, none is.

    Nested blocks join the outermost one. Renames in one directory do not run out of space, so the commit only
    fails in rare cases, and then the files it had already replaced are put back.
    """
    if getattr(_PENDING, "moves", None) is not None:
        yield
        return
    moves, created = [], []
    _PENDING.moves, _PENDING.created = moves, created
    try:
        yield
    except BaseException:
        _PENDING.moves = _PENDING.created = None
        for tmp, _ in moves:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        _remove_empty(created)
        raise
    _PENDING.moves = _PENDING.created = None
    try:
        _commit(moves)
    except BaseException:
        _remove_empty(created)
        raise


@contextlib.contextmanager
def outputs_now():
    """Inside an :func:`all_or_nothing` block, publish this block's outputs at once: a sweep keeps every finished
    row on disk so that an interrupted run can be resumed."""
    saved = getattr(_PENDING, "moves", None), getattr(_PENDING, "created", None)
    _PENDING.moves = _PENDING.created = None
    try:
        yield
    finally:
        _PENDING.moves, _PENDING.created = saved


def write_json(path, obj, indent=2):
    """Atomically write ``obj`` as JSON (sorted keys are not forced: callers order their records)."""
    with atomic_write(path, "w") as handle:
        json.dump(obj, handle, indent=indent)
        handle.write("\n")


def _refuse_non_finite(text):
    raise ValueError("{} is no number of a record edgeattn writes".format(text))


def _finite_float(text):
    value = float(text)
    if not math.isfinite(value):  # 1e309: beyond float's range
        _refuse_non_finite(text)
    return value


def read_json(path, kind, schema=None, what=None, finite=False):
    """The JSON record in ``path`` (UTF-8): a JSON object, and with ``schema`` one whose ``"schema"`` is that id.

    Everything else raises :class:`EdgeAttnError` in one line: a missing or unreadable file (``"cannot read
    <what> PATH: ..."``, ``what`` naming the file in words, e.g. "the engine manifest"), a file that is not JSON,
    and a value that is not a JSON object or carries another schema id (``"PATH is not <kind> ..."``, ``kind`` e.g.
    "an edgeattn engine manifest"). ``finite``: a ``NaN``, ``Infinity`` or out-of-range number (which Python's
    reader takes as a float) makes the file not JSON too, for a record whose every number edgeattn wrote finite.
    """
    named = "{} {}".format(what, path) if what else str(path)
    try:
        with open(path, "r", encoding="utf-8") as handle:
            value = json.load(handle, **({"parse_constant": _refuse_non_finite, "parse_float": _finite_float}
                                         if finite else {}))
    except FileNotFoundError:
        raise EdgeAttnError("no such file: {}".format(named))
    except OSError as error:
        raise EdgeAttnError("cannot read {}: {}".format(named, error.strerror or error))
    except ValueError as error:  # UnicodeDecodeError is one too
        raise EdgeAttnError("cannot read {}: it is not JSON ({})".format(named, error))
    except RecursionError:  # json's reader, for arrays or objects nested thousands deep
        raise EdgeAttnError("cannot read {}: it is not a record (JSON nested too deep to read)".format(named))
    if not isinstance(value, dict):
        raise EdgeAttnError("{} is not {} (a JSON object)".format(path, kind))
    if schema is not None and value.get("schema") != schema:
        raise EdgeAttnError("{} is not {} (schema {!r}, expected {})".format(path, kind, value.get("schema"), schema))
    return value


def read_input_bytes(path):
    """The whole content of the input file ``path``; :class:`EdgeAttnError` in one line when it cannot be read
    (``"cannot read PATH: reason"``) or is empty (``"PATH is empty"``)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise EdgeAttnError("cannot read {}: {}".format(path, error.strerror or error))
    if not data:
        raise EdgeAttnError("{} is empty".format(path))
    return data


def sha256_file(path, chunk_size=1 << 20):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(chunk_size), b""):
            digest.update(chunk)
    return digest.hexdigest()


# ----------------------------------------------------------------------------------------------------------------
# advisory locks
# ----------------------------------------------------------------------------------------------------------------
class LockBusy(EdgeAttnError):
    """Another process holds the lock; ``pid`` is the holder's process ID when it recorded one."""

    def __init__(self, message, pid=None):
        super().__init__(message)
        self.pid = pid


def _holder_pid(fd):
    try:
        raw = os.pread(fd, 64, 0)
    except OSError:
        return None
    first = raw.decode("ascii", "replace").split()
    return int(first[0]) if first and first[0].isdigit() else None


def _open_lock_file(path):
    flags = os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, os.O_RDWR | flags, 0o644), True
    except PermissionError:
        # a lock file another user created (e.g. in /run/lock): locking needs no write access
        return os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)), False


class HeldLock(object):
    """A lock being held: ``path``, and ``remove`` (settable) to delete the lock file on release."""

    def __init__(self, path, remove):
        self.path = path
        self.remove = remove


@contextlib.contextmanager
def exclusive_lock(path, what, remove=False):
    """Hold an exclusive advisory ``flock`` on ``path`` for the block; the holder's PID is written into it.

    A second holder gets :class:`LockBusy` (exit 2) naming ``what`` and the first one's PID at once, never a
    wait. A lock file left by a killed process or from before a reboot needs no clean-up: the kernel drops the
    lock with its process, and the next holder takes it and writes its own PID. Yields a :class:`HeldLock`; with
    ``remove`` (or its ``remove`` set to True meanwhile) the file is deleted on release, while still locked (a
    process that locked the deleted file notices and retries on the new one).
    """
    import fcntl

    path = os.path.abspath(path)
    while True:
        try:
            fd, writable = _open_lock_file(path)
        except OSError as error:
            raise EdgeAttnError("cannot open the lock file for {}: {}".format(what, describe_os_error(error, path)))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            pid = _holder_pid(fd)
            os.close(fd)
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise EdgeAttnError("cannot lock {}: {}".format(what, describe_os_error(error, path)))
            raise LockBusy("{} is in use by another edgeattn process ({}; lock file {})".format(
                what, "PID {}".format(pid) if pid else "PID unknown", path), pid)
        try:
            same = os.fstat(fd).st_ino == os.stat(path, follow_symlinks=False).st_ino
        except OSError:
            same = False
        if same:
            break
        os.close(fd)  # the previous holder removed the file we locked: lock the one now at ``path``
    held = HeldLock(path, remove)
    try:
        if writable:
            with contextlib.suppress(OSError):  # the PID only informs the next contender (a full disk drops it)
                os.ftruncate(fd, 0)
                os.pwrite(fd, "{}\n".format(os.getpid()).encode("ascii"), 0)
        yield held
    finally:
        if held.remove:
            with contextlib.suppress(OSError):
                os.unlink(path)
        os.close(fd)


def check_output_path(path):
    """Fail early, before the work that produces it, when ``path`` cannot be written: a directory in the way, a
    parent that is a file, or a read-only or unwritable place (the nearest existing parent decides)."""
    path = os.path.abspath(os.fspath(path))
    if os.path.isdir(path):
        raise OutputError(path, IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)))
    parent = os.path.dirname(path)
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise OutputError(path, NotADirectoryError(errno.ENOTDIR, "{} is not a directory".format(parent)))
    if not os.access(parent, os.W_OK | os.X_OK):
        try:
            read_only = bool(os.statvfs(parent).f_flag & os.ST_RDONLY)
        except (OSError, AttributeError):
            read_only = False
        code = errno.EROFS if read_only else errno.EACCES
        raise OutputError(path, OSError(code, os.strerror(code)))
    return path
