"""benchmarks/suite_cost.py, which measures issue 17's target (the suite's time and memory, every process of the
run counted), against processes whose memory is known: each child writes a known number of bytes and holds them."""
import importlib.util
import json
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = 1 << 20

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="needs Linux /proc")


def suite_cost():
    spec = importlib.util.spec_from_file_location("suite_cost", os.path.join(REPO, "benchmarks", "suite_cost.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# A parent that holds PARENT_MB and starts a child holding CHILD_MB (bytes built by repetition: every page
# written, unlike a zeroed bytearray), both alive for a while, then exits with EXIT_CODE.
HOLDER = """
import subprocess, sys, time
held = b"x" * ({parent} << 20)
child = subprocess.Popen([sys.executable, "-c", "import time; held = b'y' * ({child} << 20); time.sleep(1.5)"])
time.sleep(1.5)
child.wait()
sys.exit({code})
"""
PARENT_MB, CHILD_MB, EXIT_CODE = 60, 40, 3


def test_counts_every_process_of_the_run_once(tmp_path):
    out = tmp_path / "cost.json"
    command = [sys.executable, "-c", HOLDER.format(parent=PARENT_MB, child=CHILD_MB, code=EXIT_CODE)]
    status = suite_cost().main(["--json", str(out), "--interval", "0.1", "--"] + command)
    result = json.loads(out.read_text())
    assert status == EXIT_CODE and result["exit_code"] == EXIT_CODE
    held = (PARENT_MB + CHILD_MB) * MB
    # both processes at once, each once: at least what they hold, at most that plus two small interpreters
    assert held <= result["peak_pss_bytes"] < held + 60 * MB
    assert len(result["processes_at_peak"]) == 2
    assert PARENT_MB * MB <= result["peak_process_rss_bytes"] < held
    assert result["peak_rss_sum_bytes"] >= result["peak_pss_bytes"]
    assert result["wall_s"] >= 1.5
    assert result["target"]["memory_met"] is True and result["target"]["memory_bytes"] == 3 * 10**9
    assert not list(tmp_path.glob("*.partial"))


SLOW_TESTS = """
import time

def test_slow():
    time.sleep(0.6)

class TestGroup:
    def test_in_a_class(self):
        time.sleep(0.3)
"""
FAST_TESTS = "def test_fast():\n    pass\n"


def test_reports_the_test_time_of_each_file(tmp_path):
    """An inner pytest run of two files whose tests sleep known times: the result names each file with at least
    that time (a class's tests under their file), the slowest test first."""
    (tmp_path / "test_slow_file.py").write_text(SLOW_TESTS)
    (tmp_path / "test_fast_file.py").write_text(FAST_TESTS)
    out = tmp_path / "cost.json"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)]
    status = suite_cost().main(["--json", str(out), "--interval", "0.1", "--"] + command)
    result = json.loads(out.read_text())
    assert status == 0
    by_file = result["test_s_by_file"]
    slow = [name for name in by_file if name.endswith("test_slow_file.py")]
    fast = [name for name in by_file if name.endswith("test_fast_file.py")]
    assert len(slow) == 1 and len(fast) == 1 and len(by_file) == 2, by_file
    assert by_file[slow[0]] >= 0.9 and by_file[fast[0]] < 0.5
    assert list(by_file) == slow + fast  # slowest file first
    assert result["slowest_tests"][0]["test"].endswith("test_slow_file.py::test_slow")
    assert result["slowest_tests"][0]["s"] >= 0.6
    assert result["test_s_total"] >= 0.9
    assert result["temp_dir"].startswith("as found")


def test_cold_runs_with_an_empty_temp_dir_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    (tmp_path / "cached-by-an-earlier-run").write_text("x")
    listing = tmp_path / "listing.json"
    probe = ("import json, os, sys, tempfile; d = tempfile.gettempdir(); "
             "json.dump([d, os.listdir(d)], open(sys.argv[1], 'w'))")
    out = tmp_path / "cost.json"
    assert suite_cost().main(["--cold", "--json", str(out), "--", sys.executable, "-c", probe, str(listing)]) == 0
    directory, entries = json.loads(listing.read_text())
    assert entries == [] and directory != str(tmp_path)
    assert not os.path.exists(directory)  # deleted after the run
    result = json.loads(out.read_text())
    assert result["temp_dir"] == "empty (--cold)" and result["test_s_by_file"] == {}
