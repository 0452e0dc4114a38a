"""Which board is this: device-tree model and compatible strings, module part number, L4T and JetPack release.

Sources (as rbonghi/jetson_stats ``jtop/core/jetson_variables.py`` and dusty-nv/jetson-containers
``jetson_containers/l4t_version.py`` read them): ``/proc/device-tree/model`` (NUL-terminated, human-readable only),
``/proc/device-tree/compatible`` (NUL-separated, most specific first), ``/proc/device-tree/nvidia,dtsfilename``,
``/etc/nv_tegra_release`` (first line ``# R36 (release), REVISION: 4.3, ...``) and the ``/etc/nvpmodel.conf``
symlink, whose target names the per-SKU conf (``nvpmodel_p3767_0003_super.conf``).
``root`` lets tests point at a fake filesystem.
"""
import os
import re

from . import rooted

#: L4T release -> JetPack (rbonghi/jetson_stats ``jtop/core/jetson_variables.py`` NVIDIA_JETPACK, verbatim subset).
L4T_TO_JETPACK = {
    "32.4.4": "4.4.1", "32.5.0": "4.5", "32.5.1": "4.5.1", "32.5.2": "4.5.1", "32.6.1": "4.6", "32.7.1": "4.6.1",
    "32.7.2": "4.6.2", "32.7.3": "4.6.3", "32.7.4": "4.6.4", "32.7.5": "4.6.5", "32.7.6": "4.6.6",
    "34.1.0": "5.0 DP", "34.1.1": "5.0.1 DP", "35.1.0": "5.0.2 GA", "35.2.1": "5.1", "35.3.1": "5.1.1",
    "35.4.1": "5.1.2", "35.5.0": "5.1.3", "35.6.0": "5.1.4", "35.6.1": "5.1.5", "35.6.2": "5.1.5", "35.6.3": "5.1.5",
    "35.6.4": "5.1.6", "36.2.0": "6.0 DP", "36.3.0": "6.0", "36.4.0": "6.1", "36.4.2": "6.1 (rev1)", "36.4.3": "6.2",
    "36.4.4": "6.2.1", "36.4.7": "6.2.1", "36.5.0": "6.2.2", "38.2.0": "7.0", "38.2.1": "7.0", "38.2.2": "7.0",
    "38.4.0": "7.1", "39.0.0": "7.2 EA", "39.2.0": "7.2 GA",
}

#: CUDA compute capability by SoC (rbonghi/jetson_stats ``jtop/core/jetson_variables.py`` CUDA_TABLE).
SOC_COMPUTE_CAPABILITY = {"tegra210": "5.3", "tegra186": "6.2", "tegra194": "7.2", "tegra234": "8.7",
                          "tegra264": "11.0"}

