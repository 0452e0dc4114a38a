"""ELFATT core vs scaled_dot_product_attention on this CPU, and ELFATT's GFLOP/s vs a square GEMM, as JSON.

Targets (issue 2, "Performance"; recorded with pass/fail in the JSON, nothing here asserts):

* speed-up of the ELFATT core (2 heads x d 32 = 1 EFFATT head + 1 blockify head, ws 7) over softmax attention
  through SDPA (same 2 heads x 32): >= 2x at N = 3136 and >= 10x at N = 16384;
* at N >= 9216, ELFATT's achieved GFLOP/s within 3x of a measured square-GEMM GFLOP/s (1024^3 FP32 torch.mm,
  same threads), i.e. its time is within 3x of its own GEMM FLOP floor.

FLOPs are GEMM FLOPs only (edgeattn.ops.benchmark): 2 per multiply-accumulate of the core's matrix products,
4 N d^2 for the EFFATT head and 4 d sum_w L_w^2 over the windows actually computed for the blockify head (maps that
are not a multiple of 7, i.e. 96^2 and 128^2, use padding="masked", whose last window row/column is computed at its
real size); softmax/exp and copies are not counted. Maps: 56x56, 96x96, 128x128, batch 1, FP32.

ELFATT, SDPA and the GEMM are timed in alternating rounds so that all three see the same machine load; each round
runs each of them ``--block`` (3) times back to back, so most samples run with warm caches as in a plain repeat
loop (``--block 1``: every call follows a different op). The minimum over all samples is the headline number
(least disturbed on a shared machine), the median is recorded too. Everything is measured with glibc's default
allocator and with freed memory kept in the heap (``keep_freed``: no per-call page faults for the eager ops'
temporaries, as with the arena allocator of ONNX Runtime or TensorRT), each with torch's default thread count and
with 1 thread (on a shared 2-core machine the single-thread numbers are the least disturbed: a multi-threaded op
waits for its slowest thread). Time: about 2-3 minutes on 2 cores.

    python benchmarks/ops_cpu.py --json runs/ops_cpu.json
"""
import argparse
import json
import sys

TOKENS = (3136, 9216, 16384)
SPEEDUP_TARGETS = {3136: 2.0, 16384: 10.0}
GEMM_RATIO_TARGET = 3.0
GEMM_RATIO_MIN_TOKENS = 9216


def measure(tokens, rounds, min_time_s, gemm_size, allocator, block=3, progress=None):
    """One pass over ``tokens`` with the process's current allocator and thread settings; returns the rows."""
    import torch

    from edgeattn.ops.benchmark import build_case, square_gemm, time_interleaved

    gemm_fn, gemm_flops = square_gemm(gemm_size)
    rows = []
    for n in tokens:
        if progress:
            progress("N={} ({} allocator, {} threads)".format(n, allocator, torch.get_num_threads()))
        elfatt_fn, elfatt_flops, details = build_case("elfatt", n, heads=2, head_dim=32, window_size=7)
        sdpa_fn, sdpa_flops, _ = build_case("sdpa", n, heads=2, head_dim=32, window_size=7)
        with torch.no_grad():
            # SDPA at 16384 takes ~0.5 s per call: the minimum rounds only there
            timings = time_interleaved({"elfatt": elfatt_fn, "sdpa": sdpa_fn, "gemm": gemm_fn}, rounds=rounds,
                                       min_time_s=min_time_s if n < 16384 else 0.0, block=block)
        elfatt, sdpa, gemm = timings["elfatt"], timings["sdpa"], timings["gemm"]
        elfatt_gflops = elfatt_flops / elfatt["min_ms"] / 1e6
        gemm_gflops = gemm_flops / gemm["min_ms"] / 1e6
        row = {"tokens": n, "allocator": allocator, "threads": torch.get_num_threads(),
               "height": details["height"], "width": details["width"],
               "padding": details["padding"], "rounds": elfatt["repeats"],
               "elfatt_ms": elfatt["min_ms"], "elfatt_median_ms": elfatt["median_ms"],
               "sdpa_ms": sdpa["min_ms"], "sdpa_median_ms": sdpa["median_ms"],
               "gemm_ms": gemm["min_ms"], "gemm_median_ms": gemm["median_ms"],
               "speedup_vs_sdpa": sdpa["min_ms"] / elfatt["min_ms"],
               "speedup_vs_sdpa_median": sdpa["median_ms"] / elfatt["median_ms"],
               "elfatt_gemm_flops": elfatt_flops, "sdpa_gemm_flops": sdpa_flops,
               "elfatt_gflops": elfatt_gflops, "sdpa_gflops": sdpa_flops / sdpa["min_ms"] / 1e6,
               "square_gemm_gflops": gemm_gflops,
               "gemm_gflops_over_elfatt_gflops": gemm_gflops / elfatt_gflops,
               "gemm_gflops_over_elfatt_gflops_median": (gemm_flops / gemm["median_ms"]) /
               (elfatt_flops / elfatt["median_ms"])}
        targets = {}
        if n in SPEEDUP_TARGETS:
            targets["speedup_vs_sdpa"] = {"target_at_least": SPEEDUP_TARGETS[n],
                                          "pass": row["speedup_vs_sdpa"] >= SPEEDUP_TARGETS[n]}
        if n >= GEMM_RATIO_MIN_TOKENS:
            targets["gemm_gflops_over_elfatt_gflops"] = {
                "target_at_most": GEMM_RATIO_TARGET, "pass": row["gemm_gflops_over_elfatt_gflops"] <= GEMM_RATIO_TARGET}
        row["targets"] = targets
        rows.append(row)
    return rows


