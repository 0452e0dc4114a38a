"""nvpmodel: read the mode table (conf file or ``nvpmodel -p --verbose``), query the current mode, switch modes.

Why one module: the conf parser, the ``-p --verbose`` and ``-q`` parsers and the switch all produce or consume one
mode-table model (:class:`NvpmodelConf`), so the formats of one tool stay side by side.

Formats and behaviours (the conf header's FORMAT comment in NVIDIA's ``/etc/nvpmodel/*.conf``;
rbonghi/jetson_stats ``jtop/core/nvpmodel.py``; real captures in tests/fixtures/jetson/nvpmodel): ``nvpmodel -q``
prints optional ``NVPM WARN``/``NV Fan Mode`` lines,
``NV Power Mode: <NAME>`` and the numeric ID on the next line, and (unprivileged) trailing ``NVPM ERROR`` lines;
``-q --verbose`` adds ``NVPM VERB: PARAM ...: REAL_VAL: x CONF_VAL: y`` lines; ``-p --verbose`` dumps the parsed
conf (``PM_CONFIG: DEFAULT=NAME(id)``, ``POWER_MODEL: ID=n NAME=x``, setting lines); ``-m <id>`` switches live
(no output) or, when the GPU power-gating masks differ, asks on stdin whether to reboot. Parsers never raise on
odd input: what they cannot read is counted in ``unparsed``.
"""
import collections
import re

from .._subprocess import run_command
from ..errors import EdgeAttnError
from . import find_tool, privileged, resolve_rooted

#: ``nvpmodel -q`` can take ~2.5 s under systemd; jtop raised its timeout to 10 s
#: (rbonghi/jetson_stats commit f8f51ae1, "fix(nvpmodel): raise timeout").
QUERY_TIMEOUT_S = 10
SWITCH_TIMEOUT_S = 60

PowerMode = collections.namedtuple("PowerMode", "id name")

_INT_MAX_VALUES = {2147483647, 9223372036854775807}
_MODE_NAME_RE = re.compile(r"NV Power Mode:\s*([^\s]+)")
# mode IDs are short ASCII digit runs (a 5000-digit one would make Python 3.11's int() raise)
_INT_LINE_RE = re.compile(r"^\s*(\d{1,9})\s*$", re.ASCII)
_FAN_RE = re.compile(r"NV Fan Mode:\s*(\S+)")
_NVPM_MSG_RE = re.compile(r"NVPM (ERROR|WARN|WARNING|VERB):\s?(.*)$")
_PARAM_HEADER_RE = re.compile(r"<\s*PARAM\s+TYPE\s*=\s*(\w+)\s+NAME\s*=\s*([^\s>]+)\s*>")
_CONF_MODE_RE = re.compile(r"<\s*POWER_MODEL\s+ID\s*=\s*(\d{1,9})\s+NAME\s*=\s*([^\s>]+)\s*>")
_CONF_DEFAULT_RE = re.compile(r"<\s*PM_CONFIG\s+DEFAULT\s*=\s*(\d{1,9})\s*>", re.ASCII)
_VERB_DEFAULT_RE = re.compile(r"PM_CONFIG:\s*DEFAULT=(\w+)\((\d{1,9})\)", re.ASCII)
_VERB_MODE_RE = re.compile(r"POWER_MODEL:\s*ID=(\d{1,9})\s+NAME=(\w+)", re.ASCII)
_VERB_PARAM_DEF_RE = re.compile(r"PARAM\s+TYPE=(\w+)\s+NAME=(\w+)")
_VERB_PARAM_VALUE_RE = re.compile(
    r"PARAM\s+(\S+?):\s*ARG\s+(\S+?):\s*PATH\s+(\S+?):\s*REAL_VAL:\s*(\S+)\s+CONF_VAL:\s*(\S+)")
_SETTING_RE = re.compile(r"^([A-Z][A-Z0-9_]*)\s+([A-Z][A-Z0-9_]*)\s+(\S+)$")
_REBOOT_RE = re.compile(r"Reboot required for changing to this power mode:\s*(\d+)")


