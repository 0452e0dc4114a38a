"""The same math as the edgeattn kernels in PyTorch, the baselines of kernels_gpu.py: blockify as SDPA over the
windows, EFFATT and LiteMLA ReLU as cuBLAS bmm decompositions (torch is imported where they run)."""


def blockify_sdpa(q, k, v, heads, height, width, window, backend=None):
    """Window attention through scaled_dot_product_attention over the windows as one batch; zero padding at the
    bottom/right (the op's padding "zeros") and cropping; ``backend`` a torch.nn.attention.SDPBackend or None."""
    import torch
    import torch.nn.functional as F

    b, n, c = q.shape
    d = c // heads
    ph, pw = -height % window, -width % window
    hp, wp = height + ph, width + pw

    def windows(t):
        t = t.view(b, height, width, c)
        if ph or pw:
            t = F.pad(t, (0, 0, 0, pw, 0, ph))
        t = t.view(b, hp // window, window, wp // window, window, heads, d)
        return t.permute(0, 1, 3, 5, 2, 4, 6).reshape(-1, heads, window * window, d)

    qw, kw, vw = windows(q), windows(k), windows(v)
    if backend is None:
        out = F.scaled_dot_product_attention(qw, kw, vw)
    else:
        from torch.nn.attention import sdpa_kernel

        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(qw, kw, vw)
    out = out.view(b, hp // window, wp // window, heads, window, window, d).permute(0, 1, 4, 2, 5, 3, 6)
    out = out.reshape(b, hp, wp, c)[:, :height, :width]
    return out.reshape(b, n, c)


def efficient_bmm(q, k, v, heads):
    """EFFATT with torch.bmm on (B * heads, N, d) in the input dtype (cuBLAS, FP32 accumulation)."""
    import torch

    b, n, c = q.shape
    d = c // heads

    def split(t):
        return t.view(b, n, heads, d).transpose(1, 2).reshape(b * heads, n, d)

    q_hat = torch.softmax(split(q), dim=-1)
    k_hat = torch.softmax(split(k), dim=1)
    context = torch.bmm(k_hat.transpose(1, 2), split(v))
    out = torch.bmm(q_hat, context)
    return out.view(b, heads, n, d).transpose(1, 2).reshape(b, n, c)


def lite_mla_relu_bmm(qkv, head_dim, eps=1e-15):
    """LiteMLA ReLU with torch.bmm on (B * G, d, N) in the input dtype; num / (den + eps) in FP32."""
    import torch

    b, channels, height, width = qkv.shape
    groups = channels // (3 * head_dim)
    n = height * width
    x = qkv.reshape(b * groups, 3 * head_dim, n)
    q, k, v = torch.relu(x[:, :head_dim]), torch.relu(x[:, head_dim:2 * head_dim]), x[:, 2 * head_dim:]
    v_pad = torch.nn.functional.pad(v, (0, 0, 0, 1), value=1.0)
    out = torch.bmm(torch.bmm(v_pad, k.transpose(1, 2)), q)
    if out.dtype in (torch.float16, torch.bfloat16):
        out = out.float()  # eps and the division want FP32, as in the op contract
    out = out[:, :head_dim] / (out[:, head_dim:] + eps)
    return out.to(qkv.dtype).reshape(b, groups * head_dim, height, width)


# ---- measurement -----------------------------------------------------------------------------------------------------
