"""Test-side helpers that set up a fake Jetson: a fake filesystem root (device tree, nv_tegra_release,
/etc/nvpmodel.conf symlink, optional INA3221 sysfs) plus the fake tools on PATH and their state directory."""
import json
import os
import shutil
import signal
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fakeboard  # noqa: E402

FAKES_DIR = os.path.dirname(HERE)
FAKE_TOOL_DIRS = [os.path.join(FAKES_DIR, name) for name in ("nvpmodel", "jetson_clocks", "tegrastats", "sudo",
                                                             "reboot")]
BOARD_NAMES = sorted(fakeboard.boards())


class FakeBoard(object):
    """One fake board under ``base`` (a tmp_path). ``env`` holds the variables to run edgeattn against it."""

    def __init__(self, base, name, mode=None, locked=False, fan_pwm=88, with_conf=True):
        self.name = name
        self.spec = fakeboard.boards()[name]
        self.base = str(base)
        self.root = os.path.join(self.base, "root")
        self.state_dir = os.path.join(self.base, "fakestate")
        os.makedirs(self.state_dir, exist_ok=True)
        modes, default = fakeboard.parse_conf(self.spec["conf"])
        self.conf_modes = modes
        self.default_mode = default
        self._write_root(with_conf)
        self.write_state({"board": name, "mode": default if mode is None else mode, "locked": locked,
                          "fan_pwm": fan_pwm, "reboots": 0})
        python_dir = os.path.dirname(os.path.abspath(sys.executable))
        path = os.pathsep.join(FAKE_TOOL_DIRS + [python_dir, os.environ.get("PATH", "/usr/bin:/bin")])
        self.env = {
            "PATH": path,
            # edgeattn looks in the system directories before PATH; this is the explicit hook for the fakes
            "EDGEATTN_TOOL_DIRS": os.pathsep.join(FAKE_TOOL_DIRS),
            "FAKE_JETSON_STATE": self.state_dir,
            "FAKE_JETSON_BOARD": name,
            "EDGEATTN_JETSON_ROOT": self.root,
            "EDGEATTN_SUDO": "always",
            # private clock stores and the per-board lock live under the test's directory, not ~ or /run/lock
            "EDGEATTN_STATE_DIR": os.path.join(self.base, "edgeattn-state"),
            "EDGEATTN_LOCK_DIR": os.path.join(self.base, "locks"),
        }

    def _write_root(self, with_conf):
        dt = os.path.join(self.root, "proc", "device-tree")
        os.makedirs(dt, exist_ok=True)
        with open(os.path.join(dt, "model"), "wb") as handle:
            handle.write(self.spec["model"].encode() + b"\0")
        with open(os.path.join(dt, "compatible"), "wb") as handle:
            handle.write(b"".join(entry.encode() + b"\0" for entry in self.spec["compatible"]))
        etc = os.path.join(self.root, "etc")
        os.makedirs(os.path.join(etc, "nvpmodel"), exist_ok=True)
        with open(os.path.join(etc, "nv_tegra_release"), "w") as handle:
            handle.write(self.spec["release"] + "\n")
        if with_conf:
            shutil.copy(os.path.join(fakeboard.FIXTURES, "confs", self.spec["conf"]),
                        os.path.join(etc, "nvpmodel", self.spec["conf"]))
            os.symlink("/etc/nvpmodel/" + self.spec["conf"], os.path.join(etc, "nvpmodel.conf"))

    def add_ina3221_hwmon(self, device, channels, hwmon="hwmon3"):
        """channels: [(label, millivolts, milliamps)] as channels 1..n; a label None leaves the channel empty."""
        dev = os.path.join(self.root, "sys", "bus", "i2c", "devices", device)
        mon = os.path.join(dev, "hwmon", hwmon)
        os.makedirs(mon, exist_ok=True)
        with open(os.path.join(dev, "name"), "w") as handle:
            handle.write("ina3221\n")
        with open(os.path.join(mon, "name"), "w") as handle:
            handle.write("ina3221\n")
        for index, (label, mv, ma) in enumerate(channels, 1):
            if label is None:
                continue
            for filename, value in (("in{}_label", label), ("in{}_input", mv), ("curr{}_input", ma)):
                with open(os.path.join(mon, filename.format(index)), "w") as handle:
                    handle.write("{}\n".format(value))
        return mon

    # -- state ---------------------------------------------------------------------------------------------------
    def write_state(self, state):
        with open(os.path.join(self.state_dir, "state.json"), "w") as handle:
            json.dump(state, handle)

    def state(self):
        with open(os.path.join(self.state_dir, "state.json")) as handle:
            return json.load(handle)

    def update_state(self, **changes):
        state = self.state()
        state.update(changes)
        self.write_state(state)

    def calls(self, tool=None):
        path = os.path.join(self.state_dir, "calls.log")
        if not os.path.exists(path):
            return []
        with open(path) as handle:
            entries = [json.loads(line) for line in handle if line.strip()]
        return [e for e in entries if tool is None or e["tool"] == tool]

    def tegrastats_pids(self):
        path = os.path.join(self.state_dir, "tegrastats.pids")
        if not os.path.exists(path):
            return []
        with open(path) as handle:
            return [int(line) for line in handle if line.strip()]

    def live_tegrastats(self):
        """PIDs of fake tegrastats processes still running (must be empty after a sweep)."""
        alive = []
        for pid in self.tegrastats_pids():
            try:
                os.kill(pid, 0)
            except OSError:
                continue
            # a zombie of an already-terminated child still answers kill(pid, 0)
            try:
                with open("/proc/{}/stat".format(pid)) as handle:
                    if handle.read().split(")")[-1].split()[0] == "Z":
                        continue
            except OSError:
                continue
            alive.append(pid)
        return alive

    def kill_leftovers(self):
        for pid in self.live_tegrastats():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def mode_rails_mw(self, mode_id):
        """What the fake tegrastats reports in ``mode_id`` (the test oracle for power attribution)."""
        line = fakeboard.fixture_body(os.path.join("tegrastats", self.spec["tegrastats"])).splitlines()[0]
        return fakeboard.rail_values(mode_id, fakeboard.template_rail_names(line))
