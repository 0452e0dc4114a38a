"""``export_onnx``: PyTorch model -> ONNX file with TensorRT-ready custom attention nodes, checked against PyTorch.

Why one module: the pipeline's steps hand one temporary file and one model from step to step, and the
all-or-nothing rule (no file unless every check passed) holds only if they run in one place.

Pipeline (into a temporary file beside the output, renamed onto it only after all checks pass, so no failure leaves
a file behind):

1. a random batch (seeded) goes through the model in PyTorch (reference cores): this is the parity reference and
   rejects a resolution the model cannot take before any export work;
2. ``torch.onnx.export(dynamo=False)`` with the symbolics of :mod:`edgeattn.export.symbolics` while
   ``use_plugin_ops(plugins)`` routes the attention cores through ``torch.ops.edgeattn.*`` (one ``trt.plugins``
   node each) or through standard ops (``plugins=False``);
3. every custom node is validated against its op schema (:func:`edgeattn.export.contract.validate_model`) and
   the model-local functions (:func:`edgeattn.export.functions.build_functions`), the IR version they need and
   the ``edgeattn.*`` metadata are appended to the exported file (no re-serialization of the weights);
4. checks (``check=True``): ``onnx.checker`` with ``full_check`` (strict shape and type inference included) and
   ONNX Runtime CPU vs PyTorch: relative error = max|ort - torch| / max|torch| over the logits must be <= 1e-4
   (FP32);
5. target "ort" writes that model; target "tensorrt" writes the exported bytes with the metadata but without the
   functions, and with the IR version the exporter chose.
"""
import collections
import io
import os
import time
import warnings

from .._io import atomic_path
from .._version import __version__
from ..errors import EdgeAttnError, MissingDependencyError
from . import contract
from .contract import MIN_OPSET

DEFAULT_OPSET = 17
#: the TorchScript exporter's highest opset (torch.onnx._constants.ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET)
MAX_OPSET = 20
TARGETS = ("ort", "tensorrt")
PARITY_RTOL = 1e-4
INPUT_NAME = "images"
OUTPUT_NAME = "logits"


class ExportSummary(object):
    """What an export produced; ``to_dict()`` is JSON-able, ``lines()`` is the one-screen CLI summary."""

    def __init__(self, **fields):
        self.path = fields["path"]
        self.arch = fields.get("arch")
        self.target = fields["target"]
        self.plugins = fields["plugins"]
        self.opset = fields["opset"]
        self.ir_version = fields["ir_version"]
        self.img_size = fields["img_size"]
        self.batch = fields["batch"]
        self.inputs = fields["inputs"]
        self.outputs = fields["outputs"]
        self.custom_ops = fields["custom_ops"]
        self.functions = fields["functions"]
        self.parity = fields.get("parity")
        self.checks = fields.get("checks", [])
        self.size_bytes = fields["size_bytes"]
        self.export_s = fields["export_s"]
        self.check_s = fields["check_s"]
        self.total_s = fields["total_s"]

    def to_dict(self):
        return dict(self.__dict__)

    def lines(self):
        def io_text(entries):
            return ", ".join("{} {} {}".format(e["name"], e["dtype"], _shape_text(e["shape"])) for e in entries)

        custom = ", ".join("{} x{}".format(op, n) for op, n in sorted(self.custom_ops.items())) or "none"
        variant = {"ort": "ort (custom ops + model-local functions: runs in ONNX Runtime as is)",
                   "tensorrt": "tensorrt (custom ops, no local functions: for TensorRT with the edgeattn plugins)"}
        lines = [
            "exported {} -> {}".format(self.arch or "model", self.path),
            "  target    {}".format(variant[self.target] if self.custom_ops else self.target + " (standard ops only)"),
            "  opset     {} (IR {}), batch {}, resolution {}".format(self.opset, self.ir_version, self.batch,
                                                                  self.img_size),
            "  inputs    {}".format(io_text(self.inputs)),
            "  outputs   {}".format(io_text(self.outputs)),
            "  custom    {}".format(custom),
        ]
        if self.parity:
            p = self.parity
            lines.append("  parity    ORT CPU vs PyTorch FP32 (batch {}): max abs {:.3g}, max rel {:.3g} "
                         "(limit {:g}) ok".format(p["batch"], p["max_abs"], p["max_rel"], p["rel_limit"]))
        else:
            lines.append("  parity    not checked (--no-check)")
        if self.checks:
            lines.append("  checks    {}".format(", ".join(self.checks)))
        lines.append("  size      {}".format(_size_text(self.size_bytes)))
        lines.append("  time      export {:.1f} s, checks {:.1f} s, total {:.1f} s".format(
            self.export_s, self.check_s, self.total_s))
        return lines


