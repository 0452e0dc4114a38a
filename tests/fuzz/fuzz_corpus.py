"""The real inputs the fuzzers start from: verbatim captures (tests/fixtures), the shipped profiles, and files the
fake tools and edgeattn itself write (trtexec logs and --exportTimes exports of every TensorRT version the fake
replays, an engine manifest, a sweep's results.json and resume file, an ONNX model, checkpoints).

``build(directory)`` writes what must be generated into ``directory`` once and returns a :class:`Corpus`; the fake
trtexec runs of all versions go in parallel (one short subprocess each).
"""
import glob
import json
import os
import subprocess
import sys

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(TESTS)
FIXTURES = os.path.join(TESTS, "fixtures")
sys.path.insert(0, os.path.join(TESTS, "bench"))

#: the TensorRT versions whose console log and export layout the fake trtexec replays
TRT_VERSIONS = ("8.0.3", "8.2.1", "8.4.1", "8.5.2", "8.6.2", "10.3.0", "10.16.2", "11.1.0")


def fixture_text(path):
    """A capture without its ``#@`` citation header."""
    with open(path, "r", encoding="utf-8") as handle:
        return "".join(line for line in handle if not line.startswith("#@"))


def _texts(pattern):
    return [fixture_text(p) for p in sorted(glob.glob(os.path.join(FIXTURES, pattern)))]


class Corpus(object):
    def __init__(self, directory):
        self.directory = directory
        self.tegrastats_logs = _texts("jetson/tegrastats/*.log")
        self.tegrastats_lines = [line for text in self.tegrastats_logs for line in text.splitlines() if line.strip()]
        self.nvpmodel_queries = _texts("jetson/nvpmodel/query_*.txt") + _texts("jetson/nvpmodel/error_*.txt")
        self.nvpmodel_switches = _texts("jetson/nvpmodel/switch_*.txt") + _texts("jetson/nvpmodel/error_*.txt")
        self.nvpmodel_confs = _texts("jetson/confs/*.conf") + _texts("jetson/nvpmodel/conf_*")
        self.nvpmodel_verbose = _texts("jetson/nvpmodel/parse_verbose_*.txt")
        self.clocks = _texts("jetson/clocks/*.txt")
        self.ina3221_listings = _texts("jetson/ina3221/*.txt")
        self.trtexec_logs = _texts("trtexec/*.txt")
        self.trtexec_times = _texts("trtexec/times_*.txt")
        self.trtexec_profiles = _texts("trtexec/profile_*.txt") + _texts("trtexec/profile_*.json")
        self.trtexec_layer_infos = _texts("trtexec/layers_*.json")
        self.profiles = {os.path.basename(p): fixture_text(p)
                         for p in sorted(glob.glob(os.path.join(REPO, "profiles", "*.yaml")))
                         if not p.endswith("schema.yaml")}
        self.files = {}  # kind -> [paths of real files of that kind]

    def add(self, kind, path):
        self.files.setdefault(kind, []).append(path)


def _onnx_model(directory):
    from bench_helpers import matmul_model

    path = os.path.join(directory, "model.onnx")
    with open(path, "wb") as handle:
        handle.write(matmul_model(features=8))
    return path


def _trtexec_runs(corpus, onnx_path):
    """Console log and --exportTimes of every version: one short fake trtexec run each, all at once."""
    from bench_helpers import install_trtexec

    runs = []
    for version in TRT_VERSIONS:
        trtexec = install_trtexec(os.path.join(corpus.directory, "trt"), version)
        times = os.path.join(corpus.directory, "times_{}.json".format(version))
        args = [trtexec, "--onnx={}".format(onnx_path), "--exportTimes={}".format(times), "--warmUp=2",
                "--duration=0", "--iterations=6"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_TRTEXEC")}
        runs.append((version, times, subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                      stderr=subprocess.STDOUT, env=env, universal_newlines=True)))
    trtexec_10 = None
    for version, times, process in runs:
        log, _ = process.communicate(timeout=300)
        corpus.trtexec_logs.append(log)
        if os.path.exists(times):
            with open(times) as handle:
                corpus.trtexec_times.append(handle.read())
            corpus.add("trtexec-times", times)
        if version == "10.3.0":
            trtexec_10 = os.path.join(corpus.directory, "trt", "TensorRT-10.3.0", "bin", "trtexec")
    return trtexec_10


