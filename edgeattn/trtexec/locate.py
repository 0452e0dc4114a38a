"""Where trtexec is: ``--trtexec``, ``$EDGEATTN_TRTEXEC``, PATH, then JetPack's install location."""
import os

from .._subprocess import which
from ..errors import EdgeAttnError
from . import probe_version

#: Where JetPack installs trtexec (it is not on PATH there).
JETPACK_TRTEXEC = "/usr/src/tensorrt/bin/trtexec"


def find_trtexec(explicit=None):
    """Path of trtexec: ``explicit``, ``$EDGEATTN_TRTEXEC``, PATH, then JetPack's /usr/src/tensorrt/bin/trtexec.

    Returns ``(path or None, places searched)``.
    """
    searched = []
    for candidate, label in ((explicit, "--trtexec"), (os.environ.get("EDGEATTN_TRTEXEC"), "$EDGEATTN_TRTEXEC")):
        if candidate:
            searched.append("{} ({})".format(candidate, label))
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return os.path.abspath(candidate), searched
            if label == "--trtexec":
                raise EdgeAttnError("trtexec not found or not executable: {}".format(candidate))
    on_path = which("trtexec")
    searched.append("PATH")
    if on_path:
        return on_path, searched
    searched.append(JETPACK_TRTEXEC)
    if os.path.isfile(JETPACK_TRTEXEC) and os.access(JETPACK_TRTEXEC, os.X_OK):
        return JETPACK_TRTEXEC, searched
    return None, searched


def locate(explicit=None):
    """``(path, version)`` of the trtexec to use; raises with the places searched."""
    path, searched = find_trtexec(explicit)
    if path is None:
        raise EdgeAttnError("trtexec not found (searched {}); install TensorRT's samples or pass --trtexec PATH"
                            .format(", ".join(searched)))
    return path, probe_version(path)
