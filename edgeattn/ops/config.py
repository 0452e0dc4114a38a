"""Switch between the reference cores and the ``torch.ops.edgeattn.*`` custom ops inside the nn.Modules.

With the switch off (default) every module runs the reference functional core made of standard torch ops, which
exports to plain ONNX (``edgeattn export --no-plugins``). With it on, the four schema ops (blockify, EFFATT,
LiteMLA, SOFT kernel) go through their custom ops, which the exporter maps to ``trt.plugins`` nodes::

    from edgeattn.ops.config import use_plugin_ops
    with use_plugin_ops():
        torch.onnx.export(model, ...)

The flag is process-wide (export is single-threaded); the context manager restores the previous value.
"""
import contextlib

_STATE = {"enabled": False}


def plugin_ops_enabled():
    """Whether nn.Modules currently call the custom ops instead of the reference cores."""
    return _STATE["enabled"]


@contextlib.contextmanager
def use_plugin_ops(enabled=True):
    """Within the block, nn.Modules call ``torch.ops.edgeattn.*`` (``enabled=True``) or the reference cores."""
    previous = _STATE["enabled"]
    _STATE["enabled"] = bool(enabled)
    try:
        yield
    finally:
        _STATE["enabled"] = previous
