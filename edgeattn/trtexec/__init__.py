"""Driving NVIDIA's trtexec: version detection, command lines per version, JSON exports and log reading.

trtexec's options, export formats and messages changed across TensorRT 8.0 -> 11.x (its source is
``samples/trtexec/`` and ``samples/common/`` on each ``release/X.Y`` branch of NVIDIA/TensorRT); everything
version-dependent lives in this package:

* :mod:`.version` - ``[TensorRT vNNNN]`` banners and ``TensorRT version:`` lines;
* :mod:`.flags` - which options a version parses, and the build/bench command lines;
* :mod:`.exports` - ``--exportTimes`` / ``--exportProfile`` parsers;
* :mod:`.log` - device block, and one-line explanations of failures.
"""
import os

from .._subprocess import run_command
from ..errors import EdgeAttnError
from .version import TrtVersion, decode_version_number, parse_banners, version_from_output

__all__ = ["TrtVersion", "decode_version_number", "parse_banners", "version_from_output", "probe_version",
           "run_trtexec"]

_VERSION_CACHE = {}


def probe_version(path, timeout=60):
    """TensorRT version of the trtexec at ``path``, from the RUNNING banner of ``trtexec --help`` (cached per
    path and file identity). Raises :class:`EdgeAttnError` if it does not run or prints no version banner."""
    try:
        stat = os.stat(path)
        key = (os.path.abspath(path), stat.st_ino, stat.st_mtime_ns, stat.st_size)
    except OSError:
        raise EdgeAttnError("trtexec not found: {}".format(path))
    if key in _VERSION_CACHE:
        return _VERSION_CACHE[key]
    result = run_command([path, "--help"], timeout=timeout)
    version = version_from_output(result.output)
    if version is None:
        lines = [line for line in result.output.splitlines() if line.strip()]
        raise EdgeAttnError("{} printed no TensorRT version banner (exit status {}): {}".format(
            path, result.returncode, lines[0] if lines else "no output"))
    _VERSION_CACHE[key] = version
    return version


def run_trtexec(args, timeout, env=None):
    """Run a trtexec command line (argument list, closed stdin, timeout); returns the CommandResult."""
    return run_command(args, timeout=timeout, env=env)
