"""Board profiles (``profiles/*.yaml``): loading, validation, matching a detected board, cross-checking modes.

Why one module: loading, the JSON-Schema subset it interprets, the rules a schema cannot say and matching a
detected board all work on the one profile structure ``profiles/schema.yaml`` defines; apart, each would re-read
that structure.

A profile describes one Jetson module (or ``host-cpu``): identity strings, compute capability, one or more
nvpmodel mode tables, the JetPack -> TensorRT/CUDA table. Profiles are a *cross-check*: a sweep reads the real
mode IDs from the board (``/etc/nvpmodel.conf``) and only warns when they disagree with the profile.

The schema lives in ``profiles/schema.yaml`` (a subset of JSON Schema interpreted here, PyYAML only); rules a
schema cannot express are checked by :func:`validate_profile`. Every problem is an :class:`EdgeAttnError` naming
the file and the offending field.
"""
import os
import re

import yaml

from . import filekind
from ._paths import profile_dir
from .errors import EdgeAttnError

SCHEMA_FILE = "schema.yaml"
PROFILE_SCHEMA_ID = "edgeattn.profile/1"
HOST_CPU = "host-cpu"

_TYPE_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


# --------------------------------------------------------------------------------------------------------------
# A small JSON-Schema subset validator (type, required, properties, additionalProperties, items, enum, minimum,
# pattern, minItems, minProperties, $ref into $defs).
# --------------------------------------------------------------------------------------------------------------
def _schema_errors(value, schema, defs, where):
    if "$ref" in schema:
        ref = schema["$ref"]
        if ref not in defs:
            raise EdgeAttnError("profile schema: unknown $ref {!r}".format(ref))
        return _schema_errors(value, defs[ref], defs, where)
    errors = []
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else list(types)
        if not any(_TYPE_CHECKS[t](value) for t in types):
            errors.append("{}: expected {}, got {!r}".format(where, " or ".join(types), value))
            return errors
    if value is None:
        return errors
    if "enum" in schema and value not in schema["enum"]:
        errors.append("{}: {!r} is not one of {}".format(where, value, ", ".join(map(str, schema["enum"]))))
    if "minimum" in schema and _TYPE_CHECKS["number"](value) and value < schema["minimum"]:
        errors.append("{}: {!r} is below the minimum {}".format(where, value, schema["minimum"]))
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        errors.append("{}: {!r} does not match {}".format(where, value, schema["pattern"]))
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append("{}: needs at least {} item(s)".format(where, schema["minItems"]))
        if "items" in schema:
            for index, item in enumerate(value):
                errors.extend(_schema_errors(item, schema["items"], defs, "{}[{}]".format(where, index)))
    if isinstance(value, dict):
        if len(value) < schema.get("minProperties", 0):
            errors.append("{}: needs at least {} entr(y/ies)".format(where, schema["minProperties"]))
        for key in schema.get("required", ()):
            if key not in value:
                errors.append("{}: missing required field {!r}".format(where, key))
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            child = "{}.{}".format(where, key) if where else str(key)
            if key in properties:
                errors.extend(_schema_errors(item, properties[key], defs, child))
            elif extra is False:
                errors.append("{}: unknown field {!r}".format(where or "profile", key))
            elif isinstance(extra, dict):
                errors.extend(_schema_errors(item, extra, defs, child))
    return errors


_SCHEMA_CACHE = {}


def load_schema(directory=None):
    """The profile schema (``profiles/schema.yaml``) as a dict."""
    path = os.path.join(directory or profile_dir(), SCHEMA_FILE)
    if path not in _SCHEMA_CACHE:
        try:
            with open(path, "r", encoding="utf-8") as handle:
                _SCHEMA_CACHE[path] = yaml.safe_load(handle)
        except (OSError, yaml.YAMLError) as error:
            raise EdgeAttnError("cannot read the profile schema {}: {}".format(path, error))
    return _SCHEMA_CACHE[path]


# --------------------------------------------------------------------------------------------------------------
# Profile objects
# --------------------------------------------------------------------------------------------------------------
class ModeSpec(object):
    """One power mode of a profile's mode table (caps in the conf's units; -1 = no cap, None = unknown)."""

    FIELDS = ("id", "name", "budget_w", "online_cores", "cpu_max_khz", "gpu_max_hz", "emc_max_hz", "dla0_max_hz",
              "dla1_max_hz", "tpc_pg_mask", "fbp_pg_mask", "reboot_group", "observed", "unverified", "note")

    def __init__(self, data):
        for field in self.FIELDS:
            setattr(self, field, data.get(field))
        self.unverified = bool(self.unverified)
        self.observed = dict(self.observed or {})

    def to_dict(self):
        return {field: getattr(self, field) for field in self.FIELDS}

    def __repr__(self):
        return "ModeSpec({}, {!r})".format(self.id, self.name)


