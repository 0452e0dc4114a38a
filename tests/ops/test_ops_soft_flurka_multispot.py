"""SOFT / SOFT++, FLuRKA and Multi-Spot: identities of the papers (SOFT arXiv 2207.03341, FLuRKA arXiv 2306.15799,
Multi-Spot Transformer) and of the official SOFT code (fudan-zvg/SOFT)."""
import math

import pytest
import torch

import ops_reference as ref
from edgeattn.ops import (FLuRKAAttention, MultiSpotAttention, SOFTAttention, flurka_attention,
                          multi_spot_attention, newton_pinv, soft_kernel_attention, softmax_attention)
from edgeattn.ops.flurka import orthogonal_gaussian_features
from edgeattn.ops.soft import gaussian_kernel

DTYPES = [torch.float32, torch.float64]


def rand(*shape, dtype=torch.float64, seed=0, scale=1.0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator, dtype=torch.float64) * scale).to(dtype)


def landmark_matrix(m=49, d=32, spread=0.3, seed=0):
    points = rand(m, d, seed=seed, scale=spread)
    return ref.gaussian(points, points)


# ---------------------------------------------------------------- SOFT

def test_kernel_matrix_properties():
    points = rand(2, 49, 32, seed=1, scale=0.3)
    A = gaussian_kernel(points, points)
    torch.testing.assert_close(A, A.transpose(-1, -2), rtol=0, atol=1e-15)
    torch.testing.assert_close(torch.diagonal(A, dim1=-2, dim2=-1), torch.ones(2, 49, dtype=torch.float64),
                               rtol=0, atol=1e-14)
    assert A.min() > 0 and A.max() <= 1.0
    torch.testing.assert_close(A, ref.gaussian(points, points), rtol=1e-12, atol=1e-14)
    # |x|^2 + |y|^2 - 2xy cancels badly for large, nearly equal vectors: the clamp keeps every entry <= 1
    big = rand(8, 32, seed=2, dtype=torch.float32) * 1e3
    assert gaussian_kernel(big, big + 1e-4).max() <= 1.0


