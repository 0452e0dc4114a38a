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
