"""Model-local ONNX functions: the standard-op decomposition of every edgeattn custom op.

Why one module: the four bodies are written with one small graph builder (fresh value names, attribute references,
string one-hots, shape arithmetic) and share its helpers (head split, LePE, Newton steps); split per op, each file
would restate the builder's conventions.

Each exported model of target "ort" carries one ``FunctionProto`` per custom op it uses (domain ``trt.plugins``,
name = op_type), so ONNX Runtime runs the file as is; TensorRT gets the same graph without them and calls the plugin.

The bodies are generic: the op's attributes enter through attribute references (``Constant`` nodes with
``ref_attr_name``) and every shape quantity is computed from ``Shape`` at run time, because one model calls the
same op with different attributes and shapes at different stages. String attributes are turned into integers
with a one-word-pool ``TfIdfVectorizer`` (default domain since opset 9; ``Equal`` on strings needs opset 19, and ORT
does not constant-fold ``ai.onnx.ml.LabelEncoder``) and select ``If`` branches; ORT folds the whole selection
once the function is inlined, so a string attribute costs nothing at run time. The bodies compute in float32 (the
exported models are float32; FP16 is the TensorRT plugin's business).

Optional inputs cannot be referenced by a body when a node leaves them out (ORT rejects the inlined graph even
inside an untaken ``If`` branch, and ``Optional`` on an absent input fails type inference), so the blockify body
comes in two forms, chosen from the nodes of the model it is attached to: with LePE inputs (every node has them,
has_lepe = 1) or without (has_lepe = 0). :func:`build_functions` rejects a model that mixes both.

The semantics implemented here are exactly the ``semantics`` text of ``export/schemas/<op_type>.yaml``.
"""
from onnx import AttributeProto, TensorProto, helper

from ..errors import EdgeAttnError
from ..schemas import get_schema
from .contract import MIN_OPSET, custom_nodes

_ATTR_REF_FIELDS = {
    "int": ("value_int", AttributeProto.INT),
    "float": ("value_float", AttributeProto.FLOAT),
    "string": ("value_string", AttributeProto.STRING),
    "ints": ("value_ints", AttributeProto.INTS),
    "floats": ("value_floats", AttributeProto.FLOATS),
    "strings": ("value_strings", AttributeProto.STRINGS),
}


