"""Small NumPy (float64) implementations of the op contract, written from the ``semantics`` text of
export/schemas/*.yaml with explicit loops, independent of the ONNX function bodies and of edgeattn.ops.

They are deliberately naive (per batch / head / window) so that they read like the schema text.
"""
import numpy as np


def _softmax(x, axis):
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def blockify_attention(q, k, v, lepe_weight=None, lepe_bias=None, *, num_heads, height, width, window_size,
                       scale=0.0, has_lepe=0, padding="none"):
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    batch, tokens, channels = q.shape
    assert tokens == height * width
    head_dim = channels // num_heads
    s = scale if scale > 0 else head_dim ** -0.5
    ws = window_size
    if padding == "none":
        assert height % ws == 0 and width % ws == 0
    hp = -(-height // ws) * ws
    wp = -(-width // ws) * ws

    def padded(t):
        m = np.zeros((batch, hp, wp, channels))
        m[:, :height, :width] = t.reshape(batch, height, width, channels)
        return m

    qm, km, vm = padded(q), padded(k), padded(v)
    valid = np.zeros((hp, wp), bool)
    valid[:height, :width] = True
    out = np.zeros((batch, hp, wp, channels))
    for b in range(batch):
        for wy in range(0, hp, ws):
            for wx in range(0, wp, ws):
                qw = qm[b, wy:wy + ws, wx:wx + ws].reshape(ws * ws, channels)
                kw = km[b, wy:wy + ws, wx:wx + ws].reshape(ws * ws, channels)
                vw = vm[b, wy:wy + ws, wx:wx + ws].reshape(ws * ws, channels)
                key_ok = valid[wy:wy + ws, wx:wx + ws].reshape(-1)
                ow = np.zeros((ws * ws, channels))
                for h in range(num_heads):
                    c = slice(h * head_dim, (h + 1) * head_dim)
                    scores = qw[:, c] @ kw[:, c].T * s
                    if padding == "masked":
                        scores = np.where(key_ok[None, :], scores, -np.inf)
                    ow[:, c] = _softmax(scores, -1) @ vw[:, c]
                if has_lepe:
                    vwin = vm[b, wy:wy + ws, wx:wx + ws]  # (ws, ws, C)
                    halo = np.zeros((ws + 2, ws + 2, channels))
                    halo[1:-1, 1:-1] = vwin
                    conv = np.zeros((ws, ws, channels))
                    for dy in range(3):
                        for dx in range(3):
                            conv += halo[dy:dy + ws, dx:dx + ws] * np.asarray(lepe_weight)[:, 0, dy, dx]
                    ow += (conv + np.asarray(lepe_bias)).reshape(ws * ws, channels)
                out[b, wy:wy + ws, wx:wx + ws] = ow.reshape(ws, ws, channels)
    return out[:, :height, :width].reshape(batch, tokens, channels)


def efficient_attention(q, k, v, *, num_heads):
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    batch, tokens, channels = q.shape
    d = channels // num_heads
    out = np.zeros_like(q)
    for b in range(batch):
        for h in range(num_heads):
            c = slice(h * d, (h + 1) * d)
            q_hat = _softmax(q[b][:, c], axis=1)   # over the features of each token
            k_hat = _softmax(k[b][:, c], axis=0)   # over the tokens, per feature
            out[b][:, c] = q_hat @ (k_hat.T @ v[b][:, c])
    return out


def lite_mla(qkv, *, head_dim, kernel="relu", eps=1e-15, qt_alpha=(1.0,), qt_beta=(1.0,), qt_gamma=(1.0,)):
    qkv = np.asarray(qkv, np.float64)
    batch, channels, height, width = qkv.shape
    d = head_dim
    groups = channels // (3 * d)
    out = np.zeros((batch, groups * d, height, width))
    for b in range(batch):
        for g in range(groups):
            block = qkv[b, g * 3 * d:(g + 1) * 3 * d].reshape(3 * d, height * width).T  # (N, 3d)
            q, k, v = block[:, :d], block[:, d:2 * d], block[:, 2 * d:]
            if kernel == "relu":
                phi = lambda x: np.maximum(x, 0.0)  # noqa: E731
            else:
                i = g if len(qt_alpha) == groups else 0
                a, bb, gg = qt_alpha[i], qt_beta[i], qt_gamma[i]
                phi = lambda x: np.concatenate(  # noqa: E731
                    [a * x * x, bb * np.sqrt(4.0 / d) * x, np.full((x.shape[0], 1), gg)], axis=1)
            fq, fk = phi(q), phi(k)
            num = fq @ (fk.T @ v)
            den = fq @ fk.sum(axis=0)
            res = num / (den[:, None] + eps)
            out[b, g * d:(g + 1) * d] = res.T.reshape(d, height, width)
    return out


def soft_kernel_attention(q, landmarks, v, *, num_heads, newton_iters=20, symmetric_norm=1):
    q, landmarks, v = (np.asarray(t, np.float64) for t in (q, landmarks, v))
    batch, tokens, channels = q.shape
    d = channels // num_heads
    out = np.zeros_like(q)

    def gauss(x, y):
        dist = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2 * x @ y.T
        return np.exp(-np.maximum(dist, 0.0) / 2)

    for b in range(batch):
        for h in range(num_heads):
            c = slice(h * d, (h + 1) * d)
            l_, q_, v_ = landmarks[b][:, c], q[b][:, c], v[b][:, c]
            p = gauss(l_, q_)      # (M, N)
            a = gauss(l_, l_)      # (M, M)
            x = a / a.sum(1).max() ** 2
            for _ in range(newton_iters):
                x = 2 * x - x @ a @ x
            if symmetric_norm:
                s = a.sum(1) ** -0.5
                m = s[:, None] * x * s[None, :]
            else:
                m = x
            out[b][:, c] = p.T @ (m @ (p @ v_))
    return out


REFERENCES = {
    "EdgeAttnBlockifyAttention": blockify_attention,
    "EdgeAttnEfficientAttention": efficient_attention,
    "EdgeAttnLiteMLA": lite_mla,
    "EdgeAttnSoftKernelAttention": soft_kernel_attention,
}
