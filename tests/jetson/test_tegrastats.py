"""tegrastats parser on the real captures in tests/fixtures/jetson/tegrastats (expected values read off the captured
text)."""
import subprocess
import time

import pytest

from jetson_support import capture
from edgeattn.errors import EdgeAttnError
from edgeattn.jetson import tegrastats as ts


def lines(name):
    return [line for line in capture("tegrastats/" + name).splitlines() if line.strip()]


def test_nano_jp4_nonroot_has_rails_without_units_and_no_gpu_frequency():
    sample = ts.parse_line(lines("nano_jp4_nonroot.log")[0])
    assert sample.timestamp is None and sample.time_unix is None
    assert (sample.ram_used_mb, sample.ram_total_mb) == (613, 3964)
    assert (sample.swap_used_mb, sample.swap_total_mb) == (0, 1982)
    assert [c["load_pct"] for c in sample.cpus] == [2, 1, 0, 0]
    assert [c["freq_mhz"] for c in sample.cpus] == [102, 102, 102, 102]
    assert sample.gpu_util_pct == 0 and sample.gpu_freq_mhz is None  # "GR3D_FREQ 0%": non-root, no frequency
    assert sample.engines["EMC"] == {"util_pct": 0, "freq_mhz": None, "freqs_mhz": None, "off": False}
    assert sample.rails == {
        "POM_5V_IN": {"cur_mw": 943.0, "avg_mw": 943.0, "extra_mw": []},
        "POM_5V_GPU": {"cur_mw": 0.0, "avg_mw": 0.0, "extra_mw": []},
        "POM_5V_CPU": {"cur_mw": 123.0, "avg_mw": 123.0, "extra_mw": []},
    }
    assert sample.temperatures["CPU"] == 40.5 and sample.gpu_temp_c == 41.0
    assert sample.unknown_tokens == 0


def test_nano_jp4_root_adds_frequencies_iram_and_ape():
    sample = ts.parse_line(lines("nano_jp4_root.log")[0])
    assert sample.gpu_util_pct == 0 and sample.gpu_freq_mhz == 76
    assert sample.engines["EMC"]["freq_mhz"] == 204
    assert sample.engines["APE"]["freq_mhz"] == 25
    assert sample.rails["POM_5V_IN"] == {"cur_mw": 1003.0, "avg_mw": 919.0, "extra_mw": []}
    assert sample.temperatures["thermal"] == 28.25
    assert sample.unknown_tokens == 0


def test_tx2_off_cores_and_xavier_rail_names():
    tx1, tx2, xavier = [ts.parse_line(line) for line in lines("tx1_tx2_xavier_jp4.log")]
    assert tx1.rails["VDD_IN"]["avg_mw"] == 2698.0
    assert tx2.cpus[0] == {"load_pct": 2, "freq_mhz": 345} and tx2.cpus[1:] == [None] * 5
    assert tx2.temperatures["BCPU"] == 35.0 and tx2.rails["VDD_DDR"]["cur_mw"] == 240.0
    # AGX Xavier rails are named GPU CPU SOC CV VDDRQ SYS5V, and "CPU 216/216" is a rail, not the core list
    assert set(xavier.rails) == {"GPU", "CPU", "SOC", "CV", "VDDRQ", "SYS5V"}
    assert xavier.rails["SYS5V"]["cur_mw"] == 1889.0 and len(xavier.cpus) == 8
    assert all(s.unknown_tokens == 0 for s in (tx1, tx2, xavier))


def test_agx_orin_jp5_nc_rails_and_absent_sensors():
    sample = ts.parse_line(lines("agx_orin_jp5.log")[0])
    assert sample.timestamp == "04-11-2025 10:36:27"
    assert "NC" not in sample.rails
    assert sample.rails_mw == {"VDD_GPU_SOC": 2340.0, "VDD_CPU_CV": 390.0, "VIN_SYS_5V0": 4025.0,
                               "VDDQ_VDD2_1V8AO": 301.0}
    assert sorted(sample.absent_sensors) == ["CV0", "CV1", "CV2", "GPU"]  # printed as -256C
    assert sample.temperature("gpu") is None and sample.gpu_temp_c == 44.343  # falls back to tj
    assert sample.gpu.get("freqs_mhz") == [0, 0]
    assert sample.engines["VIC"]["freq_mhz"] == 729
    assert len(sample.cpus) == 12 and sample.unknown_tokens == 0


