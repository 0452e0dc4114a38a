"""Planted bugs: each test monkeypatches one plausible mistake into the project (no file is edited) and asserts
that the checks the suite itself runs -- the very functions the export, oracle and block tests call -- fail.

Without them a green suite only says that the project agrees with itself: the first three are bugs that once passed
every test (issue 17: QT-ViT's beta and gamma swapped in the export symbolic, the second LayerNorm of every pre-norm
block dropped, the blockify node's height and width swapped); the others are the next likeliest of their kind.
"""
import importlib
import os
import sys

import pytest

torch = pytest.importorskip("torch")

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _folder in ("export", "models"):
    if os.path.join(TESTS, _folder) not in sys.path:
        sys.path.insert(0, os.path.join(TESTS, _folder))

import test_blocks as blocks  # noqa: E402
import test_export_models as exports  # noqa: E402
import test_oracles as oracles  # noqa: E402
from edgeattn.errors import EdgeAttnError  # noqa: E402
from edgeattn.export import symbolics  # noqa: E402



def assert_check_fails(check):
    """``check`` must fail as a check does: an assertion of the tests, or the exporter's parity refusal -- not an
    export that the planted bug merely broke (which would prove nothing about the checks)."""
    try:
        check()
    except AssertionError:
        return
    except EdgeAttnError as error:
        assert "differs from PyTorch" in str(error), "the planted bug broke the export instead: {}".format(error)
        return
    pytest.fail("the planted bug went unnoticed")


def non_square_case(arch):
    return next(case for case in exports.NON_SQUARE if case[0] == arch)


def patch_symbolic(monkeypatch, op_name, rewrite_args):
    """Replace the export symbolic of ``edgeattn::<op_name>`` by one that rewrites its arguments first
    (``rewrite_args(args, g)``; args are TorchScript values, constants included)."""
    original = symbolics.CUSTOM_OP_SYMBOLICS["edgeattn::" + op_name]

    def planted(g, *args):
        return original(g, *rewrite_args(list(args), g))

    monkeypatch.setitem(symbolics.CUSTOM_OP_SYMBOLICS, "edgeattn::" + op_name, planted)


# ---- the three escapes of issue 17 ------------------------------------------------------------------------------
def test_qt_beta_gamma_swapped_in_the_litemla_symbolic_is_caught(monkeypatch):
    # lite_mla(qkv, head_dim, kernel, eps, qt_alpha, qt_beta, qt_gamma)
    patch_symbolic(monkeypatch, "lite_mla", lambda a, g: a[:5] + [a[6], a[5]])
    assert_check_fails(lambda: exports.check_non_square(*non_square_case("qtvit_1")))


def test_qt_swap_is_caught_by_the_node_mapping_check_alone(monkeypatch):
    """Even where parity were blind, the node attributes must equal the arguments PyTorch passed."""
    patch_symbolic(monkeypatch, "lite_mla", lambda a, g: a[:5] + [a[6], a[5]])
    monkeypatch.setitem(exports.PARITY_GATES, "qtvit_1", float("inf"))
    arch, height, width, _ = non_square_case("qtvit_1")
    exported, _, calls = exports.export_non_square(arch, height, width)
    with pytest.raises(AssertionError):
        exports.check_plugin_nodes(exports.gs_custom_nodes(exported), exported, calls)


def _without_second_norm(self, x, hw):
    x = x + self.attn(self.norm1(x), hw)
    return x + self.mlp(x)


@pytest.mark.parametrize("oracle", [
    lambda: oracles.check_vit("vit_tiny_softmax"),
    lambda: oracles.check_cswin("cswin_t24181_elfatt", 224),
    lambda: oracles.check_flurka("flurka_t2t7_linformer_rnn", "elu"),
    lambda: oracles.check_soft("softpp_tiny", 160, "softmax"),
], ids=["vit", "cswin", "flurka", "softpp"])
def test_second_layernorm_of_pre_norm_blocks_dropped_is_caught(monkeypatch, oracle):
    from edgeattn.models._layers import PreNormBlock

    monkeypatch.setattr(PreNormBlock, "forward", _without_second_norm)
    with pytest.raises(AssertionError):
        oracle()
    with pytest.raises(AssertionError):
        blocks.test_pre_norm_block()


