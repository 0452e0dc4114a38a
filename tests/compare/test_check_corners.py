"""``edgeattn build --shapes NAME:MIN,OPT,MAX --check`` compares the engine at every corner of its profile (the
fake trtexec runs the engine's ONNX at the shapes it is given, as a real engine runs at its input shape)."""
import json
import os
import stat

from edgeattn.compare.check import profile_corners

SHAPES = "images:1x3x8x8,2x3x8x8,4x3x8x8"


def _logging(trtexec, log):
    """A wrapper beside the fake that appends each command line to ``log`` (a VERSION file beside it too)."""
    wrapper = os.path.join(os.path.dirname(trtexec), "trtexec-logged")
    with open(wrapper, "w") as handle:
        handle.write("#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n".format(log, trtexec))
    os.chmod(wrapper, os.stat(wrapper).st_mode | stat.S_IXUSR)
    return wrapper


def test_build_check_runs_every_profile_corner(invoke, classifier, fake_trtexec, tmp_path, no_jetson):
    log = tmp_path / "commands.log"
    trtexec = _logging(fake_trtexec("10.3.0"), str(log))
    model = classifier("model.onnx")
    result = invoke(["build", model, "--backend", "trtexec", "--trtexec", trtexec, "--plugins", "off", "--shapes",
                     SHAPES, "--check"], expect=0)
    manifest = json.loads((tmp_path / "model.engine.json").read_text())
    corners = manifest["check"]["corners"]
    assert [(c["batch"], c["inputs"], c["passed"]) for c in corners] == [(1, 8, True), (2, 8, True), (4, 8, True)]
    assert "profile corners: batch 1 ok" in result.stdout and "batch 4 ok" in result.stdout
    runs = [line for line in log.read_text().splitlines() if "--exportOutput=" in line]
    shapes = [next(arg for arg in line.split() if arg.startswith("--shapes=")) for line in runs]
    assert shapes == ["--shapes=images:1x3x8x8"] * 8 + ["--shapes=images:2x3x8x8"] * 4 + \
        ["--shapes=images:4x3x8x8"] * 2


def test_build_check_fails_when_a_corner_disagrees(invoke, classifier, fake_trtexec, tmp_path, monkeypatch,
                                                   no_jetson):
    trtexec = fake_trtexec("10.3.0")
    model = classifier("model.onnx")
    monkeypatch.setenv("FAKE_TRTEXEC_OUTPUT_ERROR", "0.5")
    result = invoke(["build", model, "--backend", "trtexec", "--trtexec", trtexec, "--plugins", "off", "--shapes",
                     SHAPES, "--check"], expect=1)
    check = json.loads((tmp_path / "model.engine.json").read_text())["check"]
    assert not check["passed"] and [c["passed"] for c in check["corners"]] == [False, False, False]
    assert any(failure.startswith("batch 4: ") for failure in check["failures"])
    assert "check      FAILED" in result.stdout


def test_profile_corners():
    def manifest(low, opt, high):
        return {"profiles": [{"inputs": {"images": {"min": low, "opt": opt, "max": high}}}]}

    assert profile_corners(manifest([1, 3, 8, 8], [4, 3, 8, 8], [8, 3, 8, 8])) == [1, 4, 8]
    assert profile_corners(manifest([2, 3, 8, 8], [2, 3, 8, 8], [4, 3, 8, 8])) == [2, 4]
    assert profile_corners(manifest([1, 3, 8, 8], [1, 3, 8, 8], [1, 3, 8, 8])) == [None]  # static
    assert profile_corners(manifest([1, 3, 8, 8], [1, 3, 16, 16], [1, 3, 32, 32])) == [None]  # H, W vary
    assert profile_corners(None) == [None]
