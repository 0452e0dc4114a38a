"""plugin_selection.choose / search on hand-computed timings (no build, no trtexec).

The rules (module docstring of edgeattn.engine.plugin_selection): candidates within TIE_TOLERANCE = 1 % *of the
fastest* count as equally fast and the one with fewer plugins wins; beyond two families a family keeps its plugin in
the combined candidate only when dropping it from "all plugins" made the engine slower.
"""
import pytest

from edgeattn.engine import plugin_selection


def _timed(plugin_ops, families, ms):
    candidate = plugin_selection.Candidate(plugin_ops, families)
    candidate.bench = {"gpu_compute_ms": {"p50": ms}, "latency_ms": {"p50": ms + 0.1}}
    return candidate


@pytest.mark.parametrize("plain_ms, winner", [
    (50.4, frozenset()),          # 0.8 % slower than the plugin engine: a tie, the plain graph ships
    (50.6, frozenset(["LITE"])),  # 1.2 % slower: the plugin is measurably faster and ships
])
def test_the_tie_window_is_relative_to_the_fastest(plain_ms, winner):
    candidates = [_timed(["LITE"], ["LITE"], 50.0), _timed([], ["LITE"], plain_ms)]
    chosen = plugin_selection.choose(candidates)
    assert chosen.plugin_ops == winner
    assert [c.status for c in candidates].count("selected") == 1


def test_a_family_whose_plugin_changes_nothing_drops_it_in_the_combined_candidate():
    families = ["A", "B", "C"]
    plugin_ms = {"A": 1.0, "B": 0.5, "C": 3.0}
    standard_ms = {"A": 1.0, "B": 2.0, "C": 1.0}  # A: equally fast either way; B: plugin faster; C: plugin slower

    def evaluate(candidate):
        ms = 1.0 + sum(plugin_ms[f] if f in candidate.plugin_ops else standard_ms[f] for f in families)
        candidate.bench = {"gpu_compute_ms": {"p50": ms}, "latency_ms": {"p50": ms}}

    tried = [c.plugin_ops for c in plugin_selection.search(families, evaluate)]
    # all-on 5.5 ms; without A 5.5 (not slower: A drops), without B 7.0 (slower: B keeps), without C 3.5 (C drops)
    assert tried == [frozenset("ABC"), frozenset(), frozenset("BC"), frozenset("AC"), frozenset("AB"),
                     frozenset("B")]
