"""``edgeattn build --plugins on|off|auto``: which custom ops of a model an engine runs as plugins.

TensorRT compiles the standard-op decomposition of an attention core (the model-local function the exporter
stores beside each custom op, or ``edgeattn export --no-plugins``) into its own fused kernels, on tensor cores in
FP16 and TF32. A plugin is only worth shipping where it beats that, and nobody can know without timing both on
the device. So:

* ``on`` runs every custom op as a plugin (the plugin library is required): the behaviour before this option;
* ``off`` runs none: each custom op is replaced by its decomposition, and no plugin library is needed or loaded;
* ``auto`` builds candidates with and without each custom-op *family* (op type), times each one with
  ``edgeattn bench``'s harness, and keeps the fastest; the manifest records every candidate and why it won or lost.

The decomposition of an op (its model-local function, inlined and folded) is
:mod:`edgeattn.engine.decomposition`'s job.

Search (``auto``): with the families F of the model, the candidates are all plugins, no plugins, and all plugins
but one family, for each family; for |F| <= 2 (every registered model: ELFATT has two families, the others one)
that is every subset, i.e. 2 builds for one family and 4 for two. Beyond two families it adds one more candidate,
the combination of the per-family verdicts (a family keeps its plugin when dropping it from "all plugins" made
the engine slower), so the cost is |F| + 3 builds and timings instead of 2^|F|. Each candidate is built in a
temporary directory beside the engine and timed for the same warm-up and duration; a candidate that fails to
build or run (no plugin library, a missing creator, a TensorRT error) is recorded with its error and the search
goes on; only when every candidate fails does the build fail. The metric is the median GPU compute time per
iteration (trtexec's and the TensorRT backend's device-side time; the median end-to-end latency when a backend
has none). Candidates within :data:`TIE_TOLERANCE` of the fastest count as equally fast, and of those the one
with the fewest plugins wins: a plugin that is not measurably faster is not worth a library to deploy.
"""
from ..errors import EdgeAttnError

MODES = ("on", "off", "auto")
#: candidates within this fraction of the fastest median are "equally fast"; the one with fewer plugins wins
TIE_TOLERANCE = 0.01
STRATEGY = ("all plugins, no plugins, and all plugins but one family for each family (every subset for up to two "
            "families); with more families also the combination of the per-family verdicts")


# --------------------------------------------------------------------------------------------------------------
# modes
# --------------------------------------------------------------------------------------------------------------
def op_families(custom_ops):
    """The custom op types of a model (``custom_ops`` records of :func:`edgeattn.onnx_graph.custom_ops`), sorted."""
    return sorted({op["op_type"] for op in custom_ops})


def candidate_name(plugin_ops):
    return "plugins: {}".format(", ".join(sorted(plugin_ops)) or "none")


# --------------------------------------------------------------------------------------------------------------
# the search
# --------------------------------------------------------------------------------------------------------------
class Candidate(object):
    """One engine of the search: the ops it runs as plugins, and what building and timing it gave."""

    def __init__(self, plugin_ops, families):
        self.plugin_ops = frozenset(plugin_ops)
        self.standard_ops = frozenset(families) - self.plugin_ops
        self.name = candidate_name(self.plugin_ops)
        self.manifest = None
        self.engine_file = None
        self.bench = None
        self.error = None
        self.status = None
        self.reason = None

    @property
    def ok(self):
        return self.error is None and self.bench is not None

    def metric(self, key):
        block, stat = key.split(".")
        return (self.bench.get(block) or {}).get(stat)

    def record(self):
        bench = self.bench or {}
        manifest = self.manifest or {}
        return {
            "name": self.name,
            "plugin_ops": sorted(self.plugin_ops),
            "standard_ops": sorted(self.standard_ops),
            "status": self.status,
            "reason": self.reason,
            "error": self.error,
            "build_seconds": manifest.get("build_seconds"),
            "engine_sha256": (manifest.get("engine") or {}).get("sha256"),
            "onnx_variant": (manifest.get("source_onnx") or {}).get("variant"),
            "iterations": bench.get("iterations"),
            "latency_ms": bench.get("latency_ms"),
            "gpu_compute_ms": bench.get("gpu_compute_ms"),
            "throughput_items_per_s": bench.get("throughput_items_per_s"),
        }