class _Body(object):
    """A list of ONNX nodes with unique value names; ``op`` appends a node and returns its output name(s)."""

    def __init__(self, opset, counter=None, prefix="t"):
        self.opset = opset
        self.nodes = []
        self._counter = counter if counter is not None else [0]
        self._prefix = prefix

    def fresh(self, hint):
        self._counter[0] += 1
        return "{}_{}{}".format(hint, self._prefix, self._counter[0])

    def sub(self):
        """A body for an If/Loop branch that shares this body's name counter."""
        return _Body(self.opset, self._counter, self._prefix)

    def op(self, op_type, inputs, hint=None, outputs=1, domain="", **attrs):
        names = [self.fresh(hint or op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, domain=domain, **attrs))
        return names[0] if outputs == 1 else names

    def attr(self, attr_name, attr_type):
        """A Constant holding the calling node's attribute ``attr_name`` (an attribute reference)."""
        field, proto_type = _ATTR_REF_FIELDS[attr_type]
        name = self.fresh(attr_name)
        node = helper.make_node("Constant", [], [name])
        ref = AttributeProto()
        ref.name = field
        ref.ref_attr_name = attr_name
        ref.type = proto_type
        node.attribute.append(ref)
        self.nodes.append(node)
        return name

    def ints(self, values, hint="const"):
        """A 1-D int64 constant."""
        values = [int(v) for v in values]
        return self.op("Constant", [], hint=hint,
                       value=helper.make_tensor(self.fresh(hint), TensorProto.INT64, [len(values)], values))

    def int_scalar(self, value, hint="const"):
        return self.op("Constant", [], hint=hint,
                       value=helper.make_tensor(self.fresh(hint), TensorProto.INT64, [], [int(value)]))

    def float_scalar(self, value, hint="const"):
        return self.op("Constant", [], hint=hint,
                       value=helper.make_tensor(self.fresh(hint), TensorProto.FLOAT, [], [float(value)]))

    def reduce(self, op_type, x, axes, keepdims=1, hint=None):
        """Reduce* over ``axes``: ReduceSum takes axes as an input from opset 13, the others from opset 18."""
        if op_type == "ReduceSum" or self.opset >= 18:
            return self.op(op_type, [x, self.ints(axes)], hint=hint, keepdims=keepdims)
        return self.op(op_type, [x], hint=hint, axes=list(axes), keepdims=keepdims)

    def dim(self, shape, index, hint="dim"):
        """Element ``index`` of a 1-D shape tensor, kept 1-D (length 1) so it concatenates into new shapes."""
        return self.op("Slice", [shape, self.ints([index]), self.ints([index + 1]), self.ints([0])], hint=hint)

    def vec(self, scalar, hint="vec"):
        return self.op("Unsqueeze", [scalar, self.ints([0])], hint=hint)

    def concat(self, parts, hint="shape"):
        return self.op("Concat", parts, hint=hint, axis=0)

    def string_is(self, attr_name, op_type, choice):
        """bool scalar: the node's string attribute ``attr_name`` equals ``choice`` (one of the values the op
        schema of ``op_type`` allows for it).

        TfIdfVectorizer in "TF" mode over the unigram pool of allowed values counts each of them in the
        one-element string tensor, i.e. gives the one-hot vector of the attribute value.
        """
        choices = get_schema(op_type).attribute(attr_name).values
        text = self.op("Reshape", [self.attr(attr_name, "string"), self.ints([1])], hint=attr_name + "_text")
        one_hot = self.op("TfIdfVectorizer", [text], hint=attr_name + "_onehot", mode="TF", min_gram_length=1,
                          max_gram_length=1, max_skip_count=0, ngram_counts=[0],
                          ngram_indexes=list(range(len(choices))), pool_strings=list(choices))
        count = self.op("Gather", [one_hot, self.int_scalar(list(choices).index(choice))], axis=0)
        return self.op("Greater", [count, self.float_scalar(0.5)], hint="{}_is_{}".format(attr_name, choice))

    def graph(self, name, outputs):
        return helper.make_graph(self.nodes, name, [], [helper.make_empty_tensor_value_info(o) for o in outputs])


def _split_heads(body, x, heads_vec, hint):
    """(B, N, C) -> (B, h, N, d) with channel c in head c // d."""
    shaped = body.op("Reshape", [x, body.concat([body.ints([0, 0]), heads_vec, body.ints([-1])])], hint=hint)
    return body.op("Transpose", [shaped], hint=hint + "_heads", perm=[0, 2, 1, 3])


def _efficient_attention(opset, with_lepe=None):
    body = _Body(opset)
    heads = body.vec(body.attr("num_heads", "int"))
    tokens_heads = body.concat([body.ints([0, 0]), heads, body.ints([-1])])
    q = body.op("Reshape", ["q", tokens_heads], hint="q4")
    k = body.op("Reshape", ["k", tokens_heads], hint="k4")
    v = body.op("Reshape", ["v", tokens_heads], hint="v4")
    # q: softmax over each token's head features; k: softmax over the tokens, taken on the (B, h, d, N) layout
    # so that the reduction is on the last axis and the result is already k_hat^T for the context product.
    q_hat = body.op("Transpose", [body.op("Softmax", [q], hint="q_hat", axis=-1)], hint="q_hat_t", perm=[0, 2, 1, 3])
    k_hat_t = body.op("Softmax", [body.op("Transpose", [k], hint="k_t", perm=[0, 2, 3, 1])], hint="k_hat_t", axis=-1)
    v_t = body.op("Transpose", [v], hint="v_t", perm=[0, 2, 1, 3])
    context = body.op("MatMul", [k_hat_t, v_t], hint="context")
    out = body.op("MatMul", [q_hat, context], hint="attn")
    out = body.op("Transpose", [out], hint="attn_t", perm=[0, 2, 1, 3])
    body.op("Reshape", [out, body.op("Shape", ["q"])], hint="out")
    return body, ["q", "k", "v"]


