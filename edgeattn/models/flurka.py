"""FLuRKA on a T2T-ViT-7 backbone: Linformer-Performer and Linformer-RNN (Gupta et al., arXiv 2306.15799).

The paper's only vision model is "T2T-ViT" with 7 layers, 4 heads of 64, FFN 512, 4.3M parameters (Table 6),
i.e. T2T-ViT-7 (Yuan et al. 2021, yitu-opensource/T2T-ViT
``t2t_vit_7``). Structure:

* tokens-to-token module: soft split (Unfold k7 s4 p2) -> token Performer (147 -> 64) -> re-structurize ->
  Unfold k3 s2 p1 -> token Performer (576 -> 64) -> Unfold k3 s2 p1 -> Linear(576, 256): 14x14 tokens at 224;
  a token Performer is T2T's ``Token_performer``: LN, one Linear to k|q|v (width 64), single-head Performer
  attention with 32 frozen orthogonal random features (``kernel_ratio`` 0.5), ``v + proj(attn)`` (the skip goes
  from v because the width changes), then ``+ MLP(LN(.))`` with a 64-wide hidden layer. Its attention core is
  :func:`edgeattn.ops.flurka.flurka_attention` with uncompressed keys/values (E = I is the plain Performer);
* class token + fixed sinusoidal position table (a non-persistent buffer, as T2T's frozen table);
* 7 pre-LN blocks, width 256, MLP 2x (512), qkv without bias (T2T default), attention =
  :class:`~edgeattn.ops.flurka.FLuRKAAttention` (Eq. 2: E1/E2 compress the 197 tokens to ``rank`` before the
  K/V projections, then the kernel feature map, row-normalised): ``feature_map="performer"`` for
  Linformer-Performer (FAVOR+, int(d ln d) = 266 features for d = 64), ``"elu"`` (elu + 1) for Linformer-RNN;
* final LayerNorm, class token -> Linear head.

E fixes N at build time. E1 and E2 are learned (rank x N) matrices (Linformer), N = (img_size/16)^2 + 1: a
model is built for one resolution and rejects any other input size; build another one with ``img_size=`` for
another resolution (weights other than E1/E2 transfer).

Parameters. The T2T-ViT-7 backbone has 4.256M parameters (4.3M in the paper's Table 6). The paper gives no
d_k for the ImageNet runs; ``rank`` defaults to 64 (= the head width; 197 -> 64 tokens), and E1/E2 then add
2 x 64 x 197 x 7 = 176,512 learned parameters, 4.432M in total, 3 % above the table. Table 6's 4.3M is the same
number for every attention variant it trains, so it counts the backbone; a FLuRKA with Gaussian fixed E (as the
text describes E) would not count E as parameters either.
"""
import torch
import torch.nn as nn

from ..errors import EdgeAttnError
from ..ops.flurka import FLuRKAAttention, flurka_attention, orthogonal_gaussian_features
from ._layers import Mlp, PreNormBlock, check_image, conv_out, init_weights, sinusoid_table, normal_param
from ._registry import register_model

EMBED_DIM, DEPTH, NUM_HEADS, MLP_RATIO, TOKEN_DIM = 256, 7, 4, 2.0, 64
FLURKA_PAPER = "FLuRKA (Gupta et al.) Table 6: T2T-ViT, 7 layers, 4 heads x 64, FFN 512"


def token_grid(img_size):
    """Side of the token map after the three soft splits (k7 s4 p2, k3 s2 p1, k3 s2 p1)."""
    return conv_out(conv_out(conv_out(img_size, 7, 4, 2), 3, 2, 1), 3, 2, 1)


class TokenPerformer(nn.Module):
    """T2T-ViT's Token_performer: LN -> k|q|v Linear -> single-head Performer attention -> v + proj -> + MLP.

    The Performer core is :func:`edgeattn.ops.flurka.flurka_attention` (feature map "performer", keys/values not
    compressed) with ``int(emb * kernel_ratio)`` frozen orthogonal random features.
    """

    def __init__(self, in_dim, emb=TOKEN_DIM, kernel_ratio=0.5, seed=0):
        super().__init__()
        self.emb = emb
        self.norm1 = nn.LayerNorm(in_dim)
        self.kqv = nn.Linear(in_dim, 3 * emb)
        self.proj = nn.Linear(emb, emb)
        self.norm2 = nn.LayerNorm(emb)
        self.mlp = Mlp(emb, emb)
        features = int(emb * kernel_ratio)
        generator = torch.Generator().manual_seed(seed)
        self.register_buffer("projection", orthogonal_gaussian_features(features, emb, generator))

    def forward(self, x):
        k, q, v = self.kqv(self.norm1(x)).split(self.emb, dim=-1)  # T2T's k, q, v order
        y = v + self.proj(flurka_attention(q, k, v, num_heads=1, feature_map="performer",
                                           projection=self.projection, eps=1e-8))
        return y + self.mlp(self.norm2(y))


