"""Board profiles: schema validation, the facts cross-checked against independent transcriptions and real
captures (tests/fixtures/jetson), matching, and `edgeattn profiles`."""
import copy
import json
import os

import pytest
import yaml

from jetson_support import capture
from edgeattn import profiles
from edgeattn.errors import EdgeAttnError
from edgeattn.jetson import nvpmodel

import fakeharness

JETSON_PROFILES = ["agx-orin-64gb", "agx-orin-32gb", "orin-nx-16gb", "orin-nx-8gb", "orin-nano-8gb", "orin-nano-4gb",
                   "nano-4gb"]


def test_every_required_profile_exists_and_validates():
    names = profiles.list_profiles()
    assert sorted(names) == sorted(JETSON_PROFILES + ["host-cpu"])
    for name in names:
        profile = profiles.load_profile(name)
        assert profile.name == name


def test_super_and_original_tables_for_orin_nx_and_nano():
    for name in ("orin-nx-16gb", "orin-nx-8gb", "orin-nano-8gb", "orin-nano-4gb"):
        tables = profiles.load_profile(name).mode_tables
        assert set(tables) == {"super", "original"}
        assert tables["super"].conf_file.endswith("_super.conf")


@pytest.mark.parametrize("board_name", fakeharness.BOARD_NAMES)
def test_profile_tables_agree_with_the_independent_conf_transcription(board_name):
    # tests/fixtures/jetson/confs were transcribed separately from the same NVIDIA conf copies
    spec = fakeharness.fakeboard.boards()[board_name]
    profile = profiles.load_profile(spec["profile"])
    conf = nvpmodel.parse_conf(capture("confs/" + spec["conf"]))
    table = profile.table_for_conf(spec["conf"])
    assert table is not None and table.default_mode == conf.default_id
    assert profiles.cross_check(table, conf.modes) == []
    assert profile.best_table(conf.modes) is table


def test_profiles_agree_with_real_captures():
    nano = profiles.load_profile("nano-4gb").mode_tables["standard"]
    assert profiles.cross_check(nano, nvpmodel.parse_parse_verbose(capture("nvpmodel/parse_verbose_nano.txt")).modes) \
        == []
    super8 = profiles.load_profile("orin-nano-8gb").mode_tables["super"]
    fragment = nvpmodel.parse_conf(capture("nvpmodel/conf_p3767_0003_super_fragment.conf"))
    # the unverified 7W mode is absent from NVIDIA's conf copy: not a disagreement
    assert profiles.cross_check(super8, fragment.modes) == []
    # The R36.5 Orin NX capture in mode 40W: REAL_VAL of the GPU/CPU/DLA caps
    # (tests/fixtures/jetson/nvpmodel/query_verbose_orin_nx_r36_5.txt)
    verbose = nvpmodel.parse_query(capture("nvpmodel/query_verbose_orin_nx_r36_5.txt"))
    real = {(p[0], p[1]): int(p[3]) for p in verbose.params if p[3].isdigit()}
    mode = profiles.load_profile("orin-nx-16gb").mode_tables["super"].mode(verbose.mode.id)
    assert mode.name == verbose.mode.name
    assert real[("GPU", "MAX_FREQ")] == mode.gpu_max_hz
    assert real[("CPU_A78_0", "MAX_FREQ")] == mode.cpu_max_khz
    assert real[("DLA0_CORE", "MAX_FREQ")] == mode.dla0_max_hz
    assert sum(1 for p in verbose.params if p[0] == "CPU_ONLINE" and p[3] == "1") == mode.online_cores
    # jetson_clocks --show in Orin Nano Super 25W (R39) and MAXN_SUPER locked report the observed maxima
    from edgeattn.jetson.clocks import parse_show
    shown = parse_show(capture("clocks/show_orin_nano_super_r39_25w.txt"))
    assert super8.mode(1).observed["cpu_max_khz"] == shown["cpus"]["cpu0"]["max_khz"]
    assert super8.mode(1).observed["gpu_max_hz"] == shown["gpu"]["max_hz"]
    locked = parse_show(capture("clocks/show_orin_nano_super_maxn_locked.txt"))
    assert super8.mode(2).observed["gpu_max_hz"] == locked["gpu"]["max_hz"]
    assert super8.mode(2).observed["cpu_max_khz"] == locked["cpus"]["cpu0"]["max_khz"]


