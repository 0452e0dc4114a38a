"""The pipelined tensor-core blockify kernel (blockifyFlashMmaKernel, plugins/blockifyAttention/blockifyFlash.cuh) on the
CPU emulation, beyond the shared blockify cases of test_plugins_kernels_emulated.py (which run it on every FP16 case it
takes): its CTA layouts (several small windows per CTA, one window over several CTAs, fewer warps per CTA while a
batch-1 problem has fewer CTAs than the device has SMs), its cp.async ring over many key tiles, all four warp
schedules agreeing bit for bit, its global-memory traffic against the compulsory bytes, and bugs planted in a copy of
its source (a missing cp.async wait, V fragments without .trans, a missing barrier before a ring stage is refilled)
that the tests must catch. Accuracy: the GPU tests' criterion (kernel_reference_check.py), against the sm_53 scalar
kernel's path as well.
"""
import re

import pytest

torch = pytest.importorskip("torch")

import planted_bugs  # noqa: E402
from edgeattn.ops.blockify import blockify_attention  # noqa: E402
from emulation import build_emulated  # noqa: E402
from emulation.emulated_kernels import EmulatedKernels  # noqa: E402
from kernel_reference_check import assert_matches_reference  # noqa: E402
from test_plugins_kernels_emulated import (  # noqa: E402,F401  (fixtures are found by name in this module)
    Buffers, blockify_inputs, emulated_kernels, emulated_library, kernels, ptr, run_blockify)

FLASH = "blockifyFlashMmaKernel"
ORIN = (8, 7)


def _launch_shape(record):
    """(grid.x, block.x) of a launch record."""
    grid = re.search(r"grid=\((\d+),", record)
    block = re.search(r"block=\((\d+),", record)
    return int(grid.group(1)), int(block.group(1))


def run_all_schedules(kernels, q, k, v, weight, bias, height, width, heads, window, padding, sms=1,
                      round_robin_too=True):
    """The launch in all four schedules (index order and reversed, warp-greedy and round-robin; without
    `round_robin_too` the warp-greedy pair only) on an emulated device with `sms` SMs: bitwise identical outputs,
    the GPU tests' criterion met; returns the launch log."""
    batch, _, channels = q.shape
    outputs = []
    log = None
    for reverse in (False, True):
        for round_robin in (False, True) if round_robin_too else (False,):
            kernels.reset()
            kernels.set_multiprocessor_count(sms)
            kernels.set_schedule(reverse, round_robin)
            buffers = Buffers()
            qb, kb, vb = (buffers.input(t) for t in (q, k, v))
            wb = buffers.input(weight) if weight is not None else None
            bb = buffers.input(bias) if bias is not None else None
            out = buffers.output(q.shape, q.dtype)
            status = kernels.blockify_attention(ptr(qb), ptr(kb), ptr(vb), ptr(out), batch, height, width, channels,
                                                heads, window, padding=padding, dtype="float16", lepe_weight=ptr(wb),
                                                lepe_bias=ptr(bb), check=False)
            assert status == 0, (kernels.last_error(), kernels.fault())
            buffers.check("flash")
            outputs.append(out.clone())
            log = log or kernels.launches()
    for other in outputs[1:]:
        assert torch.equal(other.view(torch.int16), outputs[0].view(torch.int16)), "schedules disagree"

    def reference(q_, k_, v_, w_, b_):
        return blockify_attention(q_, k_, v_, num_heads=heads, height=height, width=width, window_size=window,
                                  lepe_weight=w_, lepe_bias=b_, padding=padding)

    assert_matches_reference(outputs[0], reference, [q, k, v, weight, bias], torch.float16, "flash")
    return log


LAYOUT_CASES = [
    # (label, batch, height, width, channels, heads, window, padding, lepe, SMs, (grid, block))
    # 16-token windows: four per CTA in one shared K/V tile (18 problems -> 5 CTAs, the last one with two)
    ("ws4 four windows per CTA", 1, 12, 12, 64, 2, 4, "none", True, 1, (5, 128)),
    # 25-token windows (two query tiles each): two per CTA, map cut by the windows (zeros / masked padding)
    ("ws5 two windows per CTA zeros", 2, 9, 8, 32, 1, 5, "zeros", True, 1, (4, 128)),
    ("ws5 two windows per CTA masked", 2, 9, 8, 32, 1, 5, "masked", True, 1, (4, 128)),
    # packing would leave SMs idle: one window per CTA instead
    ("ws4 unpacked for 16 SMs", 1, 12, 12, 64, 2, 4, "none", True, 16, (18, 32)),
    # fewer problems (8) than SMs (12): two warps per CTA (the rule that gives 224's stage 1 at batch 1 a CTA per SM
    # of an H100: test_flash_kernel_fills_the_gpu_at_small_batch)
    ("7x7 windows, 8 problems on 12 SMs", 1, 14, 14, 64, 2, 7, "none", True, 12, (16, 64)),
    # 144-token windows: nine query tiles -> three CTAs of three warps per window; three key tiles through the ring
    ("ws12 three CTAs per window", 1, 24, 24, 64, 2, 12, "none", True, 1, (24, 96)),
    # a 32x32 window (384 / 512 px stage 3): 16 key tiles through the two-stage ring; on 32 SMs 32 CTAs of two warps
    ("ws32 sixteen key tiles on 32 SMs", 1, 32, 32, 32, 1, 32, "none", True, 32, (32, 64)),
]


