"""The options several commands share (edgeattn/cli/options.py) mean one thing everywhere: ``--plugins`` is the
plugin mode (on, off, auto), ``--plugin-lib`` the library; the old library spelling ``--plugins LIB`` is refused
in one line naming ``--plugin-lib`` before anything runs."""
import pytest


def _one_error_line(result):
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("edgeattn: error: ")
    return result.stderr


@pytest.mark.parametrize("command", ["bench", "compare"])
def test_the_old_library_spelling_is_refused_naming_plugin_lib(invoke, tmp_path, command):
    library = str(tmp_path / "libedgeattn_plugins.so")
    models = [str(tmp_path / "m.engine")] + ([str(tmp_path / "m.onnx")] if command == "compare" else [])
    line = _one_error_line(invoke([command] + models + ["--plugins", library]))
    assert "`{} --plugins LIB` is now `--plugin-lib LIB`".format(command) in line and library in line
    # the library spelled --plugin-lib is taken: what fails now is the missing model, not the option
    line = _one_error_line(invoke([command] + models + ["--plugin-lib", library]))
    assert "no such file" in line and "--plugin-lib" not in line


@pytest.mark.parametrize("command", ["build", "sweep"])
def test_plugins_takes_only_a_mode(invoke, tmp_path, command):
    model = str(tmp_path / "m.onnx")
    line = _one_error_line(invoke([command, model, "--plugins", "/opt/lib.so"]))
    assert "--plugins takes on, off or auto, not '/opt/lib.so'" in line and "--plugin-lib" in line


def test_shared_options_read_the_same_in_every_command(invoke):
    """Declared once: each shared option has the same help text wherever it appears."""
    def option_help(command, option):
        lines = invoke([command, "--help"], expect=0).stdout.splitlines()
        start = next(i for i, line in enumerate(lines) if line.strip().startswith(option + " "))
        text = [lines[start].strip()[len(option):]]
        for line in lines[start + 1:]:
            if line.strip().startswith("-") or not line.strip():
                break
            text.append(line.strip())
        return " ".join(" ".join(text).split())

    texts = {command: option_help(command, "--trtexec") for command in ("build", "bench", "compare")}
    assert len(set(texts.values())) == 1 and "$EDGEATTN_TRTEXEC" in texts["bench"], texts
    assert "on|off|auto" in option_help("sweep", "--plugins") and "on|off|auto" in option_help("build", "--plugins")
    for command in ("bench", "compare"):
        assert "--plugins " not in invoke([command, "--help"], expect=0).stdout  # the old spelling is hidden
