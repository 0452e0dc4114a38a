#!/usr/bin/env python3
"""Whole-model GPU throughput (issue 33 item 6): CSWin-T24181 GLOBAL and ELFATT in PyTorch, with PyTorch's attention
and with the edgeattn CUDA kernels, in images per second beside the ELFATT paper's Table I; JSON out.

Cases (--models x --impls x --resolutions x --batches; FP16 weights and inputs, eval mode, inference_mode):

  global / sdpa_flash    CSWin-T24181-GLOBAL, its softmax attention as torch SDPA restricted to the flash backend
  global / sdpa_math     the same with SDPA's math backend: no FlashAttention (the paper's "nFA")
  elfatt / sdpa_flash    CSWin-T24181-ELFATT with the reference ops (edgeattn.ops: SDPA over the blockify windows,
                         the EFFATT bmm form), SDPA restricted to flash: the paper's "FA" setting
  elfatt / sdpa_math     the same, SDPA's math backend ("nFA")
  elfatt / edgeattn      the same model with the custom ops on (edgeattn.ops.config.use_plugin_ops) and their CUDA
                         implementations registered (edgeattn.plugins.cuda_ops: blockify and EFFATT on the kernels)

GLOBAL has no edgeattn op, so it has no edgeattn case. A case that fails (flash refusing a masked window, memory)
is recorded with its error and the run goes on. Resolutions 224/384/512, batches 64 and 256 by default. The paper's
numbers (ELFATT, arXiv 2501.06098, Table I: 224x224, batch 512, mixed precision, one NVIDIA H20) are in the JSON
beside each 224 case: GLOBAL 2210 img/s with FlashAttention-2, 1303 without; ELFATT 2856 / 2603. An H20 is not an
H100/H200 (about 15 % of an H100's FP16 tensor rate, 4.0 TB/s), and AMP is not pure FP16: compare ratios between
cases, not the absolute numbers.

Timing: CUDA events around --iters forward passes after --warmup, median of --repeats; --timing graph (default)
captures the --iters forward passes in one CUDA graph and times its replays, --timing eager times plain calls (each
result's "timing" says which it got). img/s = batch / latency. The JSON (schema edgeattn.models_gpu/1) is rewritten
after every case. Needs a CUDA GPU, torch with CUDA and, for the edgeattn cases, a kernels library (--library,
$EDGEATTN_KERNELS_LIB or plugins/build/libedgeattn_kernels.so). Importing this module needs neither
(tests/plugins/test_models_gpu_benchmark.py runs it on the CPU with a fake timer).

    python benchmarks/models_gpu.py --json runs/models_gpu.json
    python benchmarks/models_gpu.py --resolutions 224 --batches 64 --impls sdpa_flash edgeattn
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
# the device, CUDA-event timing and the report writer (shared with kernels_gpu.py; importing it needs no GPU)
import gpu_device  # noqa: E402

PROGRAM = "models_gpu.py"
SCHEMA = "edgeattn.models_gpu/1"
MODELS = {"global": "cswin_t24181_global", "elfatt": "cswin_t24181_elfatt"}
IMPLS = ("sdpa_flash", "sdpa_math", "edgeattn")
RESOLUTIONS = (224, 384, 512)
BATCHES = (64, 256)
#: ELFATT (Zhang et al., arXiv 2501.06098) Table I, CSWin-T24181 at 224x224: img/s with ("FA") and without
#: ("nFA") FlashAttention-2, batch 512, mixed precision, one NVIDIA H20
PAPER_TABLE_I = {
    "source": "ELFATT (arXiv 2501.06098) Table I: CSWin-T24181, 224x224, batch 512, mixed precision, one NVIDIA H20",
    "resolution": 224,
    "img_per_s": {"global": {"sdpa_flash": 2210, "sdpa_math": 1303},
                  "elfatt": {"sdpa_flash": 2856, "sdpa_math": 2603}},
}


class UsageError(Exception):
    """Bad arguments or a missing GPU/library: one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def _positive(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive, got {}".format(text))
    return value


def parse_args(argv=None):
    parser = _Parser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=list(MODELS))
    parser.add_argument("--impls", nargs="+", choices=IMPLS, default=list(IMPLS))
    parser.add_argument("--resolutions", nargs="+", type=_positive, default=list(RESOLUTIONS))
    parser.add_argument("--batches", nargs="+", type=_positive, default=list(BATCHES))
    parser.add_argument("--warmup", type=_positive, default=3)
    parser.add_argument("--iters", type=_positive, default=10)
    parser.add_argument("--repeats", type=_positive, default=3)
    parser.add_argument("--timing", choices=("graph", "eager"), default="graph")
    parser.add_argument("--library", help="libedgeattn_kernels.so for the edgeattn cases")
    parser.add_argument("--json", dest="out", help="write the JSON here (rewritten after every case), else stdout")
    args = parser.parse_args(argv)
    for resolution in args.resolutions:
        if resolution % 32:
            raise UsageError("resolution {} is not a multiple of 32 (CSWin's four stages)".format(resolution))
    return args


