"""benchmarks/kernels_gpu.py without a GPU: it imports without torch or CUDA, parses its arguments, builds the
CSWin-T24181 stage table the model uses, counts FLOPs as the math does, evaluates the issue's targets, refuses to run
without a GPU (one line, exit 2, no output file), and its PyTorch baselines compute the same math as the op
references (so the GPU comparison is like with like).
"""
import importlib.util
import json
import os
import re
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
    # quadratic Taylor: 2d + 1 features per token instead of d
    assert bench.lite_mla_flops(1, 49, 64, 32, "quadratic_taylor") == 2 * (33 * 49 * 65 * 2) * 2
    n, m, d, iters = 196, 49, 32, 20
    assert bench.soft_flops(1, n, m, 64, 2, iters) == 2 * 2 * (3 * n * m * d + 2 * m * m * d + 2 * iters * m ** 3)
    assert bench.token_bytes(2, 10, 8, 2) == 4 * 2 * 10 * 8 * 2


def test_the_formulas_are_the_cost_models(bench):
    """One cost model: the benchmark's counts are edgeattn/cost.py's MACs x 2 and compulsory bytes, through
    kernel_cases.py, which kernels_traffic.py shares."""
    from edgeattn import cost
    assert bench.blockify_flops(2, 14, 64, 2, 7) == cost.flops(cost.window_attention_macs(14, 14, 7, 64, batch=2))
    assert bench.token_bytes(2, 10, 8, 2) == cost.token_tensors_bytes(10, 8, 2, batch=2)
    import kernel_cases
    assert bench.stage_cases is kernel_cases.stage_cases and bench.soft_flops is kernel_cases.soft_flops


def test_each_result_reports_its_fraction_of_the_roofline(bench):
    """fraction_of_roofline = max(FLOPs / tensor peak, compulsory bytes / bandwidth) / latency, and which bound."""
    recorder = bench.Recorder({"peak_fp16_tensor_tflops": 100.0, "peak_fp32_tflops": 10.0,
                               "peak_bandwidth_gbps": 1000.0})
    case = {"op": "efficient_attention", "resolution": 224, "stage": 1, "batch": 64, "tokens": 3136}
    # memory-bound: 1e9 bytes at 1000 GB/s = 1 ms; 1e9 FLOPs at 100 TFLOP/s = 0.01 ms; measured 4 ms -> 25 %
    recorder.add(case, "edgeattn_scalar", 4.0, 1e9, 1e9, "float16", False, "cuda_graph")
    # compute-bound: 1e12 FLOPs = 10 ms against 1e6 bytes = 0.001 ms; measured 20 ms -> 50 %
    recorder.add(case, "sdpa_flash", 20.0, 1e12, 1e6, "float16", False, "cuda_graph")
    memory, compute = recorder.results
    assert memory["roofline_ms"] == pytest.approx(1.0) and memory["fraction_of_roofline"] == pytest.approx(0.25)
    assert memory["roofline_bound"] == "memory"
    assert compute["roofline_ms"] == pytest.approx(10.0) and compute["fraction_of_roofline"] == pytest.approx(0.5)
    assert compute["roofline_bound"] == "compute"
    unknown = bench.Recorder({"peak_fp16_tensor_tflops": None, "peak_fp32_tflops": None, "peak_bandwidth_gbps": None})
    unknown.add(case, "edgeattn_scalar", 4.0, 1e9, 1e9, "float16", False, "eager")
    assert unknown.results[0]["fraction_of_roofline"] is None


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
    """Each case is judged by its faster kernel path (the one a deployment runs): the slower path of a case can
    neither fail a target nor pass one."""
    results = bench.add_speedups([
        _entry("blockify_attention", "edgeattn_tensor_core", 1.0, fraction_of_fp16_tensor_peak=0.3),
        _entry("blockify_attention", "edgeattn_scalar", 4.0, fraction_of_fp16_tensor_peak=0.075),
        _entry("blockify_attention", "sdpa_flash", 1.5),
        _entry("blockify_attention", "sdpa_efficient", 2.0),
        _entry("blockify_attention", "edgeattn_tensor_core", 2.0, stage=3, fraction_of_fp16_tensor_peak=0.2),
        _entry("blockify_attention", "edgeattn_scalar", 1.0, stage=3, fraction_of_fp16_tensor_peak=0.1),
        _entry("blockify_attention", "sdpa_flash", 0.5, stage=3),
        _entry("efficient_attention", "edgeattn_scalar", 2.0, fraction_of_bandwidth_peak=0.5),
        _entry("efficient_attention", "edgeattn_tensor_core", 2.5, fraction_of_bandwidth_peak=0.9),
        _entry("efficient_attention", "cublas_bmm", 1.0),
        _entry("elfatt_core", "edgeattn_tensor_core", 1.0, batch=1, resolution=None, stage=None, tokens=3136),
        _entry("elfatt_core", "sdpa_flash", 2.5, batch=1, resolution=None, stage=None, tokens=3136),
    ])
    tensor_core = results[0]
    assert tensor_core["speedup_vs_sdpa_flash"] == 1.5 and tensor_core["speedup_vs_best_pytorch"] == 1.5
    assert "speedup_vs_edgeattn_scalar" not in tensor_core
    targets = bench.evaluate_targets(results)
    speedup = targets["kernels_vs_pytorch_fp16_batch64"]
    assert not speedup["met"] and speedup["worst"] == 0.5
    assert speedup["worst_case"] == ["blockify_attention", 512, 3, "edgeattn_scalar"]
    # stage 1's faster path (tensor cores) reaches 0.3; stage 3's faster path (scalar, 1.0 ms) only 0.1
    assert targets["blockify_tensor_peak_512_batch64"] == {
        "met": False, "lowest": 0.1, "lowest_case": ["blockify_attention", 512, 3, "edgeattn_scalar"], "target": 0.25}
    # the faster EFFATT path (scalar, 2.0 ms) reaches 0.5 of the bandwidth: the slower path's 0.9 does not count
    assert targets["linear_passes_bandwidth_fp16_batch64"]["lowest"] == 0.5
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