def test_agx_orin_dla_array_and_frequency_only_engine():
    sample = ts.parse_line(lines("agx_orin_dla.log")[0])
    assert sample.gpu_util_pct == 14 and sample.gpu["freqs_mhz"] == [407, 407] and sample.gpu_freq_mhz == 407
    assert sample.engines["NVDLA0"] == {"util_pct": None, "freq_mhz": 1600, "freqs_mhz": None, "off": False}
    assert sample.rails["VDD_CPU_CV"] == {"cur_mw": 14312.0, "avg_mw": 12415.0, "extra_mw": []}
    assert sample.hottest_c == (77.281, "CPU")


def test_agx_orin_r36_lowercase_sensors_and_off_engines():
    samples = [ts.parse_line(line) for line in lines("agx_orin_r36_4_4.log")]
    assert [s.timestamp for s in samples] == ["05-09-2026 18:42:06", "05-09-2026 18:42:07", "05-09-2026 18:42:08"]
    assert samples[1].time_unix - samples[0].time_unix == 1.0
    first = samples[0]
    assert first.engines["NVENC"] == {"util_pct": 79, "freq_mhz": 166, "freqs_mhz": None, "off": False}
    assert first.engines["NVDEC"]["off"] and first.engines["PVA0"]["off"]
    assert first.temperatures == {"cpu": 52.562, "soc2": 48.437, "soc0": 49.093, "tj": 52.562, "soc1": 49.656}
    assert [s.rails_mw["VIN_SYS_5V0"] for s in samples] == [4707.0, 4607.0, 4707.0]
    assert [s.rails["VIN_SYS_5V0"]["avg_mw"] for s in samples] == [4707.0, 4657.0, 4674.0]
    assert all(s.unknown_tokens == 0 for s in samples)


def test_orin_nano_super_single_gpc_array_and_vdd_in():
    idle, busy = [ts.parse_line(line) for line in lines("orin_nano_super_jp62.log")]
    assert idle.gpu["freqs_mhz"] == [305] and busy.gpu_util_pct == 99 and busy.gpu_freq_mhz == 612
    assert busy.rails["VDD_IN"] == {"cur_mw": 16321.0, "avg_mw": 11204.0, "extra_mw": []}
    assert busy.engines["EMC"] == {"util_pct": 61, "freq_mhz": 2133, "freqs_mhz": None, "off": False}
    assert busy.temperature("GPU") == 58.625
    assert (busy.swap_used_mb, busy.swap_total_mb) == (369, 3810)


def test_jetpack7_three_value_rails_and_double_temperatures():
    # published JetPack 7 captures: Orin R39.2 rails as curmW/x/y (3 values), temperatures "cpu@52.968C/52.968C"
    sample = ts.parse_line("12-01-2025 10:00:00 RAM 1000/7620MB (lfb 1x2MB) CPU [1%@729,off] "
                           "GR3D_FREQ 0%@[1300,1300] cpu@52.968C/52.968C VDD_IN 5139mW/5139mW/5139mW "
                           "NVENC0_FREQ @314")
    assert sample.rails["VDD_IN"] == {"cur_mw": 5139.0, "avg_mw": 5139.0, "extra_mw": [5139.0]}
    assert sample.temperatures["cpu"] == 52.968
    assert sample.cpus == [{"load_pct": 1, "freq_mhz": 729}, None]
    assert sample.engines["NVENC0"]["freq_mhz"] == 314 and sample.gpu_freq_mhz == 1300


