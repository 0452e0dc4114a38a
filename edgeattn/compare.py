"""``edgeattn compare A B``: run two models on the same inputs and compare their outputs.

A side is an ONNX file (ONNX Runtime CPU), a TensorRT engine (TensorRT's Python runtime, or trtexec with
``--loadInputs`` / ``--exportOutput``), or a checkpoint with its architecture (PyTorch FP32 on the CPU, the reference
operators; torch is imported only for such a side). Polygraphy is the anchor: ONNX files and engines run through
its ONNX Runtime and TensorRT runners, and its comparator (``SimpleCompareFunc``, element-wise) decides whether
the outputs agree: an element fails when it is outside both ``atol`` and ``rtol`` (relative to B, the reference).

Inputs: ``count`` seeded standard-normal batches (the distribution of a normalised image), or real pictures
(``images``: a directory, or ``"skimage"`` for the sample photographs that ship with scikit-image), resized so
that the shorter side is the input size / 0.875 (bicubic), centre-cropped and normalised with the ImageNet mean
and standard deviation, which is what every model in the zoo expects.

Besides Polygraphy's max/mean absolute and relative errors, the report has per-sample cosine similarity and, for
classifier outputs (N, C >= 5), top-1 agreement (same arg-max) and top-5 agreement (mean overlap of the two top-5
sets). The comparison fails (``passed`` False; CLI exit 1) when Polygraphy's check fails or top-1 agreement is
below ``min_top1``.
"""
import collections
import contextlib
import os
import shutil
import tempfile
import warnings
import zipfile

import numpy as np

from .errors import EdgeAttnError, MissingDependencyError

SCHEMA = "edgeattn.compare/1"
DEFAULT_INPUTS = 8
DEFAULT_ATOL = 1e-4
DEFAULT_RTOL = 1e-3
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CROP_FRACTION = 0.875
#: scikit-image's bundled photographs that load without a download (skimage.data), all turned into RGB
SKIMAGE_PICTURES = ("astronaut", "chelsea", "coffee", "rocket", "stereo_motorcycle", "hubble_deep_field",
                    "immunohistochemistry", "camera")
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".pgm", ".webp", ".tif", ".tiff")
CHECKPOINT_EXTENSIONS = (".pt", ".pth", ".tar", ".ckpt", ".bin", ".safetensors")
ENGINE_BACKENDS = ("auto", "tensorrt", "trtexec")
#: samples per call when a side's batch is dynamic (bounds the memory of one run)
DYNAMIC_CHUNK = 16
TRTEXEC_TIMEOUT_S = 600


# ------------------------------------------------------------------------------------------------------ inputs


def _import_pillow():
    try:
        from PIL import Image
    except ImportError:
        raise MissingDependencyError("Pillow", "reading pictures for --images", "pip install 'edgeattn[images]'")
    return Image


def sample_pictures():
    """``[(name, HxWx3 uint8 array)]``: scikit-image's bundled photographs (no download)."""
    try:
        from skimage import data
    except ImportError:
        raise MissingDependencyError("scikit-image", "the sample pictures (--images skimage)",
                                     "pip install 'edgeattn[images]'")
    pictures = []
    for name in SKIMAGE_PICTURES:
        array = getattr(data, name)()
        if isinstance(array, tuple):  # stereo pairs: the left view
            array = array[0]
        array = np.asarray(array)
        if array.ndim == 2:
            array = np.repeat(array[:, :, None], 3, axis=2)
        pictures.append((name, np.ascontiguousarray(array[:, :, :3]).astype(np.uint8)))
    return pictures


def write_sample_pictures(directory):
    """Write :func:`sample_pictures` as PNG files into ``directory``; returns their paths."""
    Image = _import_pillow()
    os.makedirs(directory, exist_ok=True)
    paths = []
    for name, array in sample_pictures():
        path = os.path.join(directory, name + ".png")
        Image.fromarray(array).save(path)
        paths.append(path)
    return paths


