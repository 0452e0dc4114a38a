#!/usr/bin/env python3
"""Latency of the edgeattn CUDA kernels against torch SDPA (flash) and the PyTorch decomposition; JSON out.

For each token count N (default 3136, 9216, 16384, 65536 = 56^2, 96^2, 128^2, 256^2) and dtype (FP32, FP16):
  elfatt_core        ELFATT attention core = EFFATT on half the channels + blockify (7x7 windows) on the other half
  efficient_attention, blockify_attention, lite_mla (ReLU), lite_mla_qt, soft_kernel_attention (M = 49 landmarks)
each through the C ABI (libedgeattn_kernels.so via ctypes), the same op as the PyTorch decomposition
(edgeattn.ops functional cores), and full softmax attention with torch.nn.functional.scaled_dot_product_attention
(FLASH_ATTENTION backend for FP16; FP32 uses whatever SDPA picks) on the same (B, heads, N, d).
Timing: CUDA events around `--iters` launches after `--warmup`, median of `--repeats` such runs.
Bandwidth: compulsory bytes (inputs read once + output written once) / kernel time, against the device's peak
(2 x memory clock x bus width, from the CUDA driver; override with --peak-gbps).

Targets on an H100 (issue 5): ELFATT core FP16 >= 2x SDPA at N = 3136 and >= 10x at N = 65536; the linear-head
passes reach >= 50% of peak memory bandwidth. Needs a CUDA GPU, torch with CUDA, and a built kernels library
(--library, $EDGEATTN_KERNELS_LIB, or plugins/build/libedgeattn_kernels.so).

    python benchmarks/kernels_gpu.py --out runs/kernels_gpu.json
"""
import argparse
import ctypes
import datetime
import json
import os
import platform
import statistics
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

DEFAULT_TOKENS = (3136, 9216, 16384, 65536)
CHANNELS = 64       # CSWin-T24181 stage-1 width: 2 heads of 32
HEADS = 2
HEAD_DIM = CHANNELS // HEADS
WINDOW = 7
SOFT_LANDMARKS = 49


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", default=None, help="libedgeattn_kernels.so (or libedgeattn_plugins.so)")
    parser.add_argument("--tokens", type=int, nargs="+", default=list(DEFAULT_TOKENS), help="token counts N (squares)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--dtypes", nargs="+", default=["float16", "float32"], choices=["float16", "float32"])
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--peak-gbps", type=float, default=None, help="peak memory bandwidth in GB/s")
    parser.add_argument("--skip-decomposition-above", type=int, default=65536,
                        help="skip the PyTorch decomposition of blockify/SOFT above this N (memory)")
    parser.add_argument("--json", "--out", dest="out", default=None, help="write the JSON here (default: stdout)")
    return parser.parse_args(argv)


def peak_bandwidth_gbps(torch, override):
    """2 x memory clock (kHz) x bus width (bits) / 8 from the CUDA driver, or None."""
    if override:
        return override, "--peak-gbps"
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        device = ctypes.c_int()
        if libcuda.cuInit(0) != 0 or libcuda.cuDeviceGet(ctypes.byref(device), torch.cuda.current_device()) != 0:
            return None, "cuInit failed"
        clock_khz, bus_bits = ctypes.c_int(), ctypes.c_int()
        # CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37
        if libcuda.cuDeviceGetAttribute(ctypes.byref(clock_khz), 36, device) != 0:
            return None, "memory clock unavailable"
        if libcuda.cuDeviceGetAttribute(ctypes.byref(bus_bits), 37, device) != 0:
            return None, "bus width unavailable"
        return 2.0 * clock_khz.value * 1e3 * bus_bits.value / 8 / 1e9, "cuDeviceGetAttribute"
    except OSError as error:
        return None, str(error)