def _shape_text(shape):
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _size_text(size):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return "{:.1f} {}".format(size, unit) if unit != "B" else "{} B".format(size)
        size /= 1024.0
    return str(size)


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def check_options(opset, target, batch, img_size):
    """Validate export options; raise EdgeAttnError with one line for each kind of bad value."""
    if isinstance(opset, bool) or not isinstance(opset, int):
        raise EdgeAttnError("opset must be an integer, got {!r}".format(opset))
    if opset < MIN_OPSET:
        raise EdgeAttnError("opset {} is too old: the edgeattn custom ops and their decompositions need opset >= {} "
                            "(TensorRT 8.2 on the Jetson Nano parses 13)".format(opset, MIN_OPSET))
    if opset > MAX_OPSET:
        raise EdgeAttnError("opset {} is newer than the TorchScript ONNX exporter supports (max {})".format(
            opset, MAX_OPSET))
    if target not in TARGETS:
        raise EdgeAttnError("unknown target {!r}; choose one of {}".format(target, ", ".join(TARGETS)))
    if batch != "dynamic" and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise EdgeAttnError("batch must be a positive integer or 'dynamic', got {!r}".format(batch))
    if isinstance(img_size, bool) or not isinstance(img_size, int) or img_size < 1:
        raise EdgeAttnError("resolution must be a positive integer, got {!r}".format(img_size))


def _import(name, needed_for):
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        raise MissingDependencyError(name, needed_for, "install the export extra: pip install 'edgeattn[export]'")


def _random_images(batch, img_size, seed):
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, 3, img_size, img_size, generator=generator)


def torch_to_onnx(model, images, destination, *, opset, plugins, dynamic_batch):
    """Trace ``model`` on ``images`` into a serialized ModelProto (no functions attached, not checked) written to
    ``destination``: a file path or a binary file object."""
    import torch

    from ..ops.config import use_plugin_ops
    from .symbolics import registered_symbolics

    dynamic_axes = {INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}} if dynamic_batch else None
    try:
        with torch.no_grad(), use_plugin_ops(plugins), registered_symbolics(opset), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice and tracer warnings
            torch.onnx.export(model, (images,), destination, dynamo=False, opset_version=opset,
                              input_names=[INPUT_NAME], output_names=[OUTPUT_NAME], dynamic_axes=dynamic_axes,
                              do_constant_folding=True)
    except (EdgeAttnError, OSError):  # an OSError is writing the destination (a full disk): the caller names it
        raise
    except Exception as error:  # noqa: BLE001 - torch.onnx raises many types; the user gets one line
        raise EdgeAttnError("ONNX export at opset {} failed: {}".format(opset, _first_line(error)))


def torch_to_onnx_bytes(model, images, *, opset, plugins, dynamic_batch):
    """:func:`torch_to_onnx` into memory: the serialized ModelProto's bytes."""
    buffer = io.BytesIO()
    torch_to_onnx(model, images, buffer, opset=opset, plugins=plugins, dynamic_batch=dynamic_batch)
    return buffer.getvalue()


def _addendum(functions, ir_version, metadata):
    """Serialized ModelProto fields to append to an exported model's bytes.

    Protobuf merges concatenated messages: repeated fields (functions, metadata_props) are appended and a scalar
    field (ir_version) takes the last value. Appending avoids re-serializing the weights, which for a 300 MB model
    costs seconds.
    """
    import onnx

    extra = onnx.ModelProto()
    extra.functions.extend(functions)
    if ir_version is not None:
        extra.ir_version = ir_version
    for key, value in metadata.items():
        prop = extra.metadata_props.add()
        prop.key, prop.value = key, value
    return extra.SerializeToString()


def _pin_output_dims(model_proto, shape):
    """With a dynamic batch the TorchScript exporter leaves other output dims symbolic (e.g. the class count as
    ``Gemmlogits_dim_1``); give them the value PyTorch produced. Returns whether anything changed."""
    changed = False
    dims = model_proto.graph.output[0].type.tensor_type.shape.dim
    for index, (dim, size) in enumerate(zip(dims, shape)):
        if index > 0 and not dim.HasField("dim_value"):
            dim.dim_value = int(size)
            changed = True
    return changed


def _value_infos(values):
    import onnx

    result = []
    for value in values:
        tensor = value.type.tensor_type
        shape = [d.dim_param if d.HasField("dim_param") else (d.dim_value if d.HasField("dim_value") else "?")
                 for d in tensor.shape.dim]
        result.append({"name": value.name, "dtype": onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).name,
                       "shape": shape})
    return result


def _metadata(model_proto, arch, img_size, plugins):
    entries = {"edgeattn.version": __version__, "edgeattn.img_size": str(img_size),
               "edgeattn.plugins": "1" if plugins else "0"}
    if arch:
        entries["edgeattn.arch"] = arch
    existing = {prop.key for prop in model_proto.metadata_props}
    return {key: value for key, value in entries.items() if key not in existing}


