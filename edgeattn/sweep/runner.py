"""``run_sweep``: benchmark models across a board's power modes and write results.json / results.csv.

This module runs the loop and owns the sweep directory's life cycle (lock, resume file, replacing a finished
sweep); what to measure is :mod:`.plan`, the engines it measures :mod:`.engines`, the signals :mod:`.signals`, the
board :mod:`.controllers`. It stays one piece (~600 lines) because the directory's life cycle, the loop and the
restore in its ``finally`` share one state (the resume file, the original board state, the rows not yet given
their power): split apart, each would have to hand that state back and forth.

For each mode: switch (or skip when it needs a reboot, unless --allow-reboot: then save the resume file and
reboot), optionally lock clocks, settle, then run the benchmark for every model x precision x repeat while power
and telemetry are sampled concurrently; each result row gets the samples of its own measurement window. The
original mode and clocks are restored on success, error, Ctrl-C (SIGINT) and SIGTERM: signal handlers turn the
signal into an exception so the ``finally`` runs, and further signals are held back while restoring.

The benchmark function is injectable (``bench=``): it defaults to :func:`edgeattn.bench.run_benchmark`
and is only imported when a sweep runs.
"""
import collections
import contextlib
import functools
import math
import os
import platform
import socket
import sys
import time

from .._io import check_output_path, exclusive_lock, outputs_now
from .._version import __version__
from ..errors import EdgeAttnError, OutputError
from ..jetson import clocks as clocks_io
from ..jetson import default_root
from ..jetson import tegrastats
from ..jetson.lock import board_lock
from . import state as state_io
from .controllers import HostCpuController, JetsonController
from .engines import build_engines, default_engine_builder
from .plan import AS_BUILT, SweepOptions, model_entries, order_modes, parse_modes, parse_precisions, \
    plan_variants, resolve_board_profile
from .journal import JOURNAL_FILE
from .results import RESULTS_CSV, RESULTS_JSON, ResultStore
from .signals import SweepInterrupted, hold_signals, raise_on_signals, signal_name
from .telemetry import FIRST_SAMPLE_TIMEOUT_S, Telemetry, settle, start_telemetry, throttling

class SweepOutcome(object):
    def __init__(self, status, out_dir, store, restore, message=None):
        self.status = status          # complete | rebooting | interrupted | failed
        self.out_dir = out_dir
        self._store = store
        self.skipped = store.skipped
        self.restore = restore
        self.message = message

    @property
    def row_count(self):
        return self._store.count

    @property
    def rows(self):
        """Every result row (read back from the sweep's row journal)."""
        return self._store.rows


def default_bench():
    """The benchmark function of the bench area (imported lazily: it may pull in TensorRT or ONNX Runtime)."""
    try:
        from ..bench import run_benchmark
    except ImportError as error:
        raise EdgeAttnError("edgeattn.bench.run_benchmark is not available ({}); it runs every sweep measurement"
                            .format(error))
    return run_benchmark


# --------------------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------------------
def _echo_stderr(line):
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


class _NotingEcho(object):
    """The sweep's echo, which also keeps every warning line for results.json's ``notes``: whoever reads the files
    of an unattended sweep never saw its terminal. Lines come before the result store exists (board checks, the
    first retries); :meth:`attach` hands them over and sends later ones straight to the store's notes."""

    PREFIX = "warning: "

    def __init__(self, echo):
        self._echo = echo
        self._notes = []

    def __call__(self, line):
        self._echo(line)
        if line.startswith(self.PREFIX) and line[len(self.PREFIX):] not in self._notes:
            self._notes.append(line[len(self.PREFIX):])

    def attach(self, notes):
        for note in self._notes:
            if note not in notes:
                notes.append(note)
        self._notes = notes