def _blockify_attention(opset, with_lepe=False):
    body = _Body(opset)
    heads = body.vec(body.attr("num_heads", "int"))
    height = body.vec(body.attr("height", "int"))
    width = body.vec(body.attr("width", "int"))
    window = body.vec(body.attr("window_size", "int"))
    pad_h = body.op("Mod", [body.op("Sub", [window, body.op("Mod", [height, window])]), window], hint="pad_h")
    pad_w = body.op("Mod", [body.op("Sub", [window, body.op("Mod", [width, window])]), window], hint="pad_w")
    padded_h = body.op("Add", [height, pad_h], hint="padded_h")
    padded_w = body.op("Add", [width, pad_w], hint="padded_w")
    blocks_h = body.op("Div", [padded_h, window], hint="blocks_h")
    blocks_w = body.op("Div", [padded_w, window], hint="blocks_w")
    windows = body.op("Mul", [blocks_h, blocks_w], hint="windows")
    window_len = body.op("Mul", [window, window], hint="window_len")
    q_shape = body.op("Shape", ["q"])
    head_dim = body.op("Div", [body.dim(q_shape, 2, "channels"), heads], hint="head_dim")

    # "none" and "zeros" pad identically (for "none" the pad is 0 on every valid input); "masked" also hides the
    # padded keys from the softmax. Without padding the Ifs fold away (their conditions are constants once the
    # function is inlined) and the (B, N, C) tokens are reshaped into windows directly.
    pad_total = body.op("ReduceSum", [body.concat([pad_h, pad_w])], hint="pad_total", keepdims=0)
    needs_pad = body.op("Greater", [pad_total, body.int_scalar(0)], hint="needs_pad")
    map_shape = body.concat([body.ints([0]), height, width, body.ints([-1])], hint="map_shape")
    pads = body.concat([body.ints([0, 0, 0, 0, 0]), pad_h, pad_w, body.ints([0])], hint="pads")

    def padded(name):
        then_body = body.sub()
        grown = then_body.op("Pad", [then_body.op("Reshape", [name, map_shape]), pads], hint=name + "_padded",
                             mode="constant")
        else_body = body.sub()
        same = else_body.op("Identity", [name], hint=name + "_unpadded")
        return body.op("If", [needs_pad], hint=name + "_p", then_branch=then_body.graph("pad_" + name, [grown]),
                       else_branch=else_body.graph("keep_" + name, [same]))

    # tokens (B, Hp*Wp, C) = (B, nH, ws, nW, ws, h, d); windows are window-row-major, row-major inside.
    # Every transpose keeps d innermost, so ORT copies whole d-vectors (k^T is fused into the MatMul).
    blocked_shape = body.concat([body.ints([0]), blocks_h, window, blocks_w, window, heads, body.ints([-1])],
                                hint="blocked_shape")
    rows_shape = body.concat([body.ints([0]), windows, heads, window_len, body.ints([-1])], hint="rows_shape")
    v_tokens = padded("v")

    def windowed(name, source):
        blocked = body.op("Reshape", [source, blocked_shape], hint=name + "_blocked")
        return body.op("Reshape", [body.op("Transpose", [blocked], perm=[0, 1, 3, 5, 2, 4, 6]), rows_shape],
                       hint=name + "_win")  # (B, nWin, h, L, d)

    q_win = windowed("q", padded("q"))
    k_win = windowed("k", padded("k"))
    v_win = windowed("v", v_tokens)

    scale_attr = body.attr("scale", "float")
    default_scale = body.op("Reciprocal", [body.op("Sqrt", [body.op("Cast", [head_dim], to=TensorProto.FLOAT)])])
    scale = body.op("Where", [body.op("Greater", [scale_attr, body.float_scalar(0.0)]), scale_attr,
                              body.op("Squeeze", [default_scale, body.ints([0])])], hint="scale")
    k_t = body.op("Transpose", [k_win], hint="k_t", perm=[0, 1, 2, 4, 3])
    scores = body.op("MatMul", [body.op("Mul", [q_win, scale], hint="q_scaled"), k_t], hint="scores")

    use_mask = body.op("And", [needs_pad, body.string_is("padding", "EdgeAttnBlockifyAttention", "masked")],
                       hint="use_mask")
    scores = body.op("If", [use_mask], hint="scores_m",
                     then_branch=_masked_scores(body.sub(), scores, height, width, padded_h, padded_w, window),
                     else_branch=_unmasked_scores(body.sub(), scores))
    probs = body.op("Softmax", [scores], hint="probs", axis=-1)
    out = body.op("MatMul", [probs, v_win], hint="attn")  # (B, nWin, h, L, d)
    # back to padded token order (B, nH, ws, nW, ws, h, d) -> (B, Hp*Wp, C)
    out = body.op("Reshape", [out, body.concat([body.ints([0]), blocks_h, blocks_w, heads, window, window,
                                                body.ints([-1])])])
    out = body.op("Transpose", [out], hint="attn_blocked", perm=[0, 1, 4, 2, 5, 3, 6])
    padded_tokens = body.op("Mul", [padded_h, padded_w], hint="padded_tokens")
    token_shape = body.concat([body.ints([0]), padded_tokens, body.ints([-1])], hint="token_shape")
    out = body.op("Reshape", [out, token_shape], hint="attn_tokens")

    inputs = ["q", "k", "v"]
    if with_lepe:
        inputs += ["lepe_weight", "lepe_bias"]
        v_flat = body.op("Reshape", [v_tokens, token_shape], hint="v_tokens")
        out = body.op("Add", [out, _window_lepe(body, v_flat, padded_h, padded_w, window, padded_tokens)],
                      hint="attn_lepe")

    crop_body = body.sub()
    grown_map = crop_body.op("Reshape", [out, body.concat([body.ints([0]), padded_h, padded_w, body.ints([-1])])])
    cropped = crop_body.op("Slice", [grown_map, crop_body.ints([0, 0]), crop_body.concat([height, width]),
                                     crop_body.ints([1, 2])], hint="cropped")
    keep_body = body.sub()
    kept = keep_body.op("Identity", [out], hint="uncropped")
    out = body.op("If", [needs_pad], hint="out_p",
                  then_branch=crop_body.graph("crop", [cropped]), else_branch=keep_body.graph("keep", [kept]))
    body.op("Reshape", [out, q_shape], hint="out")
    return body, inputs