def ort_session(model, threads=None):
    """An ONNX Runtime CPU session of ``model`` (bytes or a path) with all graph optimisations (the configuration
    the checks and the benchmark use)."""
    ort = _import("onnxruntime", "running the exported model on ONNX Runtime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = int(threads)
    try:
        return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 - an ORT load failure of our own output is reported in one line
        raise EdgeAttnError("ONNX Runtime cannot load the exported model: {}".format(_first_line(error)))


def check_model(model, images, expected, *, rel_limit=None):
    """onnx.checker with full_check (which includes strict shape and type inference, model-local functions
    included) and ONNX Runtime CPU parity against ``expected`` (the PyTorch output for ``images``) of ``model``:
    serialized ModelProto bytes or the path of an ONNX file. Returns (parity dict, list of checks done)."""
    import numpy as np
    import onnx

    rel_limit = PARITY_RTOL if rel_limit is None else rel_limit
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as error:  # noqa: BLE001
        raise EdgeAttnError("onnx.checker rejected the exported model: {}".format(_first_line(error)))
    session = ort_session(model)
    got = session.run(None, {INPUT_NAME: images.numpy()})[0]
    if tuple(got.shape) != tuple(expected.shape):
        raise EdgeAttnError("ONNX Runtime returns shape {}, PyTorch {}".format(tuple(got.shape),
                                                                           tuple(expected.shape)))
    reference = expected.numpy().astype(np.float64)
    max_abs = float(np.max(np.abs(got.astype(np.float64) - reference)))
    scale = float(np.max(np.abs(reference)))
    max_rel = max_abs / scale if scale > 0 else max_abs
    parity = {"batch": int(images.shape[0]), "max_abs": max_abs, "max_rel": max_rel, "rel_limit": rel_limit,
              "definition": "max|ort - torch| / max|torch| over the logits"}
    if not np.all(np.isfinite(got)) or not max_rel <= rel_limit:
        raise EdgeAttnError("ONNX Runtime output differs from PyTorch: max abs {:.3g}, max rel {:.3g} > {:g} "
                            "(FP32 parity check)".format(max_abs, max_rel, rel_limit))
    return parity, ["onnx.checker (full_check: strict shape/type inference)", "ORT CPU parity"]


def export_onnx(model, path, *, img_size, batch=1, opset=DEFAULT_OPSET, plugins=True, target="ort", check=True,
                seed=0, progress=None):
    """Export ``model`` (an edgeattn model, eval mode) to ``path`` and return an :class:`ExportSummary`.

    ``batch``: a positive int (static) or "dynamic" (the batch axis is named ``batch``). ``plugins``: emit the
    custom ``trt.plugins`` nodes (True) or standard ops only. ``target``: "ort" keeps the model-local functions,
    "tensorrt" drops them (TensorRT 9.0-10.6 would inline them instead of calling the plugin). ``check``: run
    onnx.checker, shape inference and ORT CPU parity (<= 1e-4 relative, FP32) before the file is published.
    Raises EdgeAttnError for every user-caused failure; no file is left at ``path`` on failure.
    ``progress(message)`` is told each step.
    """
    say = progress or (lambda message: None)
    started = time.perf_counter()
    check_options(opset, target, batch, img_size)
    _import("torch", "edgeattn export")
    onnx = _import("onnx", "edgeattn export")
    from ..ops.config import use_plugin_ops
    import torch

    model = model.eval()
    arch = getattr(model, "edgeattn_arch", None)
    dynamic = batch == "dynamic"
    trace_batch = 2 if dynamic else batch
    images = _random_images(trace_batch, img_size, seed)
    say("PyTorch reference forward")
    with torch.no_grad(), use_plugin_ops(False):
        expected = model(images)  # also rejects a resolution the model cannot take before any export work

    with atomic_path(path) as traced_path:
        say("tracing to ONNX (opset {})".format(opset))
        # Traced straight into the output's temporary file and checked from there: the serialized model is never
        # held in Python as well as in the parse, the join and ONNX Runtime (measured, softpp_large: peak RSS
        # of the trace 1.88 -> 1.51 GB, of the check lower by the model's size)
        torch_to_onnx(model, images, traced_path, opset=opset, plugins=plugins, dynamic_batch=dynamic)
        model_proto = onnx.load(traced_path)
        if dynamic and _pin_output_dims(model_proto, expected.shape):
            with open(traced_path, "wb") as handle:
                handle.write(model_proto.SerializeToString())
        count = contract.validate_model(model_proto)
        if not plugins and count:
            raise EdgeAttnError("export without plugins still produced {} custom node(s)".format(count))
        from .functions import build_functions

        # The functions are built for the tensorrt target too: the ORT parity check runs on them.
        say("model-local functions for {} custom node(s)".format(count))
        functions = build_functions(model_proto)
        exported_ir = int(model_proto.ir_version)
        metadata = _metadata(model_proto, arch, img_size, plugins)
        custom_ops = collections.Counter(node.op_type for node in contract.custom_nodes(model_proto.graph))
        inputs, outputs = _value_infos(model_proto.graph.input), _value_infos(model_proto.graph.output)
        del model_proto  # a parse holds a copy of the weights
        traced_length = os.path.getsize(traced_path)
        with open(traced_path, "ab") as handle:
            handle.write(_addendum(functions, max(exported_ir, 8) if functions else None, metadata))
        exported = time.perf_counter()

        parity, checks = None, []
        if check:
            check_images = images
            if dynamic:  # check at another batch size than the traced one: the batch axis must really be free
                check_images = _random_images(trace_batch + 1, img_size, seed + 1)
                with torch.no_grad(), use_plugin_ops(False):
                    expected = model(check_images)
            say("onnx.checker and ONNX Runtime parity")
            parity, checks = check_model(traced_path, check_images, expected)
        checked = time.perf_counter()

        ir_version = max(exported_ir, 8) if functions else exported_ir
        if target == "tensorrt":
            # Without functions the file needs only the IR version the exporter chose (7 at opset 13, what the
            # TensorRT 8.2 parser on the Nano was built against); the functions alone had raised it to 8.
            ir_version = exported_ir
            os.truncate(traced_path, traced_length)
            with open(traced_path, "ab") as handle:
                handle.write(_addendum([], None, metadata))
        size_bytes = os.path.getsize(traced_path)

    return ExportSummary(
        path=os.fspath(path), arch=arch, target=target, plugins=plugins, opset=opset,
        ir_version=ir_version, img_size=img_size, batch=batch, inputs=inputs, outputs=outputs,
        custom_ops=dict(custom_ops),
        functions=[] if target == "tensorrt" else ["{}::{}".format(f.domain, f.name) for f in functions],
        parity=parity, checks=checks, size_bytes=size_bytes, export_s=exported - started,
        check_s=checked - exported, total_s=time.perf_counter() - started)


def load_torch_model(model_path=None, arch=None, img_size=None, trust_pickle=False, seed=0, checkpoint_key=None):
    """The model to export and its resolution: a checkpoint (``model_path``; ``arch`` names the architecture of a
    state dict, ``checkpoint_key`` its wrapper entry), or ``arch`` with random weights (seeded). ``img_size``
    None means the checkpoint's own resolution (a registry model's default: 224, 384 for the ViT-B/16-384s)."""
    _import("torch", "edgeattn export")
    import torch

    from ..models import create_model, is_model

    if model_path is None:
        if not arch:
            raise EdgeAttnError("give a checkpoint file, or --arch NAME for a registry model with random weights")
        if not is_model(arch):
            create_model(arch)  # raises the registry's "unknown model architecture" line with suggestions
        torch.manual_seed(seed)
        model = create_model(arch, img_size=img_size)  # None: the architecture's default resolution
        return model.eval(), model.edgeattn_config["img_size"]

    from ..models.checkpoint import load_checkpoint

    model = load_checkpoint(model_path, trust_pickle=trust_pickle, arch=arch, key=checkpoint_key)
    stored_arch = getattr(model, "edgeattn_arch", None)
    if arch and stored_arch and arch != stored_arch:
        raise EdgeAttnError("{} holds a {} model, not {} (drop --arch or pick the right file)".format(
            model_path, stored_arch, arch))
    config = dict(getattr(model, "edgeattn_config", None) or {})
    stored_size = config.get("img_size")
    if img_size is None:
        return model, stored_size or 224
    if stored_arch and stored_size and img_size != stored_size:
        # Rebuild the architecture for the requested resolution (layouts that follow the resolution, such as
        # CSWin's window sides, change with it) and move the trained weights over. When the weights do not fit
        # the rebuilt model (a position embedding sized for the stored resolution), the checkpoint's own model is
        # exported and its forward decides whether it takes the new resolution (ViTs resize the embedding).
        config["img_size"] = img_size
        # the stored weights replace every parameter, or the rebuild is dropped
        rebuilt = create_model(stored_arch, initialise_weights=False, **config)
        stored = model.state_dict()
        target = rebuilt.state_dict()
        if set(stored) == set(target) and all(stored[k].shape == target[k].shape for k in stored):
            rebuilt.load_state_dict(stored, strict=True)
            rebuilt.edgeattn_source = getattr(model, "edgeattn_source", None)
            return rebuilt.eval(), img_size
    return model, img_size
