"""Export time and ONNX Runtime CPU throughput vs PyTorch eager: CSWin-T24181 GLOBAL and ELFATT at 224/384/512.

One run exports each (model, resolution) with ``edgeattn.export.export_onnx`` (target "ort", custom ops with their
model-local functions, parity-checked against PyTorch) and then times batch-1 inference of both models on ONNX
Runtime CPU and in PyTorch eager, all four in alternating blocks per resolution, so that every ratio compares
measurements taken under the same machine load. Throughput is 1000 / median latency (items/s). Writes JSON
(``--json``, default stdout).

Targets (2-core CPU): ELFATT/GLOBAL ORT throughput >= 1.7x at 224, >= 4x at 384, >= 8x at 512, and ELFATT on ORT
>= 1.3x ELFATT in PyTorch eager. They are recorded with pass/fail in the JSON; nothing here asserts.

    python benchmarks/export_ort_cpu.py --json runs/export_ort_cpu.json
    python benchmarks/export_ort_cpu.py --resolutions 224 --seconds 2      # quick look
"""
import argparse
import json
import os
import platform
import sys
import tempfile
import time

ARCHS = ("cswin_t24181_global", "cswin_t24181_elfatt")
RESOLUTIONS = (224, 384, 512)
SPEEDUP_TARGETS = {224: 1.7, 384: 4.0, 512: 8.0}
ORT_OVER_TORCH_TARGET = 1.3


