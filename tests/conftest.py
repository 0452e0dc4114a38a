"""Shared pytest configuration.

Nothing here imports torch or onnx at module level: the device-side tests also run under Python 3.8 with only
click, PyYAML and numpy installed.

Under pytest-xdist every worker computes with one torch/OpenMP thread (two workers on two cores, not four threads
fighting over them), all tests of one exported model run on one worker (:func:`work_unit`), on two workers the
memory-heavy tests run one after another on one of them (:func:`xdist_scope`), and tests marked slow are scheduled
first. With CI=true (.ci/run) a skip is a failure unless the test is a GPU test skipped for want of
a CUDA device: whatever else skips could have run there.
"""
import os
import sys

import pytest

from memory_support import memory_heavy, release_freed_memory

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DIR = os.environ.get("EDGEATTN_SHARED_DIR", os.path.join(os.path.dirname(REPO_ROOT), "shared"))
GPU_SKIP_REASON = "needs a CUDA device (GPU tests run on a machine with one)"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: glibc malloc settings for the pytest-xdist workers (read when a process starts, so they reach the workers and
#: subprocesses, not this one). By default glibc serves large allocations with fresh mmaps and unmaps them on free,
#: and trims the heap top at 128 KB, so every tensor and protobuf buffer of an export faults its pages in again (36
#: million page faults and ~130 s of system time per suite run). Serving up to 32 MB (glibc's maximum threshold) from
#: the heap and trimming only above 1 GB cut an export's system time (measured: softpp_large + cswin_t24181_elfatt,
#: 32.1-34.2 s -> 29.7-29.9 s, same peak RSS; either setting alone gains nothing); release_freed_memory hands the
#: heap back between tests.
MALLOC_VARIABLES = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}


def in_ci():
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):
        # pytest-xdist would hand out the largest groups first; keep collection order, which puts slow tests first
        config.option.loadscopereorder = False
    if not hasattr(config, "workerinput"):
        for variable, value in MALLOC_VARIABLES.items():
            os.environ.setdefault(variable, value)
    if hasattr(config, "workerinput"):
        # torch takes its intra-op thread count from OMP_NUM_THREADS when it is first imported, which happens
        # after this (collection); an explicit setting wins
        explicit = "OMP_NUM_THREADS" in os.environ
        for variable in THREAD_VARIABLES:
            os.environ.setdefault(variable, "1")
        if not explicit and "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)


#: test modules whose tests share expensive work per first parameter (the model exported once for all its checks;
#: a model's MAC count at 224, which every resolution's check compares with): all tests of one parameter run on one
#: pytest-xdist worker
GROUPED_BY_FIRST_PARAMETER = ("tests/export/test_export_models.py::", "tests/models/test_registry.py::")
#: test modules whose tests share expensive module fixtures (every registered model's custom nodes, a linked plugin
#: library): all their tests run on one worker, which builds those fixtures once
GROUPED_BY_MODULE = ("tests/plugins/test_plugins_registry_rtx.py::",)
#: the pytest-xdist scope of every test that holds a large model (memory_support.memory_heavy)
MEMORY_HEAVY = "memory-heavy tests"
#: with more workers the memory-heavy tests spread like the rest: run in order on one worker (~370 s here) they
#: would bound the suite's time however many cores there are, and a machine with more cores has more memory
MEMORY_HEAVY_MAX_WORKERS = 2


def work_unit(nodeid):
    """Tests that share expensive work: one test, every test of one model in a module grouped by first parameter,
    or a whole grouped module."""
    for prefix in GROUPED_BY_MODULE:
        if nodeid.startswith(prefix):
            return prefix
    for prefix in GROUPED_BY_FIRST_PARAMETER:
        if nodeid.startswith(prefix) and nodeid.endswith("]") and "[" in nodeid:
            return prefix + nodeid[nodeid.index("[") + 1:-1].split("-")[0]
    return nodeid


