"""The two sides of ``edgeattn compare``: an ONNX file (ONNX Runtime CPU through Polygraphy's runner), a TensorRT
engine (TensorRT's Python runtime through Polygraphy, or trtexec with ``--loadInputs`` / ``--exportOutput``), or a
checkpoint with its architecture (PyTorch FP32 on the CPU)."""
import collections
import contextlib
import os
import shutil
import tempfile
import warnings
import zipfile

import numpy as np

from ..errors import EdgeAttnError, MissingDependencyError

CHECKPOINT_EXTENSIONS = (".pt", ".pth", ".tar", ".ckpt", ".bin", ".safetensors")
ENGINE_BACKENDS = ("auto", "tensorrt", "trtexec")
#: samples per call when a side's batch is dynamic (bounds the memory of one run)
DYNAMIC_CHUNK = 16
TRTEXEC_TIMEOUT_S = 600


def _polygraphy(needed_for):
    try:
        import polygraphy  # noqa: F401
        from polygraphy.logger import G_LOGGER
    except ImportError:
        raise MissingDependencyError("polygraphy", needed_for, "pip install polygraphy (it ships with TensorRT)")
    return G_LOGGER


@contextlib.contextmanager
def _quiet_polygraphy():
    """Polygraphy logs every comparison on stdout; edgeattn prints its own report."""
    logger = _polygraphy("edgeattn compare")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with logger.verbosity(logger.CRITICAL):
            yield


class Side(object):
    """One model to run: ``inputs`` = [(name, dims or None per axis, numpy dtype)] (None until known),
    ``run(array) -> OrderedDict(name -> array)``."""

    kind = None
    backend = None

    def __init__(self, path):
        self.path = path
        self.inputs = None
        self.batch = None  # a fixed batch size, or None (dynamic)
        self.chunk = None  # run exactly this many samples per call (build --check at a profile corner)

    def describe(self):
        return {"path": os.path.abspath(self.path), "kind": self.kind, "backend": self.backend}

    def chunks(self, count):
        size = self.chunk or self.batch or DYNAMIC_CHUNK
        if self.batch and count % self.batch:
            raise EdgeAttnError("{} has a fixed batch of {}; give a multiple of it as --inputs (got {})".format(
                self.path, self.batch, count))
        return [(start, min(start + size, count)) for start in range(0, count, size)]

    def run(self, array):
        parts = collections.OrderedDict()
        for start, stop in self.chunks(len(array)):
            for name, value in self.infer(array[start:stop]).items():
                parts.setdefault(name, []).append(np.asarray(value))
        return collections.OrderedDict((name, np.concatenate(values)) for name, values in parts.items())

    def infer(self, array):
        raise NotImplementedError

    def close(self):
        pass


def _batch_of(shape):
    first = shape[0] if shape else None
    return first if isinstance(first, int) and first > 0 else None


class OnnxSide(Side):
    kind = "onnx"
    backend = "onnxruntime-cpu"

    def __init__(self, path):
        super().__init__(path)
        from ..bench.onnxruntime_backend import explain_ort_error, import_onnxruntime, open_session

        ort = import_onnxruntime()
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = open_session(ort, path, options, ["CPUExecutionProvider"])
        self._explain = explain_ort_error
        with _quiet_polygraphy():
            from polygraphy.backend.onnxrt import OnnxrtRunner

            self.runner = OnnxrtRunner(session, name=os.path.basename(path))
            self.runner.activate()
        from ..bench.inputs import ORT_TYPES

        metas = session.get_inputs()
        if len(metas) != 1:
            raise EdgeAttnError("{} has {} inputs; compare feeds models with one image input".format(
                path, len(metas)))
        meta = metas[0]
        if meta.type not in ORT_TYPES:
            raise EdgeAttnError("input {!r} of {} has type {}, not an image tensor".format(meta.name, path,
                                                                                           meta.type))
        shape = [d if isinstance(d, int) else None for d in (meta.shape or [])]
        self.inputs = [(meta.name, shape, np.dtype(ORT_TYPES[meta.type]))]
        self.batch = _batch_of(shape)

    def infer(self, array):
        name, _, dtype = self.inputs[0]
        try:
            with _quiet_polygraphy():
                return self.runner.infer({name: array.astype(dtype)})
        except Exception as error:  # noqa: BLE001 - ORT errors surface through Polygraphy
            raise EdgeAttnError(self._explain(error, self.path))

    def close(self):
        with _quiet_polygraphy():
            self.runner.deactivate()


