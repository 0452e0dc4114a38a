"""Board identity: device tree, nv_tegra_release, L4T -> JetPack, module IDs, profile matching."""
import os

import pytest

from edgeattn import profiles
from edgeattn.jetson import board as board_io

import fakeharness

# Real first lines of /etc/nv_tegra_release (dusty-nv/jetson-containers l4t_version.py's examples,
# lesomnus/tegra-exporter's tests) and the releases they name.
RELEASE_LINES = [
    ("# R32 (release), REVISION: 7.1, GCID: 29689809, BOARD: t186ref, EABI: aarch64, DATE: Wed Feb  2 21:33:23 UTC "
     "2022", "32.7.1", "4.6.1"),
    ("# R35 (release), REVISION: 3.1, GCID: 32790763, BOARD: t186ref, EABI: aarch64, DATE: Wed Mar 15 07:54:12 UTC "
     "2023", "35.3.1", "5.1.1"),
    ("# R36 (release), REVISION: 4.4, GCID: 41062509, BOARD: generic, EABI: aarch64, DATE: Mon Jun 16 16:07:13 UTC "
     "2025", "36.4.4", "6.2.1"),
    ("# R38 (release), REVISION: 4.0, GCID: 43443517, BOARD: generic, EABI: aarch64, DATE: Wed Dec 31 00:15:19 UTC "
     "2025", "38.4.0", "7.1"),
]


@pytest.mark.parametrize("line, release, jetpack", RELEASE_LINES)
def test_nv_tegra_release(line, release, jetpack):
    assert board_io.parse_nv_tegra_release(line + "\n# KERNEL_VARIANT: oot\n") == release
    assert board_io.jetpack_for_l4t(release) == jetpack


def test_release_parsing_edge_cases():
    assert board_io.parse_nv_tegra_release("") is None
    assert board_io.parse_nv_tegra_release("garbage") is None
    assert board_io.jetpack_for_l4t("99.9.9") is None


def test_compatible_and_module_ids():
    raw = "nvidia,p3768-0000+p3767-0005-super\x00nvidia,tegra234\x00"
    compatible = board_io.parse_compatible(raw)
    assert compatible == ["nvidia,p3768-0000+p3767-0005-super", "nvidia,tegra234"]
    assert board_io.module_id_from(compatible) == "p3767-0005"
    nano = ["nvidia,p3450-0000", "nvidia,jetson-nano", "nvidia,tegra210"]
    assert board_io.module_id_from(nano) is None
    assert board_io.module_id_from(nano, "tegra210-p3448-0000-p3449-0000-b00") == "p3448-0000"
    assert board_io.parse_model("NVIDIA Jetson Nano Developer Kit\x00") == "NVIDIA Jetson Nano Developer Kit"


def test_not_a_jetson(tmp_path):
    assert board_io.detect_board(str(tmp_path)) is None


@pytest.mark.parametrize("name", fakeharness.BOARD_NAMES)
def test_every_fake_board_is_detected_and_matched(tmp_path, name):
    fake = fakeharness.FakeBoard(tmp_path, name)
    found = board_io.detect_board(fake.root)
    assert found.model == fake.spec["model"] and found.compatible == fake.spec["compatible"]
    assert found.soc == fake.spec["soc"]
    assert found.nvpmodel_conf == fake.spec["conf"]
    assert found.super_variant == fake.spec["conf"].endswith("_super.conf")
    assert found.compute_capability == profiles.load_profile(fake.spec["profile"]).compute_capability
    assert profiles.match_board(found).name == fake.spec["profile"]


def test_nano_2gb_is_not_taken_for_the_4gb(tmp_path):
    # a Nano 2GB device tree (published capture) lists "nvidia,p3541-0000", "nvidia,p3450-0000", "nvidia,tegra210"
    fake = fakeharness.FakeBoard(tmp_path, "nano-4gb")
    with open(os.path.join(fake.root, "proc", "device-tree", "compatible"), "wb") as handle:
        handle.write(b"nvidia,p3541-0000\0nvidia,p3450-0000\0nvidia,tegra210\0")
    assert profiles.match_board(board_io.detect_board(fake.root)) is None