def _masked_scores(body, scores, height, width, padded_h, padded_w, window):
    """Branch graph: ``scores`` (B, nWin, h, L, L) + an additive -inf on the keys that are padding, the mask laid
    out (nWin, 1, 1, L) in the same window order as the tokens."""
    rows_valid = body.op("Less", [body.op("Range", [body.int_scalar(0), body.op("Squeeze", [padded_h]),
                                                    body.int_scalar(1)]),
                                  body.op("Squeeze", [height])], hint="rows_valid")
    cols_valid = body.op("Less", [body.op("Range", [body.int_scalar(0), body.op("Squeeze", [padded_w]),
                                                    body.int_scalar(1)]),
                                  body.op("Squeeze", [width])], hint="cols_valid")
    valid = body.op("And", [body.op("Unsqueeze", [rows_valid, body.ints([1])]),
                            body.op("Unsqueeze", [cols_valid, body.ints([0])])], hint="valid")  # (Hp, Wp)
    blocks = body.concat([body.op("Div", [padded_h, window]), window, body.op("Div", [padded_w, window]), window])
    valid = body.op("Transpose", [body.op("Reshape", [valid, blocks])], perm=[0, 2, 1, 3])  # (nH, nW, ws, ws)
    valid = body.op("Reshape", [valid, body.concat([body.ints([-1, 1, 1]), body.op("Mul", [window, window])])],
                    hint="key_valid")
    bias = body.op("Where", [valid, body.float_scalar(0.0), body.float_scalar(float("-inf"))], hint="key_bias")
    return body.graph("mask_padded_keys", [body.op("Add", [scores, bias], hint="masked_scores")])


def _unmasked_scores(body, scores):
    return body.graph("all_keys", [body.op("Identity", [scores], hint="plain_scores")])


