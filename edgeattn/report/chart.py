"""Line charts over categorical x (power modes), drawn to PNG (via :mod:`.raster`) or SVG from one layout.

A chart is a title, x labels (the modes in order), a y label and series ``(name, [value or None per mode])``;
an optional horizontal reference line (speedup 1.0). Missing values break the line. Both back-ends receive the
same drawing calls, so the PNG and the SVG of a chart show the same thing.
"""
import math

from . import font
from .raster import Canvas, encode_png

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
           "#bcbd22"]
MARKERS = ["circle", "square", "triangle", "diamond", "cross"]
GRID = "#d9d9d9"
AXIS = "#333333"


def nice_ticks(vmin, vmax, target=5):
    """Round tick values covering [vmin, vmax] with steps 1, 2, 2.5 or 5 x 10^k."""
    if not (vmax > vmin):
        vmax = vmin + 1.0
    raw = (vmax - vmin) / float(target)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = magnitude * 10
    for multiple in (1, 2, 2.5, 5, 10):
        if raw <= multiple * magnitude * (1 + 1e-9):
            step = multiple * magnitude
            break
    start = math.floor(vmin / step + 1e-9) * step
    end = math.ceil(vmax / step - 1e-9) * step
    count = int(round((end - start) / step))
    return [start + i * step for i in range(count + 1)], step


def tick_label(value, step):
    """Tick text with as many decimals as the step needs (2.5 -> one, 0.25 -> two, 50 -> none)."""
    decimals = 0
    while decimals < 6 and abs(step * 10 ** decimals - round(step * 10 ** decimals)) > 1e-6:
        decimals += 1
    return "{:.{}f}".format(value, decimals)


class SvgRenderer(object):
    def __init__(self, width, height, background="#ffffff"):
        self.width, self.height = width, height
        self.parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}">'
                      .format(w=width, h=height),
                      '<rect width="{}" height="{}" fill="{}"/>'.format(width, height, background)]

    def line(self, x0, y0, x1, y1, color, width=1, dash=None):
        extra = ' stroke-dasharray="{},{}"'.format(*dash) if dash else ""
        self.parts.append('<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" stroke-width="{}"{}/>'
                          .format(x0, y0, x1, y1, color, width, extra))

    def polyline(self, points, color, width=1):
        coords = " ".join("{:.1f},{:.1f}".format(x, y) for x, y in points)
        self.parts.append('<polyline points="{}" fill="none" stroke="{}" stroke-width="{}"/>'.format(
            coords, color, width))

    def rect(self, x0, y0, x1, y1, color, width=1):
        self.parts.append('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="none" stroke="{}" '
                          'stroke-width="{}"/>'.format(min(x0, x1), min(y0, y1), abs(x1 - x0), abs(y1 - y0),
                                                       color, width))

    def fill_rect(self, x0, y0, x1, y1, color):
        self.parts.append('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"/>'.format(
            min(x0, x1), min(y0, y1), abs(x1 - x0), abs(y1 - y0), color))

    def marker(self, x, y, shape, color, size=7):
        r = size / 2.0
        if shape == "square":
            self.parts.append('<rect x="{:.1f}" y="{:.1f}" width="{}" height="{}" fill="{}"/>'.format(
                x - r, y - r, size, size, color))
        elif shape in ("triangle", "diamond", "cross"):
            if shape == "triangle":
                pts = [(x, y - r), (x + r, y + r), (x - r, y + r)]
            elif shape == "diamond":
                pts = [(x, y - r * 1.2), (x + r * 1.2, y), (x, y + r * 1.2), (x - r * 1.2, y)]
            else:
                self.line(x - r, y - r, x + r, y + r, color, 2)
                self.line(x - r, y + r, x + r, y - r, color, 2)
                return
            self.parts.append('<polygon points="{}" fill="{}"/>'.format(
                " ".join("{:.1f},{:.1f}".format(px, py) for px, py in pts), color))
        else:
            self.parts.append('<circle cx="{:.1f}" cy="{:.1f}" r="{:.1f}" fill="{}"/>'.format(x, y, r, color))

    def text(self, x, y, text, color="#000000", scale=1, anchor="left", valign="top", rotate=False):
        size = font.GLYPH_HEIGHT * scale * 1.2
        svg_anchor = {"left": "start", "center": "middle", "right": "end"}[anchor]
        baseline = {"top": "hanging", "middle": "middle", "bottom": "auto"}[valign]
        transform = ' transform="rotate(-90 {:.1f} {:.1f})"'.format(x, y) if rotate else ""
        escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        self.parts.append('<text x="{:.1f}" y="{:.1f}" font-family="monospace" font-size="{:.1f}" fill="{}" '
                          'text-anchor="{}" dominant-baseline="{}"{}>{}</text>'.format(
                              x, y, size, color, svg_anchor, baseline, transform, escaped))

    def render(self):
        return "\n".join(self.parts + ["</svg>"]) + "\n"