def _cap(value, zero_is_uncapped=False):
    """A conf clock value as an int; -1, INT_MAX and INT64_MAX mean "no cap" (-1); None if not a number."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    if number < 0 or number in _INT_MAX_VALUES or (zero_is_uncapped and number == 0):
        return -1
    return number


class ConfMode(object):
    """One ``POWER_MODEL`` of a conf: its settings, keyed by (PARAM, ARG), and the caps derived from them."""

    def __init__(self, mode_id, name):
        self.id = mode_id
        self.name = name
        self.settings = collections.OrderedDict()

    def set(self, param, arg, value):
        self.settings[(param, arg)] = value

    @property
    def online_cores(self):
        cores = [v for (p, _a), v in self.settings.items() if p == "CPU_ONLINE"]
        if not cores:
            return None
        return sum(1 for v in cores if v.strip() == "1")

    def _max_over(self, predicate, zero_is_uncapped=False):
        values = [_cap(v, zero_is_uncapped) for (p, a), v in self.settings.items() if predicate(p) and a == "MAX_FREQ"]
        values = [v for v in values if v is not None]
        if not values:
            return None
        if -1 in values:
            return -1
        return max(values)

    @property
    def cpu_max_khz(self):
        return self._max_over(lambda p: p.startswith("CPU_") and p != "CPU_ONLINE")

    @property
    def gpu_max_hz(self):
        return self._max_over(lambda p: p == "GPU")

    @property
    def emc_max_hz(self):
        # Old confs write "EMC MAX_FREQ 0" for "no cap" (NVIDIA's Xavier confs, e.g. nvpmodel_t194.conf).
        return self._max_over(lambda p: p == "EMC", zero_is_uncapped=True)

    @property
    def dla0_max_hz(self):
        return self._max_over(lambda p: p == "DLA0_CORE")

    @property
    def dla1_max_hz(self):
        return self._max_over(lambda p: p == "DLA1_CORE")

    def _int_setting(self, param, arg):
        value = self.settings.get((param, arg))
        try:
            return int(value) if value is not None else None
        except ValueError:
            return None

    @property
    def tpc_pg_mask(self):
        return self._int_setting("TPC_POWER_GATING", "TPC_PG_MASK")

    @property
    def fbp_pg_mask(self):
        return self._int_setting("FBP_POWER_GATING", "FBP_PG_MASK")

    @property
    def reboot_key(self):
        """Modes with equal keys switch live; a different key makes nvpmodel ask for a reboot (jtop's rule in
        ``jtop/core/nvpmodel.py``: a mode whose TPC_PG_MASK differs "is not compatible" without a reboot). None when
        the conf has no power-gating masks (e.g. Jetson Nano: always live)."""
        if self.tpc_pg_mask is None and self.fbp_pg_mask is None:
            return None
        return (self.tpc_pg_mask, self.fbp_pg_mask)

    @property
    def power_mode(self):
        return PowerMode(self.id, self.name)

    def to_dict(self):
        return {"id": self.id, "name": self.name, "online_cores": self.online_cores,
                "cpu_max_khz": self.cpu_max_khz, "gpu_max_hz": self.gpu_max_hz, "emc_max_hz": self.emc_max_hz,
                "dla0_max_hz": self.dla0_max_hz, "dla1_max_hz": self.dla1_max_hz,
                "tpc_pg_mask": self.tpc_pg_mask, "fbp_pg_mask": self.fbp_pg_mask}

    def __repr__(self):
        return "ConfMode({}, {!r})".format(self.id, self.name)


class NvpmodelConf(object):
    """The modes of an nvpmodel conf (file or ``-p --verbose`` dump). ``source`` says where it came from."""

    def __init__(self, modes=None, default_id=None, source=None, unparsed=0):
        self.modes = list(modes or [])
        self.default_id = default_id
        self.source = source
        self.unparsed = unparsed

    def mode(self, mode_id):
        for mode in self.modes:
            if mode.id == mode_id:
                return mode
        return None

    def needs_reboot(self, from_id, to_id):
        """True/False when the masks predict it, None when unknown (a mode or its masks missing)."""
        if from_id == to_id:
            return False
        a, b = self.mode(from_id), self.mode(to_id)
        if a is None or b is None:
            return None
        if a.reboot_key is None and b.reboot_key is None:
            return False
        return a.reboot_key != b.reboot_key

    def to_dict(self):
        return {"source": self.source, "default_id": self.default_id, "modes": [m.to_dict() for m in self.modes]}


def _strip_comment(line):
    index = line.find("#")
    return line if index < 0 else line[:index]


def parse_conf(text, source=None):
    """Parse an nvpmodel conf file (``< PARAM ... >``, ``< POWER_MODEL ID=n NAME=x >``, ``< PM_CONFIG DEFAULT=n >``
    sections, as the conf header describes). Lenient: ``<PARAM`` without a space, inline comments,
    ``...`` elisions and unknown lines are tolerated."""
    conf = NvpmodelConf(source=source)
    current = None
    for raw in (text or "").splitlines():
        line = _strip_comment(raw).strip()
        if not line:
            continue
        match = _CONF_MODE_RE.search(line)
        if match:
            current = ConfMode(int(match.group(1)), match.group(2))
            conf.modes.append(current)
            continue
        match = _CONF_DEFAULT_RE.search(line)
        if match:
            conf.default_id = int(match.group(1))
            current = None
            continue
        if _PARAM_HEADER_RE.search(line) or line.startswith("<"):
            current = None
            continue
        if current is None:
            continue  # a PARAM definition line (NAME PATH) or text outside any section
        match = _SETTING_RE.match(line)
        if match:
            current.set(match.group(1), match.group(2), match.group(3))
        elif line.strip(". ") != "":
            conf.unparsed += 1
    return conf


def parse_parse_verbose(text, source="nvpmodel -p --verbose"):
    """Parse ``nvpmodel -p --verbose`` (jtop's ``nvpmodel_decode`` reads the same): the default, every mode and its
    settings."""
    conf = NvpmodelConf(source=source)
    current = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        match = _NVPM_MSG_RE.search(line)
        body = match.group(2).strip() if match and match.group(1) == "VERB" else line
        if not body:
            continue
        match = _VERB_DEFAULT_RE.search(body)
        if match:
            conf.default_id = int(match.group(2))
            continue
        match = _VERB_MODE_RE.search(body)
        if match:
            current = ConfMode(int(match.group(1)), match.group(2))
            conf.modes.append(current)
            continue
        if _VERB_PARAM_DEF_RE.match(body):
            current = None
            continue
        if current is None:
            continue
        match = _SETTING_RE.match(body)
        if match:
            current.set(match.group(1), match.group(2), match.group(3))
        else:
            conf.unparsed += 1
    return conf


class QueryResult(object):
    """``nvpmodel -q [--verbose]`` parsed. ``mode`` is None when no ``NV Power Mode`` + ID pair was found."""

    def __init__(self):
        self.mode = None
        self.fan_mode = None
        self.warnings = []
        self.errors = []
        self.params = []  # (param, arg, path, real_value, conf_value) from --verbose

    def to_dict(self):
        return {"mode": dict(self.mode._asdict()) if self.mode else None, "fan_mode": self.fan_mode,
                "warnings": self.warnings, "errors": self.errors,
                "params": [dict(zip(("param", "arg", "path", "real", "conf"), p)) for p in self.params]}


def parse_query(text):
    """Parse ``nvpmodel -q`` or ``-q --verbose`` output. By regex, not line position: WARN, fan and error lines
    may come before or after the mode (rbonghi/jetson_stats issue #148)."""
    result = QueryResult()
    lines = (text or "").splitlines()
    for index, raw in enumerate(lines):
        line = raw.strip()
        msg = _NVPM_MSG_RE.search(line)
        if msg and msg.group(1) == "ERROR":
            result.errors.append(msg.group(2).strip())
            continue
        if msg and msg.group(1) in ("WARN", "WARNING"):
            result.warnings.append(msg.group(2).strip())
            continue
        fan = _FAN_RE.search(line)
        if fan:
            result.fan_mode = fan.group(1)
        param = _VERB_PARAM_VALUE_RE.search(line)
        if param:
            result.params.append(param.groups())
            continue
        match = _MODE_NAME_RE.search(line)
        if match and result.mode is None:
            for following in lines[index + 1:index + 3]:
                number = _INT_LINE_RE.match(following)
                if number:
                    result.mode = PowerMode(int(number.group(1)), match.group(1))
                    break
    return result


class SwitchResult(object):
    """What ``nvpmodel -m <id>`` did.

    ``status``: "switched" (no complaint), "reboot_required" (the prompt was declined or got bad input: the mode
    did not change), "rebooting" (the prompt was accepted), "failed" (NVPM ERROR, non-root, sudo refused, non-zero
    exit without a prompt).
    """

    def __init__(self, mode_id, status, output, returncode, errors=None, warnings=None):
        self.mode_id = mode_id
        self.status = status
        self.output = output
        self.returncode = returncode
        self.errors = list(errors or [])
        self.warnings = list(warnings or [])

    @property
    def message(self):
        if self.errors:
            return self.errors[0] if len(self.errors) == 1 else "; ".join(self.errors[:3])
        lines = [line.strip() for line in self.output.splitlines() if line.strip()]
        return lines[-1] if lines else "no output"

    def to_dict(self):
        return {"mode_id": self.mode_id, "status": self.status, "returncode": self.returncode,
                "errors": self.errors, "warnings": self.warnings}


_PRIVILEGE_MARKERS = ("Please run as root", "superuser privileges", "a password is required",
                      "a terminal is required", "is not in the sudoers", "may not run sudo")


def parse_switch(text, returncode, mode_id=None):
    """Classify ``nvpmodel -m`` output (captures in tests/fixtures/jetson/nvpmodel). The exit status of a declined
    reboot is not
    documented, so the text decides first."""
    errors, warnings = [], []
    for raw in (text or "").splitlines():
        msg = _NVPM_MSG_RE.search(raw)
        if msg and msg.group(1) == "ERROR":
            errors.append(msg.group(2).strip())
        elif msg and msg.group(1) in ("WARN", "WARNING"):
            warnings.append(msg.group(2).strip())
        elif any(marker in raw for marker in _PRIVILEGE_MARKERS):
            errors.append(raw.strip())
    lowered = (text or "").lower()
    if _REBOOT_RE.search(text or "") or "reboot required" in lowered:
        status = "rebooting" if any(w.strip().lower() == "rebooting" for w in warnings) else "reboot_required"
    elif errors or returncode != 0:
        status = "failed"
        if not errors:
            lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
            errors.append(lines[-1] if lines else "exit status {}".format(returncode))
    else:
        status = "switched"
    return SwitchResult(mode_id, status, text or "", returncode, errors, warnings)


# --------------------------------------------------------------------------------------------------------------
# Running nvpmodel
# --------------------------------------------------------------------------------------------------------------
def nvpmodel_path():
    return find_tool("nvpmodel")


def query(timeout=QUERY_TIMEOUT_S, verbose=False):
    """Run ``nvpmodel -q [--verbose]`` (unprivileged) and parse it; None when nvpmodel is not installed."""
    tool = nvpmodel_path()
    if tool is None:
        return None
    args = [tool, "-q"] + (["--verbose"] if verbose else [])
    result = run_command(args, timeout=timeout)
    return parse_query(result.output)


def query_mode(timeout=QUERY_TIMEOUT_S):
    """The current power mode as ``PowerMode(id, name)``; None when nvpmodel is not on PATH or reports no mode."""
    parsed = query(timeout=timeout)
    return parsed.mode if parsed is not None else None


def current_mode(timeout=QUERY_TIMEOUT_S):
    """Like :func:`query_mode` but an :class:`EdgeAttnError` explains why no mode could be read."""
    parsed = query(timeout=timeout)
    if parsed is None:
        raise EdgeAttnError("nvpmodel is not installed (looked on PATH, /usr/sbin, /usr/bin)")
    if parsed.mode is None:
        detail = "; ".join(parsed.errors + parsed.warnings) or "no 'NV Power Mode' line"
        raise EdgeAttnError("nvpmodel -q reports no power mode ({}); set one with `sudo nvpmodel -m N`".format(detail))
    return parsed.mode


def read_modes(root="/", timeout=QUERY_TIMEOUT_S):
    """The board's modes: ``/etc/nvpmodel.conf`` parsed directly (it is the file nvpmodel itself reads), else
    ``nvpmodel -p --verbose``. None when neither is available."""
    path = resolve_rooted(root, "/etc/nvpmodel.conf")
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            conf = parse_conf(handle.read(), source=path)
        if conf.modes:
            return conf
    except OSError:
        pass
    tool = nvpmodel_path()
    if tool is None:
        return None
    result = run_command([tool, "-p", "--verbose"], timeout=timeout)
    conf = parse_parse_verbose(result.output)
    return conf if conf.modes else None


def set_mode(mode_id, accept_reboot=False, timeout=SWITCH_TIMEOUT_S):
    """Run ``sudo -n nvpmodel -m <id>`` with the reboot prompt answered through stdin: ``NO`` unless
    ``accept_reboot`` (then ``YES``, and the board reboots). Never hangs on the prompt (it reads stdin: an inherited
    stdin with output redirected waits forever)."""
    tool = nvpmodel_path()
    if tool is None:
        raise EdgeAttnError("nvpmodel is not installed (looked on PATH, /usr/sbin, /usr/bin)")
    answer = "YES\n" if accept_reboot else "NO\n"
    result = run_command(privileged([tool, "-m", str(int(mode_id))]), timeout=timeout, input_text=answer)
    return parse_switch(result.output, result.returncode, mode_id=int(mode_id))
