"""CSWin-T24181-ELFATT FP32 vs INT8 (``edgeattn quantize``, Linear/Conv only) on ONNX Runtime CPU: latency and
agreement, as JSON.

One run exports ``cswin_t24181_elfatt`` at 224 (seeded random weights: no trained CSWin-ELFATT weights exist
offline; target "ort", custom ops with their model-local functions), quantizes it with the defaults of
``edgeattn quantize`` calibrated on scikit-image's 8 bundled photographs, then times batch-1 inference of both files
on ONNX Runtime CPU in alternating blocks (so both see the same machine load) and compares their logits on the same
8 photographs plus 24 seeded normal inputs (cosine, top-1 agreement; with random weights top-1 agreement measures
how far INT8 moves the arg-max of an untrained classifier, whose logits are close together: a harsh test).

Targets (set by this benchmark, recorded with pass/fail in the JSON; nothing asserts): mean cosine to FP32 >= 0.99
and top-1 agreement >= 0.75 on those 32 inputs; INT8 latency no worse than FP32 (speedup >= 1.0, judged on the
minimum latencies: on a shared 2-core machine the medians follow the other jobs' load, the minima much less). ONNX Runtime
runs a Q/DQ graph's MatMuls with its INT8 kernels only where it fuses the pattern; TensorRT on Orin is a different
matter (GPU-unverified).

    nice python benchmarks/quantize_cpu.py            # ~5-10 minutes on 2 busy cores
    python benchmarks/quantize_cpu.py --seconds 4 --json /tmp/q.json
"""
import argparse
import json
import os
import platform
import sys
import tempfile
import time

ARCH = "cswin_t24181_elfatt"
RESOLUTION = 224
RESULT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "quantize_cpu.json")
TARGETS = {"cosine_mean": 0.99, "top1_agreement": 0.75, "speedup": 1.0}


def _time_in_blocks(runners, seconds, rounds=4, min_iters=8):
    samples = [[] for _ in runners]
    for _ in range(rounds):
        for run, recorded in zip(runners, samples):
            run()  # thread pools waking up: not recorded
            started = time.perf_counter()
            while len(recorded) % min_iters or time.perf_counter() - started < seconds / rounds:
                t0 = time.perf_counter()
                run()
                recorded.append((time.perf_counter() - t0) * 1e3)
    return samples


def run(seconds, threads, progress):
    import numpy as np
    import onnxruntime as ort

    from edgeattn.bench.stats import latency_stats
    from edgeattn.compare import make_inputs
    from edgeattn.export import export_onnx, load_model
    from edgeattn.quantize import quantize_file
    from edgeattn.quantize.ptq import agreement

    workdir = tempfile.mkdtemp(prefix="quantize_cpu-")
    fp32_path, int8_path = os.path.join(workdir, "fp32.onnx"), os.path.join(workdir, "int8.onnx")
    progress("exporting {} at {}".format(ARCH, RESOLUTION))
    started = time.time()
    model, size = load_model(None, arch=ARCH, img_size=RESOLUTION, seed=0)
    export_onnx(model, fp32_path, img_size=size, batch=1, opset=17, plugins=True, target="ort", check=False, seed=0)
    export_s = time.time() - started
    del model
    progress("quantizing (calibration: skimage)")
    started = time.time()
    summary = quantize_file(fp32_path, int8_path, calib="skimage", calib_size=8)
    quantize_s = time.time() - started
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = threads
    sessions = [ort.InferenceSession(p, options, providers=["CPUExecutionProvider"]) for p in (fp32_path, int8_path)]
    name = sessions[0].get_inputs()[0].name
    pictures, _ = make_inputs((3, RESOLUTION, RESOLUTION), images="skimage")
    normal, _ = make_inputs((3, RESOLUTION, RESOLUTION), count=24, seed=1)
    inputs = np.concatenate([pictures, normal])
    progress("comparing on {} inputs".format(len(inputs)))
    outputs = [np.concatenate([s.run(None, {name: inputs[i:i + 1]})[0] for i in range(len(inputs))])
               for s in sessions]
    measured = agreement(outputs[1], outputs[0])
    on_pictures = agreement(outputs[1][:len(pictures)], outputs[0][:len(pictures)])
    progress("timing FP32 and INT8 ({} s)".format(seconds))
    sample = inputs[:1]
    samples = _time_in_blocks([lambda s=s: s.run(None, {name: sample}) for s in sessions], seconds)
    stats = [latency_stats(x) for x in samples]
    speedup = stats[0]["p50"] / stats[1]["p50"]
    speedup_min = stats[0]["min"] / stats[1]["min"]
    checks = {"cosine_mean": measured["cosine_mean"] >= TARGETS["cosine_mean"],
              "top1_agreement": measured["top1"] >= TARGETS["top1_agreement"],
              "speedup": speedup_min >= TARGETS["speedup"]}
    for path in (fp32_path, int8_path):
        os.unlink(path)
    os.rmdir(workdir)
    return {
        "benchmark": "quantize_cpu",
        "arch": ARCH, "resolution": RESOLUTION, "weights": "random (seed 0)",
        "quantize": {key: summary[key] for key in ("ops", "quantized_nodes", "quantized_op_types",
                                                   "plugin_nodes_kept", "qdq_nodes", "calibration")},
        "export_s": round(export_s, 1), "quantize_s": round(quantize_s, 1),
        "latency_ms": {"fp32": stats[0], "int8": stats[1]},
        "speedup_p50": round(speedup, 3), "speedup_min": round(speedup_min, 3),
        "agreement_vs_fp32": dict(measured, inputs="8 skimage photographs + 24 seeded standard-normal"),
        "agreement_on_pictures": on_pictures,
        "targets": TARGETS, "met": checks,
        "host": {"python": platform.python_version(), "onnxruntime": ort.__version__,
                 "machine": platform.machine(), "cpus": os.cpu_count(), "load_average": list(os.getloadavg()),
                 "intra_op_threads": threads or "default"},
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="timing budget per model")
    parser.add_argument("--threads", type=int, default=1, help="ORT intra-op threads (0: ORT's default)")
    parser.add_argument("--json", default=RESULT)
    args = parser.parse_args(argv)
    result = run(args.seconds, args.threads, lambda line: print(line, file=sys.stderr, flush=True))
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as handle:
        json.dump(result, handle, indent=2)
        handle.write("\n")
    print(json.dumps({"speedup_p50": result["speedup_p50"], "speedup_min": result["speedup_min"], "agreement": result["agreement_vs_fp32"],
                      "met": result["met"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