def time_ms(torch, fn, warmup, iters, repeats):
    """Median over `repeats` of the mean per-call time of `iters` back-to-back calls (CUDA events)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        runs.append(start.elapsed_time(end) / iters)
    return statistics.median(runs)


def main(argv=None):
    args = parse_args(argv)
    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        sys.stderr.write("kernels_gpu.py: error: needs a CUDA GPU (torch.cuda.is_available() is False)\n")
        return 2
    from edgeattn.ops.blockify import blockify_attention
    from edgeattn.ops.efficient_attention import efficient_attention
    from edgeattn.ops.litemla import lite_mla_attention
    from edgeattn.ops.soft import soft_kernel_attention
    from edgeattn.plugins.kernels_abi import KernelsLibrary

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    kernels = KernelsLibrary(args.library)
    stream = torch.cuda.current_stream().cuda_stream
    peak, peak_source = peak_bandwidth_gbps(torch, args.peak_gbps)
    results = []

    def record(op, n, dtype, impl, ms, bytes_moved=None, extra=None):
        entry = {"op": op, "tokens": n, "dtype": dtype, "impl": impl, "latency_ms": ms}
        if bytes_moved is not None and ms:
            gbps = bytes_moved / (ms * 1e-3) / 1e9
            entry["bandwidth_gbps"] = gbps
            entry["bandwidth_fraction_of_peak"] = gbps / peak if peak else None
        entry.update(extra or {})
        results.append(entry)
        sys.stderr.write("{:>22} N={:<6} {:8} {:<14} {:9.4f} ms\n".format(op, n, dtype, impl, ms))

    for dtype_name in args.dtypes:
        dtype = getattr(torch, dtype_name)
        element = torch.tensor([], dtype=dtype).element_size()
        for n in args.tokens:
            side = int(round(n ** 0.5))
            if side * side != n:
                sys.stderr.write("kernels_gpu.py: error: N={} is not a square map\n".format(n))
                return 2
            b, c = args.batch, CHANNELS
            half = c // 2
            bench = lambda fn: time_ms(torch, fn, args.warmup, args.iters, args.repeats)  # noqa: E731
            q, k, v = (torch.randn(b, n, c, device="cuda", dtype=dtype) for _ in range(3))
            out = torch.empty_like(q)

            # full softmax attention (what ELFATT approximates), flash for FP16
            qh, kh, vh = (t.view(b, n, HEADS, HEAD_DIM).transpose(1, 2).contiguous() for t in (q, k, v))
            if dtype == torch.float16 and hasattr(torch.nn, "attention"):
                from torch.nn.attention import SDPBackend, sdpa_kernel

                def sdpa():
                    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        F.scaled_dot_product_attention(qh, kh, vh)
                sdpa_impl = "sdpa_flash"
            else:
                def sdpa():
                    F.scaled_dot_product_attention(qh, kh, vh)
                sdpa_impl = "sdpa_default"
            sdpa_ms = bench(sdpa)
            record("softmax_attention", n, dtype_name, sdpa_impl, sdpa_ms, 4 * b * n * c * element)

            # EFFATT on the full width (bandwidth of the linear-head passes)
            eff_bytes = kernels.efficient_attention_workspace_size(b, n, c, HEADS)
            eff_ws = torch.empty(max(eff_bytes, 1), dtype=torch.uint8, device="cuda")

            def effatt(q_=q, k_=k, v_=v, out_=out, channels=c, heads=HEADS):
                kernels.efficient_attention(q_.data_ptr(), k_.data_ptr(), v_.data_ptr(), out_.data_ptr(), b, n,
                                            channels, heads, eff_ws.data_ptr(), eff_ws.numel(), dtype=dtype_name,
                                            stream=stream)
            record("efficient_attention", n, dtype_name, "edgeattn", bench(effatt), 4 * b * n * c * element)
            record("efficient_attention", n, dtype_name, "torch_decomposition",
                   bench(lambda: efficient_attention(q, k, v, num_heads=HEADS)), 4 * b * n * c * element)

            # blockify on the full width, 7x7 windows (padding when the side is not a multiple of 7)
            padding = "none" if side % WINDOW == 0 else "zeros"

            def blockify(q_=q, k_=k, v_=v, out_=out, channels=c, heads=HEADS):
                kernels.blockify_attention(q_.data_ptr(), k_.data_ptr(), v_.data_ptr(), out_.data_ptr(), b, side,
                                           side, channels, heads, WINDOW, padding=padding, dtype=dtype_name,
                                           stream=stream)
            record("blockify_attention", n, dtype_name, "edgeattn", bench(blockify), 4 * b * n * c * element)
            if n <= args.skip_decomposition_above:
                record("blockify_attention", n, dtype_name, "torch_decomposition",
                       bench(lambda: blockify_attention(q, k, v, num_heads=HEADS, height=side, width=side,
                                                        window_size=WINDOW, padding=padding)),
                       4 * b * n * c * element)

            # ELFATT core: EFFATT on channels [:C/2] (1 head) + blockify on [C/2:] (1 head)
            qg, kg, vg = (t[..., :half].contiguous() for t in (q, k, v))
            ql, kl, vl = (t[..., half:].contiguous() for t in (q, k, v))
            og, ol = torch.empty_like(qg), torch.empty_like(ql)
            half_ws_bytes = kernels.efficient_attention_workspace_size(b, n, half, 1)
            half_ws = torch.empty(max(half_ws_bytes, 1), dtype=torch.uint8, device="cuda")

            def elfatt():
                kernels.efficient_attention(qg.data_ptr(), kg.data_ptr(), vg.data_ptr(), og.data_ptr(), b, n, half, 1,
                                            half_ws.data_ptr(), half_ws.numel(), dtype=dtype_name, stream=stream)
                kernels.blockify_attention(ql.data_ptr(), kl.data_ptr(), vl.data_ptr(), ol.data_ptr(), b, side, side,
                                           half, 1, WINDOW, padding=padding, dtype=dtype_name, stream=stream)
            elfatt_ms = bench(elfatt)
            record("elfatt_core", n, dtype_name, "edgeattn", elfatt_ms, 4 * b * n * c * element,
                   {"speedup_vs_sdpa": sdpa_ms / elfatt_ms if elfatt_ms else None, "sdpa_impl": sdpa_impl})

            # LiteMLA (ReLU and QT) on (B, 3C, H, W)
            qkv = torch.randn(b, 3 * c, side, side, device="cuda", dtype=dtype)
            mla_out = torch.empty(b, c, side, side, device="cuda", dtype=dtype)
            for kernel in ("relu", "quadratic_taylor"):
                mla_bytes = kernels.lite_mla_workspace_size(b, 3 * c, side, side, HEAD_DIM, kernel)
                mla_ws = torch.empty(max(mla_bytes, 1), dtype=torch.uint8, device="cuda")

                def mla(kernel=kernel, mla_ws=mla_ws):
                    kernels.lite_mla(qkv.data_ptr(), mla_out.data_ptr(), b, 3 * c, side, side, HEAD_DIM,
                                     mla_ws.data_ptr(), mla_ws.numel(), kernel=kernel, eps=1e-15, dtype=dtype_name,
                                     stream=stream)
                name = "lite_mla" if kernel == "relu" else "lite_mla_qt"
                record(name, n, dtype_name, "edgeattn", bench(mla), 4 * b * n * c * element)
                record(name, n, dtype_name, "torch_decomposition",
                       bench(lambda kernel=kernel: lite_mla_attention(qkv, head_dim=HEAD_DIM, kernel=kernel,
                                                                      eps=1e-15)),
                       4 * b * n * c * element)

            # SOFT++ with SOFT's default 49 landmarks (the shared-memory Newton path)
            m = SOFT_LANDMARKS
            landmarks = torch.randn(b, m, c, device="cuda", dtype=dtype) * HEAD_DIM ** -0.25
            qs = q * HEAD_DIM ** -0.25
            soft_bytes = kernels.soft_kernel_attention_workspace_size(b, n, m, c, HEADS)
            soft_ws = torch.empty(max(soft_bytes, 1), dtype=torch.uint8, device="cuda")

            def soft():
                kernels.soft_kernel_attention(qs.data_ptr(), landmarks.data_ptr(), v.data_ptr(), out.data_ptr(), b, n,
                                              m, c, HEADS, soft_ws.data_ptr(), soft_ws.numel(), dtype=dtype_name,
                                              stream=stream)
            record("soft_kernel_attention", n, dtype_name, "edgeattn", bench(soft),
                   (3 * b * n * c + b * m * c) * element, {"landmarks": m})
            if n <= args.skip_decomposition_above:
                record("soft_kernel_attention", n, dtype_name, "torch_decomposition",
                       bench(lambda: soft_kernel_attention(qs, landmarks, v, num_heads=HEADS)),
                       (3 * b * n * c + b * m * c) * element, {"landmarks": m})
            del q, k, v, out, qh, kh, vh, qkv, mla_out
            torch.cuda.empty_cache()

    properties = torch.cuda.get_device_properties(torch.cuda.current_device())
    report = {
        "schema": "edgeattn.kernels_gpu/1",
        "created_utc": datetime.datetime.utcnow().isoformat() + "Z",
        "device": {"name": properties.name, "capability": "{}.{}".format(properties.major, properties.minor),
                   "multiprocessors": properties.multi_processor_count,
                   "peak_bandwidth_gbps": peak, "peak_bandwidth_source": peak_source},
        "software": {"python": platform.python_version(), "torch": torch.__version__,
                     "cuda": torch.version.cuda, "kernels_library": kernels.path,
                     "kernels_build_info": kernels.build_info()},
        "config": {"batch": args.batch, "channels": CHANNELS, "heads": HEADS, "head_dim": HEAD_DIM,
                   "window": WINDOW, "soft_landmarks": SOFT_LANDMARKS, "warmup": args.warmup, "iters": args.iters, "repeats": args.repeats},
        "results": results,
    }
    text = json.dumps(report, indent=2) + "\n"
    if args.out:
        from edgeattn._io import atomic_write

        with atomic_write(args.out, "w") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
