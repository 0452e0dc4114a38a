"""Agent attention and FLatten focused linear attention against explicit formulas and their papers' identities.

References are written out here (explicit N x N / N x A matrices, per-head loops, index lists for pooling) and share
no code with edgeattn.ops. Agent: Han et al., ECCV 2024, Eq. 3 with the agent bias of the official code; FLatten:
Han et al., ICCV 2023, Eq. 5-7 with the official normalisation.
"""
import math

import pytest
import torch
import torch.nn.functional as F

import ops_reference as ref
from edgeattn.ops import AgentAttention, FocusedLinearAttention, OpShapeError, agent_attention, \
    focused_linear_attention, softmax_attention
from edgeattn.ops import agent as agent_module
from edgeattn.ops.agent import adaptive_pool_matrix, agent_position_biases, pool_agents
from edgeattn.ops.flatten import focused_features, focusing_function, head_shared_dwc


def rand(*shape, dtype=torch.float64, seed=0, scale=1.0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator, dtype=torch.float64) * scale).to(dtype)


# ---------------------------------------------------------------- Agent: references

def pooled_agents_by_index(q, height, width, side):
    """Adaptive average pooling by PyTorch's bin rule written out: bin i covers [floor(i*S/p), ceil((i+1)*S/p))."""
    b, _, c = q.shape
    image = q.reshape(b, height, width, c)
    agents = []
    for i in range(side):
        rows = range((i * height) // side, math.ceil((i + 1) * height / side))
        for j in range(side):
            cols = range((j * width) // side, math.ceil((j + 1) * width / side))
            agents.append(torch.stack([image[:, y, x] for y in rows for x in cols], 1).mean(1))
    return torch.stack(agents, 1)


def agent_reference(q, k, v, num_heads, agents, aggregation_bias=None, broadcast_bias=None):
    """O = softmax(Q A^T s + B2) (softmax(A K^T s + B1) V) per head, explicit matrices."""
    d = q.shape[-1] // num_heads
    outs = []
    for h, sl in enumerate(ref.head_slices(q.shape[-1], num_heads)):
        aggregate = agents[..., sl] @ k[..., sl].transpose(-1, -2) * d ** -0.5
        broadcast = q[..., sl] @ agents[..., sl].transpose(-1, -2) * d ** -0.5
        if aggregation_bias is not None:
            aggregate = aggregate + aggregation_bias[h]
        if broadcast_bias is not None:
            broadcast = broadcast + broadcast_bias[h]
        outs.append(torch.softmax(broadcast, -1) @ (torch.softmax(aggregate, -1) @ v[..., sl]))
    return torch.cat(outs, -1)


# ---------------------------------------------------------------- Agent: tests

@pytest.mark.parametrize("height,width,agent_num", [(14, 14, 9), (7, 7, 49), (8, 12, 16), (56, 56, 9)])
def test_agent_pooling_is_adaptive_average_pooling(height, width, agent_num):
    q = rand(2, height * width, 8, seed=1)
    expected = pooled_agents_by_index(q, height, width, int(math.isqrt(agent_num)))
    torch.testing.assert_close(pool_agents(q, height, width, agent_num), expected, rtol=1e-12, atol=1e-14)


def test_export_pooling_matches_eager_pooling(monkeypatch):
    """While exporting the pool is two constant MatMuls (ONNX has no adaptive pooling for 56 -> 3)."""
    q = rand(1, 56 * 56, 4, seed=2)
    eager = pool_agents(q, 56, 56, 9)
    monkeypatch.setattr(agent_module, "exporting", lambda: True)
    torch.testing.assert_close(pool_agents(q, 56, 56, 9), eager, rtol=1e-12, atol=1e-14)
    rows = adaptive_pool_matrix(56, 3, torch.float64)
    assert torch.allclose(rows.sum(1), torch.ones(3, dtype=torch.float64)) and (rows > 0).sum() == 19 + 20 + 19


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_agent_attention_matches_the_explicit_two_softmax_form(dtype):
    height, width, heads, agent_num = 8, 8, 2, 16
    q, k, v = (rand(2, height * width, 32, seed=s, dtype=dtype) for s in (3, 4, 5))
    b1, b2 = rand(heads, agent_num, height * width, seed=6, dtype=dtype), rand(heads, height * width, agent_num,
                                                                                seed=7, dtype=dtype)
    out = agent_attention(q, k, v, num_heads=heads, height=height, width=width, agent_num=agent_num,
                          aggregation_bias=b1, broadcast_bias=b2)
    agents = pooled_agents_by_index(q, height, width, 4)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=2e-6)
    torch.testing.assert_close(out, agent_reference(q, k, v, heads, agents, b1, b2), **tol)


def test_agent_with_one_agent_per_token_and_identity_broadcast_is_softmax_attention():
    """A = Q (one agent per token) and a broadcast step that sends every query only to its own agent (bias 0 on the
    diagonal, -inf elsewhere) with no aggregation bias: O = softmax(Q K^T s) V exactly (Agent Attention Sec. 3.2:
    the agents then compute softmax attention on the queries' behalf)."""
    n = 6 * 6
    q, k, v = (rand(2, n, 16, seed=s) for s in (8, 9, 10))
    own_agent = torch.full((n, n), float("-inf"), dtype=torch.float64).fill_diagonal_(0.0)
    out = agent_attention(q, k, v, num_heads=2, height=6, width=6, agents=q, broadcast_bias=own_agent)
    torch.testing.assert_close(out, softmax_attention(q, k, v, num_heads=2), rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(out, ref.softmax_attention(q, k, v, 2), rtol=1e-12, atol=1e-13)


def test_agent_attention_is_generalised_linear_attention():
    """softmax(Q A^T) (softmax(A K^T) V) = (softmax(Q A^T) softmax(A K^T)) V, an N x N row-stochastic matrix: a
    constant V comes back unchanged, and one agent gives every token the softmax attention of the mean query."""
    q, k = rand(1, 64, 16, seed=11), rand(1, 64, 16, seed=12)
    constant = torch.full((1, 64, 16), 0.37, dtype=torch.float64)
    out = agent_attention(q, k, constant, num_heads=2, height=8, width=8, agent_num=4)
    torch.testing.assert_close(out, constant, rtol=1e-12, atol=1e-13)
    v = rand(1, 64, 16, seed=13)
    single = agent_attention(q, k, v, num_heads=2, height=8, width=8, agent_num=1)
    mean_query = q.mean(1, keepdim=True)
    torch.testing.assert_close(single, ref.softmax_attention(mean_query, k, v, 2).expand(-1, 64, -1),
                               rtol=1e-12, atol=1e-13)


def test_agent_position_biases_follow_the_official_shapes_and_resize():
    heads, agents, side = 2, 9, 7
    an, na = rand(heads, agents, 7, 7, seed=14), rand(heads, agents, 7, 7, seed=15)
    ah, aw = rand(1, heads, agents, side, 1, seed=16), rand(1, heads, agents, 1, side, seed=17)
    ha, wa = rand(1, heads, side, 1, agents, seed=18), rand(1, heads, 1, side, agents, seed=19)
    aggregation, broadcast = agent_position_biases(an, na, ah, aw, ha, wa, side, side)
    # at the 7 x 7 map the resize is the identity; the row/column terms add per (agent, y, x)
    for h in range(heads):
        for a in range(agents):
            for y in range(side):
                for x in range(side):
                    token = y * side + x
                    expected = an[h, a, y, x] + ah[0, h, a, y, 0] + aw[0, h, a, 0, x]
                    assert math.isclose(aggregation[h, a, token], expected, rel_tol=1e-12, abs_tol=1e-14)
                    assert math.isclose(broadcast[h, token, a], na[h, a, y, x] + ha[0, h, y, 0, a] + wa[0, h, 0, x, a],
                                        rel_tol=1e-12, abs_tol=1e-14)
    aggregation, broadcast = agent_position_biases(an, na, rand(1, heads, agents, 14, 1), rand(1, heads, agents, 1, 14),
                                                   rand(1, heads, 14, 1, agents), rand(1, heads, 1, 14, agents), 14, 14)
    resized = F.interpolate(an, size=(14, 14), mode="bilinear", align_corners=False)
    assert aggregation.shape == (heads, agents, 196) and broadcast.shape == (heads, 196, agents)
    assert not torch.allclose(resized.reshape(heads, agents, 196), an.repeat_interleave(2, -1).repeat_interleave(
        2, -2).reshape(heads, agents, 196))  # bilinear, not nearest


def test_agent_position_biases_on_a_non_square_map():
    """H x W = 7 x 14: the 7 x 7 maps are resized to (H, W), not (W, H). Along the rows 7 -> 7 is the identity and
    maps constant along each row stay constant when widened, so token y * W + x gets exactly map[y, 0] plus its row
    and column terms; a transposed resize puts other rows' values there (the square maps above cannot tell)."""
    heads, agents, height, width = 2, 4, 7, 14
    an, na = (rand(heads, agents, 7, 1, seed=s).expand(-1, -1, -1, 7).contiguous() for s in (30, 31))
    ah, aw = rand(1, heads, agents, height, 1, seed=32), rand(1, heads, agents, 1, width, seed=33)
    ha, wa = rand(1, heads, height, 1, agents, seed=34), rand(1, heads, 1, width, agents, seed=35)
    aggregation, broadcast = agent_position_biases(an, na, ah, aw, ha, wa, height, width)
    assert aggregation.shape == (heads, agents, height * width) and broadcast.shape == (heads, height * width, agents)
    rows = torch.arange(height).repeat_interleave(width)  # token y * W + x -> y
    cols = torch.arange(width).repeat(height)             # token y * W + x -> x
    torch.testing.assert_close(aggregation, an[:, :, rows, 0] + ah[0, :, :, rows, 0] + aw[0, :, :, 0, cols],
                               rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(broadcast, (na[:, :, rows, 0] + ha[0, :, rows, 0, :].transpose(1, 2)
                                           + wa[0, :, 0, cols, :].transpose(1, 2)).transpose(1, 2),
                               rtol=1e-12, atol=1e-14)


def test_agent_module_is_core_plus_dwc_and_refuses_other_maps():
    torch.manual_seed(0)
    module = AgentAttention(32, 2, 9, (6, 6)).double()
    x = rand(2, 36, 32, seed=20)
    q, k, v = module.qkv(x).chunk(3, -1)
    aggregation, broadcast = module.biases()
    core = agent_reference(q, k, v, 2, pooled_agents_by_index(q, 6, 6, 3), aggregation, broadcast)
    dwc = ref.full_map_lepe(v, 6, 6, module.dwc.weight, module.dwc.bias)
    torch.testing.assert_close(module(x, (6, 6)), module.proj(core + dwc), rtol=1e-10, atol=1e-12)
    with pytest.raises(OpShapeError, match="built for a 6x6 map"):
        module(rand(2, 64, 32), (8, 8))
    with pytest.raises(OpShapeError, match="square number"):
        AgentAttention(32, 2, 8, (6, 6))


def test_agent_fp16_inputs_are_computed_in_fp32():
    q, k, v = (rand(1, 64, 32, seed=s, dtype=torch.float16) for s in (21, 22, 23))
    out = agent_attention(q, k, v, num_heads=2, height=8, width=8, agent_num=16)
    assert out.dtype == torch.float16
    exact = agent_attention(q.double(), k.double(), v.double(), num_heads=2, height=8, width=8, agent_num=16)
    assert (out.double() - exact).abs().max() <= 2 * 2 ** -11 * exact.abs().max()


# ---------------------------------------------------------------- FLatten: references and tests

def flatten_reference(q, k, v, num_heads, p, scale, pos, eps=1e-6):
    """Row-normalised kernel attention with the focused feature map, explicit N x N per head:
    O_i = sum_j (phi(q_i).phi(k_j)) v_j / (sum_j phi(q_i).phi(k_j) + N eps), phi over all C channels."""
    def phi(x):
        x = (torch.clamp(x, min=0) + eps) / scale
        powered = x ** p
        return powered * (x.norm(dim=-1, keepdim=True) / powered.norm(dim=-1, keepdim=True))

    fq, fk = phi(q), phi(k + pos)
    n = q.shape[1]
    outs = []
    for sl in ref.head_slices(q.shape[-1], num_heads):
        matrix = fq[..., sl] @ fk[..., sl].transpose(-1, -2)
        outs.append(matrix @ v[..., sl] / (matrix.sum(-1, keepdim=True) + n * eps))
    return torch.cat(outs, -1)


@pytest.mark.parametrize("p", [1, 2, 3, 5])
def test_focusing_function_keeps_the_norm(p):
    """FLatten Eq. 7: f_p(x) = ||x|| / ||x^p|| x^p has ||f_p(x)|| = ||x||; p = 1 is the identity."""
    x = rand(5, 32, seed=24).abs() + 1e-3
    out = focusing_function(x, p)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), rtol=1e-12, atol=0)
    if p == 1:
        torch.testing.assert_close(out, x, rtol=1e-12, atol=0)
    else:
        # the direction moves towards the largest coordinate: its share of the norm grows with p
        assert (out.max(-1).values / x.norm(dim=-1) > x.max(-1).values / x.norm(dim=-1)).all()


def test_focused_features_divide_by_the_scale_before_focusing_and_are_homogeneous():
    x, scale = rand(3, 16, seed=25), rand(16, seed=26).abs() + 0.5
    expected = focusing_function((torch.clamp(x, min=0) + 1e-6) / scale, 3)
    torch.testing.assert_close(focused_features(x, 3, scale), expected, rtol=1e-12, atol=0)
    positive = x.abs()
    torch.testing.assert_close(focused_features(2.5 * positive, 3, eps=0.0),
                               2.5 * focused_features(positive, 3, eps=0.0), rtol=1e-12, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_focused_linear_attention_matches_the_explicit_kernel_matrix(dtype):
    q, k, v = (rand(2, 49, 32, seed=s, dtype=dtype) for s in (27, 28, 29))
    scale = (rand(1, 1, 32, seed=30).abs() + 0.5).to(dtype)
    pos = rand(1, 49, 32, seed=31, scale=0.3).to(dtype)
    out = focused_linear_attention(q, k, v, num_heads=2, focusing_factor=3, scale=scale, positional_encoding=pos)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=2e-5, atol=2e-6)
    torch.testing.assert_close(out, flatten_reference(q, k, v, 2, 3, scale, pos), **tol)


def test_focused_features_use_the_norm_over_all_heads():
    """The official code focuses the full C-channel vector before splitting heads; per-head norms differ."""
    q, k, v = (rand(1, 16, 16, seed=s) for s in (32, 33, 34))
    out = focused_linear_attention(q, k, v, num_heads=2, focusing_factor=3, eps=0.0)
    per_head = torch.cat([focused_linear_attention(q[..., sl], k[..., sl], v[..., sl], num_heads=1,
                                                   focusing_factor=3, eps=0.0)
                          for sl in ref.head_slices(16, 2)], -1)
    assert not torch.allclose(out, per_head)
    torch.testing.assert_close(out, flatten_reference(q, k, v, 2, 3, 1.0, 0.0, eps=0.0), rtol=1e-12, atol=1e-13)


def test_focused_linear_attention_rows_are_convex_combinations():
    """Without the eps the implied attention matrix is row-stochastic: a constant V comes back unchanged."""
    q, k = rand(1, 36, 16, seed=35), rand(1, 36, 16, seed=36)
    constant = torch.full((1, 36, 16), -1.25, dtype=torch.float64)
    out = focused_linear_attention(q, k, constant, num_heads=2, eps=0.0)
    torch.testing.assert_close(out, constant, rtol=1e-12, atol=1e-13)


def test_focused_linear_attention_fp16_inputs_are_computed_in_fp32():
    """Inputs x 10 as in the FP16 suite: x^3 reaches 1e4 and |x^3| over 32 channels passes FP16's 65504, so an FP16
    evaluation overflows; the op upcasts (module docstring) and rounds once, within 2 FP16 half-ulps of FP64."""
    q, k, v = (rand(1, 256, 32, seed=s, scale=10.0, dtype=torch.float16) for s in (38, 39, 40))
    scale = (rand(1, 1, 32, seed=41).abs() + 0.5).half()
    out = focused_linear_attention(q, k, v, num_heads=2, focusing_factor=3, scale=scale)
    assert out.dtype == torch.float16
    exact = flatten_reference(q.double(), k.double(), v.double(), 2, 3, scale.double(), 0.0)
    assert (out.double() - exact).abs().max() <= 2 * 2 ** -11 * exact.abs().max()


def test_flatten_module_dwc_is_shared_by_the_heads_and_lepe_is_optional():
    torch.manual_seed(1)
    module = FocusedLinearAttention(32, 2, (6, 6), lepe=True).double()
    with torch.no_grad():
        module.scale.normal_(0, 0.5)
        module.positional_encoding.normal_(0, 0.3)
    x = rand(2, 36, 32, seed=37)
    q, k, v = module.qkv(x).chunk(3, -1)
    core = flatten_reference(q, k, v, 2, 3, F.softplus(module.scale), module.positional_encoding)
    dwc = torch.cat([ref.full_map_lepe(v[..., sl], 6, 6, module.dwc.weight, module.dwc.bias)
                     for sl in ref.head_slices(32, 2)], -1)
    lepe = ref.full_map_lepe(v, 6, 6, module.get_v.weight, module.get_v.bias)
    torch.testing.assert_close(module(x, (6, 6)), module.proj(core + dwc + lepe), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(head_shared_dwc(v, 6, 6, 2, module.dwc.weight, module.dwc.bias), dwc, rtol=1e-12,
                               atol=1e-14)
    assert module.dwc.weight.shape == (16, 1, 5, 5)
    with pytest.raises(OpShapeError, match="built for a 6x6 map"):
        module(rand(1, 49, 32), (7, 7))
