"""What kind of file a command was given, recognised from its first bytes before any parser reads it.

Every command that takes a file asks :func:`require` first: a file of another kind that edgeattn knows (a sweep's
results.json given to ``inspect``, an ONNX model given to ``power``, a profile given to ``report``) is refused with
one line naming what it is, what the command expected, and which command reads it, instead of reaching a parser
that was never meant for it (protobuf's JSON reader, a YAML schema check, torch.load). Files this module does not
recognise go on to the command's own parser, which has its own one-line errors: recognition only ever refuses a
file it is sure about.

Only the first :data:`HEAD_BYTES` are read (a multi-gigabyte engine costs nothing), nothing is imported beyond the
standard library, and nothing is written. Recognised: directories (a sweep directory, or any other), empty files,
ONNX models (protobuf: ``ir_version`` is field 1, written first), TensorRT engines (the plan magic ``ftrt``), zip
archives (``torch.save`` checkpoints and TorchScript archives), safetensors files, pickles, JSON documents (an
``edgeattn.*`` schema id names the record: engine manifest, sweep results, sweep resume file, bench record, ...;
trtexec's ``--exportTimes``/``--exportProfile`` lists), tegrastats logs, trtexec console logs and edgeattn board
profiles (YAML with ``schema: edgeattn.profile/1``).
"""
import collections
import json
import os
import re
import struct

#: how much of a file is read to recognise it
HEAD_BYTES = 64 * 1024

FileKind = collections.namedtuple("FileKind", "name description")

#: what each kind is, and which command reads it (the hint of the refusal)
_KINDS = {
    "missing": ("a path that does not exist", None),
    "directory": ("a directory", None),
    "sweep-directory": ("a sweep directory", "read it with `edgeattn report DIR` (or `sweep --resume -o DIR`)"),
    "empty": ("an empty file", None),
    "onnx": ("an ONNX model", "read it with `edgeattn inspect` (or `build`, `bench`, `sweep`)"),
    "engine": ("a TensorRT engine", "read it with `edgeattn bench` (or `sweep`)"),
    "zip": ("a zip archive (a torch.save checkpoint or a TorchScript archive)", "read it with `edgeattn export` (or `compare`)"),
    "safetensors": ("a safetensors checkpoint", "read it with `edgeattn export` (or `compare`)"),
    "pickle": ("a Python pickle (a legacy torch.save checkpoint)", "read it with `edgeattn export --trust-pickle` if you trust it"),
    "manifest": ("an engine manifest (the JSON beside an engine)", "pass the engine beside it (`edgeattn bench` reads its manifest)"),
    "sweep-results": ("a sweep's results.json", "give its directory to `edgeattn report`"),
    "sweep-state": ("a sweep's resume file", "continue it with `edgeattn sweep --resume -o DIR`"),
    "sweep-rows": ("a sweep's row journal (rows.jsonl)", "continue its sweep with `edgeattn sweep --resume -o DIR`"),
    "edgeattn-json": ("an edgeattn JSON record", None),
    "trtexec-export": ("a trtexec JSON export (--exportTimes/--exportProfile)", None),
    "json": ("a JSON document", None),
    "profile": ("an edgeattn board profile", "read it with `edgeattn profiles FILE` (or `sweep --profile FILE`)"),
    "tegrastats-log": ("a tegrastats log", "read it with `edgeattn power LOG`"),
    "trtexec-log": ("a trtexec console log", None),
    "text": ("a text file", None),
    "binary": ("a binary file", None),
}

#: schema families (the part of an ``edgeattn.X/N`` id before the slash) -> kind or description
_SCHEMA_FAMILIES = {
    "edgeattn.engine": "manifest",
    "edgeattn.sweep": "sweep-results",
    "edgeattn.sweep-state": "sweep-state",
    "edgeattn.sweep-rows": "sweep-rows",
    "edgeattn.profile": "profile",
}
_SCHEMA_RECORDS = {
    "edgeattn.bench": "a benchmark record (`edgeattn bench --json`)",
    "edgeattn.inspect": "an ONNX description (`edgeattn inspect --json`)",
    "edgeattn.doctor": "a doctor report (`edgeattn doctor --json`)",
    "edgeattn.ops-bench": "an operator benchmark (`edgeattn ops-bench --json`)",
    "edgeattn.models": "a model list (`edgeattn models --json`)",
    "edgeattn.compare": "a comparison report (`edgeattn compare --json`)",
}

_SCHEMA_ID = re.compile(rb'"schema"\s*:\s*"(edgeattn\.[A-Za-z0-9_.-]+/[0-9]+)"')
_YAML_SCHEMA = re.compile(rb"^schema:\s*['\"]?(edgeattn\.[A-Za-z0-9_.-]+/[0-9]+)['\"]?\s*$", re.MULTILINE)
_TEGRASTATS = re.compile(rb"(?:^|\s)RAM \d+/\d+[kMG]B|(?:^|\s)CPU \[\d+%|(?:^|\s)GR3D(?:_FREQ)? (?:\d+%|@)")
_TRTEXEC = re.compile(rb"^&&&& (?:RUNNING|PASSED|FAILED) TensorRT\.trtexec|^\[\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\] \[[IVWE]\] ",
                      re.MULTILINE)
