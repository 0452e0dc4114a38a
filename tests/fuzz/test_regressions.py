"""The failures fuzzing found, each kept as the smallest input that showed it (benchmarks/fuzz.py, tests/fuzz)."""
import json
import math

import pytest

from edgeattn.errors import EdgeAttnError


# -- tegrastats: numbers of any length -----------------------------------------------------------------------------
@pytest.mark.parametrize("line", [
    "CPU [" + "9" * 5000 + "%@1420]",        # Python 3.11 refuses int() of more than 4300 digits (ValueError)
    "GR3D_FREQ " + "9" * 5000 + "%",
    "APE " + "9" * 5000,
])
def test_tegrastats_refuses_no_line_for_a_huge_integer(line):
    from edgeattn.jetson import tegrastats

    assert tegrastats.parse_line(line) is None  # the token is unknown, the line holds nothing else


@pytest.mark.parametrize("line", ["VDD_IN " + "9" * 400 + "mW/1mW", "RAM " + "9" * 400 + "/1MB", "tj@" + "9" * 400 + "C"])
def test_tegrastats_yields_no_infinite_value(line):
    from edgeattn.jetson import tegrastats

    assert tegrastats.parse_line(line) is None  # was: an infinite rail, RAM size or temperature


def test_tegrastats_reads_only_ascii_digits():
    from edgeattn.jetson import tegrastats

    sample = tegrastats.parse_line("RAM 1/2MB GR3D_FREQ \u0661\u0662% VDD_IN 1000mW/1000mW")
    assert sample.engines == {} and sample.rails["VDD_IN"]["cur_mw"] == 1000.0  # Arabic-Indic digits are no load


# -- INA3221 sysfs: a value that is no reading ---------------------------------------------------------------------
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "9" * 400])
def test_ina3221_non_finite_value_is_no_reading(tmp_path, value):
    from edgeattn.jetson.ina3221 import Rail

    voltage, current = tmp_path / "in1_input", tmp_path / "curr1_input"
    voltage.write_text(value + "\n")
    current.write_text("100\n")
    assert Rail("VDD_IN", "hwmon", "1-0040", 1, voltage_path=str(voltage), current_path=str(current)).read_mw() is None
    voltage.write_text("5000\n")
    assert Rail("VDD_IN", "hwmon", "1-0040", 1, voltage_path=str(voltage), current_path=str(current)).read_mw() == 500.0


# -- trtexec --exportTimes: a damaged record ------------------------------------------------------------------------
_RECORD = {"startEnqMs": 0.16, "endEnqMs": 0.46, "startH2dMs": 0.15, "endH2dMs": 0.17, "startComputeMs": 0.17,
           "endComputeMs": 2.18, "startD2hMs": 2.18, "endD2hMs": 2.19, "h2dMs": 0.02, "computeMs": 2.01,
           "d2hMs": 0.01, "latencyMs": 2.04}


@pytest.mark.parametrize("key, value", [("startH2dMs", {}), ("startH2dMs", [[], []]), ("startComputeMs", []),
                                        ("endEnqMs", "x"), ("endD2hMs", 1e308), ("latencyMs", True)])
def test_export_times_drops_a_damaged_record(key, value):
    from edgeattn.trtexec import exports
    from edgeattn.trtexec.version import TrtVersion

    damaged = dict(_RECORD, **{key: value})
    records = exports.parse_times(json.dumps([damaged, _RECORD, _RECORD]))
    assert records == [_RECORD, _RECORD]
    samples = exports.trace_samples(exports.timed_iterations(records, TrtVersion("8.2.1"), 0.0))
    assert samples["latency_ms"] == [2.04, 2.04] and math.isfinite(samples["span_ms"])
    with pytest.raises(EdgeAttnError, match="no timing records"):
        exports.parse_times(json.dumps([damaged]))


# -- engine manifests: a field of the wrong type --------------------------------------------------------------------
def _manifest(tmp_path, **fields):
    data = {"schema": "edgeattn.engine/1", "engine": {"file": "m.engine", "sha256": "0" * 64},
            "tensorrt": {"version": "10.3.0", "version_compatible": False}, "device": None,
            "profiles": [{"inputs": {"x": {"min": [1, 8], "opt": [1, 8], "max": [4, 8]}}}]}
    data.update(fields)
    (tmp_path / "m.engine.json").write_text(json.dumps(data))
    return str(tmp_path / "m.engine")


