"""Reference attention operators (PyTorch): one module per family, a functional core plus an nn.Module.

Token layout (B, N, C) with explicit (H, W) where 2-D structure matters; channel c belongs to head c // d.
Half-precision inputs are computed in FP32 and cast back (see :mod:`edgeattn.ops._common`). The four ops of the
TensorRT contract (``export/schemas``) also exist as ``torch.ops.edgeattn.*`` custom ops, which the nn.Modules
call while :func:`edgeattn.ops.config.use_plugin_ops` is on.

=========================  ======================================  ===============================
family                     functional core                         nn.Module
=========================  ======================================  ===============================
softmax (GLOBAL)           softmax.softmax_attention               MultiHeadSoftmaxAttention
CSWin LOCAL                cswin.cross_shaped_window_attention     CrossShapedWindowAttention
blockify (window)          blockify.blockify_attention             BlockifyAttention
EFFATT                     efficient_attention.efficient_attention EfficientAttention
ELFATT                     elfatt.elfatt_attention                 ELFATTAttention
LiteMLA / QT-ViT           litemla.lite_mla_attention              LiteMLA
SOFT / SOFT++              soft.soft_kernel_attention              SOFTAttention
FLuRKA                     flurka.flurka_attention                 FLuRKAAttention
Multi-Spot                 multispot.multi_spot_attention          MultiSpotAttention
Swin (S)W-MSA              swin.windowed_biased_attention          ShiftedWindowAttention
Agent                      agent.agent_attention                   AgentAttention
FLatten (focused linear)   flatten.focused_linear_attention        FocusedLinearAttention
=========================  ======================================  ===============================
"""
from ._common import OpShapeError, check_tokens, require
from .agent import AgentAttention, agent_attention
from .blockify import BlockifyAttention, blockify_attention
from .config import plugin_ops_enabled, use_plugin_ops
from .cswin import CrossShapedWindowAttention, cross_shaped_window_attention
from .efficient_attention import EfficientAttention, efficient_attention
from .elfatt import ELFATTAttention, elfatt_attention
from .flatten import FocusedLinearAttention, focused_linear_attention
from .flurka import FLuRKAAttention, flurka_attention
from .litemla import LiteMLA, lite_mla_attention
from .multispot import MultiSpotAttention, multi_spot_attention
from .soft import SOFTAttention, newton_pinv, soft_kernel_attention
from .softmax import MultiHeadSoftmaxAttention, softmax_attention
from .swin import ShiftedWindowAttention, windowed_biased_attention

__all__ = [
    "OpShapeError", "check_tokens", "require", "use_plugin_ops", "plugin_ops_enabled",
    "softmax_attention", "MultiHeadSoftmaxAttention",
    "cross_shaped_window_attention", "CrossShapedWindowAttention",
    "blockify_attention", "BlockifyAttention",
    "efficient_attention", "EfficientAttention",
    "elfatt_attention", "ELFATTAttention",
    "lite_mla_attention", "LiteMLA",
    "soft_kernel_attention", "newton_pinv", "SOFTAttention",
    "flurka_attention", "FLuRKAAttention",
    "multi_spot_attention", "MultiSpotAttention",
    "windowed_biased_attention", "ShiftedWindowAttention",
    "agent_attention", "AgentAttention",
    "focused_linear_attention", "FocusedLinearAttention",
]
