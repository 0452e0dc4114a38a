#!/usr/bin/env python3
"""Like-with-like GPU benchmark of the edgeattn CUDA kernels (issue 12 item 4): each kernel against the best PyTorch
implementation of the *same* math on the same GPU; JSON out.

Why one script of ~490 lines: what is left here is the per-op measurement loop and the command line; the cases
and cost formulas (kernel_cases.py), the baselines (kernel_baselines.py) and the device report and timing
(gpu_device.py) already live apart.

Cases: the CSWin-T24181 stage shapes at 224, 384 and 512 (maps res/4, res/8, res/16, res/32; channels 64/128/256/
512, heads 2/4/8/16; the ELFATT branches get half of each; windows = the model's defaults: stage-4 side for
stages 1, 2, 4 and stage-3 side for stage 3, i.e. 7-7-14-7 / 12-12-24-12 / 16-16-32-16), batch 1 and 64, FP16 and
FP32 (PyTorch with TF32 off and on; the edgeattn FP32 kernels never use TF32):

  blockify_attention   ELFATT local branch. edgeattn scalar kernels and tensor-core kernels (each forced with
                       edgeattn_set_kernel_path), against torch scaled_dot_product_attention over the windows as
                       one batch (B * windows, heads, ws^2, d) with the flash and the efficient backends (FP32:
                       efficient and math; flash has no FP32). No LePE on either side.
  efficient_attention  ELFATT global branch. Against its cuBLAS bmm decomposition in the input dtype: two softmaxes,
                       context = k_hat^T v, out = q_hat context (torch.bmm on (B * heads, N, d)).
  lite_mla, lite_mla_qt  The full stage width in groups of 32. ReLU against its bmm decomposition (v padded with a
                       row of ones, vk = v_pad relu(k)^T, out = vk relu(q), num / den in FP32); QT against the
                       edgeattn.ops reference (FP32 internally: there is no cheaper same-math PyTorch form).
  soft_kernel_attention  The full stage width, SOFT's landmark grids (8x8 .. 1x1 strides per stage), 20 Newton
                       steps. Against its PyTorch reference (edgeattn.ops.soft_kernel_attention).
  elfatt_core          Issue 5's target: EFFATT on C/2 + blockify (7x7) on C/2 vs full softmax attention (SDPA,
                       flash) at N = 3136 and 65536, C = 64, 2 heads.

Timing: CUDA events around --iters calls after --warmup, median of --repeats; by default the --iters calls are
captured once into a CUDA graph and the graph's replays are timed (--timing graph: the GPU time alone, without the
Python/ctypes launch overhead that dominates calls of a few microseconds; each result's "timing" says which mode it
got, "eager" where a function could not be captured; --timing eager times plain calls). Each result has latency, TFLOP/s
(FLOPs of the math itself: blockify 4 B h W T^2 d for W windows of T tokens, ...) and GB/s (inputs read once +
output written once) against the device's peaks: dense FP16 tensor and FP32 FMA throughput from SM count x clock x
per-SM rate by compute capability (an estimate; --peak-tflops overrides), memory bandwidth from the driver
(--peak-gbps overrides), and the fraction of the case's roofline bound each reached (fraction_of_roofline: the
larger of FLOPs at the FP16 tensor peak and compulsory bytes at the bandwidth, over the latency; roofline_bound says
which; the formulas are edgeattn/cost.py's, through kernel_cases.py). The JSON holds the device (name, capability, SMs, clocks), driver, CUDA, torch versions,
the kernels library's build line, every result, each edgeattn result's speedup over the same-math PyTorch
baselines, and the issue's targets evaluated on an H100 (`targets`, null where not measured).

Modules: kernel_cases.py (the stage cases, FLOPs and compulsory bytes from edgeattn/cost.py; shared with
kernels_traffic.py), gpu_device.py (device report, peaks, CUDA-event and CUDA-graph timing; shared with
models_gpu.py), kernel_baselines.py (the same math in PyTorch); this file: arguments, the run, speedups, targets,
the JSON.

Needs a CUDA GPU, torch with CUDA and a built kernels library (--library, $EDGEATTN_KERNELS_LIB, or
plugins/build/libedgeattn_kernels.so). Importing this module needs neither (tests/plugins/test_kernels_gpu_benchmark.py
checks the tables, formulas and the same-math decompositions on the CPU).

    python benchmarks/kernels_gpu.py --json runs/kernels_gpu.json
    python benchmarks/kernels_gpu.py --resolutions 224 --batches 64 --ops blockify_attention --dtypes float16
"""
import argparse
import datetime
import os
import platform
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# the cases and their FLOPs / compulsory bytes, shared with kernels_traffic.py (formulas: edgeattn/cost.py)
from kernel_cases import (LITE_MLA_HEAD_DIM, RESOLUTIONS, SOFT_NEWTON_ITERS, STAGE_OPS, blockify_flops,  # noqa: E402
                          efficient_flops, lite_mla_flops, roofline_ms, soft_flops, stage_cases, token_bytes)
