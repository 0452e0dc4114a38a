"""A fixed handful of the fault-injected sweeps of benchmarks/sweep_faults.py (the committed run has hundreds): each
sweep runs in its own process on a fake AGX Orin, gets one fault, and is resumed until complete; the board must be
back in its original mode and clock state, every measurement there exactly once, and the fault named."""
import importlib.util
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def faults():
    spec = importlib.util.spec_from_file_location("sweep_faults", os.path.join(REPO, "benchmarks", "sweep_faults.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("kind, moment, original, locked", [
    ("sigkill", {"from": "resume-file", "fraction": 0.0}, 3, True),  # killed once the resume file exists
    ("enospc-row", 2, 0, False),                                        # the disk fills while a row is written
    ("tegrastats-exit", 1, 0, False),                                   # tegrastats dies after one line
    ("tegrastats-stall", 1, 3, False),                                  # tegrastats goes silent after one line
    ("clocks-fail", 1, 0, False),                                       # jetson_clocks --show fails once
])
def test_a_faulted_sweep_is_resumed_to_the_same_rows_and_the_original_board(faults, tmp_path, monkeypatch, kind,
                                                                           moment, original, locked):
    monkeypatch.setenv("SWEEP_DRIVER_TIMEOUT_CAP_S", "20")
    models = faults._placeholders(str(tmp_path))
    trial = {"index": 0, "kind": kind, "moment": moment, "original_mode": original, "locked_before": locked,
             "fan_pwm": 77, "modes": [0, 3], "models": models[:1], "repeats": 2, "clocks": "max"}
    result = faults.run_trial(trial, str(tmp_path), trtexec=None, calibrated_s=1.0)
    assert result["fired"], result
    assert result["ok"], result
    assert result["rows"] == result["rows_expected"] == 4 and result["rows_duplicated"] == 0
    assert result["board"] == {"mode": original, "locked": locked, "fan_pwm": 77}
    assert result["named"] is True and result["runs"] == (1 if kind.startswith(("tegrastats", "clocks")) else 2)
