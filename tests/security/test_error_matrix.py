"""The bad-input matrix: every command that takes a file, given a missing, empty, random, truncated, wrong-kind
or directory input, or a read-only or full destination, prints one `edgeattn: error:` line naming the file,
exits with status 2 and leaves nothing behind."""
import json
import os
import random
import shutil

import pytest

from bench_helpers import install_trtexec, matmul_model
from compare_helpers import classifier_bytes, classifier_weight
from jetson_support import capture
from security_support import one_error_line
from edgeattn.sweep.results import ResultStore

INPUT_KINDS = ["missing", "empty", "random", "truncated", "wrong-kind", "directory"]


def _random_bytes(size=4096, seed=0):
    rng = random.Random(seed)
    return bytes(rng.getrandbits(8) for _ in range(size))


def _results_store(directory):
    """A small but complete sweep result (two models, one mode, two repeats) as `edgeattn sweep` writes it."""
    store = ResultStore(str(directory), context={"profile": "host-cpu", "profile_kind": "host-cpu",
                                                 "options": {"repeats": 2}})
    for model, fps in (("m1", 10.0), ("m2", 20.0)):
        for repeat in (1, 2):
            latency = 1000.0 / fps
            store.add({
                "model": model, "model_key": "/models/{}.onnx".format(model), "model_path": "/models/x.onnx",
                "precision": "fp32", "precision_requested": "fp32", "mode_id": 1, "mode_name": "1 thread",
                "mode_budget_w": None, "mode_threads": 1, "threads": 1, "repeat": repeat, "backend": "onnxruntime",
                "throughput_items_per_s": fps + repeat, "latency_ms": {"mean": latency, "std": 0.0},
                "power": None, "energy_per_item_j": None, "items_per_s_per_w": None, "throttled": None,
                "window": {"start_unix": 1.0, "end_unix": 2.0}})
    store.status = "complete"
    store.save()
    return store.json_path


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """One valid input of each kind the commands read."""
    base = tmp_path_factory.mktemp("good")
    files = {}
    files["onnx"] = str(base / "good.onnx")
    with open(files["onnx"], "wb") as handle:
        handle.write(matmul_model(features=8))
    files["log"] = str(base / "tegrastats.log")
    with open(files["log"], "w") as handle:
        handle.write(capture("tegrastats/orin_nano_super_jp62.log"))
    sweep = base / "sweep"
    sweep.mkdir()
    files["results"] = _results_store(sweep)
    files["profile"] = str(base / "profile.yaml")
    from edgeattn.profiles import profile_dir

    shutil.copy(os.path.join(profile_dir(), "host-cpu.yaml"), files["profile"])
    files["trtexec"] = install_trtexec(base / "trt", "10.3.0")
    files["classifier"] = str(base / "classifier.onnx")
    with open(files["classifier"], "wb") as handle:
        handle.write(classifier_bytes(classifier_weight()))
    return files


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    pytest.importorskip("torch")
    from edgeattn import save_checkpoint
    from edgeattn.models import create_model

    path = str(tmp_path_factory.mktemp("ckpt") / "vit.pt")
    save_checkpoint(create_model("vit_tiny_softmax"), path)
    return path


