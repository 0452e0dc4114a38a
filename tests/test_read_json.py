"""edgeattn._io.read_json: the one reader of edgeattn's JSON records (engine manifests, sweep results and resume
files, ops records, preset records): one-line errors naming the file, and the schema id checked."""
import json

import pytest

from edgeattn._io import read_json
from edgeattn.errors import EdgeAttnError


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def _error(*args, **kwargs):
    with pytest.raises(EdgeAttnError) as caught:
        read_json(*args, **kwargs)
    message = caught.value.format_message()
    assert "\n" not in message
    return message


def test_a_record_with_its_schema_is_returned_as_written(tmp_path):
    record = {"schema": "edgeattn.test/1", "rows": [1, 2.5, None], "name": "ü"}
    path = _write(tmp_path / "r.json", json.dumps(record))
    assert read_json(path, "a test record", schema="edgeattn.test/1") == record
    assert read_json(path, "a test record") == record  # no schema asked: any JSON object


def test_each_failure_is_one_line_naming_the_file(tmp_path):
    missing = str(tmp_path / "missing.json")
    assert _error(missing, "a test record", what="the test file") == "no such file: the test file " + missing
    broken = _write(tmp_path / "broken.json", '{"schema": ')
    message = _error(broken, "a test record", what="the test file")
    assert message.startswith("cannot read the test file {}: it is not JSON (".format(broken))
    assert _error(str(tmp_path), "a test record").startswith("cannot read {}: ".format(tmp_path))
    undecodable = tmp_path / "latin1.json"
    undecodable.write_bytes(b'{"name": "\xe9"}')
    assert "it is not JSON" in _error(str(undecodable), "a test record")


def test_not_an_object_or_another_schema_is_refused(tmp_path):
    listing = _write(tmp_path / "list.json", "[1, 2]")
    assert _error(listing, "a test record", schema="edgeattn.test/1") == \
        "{} is not a test record (a JSON object)".format(listing)
    other = _write(tmp_path / "other.json", json.dumps({"schema": "edgeattn.sweep/1"}))
    assert _error(other, "a test record", schema="edgeattn.test/1") == \
        "{} is not a test record (schema 'edgeattn.sweep/1', expected edgeattn.test/1)".format(other)
    unlabelled = _write(tmp_path / "unlabelled.json", "{}")
    assert "(schema None, expected edgeattn.test/1)" in _error(unlabelled, "a test record", schema="edgeattn.test/1")


@pytest.mark.parametrize("text", ["[" * 100000, '{"a": ' * 100000])
def test_nesting_thousands_deep_is_refused_in_one_line(tmp_path, text):
    """Found by fuzzing a manifest: json's reader raises RecursionError, not ValueError, past the recursion limit."""
    deep = _write(tmp_path / "deep.json", '{"schema": "edgeattn.test/1", "x": ' + text)
    assert _error(deep, "a test record", what="the test file") == \
        "cannot read the test file {}: it is not a record (JSON nested too deep to read)".format(deep)


def test_finite_refuses_numbers_python_reads_as_non_finite(tmp_path):
    record = _write(tmp_path / "r.json", '{"schema": "edgeattn.test/1", "x": [1.5, 2, -0.0, 1e308]}')
    assert read_json(record, "a test record", finite=True)["x"] == [1.5, 2, -0.0, 1e308]
    for odd in ("NaN", "Infinity", "-Infinity", "1e309", "-1E400"):
        damaged = _write(tmp_path / "odd.json", '{"schema": "edgeattn.test/1", "x": [1.5, ODD]}'.replace("ODD", odd))
        assert read_json(damaged, "a test record")["x"][0] == 1.5  # taken as it is without finite
        assert _error(damaged, "a test record", finite=True) == \
            "cannot read {}: it is not JSON ({} is no number of a record edgeattn writes)".format(damaged, odd)
