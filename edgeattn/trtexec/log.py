"""Reading trtexec's console log: device block, versions, and what went wrong.

Formats: ``samples/common/{sampleReporting,sampleDevice}.cpp`` and ``logging.h`` of each NVIDIA/TensorRT release
branch; library and ONNX-parser messages as real logs in GitHub issues show them (tests/fixtures/trtexec).

Statistics never come from here (the ``--exportTimes`` JSON has them); the log is read only for facts the exports
do not carry - the device, the TensorRT version - and to turn a failure into one actionable line.
"""
import re
import signal

# "[MM/DD/YYYY-HH:MM:SS] [X] text"; the timestamp is missing in some pasted logs, and TensorRT's Python logger
# writes "[TRT] [X] text" - both are read too.
_LOG_LINE = re.compile(
    r"^(?:\[(?P<time>\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d)\] )?(?:\[TRT\] )?\[(?P<level>[IVWEF])\] (?P<text>.*)$")
_ERROR_RECORD = re.compile(r"^Error\[(?P<code>\d+)\]: (?P<text>.*)$")
#: a count trtexec prints (SMs, MiB): ASCII digits, not thousands of them (Python 3.11's int() refuses those)
_COUNT_RE = re.compile(r"^\d{1,12}$", re.ASCII)
_TRT_PREFIX = re.compile(r"^\[TRT\] (?:\d+: )?")


def log_entries(text):
    """``(level, message)`` per line; lines without the ``[X]`` severity prefix (``&&&&``, help text, the parser's
    raw ``Could not open file``) come back with level None."""
    entries = []
    for line in text.splitlines():
        match = _LOG_LINE.match(line)
        if match:
            entries.append((match.group("level"), match.group("text")))
        elif line.strip():
            entries.append((None, line.rstrip()))
    return entries


def parse_device(text):
    """The ``=== Device Information ===`` block: ``{"name", "compute_capability", "sms", "memory_mib", "uuid"}``
    (keys absent from the block are None), or None if the log has no device block."""
    device = {"name": None, "compute_capability": None, "sms": None, "memory_mib": None, "uuid": None}
    found = False
    for level, message in log_entries(text):
        if level != "I":
            continue
        key, sep, value = message.partition(": ")
        if not sep:
            continue
        value = value.strip()
        if key == "Selected Device":
            device["name"] = value
            found = True
        elif key == "Compute Capability":
            device["compute_capability"] = value
        elif key == "SMs" and _COUNT_RE.match(value):
            device["sms"] = int(value)
        elif key == "Device Global Memory" and value.endswith(" MiB"):
            device["memory_mib"] = int(value[:-4]) if _COUNT_RE.match(value[:-4]) else None
        elif key == "Selected Device UUID":
            device["uuid"] = value
    return device if found else None


def error_lines(text):
    """The messages of ``[E]``/``[F]`` lines, library prefixes (``[TRT] N:``) removed, in order."""
    return [_TRT_PREFIX.sub("", message) for level, message in log_entries(text) if level in ("E", "F")]


def _first(pattern, text, flags=0):
    match = re.search(pattern, text, flags)
    return match


def _library_detail(text):
    """The most specific library error: the text of the first ``Error[N]: ...`` record, inner message only."""
    for message in error_lines(text):
        match = _ERROR_RECORD.match(message)
        if match:
            detail = match.group("text")
            inner = re.search(r"Error Code \d+: [^(]*\((.*)\)\s*$", detail)
            return (inner.group(1) if inner else detail).strip()
    return None


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except (ValueError, AttributeError):
        return "signal {}".format(number)


