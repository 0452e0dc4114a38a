"""edgeattn.cost, the one cost model: each formula against a count done by hand on a small shape, and the
compulsory-bytes rule. tests/models/test_complexity.py holds it to the papers' tables through the model counter,
tests/ops/test_ops_bench_cli.py through ops-bench."""
import pytest

from edgeattn import cost


def test_softmax_attention_counts_scores_and_weighted_sum():
    # Q K^T: 6 x 5 scores of 4-wide dot products = 120 MACs; P V: 6 x 4 outputs of 5-term sums = 120
    assert cost.softmax_attention_macs(6, 5, 4) == 240
    assert cost.softmax_attention_macs(6, 5, 4, batch=3) == 720
    assert cost.flops(240) == 480


def test_window_attention_padded_and_exact_partial_windows():
    """3 x 5 map, 2 x 2 windows, C = 8. Padded: 2 x 3 windows of L = 4, 6 * 2 * 16 * 8 = 1536. Exact: two 2x2
    (L^2 = 16), one 2x1 (4), two 1x2 (4 each), one 1x1 (1): sum L^2 = 45, 2 * 45 * 8 = 720."""
    assert cost.window_attention_macs(3, 5, 2, 8) == 1536
    assert cost.window_attention_macs(3, 5, 2, 8, exact_partial_windows=True) == 720
    # a map the window divides: both ways agree, and equal softmax attention inside each of the 4 windows
    assert cost.window_attention_macs(4, 4, 2, 8) == cost.window_attention_macs(4, 4, 2, 8, True) \
        == 4 * cost.softmax_attention_macs(4, 4, 8)


def test_cswin_stripes():
    # 4 x 6 map, split 2, C = 8: half (4 channels) see 4 x 2 = 8 keys, half see 2 x 6 = 12 keys; 24 queries
    assert cost.cswin_stripes_macs(4, 6, 2, 8) == 2 * 24 * 8 * 4 + 2 * 24 * 12 * 4


def test_efficient_attention_and_elfatt_split():
    # EFFATT, N = 10, C = 8 in 2 heads of d = 4: k^T v (4 x 10 x 4 = 160) and q ctx (10 x 4 x 4 = 160) per head
    assert cost.efficient_attention_macs(10, 8, 2) == 640
    # ELFATT on a 2 x 5 map, window 2 (padded to 2 x 6: 3 windows of L = 4), 4 heads of d = 2, 2 global:
    # linear part EFFATT on c1 = 4 channels in 2 heads = 2 * 10 * 2 * 4 = 160; softmax part 3 * 2 * 16 * 4 = 384
    assert cost.elfatt_macs(2, 5, 2, 8, 4, 2) == (160, 384)
    assert cost.elfatt_macs(2, 5, 2, 8, 4, 0) == (0, cost.window_attention_macs(2, 5, 2, 8))


def test_lite_mla_relu_and_quadratic_taylor():
    # N = 9, 2 groups of d = 3: F = 3 (ReLU) or 7 (QT); [V; 1] phi(K)^T is 4 x 9 x F, its product with phi(Q) too
    assert cost.lite_mla_macs(9, 2, 3, "relu") == 2 * 2 * 9 * 3 * 4
    assert cost.lite_mla_macs(9, 2, 3, "quadratic_taylor") == 2 * 2 * 9 * 7 * 4
    with pytest.raises(ValueError):
        cost.lite_mla_macs(9, 2, 3, "softmax")


def test_soft_with_and_without_newton_raphson():
    # N = 16, m = 4 landmarks, 2 heads of d = 8, 3 Newton steps; per head: 3 m N d = 1536, 2 m^2 d = 256,
    # Newton 3 * 2 * 64 = 384
    total, newton = cost.soft_macs(16, 4, 2, 8, 3)
    assert newton == 2 * 384 == cost.soft_newton_macs(4, 2, 3)
    assert total == 2 * (1536 + 256 + 384)
    assert cost.soft_macs(16, 4, 2, 8, 0) == (2 * (1536 + 256), 0)


def test_agent_and_focused_linear_attention():
    assert cost.agent_attention_macs(10, 3, 8) == 4 * 10 * 3 * 8
    # FLatten, N = 10, C = 8 in 2 heads of d = 4: 2 * 10 * 4 * 8 = 640, normaliser 10 * 8 = 80
    assert cost.focused_linear_attention_macs(10, 8, 2) == 720


def test_kernel_attention_flurka_and_token_performer():
    # N = 4 queries, rank 2 keys, F = 2 features, C = 4 in 2 heads: phi(K)^T V 2*2*4 = 16, phi(Q) ctx 4*2*4 = 32,
    # normaliser 4*2*2 = 16
    assert cost.kernel_attention_macs(4, 2, 2, 4, 2) == 64
    # FLuRKA adds E1 K and E2 V: 2 * 2 * 4 * 4 = 64; Performer's projections of 4 + 2 rows: 6 * 2 * 4 = 48
    assert cost.flurka_macs(4, 2, 4, 2, 2, performer=False) == 128
    assert cost.flurka_macs(4, 2, 4, 2, 2, performer=True) == 176
    # token Performer: N = 4, F = 3, width 2, one head: projections 2 * 4 * 3 * 2 = 48, kernel 24 + 24 + 12
    assert cost.token_performer_macs(4, 3, 2) == 108


def test_compulsory_bytes_read_each_input_and_write_each_output_once():
    assert cost.compulsory_bytes(2, [10, 20], [5]) == 70
    # q, k, v in, one out, (B, N, C) = (2, 3, 4) in FP16: 4 tensors * 24 elements * 2 bytes
    assert cost.token_tensors_bytes(3, 4, 2, batch=2) == 192
    assert cost.token_tensors_bytes(3, 4, 4, inputs=2) == 3 * 12 * 4
