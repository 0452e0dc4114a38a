"""FP16 behaviour of every operator core, inputs scaled x10, up to N = 16384.

Bound (CONVENTIONS.md): error(ours, FP16 I/O) <= 2 x error(naive), both against a high-precision reference
computed from the *same* FP16-rounded inputs, where

* error = max |out - ref| / max |ref| (so all ops are judged on the scale of their output);
* ref = the operator in FP64 (FP32 where noted) on the FP16 inputs upcast;
* naive = the same formula evaluated by PyTorch directly in FP16, no upcasting (``ops_reference``, the
  functions named per case below; FP16 matmuls/softmax/exp exactly as PyTorch runs them on this CPU).

If the naive FP16 result is not finite (overflow), ours must be finite and within ``FALLBACK_TOL`` = 2e-3
(4 FP16 half-ulps) of the reference. Quadratic ops (GLOBAL softmax, CSWin stripes) are compared against the
naive baseline at N = 1024: PyTorch's CPU FP16 matmul runs at ~1.5 GFLOP/s, so a naive FP16 16384^2 attention
would take minutes. At N = 16384 they must be finite and within FALLBACK_TOL of an FP32 reference.
Multi-Spot's reference is FP32 rather than FP64: top-k selection has to be made in the precision we compute in
for outputs to be comparable (an FP64 reference could pick a different token at a near-tie).
"""
import math

import pytest
import torch

import ops_reference as ref
from edgeattn.ops import (blockify_attention, cross_shaped_window_attention, efficient_attention, elfatt_attention,
                          flurka_attention, lite_mla_attention, multi_spot_attention, soft_kernel_attention,
                          softmax_attention)
from edgeattn.ops.flurka import compress_tokens, orthogonal_gaussian_features

FALLBACK_TOL = 2e-3
SCALE = 10.0
HEADS, D = 2, 32
C = HEADS * D


def rand16(*shape, seed, scale=SCALE):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator) * scale).half()


def rel_error(out, reference):
    assert reference.abs().max() > 0, "degenerate case: the reference output is all zeros"
    return ((out.double() - reference.double()).abs().max() / reference.double().abs().max()).item()


def check(ours, reference, naive=None):
    assert ours.dtype == torch.float16
    assert torch.isfinite(ours).all(), "FP16 output is not finite"
    ours_error = rel_error(ours, reference)
    if naive is not None and torch.isfinite(naive).all():
        naive_error = rel_error(naive, reference)
        assert ours_error <= 2 * naive_error, (ours_error, naive_error)
    else:
        assert ours_error <= FALLBACK_TOL, ours_error
    return ours_error


def map_side(n):
    side = int(math.isqrt(n))
    assert side * side == n
    return side


# ------------------------------------------------------------------ cases: (ours, naive) callables on FP16 inputs

def channel_halves(first, second):
    """The naive form of an op that runs ``first(q, k, v)`` on the first D channels and ``second`` on the rest."""
    return lambda t: torch.cat([first(*(x[..., :D] for x in t)), second(*(x[..., D:] for x in t))], dim=-1)


def case_blockify(n):
    side = map_side(n)
    q, k, v = (rand16(1, n, C, seed=s) for s in (1, 2, 3))
    w, b = rand16(C, 1, 3, 3, seed=4, scale=0.3), rand16(C, seed=5, scale=0.3)
    padding = "none" if side % 7 == 0 else "masked"
    ours = lambda t: blockify_attention(*t, num_heads=HEADS, height=side, width=side, window_size=7,  # noqa: E731
                                        padding=padding, lepe_weight=w.to(t[0].dtype), lepe_bias=b.to(t[0].dtype))
    naive = lambda t: ref.window_attention(*t, HEADS, side, side, 7, 7, "masked" if padding == "masked" else  # noqa
                                           "zeros", w.to(t[0].dtype), b.to(t[0].dtype))
    return (q, k, v), ours, naive