# the device, its peaks, CUDA-event timing and the report writer (shared with models_gpu.py), the PyTorch baselines
from gpu_device import (device_report, driver_version, estimated_peaks, nvidia_driver_version,  # noqa: E402,F401
                        time_ms, write_report)
from kernel_baselines import blockify_sdpa, efficient_bmm, lite_mla_relu_bmm  # noqa: E402,F401

PROGRAM = "kernels_gpu.py"
BATCHES = (1, 64)
OPS = STAGE_OPS + ("elfatt_core",)
DTYPES = ("float16", "float32")
ELFATT_CORE_TOKENS = (3136, 65536)
ELFATT_CORE_CHANNELS, ELFATT_CORE_HEADS, ELFATT_CORE_WINDOW = 64, 2, 7
#: issue 12's targets on an H100 (and issue 5's ELFATT-core targets)
TARGETS = {"min_speedup_fp16_batch64": 1.0, "blockify_tensor_fraction_512_batch64": 0.25,
           "linear_bandwidth_fraction": 0.60, "elfatt_core_speedup": {3136: 2.0, 65536: 10.0}}


class UsageError(Exception):
    """Bad arguments or an unusable machine: one line on stderr, exit status 2."""


# ---- arguments -------------------------------------------------------------------------------------------------------
def _positive_ints(text):
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("{!r} is not a comma-separated list of integers".format(text))
    if not values or any(value <= 0 for value in values):
        raise argparse.ArgumentTypeError("{!r}: need positive integers".format(text))
    return tuple(values)


def _choices(allowed):
    def parse(text):
        values = tuple(part.strip() for part in text.split(",") if part.strip())
        unknown = [value for value in values if value not in allowed]
        if not values or unknown:
            raise argparse.ArgumentTypeError("{!r}: choose from {}".format(text, ", ".join(allowed)))
        return values
    return parse


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def parse_args(argv=None):
    parser = _Parser(prog=PROGRAM, description=__doc__.split("\n")[0])
    parser.add_argument("--library", default=None, help="libedgeattn_kernels.so (or libedgeattn_plugins.so)")
    parser.add_argument("--resolutions", type=_positive_ints, default=RESOLUTIONS,
                        help="input resolutions, multiples of 32 (default 224,384,512)")
    parser.add_argument("--batches", type=_positive_ints, default=BATCHES, help="batch sizes (default 1,64)")
    parser.add_argument("--ops", type=_choices(OPS), default=OPS, help="subset of " + ",".join(OPS))
    parser.add_argument("--dtypes", type=_choices(DTYPES), default=DTYPES, help="float16,float32")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--timing", choices=("graph", "eager"), default="graph",
                        help="graph (default): replays of a CUDA graph of --iters calls, the GPU time alone; eager: "
                             "back-to-back calls from Python, launch overhead included")
    parser.add_argument("--peak-tflops", type=float, default=None, help="dense FP16 tensor peak (TFLOP/s)")
    parser.add_argument("--peak-fp32-tflops", type=float, default=None, help="FP32 FMA peak (TFLOP/s)")
    parser.add_argument("--peak-gbps", type=float, default=None, help="memory bandwidth peak (GB/s)")
    parser.add_argument("--json", "--out", dest="out", default=None, help="write the JSON here (default: stdout)")
    args = parser.parse_args(argv)
    bad = [r for r in args.resolutions if r % 32]
    if bad:
        raise UsageError("--resolutions: {} not a multiple of 32 (the four stages downsample by 32)".format(bad))
    if min(args.warmup, args.repeats) < 0 or args.iters < 1 or args.repeats < 1:
        raise UsageError("--iters and --repeats must be >= 1 and --warmup >= 0")
    for name in ("peak_tflops", "peak_fp32_tflops", "peak_gbps"):
        if getattr(args, name) is not None and getattr(args, name) <= 0:
            raise UsageError("--{} must be positive".format(name.replace("_", "-")))
    return args


