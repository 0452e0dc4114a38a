"""The README stays true: every command is documented, the Quickstart has exactly two commands, and .ci/run runs
the Quickstart's test command."""
import os
import re

from edgeattn.cli import COMMANDS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as handle:
        return handle.read()


def _quickstart_block(marker):
    match = re.search(r"<!-- quickstart:{} -->\s*```sh\n(.*?)\n```".format(marker), _readme(), re.S)
    assert match, "README has no quickstart:{} block".format(marker)
    return match.group(1).strip()


def test_every_command_is_documented():
    readme = _readme()
    for name in COMMANDS:
        assert "`edgeattn {}`".format(name) in readme, "README does not document `edgeattn {}`".format(name)


def test_quickstart_has_exactly_two_single_line_commands():
    quickstart = _readme().split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert len(re.findall(r"```sh\n", quickstart)) == 2
    for marker in ("main", "test"):
        block = _quickstart_block(marker)
        assert "\n" not in block, "the {} command must be one line".format(marker)
    assert "pytest" in _quickstart_block("test") and "edgeattn " in _quickstart_block("main")


def test_ci_runs_the_readme_test_command():
    with open(os.path.join(REPO, ".ci", "run"), encoding="utf-8") as handle:
        ci = handle.read()
    assert "quickstart:test" in ci and "README.md" in ci
