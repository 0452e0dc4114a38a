"""benchmarks/models_gpu.py without a GPU: the case list, the paper's Table I beside the 224 cases, img/s from the
timer, failures recorded and the run going on, the ratios between cases, the JSON rewritten after every case, and
exit status 2 with one line for bad arguments or no GPU. A fake timer stands in for CUDA events and a stand-in model
for the CSWin models (whose forward passes on these shapes are the GPU's job)."""
import importlib.util
import json
import os

import pytest

torch = pytest.importorskip("torch")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO_ROOT, "benchmarks", "models_gpu.py")


@pytest.fixture(scope="module")
def models_gpu():
    spec = importlib.util.spec_from_file_location("models_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_default_cases_are_every_model_setting_resolution_and_batch(models_gpu):
    listed = models_gpu.cases(models_gpu.parse_args([]))
    keys = [(c["model"], c["impl"], c["resolution"], c["batch"]) for c in listed]
    expected = [(model, impl, resolution, batch)
                for model in ("global", "elfatt") for resolution in (224, 384, 512)
                for impl in ("sdpa_flash", "sdpa_math", "edgeattn") for batch in (64, 256)
                if not (model == "global" and impl == "edgeattn")]
    assert keys == expected
    assert {c["arch"] for c in listed} == {"cswin_t24181_global", "cswin_t24181_elfatt"}


def test_the_paper_numbers_stand_beside_the_224_cases_only(models_gpu):
    def paper(model, impl, resolution):
        return models_gpu.paper_img_per_s({"model": model, "impl": impl, "resolution": resolution})
    # ELFATT Table I (H20, AMP): GLOBAL 2210 / 1303, ELFATT 2856 / 2603 img/s with / without FlashAttention-2
    assert (paper("global", "sdpa_flash", 224), paper("global", "sdpa_math", 224)) == (2210, 1303)
    assert (paper("elfatt", "sdpa_flash", 224), paper("elfatt", "sdpa_math", 224)) == (2856, 2603)
    assert paper("elfatt", "edgeattn", 224) is None and paper("elfatt", "sdpa_flash", 384) is None


@pytest.mark.parametrize("argv, message", [
    (["--resolutions", "200"], "not a multiple of 32"),
    (["--impls", "cudnn"], "invalid choice"),
    (["--batches", "0"], "must be positive"),
])
def test_bad_arguments_exit_2_with_one_line(models_gpu, argv, message, capsys):
    assert models_gpu.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("models_gpu.py: error: ") and message in err and err.count("\n") == 1


def test_no_gpu_is_a_usage_error(models_gpu, tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    out = tmp_path / "models.json"
    assert models_gpu.main(["--json", str(out)]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err and not out.exists()


def test_a_run_with_a_fake_timer_writes_the_json_after_every_case(models_gpu, tmp_path):
    """A stand-in model per (arch, resolution), built once each and run through forward(); the timer reports
    fixed latencies, fails one case, and reads the JSON file mid-run to see it rewritten after each case."""
    out = tmp_path / "models.json"
    args = models_gpu.parse_args(["--resolutions", "224", "--batches", "1", "--impls", "sdpa_math", "edgeattn",
                                  "--json", str(out)])
    latencies = {("global", "sdpa_math"): 10.0, ("elfatt", "sdpa_math"): 5.0, ("elfatt", "edgeattn"): None}
    seen = []

    class Timer(object):
        def __init__(self):
            self.case = None

        def __call__(self, fn):
            on_disk = json.loads(out.read_text()) if out.exists() else None
            seen.append(None if on_disk is None else (on_disk["complete"], len(on_disk["results"])))
            logits = fn()  # the forward pass runs (a stand-in model on the CPU)
            assert logits.shape == (1, 1000)
            ms = latencies[self.case]
            if ms is None:
                raise RuntimeError("planted kernel failure\nsecond line")
            return ms, "fake"

    timer = Timer()

    built = []

    def build(arch, resolution):
        built.append((arch, resolution))
        model = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(3, 1000))
        images = torch.randn(1, 3, resolution, resolution)
        return model, lambda batch: images[:batch]

    original_measure = models_gpu.measure

    def measure(torch_module, case, model, images, time_fn, ops_context):
        timer.case = (case["model"], case["impl"])
        return original_measure(torch_module, case, model, images, time_fn, ops_context)

    models_gpu.measure = measure
    try:
        results = models_gpu.run_and_write(args, torch, timer, build, {"name": "fake"})
    finally:
        models_gpu.measure = original_measure
    assert seen == [None, (False, 1), (False, 2)]
    assert built == [("cswin_t24181_global", 224), ("cswin_t24181_elfatt", 224)]  # once per model and resolution
    report = json.loads(out.read_text())
    assert report["schema"] == "edgeattn.models_gpu/1" and report["complete"] and report["results"] == results
    by_case = {(r["model"], r["impl"]): r for r in results}
    assert by_case[("global", "sdpa_math")]["img_per_s"] == pytest.approx(1 / 10e-3)
    assert by_case[("elfatt", "sdpa_math")]["img_per_s"] == pytest.approx(1 / 5e-3)
    assert by_case[("elfatt", "sdpa_math")]["speedup_vs_global_sdpa_math"] == pytest.approx(2.0)
    assert by_case[("elfatt", "sdpa_math")]["paper_img_per_s"] == 2603
    failed = by_case[("elfatt", "edgeattn")]
    assert failed["latency_ms"] is None and failed["error"] == "RuntimeError: planted kernel failure"
    assert report["paper"]["img_per_s"]["global"]["sdpa_flash"] == 2210


def test_without_json_the_report_goes_to_stdout_once_at_the_end(models_gpu, capsys):
    """No --json: nothing on stdout while cases remain (the file-less run cannot be rewritten), then the complete
    report as one JSON document."""
    args = models_gpu.parse_args(["--models", "global", "--impls", "sdpa_math", "--resolutions", "224", "256",
                                  "--batches", "1"])
    printed = []

    def timer(fn):
        fn()
        printed.append(capsys.readouterr().out)
        return 10.0, "fake"

    def build(arch, resolution):
        model = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(3, 1000))
        return model, lambda batch: torch.randn(batch, 3, resolution, resolution)

    results = models_gpu.run_and_write(args, torch, timer, build, {"name": "fake"})
    assert printed == ["", ""] and len(results) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["complete"] and report["results"] == results
