"""jetson_clocks: ``--show`` parsed, ``--store FILE`` / ``--restore FILE`` and locking clocks at the mode's maxima.

Every action needs root (the script exits with ``Error: Run this script(...) as a root user``); ``--store`` to an
existing file prompts on stdin, so a fresh explicit path is always used; ``--restore`` needs the file
(the ``main()`` of NVIDIA's ``/usr/bin/jetson_clocks`` script). ``--show`` formats differ across releases (real
captures in tests/fixtures/jetson/clocks): JetPack 4 ``cpuN: Online=1 ...``,
JetPack 5/6 ``cpuN:  Online=1 ...`` and ``Active GPU TPCs``, R39 ``Online CPUs: 0-5, Offline CPUs:`` and no
``Online=`` per core, several fan line styles, and a final ``NV Power Mode: X`` when nvpmodel exists.
"""
import contextlib
import os
import re
import stat
import tempfile

from .._subprocess import run_command
from ..errors import EdgeAttnError
from . import find_tool, privileged

TIMEOUT_S = 10
_HEADER_RE = re.compile(r"SOC family:\s*(\S+)\s+Machine:\s*(.*)$")
# CPU numbers and counts are short ASCII digit runs: a 5000-digit one would make Python 3.11's int() raise
_CPU_RE = re.compile(r"^(cpu\d{1,4}):\s*(.*)$", re.ASCII)
#: a key starts after a non-word character: without the lookbehind findall tries every start inside a long word
#: and backtracks over the rest of it (quadratic: seconds for a 20000-digit token)
_KV_RE = re.compile(r"(?<!\w)(\w+)=(\S*)")
_ENGINE_RE = re.compile(r"^(GPU|EMC)\s+(.*)$")
_POWER_MODE_RE = re.compile(r"NV Power Mode:\s*(\S+)")
_TPC_RE = re.compile(r"Active GPU TPCs:\s*(\d{1,6})\b", re.ASCII)
_CPU_NUMBER_RE = re.compile(r"^\d{1,4}$", re.ASCII)
_CLUSTER_RE = re.compile(r"CPU Cluster Switching:\s*(\S+)")
_ROOT_ERROR_RE = re.compile(r"Error: Run this script\((.*)\) as a root user")


