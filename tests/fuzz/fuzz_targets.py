"""Every parser and loader of edgeattn as a fuzz target: what hypothesis draws for it (mutations of the real inputs
of :mod:`fuzz_corpus`) and how it is called; :func:`check` holds the properties every target must have.

The properties, for any input: the call returns, or raises the project's own error (EdgeAttnError or a subclass)
whose message is one line; what it returns serialises as strict JSON where it is a record (no NaN or infinity
reaches a results file); it reads nothing outside its input (plus the code and the profile schema it is entitled
to) and writes nothing at all (an audit hook watches every open, rename, remove and mkdir during the call). Hangs
are caught by hypothesis' deadline in the tests and by the per-example time the benchmark records.

Used by tests/fuzz/test_parsers.py (a fixed-seed sample in CI) and benchmarks/fuzz.py (10^4 examples each).
"""
import json
import os
import shutil
import string
import sys
import threading

import yaml
from hypothesis import strategies as st

from edgeattn.errors import EdgeAttnError

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(TESTS)


# ----------------------------------------------------------------------------------------------------------------
# the watch: nothing read outside the input, nothing written
# ----------------------------------------------------------------------------------------------------------------
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_CHANGING_EVENTS = ("os.remove", "os.rename", "os.mkdir", "os.rmdir", "os.truncate", "os.chmod", "os.chown",
                    "os.symlink", "os.link", "shutil.rmtree", "shutil.copyfile", "shutil.move", "os.utime")
_LISTING_EVENTS = ("os.listdir", "os.scandir", "glob.glob")


class _Watch(object):
    """One audit hook for the process (they cannot be removed); it records only while a target runs, and only in
    the thread that runs it."""

    def __init__(self):
        self.active = None  # (thread ident, allowed prefixes, violations)
        sys.addaudithook(self._hook)

    def _allowed(self, path, allowed, listing=False):
        if isinstance(path, int) or path is None:
            return True
        path = os.path.abspath(os.fsdecode(path))
        if any(path == prefix or path.startswith(prefix.rstrip(os.sep) + os.sep) for prefix in allowed):
            return True
        # the import system lists the directories of sys.path and reads code from them (lazy imports)
        return any(os.path.dirname(path) == entry or path == entry for entry in _import_dirs()) and (
            listing or path.endswith(_CODE_SUFFIXES))

    def _hook(self, event, args):
        active = self.active
        if active is None or threading.get_ident() != active[0]:
            return
        _, allowed, violations = active
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS)
            if writing and not isinstance(path, int):
                violations.append("writes {}".format(path))
            elif not self._allowed(path, allowed):
                violations.append("reads {}".format(path))
        elif event in _CHANGING_EVENTS:
            violations.append("{} {}".format(event, args[0] if args else ""))
        elif event in _LISTING_EVENTS and args and not self._allowed(
                args[0] if event != "glob.glob" else os.path.dirname(args[0]) or ".", allowed, listing=True):
            violations.append("lists {}".format(args[0]))


_WATCH = None
_CODE_SUFFIXES = (".py", ".pyc", ".so", ".pth")


_IMPORT_DIRS = []


def _import_dirs():
    if not _IMPORT_DIRS:
        _IMPORT_DIRS.extend(os.path.abspath(p or ".") for p in sys.path)
    return _IMPORT_DIRS


_CODE_DIRS = []


def _code_dirs():
    if not _CODE_DIRS:
        _CODE_DIRS.extend(_find_code_dirs())
    return _CODE_DIRS


def _find_code_dirs():
    import edgeattn

    dirs = {os.path.dirname(os.path.abspath(edgeattn.__file__)), os.path.join(REPO, "profiles"),
            os.path.join(REPO, "export", "schemas"), sys.prefix,
            sys.base_prefix, sys.exec_prefix, "/proc/self", "/dev/urandom"}
    dirs.update(p for p in sys.path if p and os.path.isdir(p) and "site-packages" in p)
    return sorted(dirs)


class Violation(AssertionError):
    pass