class CheckpointSide(Side):
    kind = "checkpoint"
    backend = "pytorch-cpu-fp32"

    def __init__(self, path, arch=None, checkpoint_key=None, trust_pickle=False):
        super().__init__(path)
        try:
            import torch  # noqa: F401
        except ImportError:
            raise MissingDependencyError("torch", "running a checkpoint in edgeattn compare",
                                         "compare ONNX files or engines instead, or install torch")
        from ..models.checkpoint import describe_source, load_checkpoint

        self.model = load_checkpoint(path, trust_pickle=trust_pickle, arch=arch, key=checkpoint_key)
        config = getattr(self.model, "edgeattn_config", None) or {}
        size = config.get("img_size", 224)
        self.inputs = [("images", [None, 3, size, size], np.dtype(np.float32))]
        self.arch = getattr(self.model, "edgeattn_arch", None)
        self.source = describe_source(getattr(self.model, "edgeattn_source", None))

    def describe(self):
        record = super().describe()
        record.update({"arch": self.arch, "weights": self.source or None})
        return record

    def infer(self, array):
        import torch

        from ..ops.config import use_plugin_ops

        with torch.no_grad(), use_plugin_ops(False):
            out = self.model(torch.from_numpy(np.ascontiguousarray(array)))
        return collections.OrderedDict([("logits", out.detach().float().numpy())])


def _manifest_inputs(manifest):
    profiles = (manifest or {}).get("profiles") or []
    if not profiles:
        return None, None
    inputs = []
    batch = None
    for name, entry in profiles[0]["inputs"].items():
        low, opt, high = entry["min"], entry["opt"], entry["max"]
        dims = [None if lo != hi else o for lo, o, hi in zip(low, opt, high)]
        inputs.append((name, dims, np.dtype(np.float32)))
        batch = high[0] if low and low[0] == high[0] else None
    return inputs, batch