class LineChart(object):
    """``series``: list of (name, values) with one value (or None) per x label."""

    def __init__(self, title, x_labels, y_label, series, x_title="power mode", reference=None, width=960,
                 height=560):
        self.title = title
        self.x_labels = list(x_labels)
        self.y_label = y_label
        self.series = [(name, list(values)) for name, values in series]
        self.x_title = x_title
        self.reference = reference
        self.width, self.height = width, height

    def _layout(self):
        legend_names = [name[:22] for name, _ in self.series]
        # legend: 20 px gap, a 30 px line sample, 10 px, the name, 10 px margin
        legend_width = 70 + max([font.text_size(n, 2)[0] for n in legend_names] + [60])
        left, right = 100, self.width - legend_width
        top, bottom = 60, self.height - 80
        return left, right, top, bottom, legend_names

    def draw(self, renderer):
        left, right, top, bottom, legend_names = self._layout()
        values = [v for _, vs in self.series for v in vs if v is not None]
        if self.reference is not None:
            values.append(self.reference)
        vmax = max(values) if values else 1.0
        ticks, step = nice_ticks(0.0, vmax * 1.05 if vmax > 0 else 1.0)
        y_top = ticks[-1] if ticks[-1] > 0 else 1.0

        def y_of(value):
            return bottom - (value / y_top) * (bottom - top)

        count = max(len(self.x_labels), 1)
        spacing = (right - left) / float(count)

        def x_of(index):
            return left + spacing * (index + 0.5)

        renderer.text(self.width / 2.0, 18, self.title, AXIS, scale=2, anchor="center")
        for value in ticks:
            y = y_of(value)
            renderer.line(left, y, right, y, GRID, 1, dash=(4, 3) if value else None)
            renderer.text(left - 8, y, tick_label(value, step), AXIS, scale=2, anchor="right", valign="middle")
        if self.reference is not None:
            renderer.line(left, y_of(self.reference), right, y_of(self.reference), "#888888", 2, dash=(8, 4))
        renderer.line(left, top, left, bottom, AXIS, 2)
        renderer.line(left, bottom, right, bottom, AXIS, 2)
        label_scale = 2 if all(font.text_size(lbl, 2)[0] <= spacing - 6 for lbl in self.x_labels) else 1
        for index, label in enumerate(self.x_labels):
            x = x_of(index)
            renderer.line(x, bottom, x, bottom + 6, AXIS, 2)
            renderer.text(x, bottom + 12, label, AXIS, scale=label_scale, anchor="center")
        renderer.text(left + (right - left) / 2.0, self.height - 28, self.x_title, AXIS, scale=2, anchor="center")
        renderer.text(22, top + (bottom - top) / 2.0, self.y_label, AXIS, scale=2, anchor="center",
                      valign="middle", rotate=True)
        for number, (name, series_values) in enumerate(self.series):
            color = PALETTE[number % len(PALETTE)]
            shape = MARKERS[number % len(MARKERS)]
            run = []
            for index, value in enumerate(series_values):
                if value is None:
                    if len(run) > 1:
                        renderer.polyline(run, color, 3)
                    run = []
                    continue
                run.append((x_of(index), y_of(value)))
            if len(run) > 1:
                renderer.polyline(run, color, 3)
            for index, value in enumerate(series_values):
                if value is not None:
                    renderer.marker(x_of(index), y_of(value), shape, color, 11)
        legend_left = right + 20
        legend_top = top
        for number, name in enumerate(legend_names):
            color = PALETTE[number % len(PALETTE)]
            y = legend_top + 12 + number * 26
            renderer.line(legend_left, y, legend_left + 30, y, color, 3)
            renderer.marker(legend_left + 15, y, MARKERS[number % len(MARKERS)], color, 11)
            renderer.text(legend_left + 40, y, name, AXIS, scale=2, valign="middle")

    def to_png(self):
        canvas = Canvas(self.width, self.height)
        self.draw(canvas)
        return encode_png(canvas.pixels)

    def to_svg(self):
        svg = SvgRenderer(self.width, self.height)
        self.draw(svg)
        return svg.render()
