"""The embedded-default main job, end to end and for real: export two models, benchmark on ONNX Runtime CPU,
sweep the host-cpu profile (thread budgets), report. Every step goes through the CLI a user types."""
import csv
import json
import os
import struct

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

MODELS = ("vit_tiny_softmax", "vit_tiny_elfatt")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    import torch
    from click.testing import CliRunner

    from edgeattn import save_checkpoint
    from edgeattn.cli import cli
    from edgeattn.models import create_model
    from random_params import randomise_parameters

    out = tmp_path_factory.mktemp("e2e")
    paths = {}
    for arch in MODELS:
        # a checkpoint whose norm affines and biases are not at their initial constants, so that the export's
        # own parity check can tell a wrong mapping from a right one
        torch.manual_seed(0)
        checkpoint = str(out / "{}.pt".format(arch))
        save_checkpoint(randomise_parameters(create_model(arch), seed=0), checkpoint)
        path = str(out / "{}.onnx".format(arch))
        result = CliRunner().invoke(cli, ["export", checkpoint, "-o", path], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        paths[arch] = path
    return out, paths


def test_exported_files_carry_the_custom_ops(exported, invoke):
    _, paths = exported
    info = json.loads(invoke(["inspect", paths["vit_tiny_elfatt"], "--json"], expect=0).stdout)
    text = json.dumps(info)
    assert "EdgeAttnBlockifyAttention" in text and "EdgeAttnEfficientAttention" in text
    plain = json.loads(invoke(["inspect", paths["vit_tiny_softmax"], "--json"], expect=0).stdout)
    assert "EdgeAttn" not in json.dumps(plain)


def test_bench_records_every_iteration(exported, invoke, tmp_path):
    _, paths = exported
    out = str(tmp_path / "bench.json")
    invoke(["bench", paths["vit_tiny_elfatt"], "--backend", "onnxruntime", "--iterations", "7", "--warmup-s", "0",
            "--threads", "1", "--json", out], expect=0)
    result = json.load(open(out))
    assert result["backend"] == "onnxruntime" and result["iterations"] == 7 and len(result["samples_ms"]) == 7
    assert result["latency_ms"]["min"] == pytest.approx(min(result["samples_ms"]), rel=1e-6)
    assert result["threads"] == 1


def _png_size(path):
    with open(path, "rb") as handle:
        data = handle.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_host_cpu_sweep_then_report(exported, invoke):
    out, paths = exported
    sweep_dir = str(out / "sweep")
    invoke(["sweep", paths["vit_tiny_softmax"], paths["vit_tiny_elfatt"], "--profile", "host-cpu", "--modes", "1,2",
            "--repeats", "2", "--duration-s", "0.3", "--warmup-s", "0.1", "--settle-s", "0", "-o", sweep_dir],
           expect=0)
    with open(os.path.join(sweep_dir, "results.csv")) as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * 2 * 2  # models x thread budgets x repeats
    assert sorted(set(r["threads"] for r in rows)) == ["1", "2"]
    assert all(float(r["throughput_items_per_s"]) > 0 for r in rows)

    result = invoke(["report", sweep_dir, "--baseline", "vit_tiny_softmax"], expect=0)
    # the printed speedup is the ratio of the mean throughputs in each thread budget
    for threads in ("1", "2"):
        def mean_fps(name):
            values = [float(r["throughput_items_per_s"]) for r in rows if r["model"] == name and r["threads"] == threads]
            return sum(values) / len(values)

        expected = mean_fps("vit_tiny_elfatt") / mean_fps("vit_tiny_softmax")
        assert "{:.2f}x".format(expected) in result.stdout
    for name in ("throughput_energy_fp32", "speedup_vs_mode_fp32"):
        width, height = _png_size(os.path.join(sweep_dir, "plots", name + ".png"))
        assert width > 100 and height > 100