def _pictures_in(directory):
    Image = _import_pillow()
    if not os.path.isdir(directory):
        raise EdgeAttnError("--images {}: not a directory (or 'skimage' for the bundled sample pictures)".format(
            directory))
    names = sorted(name for name in os.listdir(directory) if name.lower().endswith(IMAGE_EXTENSIONS))
    if not names:
        raise EdgeAttnError("no pictures ({}) in {}".format(", ".join(IMAGE_EXTENSIONS), directory))
    pictures = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            with Image.open(path) as picture:
                pictures.append((name, np.asarray(picture.convert("RGB"))))
        except (OSError, ValueError) as error:
            raise EdgeAttnError("cannot read picture {}: {}".format(path, error))
    return pictures


def preprocess(array, height, width):
    """HxWx3 uint8 -> 3 x height x width float32: shorter side to size/0.875 (bicubic), centre crop, ImageNet
    normalisation."""
    Image = _import_pillow()
    picture = Image.fromarray(array)
    scale = max(height / CROP_FRACTION / picture.height, width / CROP_FRACTION / picture.width)
    size = (max(width, int(round(picture.width * scale))), max(height, int(round(picture.height * scale))))
    picture = picture.resize(size, Image.BICUBIC)
    left, top = (size[0] - width) // 2, (size[1] - height) // 2
    picture = picture.crop((left, top, left + width, top + height))
    pixels = np.asarray(picture, dtype=np.float32) / 255.0
    pixels = (pixels - np.array(IMAGENET_MEAN, np.float32)) / np.array(IMAGENET_STD, np.float32)
    return np.ascontiguousarray(pixels.transpose(2, 0, 1))


def make_inputs(chw, count=None, images=None, seed=0):
    """``(array N x C x H x W float32, description)`` for the input size ``chw``."""
    channels, height, width = chw
    if images is not None:
        if channels != 3:
            raise EdgeAttnError("--images needs a 3-channel input; the models take {} channels".format(channels))
        pictures = sample_pictures() if images == "skimage" else _pictures_in(images)
        batch = np.stack([preprocess(array, height, width) for _, array in pictures])
        return batch, {"source": "skimage" if images == "skimage" else "images", "directory": None
                       if images == "skimage" else os.path.abspath(images),
                       "pictures": [name for name, _ in pictures], "count": len(pictures),
                       "preprocessing": "shorter side to size/{:g} (bicubic), centre crop, ImageNet mean/std".format(
                           CROP_FRACTION)}
    count = DEFAULT_INPUTS if count is None else int(count)
    if count < 1:
        raise EdgeAttnError("--inputs must be a positive number, got {}".format(count))
    rng = np.random.default_rng(seed)
    batch = rng.standard_normal((count, channels, height, width)).astype(np.float32)
    return batch, {"source": "random", "seed": int(seed), "count": count, "distribution": "standard normal"}


# ------------------------------------------------------------------------------------------------------- sides


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

    def describe(self):
        return {"path": os.path.abspath(self.path), "kind": self.kind, "backend": self.backend}

    def chunks(self, count):
        size = self.batch or DYNAMIC_CHUNK
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
        from .bench.onnxruntime_backend import explain_ort_error, import_onnxruntime, open_session

        ort = import_onnxruntime()
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = open_session(ort, path, options, ["CPUExecutionProvider"])
        self._explain = explain_ort_error
        with _quiet_polygraphy():
            from polygraphy.backend.onnxrt import OnnxrtRunner

            self.runner = OnnxrtRunner(session, name=os.path.basename(path))
            self.runner.activate()
        from .bench.inputs import ORT_TYPES

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
        from .models.checkpoint import describe_source, load_checkpoint

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

        from .ops.config import use_plugin_ops

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
        from .bench import choose_backend, check_model_file
        from .tensorrt import manifest as manifest_module

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
            from .bench.trtexec_backend import locate

            self._trtexec_path, self._version = locate(trtexec)

    def describe(self):
        record = super().describe()
        precision = ((self.manifest or {}).get("precision") or {}).get("precision")
        record.update({"precision": precision, "manifest": bool(self.manifest)})
        return record

    def chunks(self, count):
        if self.batch is None:
            # without a manifest the batch the engine takes is unknown: one sample per run is always valid
            size = min(self.max_batch, DYNAMIC_CHUNK) if self.max_batch else 1
            return [(start, min(start + size, count)) for start in range(0, count, size)]
        return super().chunks(count)

    # TensorRT Python, through Polygraphy's runner. UNVERIFIED: no TensorRT or GPU here.
    def _open_tensorrt(self):
        from .tensorrt import manifest as manifest_module
        from .tensorrt import plugin_library
        from .tensorrt.api import deserialize_engine, import_tensorrt, load_plugins, tensorrt_version
        from .tensorrt.cuda import open_cuda

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
        from .bench.trtexec_backend import run_for_export
        from .tensorrt import plugin_library
        from .trtexec import flags

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
    from .trtexec.exports import _load_records

    outputs = {}
    for record in _load_records(text, "--exportOutput"):
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
    from .bench import check_model_file

    kind = check_model_file(path)
    if kind == "onnx":
        return OnnxSide(path)
    return EngineSide(path, backend=backend, plugins=plugins, trtexec=trtexec,
                      allow_engine_host_code=allow_engine_host_code, timeout=timeout)


