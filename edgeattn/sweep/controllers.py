"""Board control for a sweep: the modes to visit, switching, clock locking, and restoring the original state.

:class:`JetsonController` drives nvpmodel and jetson_clocks (through ``sudo -n`` when not root). The order of
operations follows jtop's (rbonghi/jetson_stats ``jtop/core/nvpmodel.py``, ``jetson_clocks.py``): store clocks once to
an explicit file before anything changes; before a
switch, unlock clocks (jetson_clocks pins the old mode's maxima); switch with the reboot prompt answered ``NO``
(or ``YES`` with --allow-reboot); verify with ``nvpmodel -q``; lock again when asked. Restoring: unlock, switch
back to the original mode, then ``jetson_clocks --restore`` the stored file; every step is attempted even when
an earlier one fails, and the outcome is reported.

:class:`HostCpuController` has nothing to switch: its "modes" are thread budgets handed to the benchmark.
"""
import os
import re

from .._subprocess import run_command
from ..errors import EdgeAttnError
from ..jetson import board as board_io
from ..jetson import clocks as clocks_io
from ..jetson import find_tool, nvpmodel, privileged
from .. import profiles as profiles_io

_BUDGET_RE = re.compile(r"(?:^|_)(\d+(?:\.\d+)?)W(?:$|_)")


class SweepMode(object):
    """One point of the sweep's x axis. ``group`` is the reboot group key (modes in one group switch live)."""

    def __init__(self, mode_id, name, budget_w=None, group=None, threads=None):
        self.id = int(mode_id)
        self.name = name
        self.budget_w = budget_w
        self.group = group
        self.threads = threads

    def to_dict(self):
        return {"id": self.id, "name": self.name, "budget_w": self.budget_w, "group": self.group,
                "threads": self.threads}

    def __repr__(self):
        return "SweepMode({}, {!r})".format(self.id, self.name)


#: attempts of a board command whose failure would skip a mode or leave the board changed: nvpmodel and
#: jetson_clocks can fail once (a busy sysfs node, EBUSY) or hang until their timeout and then succeed
ATTEMPTS = 3


def _retried(action, what, echo, done=None, errors=True):
    """``action()``, tried again (up to :data:`ATTEMPTS` in all) when it returns a failed status (or an outcome
    ``done`` does not accept) or, with ``errors``, raises EdgeAttnError (a failure or a timeout); each retry is
    announced through ``echo`` naming ``what`` failed and why; the last outcome or error stands."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            outcome = action()
        except EdgeAttnError as error:
            if attempt == ATTEMPTS or not errors:
                raise
            echo("warning: {} failed ({}); trying again".format(what, error))
            continue
        failed = getattr(outcome, "status", None) == "failed" if done is None else not done(outcome)
        if not failed or attempt == ATTEMPTS:
            return outcome
        echo("warning: {} failed ({}); trying again".format(what, _reason(outcome)))
    return outcome


def _shown(echo):
    """``jetson_clocks --show`` parsed, tried again when it fails once (None when it keeps failing); every failure
    is announced with jetson_clocks' own words."""
    def attempt():
        shown, why = clocks_io.show_or_reason(use_sudo=True)
        if shown is None:
            raise EdgeAttnError(why)
        return shown

    try:
        return _retried(attempt, "jetson_clocks --show", echo)
    except EdgeAttnError as error:
        echo("warning: jetson_clocks --show failed ({}); going on without its reading".format(error))
        return None


def _reason(outcome):
    """What a failed outcome says: the SwitchResult's message (first of a (SwitchResult, mode) pair)."""
    if outcome is None:
        return "no output"
    result = outcome[0] if isinstance(outcome, tuple) else outcome
    if isinstance(outcome, tuple) and result.status == "switched":
        return "the board is in mode {} after it".format(outcome[1].id)
    return getattr(result, "message", None) or "no effect"


def budget_from_name(name):
    """"MODE_15W" -> 15.0, "7W_AI" -> 7.0, "MAXN" -> None: the nominal budget a mode's name states."""
    match = _BUDGET_RE.search(name or "")
    return float(match.group(1)) if match else None


