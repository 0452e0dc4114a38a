"""Device buffers, one stream, timing events and CUDA graphs for the TensorRT Python benchmark.

UNVERIFIED (no GPU in this repository's CI). Two implementations over the CUDA runtime's *primary* context - the
same context torch and TensorRT use - so there is exactly one context owner per process and never a
``pycuda.autoinit``, whose own context beside torch's and TensorRT's gives "invalid resource handle", zero
outputs or hangs (NVIDIA/TensorRT issues #1133, #4335, #4608):

* torch with CUDA, when torch is importable and sees a GPU;
* cuda-python (``cuda.bindings.runtime``, or ``cuda.cudart`` in older releases) otherwise.
"""
import codecs

from ..errors import EdgeAttnError, MissingDependencyError


def _text(value):
    """cuda-python returns names as bytes in some releases and str in others."""
    return codecs.decode(value, "utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


_CUDA = None


def open_cuda():
    """The process's CUDA helper (created once: one stream, one context owner); the first available
    implementation. Raises :class:`MissingDependencyError` if neither is usable."""
    global _CUDA
    if _CUDA is None:
        _CUDA = _create()
    return _CUDA


def _create():
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        return TorchCuda(torch)
    cudart = None
    try:
        from cuda.bindings import runtime as cudart
    except ImportError:
        try:
            from cuda import cudart
        except ImportError:
            cudart = None
    if cudart is not None:
        return CudaPythonCuda(cudart)
    raise MissingDependencyError("cuda-python (or torch with CUDA)", "`edgeattn bench --backend tensorrt`",
                                 "Install it with `pip install cuda-python`, or use --backend trtexec.")


class TorchCuda(object):
    name = "torch"

    def __init__(self, torch):
        self.torch = torch
        self.stream = torch.cuda.Stream()
        self.handle = self.stream.cuda_stream
        self._buffers = []
        self._graph = None

    def device(self):
        major, minor = self.torch.cuda.get_device_capability(0)
        return {"name": self.torch.cuda.get_device_name(0), "compute_capability": "{}.{}".format(major, minor),
                "source": "torch"}

    def malloc(self, nbytes):
        buffer = self.torch.empty(max(int(nbytes), 1), dtype=self.torch.uint8, device="cuda")
        self._buffers.append(buffer)
        return buffer.data_ptr()

    def upload(self, pointer, array):
        for buffer in self._buffers:
            if buffer.data_ptr() == pointer:
                source = self.torch.from_numpy(array.reshape(-1).view("uint8"))
                buffer[:source.numel()].copy_(source)
                self.torch.cuda.synchronize()
                return
        raise EdgeAttnError("internal error: unknown device buffer")

    def event(self):
        return self.torch.cuda.Event(enable_timing=True)

    def record(self, event):
        event.record(self.stream)

    def elapsed_ms(self, start, end):
        end.synchronize()
        return start.elapsed_time(end)

    def synchronize(self):
        self.stream.synchronize()

    def capture(self, enqueue):
        self._graph = self.torch.cuda.CUDAGraph()
        with self.torch.cuda.graph(self._graph, stream=self.stream):
            enqueue()

    def launch(self):
        with self.torch.cuda.stream(self.stream):
            self._graph.replay()

    def release(self):
        """Free this run's buffers and graph (the stream stays for the next run)."""
        self.synchronize()
        self._graph = None
        self._buffers = []


class CudaPythonCuda(object):
    name = "cuda-python"

    def __init__(self, cudart):
        self.cudart = cudart
        self.stream = self._check(cudart.cudaStreamCreate())
        self.handle = int(self.stream)
        self._pointers = []
        self._graph_exec = None

    def _check(self, result):
        error = result[0]
        if int(error) != 0:
            name = self.cudart.cudaGetErrorName(error)[1]
            raise EdgeAttnError("CUDA error: {}".format(_text(name)))
        if len(result) == 1:
            return None
        return result[1] if len(result) == 2 else result[1:]

    def device(self):
        props = self._check(self.cudart.cudaGetDeviceProperties(0))
        return {"name": _text(props.name).rstrip("\x00"),
                "compute_capability": "{}.{}".format(props.major, props.minor), "source": "cuda-python"}

    def malloc(self, nbytes):
        pointer = int(self._check(self.cudart.cudaMalloc(max(int(nbytes), 1))))
        self._pointers.append(pointer)
        return pointer

    def upload(self, pointer, array):
        self._check(self.cudart.cudaMemcpy(pointer, array.ctypes.data, array.nbytes,
                                           self.cudart.cudaMemcpyKind.cudaMemcpyHostToDevice))

    def event(self):
        return self._check(self.cudart.cudaEventCreate())

    def record(self, event):
        self._check(self.cudart.cudaEventRecord(event, self.stream))

    def elapsed_ms(self, start, end):
        self._check(self.cudart.cudaEventSynchronize(end))
        return float(self._check(self.cudart.cudaEventElapsedTime(start, end)))

    def synchronize(self):
        self._check(self.cudart.cudaStreamSynchronize(self.stream))

    def capture(self, enqueue):
        cudart = self.cudart
        self._check(cudart.cudaStreamBeginCapture(
            self.stream, cudart.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal))
        enqueue()
        graph = self._check(cudart.cudaStreamEndCapture(self.stream))
        try:
            self._graph_exec = self._check(cudart.cudaGraphInstantiate(graph, 0))
        except TypeError:  # CUDA 11 bindings: (graph, errorNode, logBuffer, bufferSize) -> (err, exec, node)
            value = self._check(cudart.cudaGraphInstantiate(graph, None, None, 0))
            self._graph_exec = value[0] if isinstance(value, tuple) else value

    def launch(self):
        self._check(self.cudart.cudaGraphLaunch(self._graph_exec, self.stream))

    def release(self):
        """Free this run's buffers and graph (the stream stays for the next run)."""
        self.synchronize()
        if self._graph_exec is not None:
            self.cudart.cudaGraphExecDestroy(self._graph_exec)
            self._graph_exec = None
        for pointer in self._pointers:
            self.cudart.cudaFree(pointer)
        self._pointers = []