def cases(args):
    """Every (model, impl, resolution, batch) the run measures, in run order (model built once per resolution)."""
    result = []
    for model in args.models:
        for resolution in args.resolutions:
            for impl in args.impls:
                if impl == "edgeattn" and model == "global":
                    continue  # GLOBAL has no edgeattn op
                for batch in args.batches:
                    result.append({"model": model, "arch": MODELS[model], "impl": impl, "resolution": resolution,
                                   "batch": batch})
    return result


def paper_img_per_s(case):
    """The paper's Table I throughput for this case's model and setting, where it has one (224 only)."""
    if case["resolution"] != PAPER_TABLE_I["resolution"]:
        return None
    return PAPER_TABLE_I["img_per_s"].get(case["model"], {}).get(case["impl"])


def sdpa_backend(torch, impl):
    """The context that restricts SDPA to the case's backend (edgeattn: SDPA left as it is; the ops replace it)."""
    import contextlib
    if impl == "edgeattn":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION if impl == "sdpa_flash" else SDPBackend.MATH])


def measure(torch, case, model, images, time_fn, ops_context):
    """One case's entry: latency (ms per forward pass), img/s, the paper's number; or the error."""
    entry = dict(case, paper_img_per_s=paper_img_per_s(case))

    def forward():
        with ops_context(), sdpa_backend(torch, case["impl"]):
            return model(images)

    try:
        with torch.inference_mode():
            ms, timing = time_fn(forward)
    except Exception as error:  # noqa: BLE001 -- recorded in the JSON, and the run goes on
        text = str(error).strip().splitlines()[0] if str(error).strip() else ""
        entry.update(latency_ms=None, img_per_s=None, error="{}: {}".format(type(error).__name__, text))
        sys.stderr.write("{model:>6} {impl:<10} {resolution}px B={batch}: FAILED {error}\n".format(**entry))
        return entry
    entry.update(latency_ms=ms, timing=timing, img_per_s=case["batch"] / (ms * 1e-3))
    paper = entry["paper_img_per_s"]
    sys.stderr.write("{model:>6} {impl:<10} {resolution}px B={batch:<4} {latency_ms:9.3f} ms {img_per_s:9.1f} img/s"
                     "{paper}\n".format(paper=" (paper {})".format(paper) if paper else "", **entry))
    return entry


def add_ratios(results):
    """Each result gets speedup_vs_<model>_<impl>: that case's latency / its own, same resolution and batch."""
    by_shape = {}
    for entry in results:
        if entry.get("latency_ms"):
            by_shape.setdefault((entry["resolution"], entry["batch"]), []).append(entry)
    for group in by_shape.values():
        for entry in group:
            for other in group:
                if other is not entry:
                    entry["speedup_vs_{}_{}".format(other["model"], other["impl"])] = (
                        other["latency_ms"] / entry["latency_ms"])
    return results