class Recorder(object):
    def __init__(self, device):
        self.device = device
        self.results = []

    def measure(self, case, impl, bench, fn, flops, nbytes, dtype, tf32):
        """Time ``fn`` and record it; a failure (a backend that refuses the shape, a kernel error) is recorded
        with its message instead of ending the whole run."""
        try:
            ms, timing = bench(fn)
        except Exception as error:  # noqa: BLE001 -- recorded in the JSON, and the run goes on
            message = "{}: {}".format(type(error).__name__, str(error).strip().splitlines()[0] if str(error) else "")
            self.results.append(dict(case, impl=impl, dtype=dtype, tf32=tf32, latency_ms=None, flops=flops,
                                     bytes=nbytes, error=message))
            sys.stderr.write("{:>22} {} {}: FAILED {}\n".format(case["op"], impl, dtype, message))
            return
        self.add(case, impl, ms, flops, nbytes, dtype, tf32, timing)

    def add(self, case, impl, ms, flops, nbytes, dtype, tf32, timing):
        tensor_peak = self.device["peak_fp16_tensor_tflops"]
        fp32_peak = self.device["peak_fp32_tflops"]
        bandwidth_peak = self.device["peak_bandwidth_gbps"]
        tflops = flops / (ms * 1e-3) / 1e12 if ms else None
        gbps = nbytes / (ms * 1e-3) / 1e9 if ms else None
        # the physical bound (FLOPs at the FP16 tensor peak or compulsory bytes at the bandwidth, the larger; FP32
        # I/O judged against the same tensor peak, as the targets are) and how close the call came to it
        bound_ms = roofline_ms(flops, nbytes, tensor_peak, bandwidth_peak)
        entry = dict(case, impl=impl, dtype=dtype, tf32=tf32, latency_ms=ms, timing=timing, flops=flops,
                     bytes=nbytes, tflops=tflops, gbps=gbps,
                     fraction_of_fp16_tensor_peak=tflops / tensor_peak if tflops and tensor_peak else None,
                     fraction_of_fp32_peak=tflops / fp32_peak if tflops and fp32_peak else None,
                     fraction_of_bandwidth_peak=gbps / bandwidth_peak if gbps and bandwidth_peak else None,
                     roofline_ms=bound_ms, fraction_of_roofline=bound_ms / ms if bound_ms and ms else None,
                     roofline_bound=None if bound_ms is None else (
                         "compute" if flops / (tensor_peak * 1e12) >= nbytes / (bandwidth_peak * 1e9) else "memory"))
        self.results.append(entry)
        line = "{:>22} {}px s{} B={:<3} {:8} tf32={:<5} {:<26} {:9.4f} ms {:7.2f} TFLOP/s {:7.1f} GB/s\n"
        sys.stderr.write(line.format(case["op"], case.get("resolution", "-"), case.get("stage", "-"), case["batch"],
                                     dtype, str(tf32), impl, ms, tflops or 0.0, gbps or 0.0))


def case_key(entry):
    """What makes two results the same case (implementations of one case are compared with each other)."""
    return tuple(entry.get(name) for name in ("op", "resolution", "stage", "batch", "tokens", "dtype", "tf32"))