class ModeTable(object):
    def __init__(self, key, data):
        self.key = key
        self.conf_file = data["conf_file"]
        self.applies_to = data.get("applies_to", "")
        self.default_mode = data["default_mode"]
        self.modes = [ModeSpec(m) for m in data["modes"]]

    def mode(self, mode_id):
        for mode in self.modes:
            if mode.id == mode_id:
                return mode
        return None

    def to_dict(self):
        return {"conf_file": self.conf_file, "applies_to": self.applies_to, "default_mode": self.default_mode,
                "modes": [m.to_dict() for m in self.modes]}


class Profile(object):
    """A validated board profile. ``raw`` keeps the YAML data as loaded."""

    def __init__(self, data, path):
        self.path = path
        self.raw = data
        self.name = data["name"]
        self.kind = data["kind"]
        self.display_name = data["display_name"]
        self.description = data.get("description", "")
        self.soc = data.get("soc")
        self.compute_capability = data.get("compute_capability")
        self.module_ids = list(data.get("module_ids", []))
        self.compatible = list(data.get("compatible", []))
        self.model_strings = list(data.get("model_strings", []))
        self.has_dla = data.get("has_dla")
        self.power = dict(data.get("power") or {"total_rail": None, "rails": []})
        self.mode_tables = {key: ModeTable(key, table) for key, table in (data.get("mode_tables") or {}).items()}
        self.software = list(data.get("software", []))
        self.thread_budgets = data.get("thread_budgets")

    @property
    def is_jetson(self):
        return self.kind == "jetson"

    def table_for_conf(self, conf_name):
        """The mode table whose conf file name equals ``conf_name`` (the target of /etc/nvpmodel.conf), or None."""
        if not conf_name:
            return None
        base = os.path.basename(conf_name)
        for table in self.mode_tables.values():
            if table.conf_file == base:
                return table
        return None

    def best_table(self, board_modes=None, conf_name=None):
        """Pick the mode table that applies on the board: by conf file name, else by most matching (id, name)
        pairs, else the first table (``standard``/``super`` order of the file)."""
        table = self.table_for_conf(conf_name)
        if table is not None:
            return table
        tables = list(self.mode_tables.values())
        if not tables:
            return None
        if board_modes:
            pairs = {(m.id, m.name) for m in board_modes}

            def score(candidate):
                return len(pairs & {(m.id, m.name) for m in candidate.modes})

            return max(tables, key=score)
        return tables[0]

    def host_thread_budgets(self, cpu_count=None):
        """Thread budgets of the host-cpu profile: 1, 2, 4, ... below cpu_count, then cpu_count itself."""
        if self.thread_budgets is None:
            return []
        cpu_count = cpu_count or os.cpu_count() or 1
        if isinstance(self.thread_budgets, list):
            return sorted(set(n for n in self.thread_budgets if n <= cpu_count)) or [1]
        budgets = []
        n = 1
        while n < cpu_count:
            budgets.append(n)
            n *= 2
        budgets.append(cpu_count)
        return budgets

    def software_for(self, l4t_release):
        """The software row whose ``l4t`` pattern covers ``l4t_release`` (e.g. "36.4.3"), or None."""
        if not l4t_release:
            return None
        for row in self.software:
            if _l4t_matches(row["l4t"], l4t_release):
                return row
        return None

    def to_dict(self, cpu_count=None):
        data = {
            "name": self.name, "kind": self.kind, "display_name": self.display_name,
            "description": self.description, "path": self.path,
        }
        if self.is_jetson:
            data.update({
                "soc": self.soc, "compute_capability": self.compute_capability, "module_ids": self.module_ids,
                "compatible": self.compatible, "model_strings": self.model_strings, "has_dla": self.has_dla,
                "power": self.power,
                "mode_tables": {key: table.to_dict() for key, table in self.mode_tables.items()},
                "software": self.software,
            })
        else:
            data["thread_budgets"] = self.host_thread_budgets(cpu_count)
        return data