# ----------------------------------------------------------------------------------------------- comparing


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


def _common_outputs(out_a, out_b, path_a, path_b):
    """Both sides' outputs under shared names: by name, or the single output of each under B's name."""
    if len(out_a) == 1 and len(out_b) == 1:
        name = next(iter(out_b))
        return collections.OrderedDict([(name, next(iter(out_a.values())))]), out_b
    missing = [name for name in out_b if name not in out_a]
    if missing:
        raise EdgeAttnError("{} has no output named {} (its outputs: {})".format(
            path_a, ", ".join(missing), ", ".join(out_a)))
    return collections.OrderedDict((name, out_a[name]) for name in out_b), out_b


def _polygraphy_compare(out_a, out_b, atol, rtol):
    """Per output: Polygraphy's element-wise verdict and error statistics (B is the reference)."""
    with _quiet_polygraphy():
        from polygraphy import comparator

        make = getattr(comparator, "SimpleCompareFunc", None) or comparator.CompareFunc.simple
        compare_func = make(atol=atol, rtol=rtol, check_error_stat="elemwise")
        first = comparator.IterationResult(outputs=out_a, runner_name="A")
        second = comparator.IterationResult(outputs=out_b, runner_name="B")
        results = compare_func(first, second)
    report = collections.OrderedDict()
    for name in out_b:
        result = results.get(name)
        if result is None:
            raise EdgeAttnError("Polygraphy did not compare output {!r} (shapes {} vs {})".format(
                name, out_a[name].shape, out_b[name].shape))
        report[name] = {"shape": list(out_b[name].shape), "passed": bool(result),
                        "max_abs": _number(result.max_absdiff), "max_rel": _number(result.max_reldiff),
                        "mean_abs": _number(result.mean_absdiff), "mean_rel": _number(result.mean_reldiff),
                        "median_abs": _number(getattr(result, "median_absdiff", None))}
    return report


def _number(value):
    if value is None:
        return None
    value = float(value)
    return value if np.isfinite(value) else None


def _agreement(a, b):
    """Cosine similarity per sample, and top-1 / top-5 agreement for (N, C >= 5) classifier outputs."""
    a64 = a.reshape(len(a), -1).astype(np.float64)
    b64 = b.reshape(len(b), -1).astype(np.float64)
    norms = np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cosine = np.where(norms > 0, np.sum(a64 * b64, axis=1) / norms, np.where(
            np.all(a64 == b64, axis=1), 1.0, 0.0))
    record = {"cosine_min": _number(np.min(cosine)), "cosine_mean": _number(np.mean(cosine)), "top1": None,
              "top5": None}
    if a.ndim == 2 and a.shape[1] >= 5:
        record["top1"] = float(np.mean(np.argmax(a, axis=1) == np.argmax(b, axis=1)))
        top_a = np.argsort(-a, axis=1, kind="stable")[:, :5]
        top_b = np.argsort(-b, axis=1, kind="stable")[:, :5]
        overlap = [len(set(x) & set(y)) / 5.0 for x, y in zip(top_a.tolist(), top_b.tolist())]
        record["top5"] = float(np.mean(overlap))
    return record


