"""Written-out functional forwards of the model zoo: the independent oracles of the block and whole-model tests.

Everything here is torch and torch.nn.functional applied to a state dict (``sd``, parameter name -> tensor, the
model's own names); nothing is imported from edgeattn, so a bug in the project's modules cannot reappear here.
Each function follows a paper's formula or the official code's block structure literally, and prefers the obvious
form over the fast one: attention is an explicit score matrix per head, windows and stripes are cut out of the
(H, W) map with slices in a Python loop, LePE is a depthwise conv of each cut-out window.

Sources: CSWin (Dong et al. 2022; microsoft/CSWin-Transformer ``CSWinBlock``/``LePEAttention``), efficient
attention (Shen et al. 2021), ELFATT (arXiv 2501.06098, Eq. 16), SOFT/SOFT++ (Lu et al., IJCV, Eq. 8-10 and 17;
fudan-zvg/SOFT block structure), FLuRKA (Eq. 2) on T2T-ViT-7 (yitu-opensource/T2T-ViT ``Token_performer``),
FAVOR+ (Choromanski et al. 2021, Lemma 1), the sinusoid table of Vaswani et al. 2017.
"""
import math

import torch
import torch.nn.functional as F


# ---- generic layers -------------------------------------------------------------------------------------------
def layer_norm(x, sd, prefix, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], sd[prefix + ".weight"], sd[prefix + ".bias"], eps)


def batch_norm(x, sd, prefix, eps=1e-5):
    """BatchNorm in inference: (x - running_mean) / sqrt(running_var + eps) * weight + bias, per channel."""
    shape = (1, -1) + (1,) * (x.dim() - 2)
    mean, var = sd[prefix + ".running_mean"].reshape(shape), sd[prefix + ".running_var"].reshape(shape)
    return (x - mean) / torch.sqrt(var + eps) * sd[prefix + ".weight"].reshape(shape) + \
        sd[prefix + ".bias"].reshape(shape)


def linear(x, sd, prefix):
    return F.linear(x, sd[prefix + ".weight"], sd.get(prefix + ".bias"))


def conv(x, sd, prefix, stride=1, padding=None, groups=1):
    weight = sd[prefix + ".weight"]
    padding = weight.shape[-1] // 2 if padding is None else padding
    return F.conv2d(x, weight, sd.get(prefix + ".bias"), stride=stride, padding=padding, groups=groups)


def mlp(x, sd, prefix, approximate="none"):
    """fc1 -> GELU -> fc2."""
    return linear(F.gelu(linear(x, sd, prefix + ".fc1"), approximate=approximate), sd, prefix + ".fc2")


def to_map(tokens, height, width):
    """(B, H*W, C) row-major tokens -> (B, C, H, W)."""
    b, n, c = tokens.shape
    assert n == height * width
    return tokens.transpose(1, 2).reshape(b, c, height, width)


def to_tokens(image):
    """(B, C, H, W) -> (B, H*W, C)."""
    return image.flatten(2).transpose(1, 2)


def _bilinear_weights(size_in, size_out, dtype):
    """(size_out, size_in) interpolation matrix of bilinear resizing with half-pixel centres: output pixel i samples
    input coordinate (i + 0.5) * size_in / size_out - 0.5 (clamped at 0) from its two neighbours, linearly."""
    weights = torch.zeros(size_out, size_in, dtype=dtype)
    for i in range(size_out):
        source = max((i + 0.5) * size_in / size_out - 0.5, 0.0)
        low = int(math.floor(source))
        high = min(low + 1, size_in - 1)
        fraction = source - low
        weights[i, low] += 1.0 - fraction
        weights[i, high] += fraction
    return weights


def grid_embedding(pos, hw):
    """A (1, S*S, C) position embedding of a square S x S token grid, for an H x W map: unchanged when the map is
    the grid, else resized bilinearly (the upstream SOFT code's ``F.interpolate(..., mode="bilinear")``, whose
    default is half-pixel centres), rows and columns separately."""
    side = math.isqrt(pos.shape[1])
    assert side * side == pos.shape[1], pos.shape
    if (side, side) == tuple(hw):
        return pos
    rows, cols = (_bilinear_weights(side, n, pos.dtype) for n in hw)
    grid = torch.einsum("yi,xj,ijc->yxc", rows, cols, pos.reshape(side, side, -1))
    return grid.reshape(1, hw[0] * hw[1], -1)