def test_a_failed_measurement_is_recorded_and_never_a_baseline(bench):
    """A backend that refuses a shape (SDPA's 'No available kernel') leaves an entry with its error, takes no part
    in the speedups, and the run goes on."""
    recorder = bench.Recorder({"peak_fp16_tensor_tflops": 100.0, "peak_fp32_tflops": 10.0,
                               "peak_bandwidth_gbps": 1000.0})
    case = {"op": "blockify_attention", "resolution": 512, "stage": 1, "batch": 64, "tokens": 16384}

    def refuse():
        raise RuntimeError("No available kernel. Aborting execution.\nmore detail")

    recorder.measure(case, "sdpa_flash", lambda fn: fn(), refuse, 8e9, 1e6, "float16", False)
    recorder.measure(case, "sdpa_efficient", lambda fn: (4.0, "eager"), None, 8e9, 1e6, "float16", False)
    recorder.measure(case, "edgeattn_tensor_core", lambda fn: (2.0, "eager"), None, 8e9, 1e6, "float16", False)
    failed, efficient, ours = bench.add_speedups(recorder.results)
    assert failed["latency_ms"] is None and failed["error"] == "RuntimeError: No available kernel. Aborting execution."
    assert ours["speedup_vs_best_pytorch"] == 2.0 and ours["speedup_vs_sdpa_efficient"] == 2.0
    assert "speedup_vs_sdpa_flash" not in ours
    assert bench.evaluate_targets(recorder.results)["blockify_tensor_peak_512_batch64"]["lowest"] == \
        pytest.approx(8e9 / 2e-3 / 1e12 / 100.0)
    assert [e["impl"] for e in bench.faster_paths(recorder.results)] == ["edgeattn_tensor_core"]