def run(args, torch, time_fn, build_model, on_progress=None):
    """Measures every case; ``build_model(arch, resolution)`` returns (the FP16 eval model on the device,
    images_for(batch)), ``time_fn(fn)`` returns (ms, timing mode). The edgeattn cases need the CUDA ops registered
    (edgeattn.plugins.cuda_ops.register) before."""
    from edgeattn.ops.config import use_plugin_ops

    results = []
    built = {}
    for case in cases(args):
        key = (case["arch"], case["resolution"])
        if key not in built:
            built.clear()  # one model in memory at a time
            built[key] = build_model(case["arch"], case["resolution"])
        model, images_for = built[key]

        def ops_context(impl=case["impl"]):
            return use_plugin_ops(impl == "edgeattn")

        results.append(measure(torch, case, model, images_for(case["batch"]), time_fn, ops_context))
        add_ratios(results)
        if on_progress is not None:
            on_progress(results)
    return results


def run_and_write(args, torch, time_fn, build_model, device, kernels_info=None):
    """run(), with the JSON rewritten after every case (to --json, atomically; stdout once at the end otherwise)."""
    def write(results, complete):
        gpu_device.write_report(args.out, build_report(args, torch, device, results, complete, kernels_info), complete)

    results = run(args, torch, time_fn, build_model, on_progress=lambda partial: write(partial, False))
    write(results, True)
    return results


def build_report(args, torch, device, results, complete, kernels_info=None):
    return {
        "schema": SCHEMA,
        "created_utc": datetime.datetime.utcnow().isoformat() + "Z",
        "complete": complete,
        "device": device,
        "software": {"python": platform.python_version(), "torch": torch.__version__,
                     "cuda": getattr(torch.version, "cuda", None), "kernels": kernels_info},
        "config": {"models": list(args.models), "impls": list(args.impls), "resolutions": list(args.resolutions),
                   "batches": list(args.batches), "warmup": args.warmup, "iters": args.iters,
                   "repeats": args.repeats, "timing": args.timing, "dtype": "float16"},
        "paper": PAPER_TABLE_I,
        "results": results,
    }


def _cuda_model_builder(torch):
    from edgeattn.models import create_model

    def build(arch, resolution):
        model = create_model(arch, img_size=resolution).eval().half().cuda()
        generator = torch.Generator(device="cuda").manual_seed(0)
        images = {}

        def images_for(batch):
            if batch not in images:
                images.clear()
                images[batch] = torch.randn(batch, 3, resolution, resolution, device="cuda", dtype=torch.float16,
                                            generator=generator)
            return images[batch]
        return model, images_for
    return build


def main(argv=None):
    try:
        args = parse_args(argv)
        import torch

        if not torch.cuda.is_available():
            raise UsageError("needs a CUDA GPU (torch.cuda.is_available() is False)")
        from edgeattn.errors import EdgeAttnError

        kernels_info = None
        if "edgeattn" in args.impls and "elfatt" in args.models:
            from edgeattn.plugins import cuda_ops
            try:  # a missing library is a usage error before anything runs
                library = cuda_ops.register(args.library).library
            except EdgeAttnError as error:
                raise UsageError(str(error))
            kernels_info = {"path": library.path, "build_info": library.build_info()}
        device_args = argparse.Namespace(peak_tflops=None, peak_fp32_tflops=None, peak_gbps=None)
        device = gpu_device.device_report(torch, device_args)
    except UsageError as error:
        sys.stderr.write("{}: error: {}\n".format(PROGRAM, error))
        return 2

    def time_fn(fn):
        return gpu_device.time_ms(torch, fn, args.warmup, args.iters, args.repeats, graph=args.timing == "graph")

    run_and_write(args, torch, time_fn, _cuda_model_builder(torch), device, kernels_info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