def check(target, value, workdir):
    """Run ``target`` on ``value`` (its input files go under ``workdir``) and assert the properties."""
    global _WATCH
    if _WATCH is None:
        _WATCH = _Watch()
    inputs = os.path.join(workdir, "input")
    os.makedirs(inputs, exist_ok=True)
    for name in os.listdir(inputs):
        path = os.path.join(inputs, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    prepared = target.prepare(value, inputs) if target.prepare else value
    allowed = [inputs] + _code_dirs()
    violations = []
    before = sorted(os.listdir(inputs))
    # A target's first call may import modules lazily; on a checkout installed with --no-compile the import system
    # would then write their bytecode under edgeattn/, which is the interpreter's cache, not the parser writing.
    write_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    _WATCH.active = (threading.get_ident(), allowed, violations)
    try:
        result = target.run(prepared)
    except EdgeAttnError as error:
        message = error.format_message()
        if not message.strip() or "\n" in message:
            raise Violation("{}: the error is not one line: {!r}".format(target.name, message))
        result = None
    finally:
        _WATCH.active = None
        sys.dont_write_bytecode = write_bytecode
    if violations:
        raise Violation("{}: {}".format(target.name, "; ".join(violations[:3])))
    if sorted(os.listdir(inputs)) != before:
        raise Violation("{}: files appeared beside the input: {}".format(target.name, sorted(os.listdir(inputs))))
    if result is not None and target.strict_json:
        try:
            json.dumps(result, allow_nan=False, default=_jsonable)
        except ValueError as error:
            raise Violation("{}: the result holds a number JSON cannot carry ({})".format(target.name, error))
    return result


def _jsonable(value):
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


# ----------------------------------------------------------------------------------------------------------------
# mutations
# ----------------------------------------------------------------------------------------------------------------
#: numbers that break naive parsers: empty, signs, huge (Python 3.11 refuses int() of > 4300 digits), non-finite
#: (C++'s tokens, and JSON's as Python's reader takes them: NaN, Infinity, a float beyond range)
ODD_NUMBERS = ["", "-", "-1", "0", "-0", "00", "1.", ".5", "1.5.3", "1e999", "-1e999", "nan", "inf", "NaN",
               "Infinity", "-Infinity", "1e309", "4294967296", "18446744073709551616", "9" * 400, "9" * 5000, "0x10",
               "1_000", "١٢٣"]
#: nesting past any recursion limit (json raises RecursionError, not ValueError)
DEEP = ["[" * 20000, '{"a":' * 20000]
#: a word of 20000 characters: a regex that backtracks over a word from each of its starts is quadratic on it
LONG_WORD = "x9" * 10000
_ODD_TEXT = st.sampled_from(ODD_NUMBERS) | st.text(max_size=8) | st.text(
    alphabet=string.printable, max_size=16) | st.sampled_from(DEEP + [LONG_WORD])


@st.composite
def mutated_text(draw, texts, max_mutations=4):
    """A real text (one of ``texts``) with up to ``max_mutations`` edits at line, token or character level."""
    text = draw(st.sampled_from(texts))
    for _ in range(draw(st.integers(0, max_mutations))):
        lines = text.split("\n")
        action = draw(st.sampled_from(["cut", "line-drop", "line-dup", "line-swap", "token", "number", "insert",
                                       "char"]))
        if action == "cut":
            text = text[:draw(st.integers(0, len(text)))]
            continue
        if action == "insert":
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(_ODD_TEXT) + text[at:]
            continue
        if action == "char" and text:
            at = draw(st.integers(0, len(text) - 1))
            text = text[:at] + draw(st.characters()) + text[at + 1:]
            continue
        index = draw(st.integers(0, len(lines) - 1))
        if action == "line-drop":
            del lines[index]
        elif action == "line-dup":
            lines.insert(index, lines[index])
        elif action == "line-swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[index], lines[other] = lines[other], lines[index]
        elif action == "number":
            tokens = lines[index].split(" ")
            spots = [i for i, t in enumerate(tokens) if any(c.isdigit() for c in t)]
            if spots:
                i = draw(st.sampled_from(spots))
                digits = [j for j, c in enumerate(tokens[i]) if c.isdigit()]
                start = draw(st.sampled_from(digits))
                end = start
                while end < len(tokens[i]) and tokens[i][end].isdigit():
                    end += 1
                tokens[i] = tokens[i][:start] + draw(st.sampled_from(ODD_NUMBERS)) + tokens[i][end:]
                lines[index] = " ".join(tokens)
        else:  # token: drop, cut or replace one
            tokens = lines[index].split(" ")
            i = draw(st.integers(0, max(0, len(tokens) - 1)))
            if tokens:
                how = draw(st.sampled_from(["drop", "cut", "replace"]))
                if how == "drop":
                    del tokens[i]
                elif how == "cut":
                    tokens[i] = tokens[i][:draw(st.integers(0, len(tokens[i])))]
                else:
                    tokens[i] = draw(_ODD_TEXT)
            lines[index] = " ".join(tokens)
        text = "\n".join(lines)
    return text


@st.composite
def mutated_bytes(draw, blobs, max_mutations=3):
    """A real file's bytes, truncated, with bits flipped, bytes inserted or ranges overwritten, or nesting thousands
    deep inserted."""
    data = bytearray(draw(st.sampled_from(blobs)))
    for _ in range(draw(st.integers(1, max_mutations))):
        action = draw(st.sampled_from(["truncate", "flip", "insert", "overwrite", "flip-header", "nest"]))
        if action == "truncate":
            del data[draw(st.integers(0, len(data))):]
        elif action in ("flip", "flip-header") and data:
            limit = min(len(data), 64) if action == "flip-header" else len(data)
            at = draw(st.integers(0, limit - 1))
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif action == "insert":
            at = draw(st.integers(0, len(data)))
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif action == "nest":
            at = draw(st.integers(0, len(data)))
            data[at:at] = draw(st.sampled_from(DEEP)).encode()
        elif action == "overwrite" and data:
            at = draw(st.integers(0, len(data) - 1))
            chunk = draw(st.binary(min_size=1, max_size=16))
            data[at:at + len(chunk)] = chunk
    return bytes(data)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12) | st.sampled_from(["", "10.3.0", "8.7", "fp16", "x" * 300, "../../etc/passwd"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=8)


def _paths(node, prefix=()):
    """Every path into a JSON tree (the root included)."""
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, prefix + (index,))


