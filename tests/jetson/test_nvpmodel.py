"""nvpmodel parsers on the real captures in tests/fixtures/jetson/nvpmodel, and nvpmodel runs against the fake."""
import os

import pytest

from jetson_support import capture
from edgeattn.errors import EdgeAttnError
from edgeattn.jetson import nvpmodel


@pytest.mark.parametrize("name, mode_id, mode_name", [
    ("query_nano_jp4_fan_warn.txt", 0, "MAXN"),
    ("query_agx_orin_jp5.txt", 2, "MODE_30W"),
    ("query_orin_nano_jp6_snap.txt", 0, "15W"),
    ("query_orin_nano_super_jp72.txt", 1, "25W"),
    ("query_orin_nano.txt", 0, "15W"),
    ("query_thor_jp7.txt", 0, "MAXN"),
    ("query_nano_sudo.txt", 1, "5W"),
    ("query_nano_nonroot.txt", 1, "5W"),
    ("query_verbose_orin_nx_r36_5.txt", 4, "40W"),
    ("query_verbose_xavier_nx_jp4.txt", 2, "MODE_15W_6CORE"),
    ("query_verbose_tx2.txt", 0, "MAXN"),
])
def test_query_captures(name, mode_id, mode_name):
    assert nvpmodel.parse_query(capture("nvpmodel/" + name)).mode == (mode_id, mode_name)


def test_warn_and_error_lines_are_kept_apart_from_the_mode():
    warned = nvpmodel.parse_query(capture("nvpmodel/query_nano_jp4_fan_warn.txt"))
    assert warned.warnings == ["fan mode is not set!"]
    unprivileged = nvpmodel.parse_query(capture("nvpmodel/query_nano_nonroot.txt"))
    assert unprivileged.errors == [
        "Error opening /sys/kernel/nvpmodel_emc_cap/emc_iso_cap: 13",
        "failed to read PARAM EMC: ARG MAX_FREQ: PATH /sys/kernel/nvpmodel_emc_cap/emc_iso_cap"]
    assert nvpmodel.parse_query(capture("nvpmodel/query_verbose_xavier_nx_jp4.txt")).fan_mode == "quiet"


def test_a_warn_line_is_never_taken_for_the_mode():
    # jtop issue #148 parsed "NVPM WARN" as the mode name; a mode needs the "NV Power Mode:" line and its ID
    result = nvpmodel.parse_query("NVPM WARN: power mode is not set!\n")
    assert result.mode is None and result.warnings == ["power mode is not set!"]


def test_verbose_query_reports_real_and_conf_values():
    result = nvpmodel.parse_query(capture("nvpmodel/query_verbose_orin_nx_r36_5.txt"))
    params = {(p[0], p[1]): (p[3], p[4]) for p in result.params}
    assert params[("GPU", "MAX_FREQ")] == ("1173000000", "1173000000")
    assert params[("EMC", "MAX_FREQ")] == ("3199000000", "9223372036854775807")
    assert params[("CPU_A78_7", "MAX_FREQ")] == ("1497600", "1497600")
    assert params[("DLA0_CORE", "MAX_FREQ")] == ("908800000", "908800000")
    assert len([p for p in result.params if p[0] == "CPU_ONLINE"]) == 8


def test_parse_verbose_grammar_nano():
    conf = nvpmodel.parse_parse_verbose(capture("nvpmodel/parse_verbose_nano.txt"))
    assert conf.default_id == 0
    maxn, five = conf.modes
    assert (maxn.id, maxn.name, five.id, five.name) == (0, "MAXN", 1, "5W")
    assert maxn.online_cores == 4 and five.online_cores == 2
    # 2147483647 = INT_MAX and "EMC MAX_FREQ 0" both mean no cap (the conf header: "-1 is taken as INT_MAX";
    # NVIDIA's Xavier confs write EMC MAX_FREQ 0)
    assert (maxn.cpu_max_khz, maxn.gpu_max_hz, maxn.emc_max_hz) == (-1, -1, -1)
    assert (five.cpu_max_khz, five.gpu_max_hz, five.emc_max_hz) == (918000, 640000000, 1600000000)
    assert maxn.reboot_key is None and conf.needs_reboot(0, 1) is False