def _window_lepe(body, v_tokens, padded_h, padded_w, window, padded_tokens):
    """Depthwise 3x3 conv of v inside each window (zero padding at window borders) plus bias, on the padded
    token map ``v_tokens`` (B, Hp*Wp, C); returns (B, Hp*Wp, C).

    A depthwise Conv needs ``group`` = C as a static attribute, which a body generic over C cannot give (and
    ORT's grouped Conv on many small windows is slow anyway). Instead one Gather collects the nine neighbours of
    every token from the channels-last map, with a neighbour across a window border (or the map border) pointing
    at an extra zero token; the index table depends only on the attributes, so ORT folds it to a constant.
    """
    offsets = body.ints([-1, 0, 1], hint="offsets")

    def neighbours(size):
        """(3, size) neighbour coordinates along one axis and whether each stays inside its window."""
        coords = body.op("Range", [body.int_scalar(0), body.op("Squeeze", [size]), body.int_scalar(1)])
        near = body.op("Add", [body.op("Unsqueeze", [offsets, body.ints([1])]), coords], hint="near")
        inside = body.op("And", [body.op("Not", [body.op("Less", [near, body.int_scalar(0)])]),
                                 body.op("Equal", [body.op("Div", [near, window]),
                                                   body.op("Div", [coords, window])])], hint="same_window")
        return near, inside

    near_y, inside_y = neighbours(padded_h)  # (3, Hp)
    near_x, inside_x = neighbours(padded_w)  # (3, Wp)
    flat = body.op("Add", [body.op("Mul", [body.op("Reshape", [near_y, body.ints([3, 1, -1, 1])]), padded_w]),
                           body.op("Reshape", [near_x, body.ints([1, 3, 1, -1])])], hint="flat_index")
    inside = body.op("And", [body.op("Reshape", [inside_y, body.ints([3, 1, -1, 1])]),
                             body.op("Reshape", [inside_x, body.ints([1, 3, 1, -1])])], hint="inside")
    index = body.op("Reshape", [body.op("Where", [inside, flat, padded_tokens]),
                                body.concat([body.ints([9]), padded_tokens])], hint="tap_index")  # (9, Hp*Wp)
    with_zero = body.op("Pad", [v_tokens, body.ints([0, 0, 0, 0, 1, 0])], hint="v_zero_row", mode="constant")
    taps = body.op("Gather", [with_zero, index], hint="v_taps", axis=1)  # (B, 9, Hp*Wp, C), tap = 3 dy + dx
    weights = body.op("Transpose", [body.op("Reshape", ["lepe_weight", body.ints([-1, 9])])], perm=[1, 0])
    weights = body.op("Unsqueeze", [weights, body.ints([1])], hint="lepe_taps")  # (9, 1, C)
    conv = body.reduce("ReduceSum", body.op("Mul", [taps, weights]), [1], keepdims=0, hint="lepe_conv")
    return body.op("Add", [conv, "lepe_bias"], hint="lepe")


