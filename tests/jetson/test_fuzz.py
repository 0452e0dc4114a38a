"""Parsers never raise on garbage: random text and mutated real captures (hypothesis)."""
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jetson_support import FIXTURES, capture
from edgeattn.jetson import board, clocks, nvpmodel, power, tegrastats

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _all_capture_lines():
    found = []
    for folder in ("tegrastats", "nvpmodel", "clocks"):
        for name in sorted(os.listdir(os.path.join(FIXTURES, folder))):
            found.extend(line for line in capture(os.path.join(folder, name)).splitlines() if line.strip())
    return found


REAL_LINES = _all_capture_lines()
TOKENS = st.sampled_from(sorted({token for line in REAL_LINES for token in line.split()}))


@st.composite
def mutated_lines(draw):
    tokens = draw(st.sampled_from(REAL_LINES)).split()
    for _ in range(draw(st.integers(0, 4))):
        action = draw(st.sampled_from(["drop", "insert", "cut", "swap"]))
        if action == "drop" and tokens:
            tokens.pop(draw(st.integers(0, len(tokens) - 1)))
        elif action == "insert":
            tokens.insert(draw(st.integers(0, len(tokens))), draw(TOKENS | st.text(max_size=12)))
        elif action == "cut" and tokens:
            index = draw(st.integers(0, len(tokens) - 1))
            tokens[index] = tokens[index][:draw(st.integers(0, len(tokens[index])))]
        elif action == "swap" and len(tokens) > 1:
            i, j = draw(st.integers(0, len(tokens) - 1)), draw(st.integers(0, len(tokens) - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
    return " ".join(tokens)


LINES = st.text(max_size=200) | mutated_lines()


@SETTINGS
@given(LINES)
def test_tegrastats_line_never_raises(line):
    sample = tegrastats.parse_line(line)
    if sample is not None:
        sample.to_dict()
        _ = (sample.gpu_temp_c, sample.hottest_c, sample.time_unix, sample.rails_mw)


@SETTINGS
@given(st.lists(LINES, max_size=8))
def test_text_parsers_never_raise(lines):
    text = "\n".join(lines)
    nvpmodel.parse_query(text).to_dict()
    nvpmodel.parse_conf(text).to_dict()
    nvpmodel.parse_parse_verbose(text).to_dict()
    nvpmodel.parse_switch(text, 0).to_dict()
    clocks.parse_show(text)
    board.parse_nv_tegra_release(text)
    board.parse_compatible(text.replace(" ", "\x00"))
    summary = power.summarise_log_lines(lines)
    assert summary["samples"] + summary["unparsed_lines"] == sum(1 for line in lines if line.strip())