class EngineSide(Side):
    kind = "engine"

    def __init__(self, path, backend="auto", plugins=None, trtexec=None, allow_engine_host_code=False,
                 timeout=None):
        super().__init__(path)
        from ..bench import choose_backend, check_model_file
        from ..tensorrt import manifest as manifest_module

        # readable, matching its manifest when it has one, and no embedded host code unless allowed
        check_model_file(path, allow_engine_host_code=allow_engine_host_code)
        self.manifest = manifest_module.read_manifest(path)
        self.backend = choose_backend(backend, "engine", trtexec)
        self.inputs, self.batch = _manifest_inputs(self.manifest)
        self.max_batch = None
        profiles = (self.manifest or {}).get("profiles") or []
        if profiles:
            self.max_batch = min(entry["max"][0] for entry in profiles[0]["inputs"].values() if entry["max"])
        self._plugins = plugins
        self._trtexec = trtexec
        self._timeout = timeout or TRTEXEC_TIMEOUT_S
        self._allow_host_code = allow_engine_host_code
        self.runner = None
        if self.backend == "tensorrt":
            self._open_tensorrt()
        else:
            from ..trtexec.locate import locate

            self._trtexec_path, self._version = locate(trtexec)

    def describe(self):
        record = super().describe()
        precision = ((self.manifest or {}).get("precision") or {}).get("precision")
        record.update({"precision": precision, "manifest": bool(self.manifest)})
        return record

    def chunks(self, count):
        if self.chunk:
            return [(start, min(start + self.chunk, count)) for start in range(0, count, self.chunk)]
        if self.batch is None:
            # without a manifest the batch the engine takes is unknown: one sample per run is always valid
            size = min(self.max_batch, DYNAMIC_CHUNK) if self.max_batch else 1
            return [(start, min(start + size, count)) for start in range(0, count, size)]
        return super().chunks(count)

    # TensorRT Python, through Polygraphy's runner. UNVERIFIED: no TensorRT or GPU here.
    def _open_tensorrt(self):
        from ..tensorrt import manifest as manifest_module
        from ..tensorrt import plugin_library
        from ..tensorrt.api import deserialize_engine, import_tensorrt, load_plugins, tensorrt_version
        from ..tensorrt.cuda import open_cuda

        trt = import_tensorrt("running an engine in edgeattn compare")
        version = tensorrt_version(trt)
        cuda = open_cuda()
        manifest_module.preflight(self.path, self.manifest, version, cuda.device())
        cuda.release()
        library = plugin_library.resolve(self._plugins, manifest_plugins=(self.manifest or {}).get("plugins"),
                                         custom_ops=(self.manifest or {}).get("custom_ops") or (), load=False)
        load_plugins(trt, library["path"] if library else None)
        with open(self.path, "rb") as handle:
            data = handle.read()
        engine = deserialize_engine(trt, data, self.path, version, allow_engine_host_code=self._allow_host_code)
        with _quiet_polygraphy():
            from polygraphy.backend.trt import TrtRunner

            self.runner = TrtRunner(engine, name="engine")
            self.runner.activate()
            if self.inputs is None:
                metadata = self.runner.get_input_metadata()
                self.inputs = [(name, [d if isinstance(d, int) and d >= 0 else None for d in meta.shape],
                                _numpy_dtype(meta.dtype)) for name, meta in metadata.items()]
                self.batch = _batch_of(self.inputs[0][1])

    def infer(self, array):
        if self.backend == "tensorrt":
            name, _, dtype = self.inputs[0]
            with _quiet_polygraphy():
                return self.runner.infer({name: array.astype(dtype)})
        return self._infer_trtexec(array)

    def _infer_trtexec(self, array):
        from ..bench.trtexec_backend import run_for_export
        from ..tensorrt import plugin_library
        from ..trtexec import flags

        name, dims, dtype = self.inputs[0]
        library = plugin_library.resolve(self._plugins, manifest_plugins=(self.manifest or {}).get("plugins"),
                                         custom_ops=(self.manifest or {}).get("custom_ops") or (),
                                         load="optional")
        workdir = tempfile.mkdtemp(prefix="edgeattn-compare-")
        try:
            input_file = os.path.join(workdir, "input.bin")
            output_file = os.path.join(workdir, "output.json")
            with open(input_file, "wb") as handle:
                handle.write(np.ascontiguousarray(array.astype(dtype)).tobytes())
            args = [self._trtexec_path, "--loadEngine={}".format(os.path.abspath(self.path))]
            args.extend(flags.plugin_options(self._version, library["path"] if library else None))
            if any(d is None for d in dims):
                args.append("--shapes={}".format(flags.shapes_text([(name, array.shape)])))
            args.extend(["--loadInputs={}:{}".format(name, input_file), "--exportOutput={}".format(output_file),
                         "--iterations=1", "--warmUp=0", "--duration=0"])
            _, text = run_for_export(args, self._version, self.path, library, output_file, "--exportOutput",
                                     self._timeout)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return parse_exported_outputs(text)

    def close(self):
        if self.runner is not None:
            with _quiet_polygraphy():
                self.runner.deactivate()


def _numpy_dtype(dtype):
    """Polygraphy >= 0.49 describes tensors with its own DataType; older versions with numpy dtypes."""
    try:
        return np.dtype(dtype)
    except TypeError:
        from polygraphy.datatype import DataType

        return np.dtype(DataType.to_dtype(dtype, "numpy"))


