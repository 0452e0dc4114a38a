#!/usr/bin/env python3
"""Summarise benchmarks/kernels_gpu.py JSON files as Markdown: per case, the faster edgeattn kernel path against
the fastest PyTorch implementation of the same math, then the issue targets; or merge the JSON files of several
runs on one GPU (e.g. FP16 and FP32 run separately to fit a time limit) into one. Stdlib only.

    python benchmarks/kernels_gpu_summary.py runs/kernels_gpu_float16.json [more.json ...] [--batch 64]
    python benchmarks/kernels_gpu_summary.py --merge benchmarks/results/kernels_gpu_h200.json runs/*.json
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernels_gpu  # noqa: E402 -- stdlib when imported (torch only in its main); puts the repository on sys.path


def merge(reports, note=None):
    """One report from the reports of several runs on the same GPU: their results in order, the targets evaluated
    over all of them, and each run's configuration under "runs"."""
    devices = set(report["device"].get("name") for _, report in reports)
    if len(devices) != 1:
        raise ValueError("the reports come from different GPUs: {}".format(", ".join(sorted(map(str, devices)))))
    # runs from before --timing existed timed eagerly: say so on their entries
    results = [dict(entry, timing=entry.get("timing") or report["config"].get("timing", "eager"))
               for _, report in reports for entry in report["results"]]
    first = reports[0][1]
    merged = {"schema": first["schema"], "created_utc": max(report["created_utc"] for _, report in reports),
              "complete": all(report.get("complete", True) for _, report in reports),
              "device": first["device"], "software": first["software"],
              "runs": [{"file": os.path.basename(path), "created_utc": report["created_utc"],
                        "complete": report.get("complete", True), "config": report["config"],
                        "software": report["software"]} for path, report in reports],
              "results": results, "targets": kernels_gpu.evaluate_targets(results)}
    if note:
        merged["note"] = note
    return merged


def load(paths):
    reports = []
    for path in paths:
        try:
            with open(path) as handle:
                reports.append((path, json.load(handle)))
        except (OSError, ValueError) as error:
            sys.stderr.write("kernels_gpu_summary.py: skipping {}: {}\n".format(path, error))
    return reports


def best_pairs(results):
    """(case, faster edgeattn entry, fastest PyTorch entry) per case, in the order the cases were measured."""
    fastest = {}
    for entry in results:
        if not entry["impl"].startswith("edgeattn") and entry.get("latency_ms"):
            key = kernels_gpu.case_key(entry)
            if key not in fastest or entry["latency_ms"] < fastest[key]["latency_ms"]:
                fastest[key] = entry
    return [(kernels_gpu.case_key(ours), ours, fastest[kernels_gpu.case_key(ours)])
            for ours in kernels_gpu.faster_paths(results) if kernels_gpu.case_key(ours) in fastest]


def _percent(entry):
    fraction = entry.get("fraction_of_roofline")
    return "-" if fraction is None else "{:.1f} %".format(100.0 * fraction)


def table(pairs, batches):
    lines = ["| op | dtype (TF32) | res | stage | B | edgeattn ms (path) | PyTorch ms (impl) | speedup | TFLOP/s "
             "| GB/s | of roofline: edgeattn / PyTorch |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for key, ours, theirs in pairs:
        if batches and ours["batch"] not in batches:
            continue
        dtype = ours["dtype"] + (" (on)" if ours.get("tf32") else "")
        lines.append("| {} | {} | {} | {} | {} | {:.4f} ({}) | {:.4f} ({}) | {:.2f}x | {:.1f} | {:.0f} | {} / {} |"
                     .format(ours["op"], dtype, ours.get("resolution") or "N={}".format(ours.get("tokens")),
                             ours.get("stage") or "-", ours["batch"], ours["latency_ms"],
                             ours["impl"][len("edgeattn_"):], theirs["latency_ms"], theirs["impl"],
                             theirs["latency_ms"] / ours["latency_ms"], ours.get("tflops") or 0.0,
                             ours.get("gbps") or 0.0, _percent(ours), _percent(theirs)))
    return lines


def geomeans(pairs):
    groups = {}
    for key, ours, theirs in pairs:
        group = (ours["op"], ours["dtype"], bool(ours.get("tf32")), ours["batch"])
        groups.setdefault(group, []).append(math.log(theirs["latency_ms"] / ours["latency_ms"]))
    lines = ["| op | dtype | TF32 for PyTorch | B | cases | geomean speedup | worst | best |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (op, dtype, tf32, batch), logs in sorted(groups.items(), key=lambda item: tuple(map(str, item[0]))):
        lines.append("| {} | {} | {} | {} | {} | {:.2f}x | {:.2f}x | {:.2f}x |".format(
            op, dtype, "on" if tf32 else "off", batch, len(logs), math.exp(sum(logs) / len(logs)),
            math.exp(min(logs)), math.exp(max(logs))))
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(prog="kernels_gpu_summary.py", description=__doc__.split("\n")[0])
    parser.add_argument("reports", nargs="+")
    parser.add_argument("--batch", type=int, action="append", default=None,
                        help="per-case rows only for these batch sizes (default: all)")
    parser.add_argument("--no-cases", action="store_true", help="only the geomeans and the targets")
    parser.add_argument("--merge", metavar="OUT", help="write the reports merged into one JSON file instead")
    parser.add_argument("--note", help="with --merge: a note stored in the merged report")
    args = parser.parse_args(argv)
    reports = load(args.reports)
    if not reports or (args.merge and len(reports) != len(args.reports)):
        sys.stderr.write("kernels_gpu_summary.py: error: {}\n".format(
            "no readable report" if not reports else "--merge needs every report readable"))
        return 2
    if args.merge:
        try:
            merged = merge(reports, args.note)
        except (KeyError, ValueError) as error:
            sys.stderr.write("kernels_gpu_summary.py: error: cannot merge: {}\n".format(error))
            return 2
        from edgeattn._io import atomic_write

        with atomic_write(args.merge, "w") as handle:
            handle.write(json.dumps(merged, indent=2) + "\n")
        return 0
    for path, report in reports:
        device, software = report.get("device", {}), report.get("software", {})
        configs = [run["config"] for run in report.get("runs", [])] or [report.get("config", {})]
        dtypes = sorted(set(dtype for config in configs for dtype in config.get("dtypes", [])))
        print("## {} ({}): {} sm_{}, driver {}, CUDA {}, torch {}; complete: {}".format(
            path, ",".join(dtypes), device.get("name"), str(device.get("capability", "")).replace(".", ""),
            software.get("nvidia_driver") or software.get("driver"), software.get("cuda"), software.get("torch"),
            report.get("complete")))
        failed = [e for e in report.get("results", []) if e.get("error")]
        for entry in failed[:8]:
            print("FAILED {} {} {}px s{} B={}: {}".format(entry["op"], entry["impl"], entry.get("resolution"),
                                                         entry.get("stage"), entry["batch"], entry["error"]))
        if len(failed) > 8:
            print("... and {} more failed measurements".format(len(failed) - 8))
        pairs = best_pairs(report.get("results", []))
        if not args.no_cases:
            print("\n".join(table(pairs, args.batch)))
        print("\n".join(geomeans(pairs)))
        print("targets: " + json.dumps(report.get("targets"), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