def add_speedups(results):
    """Each edgeattn result gets speedup_vs_<impl> = that impl's latency / its own, for the same case."""
    by_case = {}
    for entry in results:
        by_case.setdefault(case_key(entry), []).append(entry)
    for entries in by_case.values():
        baselines = [e for e in entries if not e["impl"].startswith("edgeattn") and e["latency_ms"]]
        for entry in entries:
            if entry["impl"].startswith("edgeattn") and entry["latency_ms"]:
                for baseline in baselines:
                    entry["speedup_vs_" + baseline["impl"]] = baseline["latency_ms"] / entry["latency_ms"]
                if baselines:
                    entry["speedup_vs_best_pytorch"] = min(b["latency_ms"] for b in baselines) / entry["latency_ms"]
    return results


def faster_paths(results):
    """Per case, the edgeattn entry of the faster kernel path (scalar or tensor-core): the path a deployment
    should run (EDGEATTN_KERNEL_PATH picks it). Failed measurements take no part."""
    best = {}
    for entry in results:
        if entry["impl"].startswith("edgeattn") and entry.get("latency_ms"):
            current = best.get(case_key(entry))
            if current is None or entry["latency_ms"] < current["latency_ms"]:
                best[case_key(entry)] = entry
    return list(best.values())


def evaluate_targets(results):
    """The issue's targets over the measured results, each case judged by its faster kernel path: each value is
    {"met": bool, ...} or None when not measured."""
    faster = [e for e in faster_paths(results) if e["dtype"] == "float16"]
    batch64 = [e for e in faster if e["batch"] == 64 and e["op"] != "elfatt_core"]

    def case(entry):
        return [entry["op"], entry.get("resolution"), entry.get("stage"), entry["impl"]]

    speedups = [e for e in batch64 if e.get("speedup_vs_best_pytorch") is not None]
    speedup = None
    if speedups:
        worst = min(speedups, key=lambda e: e["speedup_vs_best_pytorch"])
        speedup = {"met": worst["speedup_vs_best_pytorch"] >= TARGETS["min_speedup_fp16_batch64"],
                   "worst": worst["speedup_vs_best_pytorch"], "worst_case": case(worst),
                   "target": TARGETS["min_speedup_fp16_batch64"]}

    def lowest(entries, field, target):
        entries = [e for e in entries if e.get(field) is not None]
        if not entries:
            return None
        worst = min(entries, key=lambda e: e[field])
        return {"met": worst[field] >= target, "lowest": worst[field], "lowest_case": case(worst), "target": target}

    blockify = lowest([e for e in batch64 if e["op"] == "blockify_attention" and e.get("resolution") == 512],
                      "fraction_of_fp16_tensor_peak", TARGETS["blockify_tensor_fraction_512_batch64"])
    linear = lowest([e for e in batch64 if e["op"] in ("efficient_attention", "lite_mla", "lite_mla_qt")],
                    "fraction_of_bandwidth_peak", TARGETS["linear_bandwidth_fraction"])
    core = {}
    for tokens, target in TARGETS["elfatt_core_speedup"].items():
        ratios = [e["speedup_vs_sdpa_flash"] for e in faster if e["op"] == "elfatt_core" and e["tokens"] == tokens
                  and e.get("speedup_vs_sdpa_flash") is not None]
        core[str(tokens)] = {"met": max(ratios) >= target, "speedup": max(ratios), "target": target} if ratios else None
    return {"kernels_vs_pytorch_fp16_batch64": speedup, "blockify_tensor_peak_512_batch64": blockify,
            "linear_passes_bandwidth_fp16_batch64": linear, "elfatt_core_vs_sdpa": core,
            "note": "targets are set for an H100 (issue 12 item 4, issue 5); each case is judged by its faster "
                    "kernel path"}