def _lite_mla(opset, with_lepe=None):
    body = _Body(opset)
    head_dim = body.vec(body.attr("head_dim", "int"))
    shape = body.op("Shape", ["qkv"])
    spatial = body.op("Slice", [shape, body.ints([2]), body.ints([4]), body.ints([0])], hint="spatial")
    tokens = body.op("ReduceProd", [spatial], hint="tokens", keepdims=1) if opset >= 18 else \
        body.op("Mul", [body.dim(shape, 2), body.dim(shape, 3)], hint="tokens")
    grouped = body.op("Reshape", ["qkv", body.concat([body.ints([0, -1, 3]), head_dim, tokens])], hint="grouped")
    q, k, v = body.op("Split", [grouped, body.ints([1, 1, 1])], hint="qkv_part", outputs=3, axis=2)
    q = body.op("Squeeze", [q, body.ints([2])], hint="q")  # (B, G, d, N)
    k = body.op("Squeeze", [k, body.ints([2])], hint="k")
    v = body.op("Squeeze", [v, body.ints([2])], hint="v")

    use_taylor = body.string_is("kernel", "EdgeAttnLiteMLA", "quadratic_taylor")
    relu_body = body.sub()
    relu_q = relu_body.op("Relu", [q], hint="phi_q")
    relu_k = relu_body.op("Relu", [k], hint="phi_k")
    taylor_body = body.sub()
    per_group = taylor_body.ints([1, -1, 1, 1])
    alpha = taylor_body.op("Reshape", [taylor_body.attr("qt_alpha", "floats"), per_group], hint="alpha")
    beta = taylor_body.op("Reshape", [taylor_body.attr("qt_beta", "floats"), per_group], hint="beta")
    gamma = taylor_body.op("Reshape", [taylor_body.attr("qt_gamma", "floats"), per_group], hint="gamma")
    root = taylor_body.op("Sqrt", [taylor_body.op("Div", [taylor_body.float_scalar(4.0),
                                                          taylor_body.op("Cast", [head_dim], to=TensorProto.FLOAT)])])
    beta = taylor_body.op("Mul", [beta, root], hint="beta_scaled")

    def taylor(x):
        squares = taylor_body.op("Mul", [alpha, taylor_body.op("Mul", [x, x])], hint="phi_sq")
        linear = taylor_body.op("Mul", [beta, x], hint="phi_lin")
        group_count = taylor_body.dim(taylor_body.op("Shape", [x]), 1)
        constant = taylor_body.op("Expand", [gamma, taylor_body.concat([taylor_body.dim(shape, 0), group_count,
                                                                        taylor_body.ints([1]), tokens])],
                                  hint="phi_const")
        return taylor_body.op("Concat", [squares, linear, constant], hint="phi", axis=2)

    taylor_q = taylor(q)
    taylor_k = taylor(k)
    phi_q, phi_k = body.op("If", [use_taylor], hint="phi", outputs=2,
                           then_branch=taylor_body.graph("quadratic_taylor", [taylor_q, taylor_k]),
                           else_branch=relu_body.graph("relu", [relu_q, relu_k]))

    # EfficientViT's padded-V trick: one product gives the numerator rows and, in the extra row, the denominator
    v_ones = body.op("Pad", [v, body.ints([0, 0, 0, 0, 0, 0, 1, 0]), body.float_scalar(1.0)], hint="v_pad",
                     mode="constant")
    kv = body.op("MatMul", [v_ones, body.op("Transpose", [phi_k], perm=[0, 1, 3, 2])], hint="kv")  # (B,G,d+1,F)
    out = body.op("MatMul", [kv, phi_q], hint="num_den")  # (B, G, d+1, N)
    numerator = body.op("Slice", [out, body.ints([0]), head_dim, body.ints([2])], hint="num")
    denominator = body.op("Slice", [out, head_dim, body.ints([2 ** 62]), body.ints([2])], hint="den")
    eps = body.attr("eps", "float")
    out = body.op("Div", [numerator, body.op("Add", [denominator, eps])], hint="ratio")
    body.op("Reshape", [out, body.concat([body.ints([0, -1]), spatial])], hint="out")
    return body, ["qkv"]


