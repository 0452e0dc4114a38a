"""Shared state of the fake Jetson board used by the fake nvpmodel, jetson_clocks, tegrastats, sudo and reboot.

Environment:
  FAKE_JETSON_STATE  directory holding state.json (current mode, clock lock, fan) and calls.log (every call)
  FAKE_JETSON_BOARD  name of a board in tests/fixtures/jetson/fake_boards.json (default: from state.json)
  FAKE_JETSON_EUID   "0" when running as root (set by the fake sudo); anything else is an ordinary user
  FAKE_NVPMODEL_FAIL_MODE       a mode ID whose switch fails with the real fbp_pg_mask error lines
  (github.com/OE4T/meta-tegra/pull/1268)
  FAKE_NVPMODEL_NO_SELF_REBOOT  "1": a YES to the reboot prompt does not reboot; the `reboot` fake applies the mode
  FAKE_SUDO_DENY     "1": sudo -n fails as without cached credentials
  FAKE_FAULT         "TOOL:KIND:N", one injected fault (benchmarks/sweep_faults.py): the Nth call of TOOL (nvpmodel,
                     jetson_clocks, trtexec; counted in the state directory) fails ("fail": an error and exit 1),
                     hangs ("hang"), crashes ("crash": SIGSEGV) or prints garbage ("garbage"); for tegrastats N counts
                     the lines of its first run, after which it exits ("exit") or stops printing ("stall"). Every
                     other call behaves as without it.

Behaviour follows the real tools as published captures and rbonghi/jetson_stats' emulators (tests/nvpmodel,
tests/jetson_clocks, tests/tegrastats) show them; output lines that exist verbatim in the captures are replayed from
tests/fixtures/jetson.
Standard library only: the fakes run under whatever python3 is on PATH.
"""
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "fixtures", "jetson")

_MODE_RE = re.compile(r"<\s*POWER_MODEL\s+ID\s*=\s*(\d+)\s+NAME\s*=\s*([^\s>]+)\s*>")
_DEFAULT_RE = re.compile(r"<\s*PM_CONFIG\s+DEFAULT\s*=\s*(\d+)\s*>")
_SETTING_RE = re.compile(r"^([A-Z][A-Z0-9_]*)\s+([A-Z][A-Z0-9_]*)\s+(\S+)$")
_RAIL_RE = re.compile(r"\b([A-Za-z][A-Za-z0-9_]*) (\d+)(mW)?/(\d+)(mW)?\b")

INT_CAPS = {-1, 2147483647, 9223372036854775807}


def fixture_body(relative):
    """A fixture file without its '#@' header lines."""
    with open(os.path.join(FIXTURES, relative), "r", encoding="utf-8") as handle:
        return "".join(line for line in handle if not line.startswith("#@"))


def boards():
    with open(os.path.join(FIXTURES, "fake_boards.json"), "r", encoding="utf-8") as handle:
        data = json.load(handle)
    data.pop("_comment", None)
    return data


def state_dir():
    path = os.environ.get("FAKE_JETSON_STATE")
    if not path:
        sys.stderr.write("fake board: FAKE_JETSON_STATE is not set\n")
        sys.exit(97)
    return path


def is_root():
    return os.environ.get("FAKE_JETSON_EUID") == "0"


def load_state():
    with open(os.path.join(state_dir(), "state.json"), "r", encoding="utf-8") as handle:
        return json.load(handle)


def save_state(state):
    path = os.path.join(state_dir(), "state.json")
    tmp = path + ".tmp{}".format(os.getpid())
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=1)
    os.replace(tmp, path)