def _time_in_blocks(runners, min_iters, seconds, max_iters, rounds=4):
    """Time every runner in ``rounds`` alternating blocks; returns one list of latencies (ms) per runner.

    All runners of a resolution (GLOBAL and ELFATT, ONNX Runtime and PyTorch) take turns, so every ratio the
    benchmark reports compares measurements taken under the same machine load. Blocks rather than single
    iterations: ONNX Runtime's and PyTorch's thread pools keep spinning for a while after a call and would steal
    the cores from the next runner. The first call of each block (thread pools waking up, caches refilling) is
    not recorded.
    """
    samples = [[] for _ in runners]
    per_block = max(1, -(-min_iters // rounds))
    block_s = seconds / rounds
    for _ in range(rounds):
        for run, recorded in zip(runners, samples):
            run()
            started = time.perf_counter()
            count = 0
            while count < per_block or (time.perf_counter() - started < block_s and count < max_iters // rounds):
                t0 = time.perf_counter()
                run()
                recorded.append((time.perf_counter() - t0) * 1e3)
                count += 1
    return samples


def _prepare(arch, resolution, workdir, threads):
    """Export ``arch`` at ``resolution`` (checked) and return (summary, ORT runner, PyTorch runner)."""
    import torch

    from edgeattn.export import export_onnx, load_torch_model
    from edgeattn.export.exporter import ort_session

    model, size = load_torch_model(arch=arch, img_size=resolution, seed=0)
    path = os.path.join(workdir, "{}_{}.onnx".format(arch, resolution))
    summary = export_onnx(model, path, img_size=size, batch=1, check=True)
    with open(path, "rb") as handle:
        session = ort_session(handle.read(), threads=threads)
    os.unlink(path)
    images = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(1))
    feed = {session.get_inputs()[0].name: images.numpy()}

    def run_ort():
        session.run(None, feed)

    def run_torch():
        with torch.no_grad():
            model(images)

    return summary, run_ort, run_torch


def _measure_resolution(resolution, archs, workdir, threads, min_iters, seconds, max_iters):
    from edgeattn.bench.stats import latency_stats

    prepared = [_prepare(arch, resolution, workdir, threads) for arch in archs]
    runners = [runner for _, run_ort, run_torch in prepared for runner in (run_ort, run_torch)]
    samples = _time_in_blocks(runners, min_iters, seconds, max_iters)
    results = []
    for index, (arch, (summary, _, _)) in enumerate(zip(archs, prepared)):
        ort_ms, torch_ms = samples[2 * index], samples[2 * index + 1]
        ort_stats, torch_stats = latency_stats(ort_ms), latency_stats(torch_ms)
        results.append({
            "arch": arch, "resolution": resolution,
            "export": {"export_s": summary.export_s, "check_s": summary.check_s, "total_s": summary.total_s,
                       "onnx_bytes": summary.size_bytes, "custom_ops": summary.custom_ops,
                       "parity_max_rel": summary.parity["max_rel"]},
            "onnxruntime": {"latency_ms": ort_stats, "throughput_items_per_s": 1e3 / ort_stats["p50"],
                            "iterations": len(ort_ms)},
            "torch_eager": {"latency_ms": torch_stats, "throughput_items_per_s": 1e3 / torch_stats["p50"],
                            "iterations": len(torch_ms)},
            "ort_over_torch": torch_stats["p50"] / ort_stats["p50"],
        })
    return results


def _context(threads):
    import numpy
    import onnx
    import onnxruntime
    import torch

    from edgeattn._version import __version__

    return {"host": platform.node(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
            "threads": threads, "python": platform.python_version(),
            "versions": {"edgeattn": __version__, "torch": torch.__version__, "onnx": onnx.__version__,
                         "onnxruntime": onnxruntime.__version__, "numpy": numpy.__version__},
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}


def run(resolutions, archs, threads, min_iters, seconds, max_iters, progress=None):
    import torch

    torch.set_num_threads(threads)
    results = []
    with tempfile.TemporaryDirectory(prefix="edgeattn-bench-") as workdir:
        for resolution in resolutions:
            if progress:
                progress("{} @ {}".format(", ".join(archs), resolution))
            results.extend(_measure_resolution(resolution, archs, workdir, threads, min_iters, seconds, max_iters))
    by_key = {(r["arch"], r["resolution"]): r for r in results}
    summary = []
    for resolution in resolutions:
        glob = by_key.get(("cswin_t24181_global", resolution))
        elf = by_key.get(("cswin_t24181_elfatt", resolution))
        if not (glob and elf):
            continue
        speedup = glob["onnxruntime"]["latency_ms"]["p50"] / elf["onnxruntime"]["latency_ms"]["p50"]
        target = SPEEDUP_TARGETS.get(resolution)
        summary.append({
            "resolution": resolution,
            "elfatt_over_global_ort": speedup,
            "elfatt_over_global_torch": (glob["torch_eager"]["latency_ms"]["p50"]
                                         / elf["torch_eager"]["latency_ms"]["p50"]),
            "target": target, "meets_target": None if target is None else speedup >= target,
            "elfatt_ort_over_torch": elf["ort_over_torch"],
            "elfatt_ort_over_torch_target": ORT_OVER_TORCH_TARGET,
            "elfatt_ort_over_torch_meets_target": elf["ort_over_torch"] >= ORT_OVER_TORCH_TARGET,
        })
    return {"schema": "edgeattn.benchmark.export_ort_cpu/1", "context": _context(threads),
            "method": "batch 1; per resolution GLOBAL and ELFATT on ORT CPU (ORT_ENABLE_ALL) and in PyTorch "
                      "eager, timed in 4 alternating rounds of blocks (first call of a block not recorded); "
                      "throughput = 1000 / median latency; speedup = ratio of medians",
            "results": results, "summary": summary}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resolutions", default=",".join(str(r) for r in RESOLUTIONS),
                        help="comma-separated input sizes (default 224,384,512)")
    parser.add_argument("--archs", default=",".join(ARCHS), help="comma-separated registry names")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="intra-op threads for ORT and torch (default: all cores)")
    parser.add_argument("--min-iters", type=int, default=5, help="at least this many timed runs per backend")
    parser.add_argument("--seconds", type=float, default=6.0,
                        help="time at least this long per model and backend")
    parser.add_argument("--max-iters", type=int, default=100, help="at most this many timed runs per backend")
    parser.add_argument("--json", dest="json_path", default=None, help="write the JSON here (default stdout)")
    args = parser.parse_args(argv)
    resolutions = [int(r) for r in args.resolutions.split(",") if r]
    archs = [a for a in args.archs.split(",") if a]
    report = run(resolutions, archs, args.threads, args.min_iters, args.seconds, args.max_iters,
                 progress=lambda message: print("benchmark: " + message, file=sys.stderr))
    text = json.dumps(report, indent=2)
    if args.json_path:
        from edgeattn._io import write_json

        write_json(args.json_path, report)
    else:
        print(text)
    for row in report["summary"]:
        print("{}: ELFATT/GLOBAL on ORT {:.2f}x (target {}), ELFATT ORT/eager {:.2f}x".format(
            row["resolution"], row["elfatt_over_global_ort"], row["target"], row["elfatt_ort_over_torch"]),
            file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
