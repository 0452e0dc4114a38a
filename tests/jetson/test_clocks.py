"""jetson_clocks: --show parser on the real captures in tests/fixtures/jetson/clocks, store/restore/lock against the
fake."""
import os
import stat

import pytest

from jetson_support import capture
from edgeattn.errors import EdgeAttnError
from edgeattn.jetson import clocks


def test_nano_maxn_default_dvfs():
    data = clocks.parse_show(capture("clocks/show_nano_maxn.txt"))
    assert (data["soc_family"], data["machine"]) == ("tegra210", "NVIDIA Jetson Nano Developer Kit")
    assert data["online_cpus"] == "0-3" and data["cluster_switching"] == "Disabled"
    assert data["cpus"]["cpu0"] == {"online": True, "governor": "schedutil", "min_khz": 102000, "max_khz": 1479000,
                                    "cur_khz": 1326000, "idle_states": {"WFI": 1, "c7": 1}}
    assert data["gpu"] == {"min_hz": 76800000, "max_hz": 921600000, "cur_hz": 76800000}
    assert data["emc"]["freq_override"] == 0 and data["fan"] == ["Fan: speed=0"]
    assert data["power_mode"] == "MAXN" and data["locked"] is False


def test_nano_5w_offline_cores_and_effective_caps():
    data = clocks.parse_show(capture("clocks/show_nano_5w.txt"))
    assert [data["cpus"]["cpu{}".format(i)]["online"] for i in range(4)] == [True, True, False, False]
    assert data["cpus"]["cpu0"]["max_khz"] == 921600 and data["gpu"]["max_hz"] == 614400000
    assert data["locked"] is False  # CPU min == max, but the GPU still scales


def test_nano_locked():
    data = clocks.parse_show(capture("clocks/show_nano_locked.txt"))
    assert data["locked"] is True and data["fan"] == ["Fan: PWM=34"] and data["cluster_switching"] is None
    assert data["cpus"]["cpu3"]["idle_states"] == {"WFI": 0, "c7": 0}


def test_emc_below_its_maximum_means_not_locked():
    """jtop's rule (rbonghi/jetson_stats jtop/core/jetson_clocks.py): locked needs every online CPU min == max, GPU
    min == max AND EMC current ==
    max. The locked Nano capture with only its EMC back at the minimum it lists is therefore not locked."""
    locked = capture("clocks/show_nano_locked.txt")
    emc_line = "EMC MinFreq=204000000 MaxFreq=1600000000 CurrentFreq=1600000000 FreqOverride=1"
    assert emc_line in locked
    scaled = locked.replace(emc_line, "EMC MinFreq=204000000 MaxFreq=1600000000 CurrentFreq=204000000 FreqOverride=0")
    data = clocks.parse_show(scaled)
    assert data["gpu"]["min_hz"] == data["gpu"]["max_hz"]
    assert all(cpu["min_khz"] == cpu["max_khz"] for cpu in data["cpus"].values())
    assert data["emc"]["cur_hz"] < data["emc"]["max_hz"] and data["locked"] is False


def test_orin_nano_jp6_two_space_format():
    data = clocks.parse_show(capture("clocks/show_orin_nano_jp6_15w.txt"))
    assert len(data["cpus"]) == 6 and data["cpus"]["cpu5"]["governor"] == "ondemand"
    assert data["gpu"]["max_hz"] == 624750000 and data["active_gpu_tpcs"] == 4
    assert data["power_mode"] is None  # nvpmodel lives inside the snap there
    assert data["fan"] == ["FAN Dynamic Speed Control=kernel hwmon0_pwm1=88"]


def test_r39_format_without_online_per_core():
    data = clocks.parse_show(capture("clocks/show_orin_nano_super_r39_25w.txt"))
    assert data["online_cpus"] == "0-5" and data["offline_cpus"] == ""
    assert data["cpus"]["cpu2"]["online"] is None and data["cpus"]["cpu2"]["max_khz"] == 1344000
    assert "freq_override" not in data["emc"] and len(data["fan"]) == 2
    assert data["power_mode"] == "25W" and data["locked"] is False and data["unparsed"] == []


def test_super_maxn_locked_with_elided_lines():
    data = clocks.parse_show(capture("clocks/show_orin_nano_super_maxn_locked.txt"))
    assert data["locked"] is True and data["gpu"]["max_hz"] == 1020000000
    assert data["unparsed"] == ["..."]


def test_truncated_agx_orin_capture_is_not_an_error():
    data = clocks.parse_show(capture("clocks/show_agx_orin_jp5_truncated.txt"))
    assert data["machine"] == "Jetson AGX Orin" and sorted(data["cpus"]) == ["cpu0", "cpu1", "cpu10", "cpu11",
                                                                             "cpu2"]
    assert data["cpus"]["cpu10"]["max_khz"] == 2201600 and data["locked"] is None


