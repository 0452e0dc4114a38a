"""A small numpy rasteriser and PNG encoder for report plots (matplotlib is not available on the board).

:class:`Canvas` holds an RGB uint8 image and draws anti-alias-free lines of any width, markers (circle, square,
triangle, diamond, cross), rectangles and text in the built-in 5x7 font (scaled, optionally rotated 90 degrees).
:func:`encode_png` writes a truecolour PNG (IHDR, one zlib IDAT, IEND; every chunk with its CRC-32).
"""
import struct
import zlib

import numpy as np

from . import font

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def parse_color(color):
    """"#rrggbb" or an (r, g, b) tuple -> numpy uint8 array."""
    if isinstance(color, str):
        text = color.lstrip("#")
        return np.array([int(text[i:i + 2], 16) for i in (0, 2, 4)], dtype=np.uint8)
    return np.array(color, dtype=np.uint8)


class Canvas(object):
    def __init__(self, width, height, background="#ffffff"):
        self.width = int(width)
        self.height = int(height)
        self.pixels = np.empty((self.height, self.width, 3), dtype=np.uint8)
        self.pixels[:, :] = parse_color(background)

    # -- primitives ----------------------------------------------------------------------------------------------
    def _paint(self, mask, left, top, color):
        """Paint the True pixels of ``mask`` with its top-left corner at (left, top), clipped to the canvas."""
        h, w = mask.shape
        x0, y0 = max(0, left), max(0, top)
        x1, y1 = min(self.width, left + w), min(self.height, top + h)
        if x0 >= x1 or y0 >= y1:
            return
        sub = mask[y0 - top:y1 - top, x0 - left:x1 - left]
        region = self.pixels[y0:y1, x0:x1]
        region[sub] = parse_color(color)

    def fill_rect(self, x0, y0, x1, y1, color):
        left, right = sorted((int(round(x0)), int(round(x1))))
        top, bottom = sorted((int(round(y0)), int(round(y1))))
        self._paint(np.ones((bottom - top + 1, right - left + 1), dtype=bool), left, top, color)

    def rect(self, x0, y0, x1, y1, color, width=1):
        self.line(x0, y0, x1, y0, color, width)
        self.line(x1, y0, x1, y1, color, width)
        self.line(x1, y1, x0, y1, color, width)
        self.line(x0, y1, x0, y0, color, width)

    def line(self, x0, y0, x1, y1, color, width=1, dash=None):
        """A straight line ``width`` pixels thick; ``dash`` = (on, off) lengths in pixels for a dashed line."""
        length = float(np.hypot(x1 - x0, y1 - y0))
        steps = max(int(np.ceil(length * 2)), 1)
        t = np.linspace(0.0, 1.0, steps + 1)
        if dash:
            on, off = dash
            keep = (t * length) % (on + off) < on
            t = t[keep]
        xs = np.rint(x0 + (x1 - x0) * t).astype(int)
        ys = np.rint(y0 + (y1 - y0) * t).astype(int)
        half = (int(width) - 1) // 2
        extra = (int(width) - 1) - half
        for dx in range(-half, extra + 1):
            for dy in range(-half, extra + 1):
                px, py = xs + dx, ys + dy
                inside = (px >= 0) & (px < self.width) & (py >= 0) & (py < self.height)
                self.pixels[py[inside], px[inside]] = parse_color(color)

    def polyline(self, points, color, width=1):
        for (xa, ya), (xb, yb) in zip(points, points[1:]):
            self.line(xa, ya, xb, yb, color, width)

    def marker(self, x, y, shape, color, size=7):
        """A filled marker centred on (x, y): circle, square, triangle, diamond or cross."""
        r = size / 2.0
        n = int(size) + 2
        grid = np.arange(n) - (n - 1) / 2.0
        gx, gy = np.meshgrid(grid, grid)
        if shape == "square":
            mask = (np.abs(gx) <= r) & (np.abs(gy) <= r)
        elif shape == "diamond":
            mask = np.abs(gx) + np.abs(gy) <= r * 1.2
        elif shape == "triangle":
            mask = (gy <= r) & (gy >= -r) & (np.abs(gx) <= (gy + r) / 2.0 + 0.5)
        elif shape == "cross":
            mask = ((np.abs(gx - gy) <= 1.0) | (np.abs(gx + gy) <= 1.0)) & (np.abs(gx) <= r) & (np.abs(gy) <= r)
        else:
            mask = gx * gx + gy * gy <= r * r
        self._paint(mask, int(round(x - (n - 1) / 2.0)), int(round(y - (n - 1) / 2.0)), color)

    def text(self, x, y, text, color="#000000", scale=1, anchor="left", valign="top", rotate=False):
        """Draw ``text``; (x, y) is the anchor point (left/center/right, top/middle/bottom); ``rotate`` turns it
        90 degrees counter-clockwise (for a y-axis label)."""
        mask = font.text_mask(text, scale)
        if rotate:
            mask = np.rot90(mask)
        h, w = mask.shape
        left = {"left": x, "center": x - w / 2.0, "right": x - w}[anchor]
        top = {"top": y, "middle": y - h / 2.0, "bottom": y - h}[valign]
        self._paint(mask, int(round(left)), int(round(top)), color)


def _chunk(kind, data):
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def encode_png(pixels, compression=9):
    """PNG bytes for an (height, width, 3) uint8 RGB array (filter type 0 on every row)."""
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    if pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ValueError("expected an (height, width, 3) RGB array, got shape {}".format(pixels.shape))
    height, width = pixels.shape[:2]
    rows = np.concatenate([np.zeros((height, 1), dtype=np.uint8), pixels.reshape(height, width * 3)], axis=1)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (PNG_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(rows.tobytes(), compression))
            + _chunk(b"IEND", b""))
