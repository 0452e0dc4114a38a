"""PyTorch eager CPU throughput of CSWin-T24181 GLOBAL vs ELFATT at 224, 384 and 512 (batch 1), as JSON.

Expected direction (ELFATT paper, Tables I/VIII/IX): ELFATT is faster than GLOBAL at every resolution and the gap
grows with resolution, because GLOBAL's softmax cores grow with N^2 (stage 1: 3136 tokens at 224, 16384 at 512)
while ELFATT's grow with N.

    python benchmarks/models_cpu.py                       # JSON to stdout, ~1-2 minutes on 2 cores
    python benchmarks/models_cpu.py --rounds 3 --out runs/models_cpu.json

At each resolution both models are built, warmed up, then timed in ``--rounds`` alternating rounds (one forward
of each model per round), so load from other processes on a shared machine hits both alike. Records hold latency
statistics (edgeattn.bench.stats), the raw samples, images/s = 1000 / median latency, the model's MACs at that
resolution (edgeattn.models.complexity) and the achieved GMAC/s; the speed-up of ELFATT over GLOBAL is given
from medians and from minima, next to the MAC ratio. One thread by default: on a 2-core machine shared with other
jobs, two OpenMP threads oversubscribe the cores and single iterations then vary by 10x; ``--threads 0`` uses
torch's default.
"""
import argparse
import json
import os
import platform
import sys
import time

DEFAULT_MODELS = ("cswin_t24181_global", "cswin_t24181_elfatt")
DEFAULT_RESOLUTIONS = (224, 384, 512)


def run(models, resolutions, warmup, rounds, threads, progress=None):
    """Time every model at every resolution; at one resolution the models alternate, one forward each per round.

    Interleaving makes a transient load on a shared machine hit every model alike, and the speed-up is taken
    from medians, so one disturbed iteration does not decide it.
    """
    import torch

    from edgeattn.bench.stats import latency_stats
    from edgeattn.models import create_model
    from edgeattn.models.complexity import count_macs

    if threads:
        torch.set_num_threads(threads)
    results = []
    for img_size in resolutions:
        x = torch.randn(1, 3, img_size, img_size)
        built = []
        for name in models:
            torch.manual_seed(0)
            built.append((name, create_model(name, img_size=img_size).eval()))
        samples = {name: [] for name in models}
        with torch.inference_mode():
            for name, model in built:
                for _ in range(warmup):
                    model(x)
            for round_index in range(rounds):
                if progress:
                    progress("{}x{} round {}/{}".format(img_size, img_size, round_index + 1, rounds))
                for name, model in built:
                    start = time.perf_counter()
                    model(x)
                    samples[name].append((time.perf_counter() - start) * 1e3)
        for name, model in built:
            macs = count_macs(model, img_size)
            stats = latency_stats(samples[name])
            results.append({
                "model": name, "resolution": img_size, "batch": 1, "iterations": len(samples[name]),
                "macs": macs["total"], "macs_fa": macs["fa"], "latency_ms": stats, "samples_ms": samples[name],
                "throughput_img_per_s": 1e3 / stats["p50"], "gmac_per_s": macs["total"] / 1e9 / (stats["p50"] / 1e3),
            })
        del built
    return results


def speedups(results, baseline, candidate):
    by_key = {(r["model"], r["resolution"]): r for r in results}
    out = {}
    for (model, size), record in sorted(by_key.items()):
        if model != candidate or (baseline, size) not in by_key:
            continue
        base = by_key[(baseline, size)]
        out[str(size)] = {
            "speedup_p50": base["latency_ms"]["p50"] / record["latency_ms"]["p50"],
            "speedup_min": base["latency_ms"]["min"] / record["latency_ms"]["min"],
            "mac_ratio": base["macs"] / record["macs"],
        }
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    parser.add_argument("--resolutions", nargs="+", type=int, default=list(DEFAULT_RESOLUTIONS))
    parser.add_argument("--warmup", type=int, default=1, help="untimed forward passes per model and resolution")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds; each model runs once per round")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (default 1: stable on a shared machine; 0 = torch's default)")
    parser.add_argument("--json", "--out", dest="out", help="write JSON here (atomically) instead of stdout")
    args = parser.parse_args(argv)

    import torch

    from edgeattn import __version__
    from edgeattn._io import write_json

    def progress(message):
        print("models_cpu: " + message, file=sys.stderr, flush=True)

    if args.rounds < 1 or args.warmup < 0:
        parser.error("--rounds must be >= 1 and --warmup >= 0")
    results = run(args.models, args.resolutions, args.warmup, args.rounds, args.threads, progress)
    report = {
        "schema": "edgeattn.benchmarks.models_cpu/1",
        "what": "PyTorch eager CPU inference, batch 1, FP32, reference operators (no plugins)",
        "context": {"edgeattn": __version__, "torch": torch.__version__, "python": platform.python_version(),
                    "machine": platform.machine(), "processor": platform.processor(), "cpu_count": os.cpu_count(),
                    "torch_threads": torch.get_num_threads()},
        "results": results,
    }
    if len(args.models) == 2:
        report["speedup_of_{}_over_{}".format(args.models[1], args.models[0])] = speedups(
            results, args.models[0], args.models[1])
    if args.out:
        write_json(args.out, report)
    else:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