def search(families, evaluate):
    """Run the search over ``families``; ``evaluate(candidate)`` builds and times one candidate in place (errors
    recorded on it, never raised). Returns the candidates in the order they were tried."""
    everything = frozenset(families)
    tried = []
    seen = {}

    def run(plugin_ops):
        plugin_ops = frozenset(plugin_ops)
        if plugin_ops in seen:
            return seen[plugin_ops]
        candidate = Candidate(plugin_ops, families)
        seen[plugin_ops] = candidate
        tried.append(candidate)
        evaluate(candidate)
        return candidate

    all_on = run(everything)
    run(frozenset())
    without = {}
    for family in sorted(families):
        without[family] = run(everything - {family})
    if len(families) > 2 and all_on.ok:
        key = metric_key(tried)
        keep = [family for family in families
                if not without[family].ok or without[family].metric(key) > all_on.metric(key)]
        run(keep)
    return tried


def metric_key(candidates):
    """``gpu_compute_ms.p50`` when every successful candidate has device-side times, else ``latency_ms.p50``."""
    ok = [c for c in candidates if c.ok]
    if ok and all(c.bench.get("gpu_compute_ms") for c in ok):
        return "gpu_compute_ms.p50"
    return "latency_ms.p50"


def choose(candidates):
    """The winner among ``candidates``; sets every candidate's status and reason. Raises when all failed."""
    ok = [c for c in candidates if c.ok]
    for candidate in candidates:
        if not candidate.ok:
            candidate.status = "failed"
            candidate.reason = "failed: {}".format(candidate.error)
    if not ok:
        raise EdgeAttnError("every --plugins auto candidate failed: {}".format(
            "; ".join("{} ({})".format(c.name, c.error) for c in candidates)))
    key = metric_key(candidates)
    label = _metric_label(key)
    fastest = min(ok, key=lambda c: c.metric(key))
    best = fastest.metric(key)
    close = [c for c in ok if c.metric(key) <= best * (1.0 + TIE_TOLERANCE)]
    winner = min(close, key=lambda c: (len(c.plugin_ops), c.metric(key)))
    mine = winner.metric(key)
    for candidate in ok:
        value = candidate.metric(key)
        if candidate is winner:
            candidate.status = "selected"
            if candidate is fastest or value == best:
                ties = len(close) - 1
                runner_up = [c.metric(key) for c in ok if c not in close]
                if ties:
                    detail = "; {} other(s) within {:g}% run more ops as plugins".format(ties, TIE_TOLERANCE * 100)
                elif runner_up and value > 0:
                    detail = "; next {:.1f}% slower".format(100.0 * (min(runner_up) / value - 1.0))
                else:
                    detail = ""
                candidate.reason = "fastest: {} {:.4g} ms{}".format(label, value, detail)
            else:
                candidate.reason = ("{} {:.4g} ms, within {:g}% of the fastest ({}, {:.4g} ms) with fewer ops as "
                                    "plugins".format(label, value, TIE_TOLERANCE * 100, fastest.name, best))
        elif candidate in close:
            candidate.status = "rejected"
            candidate.reason = ("{} {:.4g} ms, within {:g}% of the selected candidate but with more ops as plugins"
                                .format(label, value, TIE_TOLERANCE * 100))
        else:
            candidate.status = "rejected"
            candidate.reason = "{} {:.4g} ms, {:.1f}% slower than the selected candidate".format(
                label, value, 100.0 * (value / mine - 1.0) if mine > 0 else float("inf"))
    return winner


def _metric_label(key):
    return {"gpu_compute_ms.p50": "median GPU compute", "latency_ms.p50": "median latency"}[key]


def op_verdicts(families, candidates, winner):
    """Per custom op: how it runs in the selected engine and the best time with and without its plugin."""
    key = metric_key(candidates)
    label = _metric_label(key)
    ok = [c for c in candidates if c.ok]
    verdicts = {}
    for family in sorted(families):
        with_plugin = [c for c in ok if family in c.plugin_ops]
        without = [c for c in ok if family not in c.plugin_ops]
        parts = []
        for text, group in (("with the plugin", with_plugin), ("with standard ops", without)):
            if group:
                best = min(group, key=lambda c: c.metric(key))
                parts.append("{}: best {} {:.4g} ms ({})".format(text, label, best.metric(key), best.name))
            else:
                parts.append("{}: no candidate built and ran".format(text))
        verdicts[family] = {"runs_as": "plugin" if family in winner.plugin_ops else "standard ops",
                            "reason": "; ".join(parts)}
    return verdicts
