"""The GPU a benchmark runs on, how it is timed and how its report is written, shared by kernels_gpu.py and
models_gpu.py: the device report (name, compute capability, SMs, clocks, driver), the dense FP16 tensor and FP32 peaks
estimated from SMs x clock x per-SM rate, the memory bandwidth from the driver, CUDA-event timing of a function
(optionally as replays of a CUDA graph), and the JSON report rewritten as the cases finish. torch is passed in
(imported by the caller), so importing this module needs nothing but the stdlib.
"""
import ctypes
import json
import statistics
import sys

#: dense FP16 tensor-core FMAs (FP32 accumulate) per SM per clock, and FP32 FMAs per SM per clock, by compute
#: capability (A100/Orin: 1024, H100: 2048; GA10x/AD10x GeForce parts run FP32-accumulate at 256; L4/L40 at 512)
TENSOR_FMA_PER_SM_CLOCK = {70: 512, 72: 512, 75: 512, 80: 1024, 86: 256, 87: 1024, 89: 512, 90: 2048}
FP32_FMA_PER_SM_CLOCK = {70: 64, 72: 64, 75: 64, 80: 64, 86: 128, 87: 128, 89: 128, 90: 128}


def estimated_peaks(capability, multiprocessors, clock_khz):
    """(dense FP16 tensor TFLOP/s, FP32 TFLOP/s) from the SM count, the clock and the per-SM rates above; None for
    an unknown capability."""
    arch = capability[0] * 10 + capability[1]
    clock = clock_khz * 1e3
    tensor = TENSOR_FMA_PER_SM_CLOCK.get(arch)
    fp32 = FP32_FMA_PER_SM_CLOCK.get(arch)
    return (2.0 * multiprocessors * clock * tensor / 1e12 if tensor else None,
            2.0 * multiprocessors * clock * fp32 / 1e12 if fp32 else None)


def time_ms(torch, fn, warmup, iters, repeats, graph=False):
    """(median over ``repeats`` of the mean per-call time of ``iters`` back-to-back calls, timing mode), with CUDA
    events. graph=True times replays of a CUDA graph holding the ``iters`` calls: the GPU's time without the
    Python and ctypes launch overhead (a TensorRT engine launches from C++, or from a CUDA graph with
    --useCudaGraph). A function that cannot be captured is timed eagerly, and the mode says so."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    mode, call = "eager", None
    if graph:
        captured = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(captured):
                for _ in range(iters):
                    fn()
            captured.replay()
            torch.cuda.synchronize()
            mode, call = "cuda_graph", captured.replay
        except Exception:  # noqa: BLE001 -- not capturable (a host sync, an allocation the graph pool refuses)
            torch.cuda.synchronize()
    runs = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        if call is not None:
            call()
        else:
            for _ in range(iters):
                fn()
        end.record()
        end.synchronize()
        runs.append(start.elapsed_time(end) / iters)
    return statistics.median(runs), mode


def _libcuda_attribute(device, attribute):
    """cuDeviceGetAttribute through the driver library, or None."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        handle, value = ctypes.c_int(), ctypes.c_int()
        if libcuda.cuInit(0) != 0 or libcuda.cuDeviceGet(ctypes.byref(handle), device) != 0:
            return None
        if libcuda.cuDeviceGetAttribute(ctypes.byref(value), attribute, handle) != 0:
            return None
        return value.value
    except OSError:
        return None


def driver_version():
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int()
        if libcuda.cuDriverGetVersion(ctypes.byref(version)) == 0:
            return "{}.{}".format(version.value // 1000, version.value % 1000 // 10)
    except OSError:
        pass
    return None


def nvidia_driver_version():
    """The display driver's version as nvidia-smi prints it (e.g. 580.159.04), through NVML, or None."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() != 0:
            return None
        buffer = ctypes.create_string_buffer(96)
        ok = nvml.nvmlSystemGetDriverVersion(buffer, ctypes.c_uint(len(buffer))) == 0
        nvml.nvmlShutdown()
        return buffer.value.decode() if ok else None
    except (OSError, AttributeError):
        return None


def device_report(torch, args):
    index = torch.cuda.current_device()
    properties = torch.cuda.get_device_properties(index)
    capability = (properties.major, properties.minor)
    # CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13, MEMORY_CLOCK_RATE = 36, GLOBAL_MEMORY_BUS_WIDTH = 37 (kHz, kHz, bits)
    clock_khz = _libcuda_attribute(index, 13)
    memory_khz, bus_bits = _libcuda_attribute(index, 36), _libcuda_attribute(index, 37)
    tensor, fp32 = estimated_peaks(capability, properties.multi_processor_count, clock_khz) if clock_khz else (None,
                                                                                                             None)
    bandwidth = 2.0 * memory_khz * 1e3 * bus_bits / 8 / 1e9 if memory_khz and bus_bits else None
    return {"name": properties.name, "capability": "{}.{}".format(*capability),
            "multiprocessors": properties.multi_processor_count, "sm_clock_khz": clock_khz,
            "memory_clock_khz": memory_khz, "memory_bus_bits": bus_bits,
            "peak_fp16_tensor_tflops": args.peak_tflops or tensor,
            "peak_fp16_tensor_source": "--peak-tflops" if args.peak_tflops else "estimate: SMs x clock x per-SM rate",
            "peak_fp32_tflops": args.peak_fp32_tflops or fp32,
            "peak_bandwidth_gbps": args.peak_gbps or bandwidth,
            "peak_bandwidth_source": "--peak-gbps" if args.peak_gbps else "driver: 2 x memory clock x bus width"}


def write_report(path, document, complete):
    """Writes a benchmark's JSON document to ``path`` (atomically: the callers rewrite it after every case, so a run
    cut short leaves a readable file with the cases so far), or, without a path, to stdout once it is ``complete``."""
    text = json.dumps(document, indent=2) + "\n"
    if path:
        from edgeattn._io import atomic_write

        with atomic_write(path, "w") as handle:
            handle.write(text)
    elif complete:
        sys.stdout.write(text)
