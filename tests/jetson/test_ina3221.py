"""INA3221 sysfs rails (as rbonghi/jetson_stats jtop/core/power.py reads them) on fake trees built from the real
listings."""
import os
import time

import pytest

from jetson_support import capture
from edgeattn.errors import EdgeAttnError
from edgeattn.jetson import ina3221

# tests/fixtures/jetson/ina3221/agx_orin_hwmon_listing.txt, real AGX Orin listing: (label, mV, mA) per channel of
# 1-0040 and 1-0041
AGX_0040 = [("VDD_GPU_SOC", 843, 6170), ("VDD_CPU_CV", 780, 3437), ("VIN_SYS_5V0", 4968, 953)]
AGX_0041 = [(None, None, None), ("VDDQ_VDD2_1V8AO", 1800, 341), (None, None, None)]


def _write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write("{}\n".format(value))


def test_listing_fixture_holds_the_values_used_here():
    text = capture("ina3221/agx_orin_hwmon_listing.txt")
    for label, mv, ma in AGX_0040 + [AGX_0041[1]]:
        assert "label={}".format(label) in text and "voltage={}mV".format(mv) in text
        assert "current={}mA".format(ma) in text


def test_hwmon_rails_agx_orin(fake_board):
    board = fake_board("agx-orin-64gb")
    mon = board.add_ina3221_hwmon("1-0040", AGX_0040, hwmon="hwmon3")
    board.add_ina3221_hwmon("1-0041", AGX_0041, hwmon="hwmon4")
    _write(os.path.join(mon, "in7_label"), "sum of shunt voltages")
    _write(os.path.join(mon, "in7_input"), "1234")
    _write(os.path.join(mon, "curr7_input"), "1")
    rails = ina3221.discover_rails(board.root)
    assert [r.name for r in rails] == ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"]
    values = ina3221.read_rails(rails)
    for label, mv, ma in AGX_0040 + [AGX_0041[1]]:
        assert values[label] == pytest.approx(mv * ma / 1000.0)  # power = V x I (jtop)


def test_nc_channels_are_skipped(fake_board):
    board = fake_board("agx-orin-32gb")
    board.add_ina3221_hwmon("1-0040", [("VDD_GPU_SOC", 5000, 100), ("NC", 0, 0), ("VIN_SYS_5V0", 5000, 200)])
    assert [r.name for r in ina3221.discover_rails(board.root)] == ["VDD_GPU_SOC", "VIN_SYS_5V0"]


def test_iio_rails_jetson_nano(tmp_path):
    # JetPack 4 ina3221x: /sys/bus/i2c/drivers/ina3221x/6-0040/iio:device0 (jtop/core/power.py's JetPack 4 branch)
    iio = tmp_path / "sys" / "bus" / "i2c" / "drivers" / "ina3221x" / "6-0040" / "iio:device0"
    for channel, name in enumerate(["POM_5V_IN", "POM_5V_GPU", "POM_5V_CPU"]):
        _write(str(iio / "rail_name_{}".format(channel)), name)
    # the real Nano reading of POM_5V_GPU: 158 mW, 32 mA, 4944 mV
    _write(str(iio / "in_power1_input"), 158)
    _write(str(iio / "in_current1_input"), 32)
    _write(str(iio / "in_voltage1_input"), 4944)
    _write(str(iio / "in_current2_input"), 100)
    _write(str(iio / "in_voltage2_input"), 5000)
    text = capture("ina3221/nano_iio_tool_listing.txt")
    assert "Power Input:            158 mW" in text and "Voltage Input:          4944 mV" in text
    rails = ina3221.discover_rails(str(tmp_path))
    assert [r.name for r in rails] == ["POM_5V_IN", "POM_5V_GPU", "POM_5V_CPU"]
    values = ina3221.read_rails(rails)
    assert values == {"POM_5V_GPU": 158.0, "POM_5V_CPU": 500.0}  # POM_5V_IN has no readable value here


def test_no_monitor_and_interval_checks(tmp_path):
    assert ina3221.discover_rails(str(tmp_path)) == []
    with pytest.raises(EdgeAttnError, match="no INA3221"):
        ina3221.Ina3221Sampler([])
    rail = ina3221.Rail("VDD_IN", "hwmon", "1-0040", 1, voltage_path="/nonexistent", current_path="/nonexistent")
    assert rail.read_mw() is None
    with pytest.raises(EdgeAttnError, match="0.5 s"):
        ina3221.Ina3221Sampler([rail], interval_s=0.1)


def test_sampler_polls_until_stopped(fake_board):
    board = fake_board("orin-nano-8gb")
    board.add_ina3221_hwmon("1-0040", [("VDD_IN", 5000, 1000), ("VDD_CPU_GPU_CV", 5000, 200), ("VDD_SOC", 5000, 300)])
    sampler = ina3221.Ina3221Sampler(ina3221.discover_rails(board.root), interval_s=0.5)
    with sampler:
        deadline = time.time() + 5
        while len(sampler.samples()) < 2 and time.time() < deadline:
            time.sleep(0.05)
    assert not sampler.running
    stamp, reading = sampler.samples()[0]
    assert reading.rails_mw == {"VDD_IN": 5000.0, "VDD_CPU_GPU_CV": 1000.0, "VDD_SOC": 1500.0}
