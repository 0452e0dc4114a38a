"""Global-memory traffic and launches per op call, counted by the CPU emulator through benchmarks/kernels_traffic.py,
on a cheap subset of its stage cases (CSWin-T24181 at 224, stages 1 and 4: the largest and the smallest map), both
kernel paths, FP16.

For every op: each input is read and each output written at least once (the compulsory bytes are a lower bound a
correct kernel cannot go under), and the JSON entry's ratio is the counted sum over them. For the memory-bound ops
(EFFATT, LiteMLA ReLU and QT), issue 33's target is asserted (a change that adds traffic or launches fails): at most
2 kernel launches and at most 1.3x the compulsory bytes. Stage 1 (3136 tokens): the single launch of the work
queue, reductions then output chunks (measured 1.12-1.19x on the emulated AGX Orin's 16 SMs); stage 4 (a 7x7 map,
one token split): one fused launch whose context stays in shared memory, so exactly the compulsory bytes.
benchmarks/results/kernels_traffic.json has every stage case.
"""
import importlib.util
import os

import pytest

numpy = pytest.importorskip("numpy")

from plugin_test_utils import REPO_ROOT  # noqa: E402
from test_plugins_kernels_emulated import emulated_kernels, emulated_library, kernels  # noqa: E402,F401

SCRIPT = os.path.join(REPO_ROOT, "benchmarks", "kernels_traffic.py")
#: today's ceiling for the memory-bound ops (see the module docstring)
MEMORY_BOUND_CEILING = {"launches": 2, "bytes_over_compulsory": {1: 1.3, 4: 1.0}}


@pytest.fixture(scope="module")
def traffic():
    spec = importlib.util.spec_from_file_location("kernels_traffic", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stage(traffic, stage):
    return [case for case in traffic.kernel_cases.stage_cases(224) if case["stage"] == stage][0]


@pytest.mark.parametrize("stage", [1, 4])
@pytest.mark.parametrize("path", ["scalar", "tensor_core"])
@pytest.mark.parametrize("op", ["blockify_attention", "efficient_attention", "lite_mla", "lite_mla_qt",
                                "soft_kernel_attention"])
def test_every_call_moves_at_least_its_compulsory_bytes(kernels, traffic, op, path, stage):
    entry = traffic.measure(kernels, numpy, op, _stage(traffic, stage), 1, path)
    assert kernels.fault() == "", kernels.fault()
    shape = entry["shape"]
    n, c = entry["tokens"], shape["channels"]
    # each input read once and each output written once, by hand from the op's shapes (FP16)
    if op in ("lite_mla", "lite_mla_qt"):
        inputs, outputs = 2 * n * 3 * c, 2 * n * c
    elif op == "soft_kernel_attention":
        inputs, outputs = 2 * (2 * n * c + shape["landmarks"] * c), 2 * n * c
    else:
        inputs, outputs = 2 * 3 * n * c, 2 * n * c
    assert entry["compulsory_bytes"] == inputs + outputs
    assert entry["read_bytes"] >= inputs and entry["written_bytes"] >= outputs, entry
    assert entry["read_bytes"] == sum(launch["read_bytes"] for launch in entry["per_launch"])
    assert entry["launches"] + entry["other_stream_operations"] == len(entry["per_launch"])
    assert entry["bytes_over_compulsory"] == pytest.approx(
        (entry["read_bytes"] + entry["written_bytes"]) / float(inputs + outputs))
    expected_tensor_cores = path == "tensor_core"
    assert any("Mma" in launch["kernel"] for launch in entry["per_launch"]) is expected_tensor_cores, entry
    if op in traffic.MEMORY_BOUND_OPS:
        assert entry["launches"] <= MEMORY_BOUND_CEILING["launches"], entry
        assert entry["bytes_over_compulsory"] <= MEMORY_BOUND_CEILING["bytes_over_compulsory"][stage], entry
        met = entry["bytes_over_compulsory"] <= 1.3 and entry["launches"] <= 2
        assert entry["target_met"] is met
        if stage == 4:  # one fused launch, no workspace traffic at all
            assert entry["launches"] == 1 and entry["other_stream_operations"] == 0, entry


@pytest.mark.parametrize("op, landmarks, tensor_core, warp", [
    ("blockify_attention", None, "blockifyFlashMmaKernel", "blockifyMmaKernel"),
    ("soft_kernel_attention", 80, "softNewtonGemmSetupKernel", "softNewtonKernel"),
])
def test_the_warp_path_runs_its_own_kernels(kernels, traffic, op, landmarks, tensor_core, warp):
    """tensor_core_warp is measured with its own kernels (plugins/common/kernelPath.h): blockify's one warp per
    window instead of the pipelined CTA kernel, and SOFT's Newton-Raphson one block per problem instead of the GEMM
    tiles for M > 64 (80 landmarks, one head of 32 channels, on the 224 stage-4 map: the stage cases reach M > 64 at
    384 only, too slow here); the ops it does not change get no tensor_core_warp case."""
    stage = _stage(traffic, 4)
    if landmarks is not None:
        stage = dict(stage, channels=32, heads=1, landmarks=landmarks)
    first = {}
    for path in ("tensor_core", "tensor_core_warp"):
        entry = traffic.measure(kernels, numpy, op, stage, 1, path)
        assert kernels.fault() == "" and entry["path"] == path, kernels.fault()
        names = [launch["kernel"].split(" ")[0].split("<")[0] for launch in entry["per_launch"]]
        first[path] = [name for name in names if not name.startswith("cuda")][0]
    assert first == {"tensor_core": tensor_core, "tensor_core_warp": warp}
    args = traffic.parse_args(["--resolutions", "224", "--stages", "4", "--paths", "tensor_core_warp", "--ops",
                               "efficient_attention", "lite_mla", "lite_mla_qt"])
    assert traffic.run(args, kernels) == []


def test_unwatched_buffers_are_not_counted(kernels, traffic):
    """The counters see only the watched buffers: the same call with nothing watched counts nothing (so what the
    benchmark reports is the call's own traffic, not the emulator's bookkeeping)."""
    stage = _stage(traffic, 4)
    kernels.reset()
    kernels.set_compute_capability(5, 3)
    q = numpy.zeros((1, stage["tokens"], stage["branch_channels"]), dtype=numpy.float16)
    out = numpy.empty_like(q)
    nbytes = kernels.efficient_attention_workspace_size(1, stage["tokens"], stage["branch_channels"],
                                                        stage["branch_heads"])
    workspace = numpy.zeros(nbytes, dtype=numpy.uint8)
    kernels.efficient_attention(q.ctypes.data, q.ctypes.data, q.ctypes.data, out.ctypes.data, 1, stage["tokens"],
                                stage["branch_channels"], stage["branch_heads"], workspace.ctypes.data, nbytes,
                                dtype="float16")
    counted = kernels.traffic()
    assert counted and [launch["read_bytes"] + launch["written_bytes"] for launch in counted] == [0] * len(counted)
