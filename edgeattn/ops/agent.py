"""Agent attention (Han et al., "Agent Attention: On the Integration of Softmax and Linear Attention", ECCV 2024).

A small set of agent tokens A (average-pooled queries, agent_num = p x p) first aggregates the values as queries of
a softmax attention over the keys, then broadcasts them back as the keys of a softmax attention of the real
queries (the paper's quadruple (Q, A, K, V)):

    O = softmax(Q A^T * s + B2) (softmax(A K^T * s + B1) V)        s = d ** -0.5

plus a 3x3 depthwise conv of V ("diversity restoration", DWC). B1 (heads, A, N) and B2 (heads, N, A) are the agent
biases: a 7x7 per-agent map bilinearly resized to the H x W map plus a row term and a column term
(:func:`agent_position_biases`). Mirrors ``LeapLabTHU/Agent-Attention`` ``agent_swin.py`` / ``agent_cswin.py``
``AgentAttention`` (Swin: ``dwc``; CSWin: the branch's LePE ``get_v``; both are a 3x3 depthwise conv with bias on
the full map, since the ELFATT paper's Agent rows run agent attention over the whole stage map).

Both softmax steps are :func:`edgeattn.ops.softmax.attend`, so the op exports as standard ONNX
MatMul/Add/Softmax nodes (no plugin; see plugins/README.md). Agent pooling is ``adaptive_avg_pool2d`` in eager
mode; ONNX has no adaptive pooling for a map the agent grid does not divide (56 x 56 -> 3 x 3), so while exporting
the same averages are two constant MatMuls (:func:`adaptive_pool_matrix`).
"""
import math

import numpy
import torch
import torch.nn as nn
import torch.nn.functional as F

from ._common import (check_map, check_same_shape, check_tokens, downcast, exporting, merge_heads, require,
                      split_heads, upcast)
from .lepe import lepe
from .softmax import attend

#: side of the learned agent-bias maps before they are resized to the stage map (the official code's 7 x 7)
BIAS_MAP_SIDE = 7


def agent_side(agent_num):
    """The agent grid side p for ``agent_num`` = p * p agents (the official code pools to a square grid)."""
    side = int(math.isqrt(int(agent_num)))
    require(agent_num >= 1 and side * side == agent_num, "agent_num must be a square number (p x p agents), got {}",
            agent_num)
    return side


def adaptive_pool_matrix(size, out, dtype=torch.float32, device=None):
    """(out, size) averaging matrix of ``adaptive_avg_pool1d``: row i averages the inputs
    [floor(i*size/out), ceil((i+1)*size/out)).

    Built in numpy so that a trace records it as one constant instead of the ops that would fill it.
    """
    matrix = numpy.zeros((out, size), dtype=numpy.float64)
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        matrix[i, start:end] = 1.0 / (end - start)
    return torch.from_numpy(matrix).to(dtype=dtype, device=device)


def pool_agents(q, height, width, agent_num):
    """Agent tokens: (B, N=H*W, C) queries -> (B, agent_num, C), the adaptive average pool of the query map to a
    p x p grid, row-major (the official ``AdaptiveAvgPool2d`` on the (B, C, H, W) query map)."""
    side = agent_side(agent_num)
    b, _, c = q.shape
    image = q.reshape(b, height, width, c)
    if exporting():
        rows = adaptive_pool_matrix(height, side, q.dtype, q.device)
        cols = adaptive_pool_matrix(width, side, q.dtype, q.device)
        pooled = torch.matmul(rows, image.permute(0, 3, 1, 2))            # (B, C, p, W)
        pooled = torch.matmul(pooled, cols.transpose(0, 1))                # (B, C, p, p)
        return pooled.reshape(b, c, side * side).transpose(1, 2)
    pooled = F.adaptive_avg_pool2d(image.permute(0, 3, 1, 2), (side, side))
    return pooled.reshape(b, c, side * side).transpose(1, 2)


def agent_position_biases(an_bias, na_bias, ah_bias, aw_bias, ha_bias, wa_bias, height, width):
    """The two agent biases for an H x W map: (aggregation (h, A, N), broadcast (h, N, A)).

    ``an_bias``/``na_bias`` (h, A, 7, 7) are resized bilinearly (align_corners=False) to H x W; ``ah_bias``
    (1, h, A, H, 1) + ``aw_bias`` (1, h, A, 1, W) and ``ha_bias`` (1, h, H, 1, A) + ``wa_bias`` (1, h, 1, W, A) add
    a per-row and a per-column term (the official code's names and shapes).
    """
    heads, agents = an_bias.shape[0], an_bias.shape[1]
    n = height * width
    aggregation = F.interpolate(an_bias, size=(height, width), mode="bilinear", align_corners=False)
    aggregation = aggregation.reshape(heads, agents, n) + (ah_bias + aw_bias).reshape(heads, agents, n)
    broadcast = F.interpolate(na_bias, size=(height, width), mode="bilinear", align_corners=False)
    broadcast = broadcast.reshape(heads, agents, n).transpose(1, 2) + (ha_bias + wa_bias).reshape(heads, n, agents)
    return aggregation, broadcast