def _soft_kernel_attention(opset, with_lepe=None):
    body = _Body(opset)
    heads = body.vec(body.attr("num_heads", "int"))
    q = _split_heads(body, "q", heads, "qh")            # (B, h, N, d)
    marks = _split_heads(body, "landmarks", heads, "lh")  # (B, h, M, d)
    v = _split_heads(body, "v", heads, "vh")
    marks_t = body.op("Transpose", [marks], hint="lh_t", perm=[0, 1, 3, 2])
    q_sq = body.reduce("ReduceSumSquare", q, [-1], hint="q_sq")          # (B, h, N, 1)
    marks_sq = body.reduce("ReduceSumSquare", marks, [-1], hint="l_sq")  # (B, h, M, 1)
    marks_sq_t = body.op("Transpose", [marks_sq], hint="l_sq_t", perm=[0, 1, 3, 2])
    minus_half = body.float_scalar(-0.5)
    minus_two = body.float_scalar(-2.0)

    def gaussian(norms_rows, norms_cols, dots, hint):
        distance = body.op("Add", [body.op("Add", [norms_rows, norms_cols]), body.op("Mul", [dots, minus_two])])
        return body.op("Exp", [body.op("Mul", [body.op("Relu", [distance], hint=hint + "_dist"), minus_half])],
                       hint=hint)

    p_t = gaussian(q_sq, marks_sq_t, body.op("MatMul", [q, marks_t]), "p_t")           # P^T: (B, h, N, M)
    gram = gaussian(marks_sq, marks_sq_t, body.op("MatMul", [marks, marks_t]), "gram")  # A: (B, h, M, M)
    row_sums = body.reduce("ReduceSum", gram, [-1], hint="row_sums")                 # (B, h, M, 1)
    max_row = body.reduce("ReduceMax", row_sums, [-2], hint="max_row")               # (B, h, 1, 1)
    start = body.op("Div", [gram, body.op("Mul", [max_row, max_row])], hint="x0")

    pinv = _newton_iterations(body, gram, start, body.attr("newton_iters", "int"))

    # SOFT++: M = diag(s) X diag(s), s = rowsum(A) ** -0.5; SOFT: M = X (exponent 0)
    exponent = body.op("Mul", [body.op("Cast", [body.attr("symmetric_norm", "int")], to=TensorProto.FLOAT),
                               minus_half], hint="norm_exponent")
    scale = body.op("Pow", [row_sums, exponent], hint="sym_scale")
    middle = body.op("Mul", [body.op("Mul", [pinv, scale]),
                             body.op("Transpose", [scale], perm=[0, 1, 3, 2])], hint="middle")
    pv = body.op("MatMul", [body.op("Transpose", [p_t], perm=[0, 1, 3, 2]), v], hint="pv")  # (B, h, M, d)
    out = body.op("MatMul", [p_t, body.op("MatMul", [middle, pv], hint="mpv")], hint="attn")
    out = body.op("Transpose", [out], hint="attn_t", perm=[0, 2, 1, 3])
    body.op("Reshape", [out, body.op("Shape", ["q"])], hint="out")
    return body, ["q", "landmarks", "v"]


#: Newton steps unrolled per bit of newton_iters (1, 2, ..., 2 ** (_UNROLLED_BITS - 1)); higher bits use a Loop
_UNROLLED_BITS = 6


def _newton_steps(body, gram, x, count):
    """``count`` Newton-Raphson steps X <- 2X - X (A X) appended to ``body``; returns the last X."""
    for _ in range(count):
        x = body.op("Sub", [body.op("Add", [x, x]), body.op("MatMul", [x, body.op("MatMul", [gram, x])])],
                    hint="newton_x")
    return x


def _newton_iterations(body, gram, start, iterations):
    """X_{t+1} = 2 X_t - X_t A X_t, ``iterations`` (int64 scalar) times, without a run-time loop when possible.

    ORT runs an ONNX Loop with a per-iteration overhead larger than the matrix products here. So the count is
    split into bits: bit b applies 2**b unrolled steps under an If, and every If condition is a constant once the
    function is inlined, so ORT folds them into exactly ``iterations`` straight-line steps. Counts of
    2**_UNROLLED_BITS and more add a Loop over blocks of that many steps.
    """
    x = start
    zero = body.int_scalar(0)
    two = body.int_scalar(2)
    for bit in range(_UNROLLED_BITS):
        weight = body.int_scalar(1 << bit)
        is_set = body.op("Greater", [body.op("Mod", [body.op("Div", [iterations, weight]), two]), zero],
                         hint="bit{}".format(bit))
        steps = body.sub()
        stepped = _newton_steps(steps, gram, x, 1 << bit)
        keep = body.sub()
        same = keep.op("Identity", [x], hint="newton_keep")
        x = body.op("If", [is_set], hint="newton_bit{}".format(bit),
                    then_branch=steps.graph("newton_{}_steps".format(1 << bit), [stepped]),
                    else_branch=keep.graph("newton_skip_{}".format(1 << bit), [same]))
    block = 1 << _UNROLLED_BITS
    blocks = body.op("Div", [iterations, body.int_scalar(block)], hint="newton_blocks")
    step = body.sub()
    x_in = step.fresh("x_in")
    x_next = _newton_steps(step, gram, x_in, block)
    cond_out = step.op("Identity", ["__cond_in"], hint="cond_out")
    loop_graph = helper.make_graph(
        step.nodes, "newton_block",
        [helper.make_tensor_value_info("__iter", TensorProto.INT64, []),
         helper.make_tensor_value_info("__cond_in", TensorProto.BOOL, []),
         helper.make_empty_tensor_value_info(x_in)],
        [helper.make_empty_tensor_value_info(cond_out), helper.make_empty_tensor_value_info(x_next)])
    looped = body.sub()
    after_loop = looped.op("Loop", [blocks, "", x], hint="newton_loop", body=loop_graph)
    skipped = body.sub()
    same = skipped.op("Identity", [x], hint="newton_done")
    return body.op("If", [body.op("Greater", [blocks, zero])], hint="pinv",
                   then_branch=looped.graph("newton_blocks", [after_loop]),
                   else_branch=skipped.graph("newton_no_blocks", [same]))