def test_conf_fragment_orin_nano_super():
    conf = nvpmodel.parse_conf(capture("nvpmodel/conf_p3767_0003_super_fragment.conf"))
    assert conf.default_id == 1
    assert [(m.id, m.name) for m in conf.modes] == [(0, "15W"), (1, "25W"), (2, "MAXN_SUPER")]
    first = conf.modes[0]
    assert (first.online_cores, first.tpc_pg_mask, first.fbp_pg_mask) == (6, 240, 2)
    assert (first.cpu_max_khz, first.gpu_max_hz, first.emc_max_hz) == (1497600, 612000000, 2133000000)
    assert conf.modes[1].gpu_max_hz == 918000000 and conf.modes[2].gpu_max_hz == -1
    assert conf.unparsed == 0  # "..." elisions are not counted as garbage


def test_conf_parsing_is_lenient():
    text = ("<PARAM TYPE=CLOCK NAME=EMC >\nMAX_FREQ /sys/x\n"
            "< POWER_MODEL ID=3 NAME=10W >  # inline comment\nCPU_A57 MAX_FREQ -1\t# 1479000[Hz]\n"
            "GPU MAX_FREQ 2147483647\nweird line here\n<PM_CONFIG DEFAULT=3>\n")
    conf = nvpmodel.parse_conf(text)
    assert conf.default_id == 3 and conf.modes[0].cpu_max_khz == -1 and conf.modes[0].gpu_max_hz == -1
    assert conf.unparsed == 1


def test_needs_reboot_follows_power_gating_masks():
    conf = nvpmodel.parse_conf(capture("confs/nvpmodel_p3701_0000.conf"))
    assert conf.needs_reboot(0, 3) is False          # MAXN and 50W share mask 0 (nvpmodel_p3701_0000.conf)
    assert conf.needs_reboot(2, 1) is True and conf.needs_reboot(2, 0) is True
    assert conf.needs_reboot(2, 9) is None           # unknown mode


@pytest.mark.parametrize("name, status", [
    ("switch_reboot_accepted_agx_orin.txt", "rebooting"),
    ("switch_reboot_declined.txt", "reboot_required"),
    ("switch_reboot_bad_input_thor.txt", "reboot_required"),
    ("error_fbp_pg_mask_orin_nano_4gb.txt", "failed"),
    ("error_tpc_pg_mask_ebusy_journal.txt", "failed"),
    ("error_missing_devfreq_journal.txt", "failed"),
    ("error_hwmon_missing_journal.txt", "failed"),
])
def test_switch_outputs(name, status):
    # the exit status of a declined reboot is undocumented: classify with status 0 and 1 alike
    for returncode in (0, 1):
        result = nvpmodel.parse_switch(capture("nvpmodel/" + name), returncode)
        assert result.status == status
    if status == "failed":
        assert result.errors[0].startswith(("Error writing", "Error opening"))


def test_clean_switch_and_privilege_errors():
    assert nvpmodel.parse_switch("", 0).status == "switched"
    assert nvpmodel.parse_switch("Please run as root\n", 1).status == "failed"
    denied = nvpmodel.parse_switch("sudo: a password is required\n", 1)
    assert denied.status == "failed" and "password" in denied.message


# -- against the fake nvpmodel -------------------------------------------------------------------------------------
def test_query_and_read_modes_on_the_fake(fake_board):
    board = fake_board("agx-orin-64gb")
    assert nvpmodel.query_mode() == (2, "MODE_30W")
    conf = nvpmodel.read_modes(board.root)
    assert conf.source.endswith("nvpmodel_p3701_0000.conf") and conf.default_id == 2
    assert [m.name for m in conf.modes] == ["MAXN", "MODE_15W", "MODE_30W", "MODE_50W"]
    assert all(call["stdin"] is None for call in board.calls("nvpmodel"))


