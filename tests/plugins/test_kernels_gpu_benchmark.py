"""benchmarks/kernels_gpu.py without a GPU: it imports without torch or CUDA, parses its arguments, builds the
CSWin-T24181 stage table the model uses, counts FLOPs as the math does, evaluates the issue's targets, refuses to run
without a GPU (one line, exit 2, no output file), and its PyTorch baselines compute the same math as the op
references (so the GPU comparison is like with like).
"""
import importlib.util
import json
import os
import sys

import pytest

from edgeattn._subprocess import run_command
from plugin_test_utils import REPO_ROOT

BENCHMARK = os.path.join(REPO_ROOT, "benchmarks", "kernels_gpu.py")


def load_benchmark():
    spec = importlib.util.spec_from_file_location("kernels_gpu_benchmark", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    return load_benchmark()


def test_imports_without_torch():
    """A fresh interpreter where importing torch fails: the module still loads (torch is imported in main only)."""
    script = ("import sys\n"
              "class Block(object):\n"
              "    def find_spec(self, name, path=None, target=None):\n"
              "        if name == 'torch' or name.startswith('torch.'):\n"
              "            raise ImportError('torch blocked')\n"
              "sys.meta_path.insert(0, Block())\n"
              "import importlib.util\n"
              "spec = importlib.util.spec_from_file_location('b', {path!r})\n"
              "module = importlib.util.module_from_spec(spec)\n"
              "spec.loader.exec_module(module)\n"
              "print(len(module.stage_cases(224)))\n").format(path=BENCHMARK)
    result = run_command([sys.executable, "-c", script], timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "4", result.output[-2000:]


def test_defaults_cover_the_issue_matrix(bench):
    args = bench.parse_args([])
    assert args.resolutions == (224, 384, 512) and args.batches == (1, 64)
    assert set(args.dtypes) == {"float16", "float32"}
    assert set(args.ops) == {"blockify_attention", "efficient_attention", "lite_mla", "lite_mla_qt",
                             "soft_kernel_attention", "elfatt_core"}
    args = bench.parse_args(["--resolutions", "384", "--batches", "2,8", "--ops", "lite_mla", "--dtypes", "float32"])
    assert args.resolutions == (384,) and args.batches == (2, 8) and args.ops == ("lite_mla",)


@pytest.mark.parametrize("argv, message", [
    (["--resolutions", "200"], "not a multiple of 32"),
    (["--resolutions", "abc"], "comma-separated list of integers"),
    (["--batches", "0"], "positive integers"),
    (["--ops", "blockify,nope"], "choose from"),
    (["--dtypes", "bfloat16"], "choose from"),
    (["--iters", "0"], "--iters and --repeats"),
    (["--peak-gbps", "-1"], "--peak-gbps must be positive"),
])
def test_bad_arguments_are_one_line_and_exit_2(bench, capsys, argv, message):
    assert bench.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kernels_gpu.py: error: ") and message in err, err


def test_without_a_gpu_it_refuses_and_writes_nothing(bench, capsys, tmp_path):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    out = tmp_path / "result.json"
    assert bench.main(["--json", str(out)]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err and not out.exists()


def test_stage_table_matches_cswin_t24181_elfatt_defaults(bench):
    """Maps res/4..res/32, channels and heads per stage, ELFATT's default windows (stage-4 side, stage-3 side for
    stage 3: 7-7-14-7 at 224, 12-12-24-12 at 384, 16-16-32-16 at 512; edgeattn/models/cswin.py), the ELFATT branch
    halves, and SOFT's 8x8..1x1 landmark strides."""
    expected_windows = {224: [7, 7, 14, 7], 384: [12, 12, 24, 12], 512: [16, 16, 32, 16]}
    for resolution, windows in expected_windows.items():
        cases = bench.stage_cases(resolution)
        assert [c["side"] for c in cases] == [resolution // 4, resolution // 8, resolution // 16, resolution // 32]
        assert [c["window"] for c in cases] == windows
        assert all(c["side"] % c["window"] == 0 for c in cases)
        assert [(c["channels"], c["heads"]) for c in cases] == [(64, 2), (128, 4), (256, 8), (512, 16)]
        assert [(c["branch_channels"], c["branch_heads"]) for c in cases] == [(32, 1), (64, 2), (128, 4), (256, 8)]
    assert [c["landmarks"] for c in bench.stage_cases(224)] == [49, 49, 49, 49]
    assert [c["landmarks"] for c in bench.stage_cases(512)] == [256, 256, 256, 256]


def test_flop_counts_follow_the_math(bench):
    # blockify: 2 products (QK^T, PV) of T x T x d per window and head, 2 FLOPs per multiply-add
    assert bench.blockify_flops(2, 14, 64, 2, 7) == 2 * 4 * 2 * (49 * 49 * 32 * 2) * 2
    assert bench.blockify_flops(1, 10, 8, 1, 7) == 4 * (49 * 49 * 8 * 2) * 2  # padded to 2x2 windows
    assert bench.efficient_flops(3, 100, 64, 2) == 3 * 2 * (32 * 100 * 32 * 2) * 2
    assert bench.lite_mla_flops(1, 49, 64, 32) == 2 * (33 * 49 * 32 * 2) * 2
    n, m, d, iters = 196, 49, 32, 20
    assert bench.soft_flops(1, n, m, 64, 2, iters) == 2 * 2 * (3 * n * m * d + 2 * m * m * d + 2 * iters * m ** 3)
    assert bench.token_bytes(2, 10, 8, 2) == 4 * 2 * 10 * 8 * 2


def test_peak_estimates_reproduce_data_sheet_numbers(bench):
    tensor, fp32 = bench.estimated_peaks((8, 0), 108, 1410000)  # A100 SXM: 312 TFLOP/s FP16 tensor, 19.5 FP32
    assert abs(tensor - 312) < 1 and abs(fp32 - 19.5) < 0.1
    tensor, _ = bench.estimated_peaks((9, 0), 132, 1830000)  # H100 SXM at 1830 MHz: ~989 TFLOP/s
    assert abs(tensor - 989) < 1
    tensor, fp32 = bench.estimated_peaks((8, 7), 16, 1300000)  # Jetson AGX Orin 64 GB: ~42 / 5.3 TFLOP/s
    assert abs(tensor - 42.6) < 0.5 and abs(fp32 - 5.3) < 0.05
    assert bench.estimated_peaks((12, 1), 10, 1000000) == (None, None)


def _entry(op, impl, ms, dtype="float16", batch=64, resolution=512, stage=1, **extra):
    entry = {"op": op, "impl": impl, "latency_ms": ms, "dtype": dtype, "batch": batch, "resolution": resolution,
             "stage": stage, "tokens": 100, "tf32": False, "fraction_of_fp16_tensor_peak": None,
             "fraction_of_bandwidth_peak": None}
    entry.update(extra)
    return entry


def test_speedups_and_targets_from_results(bench):
    results = bench.add_speedups([
        _entry("blockify_attention", "edgeattn_tensor_core", 1.0, fraction_of_fp16_tensor_peak=0.3),
        _entry("blockify_attention", "edgeattn_scalar", 4.0, fraction_of_fp16_tensor_peak=0.075),
        _entry("blockify_attention", "sdpa_flash", 1.5),
        _entry("blockify_attention", "sdpa_efficient", 2.0),
        _entry("efficient_attention", "edgeattn_scalar", 2.0, fraction_of_bandwidth_peak=0.5),
        _entry("efficient_attention", "cublas_bmm", 1.0),
        _entry("elfatt_core", "edgeattn_tensor_core", 1.0, batch=1, resolution=None, stage=None, tokens=3136),
        _entry("elfatt_core", "sdpa_flash", 2.5, batch=1, resolution=None, stage=None, tokens=3136),
    ])
    tensor_core = results[0]
    assert tensor_core["speedup_vs_sdpa_flash"] == 1.5 and tensor_core["speedup_vs_best_pytorch"] == 1.5
    assert "speedup_vs_edgeattn_scalar" not in tensor_core
    targets = bench.evaluate_targets(results)
    speedup = targets["kernels_vs_pytorch_fp16_batch64"]
    assert not speedup["met"] and speedup["worst"] == 0.5 and speedup["worst_case"][0] == "efficient_attention"
    assert targets["blockify_tensor_peak_512_batch64"] == {"met": False, "lowest": 0.075, "target": 0.25}
    assert targets["linear_passes_bandwidth_fp16_batch64"]["met"] is False
    assert targets["elfatt_core_vs_sdpa"]["3136"] == {"met": True, "speedup": 2.5, "target": 2.0}
    assert targets["elfatt_core_vs_sdpa"]["65536"] is None
    assert json.dumps(targets)


# ---- the PyTorch baselines compute the op's math ---------------------------------------------------------------------
@pytest.mark.parametrize("height, width, window", [(14, 14, 7), (12, 12, 12), (10, 13, 7)])
def test_blockify_sdpa_is_the_blockify_op(bench, height, width, window):
    torch = pytest.importorskip("torch")
    from edgeattn.ops.blockify import blockify_attention

    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, height * width, 48, generator=generator, dtype=torch.float64) for _ in range(3))
    padding = "none" if height % window == 0 and width % window == 0 else "zeros"
    expected = blockify_attention(q, k, v, num_heads=3, height=height, width=width, window_size=window,
                                  padding=padding)
    got = bench.blockify_sdpa(q, k, v, 3, height, width, window)
    assert torch.allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_efficient_bmm_is_the_efficient_attention_op(bench):
    torch = pytest.importorskip("torch")
    from edgeattn.ops.efficient_attention import efficient_attention

    generator = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 77, 64, generator=generator, dtype=torch.float64) * 2 for _ in range(3))
    assert torch.allclose(bench.efficient_bmm(q, k, v, 2), efficient_attention(q, k, v, num_heads=2),
                          rtol=1e-10, atol=1e-12)


def test_lite_mla_relu_bmm_is_the_lite_mla_op(bench):
    torch = pytest.importorskip("torch")
    from edgeattn.ops.litemla import lite_mla_attention

    generator = torch.Generator().manual_seed(2)
    qkv = torch.randn(2, 3 * 3 * 16, 7, 9, generator=generator, dtype=torch.float64)
    expected = lite_mla_attention(qkv, head_dim=16, kernel="relu", eps=1e-15)
    got = bench.lite_mla_relu_bmm(qkv, 16, eps=1e-15)
    assert torch.allclose(got, expected, rtol=1e-10, atol=1e-12)
