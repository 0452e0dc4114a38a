"""`edgeattn models`: table, --json, --resolution, patterns, and bad input -> one line, exit 2."""
import json

import pytest

pytest.importorskip("torch")

from edgeattn.models import list_models  # noqa: E402


@pytest.fixture(scope="module")
def full_json():
    from click.testing import CliRunner

    from edgeattn.cli import cli

    result = CliRunner().invoke(cli, ["models", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_json_lists_every_model_at_224(full_json):
    assert full_json["resolution"] == 224 and "norms" in full_json["counting"]
    rows = {row["name"]: row for row in full_json["models"]}
    assert sorted(rows) == list_models()
    for row in rows.values():
        if "_ms_" in row["name"]:  # the Multi-Spot Table 1 ViTs exist at 384 only (a 24x24 patch grid)
            assert "Table 1 settings are for 384x384" in row["error"]
            continue
        assert row["error"] is None
        assert row["params"] > 0 and row["macs"] >= row["macs_fa"] > 0
        assert row["macs"] - row["macs_fa"] == row["softmax_core_macs"]
    assert rows["cswin_t24181_elfatt"]["params"] == 20393320
    assert rows["cswin_t24181_elfatt"]["paper"]["macs"]["224"] == ["4.44G", "4.13G"]


def test_table(invoke):
    result = invoke(["models", "cswin_t24181"], expect=0)
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["model", "params", "MACs", "MACs"] and "of which NR" in lines[0]
    names = [line.split()[0] for line in lines[1:]]
    assert names == list_models("cswin_t24181*")
    elfatt = next(line for line in lines if line.startswith("cswin_t24181_elfatt"))
    assert "20.39M" in elfatt and "4.420G" in elfatt and "4.44G/4.13G" in elfatt


def test_resolution_384(invoke):
    result = invoke(["models", "--resolution", "384", "--json", "cswin_b36292*"], expect=0)
    rows = {row["name"]: row for row in json.loads(result.stdout)["models"]}
    assert {"cswin_b36292_global", "cswin_b36292_elfatt"} <= set(rows)
    # ELFATT Table I at 384: GLOBAL 110.89 G, ELFATT 51.21 G
    assert abs(rows["cswin_b36292_global"]["macs"] / 110.89e9 - 1) < 0.01
    assert abs(rows["cswin_b36292_elfatt"]["macs"] / 51.21e9 - 1) < 0.01


def test_some_models_unavailable_at_a_resolution(invoke):
    result = invoke(["models", "-r", "200", "cswin_t24181"], expect=0)
    assert "not available at 200x200: cswin_t24181_elfatt: stage 1 map 50x50" in result.stdout
    data = json.loads(invoke(["models", "-r", "200", "--json", "cswin_t24181"], expect=0).stdout)
    rows = {row["name"]: row for row in data["models"]}
    assert rows["cswin_t24181_global"]["error"] is None
    assert "stage 1 map 50x50" in rows["cswin_t24181_elfatt"]["error"]


@pytest.mark.parametrize("args,words", [
    (["--resolution", "0"], "Invalid value for '--resolution'"),
    (["--resolution", "abc"], "Invalid value for '--resolution'"),
    (["--resolution", "200", "cswin_t24181_elfatt"], "stage 1 map 50x50 is not divisible"),
    (["--resolution", "8", "vit_tiny*"], "none of the 2 matching models accepts resolution 8"),
    (["no_such_model"], "no registered model matches 'no_such_model'"),
])
def test_bad_input_exits_2_with_one_line(invoke, args, words):
    result = invoke(["models"] + args, expect=2)
    assert words in result.stderr
    assert result.stdout == ""
    if "Invalid value" not in words:
        assert result.stderr.startswith("edgeattn: error: ") and result.stderr.count("\n") == 1
