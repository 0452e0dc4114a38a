"""INA3221 power monitors read from sysfs: an alternative power source to tegrastats, with finer timing.

Two drivers (as rbonghi/jetson_stats ``jtop/core/power.py`` reads them): JetPack 4's IIO driver ``ina3221x``
(``iio:deviceN/rail_name_K``,
``in_power{K}_input`` mW, ``in_current{K}_input`` mA, ``in_voltage{K}_input`` mV) and JetPack 5+'s hwmon driver
``ina3221`` (``hwmon/hwmonN/in{K}_label``, ``in{K}_input`` mV, ``curr{K}_input`` mA; power = mV x mA / 1000).
Channels labelled ``NC``, empty labels and channel 7 (``sum of shunt voltages``) are skipped, as jtop does.
Devices are found by scanning ``/sys/bus/i2c/devices/*/name`` for ``ina3221`` (bus and address differ per board:
never hard-coded). The monitors refresh every ~430 ms, so polling is limited to >= 0.5 s.
"""
import glob
import math
import os
import threading
import time

from ..errors import EdgeAttnError
from . import rooted
from .samples import BufferedSampler, SampleBuffer

MIN_INTERVAL_S = 0.5


class Rail(object):
    """One measured channel. ``power_path`` (IIO) or ``voltage_path`` + ``current_path`` (hwmon)."""

    __slots__ = ("name", "driver", "device", "channel", "power_path", "voltage_path", "current_path")

    def __init__(self, name, driver, device, channel, power_path=None, voltage_path=None, current_path=None):
        self.name = name
        self.driver = driver
        self.device = device
        self.channel = channel
        self.power_path = power_path
        self.voltage_path = voltage_path
        self.current_path = current_path

    def read_mw(self):
        """Power in mW, or None when the files cannot be read (sensor gone, permission)."""
        if self.power_path:
            value = _read_number(self.power_path)
            if value is not None:
                return value
        voltage = _read_number(self.voltage_path) if self.voltage_path else None
        current = _read_number(self.current_path) if self.current_path else None
        if voltage is None or current is None:
            return None
        return voltage * current / 1000.0

    def to_dict(self):
        return {"name": self.name, "driver": self.driver, "device": self.device, "channel": self.channel}

    def __repr__(self):
        return "Rail({!r}, {})".format(self.name, self.driver)


def _read_text(path):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except (OSError, TypeError):
        return None


def _read_number(path):
    text = _read_text(path)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None  # "nan", "inf" or 400 digits are no reading


def _skip_label(label):
    return not label or label == "NC" or label.lower().startswith("sum of shunt")


def _hwmon_rails(hwmon_dir, device):
    rails = []
    for channel in range(1, 9):
        label = _read_text(os.path.join(hwmon_dir, "in{}_label".format(channel)))
        if label is None or _skip_label(label):
            continue
        voltage = os.path.join(hwmon_dir, "in{}_input".format(channel))
        current = os.path.join(hwmon_dir, "curr{}_input".format(channel))
        if os.path.exists(voltage) and os.path.exists(current):
            rails.append(Rail(label, "hwmon", device, channel, voltage_path=voltage, current_path=current))
    return rails


def _iio_rails(iio_dir, device):
    rails = []
    for channel in range(0, 8):
        label = _read_text(os.path.join(iio_dir, "rail_name_{}".format(channel)))
        if label is None or _skip_label(label):
            continue
        power = os.path.join(iio_dir, "in_power{}_input".format(channel))
        voltage = os.path.join(iio_dir, "in_voltage{}_input".format(channel))
        current = os.path.join(iio_dir, "in_current{}_input".format(channel))
        rails.append(Rail(label, "iio", device, channel,
                          power_path=power if os.path.exists(power) else None,
                          voltage_path=voltage if os.path.exists(voltage) else None,
                          current_path=current if os.path.exists(current) else None))
    return rails


def discover_rails(root="/"):
    """Every INA3221 rail under ``root`` (sorted by device, then channel); empty when there is none."""
    device_dirs = set()
    for name_file in glob.glob(rooted(root, "/sys/bus/i2c/devices/*/name")):
        if "ina3221" in (_read_text(name_file) or ""):
            device_dirs.add(os.path.dirname(name_file))
    for driver in ("ina3221", "ina3221x"):
        for entry in glob.glob(rooted(root, "/sys/bus/i2c/drivers/{}/*".format(driver))):
            if os.path.isdir(entry) and "-" in os.path.basename(entry):
                device_dirs.add(entry)
    rails, seen = [], set()
    for device_dir in sorted(device_dirs):
        real = os.path.realpath(device_dir)
        if real in seen:
            continue
        seen.add(real)
        device = os.path.basename(device_dir)
        for hwmon_dir in sorted(glob.glob(os.path.join(device_dir, "hwmon", "hwmon*"))):
            rails.extend(_hwmon_rails(hwmon_dir, device))
        for iio_dir in sorted(glob.glob(os.path.join(device_dir, "iio:device*"))):
            rails.extend(_iio_rails(iio_dir, device))
    return rails


def read_rails(rails):
    """{rail name: mW} for the rails that could be read now."""
    values = {}
    for rail in rails:
        value = rail.read_mw()
        if value is not None:
            values[rail.name] = value
    return values


class PowerReading(object):
    """A timed set of rail readings, shaped like a tegrastats sample where the sweep needs it."""

    __slots__ = ("rails_mw",)

    def __init__(self, rails_mw):
        self.rails_mw = rails_mw

    gpu_util_pct = None
    gpu_freq_mhz = None
    gpu_temp_c = None
    hottest_c = (None, None)
    temperatures = {}


class Ina3221Sampler(BufferedSampler):
    """Polls INA3221 rails every ``interval_s`` (>= 0.5 s) in a thread; keeps ``(time, PowerReading)`` pairs."""

    source = "ina3221"

    def __init__(self, rails, interval_s=0.5, clock=time.time):
        if not rails:
            raise EdgeAttnError("no INA3221 power rails found under /sys/bus/i2c/devices")
        if interval_s < MIN_INTERVAL_S:
            raise EdgeAttnError("INA3221 polling interval {:g} s is below {:g} s: the monitors refresh every ~430 ms"
                                .format(interval_s, MIN_INTERVAL_S))
        self.rails = list(rails)
        self.interval_s = float(interval_s)
        self._clock = clock
        self._buffer = SampleBuffer()
        self._stop = threading.Event()
        self._thread = None

    def poll_once(self):
        values = read_rails(self.rails)
        self._buffer.add(self._clock(), PowerReading(values) if values else None)

    def _loop(self):
        while not self._stop.is_set():
            self.poll_once()
            self._stop.wait(self.interval_s)

    def start(self):
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="ina3221-poller", daemon=True)
        self._thread.start()
        return self

    @property
    def running(self):
        return self._thread is not None and self._thread.is_alive()

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