def test_pmic_constant_is_never_the_hottest_sensor():
    """tegrastats prints PMIC@100C as a constant on TX1/TX2/Xavier (the DataDog captures): the hottest chip sensor is
    read off the other sensors of each captured line, or every such board would look like it hit 85 C."""
    expected = [(42.75, "Tdiode"), (41.0, "GPU"), (34.75, "Tdiode")]   # the maxima of each line without PMIC
    samples = [ts.parse_line(line) for line in lines("tx1_tx2_xavier_jp4.log")]
    assert all(s.temperatures["PMIC"] == 100.0 for s in samples)
    assert [s.hottest_c for s in samples] == expected


def test_sampler_interval_is_the_milliseconds_it_passes_to_tegrastats():
    """``tegrastats --interval N`` takes milliseconds (its --help; jtop passes
    int(interval * 1000)); the sampler's window attribution needs
    the same interval in seconds."""
    for interval_ms in (500, 750, 1000, 2000):
        sampler = ts.TegrastatsSampler(interval_ms=interval_ms, tool="tegrastats")
        assert sampler.args == ["tegrastats", "--interval", str(interval_ms)]
        assert sampler.interval_s == pytest.approx(interval_ms / 1000.0)


@pytest.mark.parametrize("garbage", ["", "   ", "hello world", "NVPM ERROR: foo", "RAM", "CPU [", "GR3D_FREQ",
                                     "12-01-2025 10:00:00", "VDD_IN 5139mW/", "@@@ %%% ///"])
def test_garbage_is_not_a_sample(garbage):
    assert ts.parse_line(garbage) is None


def test_parse_lines_counts_unparsed_and_blank():
    text = capture("tegrastats/agx_orin_r36_4_4.log") + "not tegrastats at all\n\n"
    samples, unparsed, blank = ts.parse_lines(text.splitlines())
    assert (len(samples), unparsed, blank) == (3, 1, 1)


def test_interval_below_500_ms_is_refused():
    with pytest.raises(EdgeAttnError, match="500 ms"):
        ts.build_args(250, tool="tegrastats")
    assert ts.build_args(500, logfile="/tmp/x.log", tool="tegrastats") == [
        "tegrastats", "--interval", "500", "--logfile", "/tmp/x.log"]
    assert ts.stop_args(tool="tegrastats") == ["tegrastats", "--stop"]


def test_help_capture_lists_the_options_we_use():
    text = capture("tegrastats/help.txt")
    for option in ("--interval <millisec>", "--logfile  <filename>", "--stop"):
        assert option in text


def test_sampler_reads_the_fake_and_terminates_its_own_process(fake_board):
    board = fake_board("orin-nano-8gb", mode=2)
    with ts.TegrastatsSampler(interval_ms=500) as sampler:
        deadline = time.time() + 10
        while len(sampler.samples()) < 2 and time.time() < deadline:
            time.sleep(0.05)
        pid = sampler.pid
    assert pid in board.tegrastats_pids()
    samples = sampler.samples()
    assert len(samples) >= 2
    # the fake replays the captured Orin Nano line with mode-2 rails
    assert samples[0][1].rails_mw == {k: float(v) for k, v in board.mode_rails_mw(2).items()}
    assert samples[0][1].gpu["freqs_mhz"] == [305]
    assert board.live_tegrastats() == []


def test_logfile_run_is_stopped_with_stop(fake_board, tmp_path):
    board = fake_board("nano-4gb")
    log = tmp_path / "t.log"
    process = subprocess.Popen(ts.build_args(500, logfile=str(log), tool=ts.tegrastats_path()),
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        deadline = time.time() + 10
        while (not log.exists() or not log.read_text().strip()) and time.time() < deadline:
            time.sleep(0.05)
        subprocess.run(ts.stop_args(), check=True, stdin=subprocess.DEVNULL, timeout=10)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    parsed = [ts.parse_line(line) for line in log.read_text().splitlines()]
    assert parsed and all(p is not None for p in parsed)
    # non-root run on the Nano replays the non-root capture: no GPU frequency
    assert parsed[0].gpu_freq_mhz is None and "POM_5V_IN" in parsed[0].rails
    assert board.live_tegrastats() == []