def case_effatt(n):
    q, k, v = (rand16(1, n, C, seed=s) for s in (6, 7, 8))
    return (q, k, v), lambda t: efficient_attention(*t, num_heads=HEADS), \
        lambda t: ref.efficient_attention_linear(*t, HEADS)


def case_elfatt(n):
    side = map_side(n)
    q, k, v = (rand16(1, n, C, seed=s) for s in (9, 10, 11))
    padding = "none" if side % 7 == 0 else "masked"

    def ours(t):
        return elfatt_attention(*t, num_heads=HEADS, num_global_heads=1, height=side, width=side, window_size=7,
                                padding=padding)

    naive = channel_halves(lambda *t: ref.efficient_attention_linear(*t, 1),
                           lambda *t: ref.window_attention(*t, 1, side, side, 7, 7,
                                                           "masked" if padding == "masked" else "zeros"))
    return (q, k, v), ours, naive


def case_litemla(kernel):
    def build(n):
        side = map_side(n)
        qkv_map = rand16(1, HEADS * 3 * D, side, side, seed=12)
        params = dict(qt_alpha=[0.5, 0.8], qt_beta=[1.0, 1.2], qt_gamma=[1.0, 0.9]) if kernel != "relu" else {}
        plist = (params.get("qt_alpha"), params.get("qt_beta"), params.get("qt_gamma"))
        ours = lambda t: lite_mla_attention(t[0], head_dim=D, kernel=kernel, **params)  # noqa: E731
        naive = lambda t: ref.lite_mla_linear(t[0], D, kernel, 1e-15, *plist)  # noqa: E731
        return (qkv_map,), ours, naive
    return build


def case_soft(n):
    # x10 on v only: at x10 every Gaussian entry between distinct tokens underflows (the kernel degenerates to an
    # exact copy of the landmark tokens' v), so q and the landmarks stay in the kernel's working range (scale 0.35
    # after the d^-1/4 scaling, entries ~0.1) where the N-term sum P v is the FP16 hazard.
    q, v = rand16(1, n, C, seed=13, scale=0.35), rand16(1, n, C, seed=14)
    landmarks = rand16(1, 49, C, seed=15, scale=0.35)
    ours = lambda t: soft_kernel_attention(*t, num_heads=HEADS, newton_iters=20, symmetric_norm=True)  # noqa: E731
    naive = lambda t: ref.soft_attention(t[0], t[1], t[2], HEADS, lambda A: ref.newton_raphson(A, 20), True)  # noqa
    return (q, landmarks, v), ours, naive


def case_soft_saturated(n):
    """All inputs x10: the landmarks are 49 of the tokens (anything else makes P exactly 0); must stay finite."""
    q, v = rand16(1, n, C, seed=13), rand16(1, n, C, seed=14)
    landmarks = q[:, torch.linspace(0, n - 1, 49).long()]
    ours = lambda t: soft_kernel_attention(*t, num_heads=HEADS, newton_iters=20, symmetric_norm=True)  # noqa: E731
    naive = lambda t: ref.soft_attention(t[0], t[1], t[2], HEADS, lambda A: ref.newton_raphson(A, 20), True)  # noqa
    return (q, landmarks, v), ours, naive


def case_compress(n):
    """FLuRKA's sequence compression E x (an N-term sum per output)."""
    x, E = rand16(1, n, C, seed=16), rand16(64, n, seed=19, scale=1 / 8.0)
    return (x, E), lambda t: compress_tokens(*t), lambda t: t[1] @ t[0]