#: the first bytes of a TensorRT plan (its magic tag, kPLAN_MAGIC_TAG); Torch-TensorRT tells serialized engines
#: by the same bytes (pytorch/TensorRT, py/torch_tensorrt/dynamo/runtime/_TorchTensorRTModule.py)
ENGINE_MAGIC = b"ftrt"
#: ONNX ModelProto field tags that follow ir_version: producer_name/version, domain, model_version, doc_string,
#: graph, opset_import, metadata_props, functions
_ONNX_NEXT_TAGS = (0x12, 0x1a, 0x22, 0x28, 0x32, 0x3a, 0x42, 0x72, 0x7a)


def kind(name, detail=None):
    description, _ = _KINDS[name]
    return FileKind(name, description if detail is None else detail)


def _schema_kind(schema):
    family = schema.split("/", 1)[0]
    if family in _SCHEMA_FAMILIES:
        name = _SCHEMA_FAMILIES[family]
        return kind(name, "{} (schema {})".format(_KINDS[name][0], schema))
    record = _SCHEMA_RECORDS.get(family, _KINDS["edgeattn-json"][0])
    return kind("edgeattn-json", "{} (schema {})".format(record, schema))


def _looks_like_onnx(head):
    """ir_version (field 1, varint) first, a small version, then one of ModelProto's next fields."""
    return len(head) >= 3 and head[0] == 0x08 and 1 <= head[1] <= 0x7f and head[2] in _ONNX_NEXT_TAGS


def _is_safetensors(head, size):
    if len(head) < 9 or head[8:9] != b"{":
        return False
    (length,) = struct.unpack("<Q", head[:8])
    return 0 < length <= size - 8


def _json_kind(head, complete):
    """Kind of a JSON document (None when the head is not JSON): a schema id names an edgeattn record."""
    text = head.lstrip()
    if not text[:1] in (b"{", b"["):
        return None
    if complete:
        try:
            data = json.loads(text.decode("utf-8"))
        except (ValueError, RecursionError):  # RecursionError: nested thousands deep, no record of ours
            return None
        if isinstance(data, dict) and isinstance(data.get("schema"), str) and data["schema"].startswith("edgeattn."):
            return _schema_kind(data["schema"])
        if isinstance(data, list) and data and isinstance(data[0], dict) and (
                "latencyMs" in data[0] or "count" in data[0] or "name" in data[0]):
            return kind("trtexec-export")
        return kind("json")
    match = _SCHEMA_ID.search(text[:4096])
    if match:
        return _schema_kind(match.group(1).decode("ascii"))
    return None


def sniff_bytes(head, size=None):
    """The :class:`FileKind` of a file whose first bytes are ``head`` (``size``: the whole file's size)."""
    size = len(head) if size is None else size
    if size == 0:
        return kind("empty")
    complete = size <= len(head)
    if head[:4] == ENGINE_MAGIC:
        return kind("engine")
    if head[:4] == b"PK\x03\x04":
        return kind("zip")
    if _is_safetensors(head, size):
        return kind("safetensors")
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return kind("pickle")
    if _looks_like_onnx(head):
        return kind("onnx")
    found = _json_kind(head, complete)
    if found is not None:
        return found
    match = _YAML_SCHEMA.search(head)
    if match:
        return _schema_kind(match.group(1).decode("ascii"))
    if _TRTEXEC.search(head):
        return kind("trtexec-log")
    if _TEGRASTATS.search(head):
        return kind("tegrastats-log")
    sample = head[:4096]
    if b"\x00" in sample:
        return kind("binary")
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start < len(sample) - 4:  # not just a character cut at the end of the sample
            return kind("binary")
    return kind("text")


def sniff(path):
    """The :class:`FileKind` of ``path`` (a file or directory); OSError when it cannot be read."""
    path = os.fspath(path)
    if os.path.isdir(path):
        if any(os.path.isfile(os.path.join(path, name)) for name in ("results.json", "sweep-state.json",
                                                                     "rows.jsonl")):
            return kind("sweep-directory")
        return kind("directory")
    if not os.path.lexists(path):
        return kind("missing")
    with open(path, "rb") as handle:
        head = handle.read(HEAD_BYTES)
        size = os.fstat(handle.fileno()).st_size
    return sniff_bytes(head, size)


#: kinds that say nothing about what a file was meant to be (a text or binary file of unknown make) or that every
#: reader already reports in its own words (missing, empty, a plain directory)
PASSED_THROUGH = ("missing", "directory", "empty", "text", "binary")


def refusal(path, found, expected, command=None):
    """The one line that refuses ``path`` (of kind ``found``) where ``expected`` was wanted."""
    hint = _KINDS.get(found.name, (None, None))[1]
    line = "{} is {}, not {}".format(path, found.description, expected)
    if command:
        line = "{} expects {}: {} is {}".format(command, expected, path, found.description)
    if hint:
        line += "; " + hint
    return line


def require(path, accepted, expected, command=None, found=None):
    """Refuse ``path`` with :class:`EdgeAttnError` when it is a kind edgeattn recognises and not one of
    ``accepted`` (kind names); returns its :class:`FileKind` (None when it cannot be read). The kinds of
    :data:`PASSED_THROUGH` are always let through to the command's own checks and parser."""
    from .errors import EdgeAttnError

    if found is None:
        try:
            found = sniff(path)
        except OSError:
            return None  # the parser reports the read error with its own wording
    if found.name in accepted or found.name in PASSED_THROUGH:
        return found
    raise EdgeAttnError(refusal(path, found, expected, command))
