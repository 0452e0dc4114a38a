"""The numpy rasteriser, bitmap font, PNG encoder and chart ticks."""
import struct
import zlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeattn.report import font
from edgeattn.report.chart import LineChart, nice_ticks, tick_label
from edgeattn.report.raster import Canvas, encode_png, parse_color

RED = (255, 0, 0)


def _decode_png(data):
    """Independent minimal decoder for the subset encode_png writes (RGB8, filter 0): chunk walk + inflate."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, idat, header = 8, b"", None
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        body = data[offset + 8:offset + 8 + length]
        assert struct.unpack(">I", data[offset + 8 + length:offset + 12 + length])[0] == zlib.crc32(kind + body)
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        offset += 12 + length
    width, height, depth, color_type = header[:4]
    assert (depth, color_type) == (8, 2)
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, 1 + 3 * width)
    assert (raw[:, 0] == 0).all()
    return raw[:, 1:].reshape(height, width, 3)


def test_png_round_trip():
    rng = np.random.RandomState(0)
    pixels = rng.randint(0, 256, size=(17, 23, 3)).astype(np.uint8)
    assert (_decode_png(encode_png(pixels)) == pixels).all()


def test_lines_cover_their_pixels():
    canvas = Canvas(20, 10)
    canvas.line(2, 3, 15, 3, RED)
    red = (canvas.pixels == parse_color(RED)).all(axis=2)
    assert red[3, 2:16].all() and red.sum() == 14
    canvas = Canvas(20, 20)
    canvas.line(0, 0, 19, 19, RED, width=3)
    red = (canvas.pixels == parse_color(RED)).all(axis=2)
    assert all(red[i, i] for i in range(20)) and red[0, 19] == False  # noqa: E712
    canvas = Canvas(30, 5)
    canvas.line(0, 2, 29, 2, RED, dash=(4, 4))
    red = (canvas.pixels == parse_color(RED)).all(axis=2)
    assert red[2, 0:4].all() and not red[2, 5:7].any()


def test_clipping_never_raises():
    canvas = Canvas(10, 10)
    canvas.line(-50, -50, 60, 60, RED, width=4)
    canvas.marker(-3, 12, "circle", RED, size=9)
    canvas.text(8, 8, "clipped text", RED, scale=3)
    canvas.fill_rect(-5, -5, 3, 3, RED)
    assert canvas.pixels.shape == (10, 10, 3)


def test_markers_are_centred_and_distinct():
    masks = {}
    for shape in ("circle", "square", "triangle", "diamond", "cross"):
        canvas = Canvas(21, 21)
        canvas.marker(10, 10, shape, RED, size=11)
        red = (canvas.pixels == parse_color(RED)).all(axis=2)
        assert red[10, 10] or shape == "triangle" and red[11, 10]
        ys, xs = np.nonzero(red)
        assert abs(xs.mean() - 10) <= 1
        masks[shape] = red.tobytes()
    assert len(set(masks.values())) == 5


def test_text_uses_the_font_glyphs():
    canvas = Canvas(40, 14)
    canvas.text(1, 2, "E1", RED)
    red = (canvas.pixels == parse_color(RED)).all(axis=2)
    height = font.GLYPH_HEIGHT
    assert (red[2:2 + height, 1:6] == font.glyph("E")).all()
    assert (red[2:2 + height, 7:12] == font.glyph("1")).all()
    big = font.text_mask("Ag", scale=2)
    assert big.shape == (2 * height, 22) and font.text_size("Ag", 2) == (22, 2 * height)
    # descenders use the row below the others
    assert font.glyph("g")[-1].any() and not font.glyph("a")[-1].any()
    rotated = Canvas(20, 30)
    rotated.text(10, 15, "W", RED, rotate=True, anchor="center", valign="middle")
    assert (rotated.pixels == parse_color(RED)).all(axis=2).any()


def test_every_printable_ascii_glyph_exists():
    for code in range(32, 127):
        assert chr(code) in font.GLYPHS
        assert font.GLYPHS[chr(code)].shape == (font.GLYPH_HEIGHT, font.GLYPH_WIDTH)
    assert font.glyph("é").sum() > 0  # unknown characters show a box instead of vanishing


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 1e6, allow_nan=False), st.floats(1e-3, 1e6, allow_nan=False))
def test_nice_ticks_cover_the_range(low, span):
    high = low + span
    ticks, step = nice_ticks(low, high)
    assert ticks[0] <= low + 1e-9 * max(1, abs(low)) and ticks[-1] >= high - 1e-9 * max(1, abs(high))
    mantissa = step / 10 ** np.floor(np.log10(step))
    assert any(abs(mantissa - m) < 1e-6 for m in (1, 2, 2.5, 5, 10))
    assert 2 <= len(ticks) <= 12
    assert tick_label(2.5, 2.5) == "2.5" and tick_label(50.0, 50.0) == "50" and tick_label(0.25, 0.25) == "0.25"


def test_chart_draws_each_series_in_its_colour():
    chart = LineChart("t", ["a", "b", "c"], "y", [("one", [1, 2, 3]), ("two", [3, None, 1])])
    pixels = _decode_png(chart.to_png())
    for colour in ("#1f77b4", "#d62728"):
        assert (pixels == parse_color(colour)).all(axis=2).sum() > 50
    svg = chart.to_svg()
    # the gap (None) splits series two: markers only where values exist
    assert svg.count("<polyline") == 1 and svg.count("<circle") + svg.count("<rect x=") > 0