def explain_failure(output, returncode, version=None, model_path=None, plugin_library=None, creators=None):
    """One line saying why a trtexec run failed, and what to do. ``output`` is stdout and stderr together."""
    who = "trtexec {}".format(version) if version is not None else "trtexec"
    if returncode is not None and returncode < 0:
        cuda = _first(r"Cuda failure: ?(.*)", output)
        detail = cuda.group(0).strip() if cuda else (error_lines(output) or ["no error message"])[-1]
        return "{} was killed by {} ({})".format(who, _signal_name(-returncode), detail)

    unknown = _first(r"Unknown option: (\S+)", output)
    if unknown:
        return "{} does not accept the option {} (a flag of another TensorRT version); " \
               "please report this as an edgeattn bug".format(who, unknown.group(1))

    if re.search(r"Cannot find any available devices|Cannot find device ID|no CUDA-capable device", output):
        return "{} found no CUDA device; TensorRT needs a GPU (`edgeattn doctor` shows what this machine has)" \
            .format(who)

    if "Plugin not found" in output or "could not find plugin" in output:
        op = version_text = namespace = None
        match = _first(r"getPluginCreator could not find plugin:? (\S+) version:? (\S+)", output)
        if match:
            op, version_text = match.group(1), match.group(2)
        match = _first(r"Searching for plugin: ([^,\s]+), plugin_version: ([^,\s]*), plugin_namespace: ?(\S*)",
                       output)
        if match:
            op = op or match.group(1)
            version_text = version_text or match.group(2) or None
            namespace = match.group(3)
        if op is None:
            match = _first(r"While parsing node number \d+ \[([^\s\]]+) ->", output)
            op = match.group(1) if match else None
        what = "op {}".format(op) if op else "a custom op"
        if version_text or namespace is not None:
            what += " (version {}, namespace '{}')".format(version_text or "1", namespace or "")
        loaded = "the plugin library {} was loaded".format(plugin_library) if plugin_library \
            else "no plugin library was loaded"
        registered = ""
        if creators:
            registered = "; that library provides {}".format(", ".join(
                "{}::{} v{}".format(ns, name, ver) for name, ver, ns in creators))
        return "TensorRT ({}) found no plugin for {}: {}{}; build the plugin library for this TensorRT or pass " \
               "--plugin-lib LIB".format(who, what, loaded, registered)

    if "IPluginCreator not found" in output:
        return "{} cannot deserialize {}: it contains a plugin whose creator is not registered; pass the plugin " \
               "library with --plugin-lib LIB".format(who, model_path or "the engine")

    if re.search(r"Error (?:opening|loading) engine file", output):
        return "{} cannot read the engine file {}".format(who, model_path or "")

    if re.search(r"Engine deserialization failed|not compatible with this version of TensorRT|"
                 r"Version tag does not match|incompatible device|kPLAN_MAGIC_TAG|Got invalid engine", output):
        detail = _library_detail(output) or "deserialization failed"
        return "{} cannot load the engine {}: {}; rebuild it on this machine with `edgeattn build`".format(
            who, model_path or "", detail)

    missing_file = _first(r"(?:Could not open file|Input is not a regular file:?) (.+)", output)
    if missing_file:
        return "{} cannot open the ONNX file {}".format(who, missing_file.group(1).strip())

    bad_name = _first(r"Cannot find input tensor with name \"([^\"]*)\"", output)
    if bad_name:
        return "{}: {!r} is not an input of the engine (check the names given to --shapes)".format(
            who, bad_name.group(1))

    if re.search(r"satisfyProfile|exceed min ~ max range|does not satisfy any optimization profile", output):
        detail = _library_detail(output) or "shape outside the optimization profile"
        return "{}: the requested input shape is outside the engine's optimization profile ({}); rebuild with " \
               "`edgeattn build --shapes NAME:MIN,OPT,MAX` covering it".format(who, detail)

    if "Failed to parse onnx file" in output or "Parsing model failed" in output:
        lines = [line for line in error_lines(output)
                 if line not in ("Failed to parse onnx file", "Parsing model failed")]
        return "TensorRT ({}) could not parse {}: {}".format(who, model_path or "the ONNX file",
                                                          lines[0] if lines else "see the trtexec log")

    errors = [line for line in error_lines(output) if line]
    if errors:
        detail = _library_detail(output) or errors[0]
        return "{} failed (exit status {}): {}".format(who, returncode, detail)
    lines = [line for _level, line in log_entries(output) if not line.startswith("&&&&")]
    return "{} failed (exit status {}): {}".format(who, returncode, lines[-1] if lines else "no output")