def _set(node, path, value):
    if not path:
        return value
    parent = node
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return node


def _delete(node, path):
    parent = node
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    return node


@st.composite
def mutated_json(draw, documents, max_mutations=3):
    """A real JSON document with values replaced by others of any type, keys deleted or entries added."""
    data = json.loads(json.dumps(draw(st.sampled_from(documents))))
    for _ in range(draw(st.integers(1, max_mutations))):
        paths = list(_paths(data))
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "replace", "delete", "add", "retype"]))
        if action == "replace" or (action == "delete" and not path):
            data = _set(data, path, draw(JSON_VALUES))
        elif action == "delete":
            data = _delete(data, path)
        elif action == "retype":
            target = data
            for key in path:
                target = target[key]
            data = _set(data, path, [target] if not isinstance(target, list) else {"0": target})
        else:
            target = data
            for key in path:
                target = target[key]
            if isinstance(target, dict):
                target[draw(st.text(max_size=8))] = draw(JSON_VALUES)
            elif isinstance(target, list):
                target.insert(draw(st.integers(0, len(target))), draw(JSON_VALUES))
    return data


def _json_documents(texts):
    documents = []
    for text in texts:
        try:
            documents.append(json.loads(text))
        except ValueError:
            continue
    return documents


def _dump_json(data):
    return json.dumps(data, indent=1, allow_nan=True).encode()


# ----------------------------------------------------------------------------------------------------------------
# targets
# ----------------------------------------------------------------------------------------------------------------
class Target(object):
    """``strategy``: what is drawn; ``prepare(value, inputs_dir)``: turn it into the call's argument (write the
    input file); ``run(argument)``: call the parser/loader and return something JSON-able (or None)."""

    def __init__(self, name, strategy, run, prepare=None, strict_json=True, needs=None):
        self.name = name
        self.strategy = strategy
        self.run = run
        self.prepare = prepare
        self.strict_json = strict_json
        self.needs = needs


