#!/usr/bin/env python3
"""Global-memory traffic and kernel launches per op call of the edgeattn kernels, counted by the CPU emulator
(tests/plugins/emulation: every load and store of the kernel code inside the call's buffers), against the
compulsory bytes (each input read once, each output written once; edgeattn/cost.py) for the stage cases of
kernels_gpu.py (kernel_cases.py: CSWin-T24181 at 224/384/512); JSON out. No GPU.

Per case and kernel path (scalar: an emulated sm_53 device; tensor_core: sm_87 with the tensor-core kernels
forced; tensor_core_warp: sm_87 with that path forced, for the ops whose kernels it changes: blockify's one warp per
window and SOFT's Newton-Raphson one block per problem for M > 64, plugins/common/kernelPath.h), FP16 I/O: kernel launches (and, apart, the stream's memsets/memcpys, e.g. a ticket counter's reset), bytes
read and written (inputs, outputs and workspace) by all of them, their sum over the compulsory bytes, and the same
per launch. Issue 33's target for the memory-bound ops (EFFATT, LiteMLA ReLU and QT): at most
1.3x the compulsory bytes and 2 launches per call; each result says whether it meets it ("target_met"). What this
does not measure: caches (an L2 hit counts as traffic here, as a re-read would on a cold cache), DRAM transaction
granularity (bytes are counted as the code accesses them), or time.

    python benchmarks/kernels_traffic.py                          # -> benchmarks/results/kernels_traffic.json
    python benchmarks/kernels_traffic.py --resolutions 224 --ops efficient_attention --json /tmp/t.json

The emulated library is built (or taken from its cache) with g++ (tests/plugins/emulation/build_emulated.py);
--library names one. Large cases take minutes each in the emulator (SOFT at 512: 256 landmarks); the JSON is
rewritten after every case, so a stopped run keeps what it counted.
"""
import argparse
import datetime
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
for path in (HERE, REPO_ROOT, os.path.join(REPO_ROOT, "tests", "plugins")):
    if path not in sys.path:
        sys.path.insert(0, path)

import kernel_cases  # noqa: E402