@pytest.mark.parametrize("fields, named", [
    ({"tensorrt": ["10.3.0"]}, "'tensorrt' must be an object or null"),         # was AttributeError
    ({"profiles": [True]}, "profile 1: a profile must be an object"),          # was TypeError
    ({"profiles": [{"inputs": {"x": {"min": [1], "max": [4]}}}]}, "needs 'min', 'opt' and 'max'"),  # was KeyError
    ({"profiles": [{"inputs": {"x": {"min": [{}], "opt": [1], "max": [4]}}}]}, "lists of dimensions"),
    ({"profiles": [{"inputs": {"x": {"min": [], "opt": [1], "max": [4]}}}]}, "different ranks"),  # was IndexError
    ({"device": {"compute_capability": [8, 7]}}, "'device.compute_capability' must be a string"),
    ({"tensorrt": {"version": 10}}, "'tensorrt.version' must be a string"),
    ({"engine": {"sha256": 7}}, "'engine.sha256' must be a string"),
])
def test_malformed_manifest_is_one_line_naming_the_field(tmp_path, fields, named):
    from edgeattn.tensorrt import manifest

    engine = _manifest(tmp_path, **fields)
    with pytest.raises(EdgeAttnError) as caught:
        manifest.read_manifest(engine)
    assert named in str(caught.value) and "m.engine.json" in str(caught.value) and "\n" not in str(caught.value)


def test_a_valid_manifest_still_reads_and_checks_batches(tmp_path):
    from edgeattn.tensorrt import manifest

    data = manifest.read_manifest(_manifest(tmp_path))
    assert manifest.check_batch(data, 2) == [("x", [2, 8])]
    assert manifest.compatibility_problem(data, "10.3.0") is None


# -- sweep results: parts report relies on, of the wrong type -------------------------------------------------------
@pytest.mark.parametrize("row_fields, context", [
    ({"throttle_reasons": [["nested"]]}, {}),      # was TypeError in "; ".join
    ({"telemetry": [], "window": "x", "settle": 3}, {}),
    ({}, {"board": ["AGX Orin"]}),                  # was AttributeError on the context's board
    ({"power": {"total_w": 1.0, "samples": 2, "rails_w": None}}, {}),
])
def test_results_csv_flattens_damaged_parts_to_empty_columns(row_fields, context):
    from edgeattn.sweep.results import flatten_row

    row = dict({"model": "m", "mode_id": 0, "precision": "fp32", "repeat": 1, "throughput_items_per_s": 1.0},
               **row_fields)
    flat = flatten_row(row, context)
    assert flat["model"] == "m" and flat["board_model"] is None
    assert flat["throttle_reasons"] in ("", "['nested']")


# -- nvpmodel, jetson_clocks, trtexec device block: huge or non-ASCII numbers ---------------------------------------
def test_nvpmodel_mode_ids_of_thousands_of_digits_are_no_mode():
    from edgeattn.jetson import nvpmodel

    huge = "9" * 5000  # Python 3.11's int() raises ValueError beyond 4300 digits
    assert nvpmodel.parse_query("NV Power Mode: 15W\n{}\n".format(huge)).mode is None
    verbose = nvpmodel.parse_parse_verbose("NVPM VERB: PM_CONFIG: DEFAULT=MAXN({})\n"
                                           "NVPM VERB: POWER_MODEL: ID={} NAME=MAXN\n".format(huge, huge))
    assert verbose.default_id is None and verbose.modes == []
    conf = nvpmodel.parse_conf("< POWER_MODEL ID={} NAME=MAXN >\n< PM_CONFIG DEFAULT={} >\n".format(huge, huge))
    assert conf.modes == [] and conf.default_id is None
    assert nvpmodel.parse_query("NV Power Mode: 15W\n2\n").mode == (2, "15W")