def _int_or_none(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def parse_show(text):
    """Parse ``jetson_clocks --show``. Returns a dict (never raises): ``soc_family``, ``machine``, ``online_cpus``,
    ``offline_cpus``, ``cpus`` {cpuN: {online, governor, min_khz, max_khz, cur_khz, idle_states}}, ``gpu`` and
    ``emc`` {min_hz, max_hz, cur_hz[, freq_override]}, ``active_gpu_tpcs``, ``fan`` (raw lines), ``power_mode``,
    ``locked`` (jtop's rule: every online CPU min == max, GPU min == max, EMC current == max) and ``unparsed``."""
    data = {"soc_family": None, "machine": None, "online_cpus": None, "offline_cpus": None,
            "cluster_switching": None, "cpus": {}, "gpu": None, "emc": None, "active_gpu_tpcs": None, "fan": [],
            "power_mode": None, "locked": None, "unparsed": []}
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        match = _HEADER_RE.search(line)
        if match:
            data["soc_family"], data["machine"] = match.group(1), match.group(2).strip()
            continue
        if line.startswith("Online CPUs:"):
            rest = line[len("Online CPUs:"):]
            if "Offline CPUs:" in rest:
                rest, offline = rest.split("Offline CPUs:", 1)
                data["offline_cpus"] = offline.strip()
            data["online_cpus"] = rest.strip().rstrip(",").strip()
            continue
        match = _CPU_RE.match(line)
        if match:
            values = dict(_KV_RE.findall(match.group(2)))
            idle = {}
            if "IdleStates:" in match.group(2):
                idle = {k: _int_or_none(v) for k, v in _KV_RE.findall(match.group(2).split("IdleStates:", 1)[1])}
            online = values.get("Online")
            data["cpus"][match.group(1)] = {
                "online": None if online is None else online == "1",
                "governor": values.get("Governor"),
                "min_khz": _int_or_none(values.get("MinFreq")),
                "max_khz": _int_or_none(values.get("MaxFreq")),
                "cur_khz": _int_or_none(values.get("CurrentFreq")),
                "idle_states": idle,
            }
            continue
        match = _ENGINE_RE.match(line)
        if match and "MaxFreq=" in line:
            values = dict(_KV_RE.findall(match.group(2)))
            engine = {"min_hz": _int_or_none(values.get("MinFreq")), "max_hz": _int_or_none(values.get("MaxFreq")),
                      "cur_hz": _int_or_none(values.get("CurrentFreq"))}
            if "FreqOverride" in values:
                engine["freq_override"] = _int_or_none(values["FreqOverride"])
            data[match.group(1).lower()] = engine
            continue
        match = _TPC_RE.search(line)
        if match:
            data["active_gpu_tpcs"] = int(match.group(1))
            continue
        match = _CLUSTER_RE.search(line)
        if match:
            data["cluster_switching"] = match.group(1)
            continue
        if line.lower().startswith("fan"):
            data["fan"].append(line)
            continue
        match = _POWER_MODE_RE.search(line)
        if match:
            data["power_mode"] = match.group(1)
            continue
        data["unparsed"].append(line)
    data["locked"] = _locked(data)
    return data


def _cpu_range_members(text):
    members = set()
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            low, _, high = part.partition("-")
            if _CPU_NUMBER_RE.match(low) and _CPU_NUMBER_RE.match(high):
                members.update(range(int(low), int(high) + 1))  # at most 10^4 numbers: never a hang
        elif _CPU_NUMBER_RE.match(part):
            members.add(int(part))
    return members


def _locked(data):
    """jtop's ``jetson_clocks_alive`` rule; None when the output has too little to decide."""
    gpu, emc, cpus = data["gpu"], data["emc"], data["cpus"]
    if not cpus or gpu is None:
        return None
    online_set = _cpu_range_members(data["online_cpus"]) if data["online_cpus"] else None
    for name, cpu in cpus.items():
        online = cpu["online"]
        if online is None and online_set is not None:
            online = int(name[3:]) in online_set
        if online is False:
            continue
        if cpu["min_khz"] is None or cpu["min_khz"] != cpu["max_khz"]:
            return False
    if gpu["min_hz"] is None or gpu["min_hz"] != gpu["max_hz"]:
        return False
    if emc is not None and emc.get("cur_hz") is not None and emc["cur_hz"] != emc.get("max_hz"):
        return False
    return True


# --------------------------------------------------------------------------------------------------------------
# Running jetson_clocks
# --------------------------------------------------------------------------------------------------------------
def jetson_clocks_path():
    return find_tool("jetson_clocks")


def _run(args, timeout, input_text=None):
    tool = jetson_clocks_path()
    if tool is None:
        raise EdgeAttnError("jetson_clocks is not installed (looked on PATH, /usr/sbin, /usr/bin)")
    result = run_command(privileged([tool] + list(args)), timeout=timeout, input_text=input_text)
    if result.returncode != 0 or _ROOT_ERROR_RE.search(result.output):
        lines = [line.strip() for line in result.output.splitlines() if line.strip()]
        detail = lines[-1] if lines else "exit status {}".format(result.returncode)
        raise EdgeAttnError("jetson_clocks {} failed: {}".format(" ".join(args) or "(lock)", detail))
    return result


def show(timeout=TIMEOUT_S, use_sudo=False):
    """``jetson_clocks --show`` parsed; None when jetson_clocks is not installed or cannot run (it needs root:
    with ``use_sudo`` it is run through ``sudo -n`` when we are not root)."""
    return show_or_reason(timeout, use_sudo)[0]


def show_or_reason(timeout=TIMEOUT_S, use_sudo=False):
    """``(parsed, None)``, or ``(None, why)`` where ``why`` is what failed in jetson_clocks' own words (its last
    output line, its exit status, the timeout) for a sweep's warning."""
    tool = jetson_clocks_path()
    if tool is None:
        return None, "jetson_clocks is not installed"
    args = privileged([tool, "--show"]) if use_sudo else [tool, "--show"]
    try:
        result = run_command(args, timeout=timeout)
    except EdgeAttnError as error:
        return None, str(error)
    lines = [line.strip() for line in (result.output or "").splitlines() if line.strip()]
    if _ROOT_ERROR_RE.search(result.output):
        return None, "it needs root: " + (lines[-1] if lines else "permission denied")
    if result.returncode != 0:
        return None, "{} (exit status {})".format(lines[-1], result.returncode) if lines else \
            "exit status {}".format(result.returncode)
    return parse_show(result.output), None


# --------------------------------------------------------------------------------------------------------------
# The private clock store
# --------------------------------------------------------------------------------------------------------------
#: Overrides where private state (the clock stores) lives; tests point it into their tmp directory.
STATE_DIR_ENV = "EDGEATTN_STATE_DIR"
STORE_NAME = "jetson_clocks.orig"


def state_dir():
    """Where edgeattn keeps state that root later reads: ``$EDGEATTN_STATE_DIR``, else /var/lib/edgeattn for
    root, else ``$XDG_STATE_HOME/edgeattn`` (``~/.local/state/edgeattn``). Never a sweep's output directory:
    whoever can write that must not choose what ``jetson_clocks --restore`` writes as root."""
    explicit = os.environ.get(STATE_DIR_ENV)
    if explicit:
        return os.path.abspath(explicit)
    if _euid() == 0:
        return "/var/lib/edgeattn"
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "edgeattn")


def _euid():
    geteuid = getattr(os, "geteuid", None)
    return geteuid() if geteuid is not None else 0


def _lstat_problem(path):
    """``(os.lstat(path), None)``, or ``(None, why)`` where it cannot be read or is a symbolic link."""
    try:
        info = os.lstat(path)
    except OSError as error:
        return None, "{}: {}".format(path, error.strerror or error)
    if stat.S_ISLNK(info.st_mode):
        return None, "{} is a symbolic link".format(path)
    return info, None