def _make_input(kind, valid, wrong, where, name, cut=None):
    """Write a bad input of ``kind`` at ``where/name``: derived from the ``valid`` file (truncated to ``cut``
    bytes, else half), or ``wrong`` (a valid file of another kind)."""
    path = os.path.join(str(where), name)
    if kind == "missing":
        return path
    if kind == "directory":
        os.makedirs(path)
        return path
    with open(valid, "rb") as handle:
        data = handle.read()
    content = {"empty": b"", "random": _random_bytes(),
               "truncated": data[: len(data) // 2 if cut is None else cut]}.get(kind)
    if kind == "wrong-kind":
        with open(wrong, "rb") as handle:
            content = handle.read()
    with open(path, "wb") as handle:
        handle.write(content)
    return path


def _case(command, kind, tmp_path, good, checkpoint=None):
    """(argv, the input path, the output path that must not appear) for one command and one kind of input."""
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    if command == "export":
        source = _make_input(kind, checkpoint, good["onnx"], inputs, "model.pt")
        return ["export", source, "-o", str(out / "x.onnx"), "--no-check"], source, out
    if command == "power":
        # tegrastats logs are line records: one cut after complete lines is still a log (see the test below),
        # one cut inside the first timestamp holds no sample at all
        source = _make_input(kind, good["log"], good["onnx"], inputs, "tegrastats.log", cut=15)
        return ["power", source], source, out
    if command == "profiles":
        source = _make_input(kind, good["profile"], good["results"], inputs, "board.yaml")
        return ["profiles", source], source, out
    if command == "report":
        sweep = inputs / "sweep"
        if kind != "missing":
            sweep.mkdir()
            bench_record = json.dumps({"schema": "edgeattn.bench/1", "latency_ms": {}}).encode()
            wrong = inputs / "bench.json"
            wrong.write_bytes(bench_record)
            _make_input(kind, good["results"], str(wrong), sweep, "results.json")
        return ["report", str(sweep)], str(sweep), sweep / "report.md"
    if command.startswith("compare"):
        # compare takes image classifiers: the wrong kind is a valid ONNX model of another kind (no image input);
        # a checkpoint side is read by PyTorch, with the arch of the image classifier it is compared with
        if command == "compare-checkpoint":
            source = _make_input(kind, checkpoint, good["classifier"], inputs, "model.pt")
        else:
            source = _make_input(kind, good["classifier"], good["onnx"], inputs, "model.onnx")
        pair = [good["classifier"], source] if command == "compare-reference" else [source, good["classifier"]]
        return ["compare"] + pair + ["--quiet", "--json", str(out / "c.json")], source, out
    source = _make_input(kind, good["onnx"], good["log"], inputs, "model.onnx")
    argv = {
        "inspect": ["inspect", source],
        "build": ["build", source, "--backend", "trtexec", "--trtexec", good["trtexec"], "-o", str(out / "x.engine")],
        "bench": ["bench", source, "--iterations", "2", "--warmup-s", "0", "--json", str(out / "b.json")],
        "sweep": ["sweep", source, "--profile", "host-cpu", "--modes", "1", "--repeats", "1", "--duration-s", "0.05",
                  "--warmup-s", "0", "-o", str(out / "sweep")],
    }[command]
    return argv, source, out


@pytest.mark.parametrize("kind", INPUT_KINDS)
@pytest.mark.parametrize("command", ["export", "inspect", "build", "bench", "sweep", "power", "report", "profiles",
                                     "compare", "compare-reference", "compare-checkpoint"])
def test_bad_input_is_one_line_and_leaves_nothing(invoke, tmp_path, good, command, kind, request, monkeypatch):
    if command in ("export", "compare-checkpoint"):
        ckpt = request.getfixturevalue("checkpoint")
    else:
        ckpt = None
    monkeypatch.chdir(str(tmp_path))
    argv, source, must_not_exist = _case(command, kind, tmp_path, good, ckpt)
    before = sorted(os.listdir(str(tmp_path / "in")))
    result = invoke(argv)
    line = one_error_line(result)
    if command.startswith("compare"):
        assert result.stdout == ""  # no report of a comparison that did not happen
    # the message names the file it is about (as given, or the results.json inside a sweep directory)
    assert os.path.basename(source.rstrip("/")) in line, line
    assert not os.path.exists(str(must_not_exist))
    assert sorted(os.listdir(str(tmp_path / "in"))) == before


def test_power_summarises_the_complete_lines_of_a_cut_log(invoke, tmp_path, good):
    with open(good["log"]) as handle:
        text = handle.read()
    first, second = text.splitlines()[:2]
    log = tmp_path / "cut.log"
    log.write_text(first + "\n" + second[: len(second) // 3])
    data = json.loads(invoke(["power", str(log), "--json"], expect=0).stdout)
    assert data["samples"] >= 1 and data["rails_w"]["VDD_IN"]["max"] == 5.251


def test_report_names_the_malformed_row(invoke, tmp_path, good):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    with open(good["results"]) as handle:
        data = json.load(handle)
    data["rows"][2]["throughput_items_per_s"] = "fast"
    (sweep / "results.json").write_text(json.dumps(data))
    line = one_error_line(invoke(["report", str(sweep)]))
    assert line.endswith("results.json: result row 3 (model 'm2', mode 1, repeat 1) 'throughput_items_per_s' must "
                         "be a number >= 0, got 'fast'")
    del data["rows"][0]["mode_id"]
    (sweep / "results.json").write_text(json.dumps(data))
    assert "result row 1 (model 'm1', mode None, repeat 1) has no 'mode_id'" in one_error_line(
        invoke(["report", str(sweep)]))
    data["rows"][0] = ["not", "a", "row"]
    (sweep / "results.json").write_text(json.dumps(data))
    assert "result row 1 is a JSON list, not an object" in one_error_line(invoke(["report", str(sweep)]))
    assert sorted(os.listdir(str(sweep))) == ["results.json"]


# -- destinations that cannot be written ---------------------------------------------------------------------------
def _output_case(command, place, tmp_path, good, checkpoint=None):
    """(argv, the destination the message must name, files that must not exist afterwards)."""
    if command == "export":
        return (["export", "--arch", "vit_tiny_softmax", "--no-check", "-o", place.join("x.onnx")],
                place.join("x.onnx"), [])
    if command == "export-summary":
        # the ONNX is fine; its summary cannot be written, so neither may stay
        return (["export", "--arch", "vit_tiny_softmax", "--no-check", "-o", str(tmp_path / "x.onnx"),
                 "--summary-json", place.join("summary.json")], place.join("summary.json"), [tmp_path / "x.onnx"])
    if command == "build":
        return (["build", good["onnx"], "--backend", "trtexec", "--trtexec", good["trtexec"], "-o",
                 place.join("x.engine")], place.join("x.engine"), [])
    if command == "bench":
        return (["bench", good["onnx"], "--iterations", "2", "--warmup-s", "0", "--json", place.join("b.json")],
                place.join("b.json"), [])
    if command == "sweep":
        return (["sweep", good["onnx"], "--profile", "host-cpu", "--modes", "1", "--repeats", "1", "--duration-s",
                 "0.05", "--warmup-s", "0", "-o", place.join("sweep")], place.join("sweep"), [])
    if command == "report":
        shutil.copy(good["results"], place.join("results.json"))
        return ["report", place.path], place.path, []
    if command == "compare":
        return (["compare", good["classifier"], good["classifier"], "--quiet", "--json", place.join("c.json")],
                place.join("c.json"), [])
    raise AssertionError(command)


OUTPUT_COMMANDS = ["export", "export-summary", "build", "bench", "sweep", "report", "compare"]


@pytest.mark.parametrize("how", ["read-only", "disk-full", "directory-in-the-way"])
@pytest.mark.parametrize("command", OUTPUT_COMMANDS)
def test_unwritable_destination_is_one_line_and_leaves_nothing(invoke, tmp_path, good, place, command, how, request,
                                                              monkeypatch):
    if command.startswith("export"):
        pytest.importorskip("torch")
    if command in ("bench", "compare"):
        pytest.importorskip("onnxruntime")
    monkeypatch.chdir(str(tmp_path))
    target = place("dest")
    argv, named, not_left = _output_case(command, target, tmp_path, good)
    if how == "directory-in-the-way":
        # a directory where the output file goes (for a sweep: a file where its directory goes)
        named = os.path.join(named, "report.md") if command == "report" else named
        if command == "sweep":
            open(named, "w").close()
        else:
            os.mkdir(named)
    before = target.listing()
    if how == "read-only":
        target.freeze()
    elif how == "disk-full":
        target.fill()
    result = invoke(argv)
    line = one_error_line(result, progress_allowed=True)
    if command == "compare":
        # the comparison ran, but a report on stdout with exit status 2 would read as a result that was kept
        assert result.stdout == ""
    # trtexec writes the engine itself: on a full disk it is trtexec that fails, and its reason is reported
    assert named in line or (command == "build" and line.startswith("edgeattn: error: trtexec ")), line
    reason = {"read-only": "Read-only file system" if target.real else "Permission denied",
              "disk-full": "No space left on device",
              "directory-in-the-way": "exists and is not a directory" if command == "sweep" else "Is a directory"}[how]
    assert line.endswith(reason), line
    assert [p for p in target.listing() if p != ".filler"] == before
    for path in not_left:
        assert not os.path.exists(str(path))


# -- a file of another kind edgeattn knows: recognised before any parser reads it -----------------------------------
#: what each kind of file given is called in the refusal (independent wording, not the product's table)
GIVEN_WORDS = {"onnx": "an ONNX model", "results": "a sweep's results.json", "sweep-dir": "a sweep directory",
               "state": "a sweep's resume file", "manifest": "an engine manifest", "profile": "board profile",
               "log": "a tegrastats log", "trtexec-log": "a trtexec console log"}
#: command -> (the kinds it takes, the words saying what it expected)
EXPECTED_WORDS = {"inspect": (("onnx",), "an ONNX model, a TensorRT engine or a trtexec --exportLayerInfo file"),
                  "build": (("onnx",), "an ONNX model"),
                  "bench": (("onnx",), "an ONNX model or a TensorRT engine"),
                  "power": (("log",), "a tegrastats log"), "profiles": (("profile",), "a board profile"),
                  "report": (("sweep-dir",), "a sweep directory")}


@pytest.fixture(scope="module")
def other_kinds(good, tmp_path_factory):
    from edgeattn.sweep.state import save_state

    base = tmp_path_factory.mktemp("kinds")
    files = {"onnx": good["onnx"], "results": good["results"], "sweep-dir": os.path.dirname(good["results"]),
             "profile": good["profile"], "log": good["log"]}
    save_state(str(base), {"options": {"models": []}, "plan": [1], "status": "running"})
    files["state"] = str(base / "sweep-state.json")
    files["manifest"] = str(base / "model.engine.json")
    with open(files["manifest"], "w") as handle:
        json.dump({"schema": "edgeattn.engine/1", "engine": {"file": "model.engine"}, "tensorrt": {"version": "10.3.0"}},
                  handle)
    files["trtexec-log"] = str(base / "trtexec.txt")
    shutil.copy(os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "trtexec",
                             "log_8.2.1_nano_build.txt"), files["trtexec-log"])
    return files


def _kind_argv(command, path, good, out):
    return {"inspect": ["inspect", path],
            "build": ["build", path, "--backend", "trtexec", "--trtexec", good["trtexec"], "-o", str(out / "x.engine")],
            "bench": ["bench", path, "--iterations", "2", "--warmup-s", "0", "--json", str(out / "b.json")],
            "power": ["power", path], "profiles": ["profiles", path], "report": ["report", path]}[command]


@pytest.mark.parametrize("command, given", [(command, given) for command in sorted(EXPECTED_WORDS)
                                             for given in sorted(GIVEN_WORDS)
                                             if given not in EXPECTED_WORDS[command][0]])  # not the kind it takes
def test_a_file_of_another_kind_is_named_with_what_was_expected(invoke, tmp_path, good, other_kinds, command, given,
                                                                monkeypatch):
    accepted, expected = EXPECTED_WORDS[command]
    monkeypatch.chdir(str(tmp_path))
    path = other_kinds[given]
    before = sorted(os.listdir(os.path.dirname(path)))
    result = invoke(_kind_argv(command, path, good, tmp_path / "out"))
    line = one_error_line(result)
    assert path in line and GIVEN_WORDS[given] in line, line
    assert expected in line, line
    assert not os.path.exists(str(tmp_path / "out"))
    assert sorted(os.listdir(os.path.dirname(path))) == before


def test_inspect_given_a_sweeps_results_json_says_so(invoke, good):
    """The known case: protobuf's JSON reader used to take results.json (by its suffix) and die in a traceback."""
    line = one_error_line(invoke(["inspect", good["results"]]))
    assert line == ("edgeattn: error: `edgeattn inspect` expects an ONNX model, a TensorRT engine or a trtexec "
                    "--exportLayerInfo file: {} is a sweep's results.json (schema edgeattn.sweep/1); give its directory "
                    "to `edgeattn report`".format(good["results"]))


def test_an_onnx_model_named_json_or_txt_is_still_read_as_protobuf(invoke, good, tmp_path):
    for suffix in (".json", ".txt"):
        renamed = tmp_path / ("model" + suffix)
        shutil.copy(good["onnx"], str(renamed))
        assert json.loads(invoke(["inspect", str(renamed), "--json"], expect=0).stdout)["node_count"] >= 1