def test_jetson_clocks_cpu_ranges_are_bounded():
    from edgeattn.jetson import clocks

    text = ("Online CPUs: 0-99999999999\ncpu0: Online=1 MinFreq=1 MaxFreq=1 CurrentFreq=1\n"
            "GPU MinFreq=1 MaxFreq=1 CurrentFreq=1\nActive GPU TPCs: {}\n".format("9" * 5000))
    data = clocks.parse_show(text)  # was: a set of 10^11 CPU numbers (a hang), then int() of 5000 digits
    assert data["active_gpu_tpcs"] is None and data["locked"] is True
    assert clocks._cpu_range_members("0-3,5") == {0, 1, 2, 3, 5}


@pytest.mark.parametrize("word", ["x9" * 10000, "9" * 20000, "key" * 5000 + "=1"])
def test_jetson_clocks_keys_beside_a_long_word(word):
    """Found by benchmarks/fuzz.py's CPU limit: the key=value regex backtracked over a 20000-character word from
    each of its starts (3 CPU seconds for one line); the keys around such a word read as before."""
    from edgeattn.jetson import clocks

    data = clocks.parse_show("cpu0: Online=1 Governor=schedutil {} MinFreq=729600 MaxFreq=2201600 "
                             "CurrentFreq=729600 IdleStates: WFI=1 c7=1\n".format(word))
    assert data["cpus"]["cpu0"] == {"online": True, "governor": "schedutil", "min_khz": 729600,
                                    "max_khz": 2201600, "cur_khz": 729600, "idle_states": {"WFI": 1, "c7": 1}}
    assert dict(clocks._KV_RE.findall("a=1 x.b=2 (c=3) d==4 e=f=g")) == {"a": "1", "b": "2", "c": "3)", "d": "=4",
                                                                         "e": "f=g"}


def test_trtexec_device_counts_of_odd_digits_are_none():
    from edgeattn.trtexec.log import parse_device

    device = parse_device("[I] Selected Device: Orin\n[I] SMs: \u00b2\n[I] Device Global Memory: {} MiB\n".format(
        "9" * 5000))  # '²'.isdigit() is true and int('²') raises
    assert device["name"] == "Orin" and device["sms"] is None and device["memory_mib"] is None


# -- checkpoint headers: a zip directory whose names do not decode ---------------------------------------------------
def test_checkpoint_zip_with_an_undecodable_name_is_sniffed_as_zip(tmp_path):
    import zipfile

    pytest.importorskip("torch")
    from edgeattn.models import checkpoint

    path = tmp_path / "model.pt"
    with zipfile.ZipFile(str(path), "w") as archive:
        archive.writestr("state/data.pkl", b"\x80\x02}q\x00.")
    data = bytearray(path.read_bytes())
    central = data.rindex(b"PK\x01\x02")  # the central directory entry: flags at +8, the name at +46
    data[central + 9] |= 0x08  # general purpose bit 11: the name is UTF-8 ...
    data[central + 47] = 0xc6  # ... and it is not
    path.write_bytes(bytes(data))
    assert checkpoint._sniff(str(path)) == "zip"  # was UnicodeDecodeError from zipfile
    with pytest.raises(EdgeAttnError):
        checkpoint.load_checkpoint(str(path))


# -- profiles: YAML that PyYAML builds with int() or deep recursion --------------------------------------------------
@pytest.mark.parametrize("text", ["schema: edgeattn.profile/1\nname: {}\n".format("9" * 5001),
                                  "schema: edgeattn.profile/1\nname: " + "[" * 5000 + "]" * 5000 + "\n"])
@pytest.mark.parametrize("loader", ["CSafeLoader", "SafeLoader"])
def test_profile_yaml_that_pyyaml_cannot_build_is_one_line(tmp_path, monkeypatch, text, loader):
    import yaml

    from edgeattn import profiles
    from edgeattn.profiles import load_profile

    if not hasattr(yaml, loader):
        pytest.skip("PyYAML built without libyaml")
    monkeypatch.setattr(profiles, "_SAFE_LOADER", getattr(yaml, loader))  # the pure-Python one where no libyaml
    path = tmp_path / "board.yaml"
    path.write_text(text)
    with pytest.raises(EdgeAttnError) as caught:
        load_profile(str(path))  # was ValueError (int digit limit) / RecursionError
    assert "board.yaml" in str(caught.value) and "\n" not in str(caught.value)