_RELEASE_RE = re.compile(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*([0-9.]+)")
_MODULE_IN_COMPATIBLE_RE = re.compile(r"\+(p\d{4}-\d{4})")
_PNUMBER_RE = re.compile(r"(p\d{4}-\d{4})")
_SOC_RE = re.compile(r"\b(tegra\d{3})\b")


class BoardInfo(object):
    """What :func:`detect_board` found. ``module_id`` and ``jetpack`` may be None."""

    __slots__ = ("model", "compatible", "l4t_release", "jetpack", "module_id", "soc", "super_variant",
                 "nvpmodel_conf", "dts_filename")

    def __init__(self, model=None, compatible=None, l4t_release=None, jetpack=None, module_id=None, soc=None,
                 super_variant=False, nvpmodel_conf=None, dts_filename=None):
        self.model = model
        self.compatible = list(compatible or [])
        self.l4t_release = l4t_release
        self.jetpack = jetpack
        self.module_id = module_id
        self.soc = soc
        self.super_variant = bool(super_variant)
        self.nvpmodel_conf = nvpmodel_conf
        self.dts_filename = dts_filename

    @property
    def compute_capability(self):
        return SOC_COMPUTE_CAPABILITY.get(self.soc)

    def to_dict(self):
        return {name: getattr(self, name) for name in self.__slots__}

    def __repr__(self):
        return "BoardInfo(model={!r}, module_id={!r}, l4t_release={!r})".format(
            self.model, self.module_id, self.l4t_release)


def _read_text(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return None


def parse_model(raw):
    """The device-tree model string without its NUL terminator (jetson_clocks does ``tr -d '\\0'``)."""
    if raw is None:
        return None
    text = raw.replace("\x00", "").strip()
    return text or None


def parse_compatible(raw):
    """The NUL-separated compatible list, most specific first."""
    if raw is None:
        return []
    return [part.strip() for part in raw.split("\x00") if part.strip()]


def parse_nv_tegra_release(text):
    """``# R36 (release), REVISION: 4.3, ...`` -> "36.4.3" (as dusty-nv/jetson-containers
    ``jetson_containers/l4t_version.py`` reads it). None if absent."""
    if not text:
        return None
    for line in text.splitlines():
        match = _RELEASE_RE.search(line)
        if match:
            major, revision = match.group(1), match.group(2)
            parts = [major] + [p for p in revision.split(".") if p]
            while len(parts) < 3:
                parts.append("0")
            return ".".join(parts[:3])
    return None


def jetpack_for_l4t(release):
    """JetPack version for an L4T release (:data:`L4T_TO_JETPACK`), or None when the table does not list it."""
    if not release:
        return None
    return L4T_TO_JETPACK.get(release)


def module_id_from(compatible, dts_filename=None):
    """Module part number (``p3701-0005``): the ``carrier+module`` entry of compatible, else the first p-number
    in the dts file name (``tegra210-p3448-0000-p3449-0000-b00`` -> ``p3448-0000``)."""
    for entry in compatible:
        match = _MODULE_IN_COMPATIBLE_RE.search(entry)
        if match:
            return match.group(1)
    if dts_filename:
        match = _PNUMBER_RE.search(os.path.basename(dts_filename))
        if match:
            return match.group(1)
    return None


def nvpmodel_conf_target(root="/"):
    """Basename of the file ``/etc/nvpmodel.conf`` links to (a symlink NVIDIA's ``nvpower.sh`` makes at
    boot to the SKU's ``/etc/nvpmodel/nvpmodel_*.conf``), or
    ``nvpmodel.conf`` when it is a plain file, or None when it does not exist."""
    path = rooted(root, "/etc/nvpmodel.conf")
    if os.path.islink(path):
        try:
            return os.path.basename(os.readlink(path))
        except OSError:
            return None
    if os.path.isfile(path):
        return "nvpmodel.conf"
    return None


def detect_board(root="/"):
    """Identify the Jetson board under ``root``; None when nothing there looks like a Jetson."""
    model = parse_model(_read_text(rooted(root, "/proc/device-tree/model"))
                        or _read_text(rooted(root, "/sys/firmware/devicetree/base/model")))
    compatible = parse_compatible(_read_text(rooted(root, "/proc/device-tree/compatible"))
                                  or _read_text(rooted(root, "/sys/firmware/devicetree/base/compatible")))
    dts = parse_model(_read_text(rooted(root, "/proc/device-tree/nvidia,dtsfilename")))
    release = parse_nv_tegra_release(_read_text(rooted(root, "/etc/nv_tegra_release")))
    is_nvidia = any(entry.startswith("nvidia,") for entry in compatible)
    if not is_nvidia and release is None:
        return None
    soc = None
    for entry in compatible:
        match = _SOC_RE.search(entry)
        if match:
            soc = match.group(1)
            break
    conf = nvpmodel_conf_target(root)
    super_variant = any(entry.endswith("-super") for entry in compatible) or bool(
        conf and conf.endswith("_super.conf"))
    return BoardInfo(
        model=model,
        compatible=compatible,
        l4t_release=release,
        jetpack=jetpack_for_l4t(release),
        module_id=module_id_from(compatible, dts),
        soc=soc,
        super_variant=super_variant,
        nvpmodel_conf=conf,
        dts_filename=dts,
    )