def run(tokens=TOKENS, rounds=6, min_time_s=2.0, threads=(None, 1), gemm_size=1024,
        allocators=("default", "keep_freed"), block=3, progress=None):
    """For each allocator (default glibc first, then ``keep_freed``) and each thread count, one pass over tokens.

    ``threads``: torch thread counts to measure (None = torch's default, i.e. all cores).
    """
    import torch

    from edgeattn.ops.benchmark import keep_freed_memory, load_warning, run_context

    previous = torch.get_num_threads()
    context = run_context()
    rows = []
    try:
        for allocator in allocators:
            if allocator == "keep_freed" and not keep_freed_memory():
                continue
            for count in threads:
                torch.set_num_threads(count or previous)
                rows.extend(measure(tokens, rounds, min_time_s, gemm_size, allocator, block, progress))
    finally:
        torch.set_num_threads(previous)
    context["load_warning_at_end"] = load_warning()
    return {"schema": "edgeattn.ops-cpu-benchmark/1",
            "config": {"heads": 2, "head_dim": 32, "window_size": 7, "global_heads": 1, "batch": 1,
                       "dtype": "float32", "gemm_size": gemm_size, "rounds": rounds, "block": block,
                       "min_time_s": min_time_s},
            "flop_convention": "GEMM FLOPs only (2 per multiply-accumulate); EFFATT head 4 N d^2, blockify head "
                               "4 d sum over computed windows of L_w^2; softmax/exp and copies not counted",
            "allocators": {"default": "glibc defaults (freed multi-MB temporaries are returned to the OS and "
                                      "page-faulted in again on the next call)",
                           "keep_freed": "mallopt(M_MMAP_THRESHOLD=256 MiB, M_TRIM_THRESHOLD=1 GiB): freed memory "
                                         "stays in the heap, as with an inference runtime's arena allocator"},
            "context": context, "results": rows,
            "all_targets_pass": {"{}/{}t".format(allocator, count): all(
                t["pass"] for row in rows if (row["allocator"], row["threads"]) == (allocator, count)
                for t in row["targets"].values()) for allocator, count in sorted({(row["allocator"], row["threads"])
                                                                                  for row in rows})}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="write the JSON record here (atomically); default: stdout")
    parser.add_argument("--tokens", default=",".join(str(n) for n in TOKENS),
                        help="comma-separated token counts (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=6, help="minimum alternating rounds (default %(default)s)")
    parser.add_argument("--block", type=int, default=3,
                        help="back-to-back calls per op per round (default %(default)s)")
    parser.add_argument("--min-time", type=float, default=2.0,
                        help="keep alternating for this many seconds below N=16384 (default %(default)s)")
    parser.add_argument("--threads", default="default,1",
                        help="comma-separated torch thread counts to measure; 'default' = torch's default "
                             "(default %(default)s)")
    args = parser.parse_args(argv)
    tokens = [int(x) for x in args.tokens.split(",") if x.strip()]
    from edgeattn.ops.benchmark import load_warning

    warning = load_warning()
    if warning:
        print("ops_cpu: warning: " + warning, file=sys.stderr)
    threads = [None if x.strip() == "default" else int(x) for x in args.threads.split(",") if x.strip()]
    record = run(tokens, rounds=args.rounds, min_time_s=args.min_time, threads=threads, block=args.block,
                 progress=lambda message: print("ops_cpu: " + message, file=sys.stderr))
    for row in record["results"]:
        print("{allocator:>10} {threads}t N={tokens:>6}  ELFATT {elfatt_ms:8.3f} ms  SDPA {sdpa_ms:9.3f} ms  "
              "speed-up {speedup_vs_sdpa:6.1f}x  ELFATT {elfatt_gflops:6.1f} GFLOP/s  "
              "GEMM {square_gemm_gflops:6.1f} GFLOP/s  "
              "ratio {gemm_gflops_over_elfatt_gflops:4.2f}".format(**row), file=sys.stderr)
    if args.json:
        from edgeattn._io import write_json

        write_json(args.json, record)
    else:
        json.dump(record, sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