def test_profiles_are_read_with_libyaml_where_pyyaml_has_it():
    """Found by fuzzing: PyYAML's pure-Python reader took seconds of CPU on a profile with 20000 '[' inserted."""
    import yaml

    from edgeattn import profiles

    assert profiles._SAFE_LOADER is (yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader)
    assert issubclass(profiles._SAFE_LOADER, yaml.constructor.SafeConstructor)  # never the unsafe constructor


# -- trtexec --exportProfile: non-finite numbers --------------------------------------------------------------------
def test_export_profile_holds_no_infinite_number():
    from edgeattn.trtexec import exports

    text = ('[\n  { "count" : 661e999 }\n, { "name" : "conv", "timeMs" : 1e999, "averageMs" : 0.5, '
            '"medianMs" : 0.5, "percentage" : 100.0 }\n]\n')
    profile = exports.parse_profile(text)
    assert profile["count"] is None and profile["layers"][0]["timeMs"] is None
    assert profile["layers"][0]["averageMs"] == 0.5
    json.dumps(profile, allow_nan=False)


# -- trtexec --exportLayerInfo: a field of the wrong type -----------------------------------------------------------
def test_layer_info_with_a_format_that_is_not_a_string():
    from edgeattn.tensorrt.layers import describe_layers
    from edgeattn.trtexec.exports import parse_layer_info

    text = json.dumps({"Layers": [{"Name": "conv", "LayerType": "Convolution",
                                   "Inputs": [{"Name": "x", "Format/Datatype": {"odd": 1}}], "Outputs": []}]})
    description = describe_layers(parse_layer_info(text), "layers.json")  # was TypeError in the format regex
    assert description["layers"][0]["inputs"][0]["precision"] is None


# Python's JSON reader takes NaN, Infinity and 1e309 (a float beyond range) as non-finite floats, which the
# description copied into inspect's JSON (found with seeds 1 and 2 of benchmarks/fuzz.py)
@pytest.mark.parametrize("odd, expected", [("NaN", None), ("Infinity", None), ("-Infinity", None), ("1e309", None),
                                           ("2.5", 2.5), ("7", 7)])
def test_layer_info_non_finite_numbers_are_null(odd, expected):
    from edgeattn.tensorrt.layers import describe_layers
    from edgeattn.trtexec.exports import parse_layer_info

    text = ('{"Layers": [{"Name": "a", "Inputs": [{"Name": "x", "Dimensions": [1, ODD]}],'
            ' "Outputs": [{"Name": ODD, "Dimensions": [1]}]}], "Bindings": [ODD, "x"]}').replace("ODD", odd)
    description = describe_layers(parse_layer_info(text), "layers.json")
    json.dumps(description, allow_nan=False)  # was ValueError: out of range float values
    layer = description["layers"][0]
    assert layer["inputs"][0]["dims"] == [1, expected]
    assert layer["outputs"][0]["name"] == expected
    assert description["bindings"] == [expected, "x"]


@pytest.mark.parametrize("text", ["[" * 100000, '{"Layers": ' * 50000 + "[]" + "}" * 50000])
def test_trtexec_exports_nested_thousands_deep(text):
    """json's reader raises RecursionError, not ValueError, for nesting past the recursion limit."""
    from edgeattn.trtexec import exports

    with pytest.raises(EdgeAttnError, match="not a complete JSON document"):
        exports.parse_layer_info(text)
    with pytest.raises(EdgeAttnError, match="no records"):
        exports.parse_profile(text)


def test_checkpoint_zip_whose_zip64_locator_spans_disks(tmp_path):
    """zipfile.is_zipfile itself raises BadZipFile for a zip64 end locator naming several disks."""
    import io
    import struct
    import zipfile

    pytest.importorskip("torch")
    from edgeattn.models import checkpoint

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("state/data.pkl", b"\x80\x02}q\x00.")
    data = buffer.getvalue()
    end = data.rindex(b"PK\x05\x06")
    locator = b"PK\x06\x07" + struct.pack("<LQL", 0, 0, 2)  # zip64 end locator: 2 disks
    path = tmp_path / "model.pt"
    path.write_bytes(data[:end] + locator + data[end:])
    assert checkpoint._sniff(str(path)) == "zip"  # was BadZipFile out of is_zipfile
    with pytest.raises(EdgeAttnError):
        checkpoint.load_checkpoint(str(path))