def parse_exported_outputs(text):
    """trtexec ``--exportOutput`` (NVIDIA/TensorRT ``samples/common/sampleReporting.cpp``,
``exportJSONOutput``: one record per output binding, ``dimensions`` as ``AxB``,
    values of the last iteration, outputs in no particular order) -> OrderedDict sorted by name."""
    from ..trtexec.exports import load_records

    outputs = {}
    for record in load_records(text, "--exportOutput"):
        if not isinstance(record, dict) or "name" not in record or "values" not in record:
            continue
        dims = [int(d) for d in str(record.get("dimensions", "")).split("x") if d.strip()]
        values = np.array([np.nan if v is None else v for v in record["values"]], dtype=np.float32)
        if dims and int(np.prod(dims)) != values.size:
            raise EdgeAttnError("trtexec --exportOutput: output {!r} has {} values for dimensions {}".format(
                record["name"], values.size, record.get("dimensions")))
        outputs[record["name"]] = values.reshape(dims) if dims else values
    if not outputs:
        raise EdgeAttnError("trtexec --exportOutput file holds no outputs")
    return collections.OrderedDict(sorted(outputs.items()))


def _is_checkpoint(path):
    lower = path.lower()
    if lower.endswith(CHECKPOINT_EXTENSIONS):
        return True
    if lower.endswith((".onnx", ".engine", ".plan", ".trt")):
        return False
    if zipfile.is_zipfile(path):
        return True
    with open(path, "rb") as handle:
        head = handle.read(2)
    return head[:1] == b"\x80"  # a pickle protocol marker: a legacy torch.save file


def open_side(path, arch=None, checkpoint_key=None, trust_pickle=False, backend="auto", plugins=None, trtexec=None,
              allow_engine_host_code=False, timeout=None):
    """An ONNX, engine or checkpoint :class:`Side` for ``path`` (kind from the content and the name)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise EdgeAttnError("no such file: {}".format(path))
    if os.path.isdir(path):
        raise EdgeAttnError("{} is a directory, not a model file".format(path))
    if os.path.getsize(path) == 0:
        raise EdgeAttnError("{} is empty".format(path))
    if _is_checkpoint(path):
        return CheckpointSide(path, arch=arch, checkpoint_key=checkpoint_key, trust_pickle=trust_pickle)
    from ..bench import check_model_file

    kind = check_model_file(path, allow_engine_host_code=allow_engine_host_code)
    if kind == "onnx":
        return OnnxSide(path)
    return EngineSide(path, backend=backend, plugins=plugins, trtexec=trtexec,
                      allow_engine_host_code=allow_engine_host_code, timeout=timeout)


def _input_size(sides):
    """The (C, H, W) both sides take; an error naming both when they disagree."""
    known = [(side, side.inputs[0][1][1:]) for side in sides if side.inputs]
    if not known:
        raise EdgeAttnError("neither model says its input shape (engines need the manifest `edgeattn build` "
                            "writes beside them)")
    for side, dims in known:
        if len(dims) != 3 or any(d is None for d in dims):
            raise EdgeAttnError("{} takes input {} {}; compare needs a fixed C x H x W image input".format(
                side.path, side.inputs[0][0], side.inputs[0][1]))
    first = known[0][1]
    for side, dims in known[1:]:
        if list(dims) != list(first):
            raise EdgeAttnError("the models take different inputs: {} {} vs {} {}".format(
                known[0][0].path, "x".join(map(str, first)), side.path, "x".join(map(str, dims))))
    for side in sides:
        if side.inputs is None:  # an engine without a manifest takes the other model's input
            other = known[0][0].inputs[0]
            side.inputs = [(other[0], [None] + list(first), np.dtype(np.float32))]
    return tuple(int(d) for d in first)