class HostCpuController(object):
    kind = "host-cpu"
    can_lock_clocks = False

    def __init__(self, profile, echo):
        self.profile = profile
        self.echo = echo
        self.warnings = []
        self.board = None
        self.conf_name = None

    def modes(self):
        return [SweepMode(n, "{} thread{}".format(n, "" if n == 1 else "s"), group="host", threads=n)
                for n in self.profile.host_thread_budgets()]

    def current_mode_id(self):
        return None

    def needs_reboot(self, from_id, to_id):
        return False

    def reboot_reason(self, mode):
        return None

    def capture_original(self, out_dir, clocks_wanted):
        return {"mode": None, "clocks_store": None, "clocks_locked": None}

    def preflight(self, plan, clocks_wanted):
        if clocks_wanted != "default":
            raise EdgeAttnError("--clocks {} needs a Jetson: the host-cpu profile does not touch clocks".format(
                clocks_wanted))

    def switch(self, mode, allow_reboot, original):
        return "ready", None

    def lock_clocks(self):
        return None

    def restore(self, original, allow_reboot=False, final=False):
        return {"mode": {"ok": True, "detail": "host-cpu: nothing was switched"},
                "clocks": {"ok": True, "detail": "host-cpu: clocks untouched"}}

    def context(self):
        return {"kind": "host-cpu", "cpu_count": os.cpu_count()}