def case_flurka(feature_map):
    def build(n):
        # the core's inputs are the compressed, projected k and v (FP16 tensors in an FP16 engine); compressing
        # x10 tokens with E ~ N(0, 1/64) gives entries ~10 sqrt(N/64)/8, reproduced here directly
        q = rand16(1, n, C, seed=16)
        k, v = (rand16(1, 64, C, seed=s, scale=SCALE * math.sqrt(n / 64.0) / 8) for s in (17, 18))
        projection = orthogonal_gaussian_features(int(D * math.log(D)), D, torch.Generator().manual_seed(0))

        def ours(t):
            return flurka_attention(*t, num_heads=HEADS, feature_map=feature_map, projection=projection)

        def naive(t):
            if feature_map == "elu":
                phi = lambda x, is_query: torch.nn.functional.elu(x) + 1  # noqa: E731
            else:  # FAVOR+ as written (Lemma 1), no stabiliser
                def phi(x, is_query):
                    x = x * D ** -0.25
                    exponent = x @ projection.to(x.dtype).T - 0.5 * (x * x).sum(-1, keepdim=True)
                    return torch.exp(exponent) / math.sqrt(projection.shape[0])
            return ref.kernel_attention(*t, HEADS, phi, 1e-6)
        return (q, k, v), ours, naive
    return build


def case_multispot(n):
    side = map_side(n)
    q, k, v = (rand16(1, n, C, seed=s) for s in (20, 21, 22))
    levels = [(2, 16), (8, None)]
    kwargs = dict(num_heads=HEADS, height=side, width=side, region_size=8, topk=64, pool_sizes=[2, 8],
                  pool_topk=[16, None])
    ours = lambda t: multi_spot_attention(*t, **kwargs)  # noqa: E731
    naive = lambda t: ref.multi_spot_vectorised(*t, HEADS, side, side, 8, 64, levels,  # noqa: E731
                                                [math.log(4), math.log(64)])
    return (q, k, v), ours, naive


LINEAR_CASES = {
    "blockify": case_blockify, "effatt": case_effatt, "elfatt": case_elfatt,
    "litemla-relu": case_litemla("relu"), "litemla-qt": case_litemla("quadratic_taylor"), "soft++": case_soft,
    "soft++-saturated": case_soft_saturated, "flurka-compress": case_compress, "flurka-elu": case_flurka("elu"),
    "flurka-performer": case_flurka("performer"), "multispot": case_multispot,
}


@pytest.mark.parametrize("name", sorted(LINEAR_CASES))
@pytest.mark.parametrize("n", [3136, 16384])
def test_fp16_error_within_twice_naive_fp16(name, n):
    inputs, ours, naive = LINEAR_CASES[name](n)
    reference_dtype = torch.float32 if name == "multispot" else torch.float64
    with torch.no_grad():
        reference = ours(tuple(t.to(reference_dtype) for t in inputs))
        check(ours(inputs), reference, naive(inputs))


def global_case(n):
    q, k, v = (rand16(1, n, C, seed=s) for s in (23, 24, 25))
    return (q, k, v), lambda t: softmax_attention(*t, num_heads=HEADS), \
        lambda t: ref.softmax_attention(*t, HEADS)


def cswin_case(n):
    side = map_side(n)
    q, k, v = (rand16(1, n, C, seed=s) for s in (26, 27, 28))

    def ours(t):
        return cross_shaped_window_attention(*t, num_heads=HEADS, height=side, width=side, split_size=8)

    naive = channel_halves(lambda *t: ref.window_attention(*t, 1, side, side, side, 8),
                           lambda *t: ref.window_attention(*t, 1, side, side, 8, side))
    return (q, k, v), ours, naive


@pytest.mark.parametrize("build", [global_case, cswin_case], ids=["global", "cswin"])
def test_fp16_quadratic_ops(build):
    with torch.no_grad():
        inputs, ours, naive = build(1024)
        check(ours(inputs), ours(tuple(t.double() for t in inputs)), naive(inputs))
        inputs, ours, _ = build(16384)
        check(ours(inputs), ours(tuple(t.float() for t in inputs)))


def test_naive_fp16_baselines_do_fail_where_expected():
    """The hazards the FP32 internals guard against are real: naive FP16 overflows on these inputs."""
    with torch.no_grad():
        inputs, _, naive = case_litemla("relu")(16384)
        assert not torch.isfinite(naive(inputs)).all()
        inputs, _, naive = case_litemla("quadratic_taylor")(16384)
        assert not torch.isfinite(naive(inputs)).all()
