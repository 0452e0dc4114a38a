"""ONNX export with TensorRT-ready custom attention ops (``edgeattn export`` / ``edgeattn inspect``).

::

    from edgeattn.export import export_onnx, load_torch_model
    model, size = load_torch_model(arch="cswin_t24181_elfatt")
    summary = export_onnx(model, "elfatt.onnx", img_size=size)           # ORT variant, checked vs PyTorch
    export_onnx(model, "elfatt.trt.onnx", img_size=size, target="tensorrt")

Modules: :mod:`.exporter` (the pipeline), :mod:`.symbolics` (custom op -> one ``trt.plugins`` node),
:mod:`.contract` (nodes vs export/schemas), :mod:`.functions` (model-local FunctionProto decompositions),
:mod:`.inspection` (describe an ONNX file). The file contract is documented in export/README.md.

Names are resolved lazily so that importing this package does not import torch or onnx.
"""
_LAZY = {
    "export_onnx": "exporter",
    "load_torch_model": "exporter",
    "ExportSummary": "exporter",
    "DEFAULT_OPSET": "exporter",
    "TARGETS": "exporter",
    "PARITY_RTOL": "exporter",
    "describe_onnx": "inspection",
}


def __getattr__(name):
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError("module 'edgeattn.export' has no attribute {!r}".format(name))
    import importlib

    module = importlib.import_module("." + module_name, __name__)
    return getattr(module, name)


__all__ = sorted(_LAZY)
