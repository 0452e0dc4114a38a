"""Engine manifest rules: compatibility, the preflight message, reading a manifest, the batch against its profile."""
import json

import pytest

from edgeattn.errors import EdgeAttnError
from edgeattn.tensorrt.manifest import MANIFEST_SCHEMA, check_batch, compatibility_problem, manifest_path, preflight, \
    read_manifest

ORIN = {"name": "Orin", "compute_capability": "8.7"}


def _manifest(version="10.3.0", device=ORIN, version_compatible=False):
    return {"schema": MANIFEST_SCHEMA, "tensorrt": {"version": version, "version_compatible": version_compatible},
            "device": device, "rebuild_command": "edgeattn build m.onnx -o m.engine",
            "profiles": [{"inputs": {"x": {"min": [1, 3, 8, 8], "opt": [2, 3, 8, 8], "max": [4, 3, 8, 8]}}}]}


@pytest.mark.parametrize("built,vc,running,device,ok", [
    ("10.3.0", False, "10.3.0", ORIN, True),
    ("10.3.0", False, "10.3.1", ORIN, False),           # plain engines: exact version
    ("10.3.0", False, "8.6.2", ORIN, False),
    ("10.3.0", True, "10.7.0", ORIN, True),             # version-compatible: same major, newer
    ("10.7.0", True, "10.3.0", ORIN, False),            # ... never older
    ("10.3.0", True, "11.0.0", ORIN, False),            # ... never another major
    ("10.3.0", False, "10.3.0", {"name": "NVIDIA A100", "compute_capability": "8.0"}, False),
    # version compatibility is not hardware compatibility: a version-compatible engine still needs its GPU arch
    ("10.3.0", True, "10.7.0", {"name": "NVIDIA A100", "compute_capability": "8.0"}, False),
    ("10.3.0", False, "10.3.0", None, True),            # device unknown here: only the version is checked
])
def test_compatibility_rules(built, vc, running, device, ok):
    problem = compatibility_problem(_manifest(built, version_compatible=vc), running, device)
    assert (problem is None) == ok


def test_preflight_message_is_actionable():
    with pytest.raises(EdgeAttnError) as info:
        preflight("m.engine", _manifest(), "8.6.2", ORIN)
    assert info.value.format_message() == (
        "engine built with TensorRT 10.3.0 on Orin (sm_87); this machine has TensorRT 8.6.2 on Orin (sm_87): "
        "rebuild with `edgeattn build m.onnx -o m.engine`")
    preflight("m.engine", None, "8.6.2")  # no manifest, nothing to check


def test_read_manifest(tmp_path):
    engine = str(tmp_path / "m.engine")
    assert manifest_path(engine) == engine + ".json"
    assert read_manifest(engine) is None
    with open(engine + ".json", "w") as handle:
        handle.write("{broken")
    with pytest.raises(EdgeAttnError, match="cannot read the engine manifest"):
        read_manifest(engine)
    with open(engine + ".json", "w") as handle:
        json.dump({"schema": "something/else"}, handle)
    with pytest.raises(EdgeAttnError, match="not an edgeattn engine manifest"):
        read_manifest(engine)
    with open(engine + ".json", "w") as handle:
        json.dump(_manifest(), handle)
    assert read_manifest(engine)["tensorrt"]["version"] == "10.3.0"


def test_check_batch():
    assert check_batch(_manifest(), 3) == [("x", [3, 3, 8, 8])]
    with pytest.raises(EdgeAttnError, match=r"batch 5 is outside .*--shapes x:1x3x8x8,5x3x8x8,5x3x8x8"):
        check_batch(_manifest(), 5)