def test_read_modes_falls_back_to_parse_verbose(fake_board):
    board = fake_board("nano-4gb", with_conf=False)
    conf = nvpmodel.read_modes(board.root)
    assert conf.source == "nvpmodel -p --verbose"
    assert [(m.id, m.name, m.online_cores) for m in conf.modes] == [(0, "MAXN", 4), (1, "5W", 2)]
    assert [c["argv"] for c in board.calls("nvpmodel")] == [["-p", "--verbose"]]


def test_live_switch_goes_through_sudo(fake_board):
    board = fake_board("orin-nano-8gb")
    result = nvpmodel.set_mode(2)
    assert result.status == "switched"
    assert nvpmodel.query_mode() == (2, "MAXN_SUPER") and board.state()["mode"] == 2
    sudo_call = board.calls("sudo")[-1]
    assert sudo_call["argv"][:1] == ["-n"] and sudo_call["argv"][-2:] == ["-m", "2"]
    assert board.calls("nvpmodel")[-2]["root"] is True


def test_reboot_prompt_is_answered_no_through_stdin(fake_board):
    board = fake_board("orin-nano-8gb")
    result = nvpmodel.set_mode(3)           # 7W: different power-gating mask -> reboot prompt
    assert result.status == "reboot_required"
    assert "Reboot required for changing to this power mode: 3" in result.warnings
    assert board.state()["mode"] == 1 and board.state()["reboots"] == 0
    assert [c["stdin"] for c in board.calls("nvpmodel") if "-m" in c["argv"]] == ["NO\n"]


def test_accepting_the_prompt_reboots(fake_board):
    board = fake_board("orin-nano-8gb")
    result = nvpmodel.set_mode(3, accept_reboot=True)
    assert result.status == "rebooting"
    assert board.state()["mode"] == 3 and board.state()["reboots"] == 1


def test_non_root_and_denied_sudo_fail_clearly(fake_board, monkeypatch):
    board = fake_board("nano-4gb")
    monkeypatch.setenv("EDGEATTN_SUDO", "never")
    result = nvpmodel.set_mode(1)
    assert result.status == "failed" and result.message == "Please run as root"
    monkeypatch.setenv("EDGEATTN_SUDO", "always")
    monkeypatch.setenv("FAKE_SUDO_DENY", "1")
    assert nvpmodel.set_mode(1).status == "failed"
    assert board.state()["mode"] == 0


def test_nvpm_error_during_switch(fake_board, monkeypatch):
    board = fake_board("orin-nano-4gb-original")
    monkeypatch.setenv("FAKE_NVPMODEL_FAIL_MODE", "0")
    board.update_state(mode=1)
    result = nvpmodel.set_mode(0)
    assert result.status == "failed"
    assert result.errors[0] == "Error writing 2 to /sys/devices/gpu.0/fbp_pg_mask: 19"


def test_without_nvpmodel(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(nvpmodel, "find_tool", lambda name, *a: None)
    assert nvpmodel.query_mode() is None
    assert nvpmodel.read_modes(str(tmp_path)) is None
    with pytest.raises(EdgeAttnError, match="nvpmodel is not installed"):
        nvpmodel.current_mode()
    with pytest.raises(EdgeAttnError, match="nvpmodel is not installed"):
        nvpmodel.set_mode(0)


def test_misconfigured_board_reports_why(fake_board, tmp_path, monkeypatch):
    script = tmp_path / "nvpmodel"
    script.write_text("#!/bin/sh\necho 'NVPM WARN: power mode is not set!'\n")
    os.chmod(str(script), 0o755)
    monkeypatch.setenv("EDGEATTN_TOOL_DIRS", str(tmp_path))  # looked in before the system dirs and PATH
    assert nvpmodel.query_mode() is None
    with pytest.raises(EdgeAttnError, match="power mode is not set"):
        nvpmodel.current_mode()