class T2TModule(nn.Module):
    """Tokens-to-token: three soft splits with two token Performers in between, then a Linear to embed_dim."""

    def __init__(self, embed_dim=EMBED_DIM, token_dim=TOKEN_DIM):
        super().__init__()
        self.soft_split0 = nn.Unfold(kernel_size=7, stride=4, padding=2)
        self.soft_split1 = nn.Unfold(kernel_size=3, stride=2, padding=1)
        self.soft_split2 = nn.Unfold(kernel_size=3, stride=2, padding=1)
        self.attention1 = TokenPerformer(3 * 7 * 7, token_dim, seed=1)
        self.attention2 = TokenPerformer(token_dim * 3 * 3, token_dim, seed=2)
        self.project = nn.Linear(token_dim * 3 * 3, embed_dim)

    def forward(self, x):
        side = conv_out(x.shape[2], 7, 4, 2), conv_out(x.shape[3], 7, 4, 2)
        x = self.attention1(self.soft_split0(x).transpose(1, 2))
        x = x.transpose(1, 2).reshape(x.shape[0], x.shape[2], side[0], side[1])
        side = conv_out(side[0], 3, 2, 1), conv_out(side[1], 3, 2, 1)
        x = self.attention2(self.soft_split1(x).transpose(1, 2))
        x = x.transpose(1, 2).reshape(x.shape[0], x.shape[2], side[0], side[1])
        return self.project(self.soft_split2(x).transpose(1, 2))


class FLuRKAViT(nn.Module):
    """T2T-ViT-7 with FLuRKA attention in its 7 transformer blocks (see the module docstring)."""

    def __init__(self, arch, img_size, num_classes, feature_map, rank, num_features=None):
        super().__init__()
        self.arch = arch
        self.img_size = img_size
        if img_size < 32:
            raise EdgeAttnError("{}: input resolution {} is too small; the tokens-to-token module downsamples by 16 "
                                "(minimum 32)".format(arch, img_size))
        side = token_grid(img_size)
        self.num_tokens = side * side + 1
        self.tokens_to_token = T2TModule()
        self.cls_token = normal_param(1, 1, EMBED_DIM)
        self.register_buffer("pos_embed", sinusoid_table(self.num_tokens, EMBED_DIM), persistent=False)
        self.blocks = nn.ModuleList(
            PreNormBlock(EMBED_DIM, FLuRKAAttention(EMBED_DIM, NUM_HEADS, self.num_tokens, rank,
                                                    feature_map=feature_map, num_features=num_features,
                                                    qkv_bias=False, seed=10 + index),
                         mlp_ratio=MLP_RATIO)
            for index in range(DEPTH))
        self.norm = nn.LayerNorm(EMBED_DIM)
        self.head = nn.Linear(EMBED_DIM, num_classes)
        init_weights(self)

    def forward(self, x):
        height, width = check_image(self.arch, x)
        if (height, width) != (self.img_size, self.img_size):
            raise EdgeAttnError(
                "{}: this model was built for {}x{} inputs (N={} tokens: FLuRKA's E1/E2 fix the sequence length at "
                "build time), got {}x{}; build it with img_size={}".format(
                    self.arch, self.img_size, self.img_size, self.num_tokens, height, width, height))
        x = self.tokens_to_token(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        hw = (1, x.shape[1])  # the class token has no place on a 2-D grid; FLuRKA needs none
        for block in self.blocks:
            x = block(x, hw)
        return self.head(self.norm(x)[:, 0])


def _build(arch, img_size, num_classes, feature_map, rank, num_features=None):
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise EdgeAttnError("{}: rank (d_k) must be a positive integer, got {!r}".format(arch, rank))
    model = FLuRKAViT(arch, img_size, num_classes, feature_map, rank, num_features)
    model.edgeattn_config = {"rank": rank}
    if feature_map == "performer":
        model.edgeattn_config["num_features"] = num_features
    return model


@register_model(family="flurka", paper={"source": FLURKA_PAPER, "params": "4.3M"})
def flurka_t2t7_linformer_performer(img_size=224, num_classes=1000, *, rank=64, num_features=None):
    """FLuRKA Linformer-Performer on T2T-ViT-7 (E1/E2 to ``rank`` tokens, FAVOR+ features); 4.43M params.

    Config: ``rank`` (d_k, compressed sequence length, 64), ``num_features`` (random features per head;
    None = int(d ln d) = 266). E fixes the token count at build time: inputs must be img_size x img_size.
    """
    return _build("flurka_t2t7_linformer_performer", img_size, num_classes, "performer", rank, num_features)


@register_model(family="flurka", paper={"source": FLURKA_PAPER, "params": "4.3M"})
def flurka_t2t7_linformer_rnn(img_size=224, num_classes=1000, *, rank=64):
    """FLuRKA Linformer-RNN on T2T-ViT-7 (E1/E2 to ``rank`` tokens, elu + 1 features); 4.43M params.

    Config: ``rank`` (d_k, 64). E fixes the token count at build time: inputs must be img_size x img_size.
    """
    return _build("flurka_t2t7_linformer_rnn", img_size, num_classes, "elu", rank)