def test_a_stopped_run_leaves_the_stages_it_finished(bench, monkeypatch, tmp_path):
    """The JSON is rewritten after every stage with complete=false, so a run killed by a time limit keeps what it
    measured; the finished run rewrites it with complete=true."""
    torch = pytest.importorskip("torch")
    from edgeattn.plugins import kernels_abi

    class FakeKernels(object):
        path = "/fake/libedgeattn_kernels.so"

        def __init__(self, library):
            pass

        def build_info(self):
            return "fake"

    out = tmp_path / "kernels.json"
    seen = []

    def fake_run(args, torch_module, kernels, device, on_progress=None):
        first = [_entry("efficient_attention", "edgeattn_scalar", 2.0),
                 _entry("efficient_attention", "cublas_bmm", 1.0)]
        on_progress(bench.add_speedups(first))
        seen.append(json.loads(out.read_text()))
        return bench.add_speedups(first + [_entry("lite_mla", "edgeattn_scalar", 1.0),
                                           _entry("lite_mla", "cublas_bmm", 3.0)])

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(kernels_abi, "KernelsLibrary", FakeKernels)
    monkeypatch.setattr(bench, "device_report", lambda torch_module, args: {"name": "fake"})
    monkeypatch.setattr(bench, "run", fake_run)
    assert bench.main(["--json", str(out)]) == 0
    partial, final = seen[0], json.loads(out.read_text())
    assert partial["complete"] is False and len(partial["results"]) == 2
    assert final["complete"] is True and len(final["results"]) == 4
    assert final["results"][2]["speedup_vs_cublas_bmm"] == 3.0


class _FakeCuda(object):
    """torch.cuda as time_ms uses it, on a fake GPU clock: an eager call costs 2 ms, a call replayed from a CUDA
    graph 1 ms (the launch overhead a graph removes); ``capturable=False`` makes capture fail like a host sync."""

    def __init__(self, capturable):
        self.clock = 0.0
        self.capturable = capturable
        self.capturing = False
        self.captured_calls = 0
        cuda = self

        class Event(object):
            def __init__(self, enable_timing=False):
                self.time = None

            def record(self):
                self.time = cuda.clock

            def synchronize(self):
                pass

            def elapsed_time(self, end):
                return end.time - self.time

        class CUDAGraph(object):
            def replay(self):
                cuda.clock += 1.0 * cuda.captured_calls

        class graph(object):
            def __init__(self, captured):
                pass

            def __enter__(self):
                cuda.capturing = True

            def __exit__(self, *exc):
                cuda.capturing = False
                return False

        self.Event, self.CUDAGraph, self.graph = Event, CUDAGraph, graph

    def synchronize(self):
        pass

    def call(self):
        if self.capturing:
            if not self.capturable:
                raise RuntimeError("operation not permitted when stream is capturing")
            self.captured_calls += 1
        else:
            self.clock += 2.0


@pytest.mark.parametrize("capturable, expected", [(True, (1.0, "cuda_graph")), (False, (2.0, "eager"))])
def test_graph_timing_times_replays_and_falls_back_to_eager(bench, capturable, expected):
    cuda = _FakeCuda(capturable)
    fake_torch = type("FakeTorch", (), {"cuda": cuda})
    assert bench.time_ms(fake_torch, cuda.call, warmup=2, iters=5, repeats=3, graph=True) == expected
    assert cuda.captured_calls == (5 if capturable else 0)
    assert bench.time_ms(fake_torch, cuda.call, warmup=0, iters=5, repeats=3, graph=False) == (2.0, "eager")


SUMMARY = os.path.join(REPO_ROOT, "benchmarks", "kernels_gpu_summary.py")


def _report(bench, name, results, timing=None, complete=True):
    config = {"dtypes": ["float16"]}
    if timing:
        config["timing"] = timing
    return {"schema": "edgeattn.kernels_gpu/2", "created_utc": "2026-11-26T06:1{}:00Z".format(len(results)),
            "complete": complete, "device": {"name": name}, "software": {"torch": "x"}, "config": config,
            "results": bench.add_speedups(results), "targets": {}}