# ---- the runs --------------------------------------------------------------------------------------------------------
def run(args, torch, kernels, device, on_progress=None):
    """Every selected case; ``on_progress(results)`` after each stage and each ELFATT-core run, so a run stopped
    by a time limit still leaves what it measured."""
    from torch.nn.attention import SDPBackend

    from edgeattn.ops.litemla import lite_mla_attention
    from edgeattn.ops.soft import soft_kernel_attention

    def stream():
        # read at every launch: during CUDA-graph capture torch's current stream is the capturing one
        return torch.cuda.current_stream().cuda_stream

    recorder = Recorder(device)
    bench = lambda fn: time_ms(torch, fn, args.warmup, args.iters, args.repeats, args.timing == "graph")  # noqa: E731
    capability = torch.cuda.get_device_capability()

    def variants(dtype_name):
        """(tf32 flag for PyTorch) per dtype: FP32 twice (TF32 off, on), FP16 once."""
        return [False, True] if dtype_name == "float32" else [False]

    def edgeattn_paths(dtype_name):
        paths = ["scalar"]
        if dtype_name == "float16" and capability >= (8, 0):
            paths.append("tensor_core")
        return paths

    for dtype_name in args.dtypes:
        dtype = getattr(torch, dtype_name)
        element = torch.tensor([], dtype=dtype).element_size()
        for tf32 in variants(dtype_name):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32
            for resolution in args.resolutions:
                for stage in stage_cases(resolution):
                    for batch in args.batches:
                        _run_stage(args, torch, kernels, recorder, bench, stream, stage, batch, dtype, dtype_name,
                                   element, tf32, edgeattn_paths(dtype_name), SDPBackend, lite_mla_attention,
                                   soft_kernel_attention)
                        if on_progress:
                            on_progress(add_speedups(recorder.results))
            if "elfatt_core" in args.ops:
                _run_elfatt_core(args, torch, kernels, recorder, bench, stream, dtype, dtype_name, element, tf32,
                                 edgeattn_paths(dtype_name), SDPBackend)
                if on_progress:
                    on_progress(add_speedups(recorder.results))
    kernels.set_kernel_path("auto")
    return add_speedups(recorder.results)