def depthwise(tokens, height, width, weight, bias=None):
    """A k x k depthwise conv of a token map (zero padding at its border): LePE, L(V) in ELFATT Eq. 16."""
    out = F.conv2d(to_map(tokens, height, width), weight, bias, padding=weight.shape[-1] // 2,
                   groups=tokens.shape[-1])
    return to_tokens(out)


# ---- attention cores ------------------------------------------------------------------------------------------
def softmax_attention(q, k, v, heads, scale):
    """softmax(q k^T * scale) v per head (channel c in head c // d), explicit score matrices."""
    b, lq, c = q.shape
    d = c // heads
    outs = []
    for head in range(heads):
        cols = slice(head * d, (head + 1) * d)
        scores = torch.matmul(q[..., cols], k[..., cols].transpose(1, 2)) * scale
        outs.append(torch.matmul(torch.softmax(scores, dim=-1), v[..., cols]))
    return torch.cat(outs, dim=-1)


def efficient_attention(q, k, v, heads):
    """Efficient attention (Shen et al.): per head softmax over q's features times softmax over k's tokens^T v."""
    d = q.shape[-1] // heads
    outs = []
    for head in range(heads):
        cols = slice(head * d, (head + 1) * d)
        q_hat = torch.softmax(q[..., cols], dim=2)
        k_hat = torch.softmax(k[..., cols], dim=1)
        outs.append(torch.matmul(q_hat, torch.matmul(k_hat.transpose(1, 2), v[..., cols])))
    return torch.cat(outs, dim=-1)


def window_attention(q, k, v, height, width, window_h, window_w, heads, scale, lepe_weight=None, lepe_bias=None):
    """Softmax attention inside each window_h x window_w rectangle of the map (cut out by slicing, one at a time),
    plus the depthwise conv of the rectangle's own v (zero padding at the rectangle's border) when given."""
    b, n, c = q.shape
    maps = [t.reshape(b, height, width, c) for t in (q, k, v)]
    out = torch.zeros_like(maps[0])
    for top in range(0, height, window_h):
        for left in range(0, width, window_w):
            rows, cols = slice(top, top + window_h), slice(left, left + window_w)
            qw, kw, vw = (m[:, rows, cols] for m in maps)
            size = qw.shape[1:3]
            qw, kw, vw = (t.reshape(b, -1, c) for t in (qw, kw, vw))
            result = softmax_attention(qw, kw, vw, heads, scale)
            if lepe_weight is not None:
                result = result + depthwise(vw, size[0], size[1], lepe_weight, lepe_bias)
            out[:, rows, cols] = result.reshape(b, size[0], size[1], c)
    return out.reshape(b, n, c)


# ---- token attention modules (qkv Linear laid out [q | k | v], output projection ``proj``) ----------------------
def _qkv(x, sd, prefix):
    return linear(x, sd, prefix + ".qkv").chunk(3, dim=-1)


def global_attention(x, sd, prefix, hw, heads, scale=None, lepe=True):
    """CSWin GLOBAL (LePEAttention idx=-1): softmax over the whole map + full-map LePE ``get_v``."""
    q, k, v = _qkv(x, sd, prefix)
    d = x.shape[-1] // heads
    out = softmax_attention(q, k, v, heads, d ** -0.5 if scale is None else scale)
    if lepe:
        out = out + depthwise(v, hw[0], hw[1], sd[prefix + ".get_v.weight"], sd[prefix + ".get_v.bias"])
    return linear(out, sd, prefix + ".proj")


def effatt_attention(x, sd, prefix, hw, heads, lepe=True):
    """EFFATT block core: efficient attention over all heads + full-map LePE ``get_v``."""
    q, k, v = _qkv(x, sd, prefix)
    out = efficient_attention(q, k, v, heads)
    if lepe:
        out = out + depthwise(v, hw[0], hw[1], sd[prefix + ".get_v.weight"], sd[prefix + ".get_v.bias"])
    return linear(out, sd, prefix + ".proj")