def _manifest(corpus, onnx_path, trtexec):
    """A manifest as `edgeattn build` writes it (fake trtexec 10.3 builds the engine)."""
    from edgeattn.engine.build import build_engine

    engine = os.path.join(corpus.directory, "model.engine")
    build_engine(onnx_path, engine, backend="trtexec", trtexec=trtexec, plugin_mode="off")
    corpus.add("manifest", engine + ".json")
    corpus.engine_path = engine


def _sweep(corpus):
    """A finished host-cpu sweep (stub benchmark): its results.json, row journal and resume file."""
    sys.path.insert(0, os.path.join(TESTS, "sweep"))
    import stubbench
    from edgeattn.sweep import run_sweep

    model = os.path.join(corpus.directory, "m1.onnx")
    with open(model, "wb") as handle:
        handle.write(b"placeholder: the stub benchmark does not read it")
    out = os.path.join(corpus.directory, "sweep")
    run_sweep([model], profile="host-cpu", modes=[1, 2], repeats=2, duration_s=0.01, warmup_s=0, out_dir=out,
              bench=stubbench.make_bench(sleep_s=0), echo=lambda line: None)
    corpus.add("sweep-results", os.path.join(out, "results.json"))
    corpus.add("sweep-state", os.path.join(out, "sweep-state.json"))
    corpus.add("sweep-rows", os.path.join(out, "rows.jsonl"))


def _checkpoints(corpus):
    """A torch.save zip, a safetensors file and a legacy (non-zip) torch.save file of a small state dict; only the
    stdlib zip when torch is not installed."""
    try:
        import torch
    except ImportError:
        import pickle
        import zipfile

        path = os.path.join(corpus.directory, "state.pt")
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("state/data.pkl", pickle.dumps({"w": [1.0, 2.0]}, protocol=2))
        corpus.add("checkpoint", path)
        return
    state = {"weight": torch.arange(12, dtype=torch.float32).reshape(3, 4), "bias": torch.zeros(3)}
    path = os.path.join(corpus.directory, "state.pt")
    torch.save({"state_dict": state, "arch": "vit_tiny_softmax"}, path)
    corpus.add("checkpoint", path)
    legacy = os.path.join(corpus.directory, "legacy.pt")
    torch.save(state, legacy, _use_new_zipfile_serialization=False)
    corpus.add("checkpoint", legacy)
    try:
        from safetensors.torch import save_file
    except ImportError:
        return
    tensors = os.path.join(corpus.directory, "state.safetensors")
    save_file(state, tensors, metadata={"arch": "vit_tiny_softmax"})
    corpus.add("checkpoint", tensors)


def build(directory):
    os.makedirs(directory, exist_ok=True)
    corpus = Corpus(directory)
    for kind, pattern in (("tegrastats-log", "jetson/tegrastats/*.log"), ("trtexec-log", "trtexec/*.txt")):
        for path in sorted(glob.glob(os.path.join(FIXTURES, pattern))):
            corpus.add(kind, path)
    for path in sorted(glob.glob(os.path.join(REPO, "profiles", "*.yaml"))):
        if not path.endswith("schema.yaml"):
            corpus.add("profile", path)
    onnx_path = _onnx_model(directory)
    corpus.add("onnx", onnx_path)
    trtexec = _trtexec_runs(corpus, onnx_path)
    _manifest(corpus, onnx_path, trtexec)
    _sweep(corpus)
    _checkpoints(corpus)
    with open(corpus.files["manifest"][0]) as handle:
        corpus.manifest = json.load(handle)
    with open(corpus.files["sweep-results"][0]) as handle:
        corpus.results = json.load(handle)
    with open(corpus.files["sweep-state"][0]) as handle:
        corpus.state = json.load(handle)
    return corpus
