"""Jetson board I/O: identity (board), power modes (nvpmodel), clocks (jetson_clocks), telemetry (tegrastats,
INA3221 sysfs) and power summaries (power).

Every module is device-side (Python 3.8, no dependency beyond the standard library) and every parser takes text,
so it is tested on real captures without a board. Commands go through :func:`edgeattn._subprocess.run_command`
(argument list, timeout, closed stdin); the long-running tegrastats reader is the one exception, see
:mod:`edgeattn.jetson.tegrastats`.
"""
import os

#: Environment variable pointing board I/O at a fake filesystem root (tests, like jtop's JTOP_TESTING).
ROOT_ENV = "EDGEATTN_JETSON_ROOT"
#: "auto" (sudo -n when not root), "always" or "never": how privileged commands are run.
SUDO_ENV = "EDGEATTN_SUDO"


def default_root():
    """The filesystem root board I/O reads (``/`` unless EDGEATTN_JETSON_ROOT points elsewhere)."""
    return os.environ.get(ROOT_ENV) or "/"


def rooted(root, path):
    """``path`` (absolute, e.g. /proc/device-tree/model) under ``root``."""
    return os.path.join(root or "/", path.lstrip("/"))


#: Directories searched before the system ones for the board tools (a colon list): the explicit hook the test
#: fakes use. PATH alone never decides which nvpmodel or jetson_clocks runs as root.
TOOL_DIRS_ENV = "EDGEATTN_TOOL_DIRS"
#: Where NVIDIA installs the board tools and the distribution installs sudo and reboot.
SYSTEM_TOOL_DIRS = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")


def privileged(args):
    """``args`` prefixed with ``sudo -n`` when needed: nvpmodel -m and every jetson_clocks action need root
    (NVIDIA's docs always run ``sudo nvpmodel -m``; the jetson_clocks script exits "Run this script ... as a root
    user"). ``-n`` makes sudo fail at once instead of prompting for a password; stdin is closed
    anyway. sudo itself is resolved like the board tools (system directories before PATH)."""
    mode = (os.environ.get(SUDO_ENV) or "auto").lower()
    if mode == "never":
        return list(args)
    sudo = find_tool("sudo") or "sudo"
    if mode == "always":
        return [sudo, "-n"] + list(args)
    geteuid = getattr(os, "geteuid", None)
    if geteuid is not None and geteuid() == 0:
        return list(args)
    return [sudo, "-n"] + list(args)


def _executable(candidate):
    return os.path.isfile(candidate) and os.access(candidate, os.X_OK)


def find_tool(name, fallback_dirs=SYSTEM_TOOL_DIRS):
    """Absolute path of a board tool, or None. Order: the directories in ``EDGEATTN_TOOL_DIRS`` (set on purpose,
    e.g. by the test fakes), then the system directories NVIDIA installs them in (nvpmodel is /usr/sbin/nvpmodel,
    jetson_clocks and tegrastats /usr/bin on every L4T release), and only then PATH, which an ordinary
    user's shell may extend with writable directories. The absolute path is what sudo is given, so sudo runs
    exactly it."""
    import shutil

    explicit = [d for d in (os.environ.get(TOOL_DIRS_ENV) or "").split(os.pathsep) if d]
    for directory in explicit + list(fallback_dirs):
        candidate = os.path.join(directory, name)
        if _executable(candidate):
            return os.path.abspath(candidate)
    found = shutil.which(name)
    return os.path.abspath(found) if found else None


def resolve_rooted(root, path, max_links=8):
    """``path`` under ``root`` with symlinks followed inside ``root``: an absolute link target such as
    /etc/nvpmodel.conf -> /etc/nvpmodel/nvpmodel_p3767_0003.conf is re-rooted, so fake roots work like /."""
    current = rooted(root, path)
    for _ in range(max_links):
        if not os.path.islink(current):
            return current
        target = os.readlink(current)
        if os.path.isabs(target):
            current = rooted(root, target)
        else:
            current = os.path.join(os.path.dirname(current), target)
    return current