def cswin_local_attention(x, sd, prefix, hw, heads, split, last_stage=False, scale=None):
    """CSWin cross-shaped windows: channels [:C/2] with heads/2 heads in H x split stripes (idx 0, LePE
    ``attns.0.get_v``), channels [C/2:] in split x W stripes (idx 1, ``attns.1.get_v``), LePE computed inside each
    stripe; the last stage is one full-map branch with all heads."""
    height, width = hw
    q, k, v = _qkv(x, sd, prefix)
    c = x.shape[-1]
    scale = (c // heads) ** -0.5 if scale is None else scale
    if last_stage:
        branches = [(slice(0, c), heads, height, width)]
    else:
        branches = [(slice(0, c // 2), heads // 2, height, split), (slice(c // 2, c), heads // 2, split, width)]
    outs = []
    for index, (cols, branch_heads, window_h, window_w) in enumerate(branches):
        lepe = prefix + ".attns.{}.get_v".format(index)
        outs.append(window_attention(q[..., cols], k[..., cols], v[..., cols], height, width, window_h, window_w,
                                     branch_heads, scale, sd[lepe + ".weight"], sd[lepe + ".bias"]))
    return linear(torch.cat(outs, dim=-1), sd, prefix + ".proj")


def elfatt_attention(x, sd, prefix, hw, heads, global_heads, window, scale=None):
    """ELFATT Eq. 16: [EFFATT(Q1, K1, V1) + L(V1), blockify(Q2, K2, V2) + per-window L(V2)], then ``proj``."""
    height, width = hw
    q, k, v = _qkv(x, sd, prefix)
    c = x.shape[-1]
    d = c // heads
    c1 = global_heads * d
    parts = []
    if c1:
        glob = efficient_attention(q[..., :c1], k[..., :c1], v[..., :c1], global_heads)
        parts.append(glob + depthwise(v[..., :c1], height, width, sd[prefix + ".get_v_global.weight"],
                                      sd[prefix + ".get_v_global.bias"]))
    if c1 < c:
        parts.append(window_attention(q[..., c1:], k[..., c1:], v[..., c1:], height, width, window, window,
                                      heads - global_heads, d ** -0.5 if scale is None else scale,
                                      sd[prefix + ".get_v_local.weight"], sd[prefix + ".get_v_local.bias"]))
    return linear(torch.cat(parts, dim=-1), sd, prefix + ".proj")


def pre_norm_block(x, sd, prefix, attention, eps=1e-5):
    """x + attn(LN1(x)), then x + MLP(LN2(x))."""
    x = x + attention(layer_norm(x, sd, prefix + ".norm1", eps))
    return x + mlp(layer_norm(x, sd, prefix + ".norm2", eps), sd, prefix + ".mlp")


def post_norm_block(x, sd, prefix, attention, approximate="tanh"):
    """SOFT's released block: LN1(x + attn(x)), then LN2(x + MLP(x))."""
    x = layer_norm(x + attention(x), sd, prefix + ".norm1")
    return layer_norm(x + mlp(x, sd, prefix + ".mlp", approximate), sd, prefix + ".norm2")


# ---- CSWin ----------------------------------------------------------------------------------------------------
CSWIN_SPECS = {
    # CSWin-T24181 / B36292 (ELFATT paper Table I; CSWin's [2, 4, 18, 1] tiny variant of FLatten/Agent-Attention)
    "t24181": {"dim": 64, "depths": (2, 4, 18, 1), "heads": (2, 4, 8, 16)},
    "b36292": {"dim": 96, "depths": (3, 6, 29, 2), "heads": (4, 8, 16, 32)},
    # microsoft/CSWin-Transformer's released CSWin_64_12211_tiny_224 (CSWin attention only)
    "64_12211": {"dim": 64, "depths": (1, 2, 21, 1), "heads": (2, 4, 8, 16)},
}


def cswin_stage_sides(img_size):
    side = (img_size + 2 * 2 - 7) // 4 + 1
    sides = [side]
    for _ in range(3):
        side = (side + 2 - 3) // 2 + 1
        sides.append(side)
    return sides


def cswin_layout(size_name, attention, img_size):
    """Per stage: the attention kind of every block and the window side / stripe width, from the ELFATT paper:
    ELFATT windows = the stage-4 map side (stages 1, 2, 4) and the stage-3 map side (stage 3) for T24181, the
    stage-3 side in stages 1-3 for B36292 (49-49-196-49 / 196-196-196-49 at 224); EFFATT/ELFATT stage 3 alternates
    VaniATT (even blocks) and the linear block; LOCAL stripes 1, 2, s3/2 with CSWin's full-map last stage."""
    spec = CSWIN_SPECS[size_name]
    s1, s2, s3, s4 = cswin_stage_sides(img_size)
    layout = []
    for stage, depth in enumerate(spec["depths"]):
        if attention == "global":
            kinds, window = ["global"] * depth, None
        elif attention == "local":
            kinds = ["local_last" if stage == 3 else "local"] * depth
            window = [1, 2, s3 // 2, s4][stage]
        else:
            kinds = [("global" if stage == 2 and index % 2 == 0 else attention) for index in range(depth)]
            windows = (s4, s4, s3, s4) if size_name == "t24181" else (s3, s3, s3, s4)  # T24181 / B36292
            window = windows[stage]
        layout.append((kinds, window))
    return layout


def cswin_forward(sd, images, size_name, attention, img_size=None):
    """CSWin classifier: stem conv k7 s4 p2 + LN, four stages of pre-LN blocks with Merge_Block (conv k3 s2 p1 + LN)
    between them, final LN, mean over tokens, head."""
    spec = CSWIN_SPECS[size_name]
    layout = cswin_layout(size_name, attention, img_size or images.shape[-1])
    x = conv(images, sd, "stem.conv", stride=4, padding=2)
    hw = tuple(x.shape[-2:])
    x = layer_norm(to_tokens(x), sd, "stem.norm")
    for stage, (kinds, window) in enumerate(layout):
        heads = spec["heads"][stage]
        for index, kind in enumerate(kinds):
            prefix = "stages.{}.{}".format(stage, index)
            attn = prefix + ".attn"
            if kind == "global":
                def attention_fn(t, attn=attn):
                    return global_attention(t, sd, attn, hw, heads)
            elif kind == "effatt":
                def attention_fn(t, attn=attn):
                    return effatt_attention(t, sd, attn, hw, heads)
            elif kind == "elfatt":
                def attention_fn(t, attn=attn):
                    return elfatt_attention(t, sd, attn, hw, heads, heads // 2, window)
            else:
                def attention_fn(t, attn=attn, last=kind == "local_last"):
                    return cswin_local_attention(t, sd, attn, hw, heads, window, last_stage=last)
            x = pre_norm_block(x, sd, prefix, attention_fn)
        if stage < 3:
            merged = conv(to_map(x, *hw), sd, "merges.{}.conv".format(stage), stride=2, padding=1)
            hw = tuple(merged.shape[-2:])
            x = layer_norm(to_tokens(merged), sd, "merges.{}.norm".format(stage))
    return linear(layer_norm(x, sd, "norm").mean(dim=1), sd, "head")


# ---- tiny ViTs ------------------------------------------------------------------------------------------------
def vit_forward(sd, images, depth, heads, patch, attention, window=None):
    """Patch conv (k = stride = patch) + position embedding (resized to the patch grid, :func:`grid_embedding`),
    pre-LN blocks, LN, mean over tokens, head."""
    x = conv(images, sd, "patch_embed", stride=patch, padding=0)
    hw = tuple(x.shape[-2:])
    x = to_tokens(x) + grid_embedding(sd["pos_embed"], hw)
    for index in range(depth):
        prefix = "blocks.{}".format(index)
        if attention == "softmax":
            def attention_fn(t, attn=prefix + ".attn"):
                return global_attention(t, sd, attn, hw, heads, lepe=False)
        else:
            def attention_fn(t, attn=prefix + ".attn"):
                return elfatt_attention(t, sd, attn, hw, heads, heads // 2, window)
        x = pre_norm_block(x, sd, prefix, attention_fn)
    return linear(layer_norm(x, sd, "norm").mean(dim=1), sd, "head")


# ---- SOFT / SOFT++ --------------------------------------------------------------------------------------------
def gaussian_kernel(a, b):
    """exp(-|a_i - b_j|^2 / 2) from explicit differences (inputs already scaled by d^-1/4, SOFT Eq. 4/5)."""
    return torch.exp(-0.5 * ((a[..., :, None, :] - b[..., None, :, :]) ** 2).sum(-1))


def newton_raphson_pinv(A, iterations):
    """SOFT Algorithm 2 with the static step: A_0 = A / ||A||_1^2 per matrix (max absolute row sum, = column sum
    for the symmetric kernel matrix), A_{k+1} = 2 A_k - A_k A A_k."""
    norm = A.abs().sum(dim=-1).max(dim=-1).values[..., None, None]
    X = A / norm ** 2
    for _ in range(iterations):
        X = 2 * X - X @ A @ X
    return X


def soft_attention(x, sd, prefix, hw, heads, ratio, iterations=20, symmetric=True):
    """SOFT++ attention (the released fudan-zvg/SOFT forward, written out): tied Q = K scaled by d^-1/4, conv
    landmarks (k = stride = r,
    shared across heads) + LN + GELU, Nystrom factors P, A, NR inverse, SOFT++ symmetric normalisation,
    P^T (M (P V)), plus a per-head k x k depthwise conv of V, then ``proj``."""
    height, width = hw
    b, n, c = x.shape
    d = c // heads
    q = linear(x, sd, prefix + ".W_q") * d ** -0.25
    v = linear(x, sd, prefix + ".W_v")
    qh = q.reshape(b, n, heads, d).permute(0, 2, 1, 3)  # (B, h, N, d)
    vh = v.reshape(b, n, heads, d).permute(0, 2, 1, 3)
    image = qh.transpose(2, 3).reshape(b * heads, d, height, width)
    marks = F.conv2d(image, sd[prefix + ".landmark_conv.weight"], stride=ratio)  # (B*h, d, H/r, W/r)
    marks = marks.reshape(b, heads, d, -1).transpose(2, 3)  # (B, h, m, d)
    marks = F.gelu(layer_norm(marks, sd, prefix + ".landmark_norm"))
    P = gaussian_kernel(marks, qh)  # (B, h, m, N)
    A = gaussian_kernel(marks, marks)
    M = newton_raphson_pinv(A, iterations)
    if symmetric:
        s = A.sum(dim=-1) ** -0.5
        M = s[..., :, None] * M * s[..., None, :]
    out = P.transpose(-1, -2) @ (M @ (P @ vh))  # (B, h, N, d)
    weight = sd.get(prefix + ".dwconv.weight")
    if weight is not None:  # Conv2d(h, h, k, groups=h) on V as (B*d, h, H, W): one filter per head
        v_image = vh.permute(0, 3, 1, 2).reshape(b * d, heads, height, width)
        local = F.conv2d(v_image, weight, padding=weight.shape[-1] // 2, groups=heads)
        out = out + local.reshape(b, d, heads, n).permute(0, 2, 3, 1)
    return linear(out.permute(0, 2, 1, 3).reshape(b, n, c), sd, prefix + ".proj")


SOFT_SPECS = {
    "softpp_tiny": {"dims": (64, 128, 320, 512), "heads": (2, 4, 10, 16), "depths": (1, 2, 3, 2)},
    "softpp_small": {"dims": (96, 192, 384, 768), "heads": (3, 6, 12, 24), "depths": (2, 2, 5, 2)},
    "softpp_medium": {"dims": (96, 192, 384, 768), "heads": (3, 6, 12, 24), "depths": (2, 2, 18, 2)},
    "softpp_large": {"dims": (128, 256, 512, 1024), "heads": (4, 8, 16, 32), "depths": (2, 2, 18, 2)},
    # fudan-zvg/SOFT's released soft_norm_small (softmax stage 4)
    "soft_norm_small": {"dims": (64, 128, 320, 512), "heads": (2, 4, 10, 16), "depths": (1, 3, 20, 4)},
}
SOFT_RATIOS = (8, 4, 2, 1)


def _conv_bn_relu(x, sd, prefix, stride):
    return torch.relu(batch_norm(conv(x, sd, prefix + ".0", stride=stride, padding=1), sd, prefix + ".1"))


def soft_forward(sd, images, arch, stage4):
    """SOFT++ classifier: C33 stem (s2, s1, s2) and C31 downsamplers (conv + BN + ReLU), a position embedding per
    stage (resized to the stage map, :func:`grid_embedding`), post-LN SOFT blocks; stage 4 is the released pre-LN
    softmax block with a class token ("softmax") or Table 1's sp 1x1 SOFT blocks read out by the token mean
    ("soft"); final LN (eps 1e-6), head."""
    spec = SOFT_SPECS[arch]
    x, hw = images, None
    for stage in range(4):
        if stage == 0:
            for index, stride in enumerate((2, 1, 2)):
                x = _conv_bn_relu(x, sd, "embeds.0.{}".format(index), stride)
        else:
            x = _conv_bn_relu(to_map(x, *hw), sd, "embeds.{}".format(stage), 2)
        hw = tuple(x.shape[-2:])
        x = to_tokens(x)
        heads = spec["heads"][stage]
        if stage == 3 and stage4 == "softmax":
            # the class token's embedding stays apart from the grid's
            pos = sd["pos_embeds.3"]
            x = torch.cat([sd["cls_token"].expand(x.shape[0], -1, -1), x], dim=1) + torch.cat(
                [pos[:, :1], grid_embedding(pos[:, 1:], hw)], dim=1)
            for index in range(spec["depths"][3]):
                def attention_fn(t, attn="stages.3.{}.attn".format(index)):
                    return global_attention(t, sd, attn, None, heads, lepe=False)
                x = pre_norm_block(x, sd, "stages.3.{}".format(index), attention_fn, eps=1e-6)
            return linear(layer_norm(x, sd, "norm", 1e-6)[:, 0], sd, "head")
        x = x + grid_embedding(sd["pos_embeds.{}".format(stage)], hw)
        for index in range(spec["depths"][stage]):
            def attention_fn(t, attn="stages.{}.{}.attn".format(stage, index), ratio=SOFT_RATIOS[stage]):
                return soft_attention(t, sd, attn, hw, heads, ratio)
            x = post_norm_block(x, sd, "stages.{}.{}".format(stage, index), attention_fn)
    return linear(layer_norm(x, sd, "norm", 1e-6).mean(dim=1), sd, "head")


# ---- FLuRKA on T2T-ViT-7 --------------------------------------------------------------------------------------
def favor_features(x, projection):
    """FAVOR+ positive random features (Lemma 1) for the softmax kernel exp(q.k / sqrt(d)): with x' = x d^-1/4,
    phi(x) = exp(W x' - |x'|^2 / 2) / sqrt(F)."""
    x = x * x.shape[-1] ** -0.25
    return torch.exp(x @ projection.t() - 0.5 * (x * x).sum(-1, keepdim=True)) / math.sqrt(projection.shape[0])


def kernel_attention(q_features, k_features, v, eps):
    """phi(q) (phi(k)^T v) / (phi(q) . sum_j phi(k_j) + eps), per head (FLuRKA Eq. 2 with Theorem 1's row
    normalisation; T2T's Token_performer)."""
    numerator = q_features @ (k_features.transpose(-1, -2) @ v)
    denominator = q_features @ k_features.sum(dim=-2, keepdim=True).transpose(-1, -2)
    return numerator / (denominator + eps)


def token_performer(x, sd, prefix):
    """T2T Token_performer: k, q, v = split(kqv(LN1(x))) in that order, single-head Performer, y = v + proj(attn),
    y + MLP(LN2(y)). The features are FAVOR+'s for softmax(q.k / sqrt(d)) (:func:`favor_features`), as the project
    documents its Performer; T2T's released ``prm_exp`` leaves out the d^-1/4 input scaling (exp(q.k) kernel), which
    matters only for loading T2T's own weights."""
    emb = sd[prefix + ".kqv.weight"].shape[0] // 3
    k, q, v = linear(layer_norm(x, sd, prefix + ".norm1"), sd, prefix + ".kqv").split(emb, dim=-1)
    projection = sd[prefix + ".projection"]
    y = v + linear(kernel_attention(favor_features(q, projection), favor_features(k, projection), v, 1e-8), sd,
                   prefix + ".proj")
    return y + mlp(layer_norm(y, sd, prefix + ".norm2"), sd, prefix + ".mlp")


def sinusoid_table(positions, dim):
    """T2T's get_sinusoid_encoding: angle = pos / 10000^(2 (j // 2) / dim), sin on even j, cos on odd j; float32."""
    table = [[pos / 10000 ** (2 * (j // 2) / dim) for j in range(dim)] for pos in range(positions)]
    table = torch.tensor(table, dtype=torch.float64)
    table[:, 0::2] = torch.sin(table[:, 0::2])
    table[:, 1::2] = torch.cos(table[:, 1::2])
    return table.float().unsqueeze(0)


def flurka_attention(x, sd, prefix, heads, feature_map, eps):
    """FLuRKA Eq. 2: K = (E1 X) W_K, V = (E2 X) W_V, Q = X W_Q, then per head the kernel attention."""
    b, n, c = x.shape
    d = c // heads
    q = linear(x, sd, prefix + ".W_q")
    k = linear(sd[prefix + ".E1"] @ x, sd, prefix + ".W_k")
    v = linear(sd[prefix + ".E2"] @ x, sd, prefix + ".W_v")
    split = [t.reshape(b, -1, heads, d).transpose(1, 2) for t in (q, k, v)]
    if feature_map == "elu":
        fq, fk = (F.elu(t) + 1 for t in split[:2])
    else:
        fq, fk = (favor_features(t, sd[prefix + ".projection"]) for t in split[:2])
    out = kernel_attention(fq, fk, split[2], eps)
    return linear(out.transpose(1, 2).reshape(b, n, c), sd, prefix + ".proj")


def t2t_tokens(sd, prefix, images):
    """T2T-ViT's tokens-to-token module: soft split k7 s4 p2 -> Token_performer -> re-structurize -> soft split
    k3 s2 p1 -> Token_performer -> soft split k3 s2 p1 -> Linear(576, 256)."""
    hw = [(side + 4 - 7) // 4 + 1 for side in images.shape[-2:]]
    x = F.unfold(images, 7, padding=2, stride=4).transpose(1, 2)
    x = token_performer(x, sd, prefix + ".attention1")
    x = F.unfold(to_map(x, *hw), 3, padding=1, stride=2).transpose(1, 2)
    hw = [(side + 2 - 3) // 2 + 1 for side in hw]
    x = token_performer(x, sd, prefix + ".attention2")
    x = F.unfold(to_map(x, *hw), 3, padding=1, stride=2).transpose(1, 2)
    return linear(x, sd, prefix + ".project")


def flurka_forward(sd, images, feature_map, eps, depth=7, heads=4):
    """T2T-ViT-7: tokens-to-token module, class token + sinusoid table, 7 pre-LN FLuRKA blocks (MLP 512), LN,
    class token -> head."""
    x = t2t_tokens(sd, "tokens_to_token", images)
    x = torch.cat([sd["cls_token"].expand(x.shape[0], -1, -1), x], dim=1)
    x = x + sinusoid_table(x.shape[1], x.shape[2]).to(x.dtype)
    for index in range(depth):
        prefix = "blocks.{}".format(index)

        def attention_fn(t, attn=prefix + ".attn"):
            return flurka_attention(t, sd, attn, heads, feature_map, eps)
        x = pre_norm_block(x, sd, prefix, attention_fn)
    return linear(layer_norm(x, sd, "norm")[:, 0], sd, "head")


# ---- EfficientViT / QT-ViT building blocks (mit-han-lab/efficientvit ``nn/ops.py``) -----------------------------
ACTIVATIONS = {None: lambda x: x, "hswish": F.hardswish, "relu": torch.relu}


def conv_norm_act(x, sd, prefix, stride=1, act=None, norm=True):
    """ConvLayer: conv (same padding, groups from the weight shape) -> BatchNorm (when present) -> activation."""
    weight = sd[prefix + ".conv.weight"]
    x = conv(x, sd, prefix + ".conv", stride=stride, groups=x.shape[1] // weight.shape[1])
    if norm:
        x = batch_norm(x, sd, prefix + ".norm")
    return ACTIVATIONS[act](x)


def ds_conv(x, sd, prefix, stride=1):
    """DSConv: depthwise 3x3 (BN, hswish) -> pointwise 1x1 (BN)."""
    return conv_norm_act(conv_norm_act(x, sd, prefix + ".depth_conv", stride, "hswish"), sd, prefix + ".point_conv")


def mb_conv(x, sd, prefix, stride=1, fewer_norm=False):
    """MBConv: 1x1 expand (BN or bias, hswish) -> depthwise 3x3 (BN or bias, hswish) -> 1x1 project (BN)."""
    x = conv_norm_act(x, sd, prefix + ".inverted_conv", 1, "hswish", norm=not fewer_norm)
    x = conv_norm_act(x, sd, prefix + ".depth_conv", stride, "hswish", norm=not fewer_norm)
    return conv_norm_act(x, sd, prefix + ".point_conv")


def qt_features(x, alpha, beta, gamma):
    """QT-ViT poster: phi(x) = [alpha x*x, beta sqrt(4/d) x, gamma] on (B, N, d) tokens."""
    d = x.shape[-1]
    return torch.cat([alpha * x * x, beta * math.sqrt(4.0 / d) * x, gamma * torch.ones_like(x[..., :1])], dim=-1)


def lite_mla(x, sd, prefix, dim, eps, kernel="relu"):
    """LiteMLA: qkv 1x1 conv, multi-scale aggregation (depthwise s x s then grouped 1x1 conv per scale)
    concatenated to qkv, then per head group of [q | k | v] (d channels each) linear attention
    phi(q) (phi(k)^T v) / (phi(q) . sum_j phi(k_j) + eps), concatenated, 1x1 projection + BN."""
    qkv = F.conv2d(x, sd[prefix + ".qkv.conv.weight"])
    parts = [qkv]
    index = 0
    while prefix + ".aggreg.{}.0.weight".format(index) in sd:
        spatial = sd[prefix + ".aggreg.{}.0.weight".format(index)]
        pointwise = sd[prefix + ".aggreg.{}.1.weight".format(index)]
        mixed = F.conv2d(qkv, spatial, padding=spatial.shape[-1] // 2, groups=qkv.shape[1])
        parts.append(F.conv2d(mixed, pointwise, groups=qkv.shape[1] // pointwise.shape[1]))
        index += 1
    qkv = torch.cat(parts, dim=1)
    b, channels, height, width = qkv.shape
    groups = channels // (3 * dim)
    outs = []
    for group in range(groups):
        base = group * 3 * dim
        q, k, v = (qkv[:, base + i * dim:base + (i + 1) * dim].flatten(2).transpose(1, 2) for i in range(3))
        if kernel == "relu":
            fq, fk = torch.relu(q), torch.relu(k)
        else:
            coefficients = [sd[prefix + ".qt_" + name] for name in ("alpha", "beta", "gamma")]
            alpha, beta, gamma = (c[group] if c.numel() > 1 else c[0] for c in coefficients)
            fq, fk = qt_features(q, alpha, beta, gamma), qt_features(k, alpha, beta, gamma)
        out = kernel_attention(fq, fk, v, eps)
        outs.append(out.transpose(1, 2).reshape(b, dim, height, width))
    out = F.conv2d(torch.cat(outs, dim=1), sd[prefix + ".proj.conv.weight"])
    return batch_norm(out, sd, prefix + ".proj.norm")


def efficientvit_block(x, sd, prefix, dim, eps, kernel="relu"):
    """EfficientViTBlock: x + LiteMLA(x), then x + MBConv_fewer_norm(x)."""
    x = x + lite_mla(x, sd, prefix + ".context_module.main", dim, eps, kernel)
    return x + mb_conv(x, sd, prefix + ".local_module.main", fewer_norm=True)