def _run_stage(args, torch, kernels, recorder, bench, stream, stage, batch, dtype, dtype_name, element, tf32, paths,
               SDPBackend, lite_mla_attention, soft_kernel_attention):
    n, side = stage["tokens"], stage["side"]
    base = {k: stage[k] for k in ("resolution", "stage", "side", "tokens", "window")}
    base["batch"] = batch

    def edgeattn(case, launch, flops, nbytes, extra_paths=()):
        for path in list(paths) + [path for path in extra_paths if "tensor_core" in paths]:
            kernels.set_kernel_path(path)
            recorder.measure(case, "edgeattn_" + path, bench, launch, flops, nbytes, dtype_name, tf32)

    if "blockify_attention" in args.ops:
        c, h, ws = stage["branch_channels"], stage["branch_heads"], stage["window"]
        q, k, v = (torch.randn(batch, n, c, device="cuda", dtype=dtype) for _ in range(3))
        out = torch.empty_like(q)
        case = dict(base, op="blockify_attention", channels=c, heads=h)
        flops, nbytes = blockify_flops(batch, side, c, h, ws), token_bytes(batch, n, c, element)
        edgeattn(case, lambda: kernels.blockify_attention(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                                                          batch, side, side, c, h, ws, padding="zeros",
                                                          dtype=dtype_name, stream=stream()), flops, nbytes)
        backends = [("sdpa_flash", SDPBackend.FLASH_ATTENTION)] if dtype_name == "float16" else []
        backends += [("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION)]
        backends += [("sdpa_math", SDPBackend.MATH)] if dtype_name == "float32" else []
        for name, backend in backends:
            recorder.measure(case, name, bench, lambda backend=backend: blockify_sdpa(q, k, v, h, side, side, ws,
                                                                                      backend),
                             flops, nbytes, dtype_name, tf32)
        del q, k, v, out

    if "efficient_attention" in args.ops:
        c, h = stage["branch_channels"], stage["branch_heads"]
        q, k, v = (torch.randn(batch, n, c, device="cuda", dtype=dtype) for _ in range(3))
        out = torch.empty_like(q)
        nbytes_ws = kernels.efficient_attention_workspace_size(batch, n, c, h)
        workspace = torch.empty(max(nbytes_ws, 1), dtype=torch.uint8, device="cuda")
        case = dict(base, op="efficient_attention", channels=c, heads=h)
        flops, nbytes = efficient_flops(batch, n, c, h), token_bytes(batch, n, c, element)
        edgeattn(case, lambda: kernels.efficient_attention(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                                                           batch, n, c, h, workspace.data_ptr(), workspace.numel(),
                                                           dtype=dtype_name, stream=stream()), flops, nbytes)
        recorder.measure(case, "cublas_bmm", bench, lambda: efficient_bmm(q, k, v, h), flops, nbytes, dtype_name,
                         tf32)
        del q, k, v, out, workspace

    for op, kernel in (("lite_mla", "relu"), ("lite_mla_qt", "quadratic_taylor")):
        if op not in args.ops:
            continue
        c, d = stage["channels"], LITE_MLA_HEAD_DIM
        qkv = torch.randn(batch, 3 * c, side, side, device="cuda", dtype=dtype)
        out = torch.empty(batch, c, side, side, device="cuda", dtype=dtype)
        nbytes_ws = kernels.lite_mla_workspace_size(batch, 3 * c, side, side, d, kernel)
        workspace = torch.empty(max(nbytes_ws, 1), dtype=torch.uint8, device="cuda")
        case = dict(base, op=op, channels=c, heads=c // d)
        flops, nbytes = lite_mla_flops(batch, n, c, d, kernel), token_bytes(batch, n, c, element)
        edgeattn(case, lambda: kernels.lite_mla(qkv.data_ptr(), out.data_ptr(), batch, 3 * c, side, side, d,
                                                workspace.data_ptr(), workspace.numel(), kernel=kernel, eps=1e-15,
                                                dtype=dtype_name, stream=stream()), flops, nbytes)
        if kernel == "relu":
            recorder.measure(case, "cublas_bmm", bench, lambda: lite_mla_relu_bmm(qkv, d), flops, nbytes, dtype_name,
                             tf32)
        else:
            recorder.measure(case, "torch_reference", bench, lambda: lite_mla_attention(qkv, head_dim=d, kernel=kernel,
                                                                                       eps=1e-15),
                             flops, nbytes, dtype_name, tf32)
        del qkv, out, workspace

    if "soft_kernel_attention" in args.ops:
        c, h, m = stage["channels"], stage["heads"], stage["landmarks"]
        d = c // h
        q = torch.randn(batch, n, c, device="cuda", dtype=dtype) * d ** -0.25
        landmarks = torch.randn(batch, m, c, device="cuda", dtype=dtype) * d ** -0.25
        v = torch.randn(batch, n, c, device="cuda", dtype=dtype)
        out = torch.empty_like(q)
        nbytes_ws = kernels.soft_kernel_attention_workspace_size(batch, n, m, c, h)
        workspace = torch.empty(max(nbytes_ws, 1), dtype=torch.uint8, device="cuda")
        case = dict(base, op="soft_kernel_attention", channels=c, heads=h, landmarks=m)
        flops = soft_flops(batch, n, m, c, h)
        nbytes = token_bytes(batch, n, c, element, inputs=2) + batch * m * c * element
        edgeattn(case, lambda: kernels.soft_kernel_attention(q.data_ptr(), landmarks.data_ptr(), v.data_ptr(),
                                                             out.data_ptr(), batch, n, m, c, h, workspace.data_ptr(),
                                                             workspace.numel(), newton_iters=SOFT_NEWTON_ITERS,
                                                             dtype=dtype_name, stream=stream()), flops, nbytes,
                 # M > 64: the Newton-Raphson one block per problem (AUTO's default) beside the GEMM tiles
                 extra_paths=("tensor_core_warp",))
        recorder.measure(case, "torch_reference", bench, lambda: soft_kernel_attention(q, landmarks, v, num_heads=h,
                                                                                      newton_iters=SOFT_NEWTON_ITERS),
                         flops, nbytes, dtype_name, tf32)
        del q, landmarks, v, out, workspace
    torch.cuda.empty_cache()


def _run_elfatt_core(args, torch, kernels, recorder, bench, stream, dtype, dtype_name, element, tf32, paths,
                     SDPBackend):
    import torch.nn.functional as F

    c, h, ws = ELFATT_CORE_CHANNELS, ELFATT_CORE_HEADS, ELFATT_CORE_WINDOW
    half, d = c // 2, c // h
    for n in ELFATT_CORE_TOKENS:
        side = int(round(n ** 0.5))
        q, k, v = (torch.randn(1, n, c, device="cuda", dtype=dtype) for _ in range(3))
        qg, kg, vg = (t[..., :half].contiguous() for t in (q, k, v))
        ql, kl, vl = (t[..., half:].contiguous() for t in (q, k, v))
        og, ol = torch.empty_like(qg), torch.empty_like(ql)
        nbytes_ws = kernels.efficient_attention_workspace_size(1, n, half, 1)
        workspace = torch.empty(max(nbytes_ws, 1), dtype=torch.uint8, device="cuda")
        padding = "none" if side % ws == 0 else "zeros"
        case = {"op": "elfatt_core", "tokens": n, "side": side, "batch": 1, "channels": c, "heads": h, "window": ws}
        flops = efficient_flops(1, n, half, 1) + blockify_flops(1, side, half, 1, ws)

        def elfatt():
            kernels.efficient_attention(qg.data_ptr(), kg.data_ptr(), vg.data_ptr(), og.data_ptr(), 1, n, half, 1,
                                        workspace.data_ptr(), workspace.numel(), dtype=dtype_name, stream=stream())
            kernels.blockify_attention(ql.data_ptr(), kl.data_ptr(), vl.data_ptr(), ol.data_ptr(), 1, side, side,
                                       half, 1, ws, padding=padding, dtype=dtype_name, stream=stream())

        for path in paths:
            kernels.set_kernel_path(path)
            recorder.measure(case, "edgeattn_" + path, bench, elfatt, flops, token_bytes(1, n, c, element),
                             dtype_name, tf32)
        qh, kh, vh = (t.view(1, n, h, d).transpose(1, 2).contiguous() for t in (q, k, v))
        backend = SDPBackend.FLASH_ATTENTION if dtype_name == "float16" else SDPBackend.EFFICIENT_ATTENTION
        name = "sdpa_flash" if dtype_name == "float16" else "sdpa_efficient"
        from torch.nn.attention import sdpa_kernel

        def sdpa():
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(qh, kh, vh)
        recorder.measure(case, name, bench, sdpa, 4.0 * h * n * n * d, token_bytes(1, n, c, element), dtype_name,
                         tf32)
        del q, k, v, qg, kg, vg, ql, kl, vl, og, ol, qh, kh, vh, workspace
        torch.cuda.empty_cache()


def main(argv=None):
    try:
        args = parse_args(argv)
        import torch

        if not torch.cuda.is_available():
            raise UsageError("needs a CUDA GPU (torch.cuda.is_available() is False)")
        from edgeattn.errors import EdgeAttnError
        from edgeattn.plugins.kernels_abi import KernelsLibrary

        try:
            kernels = KernelsLibrary(args.library)
        except EdgeAttnError as error:
            raise UsageError(str(error))
        device = device_report(torch, args)

        def write(results, complete):
            write_report(args.out, build_report(args, torch, kernels, device, results, complete), complete)

        results = run(args, torch, kernels, device, on_progress=lambda partial: write(partial, False))
    except UsageError as error:
        sys.stderr.write("{}: error: {}\n".format(PROGRAM, error))
        return 2
    write(results, True)
    return 0


def build_report(args, torch, kernels, device, results, complete):
    """The JSON document; ``complete`` is False while cases remain (the file is rewritten after every stage)."""
    return {
        "schema": "edgeattn.kernels_gpu/2",
        "created_utc": datetime.datetime.utcnow().isoformat() + "Z",
        "complete": complete,
        "device": device,
        "software": {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
                     "cudnn": torch.backends.cudnn.version(), "driver": driver_version(),
                     "nvidia_driver": nvidia_driver_version(),
                     "kernels_library": kernels.path, "kernels_build_info": kernels.build_info()},
        "config": {"resolutions": list(args.resolutions), "batches": list(args.batches), "ops": list(args.ops),
                   "dtypes": list(args.dtypes), "warmup": args.warmup, "iters": args.iters, "repeats": args.repeats,
                   "timing": args.timing,
                   "lite_mla_head_dim": LITE_MLA_HEAD_DIM, "soft_newton_iters": SOFT_NEWTON_ITERS},
        "results": results,
        "targets": evaluate_targets(results),
    }


if __name__ == "__main__":
    sys.exit(main())