def test_blockify_height_width_swapped_in_the_symbolic_is_caught(monkeypatch):
    # blockify_attention(q, k, v, lepe_weight, lepe_bias, num_heads, height, width, window_size, scale, padding)
    patch_symbolic(monkeypatch, "blockify_attention", lambda a, g: a[:6] + [a[7], a[6]] + a[8:])
    assert_check_fails(lambda: exports.check_non_square(*non_square_case("vit_tiny_elfatt")))


# ---- more of their kind -------------------------------------------------------------------------------------------
def _efficient_attention_keys_over_features(q, k, v, *, num_heads, out=None):
    """EFFATT with the key softmax taken over each token's features instead of over the tokens."""
    b, n, c = q.shape
    d = c // num_heads
    q_hat = torch.softmax(q.reshape(b, n, num_heads, d), dim=-1).transpose(1, 2)
    k_hat = torch.softmax(k.reshape(b, n, num_heads, d), dim=-1).permute(0, 2, 3, 1)
    result = torch.matmul(q_hat, torch.matmul(k_hat, v.reshape(b, n, num_heads, d).transpose(1, 2)))
    result = result.transpose(1, 2).reshape(b, n, c)
    if out is not None:
        out.copy_(result)
        return out
    return result


def test_effatt_key_softmax_axis_is_caught(monkeypatch):
    # edgeattn.ops re-exports functions under the submodules' names, so fetch the modules themselves
    for name in ("edgeattn.ops.efficient_attention", "edgeattn.ops.elfatt"):
        module = importlib.import_module(name)
        monkeypatch.setattr(module, "efficient_attention", _efficient_attention_keys_over_features)
    with pytest.raises(AssertionError):
        oracles.check_vit("vit_tiny_elfatt")
    with pytest.raises(AssertionError):
        blocks.test_efficient_attention_module()


def test_full_map_lepe_omitted_is_caught(monkeypatch):
    from edgeattn.ops.lepe import TokenAttention

    monkeypatch.setattr(TokenAttention, "full_map_lepe", False)
    with pytest.raises(AssertionError):
        oracles.check_cswin("cswin_t24181_effatt", 224)
    with pytest.raises(AssertionError):
        blocks.test_softmax_attention_module(True)


def test_soft_newton_raphson_off_by_one_is_caught(monkeypatch):
    """At few iterations: by 20 the block test's 12 x 12 landmark inverse has converged, and one step more or less
    changes nothing a check could see (nor anything a user could)."""
    soft_module = importlib.import_module("edgeattn.ops.soft")
    original = soft_module.newton_pinv
    monkeypatch.setattr(soft_module, "newton_pinv", lambda A, iters: original(A, iters + 1))
    for iterations in (0, 1):
        with pytest.raises(AssertionError):
            blocks.test_soft_attention_module(True, iterations)


def test_soft_newton_iterations_attribute_off_by_one_is_caught(monkeypatch):
    # soft_kernel_attention(q, landmarks, v, num_heads, newton_iters, symmetric_norm)
    from torch.onnx import symbolic_helper

    def one_more(args, g):
        iterations = symbolic_helper._maybe_get_const(args[4], "i")
        return args[:4] + [g.op("Constant", value_t=torch.tensor(iterations + 1))] + args[5:]

    patch_symbolic(monkeypatch, "soft_kernel_attention", one_more)
    assert_check_fails(lambda: exports.check_non_square(*non_square_case("softpp_tiny")))


def test_cswin_stripe_orientation_swapped_is_caught(monkeypatch):
    cswin_module = importlib.import_module("edgeattn.ops.cswin")
    original = cswin_module.window_attention

    def transposed_stripes(*args, window_h, window_w, **kwargs):
        return original(*args, window_h=window_w, window_w=window_h, **kwargs)

    monkeypatch.setattr(cswin_module, "window_attention", transposed_stripes)
    with pytest.raises(AssertionError):
        oracles.check_cswin("cswin_t24181_local", 224)
    with pytest.raises(AssertionError):
        blocks.test_cswin_cross_shaped_window_module(3, (6, 9))


def test_soft_symmetric_norm_written_as_a_constant_is_caught(monkeypatch):
    """Every registered SOFT model is SOFT++, so a symbolic that always wrote symmetric_norm = 1 passed every model
    export (found by planting it): the SOFT module export must catch it."""
    # soft_kernel_attention(q, landmarks, v, num_heads, newton_iters, symmetric_norm)
    patch_symbolic(monkeypatch, "soft_kernel_attention",
                   lambda a, g: a[:5] + [g.op("Constant", value_t=torch.tensor(1))])
    assert_check_fails(lambda: exports.test_soft_attention_exports_its_symmetric_norm(False))
