"""The sweep's row journal (rows.jsonl): a row is on disk when the sweep goes on, appending costs nothing that grows
with the sweep, a torn or failed line is cut off (its measurement is taken again), and --resume takes the rows up
from the journal, also after a SIGKILL left results.json behind the journal."""
import errno
import json
import os

import pytest

import stubbench
from edgeattn.errors import EdgeAttnError, OutputError
from edgeattn.sweep import journal, results, run_sweep
from edgeattn.sweep import state as state_io


def _row(repeat, mode=0, model="m"):
    return {"model": model, "model_key": "/m/" + model, "precision": "fp32", "precision_requested": "fp32",
            "mode_id": mode, "mode_name": "M{}".format(mode), "repeat": repeat, "throughput_items_per_s": 10.0 * repeat,
            "power": {"source": "tegrastats", "rails_w": {"VDD_IN": 5.0}, "total_w": 5.0}}


def _lines(path):
    with open(path, "rb") as handle:
        return handle.read().split(b"\n")


def test_each_row_is_one_line_on_disk_and_nothing_is_rewritten(tmp_path, monkeypatch):
    """Rewriting results.json after every row made a 1000-row sweep 20x slower at its end than at its start."""
    rewrites = []
    real = results.atomic_write
    monkeypatch.setattr(results, "atomic_write", lambda *a, **k: rewrites.append(a) or real(*a, **k))
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(journal.os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    store = results.ResultStore(str(tmp_path))
    rows = [_row(r) for r in (1, 2, 3)]
    for index, row in enumerate(rows, 1):
        store.add(row)
        lines = _lines(store.journal.path)
        assert json.loads(lines[0].decode()) == {"schema": journal.JOURNAL_SCHEMA}
        assert [json.loads(line.decode()) for line in lines[1:-1]] == rows[:index] and lines[-1] == b""
    assert not rewrites and len(synced) >= 3  # every row fsync'd, no whole-file rewrite
    assert store.count == 3 and list(store.rows) == rows
    store.save()
    assert results.load_results(str(tmp_path))["rows"] == rows


def test_a_torn_last_line_is_ignored_and_cut_off_before_the_next_append(tmp_path):
    store = results.ResultStore(str(tmp_path))
    store.add(_row(1))
    store.add(_row(2))
    store.journal.close()
    with open(store.journal.path, "ab") as handle:
        # killed while writing a row longer than the one that comes next: what is left of it must go too
        handle.write(json.dumps(dict(_row(3), padding="x" * 600)).encode()[:500])
    resumed = results.ResultStore(str(tmp_path))
    assert resumed.load_existing() == 2 and resumed.done_keys() == {results.row_key(_row(1)), results.row_key(_row(2))}
    resumed.add(_row(3))
    lines = _lines(resumed.journal.path)
    assert [json.loads(line.decode()) for line in lines[1:-1]] == [_row(1), _row(2), _row(3)] and lines[-1] == b""


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
def test_a_failed_append_leaves_neither_the_row_nor_a_part_of_it(tmp_path, monkeypatch, code):
    """ENOSPC in the middle of a row: the row was kept in memory and written again at the end (a duplicate)."""
    store = results.ResultStore(str(tmp_path))
    store.add(_row(1))
    real = journal._write_all
    failures = []

    def failing(fd, data):
        if not failures:
            failures.append(data)
            real(fd, data[:len(data) // 2])
            raise OSError(code, os.strerror(code))
        real(fd, data)

    monkeypatch.setattr(journal, "_write_all", failing)
    with pytest.raises(OutputError, match="rows.jsonl: " + os.strerror(code)):
        store.add(_row(2))
    assert store.count == 1 and list(store.rows) == [_row(1)]
    assert _lines(store.journal.path)[-1] == b""  # no half line left for the next append to follow
    store.add(_row(2))
    assert list(store.rows) == [_row(1), _row(2)] and len(_lines(store.journal.path)) == 4


def test_a_journal_that_cannot_be_cut_back_takes_no_more_rows(tmp_path, monkeypatch):
    store = results.ResultStore(str(tmp_path))
    store.add(_row(1))

    def failing(fd, data):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    def no_truncate(fd, size):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(journal, "_write_all", failing)
    monkeypatch.setattr(journal.os, "ftruncate", no_truncate)
    with pytest.raises(OutputError):
        store.add(_row(2))
    monkeypatch.undo()
    with pytest.raises(OutputError, match="Input/output error"):
        store.add(_row(3))  # never written after a line it could not cut off


def test_reading_names_the_bad_line_and_reads_each_measurement_once(tmp_path):
    path = str(tmp_path / journal.JOURNAL_FILE)
    header = json.dumps({"schema": journal.JOURNAL_SCHEMA})
    with open(path, "w") as handle:
        handle.write("\n".join([header, json.dumps(_row(1)), json.dumps(dict(_row(1), throughput_items_per_s=1.0)),
                                json.dumps(_row(2))]) + "\n")
    rows = list(journal.read_rows(path, key=results.row_key, problem=results.resumable_row_problem))
    assert rows == [_row(1), _row(2)]  # the first of two rows of one measurement
    with open(path, "a") as handle:
        handle.write("{not json\n" + json.dumps(_row(3)) + "\n")
    with pytest.raises(EdgeAttnError, match=r"rows.jsonl: line 5 is not JSON"):
        list(journal.read_rows(path))
    with open(path, "w") as handle:
        handle.write(header + "\n" + json.dumps(dict(_row(1), repeat=0)) + "\n")
    with pytest.raises(EdgeAttnError, match=r"line 2 'repeat' must be an integer >= 1, got 0"):
        list(journal.read_rows(path, problem=results.resumable_row_problem))
    with open(path, "w") as handle:
        handle.write(json.dumps(_row(1)) + "\n")
    with pytest.raises(EdgeAttnError, match="is not an edgeattn sweep row journal"):
        list(journal.read_rows(path))


def _model(tmp_path):
    path = tmp_path / "m1.onnx"
    path.write_bytes(b"onnx")
    return str(path)


def _sweep(tmp_path, bench, **extra):
    kwargs = dict(profile="host-cpu", modes="1,2", settle_s=0, repeats=2, duration_s=0.01,
                  out_dir=str(tmp_path / "out"), bench=bench, echo=lambda line: None)
    kwargs.update(extra)
    return run_sweep([_model(tmp_path)] if not extra.get("resume") else None, **kwargs)


def _killed_after_three_rows(tmp_path, keep_results_json):
    """A sweep of 4 measurements stopped after its 3rd row, as a SIGKILL leaves it: the resume file says running,
    results.json is as of the last mode end (1 mode = 2 rows) or absent."""
    with pytest.raises(EdgeAttnError):
        _sweep(tmp_path, stubbench.make_bench(sleep_s=0, fail_at=4))
    out = str(tmp_path / "out")
    saved = state_io.load_state(out)
    saved["status"] = "running"
    state_io.save_state(out, saved)
    if keep_results_json:
        data = results.load_results(out)
        data["rows"], data["status"] = data["rows"][:2], "running"
        with open(os.path.join(out, "results.json"), "w") as handle:
            json.dump(data, handle)
    else:
        os.unlink(os.path.join(out, "results.json"))
    return out


@pytest.mark.parametrize("keep_results_json", [True, False])
def test_resume_takes_the_rows_up_from_the_journal(tmp_path, keep_results_json):
    out = _killed_after_three_rows(tmp_path, keep_results_json)
    before = {results.row_key(r): r["started_unix"] for r in journal.read_rows(os.path.join(out, "rows.jsonl"))}
    assert len(before) == 3
    bench = stubbench.make_bench(sleep_s=0)
    outcome = _sweep(tmp_path, bench, resume=True)
    assert outcome.status == "complete" and len(bench.calls) == 1  # only the missing measurement
    rows = results.load_results(out)["rows"]
    assert len(rows) == 4 and len({results.row_key(r) for r in rows}) == 4
    assert all(r["started_unix"] == before[results.row_key(r)] for r in rows if results.row_key(r) in before)


def test_resume_of_a_sweep_from_before_the_journal_moves_its_rows_into_one(tmp_path):
    out = _killed_after_three_rows(tmp_path, keep_results_json=True)
    os.unlink(os.path.join(out, "rows.jsonl"))  # results.json (2 rows) is all that sweep kept
    bench = stubbench.make_bench(sleep_s=0)
    outcome = _sweep(tmp_path, bench, resume=True)
    assert outcome.status == "complete" and len(bench.calls) == 2
    assert len(list(journal.read_rows(os.path.join(out, "rows.jsonl")))) == 4 == len(outcome.rows)


def test_overwrite_starts_a_new_journal(tmp_path):
    """Rows of the replaced sweep left in rows.jsonl would be read as this sweep's (and win over its own)."""
    first = _sweep(tmp_path, stubbench.make_bench(sleep_s=0))
    old = {results.row_key(r): r["started_unix"] for r in first.rows}
    second = _sweep(tmp_path, stubbench.make_bench(sleep_s=0), overwrite=True)
    assert len(second.rows) == 4
    assert all(r["started_unix"] != old[results.row_key(r)] for r in second.rows)
    assert len(_lines(os.path.join(str(tmp_path / "out"), "rows.jsonl"))) == 1 + 4 + 1
