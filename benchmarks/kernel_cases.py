"""The cases the kernel benchmarks share: the CSWin-T24181 stage shapes at 224/384/512 and, per op call, its FLOPs and
compulsory bytes from the one cost model (edgeattn/cost.py). Used by kernels_gpu.py (GPU timing, roofline fractions)
and kernels_traffic.py (emulator-counted traffic against the compulsory bytes). Stdlib only.

Ops and their shapes per stage (the ELFATT branches get half of each stage's channels and heads):

  blockify_attention     (B, side^2, C/2), heads/2, the model's default window (stage-4 side; stage-3 side in stage 3)
  efficient_attention    (B, side^2, C/2), heads/2
  lite_mla, lite_mla_qt  qkv (B, 3C, side, side) in groups of LITE_MLA_HEAD_DIM, ReLU / quadratic Taylor
  soft_kernel_attention  (B, side^2, C), heads, (side / SOFT_STRIDES[stage])^2 landmarks, SOFT_NEWTON_ITERS steps
"""
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

from edgeattn import cost  # noqa: E402 -- pure Python (device-side), after the repository is on sys.path

RESOLUTIONS = (224, 384, 512)
#: the ops with a case per stage (kernels_gpu.py adds elfatt_core, a fixed shape)
STAGE_OPS = ("blockify_attention", "efficient_attention", "lite_mla", "lite_mla_qt", "soft_kernel_attention")
#: CSWin-T24181 per stage: channels, heads (the ELFATT branches take half of each)
CSWIN_T24181 = ((64, 2), (128, 4), (256, 8), (512, 16))
LITE_MLA_HEAD_DIM = 32
LITE_MLA_KERNELS = {"lite_mla": "relu", "lite_mla_qt": "quadratic_taylor"}
SOFT_STRIDES = (8, 4, 2, 1)
SOFT_NEWTON_ITERS = 20
ELEMENT_BYTES = {"float16": 2, "float32": 4}


def stage_cases(resolution):
    """One dict per CSWin-T24181 stage at ``resolution``: map side, full width (channels, heads), the ELFATT branch
    (half of each), the default ELFATT window (edgeattn.models.cswin: stage-4 side, stage-3 side for stage 3) and
    SOFT's landmark count."""
    sides = [resolution // 4, resolution // 8, resolution // 16, resolution // 32]
    windows = [sides[3], sides[3], sides[2], sides[3]]
    cases = []
    for stage, (channels, heads) in enumerate(CSWIN_T24181):
        side = sides[stage]
        cases.append({"resolution": resolution, "stage": stage + 1, "side": side, "tokens": side * side,
                      "channels": channels, "heads": heads, "branch_channels": channels // 2,
                      "branch_heads": heads // 2, "window": windows[stage],
                      "landmarks": (side // SOFT_STRIDES[stage]) ** 2})
    return cases


def op_shape(op, stage):
    """The C ABI sizes of ``op``'s call in ``stage`` (a stage_cases entry), batch aside: channels, heads and the
    op's own (window, head_dim and kernel, landmarks)."""
    if op in ("blockify_attention", "efficient_attention"):
        shape = {"channels": stage["branch_channels"], "heads": stage["branch_heads"]}
        if op == "blockify_attention":
            shape["window"] = stage["window"]
        return shape
    if op in LITE_MLA_KERNELS:
        return {"channels": stage["channels"], "heads": stage["channels"] // LITE_MLA_HEAD_DIM,
                "head_dim": LITE_MLA_HEAD_DIM, "kernel": LITE_MLA_KERNELS[op]}
    if op == "soft_kernel_attention":
        return {"channels": stage["channels"], "heads": stage["heads"], "landmarks": stage["landmarks"]}
    raise ValueError("unknown op {!r}".format(op))


# ---- FLOPs (edgeattn.cost's MACs x 2) and compulsory bytes --------------------------------------------------------
def blockify_flops(batch, side, channels, heads, window):
    """Q K^T and P V over every (padded) window: 2 products of T x T x d per window and head."""
    return float(cost.flops(cost.window_attention_macs(side, side, window, channels, batch=batch)))


def efficient_flops(batch, tokens, channels, heads):
    """context = k_hat^T v (d x N x d) and q_hat context (N x d x d) per head."""
    return float(cost.flops(cost.efficient_attention_macs(tokens, channels, heads, batch=batch)))


def lite_mla_flops(batch, tokens, channels, head_dim, kernel="relu"):
    """vk = [v; 1] phi(k)^T and vk phi(q) per group of the full width: N x F x (d + 1) each, F = d (ReLU) or
    2d + 1 (quadratic Taylor features)."""
    return float(cost.flops(cost.lite_mla_macs(tokens, channels // head_dim, head_dim, kernel, batch=batch)))


def soft_flops(batch, tokens, landmarks, channels, heads, iters=SOFT_NEWTON_ITERS):
    """Kernels Q L^T (N M d) and L L^T (M^2 d), Newton 2 M^3 per step, then P v, M (P v) and P^T (M P v)."""
    total, _ = cost.soft_macs(tokens, landmarks, heads, channels // heads, iters, batch=batch)
    return float(cost.flops(total))


def token_bytes(batch, tokens, channels, element, inputs=3):
    """Compulsory traffic of ``inputs`` (B, N, C) tensors read once and one written once."""
    return float(cost.token_tensors_bytes(tokens, channels, element, inputs=inputs, outputs=1, batch=batch))


def op_cost(op, stage, batch, dtype):
    """(FLOPs, compulsory bytes) of one call of ``op`` in ``stage`` at ``batch`` with ``dtype`` I/O."""
    element = ELEMENT_BYTES[dtype]
    shape = op_shape(op, stage)
    n, side, c, h = stage["tokens"], stage["side"], shape["channels"], shape["heads"]
    if op == "blockify_attention":
        return blockify_flops(batch, side, c, h, shape["window"]), token_bytes(batch, n, c, element)
    if op == "efficient_attention":
        return efficient_flops(batch, n, c, h), token_bytes(batch, n, c, element)
    if op in LITE_MLA_KERNELS:
        # qkv (B, 3C, H, W) read once, out (B, C, H, W) written once
        return (lite_mla_flops(batch, n, c, shape["head_dim"], shape["kernel"]),
                float(cost.compulsory_bytes(element, [batch * n * 3 * c], [batch * n * c])))
    m = shape["landmarks"]
    return (soft_flops(batch, n, m, c, h),
            float(cost.compulsory_bytes(element, [batch * n * c, batch * m * c, batch * n * c], [batch * n * c])))


def roofline_ms(flops, nbytes, tensor_tflops, bandwidth_gbps):
    """The physical bound of one call in ms: max(FLOPs at the tensor peak, compulsory bytes at the bandwidth), or
    None without both peaks."""
    if not tensor_tflops or not bandwidth_gbps:
        return None
    return max(flops / (tensor_tflops * 1e12), nbytes / (bandwidth_gbps * 1e9)) * 1e3

