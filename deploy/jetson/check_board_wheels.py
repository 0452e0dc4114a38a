#!/usr/bin/env python3
"""Check edgeattn's board-side dependency rule against PyPI: every board-side requirement (``dependencies`` and the
``board`` extra of pyproject.toml) must resolve to wheels for each JetPack line's Python and glibc, or be pure
Python, from its lower bound on.

For each JetPack line it asks pip, as a Jetson would (``--only-binary=:all:`` for that interpreter and platform,
PyPI only: local wheel folders and mirrors of this machine are ignored):

1. ``pip download --no-deps NAME==LOWER`` for every requirement: the declared lower bound has such a wheel;
2. ``pip download REQUIREMENTS`` with dependencies: the whole set, transitive dependencies included, resolves to
   wheels, so ``pip install`` on the board never has to compile anything.

JetPack lines (NVIDIA's JetPack release notes, developer.nvidia.com/embedded/jetpack-archive): 4.6 is Ubuntu 18.04
(glibc 2.27) on the Nano, where edgeattn runs on the
distribution's python3.8; 5 is Ubuntu 20.04 (glibc 2.31) with Python 3.8; 6 is Ubuntu 22.04 (glibc 2.35) with 3.10.

    python deploy/jetson/check_board_wheels.py            # exit 0: all resolve; 1: a requirement does not;
                                                          # 2: PyPI unreachable or a malformed requirement
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYPI = "https://pypi.org/simple"
#: (name, CPython version, glibc minor of the distribution: manylinux_2_<minor> is the newest wheel tag it runs)
TARGETS = (
    ("JetPack 4.6 (Ubuntu 18.04, python3.8)", "3.8", 27),
    ("JetPack 5 (Ubuntu 20.04, Python 3.8)", "3.8", 31),
    ("JetPack 6 (Ubuntu 22.04, Python 3.10)", "3.10", 35),
)
BOARD_EXTRA = "board"
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*>=\s*([0-9][0-9A-Za-z.]*)\s*"
                          r"(,\s*<[^;]*)?$")


class RuleError(Exception):
    """A requirement that the rule cannot check (no lower bound, markers, pins)."""


def _load_toml(path):
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        try:
            import tomli as tomllib
        except ImportError:
            raise RuleError("reading pyproject.toml needs Python >= 3.11 or the tomli package")
    with open(path, "rb") as handle:
        return tomllib.load(handle)


def board_requirements(pyproject=os.path.join(REPO, "pyproject.toml")):
    """The board-side requirement strings: ``[project] dependencies`` then the ``board`` extra, without
    duplicates (first occurrence kept)."""
    project = _load_toml(pyproject)["project"]
    found = list(project.get("dependencies") or [])
    found += list((project.get("optional-dependencies") or {}).get(BOARD_EXTRA) or [])
    seen, unique = set(), []
    for requirement in found:
        key = requirement_name(requirement)
        if key not in seen:
            seen.add(key)
            unique.append(requirement)
    return unique


def requirement_name(requirement):
    match = _REQUIREMENT.match(requirement)
    if not match:
        raise RuleError("board-side requirement {!r} needs the form NAME>=LOWER (a lower bound that has the "
                        "wheels, optionally an upper bound)".format(requirement))
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def lower_bound_pin(requirement):
    """``"onnx>=1.16"`` -> ``"onnx==1.16"``."""
    match = _REQUIREMENT.match(requirement)
    if not match:
        requirement_name(requirement)  # raises the message
    return "{}=={}".format(match.group(1), match.group(3))


def platform_tags(glibc_minor):
    """The manylinux aarch64 tags a system with glibc 2.<minor> accepts (pip needs every one spelled out)."""
    return ["manylinux2014_aarch64"] + ["manylinux_2_{}_aarch64".format(m) for m in range(17, glibc_minor + 1)]


def pip_download_command(requirements, python_version, glibc_minor, dest, deps, python=sys.executable):
    command = [python, "-m", "pip", "download", "--disable-pip-version-check", "--only-binary=:all:",
               "--implementation", "cp", "--python-version", python_version, "--index-url", PYPI, "--dest", dest,
               "--progress-bar", "off", "--quiet"]
    for tag in platform_tags(glibc_minor):
        command += ["--platform", tag]
    if not deps:
        command.append("--no-deps")
    return command + list(requirements)


def pypi_environment():
    """This environment without pip settings that add other package sources (local wheel folders, mirrors)."""
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull)
    for name in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL", "PIP_NO_INDEX", "PIP_CONSTRAINT",
                 "PIP_REQUIRE_VIRTUALENV"):
        env.pop(name, None)
    return env


def pypi_reachable(timeout=15):
    """None when PyPI answers, else the reason it does not."""
    import ssl
    import urllib.request

    context = None
    cert = os.environ.get("PIP_CERT")
    if cert and os.path.exists(cert):
        context = ssl.create_default_context(cafile=cert)
    try:
        with urllib.request.urlopen(PYPI + "/pip/", timeout=timeout, context=context) as response:
            response.read(1)
    except Exception as error:  # noqa: BLE001 - any failure means "cannot check here"
        return "{}: {}".format(type(error).__name__, error)
    return None


def _run(command, timeout):
    proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                          universal_newlines=True, timeout=timeout, env=pypi_environment())
    lines = [line for line in proc.stdout.splitlines() if line.startswith("ERROR")]
    return proc.returncode, " / ".join(lines) or proc.stdout.strip()[-500:]


def _check_target(target, requirements, pins, python, timeout, lower_bounds, full_set):
    name, python_version, glibc_minor = target
    problems = []
    with tempfile.TemporaryDirectory(prefix="edgeattn-wheels-") as dest:
        if lower_bounds:
            code, _message = _run(pip_download_command(pins, python_version, glibc_minor, dest, False, python),
                                  timeout)
            for pin in pins if code else ():  # one at a time only to name the culprits
                code, message = _run(pip_download_command([pin], python_version, glibc_minor, dest, False,
                                                          python), timeout)
                if code:
                    problems.append((name, pin, message))
        if full_set:
            code, message = _run(pip_download_command(requirements, python_version, glibc_minor, dest, True,
                                                      python), timeout)
            if code:
                problems.append((name, "the whole set with dependencies", message))
    return problems


def check(requirements, targets=TARGETS, python=sys.executable, timeout=600, lower_bounds=True, full_set=True):
    """``[(target name, what, message)]`` for every failure (empty: the rule holds), in the order of ``targets``.

    The JetPack lines are checked concurrently, each pip in its own download folder: the time is spent waiting on
    the index, and three lines one after the other took 15 s."""
    from concurrent.futures import ThreadPoolExecutor

    pins = [lower_bound_pin(r) for r in requirements]
    with ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool:
        futures = [pool.submit(_check_target, target, requirements, pins, python, timeout, lower_bounds, full_set)
                   for target in targets]
        return [problem for future in futures for problem in future.result()]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pyproject", default=os.path.join(REPO, "pyproject.toml"))
    args = parser.parse_args(argv)
    try:
        requirements = board_requirements(args.pyproject)
        for requirement in requirements:
            requirement_name(requirement)
    except RuleError as error:
        print("check_board_wheels: error: {}".format(error), file=sys.stderr)
        return 2
    reason = pypi_reachable()
    if reason:
        print("check_board_wheels: error: PyPI is unreachable ({}); this check needs the package index".format(
            reason), file=sys.stderr)
        return 2
    print("board-side requirements: " + ", ".join(requirements))
    problems = check(requirements)
    for target, what, message in problems:
        print("FAIL {}: {}: {}".format(target, what, message))
    if not problems:
        for name, python_version, glibc_minor in TARGETS:
            print("ok   {}: lower bounds and the whole set resolve to cp{} manylinux (glibc <= 2.{}) aarch64 or "
                  "pure-Python wheels".format(name, python_version.replace(".", ""), glibc_minor))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