def _format_duration(seconds):
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    if seconds >= 3600:
        return "{}h{:02d}m".format(seconds // 3600, (seconds % 3600) // 60)
    if seconds >= 60:
        return "{}m{:02d}s".format(seconds // 60, seconds % 60)
    return "{}s".format(seconds)


#: measurements whose mean time the ETA uses (the most recent ones)
ETA_WINDOW = 1000


def _eta(measurement_s, measurements_left, mode_overhead_s, modes_left):
    """Seconds left: the mean measurement time for each one left, plus the mean switch/settle time per mode left;
    None before the first measurement finished."""
    if not measurement_s:
        return None
    per_measurement = sum(measurement_s) / len(measurement_s)
    per_mode = sum(mode_overhead_s) / len(mode_overhead_s) if mode_overhead_s else 0.0
    return per_measurement * measurements_left + per_mode * modes_left


# --------------------------------------------------------------------------------------------------------------
# the sweep
# --------------------------------------------------------------------------------------------------------------
LOCK_FILE = ".edgeattn-sweep.lock"


def sweep_lock_path(out_dir):
    """The advisory lock file a running sweep holds in its directory."""
    return os.path.join(out_dir, LOCK_FILE)


def _check_replaceable(out_dir, previous):
    """``--overwrite`` is refused while the previous sweep still holds the board's original state: it was killed
    before restoring (status starting/running), is rebooting between modes, or its restore failed. Only
    ``--resume`` may finish those."""
    if previous is None:
        return
    status = previous.get("status")
    restore = previous.get("restore") or {}
    failed = [part for part in ("mode", "clocks") if (restore.get(part) or {}).get("ok") is False]
    if status not in ("complete", "interrupted", "failed") or failed:
        raise EdgeAttnError("{} holds an unfinished sweep (status {}{}) whose original board state is only "
                            "recorded there; finish it with --resume instead of --overwrite".format(
                                out_dir, status, ", restore failed: " + ", ".join(failed) if failed else ""))


def _discard_finished_sweep(out_dir, previous):
    """Remove a previous sweep's files so a new one can start in ``out_dir`` (after :func:`_check_replaceable`
    and after every check of the new sweep passed)."""
    old_store = ((previous or {}).get("original") or {}).get("clocks_store")
    if old_store:
        clocks_io.discard_store(old_store)  # only a store edgeattn created; anything else is left alone
    for name in (JOURNAL_FILE, RESULTS_JSON, RESULTS_CSV, state_io.STATE_FILE, "report.md", "report.html"):
        path = os.path.join(out_dir, name)
        if os.path.isfile(path) or os.path.islink(path):
            os.unlink(path)
    plots = os.path.join(out_dir, "plots")
    if os.path.isdir(plots) and not os.path.islink(plots):
        for name in os.listdir(plots):
            if name.endswith((".png", ".svg")):
                os.unlink(os.path.join(plots, name))


def _check_models(paths, model_check):
    """Open and check every model before anything is written (a corrupt ONNX must not leave a sweep behind)."""
    for path in paths:
        model_check(path)


def _basic_model_check(path):
    """For injected benchmark functions: the file exists, is a regular file, can be read and is not empty."""
    if not os.path.isfile(path):
        raise EdgeAttnError("model file not found: {}".format(path))
    with open(path, "rb") as handle:
        if not handle.read(1):
            raise EdgeAttnError("{} is empty".format(path))


def default_model_check(allow_engine_host_code=False):
    try:
        from ..bench import check_model_file
    except ImportError:
        return _basic_model_check
    return lambda path: check_model_file(path, allow_engine_host_code=allow_engine_host_code)


def _verified_resume_state(saved, out_dir):
    """The resume file is as writable as the sweep directory, so what it says is checked before it steers
    anything privileged: the clock store must be one edgeattn created, mode IDs must be integers."""
    source = state_io.state_path(out_dir)
    original = saved.get("original")
    if not isinstance(original, dict):
        raise EdgeAttnError("{} records no original board state; it cannot be resumed".format(source))
    mode = original.get("mode")
    if mode is not None and not (isinstance(mode, dict) and isinstance(mode.get("id"), int)):
        raise EdgeAttnError("{}: the original mode {!r} is not a power mode ID".format(source, mode))
    if original.get("clocks_store") is not None:
        clocks_io.verify_store(original["clocks_store"], source=source)
    plan = saved.get("plan")
    if not isinstance(plan, list) or not all(isinstance(i, int) for i in plan):
        raise EdgeAttnError("{}: the plan {!r} is not a list of mode IDs".format(source, plan))
    if not isinstance(saved.get("options"), dict) or not isinstance(saved["options"].get("models"), list):
        raise EdgeAttnError("{} records no sweep options; it cannot be resumed".format(source))
    for name, check, what in _RESUMED_OPTIONS:
        value = saved["options"].get(name)
        if not check(value):
            raise EdgeAttnError("{}: the option {!r} must be {}, got {!r}; it cannot be resumed".format(
                source, name, what, value))
    return saved


def _finite(low):
    return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= low


def _whole(low):
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low


def _text(v):
    return isinstance(v, str)


#: the options of the resume file (SweepOptions.record) the sweep reads back, with what each must be
_RESUMED_OPTIONS = (
    ("models", lambda v: bool(v) and all(isinstance(m, str) and m for m in v), "a list of model paths"),
    ("profile", _text, "a profile name"), ("backend", _text, "a backend name"), ("clocks", _text, "a string"),
    ("power_source", _text, "a string"),
    ("modes", lambda v: v == "all" or (isinstance(v, list) and all(_whole(0)(i) for i in v)),
     "'all' or a list of mode IDs"),
    ("precisions", lambda v: isinstance(v, list) and bool(v) and all(_text(p) for p in v), "a list of precisions"),
    ("repeats", _whole(1), "an integer >= 1"), ("batch", _whole(1), "an integer >= 1"),
    ("interval_ms", _whole(1), "an integer >= 1"), ("allow_reboot", lambda v: isinstance(v, bool), "true or false"),
    ("settle_s", _finite(0), "a number >= 0"), ("warmup_s", _finite(0), "a number >= 0"),
    ("duration_s", lambda v: v is None or _finite(0)(v), "a number >= 0 or null"),
    ("temp_limit_c", _finite(float("-inf")), "a number"),
    ("plugins", lambda v: v is None or _text(v), "a plugin mode or null"),
)


def run_sweep(models, profile="auto", modes="all", precisions=("fp32",), backend="auto", clocks="default",
              settle_s=30.0, repeats=3, allow_reboot=False, resume=False, out_dir="runs/sweep", bench=None,
              engine_builder=None, duration_s=10.0, warmup_s=2.0, batch=1, power_source="auto", interval_ms=500,
              temp_limit_c=85.0, root=None, echo=None, overwrite=False, model_check=None,
              allow_engine_host_code=False, plugin_mode=None, layers=False):
    """Run a power-mode sweep; returns a :class:`SweepOutcome`.

    ``models``: ONNX files or TensorRT engines. ``profile``: a profile name or "auto". ``modes``: "all" or a list
    of mode IDs (thread counts for host-cpu). ``bench``: the benchmark function (default
    ``edgeattn.bench.run_benchmark``). ``engine_builder(onnx, engine, precision=...)`` builds per-precision
    engines on a Jetson (default ``edgeattn.engine.build.build_engine`` when it imports). With ``resume`` the
    options are read from ``out_dir``'s resume file and finished measurements are skipped. Raises
    :class:`EdgeAttnError` for bad input and :class:`SweepInterrupted` after restoring when SIGINT/SIGTERM arrived.
    ``overwrite`` replaces a finished sweep in ``out_dir`` (never one whose board state was not restored).
    ``model_check(path)`` opens and checks a model before anything is written (default: the benchmark's own
    check with the default ``bench``, a plain readability check with an injected one).
    ``allow_engine_host_code``: benchmark version-compatible engines, which run host code embedded in them
    (``bench --allow-engine-host-code``); never taken from a resume file. ``plugin_mode``: ``build --plugins``
    (on, off, auto; None: build's device default) for the engines the default ``engine_builder`` builds.
    ``layers``: each measurement also records its engine's per-layer times (``bench --layers``; engines only).

    Every input is checked before the directory is created. The directory is then locked for the whole run
    (a second sweep into it is refused with the first one's PID), and on a Jetson so is the board.
    """
    echo = _NotingEcho(echo or _echo_stderr)
    root = root or default_root()
    out_dir = os.path.abspath(out_dir)
    asked = SweepOptions(models=models, profile=profile, modes=modes, precisions=precisions, backend=backend,
                         clocks=clocks, settle_s=settle_s, repeats=repeats, allow_reboot=allow_reboot, resume=resume,
                         out_dir=out_dir, duration_s=duration_s, warmup_s=warmup_s, batch=batch,
                         power_source=power_source, interval_ms=interval_ms, temp_limit_c=temp_limit_c,
                         overwrite=overwrite, allow_engine_host_code=allow_engine_host_code, plugin_mode=plugin_mode,
                         layers=layers)
    if model_check is None:
        model_check = default_model_check(allow_engine_host_code) if bench is None else _basic_model_check
    if resume:
        if not os.path.isfile(state_io.state_path(out_dir)):
            state_io.load_state(out_dir)  # raises "nothing to resume"
        if models:
            _check_models(models, model_check)
    else:
        if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
            raise EdgeAttnError("-o {} exists and is not a directory".format(out_dir))
        parse_modes(modes)
        parse_precisions(precisions)
        if not models:
            raise EdgeAttnError("give at least one model (ONNX file or TensorRT engine)")
        model_entries(models)
        _check_models(models, model_check)
    check_output_path(os.path.join(out_dir, RESULTS_JSON))

    created = not os.path.isdir(out_dir)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as error:
        raise OutputError(out_dir, error)
    started = []  # set once the sweep writes its first file: from then on its files stay for --resume
    try:
        with outputs_now(), \
                exclusive_lock(sweep_lock_path(out_dir), "the sweep directory {}".format(out_dir)) as held:
            try:
                return _run_locked(asked, started, bench=bench, engine_builder=engine_builder,
                                   model_check=model_check, root=root, echo=echo)
            finally:
                held.remove = not started
    finally:
        if created and not started:
            with contextlib.suppress(OSError):
                os.rmdir(out_dir)


def _run_locked(asked, started, bench, engine_builder, model_check, root, echo):
    """The sweep ``asked`` (a :class:`SweepOptions`) in its locked directory; ``started`` gets an entry once the
    directory holds this sweep's resume file."""
    models, out_dir = asked.models, asked.out_dir
    previous, replacing = None, False
    if asked.resume:
        saved = _verified_resume_state(state_io.load_state(out_dir), out_dir)
        options = saved["options"]
        if models and sorted(os.path.abspath(m) for m in models) != sorted(options["models"]):
            raise EdgeAttnError("--resume continues the sweep in {} with its own models ({}); pass the same models "
                                "or none".format(out_dir, ", ".join(options["models"])))
        if not models:
            _check_models(options["models"], model_check)
    else:
        saved = None
        if any(os.path.exists(os.path.join(out_dir, name)) for name in (RESULTS_JSON, JOURNAL_FILE)) or \
                os.path.exists(state_io.state_path(out_dir)):
            if not asked.overwrite:
                raise EdgeAttnError("{} already holds a sweep; pass --resume to continue it, --overwrite to replace "
                                    "it, or choose another -o".format(out_dir))
            try:
                previous = state_io.load_state(out_dir)
            except EdgeAttnError:
                previous = None
            _check_replaceable(out_dir, previous)
            replacing = True
        options = asked.record()
    if options["clocks"] not in ("default", "max"):
        raise EdgeAttnError("--clocks must be 'default' or 'max', got {!r}".format(options["clocks"]))
    if options["repeats"] < 1:
        raise EdgeAttnError("--repeats must be at least 1")
    if options["interval_ms"] < tegrastats.MIN_INTERVAL_MS:
        raise EdgeAttnError("the power sampling interval must be at least {} ms (INA3221 refreshes every ~430 ms)"
                            .format(tegrastats.MIN_INTERVAL_MS))

    entries = model_entries(options["models"])
    profile_obj, board = resolve_board_profile(options["profile"], root)
    echo("profile: {} ({})".format(profile_obj.name, profile_obj.display_name))
    board_guard = board_lock() if profile_obj.is_jetson else _nothing()
    with board_guard:
        if profile_obj.is_jetson:
            controller = JetsonController(profile_obj, root, echo, board=board)
        else:
            controller = HostCpuController(profile_obj, echo)
        for line in controller.warnings:
            echo("warning: " + line)
        variants, variant_notes = plan_variants(entries, options["precisions"], profile_obj, options["backend"],
                                                 echo)
        bench = bench or default_bench()
        if engine_builder is None:
            engine_builder = default_engine_builder(options.get("plugins"))
        if engine_builder is None and any(v["build"] for v in variants):
            raise EdgeAttnError("ONNX models on a Jetson are built into one TensorRT engine per precision, and "
                                "edgeattn's build API (edgeattn.engine.build.build_engine) is not available: build "
                                "engines with `edgeattn build` and pass them, or use --backend onnxruntime")

        all_modes = controller.modes()
        if not all_modes:
            raise EdgeAttnError("profile {} gives no modes to sweep".format(profile_obj.name))
        current_id = controller.current_mode_id()
        by_id = {m.id: m for m in all_modes}
        wanted = options["modes"]
        if wanted != "all":
            unknown = [i for i in wanted if i not in by_id]
            if unknown:
                raise EdgeAttnError("mode(s) {} not on this board; its modes are: {}".format(
                    ", ".join(map(str, unknown)), ", ".join("{} {}".format(m.id, m.name) for m in all_modes)))
            selected = [by_id[i] for i in wanted]
        else:
            selected = all_modes

        store = ResultStore(out_dir)
        if saved is not None:
            original = saved["original"]
            plan_ids = saved["plan"]
            plan = [by_id[i] for i in plan_ids if i in by_id]
            kept = store.load_existing()
            # the modes skipped so far stay listed with their reasons, also when results.json was never written
            # (a kill before the first row): the resume file has them
            for entry in saved.get("skipped") or []:
                if isinstance(entry, dict) and isinstance(entry.get("mode_id"), int) and isinstance(
                        entry.get("reason"), str) and all(s.get("mode_id") != entry["mode_id"] for s in store.skipped):
                    store.skip(entry)
            if saved.get("status") in ("starting", "running"):
                echo("the previous run of this sweep did not finish (killed or crashed while {}, before restoring "
                     "the board); {} result row(s) kept, the rest run now".format(saved["status"], kept))
            if saved.get("status") == "rebooting":
                target = saved.get("reboot_target")
                here = controller.current_mode_id() if profile_obj.is_jetson else None
                if target is not None and here != target:
                    echo("warning: the sweep rebooted into mode {} but the board is in mode {}".format(target, here))
                else:
                    echo("resumed after the reboot into mode {}".format(target))
            state = saved
        else:
            ordered = order_modes(selected, current_id, lambda a, b: bool(controller.needs_reboot(a, b)))
            plan, predicted_skips = [], []
            for mode in ordered:
                if not options["allow_reboot"] and controller.needs_reboot(current_id, mode.id):
                    reason = controller.reboot_reason(mode)
                    echo("skip mode {} {}: {}".format(mode.id, mode.name, reason))
                    predicted_skips.append({"mode_id": mode.id, "mode_name": mode.name, "reason": reason})
                else:
                    plan.append(mode)
            if not plan:
                raise EdgeAttnError("nothing to run: every selected mode needs a reboot from the current mode; pass "
                                    "--allow-reboot or choose other --modes")
            for entry in predicted_skips:
                store.skip(entry)
            original = None
            state = {"options": options, "plan": [m.id for m in plan], "done_modes": [], "status": "starting",
                     "skipped": predicted_skips}
        echo.attach(store.notes)
        controller.preflight(plan, options["clocks"])
        if replacing:
            _discard_finished_sweep(out_dir, previous)
        if original is None:
            original = controller.capture_original(out_dir, options["clocks"])
            state["original"] = original
        state["status"] = "running"
        state_io.save_state(out_dir, state)
        started.append(True)  # the resume file exists: from here on the directory is this sweep's

        store.context = {
            "edgeattn_version": __version__, "python": platform.python_version(), "host": socket.gethostname(),
            "platform": platform.platform(), "started_unix": time.time(), "profile": profile_obj.name,
            "profile_kind": profile_obj.kind, "options": options, "original": original,
            "plan": [m.to_dict() for m in plan], "board": (controller.board.to_dict() if controller.board else None),
            "controller": controller.context(), "warnings": controller.warnings,
        }
        for note in variant_notes:
            if note not in store.notes:
                store.notes.append(note)
        if asked.allow_engine_host_code:
            bench = functools.partial(bench, allow_engine_host_code=True)
        return _execute(controller, store, state, plan, variants, options, original, bench, engine_builder,
                        profile_obj, root, echo)


@contextlib.contextmanager
def _nothing():
    yield None


def _execute(controller, store, state, plan, variants, options, original, bench, builder, profile, root, echo):
    out_dir = store.out_dir
    total = len(plan) * len(variants) * options["repeats"]
    already = sum(1 for key in store.done_keys() if key[1] in [m.id for m in plan])  # once, at the start
    # seconds per measurement (the last ETA_WINDOW: memory must not grow with the sweep); per mode for switching,
    # locking and settling
    timings, mode_overheads = collections.deque(maxlen=ETA_WINDOW), []
    status, interruption, failure, message = "failed", None, None, None
    telemetry = Telemetry()
    unpowered = []  # measured rows waiting for the power samples that cover the end of their window
    with raise_on_signals():
        try:
            if profile.is_jetson:
                telemetry = start_telemetry(root, options["power_source"], options["interval_ms"],
                                            profile.power.get("total_rail"), echo)
                for note in telemetry.notes:
                    if note not in store.notes:
                        store.notes.append(note)
            else:
                store.notes.append("host-cpu: no power measurement on this profile")
            build_engines(variants, out_dir, builder, echo)
            if not telemetry.wait_for_first_samples():  # the samplers started before the (long) engine builds
                echo("warning: no power/telemetry sample yet after {:.0f} s; measuring anyway".format(
                    FIRST_SAMPLE_TIMEOUT_S))
            counter = [already]
            for index, mode in enumerate(plan):
                if mode.id in state.get("done_modes", []):
                    continue
                finished = store.done_keys(mode.id)
                todo = [(v, r) for v in variants for r in range(1, options["repeats"] + 1)
                        if (v["model"]["path"], mode.id, v["precision"], r) not in finished]
                if not todo:
                    state["done_modes"].append(mode.id)
                    continue
                mode_started = time.time()
                # the samples covering the end of the last window must be read before the board changes mode
                _flush(unpowered, telemetry, store, options, wait=True)
                result, why = controller.switch(mode, options["allow_reboot"], original)
                if result == "reboot":
                    state["status"] = "rebooting"
                    state["reboot_target"] = mode.id
                    state_io.save_state(out_dir, state)
                    store.status = "rebooting"
                    store.save()
                    line = controller.reboot_into(mode)
                    if line:
                        echo(line)
                        message = "after the reboot, continue with: edgeattn sweep --resume -o {}".format(out_dir)
                        echo(message)
                        status = "rebooting"
                        break
                    state["status"] = "running"
                    controller.current_mode_id()
                    result = "ready"
                if result == "skip":
                    echo("skip mode {} {}: {}".format(mode.id, mode.name, why))
                    store.skip({"mode_id": mode.id, "mode_name": mode.name, "reason": why})
                    state.setdefault("skipped", []).append({"mode_id": mode.id, "reason": why})
                    state["done_modes"].append(mode.id)
                    total -= len(todo)
                    state_io.save_state(out_dir, state)
                    store.save()
                    continue
                echo("mode {} {} ({}/{})".format(mode.id, mode.name, index + 1, len(plan)))
                reference_gpu = controller.lock_clocks() if options["clocks"] == "max" else None
                if profile.is_jetson:
                    settled = settle(telemetry if telemetry.board else None, options["settle_s"])
                else:
                    settled = {"settled": None, "waited_s": 0.0,
                               "reason": "host-cpu: nothing was switched, nothing to settle"}
                if options["settle_s"] > 0 and profile.is_jetson:
                    echo("  settle: {} ({:.1f} s)".format(settled["reason"], settled["waited_s"]))
                mode_overheads.append(time.time() - mode_started)
                modes_left = sum(1 for m in plan[index + 1:] if m.id not in state.get("done_modes", []))
                for variant, repeat in todo:
                    started = time.time()
                    counter[0] += 1
                    eta = _eta(timings, total - counter[0] + 1, mode_overheads, modes_left)
                    echo("[{}/{}] mode {} {} | {} {} | repeat {}/{} | ETA {}".format(
                        counter[0], total, mode.id, mode.name, variant["model"]["name"], variant["precision"],
                        repeat, options["repeats"], _format_duration(eta)))
                    row = _measure(bench, variant, mode, repeat, options, reference_gpu, settled)
                    unpowered.append(row)
                    _flush(unpowered, telemetry, store, options, wait=False)
                    timings.append(time.time() - started)
                # the mode's rows are on disk before the resume file calls it done (a kill in between lost them)
                _flush(unpowered, telemetry, store, options, wait=True)
                state["done_modes"].append(mode.id)
                state_io.save_state(out_dir, state)
                store.save()  # results.json/csv as of this mode: readable while the next one runs
            if status != "rebooting":
                status = "complete"
        except SweepInterrupted as error:
            status, interruption = "interrupted", error
            message = "interrupted by signal {}".format(error.signum)
        except BaseException as error:
            status, failure = "failed", error
            message = "failed: {}".format(error)
        finally:
            outcome = _finish(controller, store, state, telemetry, original, options, status, message, echo,
                              unpowered)
    if interruption is not None:
        echo("sweep interrupted by {}; {} result row(s) kept in {}; continue with: edgeattn sweep --resume -o {}"
             .format(signal_name(interruption.signum), store.count, out_dir, out_dir))
        raise interruption
    if failure is not None:
        echo("sweep failed; {} result row(s) kept in {}; after fixing the cause, continue with: edgeattn sweep "
             "--resume -o {}".format(store.count, out_dir, out_dir))
        raise failure
    return outcome


#: samples kept before the oldest window still to attribute: more than settling looks back (telemetry.settle)
KEEP_SAMPLES_S = 60.0


def _flush(pending, telemetry, store, options, wait):
    """Attach power and telemetry to measured rows whose window is covered by samples, then journal them.

    A sample describes the interval before it arrives, so the end of a window is covered up to one interval
    later; rows wait in ``pending`` meanwhile (the next measurement runs in that time) instead of the sweep
    sleeping after every measurement. ``wait``: block until every pending row is covered (before a mode switch and at the end).
    """
    if not pending:
        return
    if wait:
        telemetry.wait_for_samples_after(max(row["window"]["end_unix"] for row in pending))
    ready = [row for row in pending if wait or telemetry.covers(row["window"]["end_unix"])]
    for row in ready:
        _attach_power(row, telemetry, options)
        store.add(row)
        pending[:] = [r for r in pending if r is not row]  # journaled: a failure after this must not add it again
    if ready:
        # samples older than every window still to attribute (and than the settle window) are not needed again
        oldest = min([row["window"]["start_unix"] for row in pending] + [max(r["window"]["end_unix"] for r in ready)])
        telemetry.forget_before(oldest - KEEP_SAMPLES_S)


def _finish(controller, store, state, telemetry, original, options, status, message, echo, unpowered=None):
    """Stop samplers, restore the board (unless it is rebooting into the next mode), write the final files."""
    with hold_signals(echo):
        try:
            _flush(unpowered or [], telemetry, store, options, wait=True)
        except Exception as error:  # results must not stop the restore
            echo("warning: could not attach power to the last measurement(s): {}".format(error))
        errors = telemetry.stop() if telemetry is not None else []
        for line in errors:
            echo("warning: " + line)
        for reason, count in sorted((telemetry.gaps if telemetry is not None else {}).items()):
            echo("warning: {} measurement(s) without power: {}".format(count, reason))
        if status == "rebooting":
            report = {"mode": {"ok": None, "detail": "rebooting into the next mode; restored at the end of the sweep"},
                      "clocks": {"ok": None, "detail": "clocks reset by the reboot"}}
        else:
            report = controller.restore(original, allow_reboot=options["allow_reboot"], final=(status == "complete"))
        if errors:
            report["telemetry"] = errors
        store.restore = report
        store.status = status
        state["status"] = status
        state["restore"] = report
        for part in ("mode", "clocks"):
            entry = report.get(part) or {}
            if entry.get("ok") is False:
                echo("warning: restore {}: {}".format(part, entry.get("detail")))
            elif entry.get("ok") and controller.kind == "jetson":
                echo("restored {}: {}".format(part, entry.get("detail")))
        try:
            store.save()
        finally:
            try:
                state_io.save_state(store.out_dir, state)
            finally:
                store.journal.close()
    return SweepOutcome(status, store.out_dir, store, report, message)


#: slowest layers each measurement keeps with ``sweep --layers``
LAYERS_TOP = 5


def _measure(bench, variant, mode, repeat, options, reference_gpu, settled):
    """Run one benchmark; the row gets its power and telemetry later, in :func:`_attach_power`."""
    started = time.time()
    extra = {"layers_top": LAYERS_TOP} if options.get("layers") else {}  # a resume file before --layers has none
    result = bench(variant["bench_path"], backend=options["backend"], batch=options["batch"],
                   warmup_s=options["warmup_s"], duration_s=options["duration_s"], threads=mode.threads, **extra)
    finished = time.time()
    if not isinstance(result, dict) or "throughput_items_per_s" not in result:
        raise EdgeAttnError("the benchmark returned no throughput for {}".format(variant["bench_path"]))
    window = dict(result.get("window") or {})
    window = {"start_unix": window.get("start_unix", started), "end_unix": window.get("end_unix", finished)}
    model_info = result.get("model") or {}
    precision = result.get("precision") if variant["precision"] == AS_BUILT else variant["precision"]
    return {
        "model": variant["model"]["name"],
        "model_key": variant["model"]["path"],
        "model_path": variant["model"]["path"],
        "engine_path": variant["bench_path"] if variant["build"] else None,
        "model_sha256": model_info.get("sha256"),
        "precision_requested": variant["precision"],
        "precision": precision or variant["precision"],
        "mode_id": mode.id,
        "mode_name": mode.name,
        "mode_budget_w": mode.budget_w,
        "mode_threads": mode.threads,
        "threads": mode.threads if mode.threads is not None else result.get("threads"),
        "clocks": options["clocks"],
        "repeat": repeat,
        "backend": result.get("backend"),
        "provider": result.get("provider"),
        "batch": result.get("batch", options["batch"]),
        "iterations": result.get("iterations"),
        "latency_ms": result.get("latency_ms"),
        "throughput_items_per_s": result.get("throughput_items_per_s"),
        "gpu_compute_ms": result.get("gpu_compute_ms"),
        "window": window,
        "power": None,
        "telemetry": None,
        "energy_per_item_j": None,
        "items_per_s_per_w": None,
        "throttled": None,
        "throttle_reasons": [],
        "reference_gpu_mhz": reference_gpu,
        "settle": settled,
        "started_unix": started,
        "bench_schema": result.get("schema"),
        "bench_context": result.get("context"),
        "layers": result.get("layers"),
    }


def _attach_power(row, telemetry, options):
    power, tele = telemetry.window(row["window"]["start_unix"], row["window"]["end_unix"])
    throttled, reasons = throttling(tele, options["temp_limit_c"], row.get("reference_gpu_mhz"))
    throughput, total_w = row["throughput_items_per_s"], power.get("total_w")
    row.update({
        "power": power,
        "telemetry": tele,
        "energy_per_item_j": (total_w / throughput) if total_w and throughput else None,
        "items_per_s_per_w": (throughput / total_w) if total_w and throughput else None,
        "throttled": throttled,
        "throttle_reasons": reasons,
    })