def compare_models(a, b, arch=None, checkpoint_key=None, count=None, images=None, seed=0, atol=DEFAULT_ATOL,
                   rtol=DEFAULT_RTOL, min_top1=None, backend="auto", plugins=None, trtexec=None,
                   trust_pickle=False, allow_engine_host_code=False, timeout=None, progress=None):
    """Run ``a`` and ``b`` on the same inputs and compare (B is the reference); returns the report dict (schema
    ``edgeattn.compare/1``). Bad input raises :class:`EdgeAttnError`; a failed comparison is ``passed: False``."""
    if atol < 0 or rtol < 0:
        raise EdgeAttnError("--atol and --rtol must be >= 0")
    if min_top1 is not None and not 0.0 <= min_top1 <= 1.0:
        raise EdgeAttnError("--min-top1 is a fraction between 0 and 1, got {}".format(min_top1))
    if backend not in ENGINE_BACKENDS:
        raise EdgeAttnError("unknown engine backend {!r} (choose {})".format(backend, ", ".join(ENGINE_BACKENDS)))
    _polygraphy("edgeattn compare")
    say = progress or (lambda message: None)
    sides = []
    try:
        for path in (a, b):
            sides.append(open_side(path, arch=arch, checkpoint_key=checkpoint_key, trust_pickle=trust_pickle,
                                   backend=backend, plugins=plugins, trtexec=trtexec,
                                   allow_engine_host_code=allow_engine_host_code, timeout=timeout))
        chw = _input_size(sides)
        batch, described = make_inputs(chw, count=count, images=images, seed=seed)
        outputs = []
        for label, side in zip("AB", sides):
            say("running {} ({}, {}) on {} input(s)".format(label, side.path, side.backend, len(batch)))
            outputs.append(side.run(batch))
    finally:
        for side in sides:
            side.close()
    out_a, out_b = _common_outputs(outputs[0], outputs[1], a, b)
    for name in out_b:
        if out_a[name].shape != out_b[name].shape:
            raise EdgeAttnError("output {} has shape {} in {} but {} in {}".format(
                name, list(out_a[name].shape), a, list(out_b[name].shape), b))
    per_output = _polygraphy_compare(out_a, out_b, atol, rtol)
    primary = next(iter(out_b))
    agreement = _agreement(out_a[primary], out_b[primary])
    failures = ["output {}: outside --atol {:g} and --rtol {:g} (max abs {:.3g}, max rel {:.3g})".format(
        name, atol, rtol, entry["max_abs"] or float("nan"), entry["max_rel"] or float("nan"))
        for name, entry in per_output.items() if not entry["passed"]]
    if min_top1 is not None:
        if agreement["top1"] is None:
            raise EdgeAttnError("--min-top1 needs a classifier output (N x C, C >= 5); {} is {}".format(
                primary, list(out_b[primary].shape)))
        if agreement["top1"] < min_top1:
            failures.append("top-1 agreement {:.4f} < --min-top1 {:g}".format(agreement["top1"], min_top1))
    return {
        "schema": SCHEMA,
        "a": sides[0].describe(),
        "b": sides[1].describe(),
        "reference": "b",
        "inputs": dict(described, shape=[int(d) for d in batch.shape]),
        "tolerances": {"atol": atol, "rtol": rtol, "check": "polygraphy elemwise (fails where both exceeded)",
                       "min_top1": min_top1},
        "outputs": per_output,
        "primary_output": primary,
        "cosine_min": agreement["cosine_min"],
        "cosine_mean": agreement["cosine_mean"],
        "top1_agreement": agreement["top1"],
        "top5_agreement": agreement["top5"],
        "passed": not failures,
        "failures": failures,
    }


