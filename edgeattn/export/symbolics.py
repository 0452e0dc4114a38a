"""TorchScript-exporter symbolics: each ``torch.ops.edgeattn.*`` custom op becomes ONE ``trt.plugins`` node.

The node's op_type, domain and attributes come from the op schema (``contract.node_attributes``: validated,
defaults filled, ``plugin_version``/``plugin_namespace`` added); attribute types follow the schema through
TorchScript's ``name_<i|f|s>`` suffixes, so an int is an ONNX INT, a float list ONNX FLOATS, and so on.

:func:`registered_symbolics` registers them (and, at opset 13, a symbolic for
``aten::scaled_dot_product_attention``, whose stock symbolic starts at opset 14 although it only needs opset-13
ops) for the duration of one export and removes them afterwards.
"""
import contextlib

from ..errors import EdgeAttnError
from . import contract

def _emit(g, op_type, inputs, attributes, output_like, output_sizes=None):
    resolved = contract.node_attributes(op_type, attributes)
    types = contract.attribute_types(op_type)
    kwargs = {"{}_{}".format(name, contract.TORCHSCRIPT_SUFFIX[types[name]]): value
              for name, value in resolved.items()}
    domain = contract.custom_op_types()[op_type].domain
    node_output = g.op("{}::{}".format(domain, op_type), *inputs, **kwargs)
    out_type = output_like.type()
    if output_sizes is not None:
        out_type = out_type.with_sizes(output_sizes)
    node_output.setType(out_type)
    return node_output


def _const(value, descriptor):
    """A constant argument of a custom op as a Python value (they are attribute values, fixed at export)."""
    from torch.onnx import symbolic_helper

    if symbolic_helper._is_none(value):
        return None
    if descriptor == "fs":
        node = value.node()
        if node.kind() == "prim::ListConstruct":
            return [float(symbolic_helper._maybe_get_const(v, "f")) for v in node.inputs()]
    parsed = symbolic_helper._maybe_get_const(value, descriptor)
    if symbolic_helper._is_value(parsed):
        raise EdgeAttnError("a custom-op attribute is not a constant at export time: {}".format(value))
    if descriptor == "fs":
        return [float(v) for v in parsed]
    return parsed


def blockify_attention_symbolic(g, q, k, v, lepe_weight, lepe_bias, num_heads, height, width, window_size, scale,
                                padding):
    from torch.onnx import symbolic_helper

    inputs = [q, k, v]
    has_lepe = not symbolic_helper._is_none(lepe_weight)
    if has_lepe:
        if symbolic_helper._is_none(lepe_bias):
            # The schema takes the bias whenever it takes the weight: a conv without bias gets zeros.
            channels = g.op("Slice", g.op("Shape", lepe_weight), g.op("Constant", value_t=_long([0])),
                            g.op("Constant", value_t=_long([1])))
            lepe_bias = g.op("ConstantOfShape", channels, value_t=_float_zero())
        inputs += [lepe_weight, lepe_bias]
    elif not symbolic_helper._is_none(lepe_bias):
        raise EdgeAttnError("blockify attention got lepe_bias without lepe_weight")
    attributes = {
        "num_heads": _const(num_heads, "i"), "height": _const(height, "i"), "width": _const(width, "i"),
        "window_size": _const(window_size, "i"), "scale": _const(scale, "f"), "has_lepe": int(has_lepe),
        "padding": _const(padding, "s"),
    }
    return _emit(g, "EdgeAttnBlockifyAttention", inputs, attributes, q)


def efficient_attention_symbolic(g, q, k, v, num_heads):
    return _emit(g, "EdgeAttnEfficientAttention", [q, k, v], {"num_heads": _const(num_heads, "i")}, q)


def lite_mla_symbolic(g, qkv, head_dim, kernel, eps, qt_alpha, qt_beta, qt_gamma):
    attributes = {"head_dim": _const(head_dim, "i"), "kernel": _const(kernel, "s"), "eps": _const(eps, "f"),
                  "qt_alpha": _const(qt_alpha, "fs"), "qt_beta": _const(qt_beta, "fs"),
                  "qt_gamma": _const(qt_gamma, "fs")}
    sizes = None
    input_sizes = qkv.type().sizes() if qkv.type().kind() == "TensorType" else None
    if input_sizes is not None and len(input_sizes) == 4 and input_sizes[1] is not None:
        sizes = [input_sizes[0], input_sizes[1] // 3, input_sizes[2], input_sizes[3]]
    return _emit(g, "EdgeAttnLiteMLA", [qkv], attributes, qkv, output_sizes=sizes)


def soft_kernel_attention_symbolic(g, q, landmarks, v, num_heads, newton_iters, symmetric_norm):
    attributes = {"num_heads": _const(num_heads, "i"), "newton_iters": _const(newton_iters, "i"),
                  "symmetric_norm": int(_const(symmetric_norm, "i"))}
    return _emit(g, "EdgeAttnSoftKernelAttention", [q, landmarks, v], attributes, q)


def _long(values):
    import torch

    return torch.tensor(values, dtype=torch.int64)


def _float_zero():
    import torch

    return torch.zeros(1, dtype=torch.float32)


#: torch custom op -> symbolic; the schema op_type each one emits is in the function
CUSTOM_OP_SYMBOLICS = {
    "edgeattn::blockify_attention": blockify_attention_symbolic,
    "edgeattn::efficient_attention": efficient_attention_symbolic,
    "edgeattn::lite_mla": lite_mla_symbolic,
    "edgeattn::soft_kernel_attention": soft_kernel_attention_symbolic,
}


def _sdpa_opset13():
    """The stock opset-14 SDPA symbolic: it emits Transpose/Mul/Sqrt/MatMul/Softmax/Where/Shape only."""
    from torch.onnx._internal.torchscript_exporter import symbolic_opset14

    return symbolic_opset14.scaled_dot_product_attention


@contextlib.contextmanager
def registered_symbolics(opset):
    """Register the custom-op symbolics for ``opset`` while the block runs (the registry is process-wide)."""
    import torch

    registered = []
    try:
        for name, function in CUSTOM_OP_SYMBOLICS.items():
            torch.onnx.register_custom_op_symbolic(name, function, opset)
            registered.append(name)
        if opset < 14:
            torch.onnx.register_custom_op_symbolic("aten::scaled_dot_product_attention", _sdpa_opset13(), opset)
            registered.append("aten::scaled_dot_product_attention")
        yield
    finally:
        for name in registered:
            torch.onnx.unregister_custom_op_symbolic(name, opset)