def test_usage_capture_documents_store_and_restore():
    text = capture("clocks/usage.txt")
    assert "--store [file]" in text and "--restore [file]" in text


# -- against the fake ------------------------------------------------------------------------------------------
def test_show_needs_root(fake_board, monkeypatch):
    fake_board("orin-nano-8gb")
    assert clocks.show() is None  # unprivileged: "Error: Run this script(...) as a root user"
    shown = clocks.show(use_sudo=True)
    assert shown["power_mode"] == "25W" and shown["gpu"]["max_hz"] == 918000000 and shown["locked"] is False


def test_store_lock_restore_round_trip(fake_board, tmp_path):
    board = fake_board("agx-orin-64gb", fan_pwm=77)
    stored = clocks.store()
    clocks.lock()
    assert clocks.show(use_sudo=True)["locked"] is True and board.state()["locked"] is True
    clocks.restore(stored)
    assert board.state()["locked"] is False and board.state()["fan_pwm"] == 77
    assert board.state()["restored_from"] == stored
    assert all(call["root"] for call in board.calls("jetson_clocks"))
    assert all(call["argv"][-2] == "--store" or "--store" not in call["argv"] for call in board.calls("sudo"))


def test_store_goes_to_a_fresh_private_directory(fake_board):
    board = fake_board("nano-4gb")
    first, second = clocks.store(), clocks.store()
    assert first != second and os.path.basename(first) == clocks.STORE_NAME
    root = os.path.realpath(os.path.join(board.base, "edgeattn-state", "clocks"))
    for path in (first, second):
        assert os.path.dirname(os.path.dirname(path)) == root
        assert stat.S_IMODE(os.lstat(os.path.dirname(path)).st_mode) == 0o700
        assert clocks.store_problem(path) is None
    # the store never prompted: the name was new in a directory nobody else can write
    assert all(call["stdin"] is None for call in board.calls("jetson_clocks"))
    clocks.discard_store(first)
    assert not os.path.exists(os.path.dirname(first)) and os.path.exists(second)


def test_store_refuses_an_existing_name(fake_board, tmp_path):
    board = fake_board("nano-4gb")
    target = tmp_path / "orig.conf"
    target.write_text("stale\n")
    with pytest.raises(EdgeAttnError, match="already exists"):
        clocks.store(str(target))
    dangling = tmp_path / "dangling"
    os.symlink(str(tmp_path / "victim"), str(dangling))
    with pytest.raises(EdgeAttnError, match="already exists"):
        clocks.store(str(dangling))
    assert target.read_text() == "stale\n" and not (tmp_path / "victim").exists()
    assert board.calls("jetson_clocks") == []


def test_restore_only_takes_a_store_edgeattn_created(fake_board, tmp_path):
    board = fake_board("nano-4gb")
    planted = tmp_path / clocks.STORE_NAME
    planted.write_text("/etc/victim:1\n")
    with pytest.raises(EdgeAttnError, match="clock-store directory .*No such file"):
        clocks.restore(str(planted))  # no store was ever made here
    good = clocks.store()
    with pytest.raises(EdgeAttnError, match="not in edgeattn's clock-store directory") as caught:
        clocks.restore(str(planted))
    assert "\n" not in caught.value.format_message()
    os.chmod(good, 0o666)  # writable by others: anyone could have rewritten its lines
    with pytest.raises(EdgeAttnError, match="others may change it"):
        clocks.restore(good)
    os.chmod(good, 0o644)
    os.chmod(os.path.dirname(good), 0o755)
    with pytest.raises(EdgeAttnError, match="mode 0755"):
        clocks.restore(good)
    os.chmod(os.path.dirname(good), 0o700)
    os.unlink(good)
    os.symlink(str(planted), good)
    with pytest.raises(EdgeAttnError, match="symbolic link"):
        clocks.restore(good)
    assert [c for c in board.calls("jetson_clocks") if "--restore" in c["argv"]] == []


def test_restore_of_a_missing_file_and_non_root_errors(fake_board, tmp_path, monkeypatch):
    fake_board("nano-4gb")
    with pytest.raises(EdgeAttnError, match="does not exist"):
        clocks.restore(str(tmp_path / "missing.conf"))
    monkeypatch.setenv("EDGEATTN_SUDO", "never")
    with pytest.raises(EdgeAttnError, match=r"Run this script\(/usr/bin/jetson_clocks\) as a root user"):
        clocks.lock()


def test_no_jetson_clocks(monkeypatch):
    monkeypatch.setattr(clocks, "find_tool", lambda name, *a: None)
    assert clocks.show() is None
    with pytest.raises(EdgeAttnError, match="not installed"):
        clocks.lock()
    assert os.environ.get("PATH")
