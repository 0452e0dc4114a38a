"""The cost model: multiply-accumulates (MACs), FLOPs and compulsory bytes of each attention core, from shapes.

One formula per core, used by the model counter (:mod:`edgeattn.models.complexity`, ``edgeattn models``), the CPU
operator benchmark (:mod:`edgeattn.ops.benchmark`, ``edgeattn ops-bench``) and the GPU kernel benchmarks
(``benchmarks/``). Pure Python (no torch, no numpy), so board-side and benchmark scripts import it as they are.

Conventions:

* Every function returns the MACs of the core's matrix products between activations for ``batch`` images
  (default 1). The projections (qkv, output) are layers, not part of the core; softmax, exponentials, feature
  maps and divisions are not MACs. One MAC is 2 FLOPs (:func:`flops`), the fvcore "MAC = FLOP" convention the
  papers' tables use being the MAC count itself.
* Shapes: ``tokens`` N, ``channels`` C = ``heads`` x d (d the head width), a map of ``height`` x ``width`` tokens.
* :func:`compulsory_bytes` is the traffic no implementation can avoid: each input read once, each output written
  once. Achieved bytes/s against it is the fraction of memory bandwidth a kernel reaches.

Sources of the formulas: the operators' papers and official code named in :mod:`edgeattn.ops` (one docstring per
core there gives its equation); the MAC counts reproduce the papers' tables (tests/models/test_complexity.py).
"""

#: FLOPs per multiply-accumulate
FLOPS_PER_MAC = 2


def flops(macs):
    """FLOPs of ``macs`` multiply-accumulates (2 each)."""
    return FLOPS_PER_MAC * macs


def compulsory_bytes(element_bytes, inputs, outputs):
    """Bytes every implementation must move: each input read once and each output written once.

    ``inputs`` / ``outputs``: element counts, one per tensor; ``element_bytes``: 2 for FP16, 4 for FP32."""
    return element_bytes * (sum(inputs) + sum(outputs))


def token_tensors_bytes(tokens, channels, element_bytes, inputs=3, outputs=1, batch=1):
    """:func:`compulsory_bytes` of a core whose ``inputs`` and ``outputs`` are all (batch, N, C) tensors."""
    size = batch * tokens * channels
    return compulsory_bytes(element_bytes, [size] * inputs, [size] * outputs)


def softmax_attention_macs(queries, keys, channels, batch=1):
    """softmax(Q K^T) V: queries x keys x C for the scores and as many for the weighted sum (any head split)."""
    return batch * 2 * queries * keys * channels


def _window_sizes(size, window, exact):
    """(count, extent) of the windows along one axis: full windows, then the partial one (padded or at its size)."""
    full, rest = divmod(size, window)
    if not rest:
        return [(full, window)]
    return [(full, window), (1, rest if exact else window)]


def window_attention_macs(height, width, window, channels, exact_partial_windows=False, batch=1):
    """Softmax attention inside non-overlapping ``window`` x ``window`` windows (ELFATT's blockify head, Swin):
    every token attends to the L tokens of its window, 2 x L^2 x C per window.

    A map that the window does not divide has partial windows at its right and bottom edges. By default they count
    at full size (the map padded to a multiple of the window, as zero padding computes it and the model counter
    counts it); ``exact_partial_windows=True`` counts them at their real size, the work masked padding does."""
    total = 0
    for rows, extent_h in _window_sizes(height, window, exact_partial_windows):
        for cols, extent_w in _window_sizes(width, window, exact_partial_windows):
            total += rows * cols * (extent_h * extent_w) ** 2
    return batch * 2 * total * channels


def cswin_stripes_macs(height, width, split, channels, batch=1):
    """CSWin's cross-shaped windows: half the channels attend within height x ``split`` stripes (each token sees
    height x split keys), the other half within ``split`` x width stripes."""
    tokens = height * width
    half = channels // 2
    return batch * (2 * tokens * height * split * half + 2 * tokens * split * width * (channels - half))


