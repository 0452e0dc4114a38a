"""Can SOFT's Newton-Raphson pseudo-inverse be applied to the value vectors without forming every M x M product?

Every iterate X_k of X_{k+1} = 2 X_k - X_k A X_k (X_0 = c A, c = 1 / max_rowsum(A)^2) is a polynomial in A, so all of
them commute with A. Two ways to use that, checked here against the float64 iteration (the kernels' and PyTorch's
reference; plugins/softKernelAttention/README.md, "Newton-Raphson without M x M products", records the numbers):

- the iterate as a polynomial applied to Y = P v directly (Horner): p_k has degree 2^(k+1) - 1, so 20 steps would
  need 2^21 products of A with an M x d block: infeasible (only its degree is checked);
- the product form: F_k = A X_k obeys F_{k+1} = 2 F_k - F_k^2, and X_K = X_0 prod_k (2 I - F_k), so X_K Y is
  K products F_k^2 (one M x M product per step instead of Newton's two) and K products (2 I - F_k) Z of M x M with
  M x d. Exact in float64; in FP32 it is as accurate as Newton for well-conditioned A but not for the landmark
  matrices SOFT++ pools from the queries: errors that the rounding of F_k mixes from converged eigen-directions into
  slowly converging ones double with every remaining step (Newton's own iterate corrects them), 10^2-10^3 x the FP32
  Newton error at cond(A) = 460. That is why the kernels keep the Newton form.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from edgeattn.ops.soft import gaussian_kernel, newton_pinv  # noqa: E402

ITERS = 20


def pooled_landmarks(side, pool, channels=32, seed=5):
    """Landmarks = pool x pool average pools of a smooth side x side query map (as SOFT++ samples them): close
    landmarks, so A is far from the identity and its conditioning grows with the pool size."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(1, channels, side, side, generator=generator, dtype=torch.float64)
    q = torch.nn.functional.avg_pool2d(q, 3, 1, 1, count_include_pad=False)
    q = q / q.std() * channels ** -0.25
    return torch.nn.functional.avg_pool2d(q, pool).flatten(2).transpose(1, 2)[0].contiguous()


def newton_applied(A, y, iters):
    return torch.matmul(newton_pinv(A, iters), y)


def product_form_applied(A, y, iters):
    """X_K y without forming X: F_0 = c A^2, z <- (2 I - F_k) z, F_{k+1} = 2 F_k - F_k^2, then X_0 z = c A z."""
    norm = A.abs().sum(dim=-1).amax()
    c = 1.0 / (norm * norm)
    f = c * torch.matmul(A, A)
    z = y.clone()
    for k in range(iters):
        z = 2 * z - torch.matmul(f, z)
        if k < iters - 1:
            f = 2 * f - torch.matmul(f, f)
    return c * torch.matmul(A, z)


def newton_flops(m, d, iters):
    return 4 * iters * m ** 3 + 2 * m * m * d  # two M x M products per step, then M Y


def product_form_flops(m, d, iters):
    return 2 * iters * m ** 3 + 2 * (iters + 1) * m * m * d


def relative_error(result, exact):
    return ((result.double() - exact).abs().max() / exact.abs().max()).item()


CASES = [  # (side, pool): M = (side / pool)^2 landmarks, cond(A) about 5, 24, 460, 12
    ((14, 2), 5.0), ((28, 4), 24.0), ((56, 8), 460.0), ((24, 2), 12.0)]


@pytest.mark.parametrize("case, cond", CASES, ids=["M49-cond5", "M49-cond24", "M49-cond460", "M144-cond12"])
def test_product_form_is_exact_but_loses_fp32_accuracy_on_ill_conditioned_landmarks(case, cond):
    landmarks = pooled_landmarks(*case)
    A = gaussian_kernel(landmarks, landmarks)
    m = A.shape[0]
    assert torch.linalg.cond(A).item() == pytest.approx(cond, rel=0.1)
    y = torch.randn(m, 32, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    exact = newton_applied(A, y, ITERS)
    # the identity X_K = X_0 prod (2 I - F_k): the same vectors as the float64 Newton iterate, to rounding
    assert relative_error(product_form_applied(A, y, ITERS), exact) < 1e-10
    newton_fp32 = relative_error(newton_applied(A.float(), y.float(), ITERS), exact)
    product_fp32 = relative_error(product_form_applied(A.float(), y.float(), ITERS), exact)
    assert newton_fp32 < 3e-6, newton_fp32  # measured 4.5e-7 .. 1.6e-6
    if cond > 100:
        assert product_fp32 > 100 * newton_fp32, (product_fp32, newton_fp32)  # measured 1.2e-3: ~800 x
    else:
        assert product_fp32 < 30 * newton_fp32, (product_fp32, newton_fp32)  # measured 1.4-15 x
    # what the product form would save: M^3 work halves, the M^2 d work grows with the step count
    ratio = product_form_flops(m, 32, ITERS) / newton_flops(m, 32, ITERS)
    assert ratio == pytest.approx({49: 0.83, 144: 0.61}[m], abs=0.01)


def test_each_iterate_is_a_polynomial_of_exponential_degree_in_a():
    """p_0(a) = c a, p_{k+1}(a) = 2 p_k(a) - a p_k(a)^2: X_k = p_k(A) (so every iterate commutes with A) and p_k has
    degree 2^(k+1) - 1; applied to Y by Horner's scheme, 20 steps would take 2^21 - 1 products of A with an M x d
    block, against Newton's 40 M x M products."""
    A = gaussian_kernel(pooled_landmarks(14, 2), pooled_landmarks(14, 2))
    norm = A.abs().sum(dim=-1).amax().item()
    polynomial = np.polynomial.Polynomial([0.0, 1.0 / (norm * norm)])
    a = np.polynomial.Polynomial([0.0, 1.0])
    for k in range(1, 6):
        polynomial = 2 * polynomial - a * polynomial * polynomial
        assert polynomial.degree() == 2 ** (k + 1) - 1
        value = torch.zeros_like(A)
        power = torch.eye(A.shape[0], dtype=torch.float64)
        for coefficient in polynomial.coef:
            value = value + coefficient * power
            power = torch.matmul(power, A)
        assert torch.allclose(value, newton_pinv(A, k), rtol=1e-9, atol=1e-12 * newton_pinv(A, k).abs().max().item())