def _version_tuple(text):
    # Runs of digits are cut at 9: no L4T version part is longer, and Python 3.11+ refuses int() on more than
    # 4,300 digits (a profile's pattern of thousands of digits raised ValueError instead of matching nothing).
    return tuple(int(p) for p in re.findall(r"\d{1,9}", text))


def _l4t_matches(pattern, release):
    """``pattern``: "36.4.x", "36.2-36.3", "34.x-35.x", "39.2", "32.7.x"; ``release``: "36.4.3"."""
    version = _version_tuple(release)
    bounds = pattern.split("-")
    if len(bounds) == 2:
        low, high = bounds
        low_v = _version_tuple(low.replace("x", ""))
        high_v = _version_tuple(high.replace("x", ""))
        return low_v <= version[:len(low_v)] and version[:len(high_v)] <= high_v
    prefix = _version_tuple(pattern.replace("x", ""))
    return version[:len(prefix)] == prefix


# --------------------------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------------------------
def validate_profile(data, source="<profile>", schema=None):
    """Raise :class:`EdgeAttnError` listing what is wrong with the profile ``data`` (already parsed YAML)."""
    if not isinstance(data, dict):
        raise EdgeAttnError("{}: a profile must be a YAML mapping, got {}".format(source, type(data).__name__))
    schema = schema or load_schema()
    errors = _schema_errors(data, schema, schema.get("$defs", {}), "")
    if not errors:
        errors.extend(_semantic_errors(data))
    if errors:
        shown = errors[:5]
        more = " (and {} more)".format(len(errors) - 5) if len(errors) > 5 else ""
        raise EdgeAttnError("invalid profile {}: {}{}".format(source, "; ".join(shown), more))


def _semantic_errors(data):
    errors = []
    kind = data["kind"]
    jetson_only = ("soc", "compute_capability", "module_ids", "compatible", "mode_tables", "power", "software")
    if kind == "jetson":
        for key in ("soc", "compute_capability", "module_ids", "compatible", "mode_tables", "power"):
            if key not in data:
                errors.append("a jetson profile needs {!r}".format(key))
        if "thread_budgets" in data:
            errors.append("thread_budgets is only for host-cpu profiles")
    else:
        for key in jetson_only:
            if key in data:
                errors.append("{!r} is only for jetson profiles".format(key))
        budgets = data.get("thread_budgets")
        if budgets is None:
            errors.append("a host-cpu profile needs thread_budgets ('auto' or a list)")
        elif isinstance(budgets, str) and budgets != "auto":
            errors.append("thread_budgets must be 'auto' or a list of thread counts, got {!r}".format(budgets))
    for key, table in (data.get("mode_tables") or {}).items():
        where = "mode_tables.{}".format(key)
        ids = [m["id"] for m in table["modes"]]
        duplicates = sorted(set(i for i in ids if ids.count(i) > 1))
        if duplicates:
            errors.append("{}: duplicate mode id(s) {}".format(where, duplicates))
        names = [m["name"] for m in table["modes"]]
        if len(set(names)) != len(names):
            errors.append("{}: duplicate mode names".format(where))
        if table["default_mode"] not in ids:
            errors.append("{}: default_mode {} is not one of the mode ids {}".format(where, table["default_mode"], ids))
        groups_by_mask = {}
        for mode in table["modes"]:
            masks = (mode.get("tpc_pg_mask"), mode.get("fbp_pg_mask"))
            group = mode.get("reboot_group")
            if masks[0] is None or group is None:
                continue
            groups_by_mask.setdefault(masks, set()).add(group)
        for masks, groups in groups_by_mask.items():
            if len(groups) > 1:
                errors.append("{}: modes with the same power-gating masks {} are in different reboot groups {}"
                              .format(where, masks, sorted(groups)))
        mask_by_group = {}
        for masks, groups in groups_by_mask.items():
            for group in groups:
                mask_by_group.setdefault(group, set()).add(masks)
        for group, masks in mask_by_group.items():
            if len(masks) > 1:
                errors.append("{}: reboot group {!r} mixes different power-gating masks {}"
                              .format(where, group, sorted(masks, key=str)))
    return errors


# --------------------------------------------------------------------------------------------------------------
# Loading and listing
# --------------------------------------------------------------------------------------------------------------
def list_profiles(directory=None):
    """Names of the profiles in ``directory`` (default: ``profiles/`` of the checkout), sorted."""
    directory = directory or profile_dir()
    names = []
    for entry in sorted(os.listdir(directory)):
        if entry.endswith((".yaml", ".yml")) and entry != SCHEMA_FILE and not entry.startswith((".", "_")):
            names.append(os.path.splitext(entry)[0])
    return names