def efficient_attention_macs(tokens, channels, heads, batch=1):
    """EFFATT: context = softmax(K)^T V and softmax(Q) context, N x d x d each per head: 2 x N x d x C."""
    return batch * 2 * tokens * (channels // heads) * channels


def elfatt_macs(height, width, window, channels, heads, global_heads, exact_partial_windows=False, batch=1):
    """ELFATT: EFFATT on the first ``global_heads`` heads' channels, window softmax on the rest.
    Returns (linear MACs, softmax MACs): the ELFATT paper's FA column leaves out the softmax part."""
    d = channels // heads
    c1 = global_heads * d
    linear = efficient_attention_macs(height * width, c1, global_heads, batch) if c1 else 0
    softmax = window_attention_macs(height, width, window, channels - c1, exact_partial_windows, batch)
    return linear, softmax


def lite_mla_macs(tokens, groups, head_dim, kernel="relu", batch=1):
    """EfficientViT's LiteMLA over ``groups`` head groups of width d with the padded-V trick: [V; 1] phi(K)^T and
    its product with phi(Q), N x F x (d + 1) each, F = d (ReLU) or 2d + 1 (QT-ViT's quadratic Taylor features)."""
    features = lite_mla_features(head_dim, kernel)
    return batch * groups * 2 * tokens * features * (head_dim + 1)


def lite_mla_features(head_dim, kernel):
    """Feature width of LiteMLA's kernel: d for ReLU, 2d + 1 for QT-ViT's [alpha x^2, beta sqrt(4/d) x, gamma]."""
    if kernel == "relu":
        return head_dim
    if kernel == "quadratic_taylor":
        return 2 * head_dim + 1
    raise ValueError("unknown LiteMLA kernel {!r}".format(kernel))


def soft_newton_macs(landmarks, heads, iterations, batch=1):
    """SOFT's Newton-Raphson pseudo-inverse of the m x m landmark kernel: per step X A and (X A) X, 2 m^3."""
    return batch * heads * iterations * 2 * landmarks ** 3


def soft_macs(tokens, landmarks, heads, head_dim, iterations, batch=1):
    """SOFT / SOFT++ Nystrom attention with m landmarks, per head: P = L Q^T (m N d), A = L L^T (m^2 d), P V
    (m N d), M (P V) (m^2 d), P^T (M P V) (N m d), plus :func:`soft_newton_macs` for M = pinv(A).
    Returns (total MACs, Newton-Raphson MACs inside the total)."""
    n, m, d = tokens, landmarks, head_dim
    newton = soft_newton_macs(m, heads, iterations, batch)
    return batch * heads * (3 * m * n * d + 2 * m * m * d) + newton, newton


def agent_attention_macs(tokens, agents, channels, batch=1):
    """Agent attention with A agent tokens: agents against keys and their weighted sum of values (2 x A x N x C),
    then queries against agents and the weighted sum of agent values (2 x N x A x C)."""
    return batch * 4 * tokens * agents * channels


def focused_linear_attention_macs(tokens, channels, heads, batch=1):
    """FLatten's focused linear attention per head: phi(K)^T V and phi(Q) (phi(K)^T V), N x d x d each, plus the
    normaliser phi(Q) . mean phi(K), N x d: 2 x N x d x C + N x C."""
    d = channels // heads
    return batch * (2 * tokens * d * channels + tokens * channels)


def kernel_attention_macs(queries, keys, features, channels, heads, batch=1):
    """Row-normalised kernel (linear) attention on F features per head: phi(K)^T V (keys x F x d per head),
    phi(Q) (phi(K)^T V) (queries x F x d per head) and the normaliser phi(Q) . sum phi(K) (queries x F per head)."""
    return batch * (keys * features * channels + queries * features * channels + queries * features * heads)


def flurka_macs(tokens, rank, channels, heads, features, performer, batch=1):
    """FLuRKA: Linformer compression of K and V to ``rank`` tokens (E1 K, E2 V: 2 x rank x N x C), Performer's
    random projections of the N queries and ``rank`` keys when ``performer`` ((N + rank) x F x C), then
    :func:`kernel_attention_macs` over the compressed keys."""
    macs = 2 * rank * tokens * channels
    if performer:
        macs += (tokens + rank) * features * channels
    return batch * (macs + kernel_attention_macs(tokens, rank, features, channels, heads))


def token_performer_macs(tokens, features, width, batch=1):
    """T2T-ViT's token Performer (one head of width e, F random features, keys not compressed): projections of
    queries and keys (2 x N x F x e) and kernel attention over all N keys."""
    return batch * (2 * tokens * features * width + kernel_attention_macs(tokens, tokens, features, width, 1))


def multi_spot_macs(tokens, prefix, channels, region_size, topk, pools, batch=1):
    """One Multi-Spot core (softmax mode): each region's representative query scored against the P + N keys (when
    ``topk``) and against the pooled keys of the levels that select a top-k, then every map query against its
    region's topk + pooled keys (scores and weighted sum), and the P prefix queries against all P + N keys.
    ``pools``: (pooled token count, top-k or None for all) per level."""
    regions = tokens // (region_size * region_size)
    selected = topk + sum(count if level_topk is None else level_topk for count, level_topk in pools)
    macs = 2 * tokens * selected * channels + 2 * prefix * (prefix + tokens) * channels
    if topk:
        macs += regions * (prefix + tokens) * channels
    macs += sum(regions * count * channels for count, level_topk in pools if level_topk is not None)
    return batch * macs
