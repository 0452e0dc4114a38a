"""Helpers for the security and bad-input tests: places that cannot be written (a read-only or a full filesystem)
and a real shared library whose constructor leaves a marker file.

Read-only and full places are real filesystems where this process may mount one (root: a tmpfs with ``size=``,
remounted read-only or filled up); otherwise a full disk is simulated by making ``fsync`` fail with ENOSPC for
files in that directory, and a read-only place is a mode-0555 directory (which root would ignore: then the
read-only cases are skipped).
"""
import errno
import os
import shutil
import subprocess
import sys

import pytest

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TESTS_DIR, "bench"))
sys.path.insert(0, os.path.join(TESTS_DIR, "compare"))

MARKER_LIBRARY_SOURCE = r"""
#include <stdio.h>
__attribute__((constructor)) static void edgeattn_test_marker(void)
{
    FILE* marker = fopen(MARKER_PATH, "a");
    if (marker) { fputs("loaded\n", marker); fclose(marker); }
}
const char* edgeattn_plugins_build_info(void) { return "marker library (test)"; }
"""


def build_marker_library(directory, marker_path, name="libedgeattn_plugins.so"):
    """Compile a shared library that appends "loaded" to ``marker_path`` the moment it is loaded."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler to build the marker library")
    source = os.path.join(str(directory), "marker.c")
    with open(source, "w") as handle:
        handle.write(MARKER_LIBRARY_SOURCE)
    library = os.path.join(str(directory), name)
    subprocess.run([compiler, "-shared", "-fPIC", "-DMARKER_PATH=\"{}\"".format(marker_path), "-o", library,
                    source], check=True, stdin=subprocess.DEVNULL, timeout=120)
    return library


def _mount_tmpfs(path, size):
    # EDGEATTN_TEST_NO_MOUNT=1 exercises the simulated places even where mounting would work
    if os.environ.get("EDGEATTN_TEST_NO_MOUNT") == "1":
        return False
    if getattr(os, "geteuid", lambda: 1)() != 0 or shutil.which("mount") is None:
        return False
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size={},mode=0755".format(size), "tmpfs", str(path)],
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    return proc.returncode == 0


def _umount(path):
    subprocess.run(["umount", str(path)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=30)


class Place(object):
    """A directory that is writable while a test fills it with inputs, until :meth:`freeze` (read-only) or
    :meth:`fill` (no space left) is called. ``real`` says whether a real filesystem stands behind it."""

    def __init__(self, path, real, monkeypatch):
        self.path = str(path)
        self.real = real
        self._monkeypatch = monkeypatch

    def __str__(self):
        return self.path

    def join(self, *names):
        return os.path.join(self.path, *names)

    def listing(self):
        """Every entry below the place (hidden temporary files included), for "nothing left behind"."""
        found = []
        for directory, dirs, files in os.walk(self.path):
            for name in dirs + files:
                found.append(os.path.relpath(os.path.join(directory, name), self.path))
        return sorted(found)

    def freeze(self):
        if self.real:
            proc = subprocess.run(["mount", "-o", "remount,ro", self.path], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
            assert proc.returncode == 0, proc.stdout
            return
        if os.geteuid() == 0:
            pytest.skip("cannot make a directory read-only for root without mounting a filesystem")
        for directory, _, _ in os.walk(self.path):
            os.chmod(directory, 0o555)

    def fill(self):
        if self.real:
            filler = os.path.join(self.path, ".filler")
            with open(filler, "wb", buffering=0) as handle:
                try:
                    while True:
                        handle.write(b"\0" * 4096)
                except OSError as error:
                    assert error.errno == errno.ENOSPC
            return
        real_fsync = os.fsync
        root = os.path.realpath(self.path) + os.sep

        def fsync(fd):
            try:
                target = os.readlink("/proc/self/fd/{}".format(fd))
            except OSError:
                target = ""
            if target.startswith(root):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_fsync(fd)

        self._monkeypatch.setattr(os, "fsync", fsync)


@pytest.fixture
def place(tmp_path, monkeypatch):
    """Factory: ``place(name)`` -> :class:`Place` (a small tmpfs when mountable, else a plain directory)."""
    mounted = []

    def make(name="place", size="512k"):
        path = tmp_path / name
        path.mkdir()
        real = _mount_tmpfs(path, size)
        if real:
            mounted.append(path)
        return Place(path, real, monkeypatch)

    yield make
    for path in mounted:
        _umount(path)
    for path in tmp_path.iterdir():  # undo chmod 0555 so pytest can clean up
        if path.is_dir():
            for directory, _, _ in os.walk(str(path)):
                try:
                    os.chmod(directory, 0o755)
                except OSError:
                    pass


def one_error_line(result, progress_allowed=False):
    """The error of a failed command: exit status 2, one ``edgeattn: error:`` line, no traceback. Without
    ``progress_allowed`` it is all of stderr; with it, progress lines of a command that had started may precede
    it (a failed write at the end of a benchmark), but the error is still one line and the last."""
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("edgeattn: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], result.stderr
    if not progress_allowed:
        assert len(lines) == 1, result.stderr
    return errors[0]
