"""The shared writer: a command's outputs are published all together or not at all, a failure names the
destination in one line, and no temporary file, backup or created directory stays behind."""
import errno
import os

import pytest

from edgeattn import _io
from edgeattn._io import all_or_nothing, atomic_path, atomic_write, outputs_now, write_json
from edgeattn.errors import OutputError


def _tree(root):
    return sorted(os.path.relpath(os.path.join(d, n), str(root)) for d, dirs, files in os.walk(str(root))
                  for n in dirs + files)


def test_a_failing_group_publishes_nothing_and_keeps_what_was_there(tmp_path):
    (tmp_path / "a.json").write_text("old a")
    with pytest.raises(RuntimeError):
        with all_or_nothing():
            write_json(str(tmp_path / "a.json"), {"new": 1})
            write_json(str(tmp_path / "plots" / "deep" / "b.json"), {"new": 2})
            with all_or_nothing():  # nested blocks join the outer one
                write_json(str(tmp_path / "c.json"), {"new": 3})
            assert not (tmp_path / "c.json").exists() and (tmp_path / "a.json").read_text() == "old a"
            raise RuntimeError("the command failed after writing")
    assert _tree(tmp_path) == ["a.json"] and (tmp_path / "a.json").read_text() == "old a"


def test_a_successful_group_publishes_everything(tmp_path):
    with all_or_nothing():
        write_json(str(tmp_path / "a.json"), 1)
        with atomic_path(str(tmp_path / "b.bin")) as tmp:
            with open(tmp, "wb") as handle:
                handle.write(b"b")
        write_json(str(tmp_path / "a.json"), 2)  # written twice: the last version wins, no stray temp file
        assert not (tmp_path / "a.json").exists()
        with outputs_now():
            write_json(str(tmp_path / "now.json"), 0)
        assert (tmp_path / "now.json").exists()
    assert _tree(tmp_path) == ["a.json", "b.bin", "now.json"] and (tmp_path / "a.json").read_text() == "2\n"


def test_a_rename_failing_mid_commit_puts_the_earlier_files_back(tmp_path, monkeypatch):
    (tmp_path / "a.json").write_text("old a")
    real_replace = os.replace
    calls = []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == 2 and str(dst).endswith("b.json"):
            raise OSError(errno.EIO, os.strerror(errno.EIO), src, None, dst)
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OutputError) as caught:
        with all_or_nothing():
            write_json(str(tmp_path / "a.json"), {"new": 1})
            write_json(str(tmp_path / "b.json"), {"new": 2})
    assert caught.value.format_message() == "cannot write {}: Input/output error".format(tmp_path / "b.json")
    assert _tree(tmp_path) == ["a.json"] and (tmp_path / "a.json").read_text() == "old a"


def test_write_errors_name_the_destination_not_the_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "new" / "out.json"

    def fsync(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", fsync)
    for writer in ("write", "path"):
        with pytest.raises(OutputError) as caught:
            if writer == "write":
                with atomic_write(str(target)) as handle:
                    handle.write(b"x")
            else:
                with atomic_path(str(target)) as tmp:
                    open(tmp, "wb").close()
        assert caught.value.format_message() == "cannot write {}: No space left on device".format(target)
        assert _tree(tmp_path) == []  # neither the temporary file nor the directory made for it


def test_a_writer_failing_inside_atomic_path_names_the_destination(tmp_path):
    """A writer given the temporary path (torch.onnx.export) that hits a full disk: its OSError names no file."""
    target = tmp_path / "new" / "model.onnx"
    with pytest.raises(OutputError) as caught:
        with atomic_path(str(target)) as tmp:
            with open(tmp, "wb") as handle:
                handle.write(b"partial")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert caught.value.format_message() == "cannot write {}: No space left on device".format(target)
    assert _tree(tmp_path) == []


@pytest.mark.parametrize("writer", ["write", "path"])
def test_an_input_error_inside_the_block_is_not_blamed_on_the_output(tmp_path, writer):
    with pytest.raises(FileNotFoundError):
        with (atomic_write if writer == "write" else atomic_path)(str(tmp_path / "out.json")):
            open(str(tmp_path / "missing-input"))
    assert _tree(tmp_path) == []


def test_check_output_path(tmp_path):
    assert _io.check_output_path(str(tmp_path / "a" / "b" / "c.json")) == str(tmp_path / "a" / "b" / "c.json")
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="is not a directory"):
        _io.check_output_path(str(tmp_path / "file" / "x.json"))
    with pytest.raises(OutputError, match="Is a directory"):
        _io.check_output_path(str(tmp_path))


def test_check_output_path_refuses_a_read_only_place_before_the_work(place, invoke, monkeypatch):
    """check_output_path exists to fail *before* minutes of building or benchmarking, not after: a read-only
    destination (also one whose missing directories would be created there) is refused at once, and
    `edgeattn bench --json` into it never starts the benchmark."""
    import edgeattn.bench

    target = place("dest")
    target.freeze()
    reason = "Read-only file system" if target.real else "Permission denied"
    for destination in (target.join("b.json"), target.join("new", "deeper", "b.json")):
        with pytest.raises(OutputError) as caught:
            _io.check_output_path(destination)
        assert caught.value.format_message() == "cannot write {}: {}".format(destination, reason)
    started = []
    monkeypatch.setattr(edgeattn.bench, "run_benchmark", lambda *args, **kwargs: started.append(args))
    result = invoke(["bench", "model.onnx", "--json", target.join("b.json")])
    assert result.exit_code == 2 and result.stderr.endswith(reason + "\n") and started == []