def test_reboot_groups_follow_the_masks():
    agx = profiles.load_profile("agx-orin-64gb").mode_tables["standard"]
    groups = {m.name: m.reboot_group for m in agx.modes}
    # nvpmodel_p3701_0000.conf's TPC masks: {MAXN, 50W} vs 15W vs 30W
    assert groups["MAXN"] == groups["MODE_50W"] and len(set(groups.values())) == 3


def test_host_cpu_thread_budgets():
    host = profiles.load_profile("host-cpu")
    assert host.host_thread_budgets(8) == [1, 2, 4, 8]
    assert host.host_thread_budgets(6) == [1, 2, 4, 6]
    assert host.host_thread_budgets(1) == [1]
    assert host.host_thread_budgets()[-1] == os.cpu_count()


def test_software_rows():
    orin = profiles.load_profile("orin-nano-8gb")
    assert orin.software_for("36.4.3")["tensorrt"] == "10.3"
    assert orin.software_for("36.2.0")["tensorrt"] == "8.6"
    assert orin.software_for("35.3.1")["tensorrt"] == "8.5"
    assert profiles.load_profile("nano-4gb").software_for("32.7.1")["tensorrt"] == "8.2"
    assert orin.software_for(None) is None


# -- validation ----------------------------------------------------------------------------------------------------
def _raw(name):
    with open(os.path.join(profiles.profile_dir(), name + ".yaml")) as handle:
        return yaml.safe_load(handle)


def _breakages():
    base = _raw("agx-orin-64gb")
    cases = []

    def case(label, mutate, message):
        data = copy.deepcopy(base)
        mutate(data)
        cases.append(pytest.param(data, message, id=label))

    case("missing-field", lambda d: d.pop("display_name"), "missing required field 'display_name'")
    case("unknown-field", lambda d: d.update(colour="red"), "unknown field 'colour'")
    case("bad-type", lambda d: d["mode_tables"]["standard"]["modes"][0].update(online_cores="twelve"),
         "online_cores: expected integer or null")
    case("duplicate-id", lambda d: d["mode_tables"]["standard"]["modes"][1].update(id=0), "duplicate mode id")
    case("default-missing", lambda d: d["mode_tables"]["standard"].update(default_mode=9), "default_mode 9")
    case("inconsistent-group", lambda d: d["mode_tables"]["standard"]["modes"][3].update(reboot_group="other"),
         "different reboot groups")
    case("bad-cap", lambda d: d["mode_tables"]["standard"]["modes"][1].update(gpu_max_hz=-5), "below the minimum")
    case("bad-schema-id", lambda d: d.update(schema="v2"), "is not one of")
    case("jetson-needs-tables", lambda d: d.pop("mode_tables"), "needs 'mode_tables'")
    case("host-fields-on-jetson", lambda d: d.update(thread_budgets="auto"), "only for host-cpu")
    return cases


@pytest.mark.parametrize("data, message", _breakages())
def test_bad_profiles_are_rejected_with_a_clear_message(data, message):
    with pytest.raises(EdgeAttnError) as info:
        profiles.validate_profile(data, source="bad.yaml")
    assert message in str(info.value) and "bad.yaml" in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_profile_files(tmp_path):
    (tmp_path / "broken.yaml").write_text("name: [unclosed\n")
    with pytest.raises(EdgeAttnError, match="not valid YAML"):
        profiles.load_profile(str(tmp_path / "broken.yaml"))
    (tmp_path / "host.yaml").write_text("schema: edgeattn.profile/1\nname: host\nkind: host-cpu\n"
                                        "display_name: x\nthread_budgets: some\n")
    with pytest.raises(EdgeAttnError, match="thread_budgets must be 'auto'"):
        profiles.load_profile(str(tmp_path / "host.yaml"))
    with pytest.raises(EdgeAttnError, match="unknown profile 'no-such-board'; available: agx-orin-32gb"):
        profiles.load_profile("no-such-board")