def test_export_profile_count_beyond_floats_range():
    from edgeattn.trtexec import exports

    profile = exports.parse_profile('[\n  { "count" : ' + "9" * 400 + ' }\n]\n')  # was OverflowError in isfinite
    assert profile == {"count": None, "layers": []}
    assert exports.parse_profile('[\n  { "count" : 12 }\n]\n')["count"] == 12


@pytest.mark.parametrize("head", [b"[" * 30000, b'{"a":' * 10000])
def test_filekind_of_json_nested_thousands_deep(head):
    """Found by fuzzing: json's reader raised RecursionError out of the sniffer (which every command calls)."""
    from edgeattn import filekind

    assert filekind.sniff_bytes(head, len(head)).name == "text"  # no JSON record: left to the command's parser
    assert filekind.sniff_bytes(b"[" * 30 + b"]" * 30, 60).name == "json"


@pytest.mark.parametrize("inserted", [b'{"a":' * 2000, b"x" * 2000])
def test_checkpoint_whose_pickle_names_no_python_name_is_refused_before_torch_load(tmp_path, monkeypatch, inserted):
    """Found by fuzzing (minutes of CPU for one 100 kB file): torch.load's refusal message is matched with a regex
    that backtracks quadratically over a long pickled name; such a name is refused without calling torch.load."""
    torch = pytest.importorskip("torch")
    from edgeattn.models import checkpoint

    legacy = tmp_path / "legacy.pt"
    torch.save({"weight": torch.zeros(2, 3)}, str(legacy), _use_new_zipfile_serialization=False)
    data = legacy.read_bytes()
    at = data.index(b"ctorch._utils\n") + len(b"ctorch._")
    damaged = tmp_path / "damaged.pt"
    damaged.write_bytes(data[:at] + inserted + data[at:])

    calls, real_load = [], torch.load

    def recorded_load(*args, **kwargs):
        calls.append(args[0])
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", recorded_load)
    with pytest.raises(EdgeAttnError, match="which is no Python name") as caught:
        checkpoint.load_checkpoint(str(damaged))
    assert calls == [] and len(str(caught.value)) < 300 + len(str(damaged))
    with pytest.raises(EdgeAttnError, match="bare state dict"):  # the intact file goes on to torch.load
        checkpoint.load_checkpoint(str(legacy))
    assert calls == [str(legacy)]


# -- profiles: an L4T pattern of thousands of digits ------------------------------------------------------------------
def test_profile_l4t_pattern_of_thousands_of_digits_matches_nothing():
    import os

    from edgeattn import profiles

    profile = profiles.load_profile(os.path.join(os.path.dirname(profiles.__file__), "..", "profiles",
                                                 "agx-orin-64gb.yaml"))
    real = profile.software_for("36.4.3")
    assert real is not None and profiles._l4t_matches(real["l4t"], "36.4.3")
    huge = "3" * 10002
    profile.software = [dict(real, l4t=huge + ".x"), dict(real, l4t="36.0-" + huge)] + profile.software
    # was ValueError from int() past Python 3.11's digit limit; now a huge bound compares like any other
    assert profile.software_for("36.4.3") is not None
    profile.software_for(huge)  # a release of thousands of digits returns too
    assert not profiles._l4t_matches(huge + ".x", "36.4.3")
    assert profiles._l4t_matches("36.0-" + huge, "36.4.3")


# -- the sweep's row journal: a first line nested thousands deep ---------------------------------------------------
def test_row_journal_with_a_deeply_nested_first_line_is_one_line(tmp_path):
    """Found by benchmarks/fuzz.py (sweep.rows): the header check let json's RecursionError through."""
    from edgeattn.sweep import journal

    path = tmp_path / journal.JOURNAL_FILE
    path.write_bytes(b"[" * 20000 + b"\n")
    with pytest.raises(EdgeAttnError, match="is not an edgeattn sweep row journal") as caught:
        list(journal.read_rows(str(path)))
    assert "\n" not in str(caught.value)
    with pytest.raises(EdgeAttnError, match="is not an edgeattn sweep row journal"):
        journal.RowJournal(str(path)).append({"model": "m"})  # the next append checks the header the same way