def test_merged_runs_keep_their_timing_and_judge_targets_over_all_results(bench, tmp_path):
    """Runs split to fit a lease merge into one report: entries of runs from before --timing say "eager", the
    targets are evaluated over every run's results, a different GPU or an unreadable report is refused."""
    graph = _report(bench, "NVIDIA H200", [
        _entry("elfatt_core", "edgeattn_scalar", 1.0, batch=1, resolution=None, stage=None, tokens=65536,
               timing="cuda_graph"),
        _entry("elfatt_core", "sdpa_flash", 12.0, batch=1, resolution=None, stage=None, tokens=65536,
               timing="cuda_graph")], timing="graph")
    eager = _report(bench, "NVIDIA H200", [_entry("lite_mla", "edgeattn_scalar", 1.0),
                                           _entry("lite_mla", "cublas_bmm", 0.5)], complete=False)
    paths = []
    for index, report in enumerate((graph, eager)):
        paths.append(tmp_path / "run{}.json".format(index))
        paths[-1].write_text(json.dumps(report))
    out = tmp_path / "merged.json"
    result = run_command([sys.executable, SUMMARY, "--merge", str(out), "--note", "two runs"] + list(map(str, paths)),
                         timeout=120)
    assert result.returncode == 0, result.output[-2000:]
    merged = json.loads(out.read_text())
    assert [e["timing"] for e in merged["results"]] == ["cuda_graph", "cuda_graph", "eager", "eager"]
    assert merged["complete"] is False and merged["note"] == "two runs" and len(merged["runs"]) == 2
    assert merged["targets"]["elfatt_core_vs_sdpa"]["65536"] == {"met": True, "speedup": 12.0, "target": 10.0}
    assert merged["targets"]["kernels_vs_pytorch_fp16_batch64"]["worst"] == 0.5

    paths[1].write_text(json.dumps(_report(bench, "NVIDIA H100 80GB HBM3", eager["results"])))
    refused = run_command([sys.executable, SUMMARY, "--merge", str(tmp_path / "other.json")] + list(map(str, paths)),
                          timeout=120)
    assert refused.returncode == 2 and "different GPUs" in refused.stderr and not (tmp_path / "other.json").exists()
    paths[1].write_text("{not json")
    refused = run_command([sys.executable, SUMMARY, "--merge", str(tmp_path / "other.json")] + list(map(str, paths)),
                          timeout=120)
    assert refused.returncode == 2 and "every report readable" in refused.stderr
    assert not (tmp_path / "other.json").exists()


def test_summary_tables_show_the_faster_path_against_the_fastest_pytorch(bench, tmp_path):
    report = _report(bench, "NVIDIA H200", [
        _entry("blockify_attention", "edgeattn_scalar", 2.0),
        _entry("blockify_attention", "edgeattn_tensor_core", 1.0, fraction_of_roofline=0.1),
        _entry("blockify_attention", "sdpa_flash", 0.5, fraction_of_roofline=0.2),
        _entry("blockify_attention", "sdpa_efficient", 4.0)])
    path = tmp_path / "run.json"
    path.write_text(json.dumps(report))
    result = run_command([sys.executable, SUMMARY, str(path)], timeout=120)
    assert result.returncode == 0, result.output[-2000:]
    row = [line for line in result.stdout.splitlines() if line.startswith("| blockify_attention | float16 | 512")]
    assert len(row) == 1 and "1.0000 (tensor_core) | 0.5000 (sdpa_flash) | 0.50x" in row[0], result.stdout
    assert row[0].endswith("| 10.0 % / 20.0 % |"), row[0]  # of roofline: edgeattn / PyTorch