def log_call(tool, argv, stdin_text=None):
    entry = {"tool": tool, "argv": list(argv), "root": is_root(), "stdin": stdin_text, "time": time.time(),
             "pid": os.getpid()}
    with open(os.path.join(state_dir(), "calls.log"), "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def board():
    state = load_state()
    name = os.environ.get("FAKE_JETSON_BOARD") or state["board"]
    return name, boards()[name]


def parse_conf(name):
    """Minimal reading of a fake conf: {id: {"name", "settings": {(param, arg): value}}}, default id."""
    modes, default, current = {}, None, None
    for raw in fixture_body(os.path.join("confs", name)).splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _MODE_RE.search(line)
        if match:
            current = {"id": int(match.group(1)), "name": match.group(2), "settings": {}}
            modes[current["id"]] = current
            continue
        match = _DEFAULT_RE.search(line)
        if match:
            default = int(match.group(1))
            current = None
            continue
        if line.startswith("<"):
            current = None
            continue
        match = _SETTING_RE.match(line)
        if current is not None and match:
            current["settings"][(match.group(1), match.group(2))] = match.group(3)
    return modes, default


def mask_of(mode):
    return (mode["settings"].get(("TPC_POWER_GATING", "TPC_PG_MASK")),
            mode["settings"].get(("FBP_POWER_GATING", "FBP_PG_MASK")))


def cap(mode, param_prefix, uncapped):
    values = []
    for (param, arg), value in mode["settings"].items():
        if arg == "MAX_FREQ" and (param == param_prefix or (param_prefix == "CPU" and param.startswith("CPU_")
                                                           and param != "CPU_ONLINE")):
            number = int(value)
            values.append(uncapped if number in INT_CAPS or (number == 0 and param == "EMC") else number)
    return max(values) if values else uncapped


def online_cores(mode, total):
    flags = [v for (p, a), v in mode["settings"].items() if p == "CPU_ONLINE"]
    return sum(1 for v in flags if v == "1") if flags else total


def rail_values(mode_id, names):
    """Per-mode power the fake tegrastats reports, mW: rail i in mode m = 1000 * (m + 1) + 100 * i."""
    return {name: 1000 * (mode_id + 1) + 100 * index for index, name in enumerate(names)}


def template_rail_names(line):
    return [m.group(1) for m in _RAIL_RE.finditer(line) if m.group(1) != "NC"]


def tegrastats_line(spec, mode_id, root):
    """The board's captured line with its rails set to :func:`rail_values` and a fresh timestamp."""
    capture = spec.get("tegrastats_nonroot") if (not root and spec.get("tegrastats_nonroot")) else spec["tegrastats"]
    line = fixture_body(os.path.join("tegrastats", capture)).splitlines()[0]
    values = rail_values(mode_id, template_rail_names(line))

    def replace(match):
        name = match.group(1)
        if name not in values:
            return match.group(0)
        unit = match.group(3) or ""
        return "{} {}{}/{}{}".format(name, values[name], unit, values[name], match.group(5) or "")

    line = _RAIL_RE.sub(replace, line)
    if re.match(r"^\d{2}-\d{2}-\d{4} \d{2}:\d{2}:\d{2} ", line):
        line = time.strftime("%m-%d-%Y %H:%M:%S") + line[19:]
    return line


def _count_call(tool):
    """This call's number among the calls of ``tool`` (1-based), counted in the state directory under a lock."""
    import fcntl

    path = os.path.join(state_dir(), "fault-count-{}".format(tool))
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        count = len(handle.read()) + 1
        handle.write("x")
    return count


def injected_fault(tool):
    """``(kind, n)`` of FAKE_FAULT when it is about ``tool``, else None."""
    spec = os.environ.get("FAKE_FAULT") or ""
    parts = spec.split(":")
    if len(parts) != 3 or parts[0] != tool:
        return None
    return parts[1], int(parts[2])


def fault_now(tool):
    """The fault kind this call of ``tool`` must show (FAKE_FAULT names this call), or None. Counts the call."""
    fault = injected_fault(tool)
    if fault is None:
        return None
    return fault[0] if _count_call(tool) == fault[1] else None


def act_out(tool, kind):
    """Behave as ``kind`` says: an error, a hang (until killed), a crash or garbage on stdout."""
    import signal

    if kind == "hang":
        sys.stdout.flush()
        while True:
            time.sleep(3600)
    if kind == "crash":
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGSEGV)
    if kind == "garbage":
        sys.stdout.write("\x1b[2J\ufffd\ufffd @@@ {} output that is no output at all \x00\x7f\n".format(tool))
        sys.stdout.write("".join(chr(33 + (i * 37) % 90) for i in range(400)) + "\n")
        sys.stdout.flush()
        return 0
    sys.stdout.write("{}: injected failure (FAKE_FAULT)\n".format(tool))
    return 1
