"""Every parser and loader on a fixed-seed sample of hypothesis inputs drawn from real captures and files (see
fuzz_targets for the properties; benchmarks/fuzz.py runs 10^4 examples of each)."""
import pytest
from hypothesis import HealthCheck, Phase, given, settings

import fuzz_corpus
import fuzz_targets

#: examples per target in CI: a few seconds each on this project's two-core CI machine
CI_EXAMPLES = 40


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    return fuzz_corpus.build(str(tmp_path_factory.mktemp("fuzz-corpus")))


def _names():
    return ["tegrastats.line", "tegrastats.log", "power.lines", "nvpmodel.query", "nvpmodel.conf",
            "nvpmodel.parse_verbose", "nvpmodel.switch", "jetson_clocks.show", "board.identity", "ina3221.sysfs",
            "trtexec.log", "trtexec.times", "trtexec.profile", "trtexec.layer_info", "trtexec.version",
            "engine.manifest", "sweep.state", "sweep.results", "sweep.rows", "profiles.yaml", "checkpoint.header",
            "checkpoint.load", "onnx.inspect", "filekind.sniff"]


def test_every_target_is_sampled(corpus):
    assert sorted(fuzz_targets.targets(corpus)) == sorted(_names())


@pytest.mark.parametrize("name", _names())
def test_parser_returns_or_raises_one_line(corpus, name, tmp_path, monkeypatch):
    target = fuzz_targets.targets(corpus)[name]
    if not fuzz_targets.available(target):
        pytest.skip("needs {}".format(target.needs))
    empty = tmp_path / "cwd"
    empty.mkdir()
    monkeypatch.chdir(str(empty))  # a parser that writes a relative file would leave it here

    @settings(max_examples=CI_EXAMPLES, derandomize=True, database=None, deadline=None,
              phases=[Phase.explicit, Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck))
    @given(target.strategy)
    def run(value):
        fuzz_targets.check(target, value, str(tmp_path / "work"))

    run()
    assert list(empty.iterdir()) == []


def test_the_watch_catches_a_write_and_a_read_outside_the_input(corpus, tmp_path):
    """The properties can fail: a parser that writes a file, or reads one beside its input, is reported."""
    outside = tmp_path / "secret.txt"
    outside.write_text("x")

    def writes(_):
        with open(str(tmp_path / "left-behind.txt"), "w") as handle:
            handle.write("x")

    def reads(_):
        with open(str(outside)) as handle:
            return handle.read()

    def crashes(_):
        return {}["missing"]

    def two_lines(_):
        from edgeattn.errors import EdgeAttnError

        error = EdgeAttnError("x")
        error.message = "first\nsecond"
        raise error

    for run, expected in ((writes, "writes"), (reads, "reads"), (two_lines, "not one line")):
        with pytest.raises(fuzz_targets.Violation, match=expected):
            fuzz_targets.check(fuzz_targets.Target("t", None, run), "", str(tmp_path / "work"))
    with pytest.raises(KeyError):
        fuzz_targets.check(fuzz_targets.Target("t", None, crashes), "", str(tmp_path / "work"))
    with pytest.raises(fuzz_targets.Violation, match="JSON cannot carry"):
        fuzz_targets.check(fuzz_targets.Target("t", None, lambda _: [float("nan")]), "", str(tmp_path / "work"))