def test_newton_raphson_converges_monotonically_to_the_inverse():
    A = landmark_matrix()
    inverse = torch.linalg.inv(A)
    residuals = []
    for iters in range(21):
        X = newton_pinv(A, iters)
        torch.testing.assert_close(X, X.T, rtol=0, atol=1e-12 * X.abs().max().item())  # symmetric iterates
        residuals.append((torch.linalg.matrix_norm(A @ X @ A - A, ord=2) / torch.linalg.matrix_norm(A, ord=2)).item())
    assert all(later <= earlier * (1 + 1e-9) + 1e-14 for earlier, later in zip(residuals, residuals[1:]))
    assert residuals[-1] < 1e-12 < residuals[0]
    torch.testing.assert_close(newton_pinv(A, 20), inverse, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(newton_pinv(A, 20), ref.newton_raphson(A, 20), rtol=1e-12, atol=1e-12)


def test_newton_raphson_step_is_per_matrix():
    """No batch-wide statistic: a matrix's result does not depend on what else is in the batch."""
    # B's norm is 50x A's: a batch-wide max would shrink A's first step 2500-fold and leave it unconverged
    A, B = landmark_matrix(seed=3), 50.0 * landmark_matrix(seed=4)
    alone = newton_pinv(A, 20)
    batched = newton_pinv(torch.stack([A, B]), 20)
    torch.testing.assert_close(batched[0], alone, rtol=1e-13, atol=1e-15)
    torch.testing.assert_close(batched[1], torch.linalg.inv(B), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("dtype", DTYPES)
def test_soft_with_all_tokens_as_landmarks_is_exact_gaussian_attention(dtype):
    q = rand(2, 24, 64, dtype=dtype, seed=5, scale=0.35)
    v = rand(2, 24, 64, dtype=dtype, seed=6)
    out = soft_kernel_attention(q, q, v, num_heads=2, newton_iters=20, symmetric_norm=False)
    exact = torch.cat([ref.gaussian(q[..., sl], q[..., sl]) @ v[..., sl] for sl in ref.head_slices(64, 2)], dim=-1)
    tol = dict(rtol=1e-8, atol=1e-9) if dtype == torch.float64 else dict(rtol=2e-4, atol=2e-4)
    torch.testing.assert_close(out, exact, **tol)


def test_soft_plus_plus_with_all_tokens_is_s_dinv_sinv_dinv_s():
    q, v = rand(1, 20, 32, seed=7, scale=0.35), rand(1, 20, 32, seed=8)
    out = soft_kernel_attention(q, q, v, num_heads=1, newton_iters=20, symmetric_norm=True)
    expected = ref.soft_attention(q, q, v, 1, torch.linalg.inv, symmetric_norm=True)
    torch.testing.assert_close(out, expected, rtol=1e-8, atol=1e-9)
    S = ref.gaussian(q[0], q[0])
    assert (out[0] - S @ v[0]).abs().max() > 1e-2  # SOFT++ is not S itself


def test_soft_landmark_rows_are_exact_for_sampled_landmarks():
    q, v = rand(1, 40, 32, seed=9, scale=0.35), rand(1, 40, 32, seed=10)
    chosen = torch.arange(0, 40, 4)
    out = soft_kernel_attention(q, q[:, chosen], v, num_heads=1, newton_iters=20, symmetric_norm=False)
    exact = ref.gaussian(q[0], q[0]) @ v[0]
    torch.testing.assert_close(out[0, chosen], exact[chosen], rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("symmetric_norm", [False, True])
def test_soft_matches_explicit_nystrom(symmetric_norm):
    q, v = rand(2, 64, 64, seed=11, scale=0.35), rand(2, 64, 64, seed=12)
    landmarks = rand(2, 9, 64, seed=13, scale=0.35)
    out = soft_kernel_attention(q, landmarks, v, num_heads=2, newton_iters=20, symmetric_norm=symmetric_norm)
    expected = ref.soft_attention(q, landmarks, v, 2, lambda A: ref.newton_raphson(A, 20), symmetric_norm)
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-12)


def test_soft_module_landmarks_and_per_head_dwconv():
    torch.manual_seed(0)
    module = SOFTAttention(64, 2, sampling_ratio=4, dwconv_kernel=5).double()
    x = rand(2, 16 * 12, 64, seed=14)
    q = module.W_q(x) * 32 ** -0.25
    assert module.landmarks(q, (16, 12)).shape == (2, 4 * 3, 64)
    # official layout: V as (B*d, heads, H, W) through Conv2d(heads, heads, k, groups=heads)
    v = module.W_v(x)
    conv = torch.nn.functional.conv2d(v.reshape(2, 16, 12, 2, 32).permute(0, 4, 3, 1, 2).reshape(64, 2, 16, 12),
                                      module.dwconv.weight, padding=2, groups=2)
    local = conv.reshape(2, 32, 2, 16 * 12).permute(0, 3, 2, 1).reshape(2, 16 * 12, 64)
    core = soft_kernel_attention(q, module.landmarks(q, (16, 12)), v, num_heads=2)
    torch.testing.assert_close(module(x, (16, 12)), module.proj(core + local), rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- FLuRKA

def elu_phi(x, is_query):
    return torch.where(x > 0, x + 1.0, torch.exp(x))


def performer_phi(projection):
    def phi(x, is_query):
        x = x * x.shape[-1] ** -0.25
        return torch.exp(x @ projection.T - 0.5 * (x * x).sum(-1, keepdim=True)) / math.sqrt(projection.shape[0])
    return phi


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("feature_map", ["elu", "performer"])
def test_flurka_with_identity_compression_is_the_kernel_method(dtype, feature_map):
    n, dim = 30, 64
    torch.manual_seed(0)
    # eps = 0: the max stabilisers scale numerator and denominator alike, so only eps could tell them apart
    module = FLuRKAAttention(dim, 2, num_tokens=n, rank=n, feature_map=feature_map, eps=0.0).to(dtype)
    with torch.no_grad():
        module.E1.copy_(torch.eye(n))
        module.E2.copy_(torch.eye(n))
    x = rand(2, n, dim, dtype=dtype, seed=1)
    phi = elu_phi if feature_map == "elu" else performer_phi(module.projection.to(dtype))
    kernel = ref.kernel_attention(module.W_q(x), module.W_k(x), module.W_v(x), 2, phi, 0.0)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(module(x, (5, 6)), module.proj(kernel), **tol)


def test_flurka_compresses_before_projection_and_shares_e_across_heads():
    n, rank = 24, 6
    q, x = rand(1, n, 32, seed=2), rand(1, n, 32, seed=3)
    E = rand(rank, n, seed=4)
    W = rand(32, 32, seed=5)
    k = (E @ x[0]) @ W  # (E X) W == E (X W): every head sees the same compression
    out = flurka_attention(q, k[None], k[None], num_heads=4, feature_map="elu", eps=1e-12)
    expected = ref.kernel_attention(q, (E @ (x[0] @ W))[None], (E @ (x[0] @ W))[None], 4, elu_phi, 1e-12)
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-12)


def test_performer_features_approach_the_softmax_kernel():
    d = 16
    q, k = rand(64, d, seed=6, scale=0.5), rand(64, d, seed=7, scale=0.5)
    exact = torch.exp(q @ k.T / math.sqrt(d))
    errors = []
    for features in (16, 1024):
        projection = orthogonal_gaussian_features(features, d, torch.Generator().manual_seed(0)).double()
        phi = performer_phi(projection)
        errors.append(((phi(q, True) @ phi(k, False).T - exact).abs() / exact).mean().item())
    assert errors[1] < errors[0] / 3 and errors[1] < 0.1


# ---------------------------------------------------------------- Multi-Spot

@pytest.mark.parametrize("dtype", DTYPES)
def test_multi_spot_full_selection_is_softmax_attention(dtype):
    q, k, v = (rand(2, 8 * 8, 32, dtype=dtype, seed=s) for s in (1, 2, 3))
    out = multi_spot_attention(q, k, v, num_heads=2, height=8, width=8, region_size=4, topk=64)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=2e-6)
    torch.testing.assert_close(out, softmax_attention(q, k, v, num_heads=2), **tol)


def test_multi_spot_matches_explicit_region_loop():
    q, k, v = (rand(1, 8 * 12, 32, seed=s) for s in (4, 5, 6))
    levels = [(2, 5), (4, None)]
    log_ratios = [1.1, 2.9]
    out = multi_spot_attention(q, k, v, num_heads=2, height=8, width=12, region_size=4, topk=7,
                               pool_sizes=[p for p, _ in levels], pool_topk=[c for _, c in levels],
                               log_ratios=log_ratios, poly_a=0.05, poly_b=-0.2)
    expected = ref.multi_spot(q, k, v, 2, 8, 12, 4, 7, levels, log_ratios, poly=(0.05, -0.2))
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-12)