class JetsonController(object):
    kind = "jetson"

    def __init__(self, profile, root, echo, board=None):
        self.profile = profile
        self.root = root
        self.echo = echo
        self.board = board if board is not None else board_io.detect_board(root)
        self.conf = nvpmodel.read_modes(root)
        self.conf_name = self.board.nvpmodel_conf if self.board is not None else None
        self.table = profile.best_table(self.conf.modes if self.conf else None, self.conf_name)
        self.warnings = []
        self.clocks_locked_by_us = False
        self.current = None
        if self.conf is None:
            self.warnings.append("cannot read the board's modes (/etc/nvpmodel.conf, nvpmodel -p --verbose); "
                                 "using the profile's {} table: reboot prediction may be wrong".format(
                                     self.table.key if self.table else "(none)"))
        else:
            for line in profiles_io.cross_check(self.table, self.conf.modes):
                self.warnings.append("profile {} differs from the board: {}".format(profile.name, line))

    # -- modes ---------------------------------------------------------------------------------------------------
    def modes(self):
        """The board's modes (IDs read from its conf at run time); the profile only fills budgets if names agree."""
        result = []
        if self.conf is not None:
            for mode in self.conf.modes:
                spec = self.table.mode(mode.id) if self.table else None
                budget = spec.budget_w if spec is not None and spec.name == mode.name else budget_from_name(mode.name)
                group = mode.reboot_key
                result.append(SweepMode(mode.id, mode.name, budget, None if group is None else list(group)))
        elif self.table is not None:
            for spec in self.table.modes:
                result.append(SweepMode(spec.id, spec.name, spec.budget_w, spec.reboot_group))
        return result

    def needs_reboot(self, from_id, to_id):
        """True/False predicted from the power-gating masks, None when unknown."""
        if from_id is None or from_id == to_id:
            return False
        if self.conf is not None:
            return self.conf.needs_reboot(from_id, to_id)
        if self.table is not None:
            a, b = self.table.mode(from_id), self.table.mode(to_id)
            if a is None or b is None or a.reboot_group is None or b.reboot_group is None:
                return None
            return a.reboot_group != b.reboot_group
        return None

    def current_mode_id(self):
        self.current = nvpmodel.current_mode()
        return self.current.id

    # -- original state ------------------------------------------------------------------------------------------
    def preflight(self, plan, clocks_wanted):
        """Fail before touching anything when the sweep could not run or not restore."""
        if nvpmodel.nvpmodel_path() is None:
            raise EdgeAttnError("nvpmodel is not installed: cannot sweep power modes (use --profile host-cpu)")
        needs_root = clocks_wanted == "max" or any(mode.id != self.current.id for mode in plan)
        if needs_root and privileged(["true"])[0] == "sudo":
            result = run_command(privileged(["true"]), timeout=15)
            if result.returncode != 0:
                raise EdgeAttnError("switching power modes and clocks needs root and `sudo -n` failed ({}); run "
                                    "`sudo -v` first or run the sweep as root".format(
                                        result.output.strip().splitlines()[-1] if result.output.strip() else
                                        "exit status {}".format(result.returncode)))
        if clocks_wanted == "max" and clocks_io.jetson_clocks_path() is None:
            raise EdgeAttnError("--clocks max needs jetson_clocks, which is not installed")

    def capture_original(self, out_dir, clocks_wanted):
        """Record the original mode and store the clocks in a fresh private directory (never in ``out_dir``:
        whoever can write the sweep directory must not choose what ``jetson_clocks --restore`` writes as root)."""
        original = {"mode": {"id": self.current.id, "name": self.current.name}, "clocks_store": None,
                    "clocks_locked": None, "clocks_show": None}
        if clocks_io.jetson_clocks_path() is None:
            self.echo("jetson_clocks is not installed: clocks are neither locked nor stored")
            return original
        shown = _shown(self.echo)
        if shown is not None:
            original["clocks_locked"] = shown.get("locked")
            original["clocks_show"] = {k: shown.get(k) for k in ("gpu", "emc", "online_cpus", "power_mode")}
            if shown.get("locked"):
                self.echo("note: clocks were already locked (jetson_clocks ran before this sweep); they will be "
                          "locked again when restored")
        try:
            original["clocks_store"] = _retried(clocks_io.store, "jetson_clocks --store", self.echo)
        except EdgeAttnError as error:
            if clocks_wanted == "max":
                raise EdgeAttnError("cannot store the current clocks before locking them: {}".format(error))
            self.echo("warning: cannot store the clocks ({}); they are not touched by this sweep".format(error))
        return original

    # -- switching -----------------------------------------------------------------------------------------------
    def _unlock(self, original):
        if self.clocks_locked_by_us and original.get("clocks_store"):
            clocks_io.restore(original["clocks_store"])
            self.clocks_locked_by_us = False

    def switch(self, mode, allow_reboot, original):
        """Switch to ``mode``. Returns (status, message): "ready", "skip" (with why) or "reboot" (the board is
        going down into ``mode``: state must already be saved)."""
        if self.current is not None and self.current.id == mode.id:
            return "ready", None
        predicted = self.needs_reboot(self.current.id if self.current else None, mode.id)
        if predicted and not allow_reboot:
            return "skip", self.reboot_reason(mode)
        self._unlock(original)
        if predicted and allow_reboot:
            return "reboot", None
        # a hang is not retried here: the sweep fails, restores (retrying) and is resumed
        result = _retried(lambda: nvpmodel.set_mode(mode.id, accept_reboot=False), "nvpmodel -m {}".format(mode.id),
                          self.echo, errors=False)
        if result.status == "reboot_required":
            if allow_reboot:
                return "reboot", None
            return "skip", "nvpmodel asked for a reboot to switch to {} {} (answered NO); pass --allow-reboot to " \
                           "include it".format(mode.id, mode.name)
        if result.status != "switched":
            return "skip", "nvpmodel -m {} failed: {}".format(mode.id, result.message)
        now = nvpmodel.current_mode()
        self.current = now
        if now.id != mode.id:
            return "skip", "nvpmodel -m {} reported success but the board is in {} {}".format(mode.id, now.id, now.name)
        return "ready", None

    def reboot_reason(self, mode):
        here = self.conf.mode(self.current.id) if self.conf else None
        there = self.conf.mode(mode.id) if self.conf else None
        detail = ""
        if here is not None and there is not None:
            def masks(mode):
                key = mode.reboot_key
                return "/".join(str(v) for v in key if v is not None) if key else "none"

            detail = " (GPU power-gating masks {} -> {})".format(masks(here), masks(there))
        return "switching from {} to {} {} needs a reboot{}; pass --allow-reboot to include it".format(
            self.current.name, mode.id, mode.name, detail)

    def reboot_into(self, mode):
        """Answer YES to nvpmodel's reboot prompt for ``mode``; if nvpmodel does not reboot by itself, run
        ``sudo -n reboot``. Returns a line describing what happened."""
        result = nvpmodel.set_mode(mode.id, accept_reboot=True)
        if result.status == "rebooting":
            return "nvpmodel is rebooting the board into mode {} {}".format(mode.id, mode.name)
        if result.status == "switched":
            # no prompt after all: the switch was live
            return None
        if result.status == "failed":
            raise EdgeAttnError("nvpmodel -m {} failed: {}".format(mode.id, result.message))
        tool = find_tool("reboot", ("/sbin", "/usr/sbin"))
        if tool is None:
            raise EdgeAttnError("mode {} needs a reboot and no reboot command was found; reboot by hand, then run "
                                "the sweep again with --resume".format(mode.id))
        run_command(privileged([tool]), timeout=60)
        return "rebooting the board (reboot) into mode {} {}".format(mode.id, mode.name)

    def lock_clocks(self):
        """``jetson_clocks`` at the current mode's maxima; returns the locked GPU clock in MHz (or None)."""
        clocks_io.lock()
        self.clocks_locked_by_us = True
        shown = _shown(self.echo)
        if shown is None:
            self.echo("warning: jetson_clocks --show failed after locking: the locked GPU clock is unknown, throttling "
                      "is judged against the highest clock seen")
        gpu = (shown or {}).get("gpu") or {}
        return gpu.get("max_hz") / 1e6 if gpu.get("max_hz") else None

    # -- restoring -----------------------------------------------------------------------------------------------
    def restore(self, original, allow_reboot=False, final=False):
        """Put the original mode and clocks back. Each step runs even if another failed; returns a report."""
        report = {"mode": {"ok": None, "detail": None}, "clocks": {"ok": None, "detail": None}}
        store = original.get("clocks_store")
        try:
            self._unlock(original)
        except Exception as error:
            report["clocks"] = {"ok": False, "detail": "unlocking failed: {}".format(error)}
        wanted = (original.get("mode") or {}).get("id")
        try:
            now = _retried(nvpmodel.current_mode, "nvpmodel -q", self.echo)
            if wanted is None:
                report["mode"] = {"ok": None, "detail": "original mode unknown"}
            elif now.id == wanted:
                report["mode"] = {"ok": True, "detail": "mode {} {} (unchanged or restored)".format(now.id, now.name)}
            else:
                needs = self.needs_reboot(now.id, wanted)
                if needs and allow_reboot and final:
                    line = self.reboot_into(SweepMode(wanted, original["mode"].get("name")))
                    report["mode"] = {"ok": True, "detail": line or "restored mode {}".format(wanted),
                                      "rebooting": bool(line)}
                    report["clocks"] = {"ok": True, "detail": "clocks return to the mode's defaults after the reboot"}
                    return report

                def switch_back():
                    switched = nvpmodel.set_mode(wanted, accept_reboot=False)
                    return switched, nvpmodel.current_mode()

                result, after = _retried(switch_back, "restoring mode {} (nvpmodel -m {})".format(wanted, wanted),
                                         self.echo, done=lambda outcome: outcome[1].id == wanted
                                         or outcome[0].status == "reboot_required")
                self.current = after
                if after.id == wanted:
                    report["mode"] = {"ok": True, "detail": "restored mode {} {}".format(after.id, after.name)}
                elif result.status == "reboot_required":
                    report["mode"] = {"ok": False, "detail": "restoring mode {} needs a reboot: run `sudo nvpmodel -m "
                                      "{}` and answer YES (the board is in {} {})".format(
                                          wanted, wanted, after.id, after.name)}
                else:
                    report["mode"] = {"ok": False, "detail": "could not restore mode {}: {} (the board is in {} {})"
                                      .format(wanted, result.message, after.id, after.name)}
        except Exception as error:
            report["mode"] = {"ok": False, "detail": "could not restore mode {}: {}".format(wanted, error)}
        if store:
            try:
                _retried(lambda: clocks_io.restore(store), "jetson_clocks --restore", self.echo)
                if report["clocks"]["ok"] is None:
                    report["clocks"] = {"ok": True, "detail": "jetson_clocks --restore {}".format(store)}
            except Exception as error:
                report["clocks"] = {"ok": False, "detail": "jetson_clocks --restore failed: {}".format(error)}
            if final and report["clocks"]["ok"]:
                # finished: nothing will restore from it again, and the resume file must not name a deleted path
                clocks_io.discard_store(store)
                original["clocks_store"] = None
        elif report["clocks"]["ok"] is None and original.get("clocks_locked") and clocks_io.jetson_clocks_path():
            # locked before the sweep but not stored (--store failed): a mode switch unlocked them; lock them again
            try:
                _retried(clocks_io.lock, "jetson_clocks (locking again)", self.echo)
                report["clocks"] = {"ok": True, "detail": "locked again with jetson_clocks, as before the sweep (they "
                                                          "could not be stored)"}
            except EdgeAttnError as error:
                report["clocks"] = {"ok": False, "detail": "clocks were locked before the sweep and could not be "
                                                           "locked again: {}; run `sudo jetson_clocks`".format(error)}
        elif report["clocks"]["ok"] is None:
            report["clocks"] = {"ok": not self.clocks_locked_by_us,
                                "detail": "no stored clocks (jetson_clocks unavailable or not stored)"}
        return report

    def context(self):
        return {"kind": "jetson", "board": self.board.to_dict() if self.board else None,
                "nvpmodel_conf": self.conf_name, "mode_table": self.table.key if self.table else None,
                "board_modes": self.conf.to_dict() if self.conf else None}