def _write(name):
    def prepare(value, inputs):
        path = os.path.join(inputs, name)
        with open(path, "wb") as handle:
            handle.write(value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass"))
        return path
    return prepare


def _file_strategy(corpus, kind, structured=None):
    """Mutated bytes of the real files of ``kind``, or ``structured`` (a strategy of bytes) as often."""
    blobs = []
    for path in corpus.files.get(kind, []):
        with open(path, "rb") as handle:
            blobs.append(handle.read())
    strategy = mutated_bytes(blobs)
    return strategy if structured is None else st.one_of(strategy, structured)


def _tegrastats_line(line):
    from edgeattn.jetson import tegrastats

    sample = tegrastats.parse_line(line)
    if sample is None:
        return None
    return [sample.to_dict(), sample.gpu_temp_c, list(sample.hottest_c), sample.time_unix, sample.rails_mw,
            sample.gpu_util_pct, sample.gpu_freq_mhz]


def _nvpmodel_query(text):
    from edgeattn.jetson import nvpmodel

    return nvpmodel.parse_query(text).to_dict()


def _nvpmodel_conf(text):
    from edgeattn.jetson import nvpmodel

    conf = nvpmodel.parse_conf(text)
    ids = [m.id for m in conf.modes]
    return [conf.to_dict(), [conf.needs_reboot(a, b) for a in ids[:4] for b in ids[:4]]]


def _nvpmodel_verbose(text):
    from edgeattn.jetson import nvpmodel

    return nvpmodel.parse_parse_verbose(text).to_dict()


def _nvpmodel_switch(value):
    from edgeattn.jetson import nvpmodel

    text, returncode = value
    result = nvpmodel.parse_switch(text, returncode, mode_id=0)
    return [result.to_dict(), result.message]


def _clocks_show(text):
    from edgeattn.jetson import clocks

    return clocks.parse_show(text)


def _board_texts(text):
    from edgeattn.jetson import board

    compatible = board.parse_compatible(text.replace(",", "\x00"))
    release = board.parse_nv_tegra_release(text)
    return [board.parse_model(text), compatible, release, board.jetpack_for_l4t(release),
            board.module_id_from(compatible, text.split("\n")[0])]


def _power_lines(text):
    from edgeattn.jetson import power

    return power.summarise_log_lines(text.split("\n"))


def _power_log(path):
    from edgeattn.jetson import power

    return power.summarise_log(path)


def _trtexec_log(value):
    from edgeattn.trtexec import log, version

    text, returncode = value
    banners = version.parse_banners(text)
    return [log.log_entries(text), log.parse_device(text), log.error_lines(text),
            log.explain_failure(text, returncode, version="10.3.0", model_path="m.onnx"),
            [dict(b, version=str(b["version"])) for b in banners], str(version.version_from_output(text))]


def _trtexec_times(value):
    from edgeattn.trtexec import exports
    from edgeattn.trtexec.version import TrtVersion

    text, version_text, warmup_ms = value
    records = exports.parse_times(text)
    timed = exports.timed_iterations(records, TrtVersion(version_text), warmup_ms)
    return exports.trace_samples(timed)


def _trtexec_profile(text):
    from edgeattn.trtexec import exports

    return exports.parse_profile(text)


def _trtexec_layer_info(text):
    from edgeattn.tensorrt.layers import describe_layers
    from edgeattn.trtexec.exports import parse_layer_info

    return describe_layers(parse_layer_info(text), "layers.json")


def _trtexec_version(value):
    from edgeattn.trtexec.version import TrtVersion, decode_version_number

    text, number = value
    try:
        parsed = str(TrtVersion(text))
    except ValueError:
        parsed = None  # the documented refusal of a string that is not a version
    return [parsed, str(decode_version_number(number))]


def _manifest(path):
    from edgeattn.tensorrt import manifest as manifest_module

    engine = path[:-len(".json")]
    manifest = manifest_module.read_manifest(engine)
    if manifest is None:
        return None
    problems = [manifest_module.compatibility_problem(manifest, version, device)
                for version in ("10.3.0", "8.6.2", None)
                for device in (None, {"name": "Orin", "compute_capability": "8.7"})]
    shapes = [manifest_module.check_batch(manifest, batch) for batch in (1, 4)]
    manifest_module.preflight(engine, manifest, "10.3.0", None)
    return [problems, shapes]


def _state(path):
    from edgeattn.sweep import runner
    from edgeattn.sweep import state as state_io

    directory = os.path.dirname(path)
    return runner._verified_resume_state(state_io.load_state(directory), directory)


def _results(path):
    from edgeattn.report import summary_markdown
    from edgeattn.sweep.results import RESUME_FIELDS, ROW_FIELDS, csv_columns, flatten_row, load_results, row_key, \
        validate_results

    directory = os.path.dirname(path)
    data = load_results(directory)
    rows = validate_results(data, path, ROW_FIELDS + RESUME_FIELDS)["rows"]  # what --resume takes up
    flat = [flatten_row(row, data.get("sweep") or {}) for row in rows]
    return [sorted(row_key(row) for row in rows), csv_columns(flat), summary_markdown(directory)]


def _journal(path):
    from edgeattn.sweep.results import ResultStore, csv_columns, flatten_row, resumable_row_problem, row_key

    store = ResultStore(os.path.dirname(path))
    rows = list(store.journal.rows(key=row_key, problem=resumable_row_problem))  # what --resume reads
    return [[row_key(row) for row in rows], csv_columns(flatten_row(row, {}) for row in rows)]


@st.composite
def journal_lines(draw, rows, header):
    """A row journal: the header line (or not), mutated result rows one per line, the last one maybe torn."""
    lines = [header] if draw(st.booleans()) or not rows else []
    lines += [json.dumps(row).encode("utf-8") for row in draw(st.lists(mutated_json(rows), max_size=6))]
    data = b"\n".join(lines) + b"\n"
    cut = draw(st.integers(0, 40))
    return data[:len(data) - cut] if cut < len(data) else data


def _profile(path):
    from edgeattn import profiles

    profile = profiles.load_profile(path)
    table = profile.best_table()
    return [profile.to_dict(cpu_count=4), table.to_dict() if table else None, profile.software_for("36.4.3"),
            profile.host_thread_budgets(4), profiles.cross_check(table, table.modes) if table else None]


def _ina3221(tree):
    from edgeattn.jetson import ina3221

    rails = ina3221.discover_rails(tree)
    return [[r.to_dict() for r in rails], ina3221.read_rails(rails)]


def _checkpoint_header(path):
    from edgeattn.models import checkpoint

    kind = checkpoint._sniff(path)
    names = checkpoint._pickled_globals(path, kind)
    return [checkpoint._is_safetensors(path), kind, names]


def _checkpoint_load(path):
    from edgeattn.models import checkpoint

    checkpoint.load_checkpoint(path)
    return None


def _onnx(path):
    from edgeattn.export.inspection import describe_onnx

    return describe_onnx(path)


def _filekind(data):
    from edgeattn import filekind

    return list(filekind.sniff_bytes(data[:filekind.HEAD_BYTES], len(data)))


def _ina3221_prepare(value, inputs):
    """Write a fake sysfs tree (hwmon and IIO devices) with the drawn file contents; returns its root."""
    root = os.path.join(inputs, "root")
    for relative, content in value.items():
        path = os.path.join(root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(content.encode("utf-8", "surrogatepass"))
    return root


_SYSFS_VALUE = st.sampled_from(["VDD_IN", "VDD_CPU_GPU_CV", "NC", "", "sum of shunt voltages", "5000", "1234",
                                "0", "-1"]) | st.sampled_from(ODD_NUMBERS) | st.text(max_size=10)


@st.composite
def sysfs_trees(draw):
    """File contents of one or two INA3221 devices (JetPack 5+ hwmon or JetPack 4 IIO layout)."""
    files = {}
    for device in ("1-0040", "1-0041")[:draw(st.integers(1, 2))]:
        base = "sys/bus/i2c/devices/{}".format(device)
        files[base + "/name"] = draw(st.sampled_from(["ina3221", "ina3221x", "ina3221\n", "other"]))
        if draw(st.booleans()):
            for channel in range(1, draw(st.integers(1, 3)) + 1):
                for name in ("in{}_label", "in{}_input", "curr{}_input"):
                    files[base + "/hwmon/hwmon3/" + name.format(channel)] = draw(_SYSFS_VALUE)
        else:
            for channel in range(0, draw(st.integers(1, 3))):
                for name in ("rail_name_{}", "in_power{}_input", "in_voltage{}_input", "in_current{}_input"):
                    if draw(st.integers(0, 4)):
                        files[base + "/iio:device0/" + name.format(channel)] = draw(_SYSFS_VALUE)
    return files


def _yaml_documents(corpus):
    return [yaml.safe_load(text) for text in corpus.profiles.values()]


def targets(corpus):
    """name -> :class:`Target` for every parser and loader."""
    lines = corpus.tegrastats_lines
    trt_versions = st.sampled_from(["8.0.3", "8.2.1", "8.4.1", "8.5.2", "8.6.2", "10.3.0", "10.16.2", "11.1.0"])
    returncodes = st.sampled_from([0, 1, 2, -6, -9, -11, -99, 255])
    json_bytes = lambda docs: mutated_json(docs).map(_dump_json)  # noqa: E731
    profile_yaml = mutated_json(_yaml_documents(corpus)).map(
        lambda d: yaml.safe_dump(d, allow_unicode=True).encode("utf-8", "surrogatepass"))
    profile_text = mutated_text(list(corpus.profiles.values())).map(lambda t: t.encode("utf-8", "surrogatepass"))
    all_blobs = []
    for paths in corpus.files.values():
        for path in paths:
            with open(path, "rb") as handle:
                all_blobs.append(handle.read()[:200000])
    found = [
        Target("tegrastats.line", mutated_text(lines, 6) | st.text(max_size=200), _tegrastats_line),
        Target("tegrastats.log", _file_strategy(corpus, "tegrastats-log",
                                                mutated_text(corpus.tegrastats_logs).map(str.encode)),
               _power_log, prepare=_write("tegrastats.log")),
        Target("power.lines", mutated_text(corpus.tegrastats_logs), _power_lines),
        Target("nvpmodel.query", mutated_text(corpus.nvpmodel_queries), _nvpmodel_query),
        Target("nvpmodel.conf", mutated_text(corpus.nvpmodel_confs), _nvpmodel_conf),
        Target("nvpmodel.parse_verbose", mutated_text(corpus.nvpmodel_verbose), _nvpmodel_verbose),
        Target("nvpmodel.switch", st.tuples(mutated_text(corpus.nvpmodel_switches), returncodes), _nvpmodel_switch),
        Target("jetson_clocks.show", mutated_text(corpus.clocks), _clocks_show),
        Target("board.identity", mutated_text(corpus.ina3221_listings + [
            "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, DATE: Wed Jan 8",
            "nvidia,p3737-0000+p3701-0005,nvidia,p3701-0005,nvidia,tegra234"]), _board_texts),
        Target("ina3221.sysfs", sysfs_trees(), _ina3221, prepare=_ina3221_prepare),
        Target("trtexec.log", st.tuples(mutated_text(corpus.trtexec_logs), returncodes), _trtexec_log),
        Target("trtexec.times", st.tuples(mutated_text(corpus.trtexec_times) | json_bytes(
            _json_documents(corpus.trtexec_times)).map(bytes.decode),
            trt_versions, st.sampled_from([0.0, 2.0, 200.0, -1.0])), _trtexec_times),
        Target("trtexec.profile", mutated_text(corpus.trtexec_profiles), _trtexec_profile),
        Target("trtexec.layer_info", mutated_text(corpus.trtexec_layer_infos) | mutated_json(
            _json_documents(corpus.trtexec_layer_infos)).map(_dump_json).map(bytes.decode), _trtexec_layer_info),
        Target("trtexec.version", st.tuples(st.sampled_from(["8.6.2", "10.3.0.26", "8.4.12"]) | st.text(max_size=12)
                                            | mutated_text(["10.16.2", "8.2.1.8"]),
                                            st.integers(0, 10 ** 7)), _trtexec_version),
        Target("engine.manifest", _file_strategy(corpus, "manifest", json_bytes([corpus.manifest])), _manifest,
               prepare=_write("model.engine.json")),
        Target("sweep.state", _file_strategy(corpus, "sweep-state", json_bytes([corpus.state])), _state,
               prepare=_write("sweep-state.json")),
        Target("sweep.results", _file_strategy(corpus, "sweep-results", json_bytes([corpus.results])), _results,
               prepare=_write("results.json")),
        Target("sweep.rows", _file_strategy(corpus, "sweep-rows", journal_lines(
            corpus.results["rows"], json.dumps({"schema": "edgeattn.sweep-rows/1"}).encode("utf-8"))), _journal,
               prepare=_write("rows.jsonl")),
        Target("profiles.yaml", _file_strategy(corpus, "profile", st.one_of(profile_yaml, profile_text)), _profile,
               prepare=_write("board.yaml")),
        Target("checkpoint.header", _file_strategy(corpus, "checkpoint"), _checkpoint_header,
               prepare=_write("model.pt"), needs="torch"),  # edgeattn.models imports torch
        Target("checkpoint.load", _file_strategy(corpus, "checkpoint"), _checkpoint_load,
               prepare=_write("model.pt"), needs="torch"),
        Target("onnx.inspect", _file_strategy(corpus, "onnx"), _onnx, prepare=_write("model.onnx"), needs="onnx"),
        Target("filekind.sniff", mutated_bytes(all_blobs), _filekind),
    ]
    return {target.name: target for target in found}


def available(target):
    if not target.needs:
        return True
    try:
        __import__(target.needs)
    except ImportError:
        return False
    return True