def agent_attention(q, k, v, *, num_heads, height, width, agent_num=None, agents=None, aggregation_bias=None,
                    broadcast_bias=None, scale=None):
    """Agent attention core (without qkv, DWC and the output projection).

    Shapes: q, k, v (B, N=H*W, C), C = num_heads * d, channel c -> head c // d; ``agents`` (B, A, C) explicit
    agent tokens, else ``agent_num`` = p * p tokens pooled from q (:func:`pool_agents`); ``aggregation_bias``
    broadcastable to (B, h, A, N), ``broadcast_bias`` to (B, h, N, A) (additive, e.g. from
    :func:`agent_position_biases`). Returns (B, N, C).
    Equation (Agent Attention paper Eq. 3 with its agent bias): per head
        O = softmax(Q A^T s + B2) softmax(A K^T s + B1) V,  s = d ** -0.5 (``scale`` overrides)
    i.e. generalised linear attention with phi_q(Q) = softmax(Q A^T s + B2) and phi_k(K)^T = softmax(A K^T s + B1):
    the implied N x N matrix is row-stochastic and costs O(N A d) instead of O(N^2 d).
    FP16 hazards: both softmaxes sum N (aggregation) or A terms; computed in FP32 for half inputs (SDPA eager,
    max-subtracted Softmax in the exported graph), cast back once.
    """
    check_tokens("q", q, num_heads)
    check_same_shape("q", q, k=k, v=v)
    b, n, c = q.shape
    check_map(n, height, width)
    require((agents is None) != (agent_num is None), "agent attention needs exactly one of agents or agent_num")
    dtype = q.dtype
    q, k, v = upcast(q, k, v)
    if agents is None:
        agents = pool_agents(q, height, width, agent_num)
    else:
        require(agents.dim() == 3 and agents.shape[0] == b and agents.shape[2] == c,
                "agents must be ({}, A, {}), got {}", b, c, tuple(agents.shape))
        (agents,) = upcast(agents.to(q.dtype))
    d = c // num_heads
    scale = d ** -0.5 if scale is None or scale <= 0 else float(scale)
    qh, kh, vh, ah = (split_heads(t, num_heads) for t in (q, k, v, agents))
    if aggregation_bias is not None:
        aggregation_bias = aggregation_bias.to(q.dtype)
    if broadcast_bias is not None:
        broadcast_bias = broadcast_bias.to(q.dtype)
    agent_values = attend(ah, kh, vh, scale, aggregation_bias)        # (B, h, A, d)
    out = attend(qh, ah, agent_values, scale, broadcast_bias)        # (B, h, N, d)
    return downcast(merge_heads(out), dtype)


def _bias_param(*shape):
    param = nn.Parameter(torch.zeros(*shape))
    if param.device.type != "meta":
        nn.init.trunc_normal_(param, std=0.02)
    return param


class AgentAttention(nn.Module):
    """Agent attention block core over a whole H x W map: qkv Linear -> agent attention (+ biases) + DWC -> proj.

    ``AgentAttention(dim, num_heads, agent_num, resolution, qkv_bias=True)``; ``resolution`` = (H, W) of the map
    the per-position agent biases are built for (the official code's window, here the full stage map); any other
    map is rejected. Parameters (official names): ``qkv`` (Linear C -> 3C, [q | k | v]), ``an_bias``,
    ``na_bias`` (h, A, 7, 7), ``ah_bias`` (1, h, A, H, 1), ``aw_bias`` (1, h, A, 1, W), ``ha_bias``
    (1, h, H, 1, A), ``wa_bias`` (1, h, 1, W, A), ``dwc`` (3x3 depthwise conv with bias; CSWin's ``get_v``),
    ``proj``. ``forward(x: (B, N, C), hw: (H, W)) -> (B, N, C)``.
    """

    def __init__(self, dim, num_heads, agent_num, resolution, qkv_bias=True):
        super().__init__()
        require(dim % num_heads == 0, "dim={} is not divisible by num_heads={}", dim, num_heads)
        agent_side(agent_num)
        height, width = resolution
        self.dim = dim
        self.num_heads = num_heads
        self.agent_num = agent_num
        self.resolution = (int(height), int(width))
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.an_bias = _bias_param(num_heads, agent_num, BIAS_MAP_SIDE, BIAS_MAP_SIDE)
        self.na_bias = _bias_param(num_heads, agent_num, BIAS_MAP_SIDE, BIAS_MAP_SIDE)
        self.ah_bias = _bias_param(1, num_heads, agent_num, height, 1)
        self.aw_bias = _bias_param(1, num_heads, agent_num, 1, width)
        self.ha_bias = _bias_param(1, num_heads, height, 1, agent_num)
        self.wa_bias = _bias_param(1, num_heads, 1, width, agent_num)
        self.dwc = nn.Conv2d(dim, dim, 3, padding=1, groups=dim)
        self.proj = nn.Linear(dim, dim)

    def biases(self):
        """(aggregation (h, A, N), broadcast (h, N, A)) biases for the built map."""
        return agent_position_biases(self.an_bias, self.na_bias, self.ah_bias, self.aw_bias, self.ha_bias,
                                     self.wa_bias, *self.resolution)

    def forward(self, x, hw):
        height, width = hw
        require(tuple(hw) == self.resolution, "agent attention was built for a {}x{} map (its agent biases are per "
                "position); got {}x{}", self.resolution[0], self.resolution[1], height, width)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        aggregation, broadcast = self.biases()
        out = agent_attention(q, k, v, num_heads=self.num_heads, height=height, width=width,
                              agent_num=self.agent_num, aggregation_bias=aggregation, broadcast_bias=broadcast)
        out = out + lepe(v, height, width, self.dwc.weight, self.dwc.bias)
        return self.proj(out)
