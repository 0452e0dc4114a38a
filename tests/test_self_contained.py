"""The repository stands on its own: no tracked file cites a document a user who clones it does not have.

Facts are stated where they are used (or in docs/) with their public sources: papers, official code, NVIDIA's
documentation and repositories, issue threads. What is allowed from outside the checkout is a build input CI
provides beside it: the public TensorRT headers in ``../shared/third_party/tensorrt-headers/`` (read by .ci/run
and the glue tests), never a document.
"""
import os
import re
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: references to notes outside the repository (assembled from pieces so that this file does not match itself)
FORBIDDEN = [
    ("a path into the shared notes or papers", r"shared/(?!third_party/tensorrt-headers)[A-Za-z_]"),
    ("an interface document", r"\bINTER" + r"FACES\b"),
    ("a reference note", r"\b(?:trtexec|tensorrt|jetson|tensor-cores|kernel-roofline|peers-and-style)\.md\b"),
    ("an operator digest", r"\boperators-(?:elfatt|soft)"),
    ("a digest", r"\b[Dd]i" + r"gest(?:'s)? (?:section|operators|reference|\d)|\bthe di" + r"gest\b"),
    ("a paper text file", r"\bpapers/[\w-]+\.txt\b"),
]


def _tracked_text_files():
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout (git ls-files failed)")
    for name in out.decode("utf-8", "replace").split("\0"):
        path = os.path.join(REPO, name)
        if not name or not os.path.isfile(path) or os.path.samefile(path, __file__):
            continue
        with open(path, "rb") as handle:
            data = handle.read()
        if b"\0" in data[:8192]:
            continue  # binary (plots, engines)
        yield name, data.decode("utf-8", "replace")


def find_references(files):
    """[(path, line number, what, line)] for every line of ``files`` ((path, text) pairs) citing outside notes."""
    patterns = [(what, re.compile(pattern)) for what, pattern in FORBIDDEN]
    found = []
    for path, text in files:
        for number, line in enumerate(text.splitlines(), 1):
            for what, pattern in patterns:
                if pattern.search(line):
                    found.append((path, number, what, line.strip()[:120]))
    return found


def test_no_tracked_file_cites_notes_outside_the_repository():
    found = find_references(_tracked_text_files())
    assert not found, "\n".join("{}:{}: {}: {}".format(*hit) for hit in found)


@pytest.mark.parametrize("line", [
    "see " + "../shared/" + "reference/" + "jetson" + ".md §2.3",
    "(" + "trtexec" + ".md 1.3: one record per output binding)",
    "per " + "INTER" + "FACES §5",
    "Di" + "gest 5 A.1: 12C^2 + 23C per block",
    "(di" + "gest " + "operators-" + "elfatt-qtvit.md section 2.4)",
    "transcribed from /work/shared/" + "papers/" + "elfatt.txt",
])
def test_a_reference_reappearing_is_caught(line):
    assert find_references([("x.py", "ok\n" + line + "\n")])[0][:2] == ("x.py", 2)


@pytest.mark.parametrize("line", [
    "headers = ../shared/third_party/tensorrt-headers/11.1/include",
    "digest = hashlib.sha256()  # one build per digest",
    "[docs/jetson-setup.md](docs/jetson-setup.md), docs/custom-ops.md",
    "## Plugin interfaces by TensorRT version",
])
def test_build_inputs_hashes_and_own_docs_are_not_references(line):
    assert find_references([("x.py", line)]) == []