def _mode_problem(path, info, private):
    """Why the mode of ``path`` lets others change it (``private``: or read it); None when it does not."""
    mask = 0o077 if private else 0o022
    if stat.S_IMODE(info.st_mode) & mask:
        return "{} has mode {:04o} (others may {} it)".format(path, stat.S_IMODE(info.st_mode),
                                                            "read or change" if private else "change")
    return None


def _private_dir_problem(path, private):
    """Why ``path`` is not a directory only this user controls (None when it is): a real directory (not a
    symlink), owned by us, writable by nobody else (``private``: not even readable by others)."""
    info, problem = _lstat_problem(path)
    if problem:
        return problem
    if not stat.S_ISDIR(info.st_mode):
        return "{} is not a directory".format(path)
    if info.st_uid != _euid():
        return "{} is owned by uid {}, not {}".format(path, info.st_uid, _euid())
    return _mode_problem(path, info, private)


def _store_root(create):
    root = os.path.join(state_dir(), "clocks")
    if create:
        os.makedirs(root, mode=0o700, exist_ok=True)
    root = os.path.realpath(root)
    problem = _private_dir_problem(root, private=False)
    if problem:
        raise EdgeAttnError("the clock-store directory is not safe to use: {}".format(problem))
    return root


def new_store_path():
    """A fresh path for ``jetson_clocks --store``: ``STORE_NAME`` in a new directory created with mode 0700
    (``mkdtemp``) under :func:`state_dir`, so nothing (no file, no symlink) can be waiting at that name."""
    try:
        directory = tempfile.mkdtemp(prefix="sweep-", dir=_store_root(create=True))
    except OSError as error:
        raise EdgeAttnError("cannot create a private directory for the clock store under {}: {}".format(
            state_dir(), error.strerror or error))
    return os.path.join(directory, STORE_NAME)


def store_problem(path):
    """Why ``path`` is not a clock store that edgeattn created (None when it is): it must be ``STORE_NAME`` in a
    0700 directory of ours directly under the clock-store root, a regular file (no symlink, one link) owned by us
    or root and writable by nobody else. Checked with lstat, component by component."""
    if not isinstance(path, str) or not os.path.isabs(path):
        return "{!r} is not an absolute path".format(path)
    if os.path.basename(path) != STORE_NAME:
        return "{} is not named {}".format(path, STORE_NAME)
    try:
        root = _store_root(create=False)
    except EdgeAttnError as error:
        return error.format_message()
    directory = os.path.dirname(path)
    if os.path.dirname(directory) != root:
        return "{} is not in edgeattn's clock-store directory {}".format(path, root)
    problem = _private_dir_problem(directory, private=True)
    if problem:
        return problem
    info, problem = _lstat_problem(path)
    if problem:
        return problem
    if not stat.S_ISREG(info.st_mode):
        return "{} is not a regular file".format(path)
    if info.st_nlink != 1:
        return "{} has {} hard links".format(path, info.st_nlink)
    if info.st_uid not in (0, _euid()):
        return "{} is owned by uid {}".format(path, info.st_uid)
    return _mode_problem(path, info, private=False)


def verify_store(path, source=None):
    """Raise :class:`EdgeAttnError` (one line) unless ``path`` passes :func:`store_problem`; ``source`` names
    where the path came from (a sweep's resume file)."""
    problem = store_problem(path)
    if problem:
        raise EdgeAttnError("refusing the clock store {}{}: {}; it is not a file edgeattn created, so it is not "
                            "handed to `jetson_clocks --restore` as root".format(
                                path, " named in {}".format(source) if source else "", problem))
    return path


def discard_store(path):
    """Remove a verified clock store and its private directory once the sweep that made it is finished."""
    if store_problem(path) is not None:
        return
    with contextlib.suppress(OSError):
        os.unlink(path)
        os.rmdir(os.path.dirname(path))


def store(path=None, timeout=TIMEOUT_S):
    """``jetson_clocks --store PATH`` into a fresh private location (:func:`new_store_path` unless ``path`` is
    given); returns the path. ``path`` must not exist: the script would prompt Y/N, and an existing name (or a
    dangling symlink) is not something edgeattn created."""
    path = os.path.abspath(path) if path else new_store_path()
    if os.path.lexists(path):
        raise EdgeAttnError("refusing to store the clocks to {}: it already exists (a file or symlink edgeattn did "
                            "not create)".format(path))
    _run(["--store", path], timeout)
    if not os.path.exists(path):
        raise EdgeAttnError("jetson_clocks --store {} reported success but wrote no file".format(path))
    return path


def restore(path, timeout=TIMEOUT_S):
    """``jetson_clocks --restore PATH``: only for a store :func:`verify_store` accepts, because jetson_clocks
    writes every ``node:value`` line of it as root."""
    path = os.path.abspath(path)
    if not os.path.lexists(path):
        raise EdgeAttnError("cannot restore clocks: {} does not exist".format(path))
    verify_store(path)
    _run(["--restore", path], timeout)


def lock(timeout=TIMEOUT_S):
    """Run ``jetson_clocks`` without options: clocks pinned at the current mode's maxima (the
    script's usage text: "set static max frequency to CPU, GPU and EMC clocks")."""
    _run([], timeout)