def xdist_scope(nodeid):
    """What pytest-xdist hands to one worker: the work unit of ``nodeid``, or all memory-heavy tests together.
    (xdist's own --dist loadgroup marks do not group under pytest >= 9, which no longer reads the node id it
    edits.)"""
    return MEMORY_HEAVY if memory_heavy(nodeid) else work_unit(nodeid)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, which the Python 3.8 device-side venv lacks
def pytest_xdist_make_scheduler(config, log):
    """-n N: pytest-xdist's load balancing over the scopes of :func:`xdist_scope` (of :func:`work_unit` above
    MEMORY_HEAVY_MAX_WORKERS workers), in collection order."""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupedLoadScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return xdist_scope(nodeid) if self.numnodes <= MEMORY_HEAVY_MAX_WORKERS else work_unit(nodeid)

    return GroupedLoadScheduling(config, log)


def skips_not_allowed_in_ci(reports):
    """(test id, reason) of every skip that is not a GPU test's (collection-time skips included)."""
    found = []
    for report in reports:
        if "gpu" in getattr(report, "keywords", {}):
            continue
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        if reason.startswith("Skipped: "):
            reason = reason[len("Skipped: "):]
        if reason == GPU_SKIP_REASON:
            continue
        found.append((report.nodeid, reason))
    return found


def _ci_skips(config):
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    return skips_not_allowed_in_ci(reporter.stats.get("skipped", [])) if reporter is not None else []


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    if in_ci() and not hasattr(session.config, "workerinput") and _ci_skips(session.config):
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workerinput"):
        return
    # what a test that runs a whole inner session (the Python 3.8 pass) reports of it: record_property("suite_summary")
    for outcome in ("passed", "failed"):
        for report in terminalreporter.stats.get(outcome, []):
            for name, value in getattr(report, "user_properties", ()):
                if name == "suite_summary" and report.when == "call":
                    terminalreporter.write_line(value)
    if not in_ci():
        return
    skips = _ci_skips(config)
    if skips:
        terminalreporter.section("CI=true: {} test(s) skipped that must run in CI".format(len(skips)), red=True)
        for nodeid, reason in skips:
            terminalreporter.line("{}: {}".format(nodeid, reason))


def _cuda_available():
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config, items):
    # Long single tests (marked slow, e.g. the whole Python 3.8 pass) first: pytest-xdist hands out work in
    # collection order (pytest_configure, pytest_xdist_make_scheduler), so they start at once and overlap the rest
    # instead of trailing it.
    items.sort(key=lambda item: 0 if item.get_closest_marker("slow") else 1)
    # Every test of one work unit back to back, where its first test was (a grouped module's fixture then holds one
    # model's exports at a time, with or without pytest-xdist), and the memory-heavy units back to back, where the
    # first of them was: the xdist scopes, in collection order.
    first = {}
    for index, item in enumerate(items):
        first.setdefault(xdist_scope(item.nodeid), index)
        first.setdefault(work_unit(item.nodeid), index)
    items.sort(key=lambda item: (first[xdist_scope(item.nodeid)], first[work_unit(item.nodeid)]))
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items and not _cuda_available():
        skip = pytest.mark.skip(reason=GPU_SKIP_REASON)
        for item in gpu_items:
            item.add_marker(skip)


def pytest_runtest_logfinish(nodeid, location):
    release_freed_memory()


@pytest.fixture
def cli_runner():
    from click.testing import CliRunner

    try:
        # click < 8.2 (the only click on Python 3.8) mixes stderr into stdout unless told not to.
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


@pytest.fixture
def invoke(cli_runner):
    """Invoke ``edgeattn ARGS`` in-process; returns the click Result (stdout and stderr kept apart)."""
    from edgeattn.cli import cli

    def _invoke(args, input=None, env=None, expect=None):
        result = cli_runner.invoke(cli, [str(a) for a in args], input=input, env=env, catch_exceptions=False)
        if expect is not None:
            assert result.exit_code == expect, (
                "edgeattn {} exited {} (expected {})\nstdout:\n{}\nstderr:\n{}".format(
                    " ".join(map(str, args)), result.exit_code, expect, result.stdout, result.stderr)
            )
        return result

    return _invoke