_BUILDERS = {
    "EdgeAttnBlockifyAttention": _blockify_attention,
    "EdgeAttnEfficientAttention": _efficient_attention,
    "EdgeAttnLiteMLA": _lite_mla,
    "EdgeAttnSoftKernelAttention": _soft_kernel_attention,
}


def supported_op_types():
    """The op_types this module can decompose (every schema in export/schemas)."""
    return sorted(_BUILDERS)


def build_function(op_type, opset, with_lepe=False):
    """The FunctionProto (domain from the schema, name = op_type) decomposing ``op_type`` with opset ``opset``.

    ``with_lepe`` selects, for EdgeAttnBlockifyAttention, the body whose nodes carry lepe_weight/lepe_bias.
    """
    if opset < MIN_OPSET:
        raise EdgeAttnError("opset {} is too old for {}: the edgeattn custom ops need opset >= {}".format(
            opset, op_type, MIN_OPSET))
    if op_type not in _BUILDERS:
        raise EdgeAttnError("no ONNX decomposition for custom op {}".format(op_type))
    schema = get_schema(op_type)
    body, inputs = _BUILDERS[op_type](opset, with_lepe=with_lepe)
    body.nodes[-1].output[0] = schema.outputs[0].name  # every builder ends with the node producing the output
    return helper.make_function(
        schema.domain, op_type, inputs, [schema.outputs[0].name], body.nodes,
        opset_imports=[helper.make_opsetid("", opset)],
        attributes=schema.attribute_names,
        doc_string="Standard-op decomposition of {} v{} (see export/schemas/{}.yaml).".format(
            op_type, schema.version, op_type),
    )


def _node_has_lepe(node):
    return len(node.input) > 3 and bool(node.input[3])


def build_functions(model):
    """FunctionProtos for every custom op used in ``model`` (a ModelProto), in schema order.

    Raises EdgeAttnError if the model mixes blockify nodes with and without LePE inputs (see module docstring).
    """
    opset = default_opset(model)
    used = {}
    for node in custom_nodes(model.graph):
        used.setdefault(node.op_type, []).append(node)
    functions = []
    for op_type in sorted(used):
        lepe = {_node_has_lepe(node) for node in used[op_type]} if op_type == "EdgeAttnBlockifyAttention" else {False}
        if len(lepe) > 1:
            raise EdgeAttnError(
                "{} nodes with and without LePE inputs in one model: a model-local function cannot serve both "
                "(give every block the same LePE setting)".format(op_type))
        functions.append(build_function(op_type, opset, with_lepe=lepe.pop()))
    return functions


def default_opset(model):
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    raise EdgeAttnError("the ONNX model imports no default-domain opset")


def attach_functions(model):
    """Add the decompositions of every custom op used by ``model`` in place (replacing any already there).

    Raises the IR version to 8, the first with model-local functions.
    """
    functions = build_functions(model)
    names = {(f.domain, f.name) for f in functions}
    kept = [f for f in model.functions if (f.domain, f.name) not in names]
    del model.functions[:]
    model.functions.extend(kept + functions)
    if functions:
        model.ir_version = max(int(model.ir_version), 8)
    return model