@pytest.mark.parametrize("case", LAYOUT_CASES, ids=[case[0] for case in LAYOUT_CASES])
def test_flash_kernel_layouts_in_all_schedules(kernels, case):
    label, batch, height, width, channels, heads, window, padding, lepe, sms, shape = case
    kernels.set_compute_capability(*ORIN)
    q, k, v, weight, bias = blockify_inputs(batch, height * width, channels, lepe, torch.float16)
    log = run_all_schedules(kernels, q, k, v, weight, bias, height, width, heads, window, padding, sms,
                            round_robin_too=window * window <= 256)
    assert len(log) == 1 and log[0].startswith(FLASH), log
    assert _launch_shape(log[0]) == shape, log


def test_flash_kernel_fills_the_gpu_at_small_batch(kernels):
    """Every CSWin-T24181 224 px stage shape of the ELFATT local branch at batch 1 on a 132-SM GPU (H100 / H200)
    gets at least one CTA per SM where it has at least 132 query tiles (fewer cannot: one warp per 16-row tile), or
    one warp per tile; on a 16-SM AGX Orin the same shapes keep four warps per CTA where that still fills it. Only
    the launch configuration is checked (one forward run each)."""
    stages = ((56, 32, 1, 7), (28, 64, 2, 7), (14, 128, 4, 14), (7, 256, 8, 7))  # side, channels, heads, window
    kernels.set_compute_capability(*ORIN)
    for side, channels, heads, window in stages:
        q = torch.zeros(1, side * side, channels, dtype=torch.float16)
        out = torch.empty_like(q)
        problems = heads * (side // window) ** 2
        tiles = problems * -(-window * window // 16)
        for sms in (132, 16):
            kernels.reset()
            kernels.set_multiprocessor_count(sms)
            kernels.blockify_attention(ptr(q), ptr(q), ptr(q), ptr(out), 1, side, side, channels, heads, window,
                                       dtype="float16")
            log = kernels.launches()
            blocks, threads = _launch_shape(log[0])
            assert log[0].startswith(FLASH) and blocks * threads // 32 >= tiles, log
            assert blocks >= sms or threads == 32, (side, sms, log)
            if problems >= sms:
                assert threads == 32 * min(4, -(-window * window // 16)), (side, sms, log)


def test_flash_kernel_traffic_is_the_compulsory_bytes(kernels):
    """Emulator-counted global traffic of one call at the 224 stage-1 shape (batch 2): q, k, v read once and out
    written once (16-byte rows), plus the LePE weights once per CTA; one launch."""
    kernels.set_compute_capability(*ORIN)
    batch, side, channels, heads, window = 2, 56, 64, 2, 7
    q, k, v, weight, bias = blockify_inputs(batch, side * side, channels, True, torch.float16)
    out = torch.empty_like(q)
    kernels.reset()
    for tensor in (q, k, v, weight, bias, out):
        kernels.watch_global(tensor.data_ptr(), tensor.numel() * tensor.element_size())
    kernels.blockify_attention(ptr(q), ptr(k), ptr(v), ptr(out), batch, side, side, channels, heads, window,
                               dtype="float16", lepe_weight=ptr(weight), lepe_bias=ptr(bias))
    traffic = kernels.traffic()
    assert len(traffic) == 1 and traffic[0]["name"].startswith(FLASH), traffic
    tensor_bytes = q.numel() * 2
    ctas = batch * heads * (side // window) ** 2
    lepe_bytes = ctas * (channels // heads) * 10 * 2  # 9 taps + bias of the CTA's head
    assert traffic[0]["written_bytes"] == tensor_bytes
    assert traffic[0]["read_bytes"] == 3 * tensor_bytes + lepe_bytes
    # the LePE table (640 bytes per CTA of 12.5 KB of q, k, v and out) is the only traffic beyond the compulsory
    assert (traffic[0]["read_bytes"] + traffic[0]["written_bytes"]) / (4.0 * tensor_bytes + weight.numel() * 2
                                                                       + bias.numel() * 2) < 1.06


# ---- bugs planted in a copy of the flash kernel's source (planted_bugs.py): the tests above must catch each ---------
@pytest.fixture(scope="module")
def planted(emulated_library):
    try:
        library = EmulatedKernels(planted_bugs.variant_library())
    except build_emulated.RewriteError as error:
        pytest.fail("a planted bug no longer applies: {}".format(error))
    library.reset()
    yield library
    library.set_planted_bug(0)
    library.reset()


@pytest.mark.parametrize("bug", [1, 2, 3], ids=[planted_bugs.BUGS[bug][0] for bug in (1, 2, 3)])
def test_a_bug_planted_in_the_flash_kernel_is_caught(planted, bug):
    """A 144-token window (three key tiles through the ring, three CTAs of three warps) passes on the variant with no
    bug switched on and fails with each one; the scalar path of the same library still passes with it."""
    q, k, v, weight, bias = blockify_inputs(1, 12 * 12, 32, True, torch.float16)
    planted.set_compute_capability(*ORIN)
    run_all_schedules(planted, q, k, v, weight, bias, 12, 12, 1, 12, "none")
    planted.set_planted_bug(bug)
    try:
        planted.set_compute_capability(5, 3)
        run_blockify(planted, q, k, v, weight, bias, 12, 12, 1, 12, 0.0, "none")
        planted.set_compute_capability(*ORIN)
        with pytest.raises(AssertionError) as caught:
            run_all_schedules(planted, q, k, v, weight, bias, 12, 12, 1, 12, "none")
    finally:
        planted.set_planted_bug(0)
    assert planted.launches()[0].startswith(FLASH), planted.launches()
    message = str(caught.value)
    assert "FP16 max error" in message or "non-finite" in message or "schedules disagree" in message, message