GPU_CHECK = os.path.join(REPO_ROOT, "benchmarks", "gpu_check.sh")
FAKE_NVIDIA_SMI = "#!/bin/sh\necho 'name, driver_version'\necho 'Fake GPU, 0.0'\n"
#: compute-sanitizer's command line: options with one value each, then the program, whose status it passes on
FAKE_SANITIZER = """#!/bin/bash
case "$1" in --help) echo '  --kernel-name <filter>'; exit 0 ;; --version) echo 'fake 2025.3'; exit 0 ;; esac
echo "sanitizer: $*"
while [[ "$1" == --* ]]; do shift 2; done
"$@"; status=$?
echo '========= ERROR SUMMARY: 0 errors'
exit $status
"""


def _fake_tools(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("nvidia-smi", FAKE_NVIDIA_SMI), ("compute-sanitizer", FAKE_SANITIZER)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return dict(os.environ, PATH=str(bin_dir) + os.pathsep + os.environ["PATH"], PYTHON=sys.executable)


def test_gpu_check_script_runs_each_step_and_bundles_its_logs(kernels_build, tmp_path):
    """benchmarks/gpu_check.sh, the script a short GPU lease runs, on this machine with a fake nvidia-smi and
    compute-sanitizer: the given library is used, the tests and each sanitizer run get their selection, the
    benchmark's and the model benchmark's refusals are logged, every log lands in logs.tar.gz and the summary comes last. A mistyped sanitizer
    run is refused before anything starts (device time is scarce)."""
    import tarfile

    pytest.importorskip("torch")
    env = _fake_tools(tmp_path)
    env.update(GPU_CHECK_TEST_K="no_cuda_error", GPU_CHECK_SANITIZERS="memcheck:soft racecheck:subset",
               GPU_CHECK_BENCH_RUNS="float16_core")
    out = tmp_path / "out"
    result = run_command(["bash", GPU_CHECK, str(out), kernels_build["library"]], env=env, timeout=600,
                         cwd=str(tmp_path))
    assert result.returncode == 0, result.output[-4000:]
    assert sorted(os.listdir(str(out))) == ["gpu_tests.xml", "logs.tar.gz"], result.output[-2000:]
    assert "{}: edgeattn kernels".format(kernels_build["library"]) in result.stdout
    assert result.stdout.rstrip().splitlines()[-1].endswith("done")
    with tarfile.open(str(out / "logs.tar.gz")) as bundle:
        logs = {os.path.basename(member.name): bundle.extractfile(member).read().decode()
                for member in bundle.getmembers() if member.isfile()}
    assert {"gpu_tests.log", "sanitizer_memcheck_soft.log", "sanitizer_racecheck_subset.log",
            "bench_float16_core.log", "library.txt"} <= set(logs), sorted(logs)
    assert re.search(r"\b1 skipped, \d+ deselected", logs["gpu_tests.log"]), logs["gpu_tests.log"][-2000:]
    assert "pytest exit status 0" in logs["gpu_tests.log"]
    memcheck = logs["sanitizer_memcheck_soft.log"]
    assert "--tool memcheck --kernel-name kns=edgeattn" in memcheck and "-k soft_kernel" in memcheck
    assert "test_soft_kernel_attention_edge_cases" in memcheck and "test_blockify" not in memcheck
    assert "compute-sanitizer exit status 0" in memcheck
    assert "-k (edge_cases or 224" in logs["sanitizer_racecheck_subset.log"]
    bench = logs["bench_float16_core.log"]
    assert "needs a CUDA GPU" in bench and "kernels_gpu.py exit status 2" in bench
    models = logs["models_gpu.log"]  # the model benchmark's step: its own budget, its refusal logged
    assert "needs a CUDA GPU" in models and "models_gpu.py exit status 2" in models
    assert result.stdout.index("model benchmark") > result.stdout.index("benchmark (alone on the GPU)")
    assert "-- memcheck_soft:" in result.stdout and "-- racecheck_subset:" in result.stdout

    env["GPU_CHECK_SANITIZERS"] = "memcheck:everything"
    refused = run_command(["bash", GPU_CHECK, str(tmp_path / "refused"), kernels_build["library"]], env=env,
                          timeout=120)
    assert refused.returncode == 2 and "unknown selection in 'memcheck:everything'" in refused.stderr
    assert not (tmp_path / "refused").exists()
