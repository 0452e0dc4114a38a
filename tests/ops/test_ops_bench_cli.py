"""``edgeattn ops-bench`` through click's CliRunner (the ``invoke`` fixture of tests/conftest.py)."""
import json
import os

import pytest


def test_help_lists_the_options(invoke):
    result = invoke(["ops-bench", "--help"], expect=0)
    for option in ("--json", "--tokens", "--heads", "--head-dim", "--window-size", "--threads", "--repeats"):
        assert option in result.stdout


def test_tiny_run_writes_the_table_and_valid_json(invoke, tmp_path):
    out = tmp_path / "sub" / "ops.json"
    result = invoke(["ops-bench", "--tokens", "196", "--repeats", "1", "--min-time", "0", "--threads", "1",
                     "--json", out], expect=0)
    record = json.loads(out.read_text())
    assert record["schema"] == "edgeattn.ops-bench/1"
    assert record["context"]["threads"] == 1 and record["context"]["torch"] and record["context"]["cpu_model"]
    assert record["context"]["gemm"]["gflops"] > 0
    rows = {row["op"]: row for row in record["results"]}
    assert set(rows) >= {"sdpa", "blockify", "effatt", "elfatt", "cswin", "litemla-relu", "litemla-qt", "soft++",
                         "flurka-elu", "flurka-performer", "multispot"}
    assert rows["sdpa"]["speedup_vs_sdpa"] == pytest.approx(1.0)
    for row in rows.values():
        assert row["tokens"] == 196 and "skipped" not in row, row
        assert row["ms"] > 0 and row["gflops"] > 0
        assert row["speedup_vs_sdpa"] == pytest.approx(rows["sdpa"]["ms"] / row["ms"])
    # the table on stdout; progress is drawn only on a terminal, so a pipe's stderr holds just the written path
    assert "elfatt" in result.stdout and "GFLOP/s" in result.stdout
    lines = result.stderr.splitlines()
    assert "wrote {}".format(out) in lines
    assert all(line.startswith("ops-bench: warning: ") for line in lines if line != "wrote {}".format(out)), lines


def test_subset_of_ops_always_includes_the_baseline(invoke, tmp_path):
    out = tmp_path / "ops.json"
    invoke(["ops-bench", "--tokens", "49", "--ops", "elfatt", "--repeats", "1", "--min-time", "0", "--json", out],
           expect=0)
    assert [row["op"] for row in json.loads(out.read_text())["results"]] == ["sdpa", "elfatt"]


@pytest.mark.parametrize("args", [["--tokens", "abc"], ["--tokens", "0"], ["--heads", "0"], ["--repeats", "x"],
                                  ["--ops", "nope"], ["--no-such-option"]])
def test_bad_options_exit_2_without_output_file(invoke, tmp_path, args):
    out = tmp_path / "ops.json"
    result = invoke(["ops-bench", "--tokens", "49"] + args + ["--json", out])
    assert result.exit_code == 2
    assert "Error" in result.stderr
    assert not os.path.exists(out)


def test_gemm_flops_of_the_cores_by_hand():
    """FLOPs = 2 per multiply-accumulate of the core's matrix products, over the work actually done.
    SDPA at N = 15 (a 3 x 5 map), h = 2 heads, d = 4: scores and weighted sum, 2 * 2 * N^2 * d per head
    = 4 * 225 * 4 * 2 = 7200. Blockify with 2 x 2 windows on 3 x 5 (masked, partial windows at their real
    size): two full 2x2 windows (L = 4, 2 * 16), one 2x1 (L = 2, 4), two 1x2 (2 * 4) and one 1x1 (1): sum L^2 = 45,
    4 * 45 * d * h = 1440."""
    pytest.importorskip("torch")
    from edgeattn.ops.benchmark import build_case

    _, flops, details = build_case("sdpa", 15, heads=2, head_dim=4, window_size=2)
    assert (details["height"], details["width"]) == (3, 5) and flops == 7200
    _, flops, details = build_case("blockify", 15, heads=2, head_dim=4, window_size=2)
    assert details["padding"] == "masked" and flops == 1440
    # EFFATT: k^T v and q (k^T v), N * d * d MACs each per head: 2 * 2 * 15*16 * 2 = 1920
    assert build_case("effatt", 15, heads=2, head_dim=4, window_size=2)[1] == 1920
