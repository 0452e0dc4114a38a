"""Deliberately naive reference implementations for the operator tests.

Each function follows the paper's formula literally (explicit N x N / per-window matrices, index arithmetic instead
of reshapes, loops where that is clearer) and computes in the dtype of its inputs. Called with FP64 inputs they
are the independent references of the identity tests; called with FP16 inputs they are "what PyTorch itself
does when the same formula is evaluated naively in FP16", the baseline of the FP16 error bound. They share no
code with edgeattn.ops.
"""
import math

import torch
import torch.nn.functional as F


def head_slices(channels, num_heads):
    d = channels // num_heads
    return [slice(i * d, (i + 1) * d) for i in range(num_heads)]


def softmax_attention(q, k, v, num_heads, scale=None, bias=None):
    """softmax(q k^T * scale + bias) v per head, explicit score matrix. q (B, N, C), k/v (B, M, C)."""
    d = q.shape[-1] // num_heads
    scale = d ** -0.5 if scale is None else scale
    outs = []
    for sl in head_slices(q.shape[-1], num_heads):
        scores = q[..., sl] @ k[..., sl].transpose(-1, -2) * scale
        if bias is not None:
            scores = scores + bias
        outs.append(torch.softmax(scores, dim=-1) @ v[..., sl])
    return torch.cat(outs, dim=-1)


