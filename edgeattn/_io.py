"""File helpers shared by every command that writes results: atomic writes and content hashes."""
import contextlib
import hashlib
import json
import os
import tempfile


@contextlib.contextmanager
def atomic_write(path, mode="wb"):
    """Yield a file object whose contents replace ``path`` only if the block finishes without an exception.

    The data goes to a temporary file in the same directory (so the final rename is atomic) and is removed on
    error or interruption; a failed command never leaves a partial output file behind.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".{}.".format(os.path.basename(path)), suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path next to ``path``; it is renamed onto ``path`` on success and deleted otherwise.

    For writers that insist on a file name (torch.onnx.export, TensorRT serializers, trtexec --saveEngine).
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    base, ext = os.path.splitext(os.path.basename(path))
    fd, tmp = tempfile.mkstemp(prefix=".{}.".format(base), suffix=".tmp" + ext, dir=directory)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_json(path, obj, indent=2):
    """Atomically write ``obj`` as JSON (sorted keys are not forced: callers order their records)."""
    with atomic_write(path, "w") as handle:
        json.dump(obj, handle, indent=indent)
        handle.write("\n")


def sha256_file(path, chunk_size=1 << 20):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(chunk_size), b""):
            digest.update(chunk)
    return digest.hexdigest()