def _profile_path(name_or_path, directory=None):
    if os.sep in name_or_path or name_or_path.endswith((".yaml", ".yml")):
        return name_or_path
    directory = directory or profile_dir()
    for ext in (".yaml", ".yml"):
        candidate = os.path.join(directory, name_or_path + ext)
        if os.path.isfile(candidate):
            return candidate
    raise EdgeAttnError("unknown profile {!r}; available: {}".format(
        name_or_path, ", ".join(list_profiles(directory)) or "none"))


#: PyYAML's safe loader on libyaml where PyYAML was built with it (Ubuntu's python3-yaml is): the pure-Python
#: one takes seconds of CPU on a damaged file nested thousands deep, which libyaml refuses past 1000 levels at once
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_profile(name_or_path, directory=None):
    """Load and validate one profile by name (``agx-orin-64gb``) or path. Raises EdgeAttnError when invalid."""
    path = _profile_path(name_or_path, directory)
    filekind.require(path, ("profile",), "a board profile (YAML)")
    try:
        with open(path, "r", encoding="utf-8") as handle:
            data = yaml.load(handle, Loader=_SAFE_LOADER)
    except OSError as error:
        raise EdgeAttnError("cannot read profile {}: {}".format(path, error.strerror or error))
    except UnicodeDecodeError as error:
        raise EdgeAttnError("profile {} is not UTF-8 text (byte {} at offset {})".format(
            path, hex(error.object[error.start]), error.start))
    except yaml.YAMLError as error:
        raise EdgeAttnError("profile {} is not valid YAML: {}".format(path, error))
    except (ValueError, RecursionError) as error:  # PyYAML's int() of a 5000-digit number, nesting too deep
        raise EdgeAttnError("profile {} is not a usable YAML document: {}".format(path, error))
    validate_profile(data, source=path, schema=load_schema(directory))
    by_name = path != name_or_path
    if by_name and data["name"] != name_or_path:
        raise EdgeAttnError("invalid profile {}: name {!r} does not match the file name {!r}".format(
            path, data["name"], name_or_path))
    return Profile(data, path)


def load_all_profiles(directory=None):
    return [load_profile(name, directory) for name in list_profiles(directory)]


def match_board(board, directory=None):
    """The profile for a detected board (:class:`edgeattn.jetson.board.BoardInfo`), or None.

    The most specific compatible entry (the first) is matched exactly; failing that, the module ID.
    """
    if board is None:
        return None
    profiles = [p for p in load_all_profiles(directory) if p.is_jetson]
    first = board.compatible[0] if board.compatible else None
    if first:
        for profile in profiles:
            if first in profile.compatible:
                return profile
    if board.module_id:
        for profile in profiles:
            if board.module_id in profile.module_ids:
                return profile
    return None


def cross_check(table, board_modes):
    """Compare the profile's mode table with the modes read from the board; returns warning lines (may be empty).

    ``board_modes``: objects with ``id``, ``name`` and optionally ``online_cores``, ``cpu_max_khz``,
    ``gpu_max_hz``, ``emc_max_hz``, ``tpc_pg_mask``, ``fbp_pg_mask`` (from the board's nvpmodel conf).
    """
    warnings = []
    if table is None:
        return ["no mode table in the profile to compare with"]
    profile_by_id = {m.id: m for m in table.modes}
    board_ids = set()
    for mode in board_modes:
        board_ids.add(mode.id)
        expected = profile_by_id.get(mode.id)
        if expected is None:
            warnings.append("board mode {} ({}) is not in the profile's {} table".format(mode.id, mode.name, table.key))
            continue
        if expected.name != mode.name:
            warnings.append("board mode {} is named {!r}; the profile's {} table calls it {!r}".format(
                mode.id, mode.name, table.key, expected.name))
            continue
        for field in ("online_cores", "cpu_max_khz", "gpu_max_hz", "emc_max_hz", "tpc_pg_mask", "fbp_pg_mask"):
            board_value = getattr(mode, field, None)
            profile_value = getattr(expected, field)
            if board_value is None or profile_value is None:
                continue
            if board_value != profile_value:
                warnings.append("mode {} {}: {} = {} on the board, {} in the profile".format(
                    mode.id, mode.name, field, board_value, profile_value))
    for mode in table.modes:
        if mode.id not in board_ids and not mode.unverified:
            warnings.append("profile mode {} ({}) is not on the board".format(mode.id, mode.name))
    return warnings