def test_a_profile_never_constructs_python_objects(tmp_path):
    """Profiles are data (a downloaded or shared profile is untrusted): YAML tags that would call Python are
    refused, nothing they name runs."""
    marker = tmp_path / "created-by-the-profile"
    evil = tmp_path / "evil.yaml"
    evil.write_text("schema: edgeattn.profile/1\nname: !!python/object/apply:os.mkdir [{}]\n".format(
        json.dumps(str(marker))))
    with pytest.raises(EdgeAttnError, match="is not valid YAML"):
        profiles.load_profile(str(evil))
    assert not marker.exists()


def test_cross_check_reports_disagreements():
    table = profiles.load_profile("nano-4gb").mode_tables["standard"]
    conf = nvpmodel.parse_conf("< POWER_MODEL ID=0 NAME=MAXN >\nCPU_ONLINE CORE_0 1\nCPU_ONLINE CORE_1 1\n"
                               "< POWER_MODEL ID=2 NAME=10W >\n< PM_CONFIG DEFAULT=0 >\n")
    warnings = profiles.cross_check(table, conf.modes)
    assert "mode 0 MAXN: online_cores = 2 on the board, 4 in the profile" in warnings
    assert "board mode 2 (10W) is not in the profile's standard table" in warnings
    assert "profile mode 1 (5W) is not on the board" in warnings


# -- CLI -----------------------------------------------------------------------------------------------------------
def test_cli_lists_profiles(invoke):
    result = invoke(["profiles"], expect=0)
    for name in JETSON_PROFILES + ["host-cpu"]:
        assert name in result.stdout
    assert "MODE_30W*" in result.stdout


def test_cli_shows_one_profile(invoke):
    result = invoke(["profiles", "agx-orin-64gb"], expect=0)
    assert "nvpmodel_p3701_0000.conf (default mode 2)" in result.stdout
    assert "MODE_15W" in result.stdout and "TensorRT 10.3" in result.stdout
    data = json.loads(invoke(["profiles", "orin-nano-4gb", "--json"], expect=0).stdout)
    assert data["mode_tables"]["super"]["default_mode"] == 1
    listed = json.loads(invoke(["profiles", "--json"], expect=0).stdout)
    assert {p["name"] for p in listed} == set(JETSON_PROFILES + ["host-cpu"])


def test_cli_invalid_yaml_is_one_line(invoke, tmp_path):
    """PyYAML's own message spans several lines (the mark, the offending line, a caret): still one line."""
    path = tmp_path / "broken.yaml"
    path.write_text("name: [unclosed\n")
    result = invoke(["profiles", str(path)], expect=2)
    assert result.stderr.startswith("edgeattn: error: profile {} is not valid YAML: ".format(path))
    assert result.stderr.count("\n") == 1 and result.stdout == ""


def test_cli_unknown_profile_is_one_line(invoke):
    result = invoke(["profiles", "nope"], expect=2)
    assert result.stderr.startswith("edgeattn: error: unknown profile 'nope'")
    assert result.stderr.count("\n") == 1


def test_cross_check_reports_a_renamed_mode_and_a_power_gating_mask():
    """AGX Orin 64GB (nvpmodel_p3701_0000.conf): mode 1 is MODE_15W with TPC_PG_MASK 248, mode 2 MODE_30W. A board
    whose mode 2 is called otherwise, and whose 15W mode gates other TPCs, disagrees on both."""
    table = profiles.load_profile("agx-orin-64gb").mode_tables["standard"]
    conf = nvpmodel.parse_conf("< POWER_MODEL ID=0 NAME=MAXN >\n< POWER_MODEL ID=1 NAME=MODE_15W >\n"
                               "TPC_POWER_GATING TPC_PG_MASK 240\n< POWER_MODEL ID=2 NAME=MODE_25W >\n"
                               "< POWER_MODEL ID=3 NAME=MODE_50W >\n< PM_CONFIG DEFAULT=2 >\n")
    warnings = profiles.cross_check(table, conf.modes)
    assert "mode 1 MODE_15W: tpc_pg_mask = 240 on the board, 248 in the profile" in warnings
    assert "board mode 2 is named 'MODE_25W'; the profile's standard table calls it 'MODE_30W'" in warnings
    assert len(warnings) == 2