PROGRAM = "kernels_traffic.py"
SCHEMA = "edgeattn.kernels_traffic/1"
DEFAULT_OUT = os.path.join(REPO_ROOT, "benchmarks", "results", "kernels_traffic.json")
#: kernel path -> the emulated device it runs on (set_compute_capability forces tensor_core on sm_80+, auto below)
PATHS = {"scalar": (5, 3), "tensor_core": (8, 7), "tensor_core_warp": (8, 7)}
#: the ops whose tensor_core_warp kernels differ from tensor_core's; the others run the same kernels on both paths
WARP_PATH_OPS = ("blockify_attention", "soft_kernel_attention")
#: issue 33's target for the memory-bound (linear) ops
MEMORY_BOUND_OPS = ("efficient_attention", "lite_mla", "lite_mla_qt")
TARGET = {"max_bytes_over_compulsory": 1.3, "max_launches": 2}
#: SMs of the emulated GPU: the Jetson AGX Orin's 16 (2048 CUDA cores, 128 per Ampere SM; NVIDIA's Jetson AGX Orin
#: data sheet). The persistent output pass launches one wave of blocks, each reading the context of every head it
#: touches, so its count matters; the emulator's own default (1 SM) would understate that.
MULTIPROCESSORS = 16


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def parse_args(argv=None):
    parser = _Parser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("--resolutions", nargs="+", type=int, choices=kernel_cases.RESOLUTIONS,
                        default=list(kernel_cases.RESOLUTIONS))
    parser.add_argument("--stages", nargs="+", type=int, choices=(1, 2, 3, 4), default=[1, 2, 3, 4])
    parser.add_argument("--ops", nargs="+", choices=kernel_cases.STAGE_OPS, default=list(kernel_cases.STAGE_OPS))
    parser.add_argument("--paths", nargs="+", choices=sorted(PATHS), default=sorted(PATHS))
    parser.add_argument("--batch", type=int, default=1, help="batch of every call (traffic scales with it)")
    parser.add_argument("--multiprocessors", type=int, default=MULTIPROCESSORS,
                        help="SMs of the emulated GPU, which the persistent passes fill (default %(default)s: "
                             "the AGX Orin's; the H200 has 132)")
    parser.add_argument("--max-landmarks", type=int, default=None,
                        help="skip SOFT cases with more landmarks (recorded as skipped: the emulated Newton-Raphson "
                             "steps cost M^3 each)")
    parser.add_argument("--library", help="the emulated kernels library (default: build_emulated's cached build)")
    parser.add_argument("--json", dest="out", default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.multiprocessors < 1:
        raise UsageError("--multiprocessors must be positive")
    if args.batch < 1:
        raise UsageError("--batch must be positive")
    return args


def _buffer(numpy, shape, seed, scale=1.0):
    return (numpy.random.RandomState(seed).standard_normal(shape) * scale).astype(numpy.float16)


def call(kernels, numpy, op, stage, batch):
    """Runs one FP16 call of ``op`` on ``kernels`` (the emulated library) with every buffer watched; returns the
    (input elements, output elements) the compulsory bytes count."""
    shape = kernel_cases.op_shape(op, stage)
    n, side, c, h = stage["tokens"], stage["side"], shape["channels"], shape["heads"]
    buffers = []

    def watched(array):
        kernels.watch_global(array.ctypes.data, array.nbytes)
        buffers.append(array)  # alive until the call returns
        return array.ctypes.data

    def workspace(nbytes):
        return watched(numpy.zeros(max(int(nbytes), 16), dtype=numpy.uint8)), max(int(nbytes), 16)

    if op in ("blockify_attention", "efficient_attention"):
        q, k, v = (_buffer(numpy, (batch, n, c), seed) for seed in range(3))
        out = numpy.empty_like(q)
        pointers = [watched(x) for x in (q, k, v, out)]
        if op == "blockify_attention":
            window = shape["window"]
            padding = "none" if side % window == 0 else "zeros"
            kernels.blockify_attention(*pointers, batch, side, side, c, h, window, padding=padding, dtype="float16")
        else:
            ws, ws_bytes = workspace(kernels.efficient_attention_workspace_size(batch, n, c, h))
            kernels.efficient_attention(*pointers, batch, n, c, h, ws, ws_bytes, dtype="float16")
        return [q.size, k.size, v.size], [out.size]
    if op in kernel_cases.LITE_MLA_KERNELS:
        d, kernel = shape["head_dim"], shape["kernel"]
        qkv = _buffer(numpy, (batch, 3 * c, side, side), 3, scale=0.5)
        out = numpy.empty((batch, c, side, side), dtype=numpy.float16)
        pointers = [watched(qkv), watched(out)]
        ws, ws_bytes = workspace(kernels.lite_mla_workspace_size(batch, 3 * c, side, side, d, kernel))
        kernels.lite_mla(*pointers, batch, 3 * c, side, side, d, ws, ws_bytes, kernel=kernel, eps=1e-15,
                         dtype="float16")
        return [qkv.size], [out.size]
    m = shape["landmarks"]
    scale = (c // h) ** -0.25
    q, landmarks, v = (_buffer(numpy, (batch, rows, c), seed, s)
                       for seed, (rows, s) in enumerate(((n, scale), (m, scale), (n, 1.0))))
    out = numpy.empty_like(q)
    pointers = [watched(x) for x in (q, landmarks, v, out)]
    ws, ws_bytes = workspace(kernels.soft_kernel_attention_workspace_size(batch, n, m, c, h))
    kernels.soft_kernel_attention(*pointers, batch, n, m, c, h, ws, ws_bytes,
                                  newton_iters=kernel_cases.SOFT_NEWTON_ITERS, dtype="float16")
    return [q.size, landmarks.size, v.size], [out.size]


def measure(kernels, numpy, op, stage, batch, path, multiprocessors=MULTIPROCESSORS):
    """One result: the call's launches and traffic against its compulsory bytes, on an emulated GPU of
    `multiprocessors` SMs (the persistent passes size their grids to it, and each block reads what it stages)."""
    from edgeattn import cost

    def prepare():
        kernels.reset()
        kernels.set_compute_capability(*PATHS[path])  # sm_80+: the tensor-core kernels forced (emulated_kernels.py)
        kernels.set_multiprocessor_count(multiprocessors)
        if path == "tensor_core_warp":
            kernels.set_kernel_path(path)

    prepare()
    ready = kernels.__dict__.setdefault("launch_state_ready", set())  # the emulated devices (one per path) set up
    if op in MEMORY_BOUND_OPS and PATHS[path] not in ready:
        # the one-time setup of the single launch's counters on the device's stream (plugins/common/launchState.h:
        # one memset at the first call), not a cost of each call
        call(kernels, numpy, op, stage, batch)
        ready.add(PATHS[path])
        prepare()
    inputs, outputs = call(kernels, numpy, op, stage, batch)
    launches = kernels.traffic()  # kernel launches and the stream's memsets/memcpys, in order
    read = sum(launch["read_bytes"] for launch in launches)
    written = sum(launch["written_bytes"] for launch in launches)
    kernel_launches = [launch for launch in launches if not launch["record"].startswith("cuda")]
    compulsory = cost.compulsory_bytes(2, inputs, outputs)
    entry = {"op": op, "resolution": stage["resolution"], "stage": stage["stage"], "batch": batch, "path": path,
             "dtype": "float16", "tokens": stage["tokens"], "shape": kernel_cases.op_shape(op, stage),
             "launches": len(kernel_launches), "other_stream_operations": len(launches) - len(kernel_launches),
             "read_bytes": read, "written_bytes": written,
             "compulsory_bytes": compulsory, "bytes_over_compulsory": (read + written) / float(compulsory),
             "per_launch": [{"kernel": launch["record"].split(" grid=")[0], "read_bytes": launch["read_bytes"],
                             "written_bytes": launch["written_bytes"]} for launch in launches]}
    if op in MEMORY_BOUND_OPS:
        entry["target_met"] = (entry["bytes_over_compulsory"] <= TARGET["max_bytes_over_compulsory"]
                               and entry["launches"] <= TARGET["max_launches"])
    return entry


def load_library(path=None):
    from emulation import build_emulated
    from emulation.emulated_kernels import EmulatedKernels

    return EmulatedKernels(path or build_emulated.cached_build())


def run(args, kernels, on_progress=None):
    import numpy

    results = []
    for resolution in args.resolutions:
        for stage in kernel_cases.stage_cases(resolution):
            if stage["stage"] not in args.stages:
                continue
            for op in args.ops:
                for path in args.paths:
                    if path == "tensor_core_warp" and op not in WARP_PATH_OPS:
                        continue  # the tensor_core case's kernels
                    if (op == "soft_kernel_attention" and args.max_landmarks is not None
                            and stage["landmarks"] > args.max_landmarks):
                        results.append({"op": op, "resolution": resolution, "stage": stage["stage"], "path": path,
                                        "skipped": "{} landmarks > --max-landmarks {}".format(
                                            stage["landmarks"], args.max_landmarks)})
                        continue
                    entry = measure(kernels, numpy, op, stage, args.batch, path, args.multiprocessors)
                    results.append(entry)
                    sys.stderr.write("{op:>22} {resolution} s{stage} {path:<11} launches {launches} "
                                     "bytes/compulsory {bytes_over_compulsory:.3f}\n".format(**entry))
                    if on_progress is not None:
                        on_progress(results)
    return results


def report(args, kernels, results, complete):
    met = [e["target_met"] for e in results if "target_met" in e]
    return {"schema": SCHEMA, "created_utc": datetime.datetime.utcnow().isoformat() + "Z", "complete": complete,
            "counted_by": "CPU emulator (tests/plugins/emulation), every global load and store in the call's "
                          "buffers", "library": kernels.path,
            "config": {"resolutions": args.resolutions, "stages": args.stages, "ops": args.ops,
                       "paths": args.paths, "batch": args.batch, "dtype": "float16",
                       "multiprocessors": args.multiprocessors,
                       "max_landmarks": args.max_landmarks},
            "target": dict(TARGET, ops=list(MEMORY_BOUND_OPS),
                           met_by=sum(met), of=len(met)),
            "results": results}


def main(argv=None):
    try:
        args = parse_args(argv)
        try:
            kernels = load_library(args.library)
        except Exception as error:  # noqa: BLE001 -- a missing compiler or a failed build: one line
            raise UsageError("cannot load the emulated kernels library: {}".format(error))
    except UsageError as error:
        sys.stderr.write("{}: error: {}\n".format(PROGRAM, error))
        return 2
    from edgeattn._io import atomic_write

    def write(results, complete):
        with atomic_write(args.out, "w") as handle:
            handle.write(json.dumps(report(args, kernels, results, complete), indent=2) + "\n")

    write(run(args, kernels, on_progress=lambda partial: write(partial, False)), True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