def format_report(report):
    """The CLI's summary lines."""

    def side(record):
        text = "{} ({}, {})".format(record["path"], record["kind"], record["backend"])
        if record.get("precision"):
            text += " {}".format(record["precision"])
        if record.get("arch"):
            text += " {}".format(record["arch"])
        return text

    inputs = report["inputs"]
    if inputs["source"] == "random":
        where = "{} random input(s), seed {}".format(inputs["count"], inputs["seed"])
    else:
        where = "{} picture(s) from {}".format(inputs["count"], inputs.get("directory") or "scikit-image")
    lines = ["compared A {}".format(side(report["a"])),
             "  with   B {} (reference)".format(side(report["b"])),
             "  inputs   {} ({})".format(where, "x".join(str(d) for d in inputs["shape"]))]
    for name, entry in report["outputs"].items():
        lines.append("  {:<8} max abs {}, max rel {}, mean abs {} ({})".format(
            name, _fmt(entry["max_abs"]), _fmt(entry["max_rel"]), _fmt(entry["mean_abs"]),
            "ok" if entry["passed"] else "FAILED"))
    lines.append("  cosine   min {}, mean {}".format(_fmt6(report["cosine_min"]), _fmt6(report["cosine_mean"])))
    if report["top1_agreement"] is not None:
        lines.append("  top-1    {:.1%} agreement, top-5 overlap {:.1%}".format(report["top1_agreement"],
                                                                              report["top5_agreement"]))
    tolerances = report["tolerances"]
    if report["passed"]:
        lines.append("  result   PASSED (atol {:g}, rtol {:g}{})".format(
            tolerances["atol"], tolerances["rtol"],
            ", min top-1 {:g}".format(tolerances["min_top1"]) if tolerances["min_top1"] is not None else ""))
    else:
        lines.append("  result   FAILED: {}".format("; ".join(report["failures"])))
    return lines


def _fmt(value):
    return "n/a" if value is None else "{:.3g}".format(value)


def _fmt6(value):
    return "n/a (not finite)" if value is None else "{:.6f}".format(value)


#: ``edgeattn build --check``: element-wise tolerances per engine precision (TensorRT FP32 may run matrix
#: products in TF32, FP16 engines keep only the normalisations in FP32)
CHECK_TOLERANCES = {"fp32": (1e-2, 1e-2), "fp16": (5e-2, 5e-2)}
CHECK_INPUTS = 8


def check_engine(engine_path, onnx_path, precision="fp32", backend="auto", plugins=None, trtexec=None,
                 progress=None):
    """``edgeattn build --check``: compare a just-built engine (A) with its ONNX file on ONNX Runtime CPU (B) on
    :data:`CHECK_INPUTS` seeded inputs, and record the outcome under ``"check"`` in the engine's manifest.
    Returns the compare report; ``report["passed"]`` says whether the engine agrees within
    :data:`CHECK_TOLERANCES`."""
    from ._io import outputs_now, write_json
    from .tensorrt import manifest as manifest_module

    atol, rtol = CHECK_TOLERANCES.get(precision, CHECK_TOLERANCES["fp32"])
    report = compare_models(engine_path, onnx_path, count=CHECK_INPUTS, atol=atol, rtol=rtol, backend=backend,
                            plugins=plugins, trtexec=trtexec, progress=progress)
    manifest = manifest_module.read_manifest(engine_path) or {}
    primary = report["outputs"][report["primary_output"]]
    manifest["check"] = {
        "schema": SCHEMA, "against": report["b"]["path"], "reference_backend": report["b"]["backend"],
        "engine_backend": report["a"]["backend"], "inputs": report["inputs"], "tolerances": report["tolerances"],
        "passed": report["passed"], "failures": report["failures"], "output": report["primary_output"],
        "max_abs": primary["max_abs"], "max_rel": primary["max_rel"], "mean_abs": primary["mean_abs"],
        "cosine_min": report["cosine_min"], "top1_agreement": report["top1_agreement"],
        "top5_agreement": report["top5_agreement"]}
    with outputs_now():  # recorded even when the check fails
        write_json(manifest_module.manifest_path(engine_path), manifest)
    return report


def format_check(report):
    """The lines ``edgeattn build --check`` adds to the build summary."""
    primary = report["outputs"][report["primary_output"]]
    line = "  check      {} vs {} on ONNX Runtime CPU ({} inputs): max abs {}, max rel {}, cosine min {}".format(
        "PASSED" if report["passed"] else "FAILED", os.path.basename(report["b"]["path"]),
        report["inputs"]["count"], _fmt(primary["max_abs"]), _fmt(primary["max_rel"]), _fmt6(report["cosine_min"]))
    lines = [line]
    if report["top1_agreement"] is not None:
        lines.append("             top-1 {:.1%}, top-5 overlap {:.1%} (atol {:g}, rtol {:g})".format(
            report["top1_agreement"], report["top5_agreement"], report["tolerances"]["atol"],
            report["tolerances"]["rtol"]))
    lines.extend("             {}".format(failure) for failure in report["failures"])
    return lines