def test_multi_spot_pooled_groups_of_identical_tokens_are_exact():
    """Keys and values constant inside each 2x2 group and p_hat = 4: the pooled level alone is exact attention."""
    small = [rand(1, 4, 4, 16, seed=s) for s in (7, 8)]
    k, v = (t.repeat_interleave(2, 1).repeat_interleave(2, 2).reshape(1, 64, 16) for t in small)
    q = rand(1, 64, 16, seed=9)
    out = multi_spot_attention(q, k, v, num_heads=1, height=8, width=8, region_size=4, topk=0, pool_sizes=[2],
                               log_ratios=[math.log(4.0)])
    torch.testing.assert_close(out, softmax_attention(q, k, v, num_heads=1), rtol=1e-10, atol=1e-12)


def test_multi_spot_default_level_bias_is_log_p_squared():
    """log_ratios omitted: p_hat_m = p_m^2, the number of tokens a pooled token stands for (the paper's pooled-level
    ratio).
    A bias shared by every key cancels in the softmax, so the case mixes individual top-k tokens (bias 0) with two
    pooled levels; the explicit loop reference gets log 4 and log 16 spelled out."""
    q, k, v = (rand(1, 8 * 8, 32, seed=s) for s in (14, 15, 16))
    levels = [(2, 5), (4, None)]
    out = multi_spot_attention(q, k, v, num_heads=2, height=8, width=8, region_size=4, topk=6,
                               pool_sizes=[p for p, _ in levels], pool_topk=[c for _, c in levels])
    expected = ref.multi_spot(q, k, v, 2, 8, 8, 4, 6, levels, [math.log(4.0), math.log(16.0)])
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-12)


def test_multi_spot_module_parameters_and_gradients():
    module = MultiSpotAttention(32, 2, region_size=4, topk=8, pool_levels=((2, 4), (4, None)), polynomial_v=True)
    assert module.log_ratios.detach().tolist() == pytest.approx([math.log(4), math.log(16)])
    assert module.poly_a.item() == 0 and module.poly_b.item() == 0
    x = rand(1, 64, 32, dtype=torch.float32, seed=10)
    module(x, (8, 8)).square().sum().backward()
    assert module.log_ratios.grad.abs().min() > 0 and module.poly_a.grad is not None


def test_vectorised_multi_spot_reference_matches_the_loop_reference():
    """The batched reference used as the FP16 baseline is the same algorithm as the explicit loop."""
    q, k, v = (rand(2, 8 * 8, 16, seed=s) for s in (11, 12, 13))
    levels, log_ratios = [(2, 3), (4, None)], [0.7, 2.0]
    torch.testing.assert_close(ref.multi_spot_vectorised(q, k, v, 2, 8, 8, 4, 5, levels, log_ratios),
                               ref.multi_spot(q, k, v, 2, 8, 8, 4, 5, levels, log_ratios), rtol=1e-12, atol=1e-12)