def window_token_index(height, width, window_h, window_w):
    """(nW, window_h*window_w) indices into the row-major padded map, plus the padded map size."""
    rows, cols = -(-height // window_h), -(-width // window_w)
    padded_w = cols * window_w
    index = []
    for wy in range(rows):
        for wx in range(cols):
            index.append([(wy * window_h + y) * padded_w + wx * window_w + x
                          for y in range(window_h) for x in range(window_w)])
    return torch.tensor(index), rows * window_h, padded_w


def pad_map(x, height, width, padded_h, padded_w):
    b, _, c = x.shape
    out = torch.zeros(b, padded_h, padded_w, c, dtype=x.dtype)
    out[:, :height, :width] = x.reshape(b, height, width, c)
    return out.reshape(b, padded_h * padded_w, c)


def window_attention(q, k, v, num_heads, height, width, window_h, window_w, padding="zeros", lepe_weight=None,
                     lepe_bias=None, scale=None):
    """Per-window softmax attention by explicit index gathering (padding "zeros" or "masked") + per-window LePE."""
    b, n, c = q.shape
    index, padded_h, padded_w = window_token_index(height, width, window_h, window_w)
    qp, kp, vp = (pad_map(t, height, width, padded_h, padded_w)[:, index] for t in (q, k, v))  # (B, nW, L, C)
    valid = pad_map(torch.ones(1, n, 1, dtype=q.dtype), height, width, padded_h, padded_w)[0, index, 0]
    bias = None
    if padding == "masked":
        bias = torch.zeros(valid.shape, dtype=q.dtype).masked_fill(valid == 0, float("-inf"))[:, None, :]
    result = softmax_attention(qp, kp, vp, num_heads, scale, bias)
    if lepe_weight is not None:
        windows = index.shape[0]
        image = vp.transpose(2, 3).reshape(b * windows, c, window_h, window_w)
        conv = F.conv2d(image, lepe_weight.to(q.dtype), None if lepe_bias is None else lepe_bias.to(q.dtype),
                        padding=lepe_weight.shape[-1] // 2, groups=c)
        result = result + conv.reshape(b, windows, c, -1).transpose(2, 3)
    out = torch.zeros(b, padded_h * padded_w, c, dtype=q.dtype)
    out[:, index] = result
    return out.reshape(b, padded_h, padded_w, c)[:, :height, :width].reshape(b, n, c)


def full_map_lepe(v, height, width, weight, bias=None):
    b, n, c = v.shape
    image = v.transpose(1, 2).reshape(b, c, height, width)
    out = F.conv2d(image, weight.to(v.dtype), None if bias is None else bias.to(v.dtype),
                   padding=weight.shape[-1] // 2, groups=c)
    return out.reshape(b, c, n).transpose(1, 2)


def efficient_attention_matrix(q, k, num_heads):
    """The implied N x N EFFATT matrices softmax_features(q) softmax_tokens(k)^T, one per head: (h, B, N, N)."""
    mats = []
    for sl in head_slices(q.shape[-1], num_heads):
        mats.append(torch.softmax(q[..., sl], dim=-1) @ torch.softmax(k[..., sl], dim=1).transpose(-1, -2))
    return torch.stack(mats)


def efficient_attention_quadratic(q, k, v, num_heads):
    mats = efficient_attention_matrix(q, k, num_heads)
    return torch.cat([mats[i] @ v[..., sl] for i, sl in enumerate(head_slices(q.shape[-1], num_heads))], dim=-1)


def efficient_attention_linear(q, k, v, num_heads):
    """EFFATT in its linear (associative) form, the way a naive implementation writes it."""
    outs = []
    for sl in head_slices(q.shape[-1], num_heads):
        context = torch.softmax(k[..., sl], dim=1).transpose(-1, -2) @ v[..., sl]
        outs.append(torch.softmax(q[..., sl], dim=-1) @ context)
    return torch.cat(outs, dim=-1)


def raw_exp_attention_normalised(q, k, v, num_heads):
    """ELFATT paper v1's exp(Q) exp(K)^T V, row-normalised (the form the README v2 replaced)."""
    outs = []
    for sl in head_slices(q.shape[-1], num_heads):
        mat = torch.exp(q[..., sl]) @ torch.exp(k[..., sl]).transpose(-1, -2)
        outs.append((mat / mat.sum(-1, keepdim=True)) @ v[..., sl])
    return torch.cat(outs, dim=-1)


def qt_phi(x, alpha, beta, gamma, d):
    """[alpha x^2, beta sqrt(4/d) x, gamma] along the last axis."""
    return torch.cat([alpha * x ** 2, beta * math.sqrt(4.0 / d) * x, gamma * torch.ones_like(x[..., :1])], dim=-1)


def lite_mla_groups(qkv, head_dim):
    """(B, G*3d, H, W) -> list over groups of (q, k, v), each (B, N, d), by explicit channel arithmetic."""
    b, channels, height, width = qkv.shape
    flat = qkv.reshape(b, channels, height * width).transpose(1, 2)
    groups = []
    for g in range(channels // (3 * head_dim)):
        base = g * 3 * head_dim
        groups.append((flat[..., base:base + head_dim], flat[..., base + head_dim:base + 2 * head_dim],
                       flat[..., base + 2 * head_dim:base + 3 * head_dim]))
    return groups


def _lite_mla_features(q, k, group, head_dim, kernel, alpha, beta, gamma):
    """phi(q), phi(k) of one head group: ReLU, or QT-ViT's quadratic map with that group's (or the shared) a, b, c."""
    if kernel == "relu":
        return torch.relu(q), torch.relu(k)
    a, bb, c = (p[group] if len(p) > 1 else p[0] for p in (alpha, beta, gamma))
    return qt_phi(q, a, bb, c, head_dim), qt_phi(k, a, bb, c, head_dim)


def lite_mla_quadratic(qkv, head_dim, kernel="relu", eps=1e-15, alpha=None, beta=None, gamma=None):
    """Explicit N x N linear-attention matrices phi(q) phi(k)^T, row-normalised (EfficientViT's quadratic path)."""
    b, channels, height, width = qkv.shape
    outs = []
    for g, (q, k, v) in enumerate(lite_mla_groups(qkv, head_dim)):
        fq, fk = _lite_mla_features(q, k, g, head_dim, kernel, alpha, beta, gamma)
        sim = fq @ fk.transpose(-1, -2)
        outs.append((sim @ v) / (sim.sum(-1, keepdim=True) + eps))
    out = torch.cat(outs, dim=-1)
    return out.transpose(1, 2).reshape(b, -1, height, width)


def lite_mla_linear(qkv, head_dim, kernel="relu", eps=1e-15, alpha=None, beta=None, gamma=None):
    """EfficientViT's relu_linear_att written naively (padded V, two matmuls, division) in the input dtype."""
    b, channels, height, width = qkv.shape
    outs = []
    for g, (q, k, v) in enumerate(lite_mla_groups(qkv, head_dim)):
        fq, fk = _lite_mla_features(q, k, g, head_dim, kernel, alpha, beta, gamma)
        v_pad = torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)  # (B, N, d+1)
        vk = fk.transpose(-1, -2) @ v_pad  # (B, F, d+1)
        out = fq @ vk
        outs.append(out[..., :head_dim] / (out[..., head_dim:] + eps))
    out = torch.cat(outs, dim=-1)
    return out.transpose(1, 2).reshape(b, -1, height, width)


def gaussian(x, y):
    """exp(-|x_i - y_j|^2 / 2) by explicit differences: x (..., M, d), y (..., N, d) -> (..., M, N)."""
    diff = x[..., :, None, :] - y[..., None, :, :]
    return torch.exp(-0.5 * (diff * diff).sum(-1))


def soft_attention(q, landmarks, v, num_heads, inverse, symmetric_norm):
    """P^T M P v per head with M from ``inverse(A)`` (SOFT) or D^-1/2 inverse(A) D^-1/2 (SOFT++)."""
    outs = []
    for sl in head_slices(q.shape[-1], num_heads):
        P = gaussian(landmarks[..., sl], q[..., sl])
        A = gaussian(landmarks[..., sl], landmarks[..., sl])
        M = inverse(A)
        if symmetric_norm:
            s = A.sum(-1) ** -0.5
            M = s[..., :, None] * M * s[..., None, :]
        outs.append(P.transpose(-1, -2) @ (M @ (P @ v[..., sl])))
    return torch.cat(outs, dim=-1)


def newton_raphson(A, iters):
    """SOFT Algorithm 2 with alpha = 1 / max_rowsum(A)^2 per matrix, in A's dtype."""
    norm = A.abs().sum(-1).max(-1).values[..., None, None]
    X = A / norm ** 2
    for _ in range(iters):
        X = 2 * X - X @ A @ X
    return X


def kernel_attention(q, k, v, num_heads, phi, eps):
    """Row-normalised kernel attention with an explicit (N x M) matrix phi(q) phi(k)^T per head."""
    outs = []
    for sl in head_slices(q.shape[-1], num_heads):
        mat = phi(q[..., sl], True) @ phi(k[..., sl], False).transpose(-1, -2)
        outs.append((mat @ v[..., sl]) / (mat.sum(-1, keepdim=True) + eps))
    return torch.cat(outs, dim=-1)


def multi_spot(q, k, v, num_heads, height, width, region, topk, levels, log_ratios, scale=None, poly=None):
    """Multi-Spot softmax mode by explicit loops: per head and region, the mean query selects the top-k tokens and
    top-k pooled groups (groups averaged by index lists); one softmax over the union with bias log p_hat."""
    b, n, c = q.shape
    d = c // num_heads
    scale = d ** -0.5 if scale is None else scale
    out = torch.zeros_like(q)
    region_index, _, _ = window_token_index(height, width, region, region)
    pooled = []
    for pool, count in levels:
        groups, _, _ = window_token_index(height, width, pool, pool)
        pooled.append((groups, count))
    for bi in range(b):
        for sl in head_slices(c, num_heads):
            qh, kh, vh = q[bi, :, sl], k[bi, :, sl], v[bi, :, sl]
            for tokens in region_index:
                rep = qh[tokens].mean(0)
                keys, values, biases = [], [], []
                if topk:
                    chosen = (kh @ rep).topk(topk).indices
                    keys.append(kh[chosen])
                    values.append(vh[chosen])
                    biases.append(torch.zeros(topk, dtype=q.dtype))
                for (groups, count), log_ratio in zip(pooled, log_ratios):
                    kg = torch.stack([kh[g].mean(0) for g in groups])
                    vg = torch.stack([vh[g].mean(0) for g in groups])
                    if count is not None and count < len(groups):
                        chosen = (kg @ rep).topk(count).indices
                        kg, vg = kg[chosen], vg[chosen]
                    keys.append(kg)
                    values.append(vg)
                    biases.append(torch.full((kg.shape[0],), float(log_ratio), dtype=q.dtype))
                keys, values, bias = torch.cat(keys), torch.cat(values), torch.cat(biases)
                if poly is not None:
                    a, bb = poly
                    values = values + bb * values ** 2 + a * values ** 3
                weights = torch.softmax(qh[tokens] @ keys.T * scale + bias, dim=-1)
                out[bi, tokens, sl] = weights @ values
    return out


def multi_spot_vectorised(q, k, v, num_heads, height, width, region, topk, levels, log_ratios, scale=None):
    """The same selection and softmax as :func:`multi_spot`, batched over regions with index gathers."""
    b, n, c = q.shape
    d = c // num_heads
    scale = d ** -0.5 if scale is None else scale
    region_index, _, _ = window_token_index(height, width, region, region)  # (R, s)
    out = torch.zeros_like(q)
    batch = torch.arange(b)[:, None, None]
    for sl in head_slices(c, num_heads):
        qh, kh, vh = q[..., sl], k[..., sl], v[..., sl]
        queries = qh[:, region_index]  # (B, R, s, d)
        rep = queries.mean(2)  # (B, R, d)
        keys, values, biases = [], [], []
        if topk:
            chosen = (rep @ kh.transpose(-1, -2)).topk(topk, dim=-1).indices  # (B, R, k)
            keys.append(kh[batch, chosen])
            values.append(vh[batch, chosen])
            biases.append(torch.zeros(topk, dtype=q.dtype))
        for (pool, count), log_ratio in zip(levels, log_ratios):
            groups, _, _ = window_token_index(height, width, pool, pool)
            kg, vg = kh[:, groups].mean(2), vh[:, groups].mean(2)  # (B, G, d)
            if count is not None and count < groups.shape[0]:
                chosen = (rep @ kg.transpose(-1, -2)).topk(count, dim=-1).indices
                kg, vg = kg[batch, chosen], vg[batch, chosen]
            else:
                kg = kg[:, None].expand(-1, region_index.shape[0], -1, -1)
                vg = vg[:, None].expand(-1, region_index.shape[0], -1, -1)
            keys.append(kg)
            values.append(vg)
            biases.append(torch.full((kg.shape[2],), float(log_ratio), dtype=q.dtype))
        keys, values, bias = torch.cat(keys, 2), torch.cat(values, 2), torch.cat(biases)
        weights = torch.softmax(queries @ keys.transpose(-1, -2) * scale + bias, dim=-1)
        out[:, region_index.reshape(-1), sl] = (weights @ values).reshape(b, -1, d)
    return out
