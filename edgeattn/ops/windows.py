"""Window partition / reverse and softmax attention inside non-overlapping rectangular windows.

The blockify function f of ELFATT (Eq. 8: "separate an m x c2 matrix into b blocks") realised as CSWin's
``img2windows``: a row-major H x W token map is cut into window_h x window_w windows, ordered window-row-major
and row-major inside each window; g = :func:`window_reverse` is its inverse. Square windows give the blockify
head (:mod:`edgeattn.ops.blockify`), H x sw / sw x W stripes give CSWin's cross-shaped branches
(:mod:`edgeattn.ops.cswin`).

Maps that are not a multiple of the window are padded at the bottom/right: "zeros" (padded keys take part) or
"masked" (padded keys excluded). In eager mode the map is processed in bands of whole window rows (cache
locality), and "masked" is computed without any padding: the windows of the last window row/column are simply
smaller (a window whose padded keys are masked out and whose LePE sees zeros
there is exactly attention + zero-padded conv over its real tokens), which saves the padded work, the padding
copies and the mask. While exporting, the same values come from standard Pad / Reshape / Transpose / Slice
nodes with an additive -inf key mask.
"""
import torch
import torch.nn.functional as F

from ._common import exporting, require
from .lepe import lepe
from .softmax import attend

#: how a map that is not a multiple of the window is completed
PAD_MODES = ("zeros", "masked")
#: eager mode processes the map in bands of whole window rows of at least this many tokens. Bands bound the size
#: of the temporaries (cache locality, allocator reuse), but each band costs a few more op launches (and OpenMP
#: fork/joins); measured on 2 cores, one band for maps up to 128 x 128 is fastest, so the default is large.
BAND_TOKENS = 1 << 16


def window_grid(height, width, window_h, window_w):
    """(rows, cols) of windows covering an H x W map, padding at the bottom/right included."""
    require(window_h >= 1 and window_w >= 1, "window size must be >= 1, got {}x{}", window_h, window_w)
    return -(-height // window_h), -(-width // window_w)


def _exact_grid(height, width, window_h, window_w):
    rows, cols = window_grid(height, width, window_h, window_w)
    require(rows * window_h == height and cols * window_w == width,
            "a {}x{} map does not split into {}x{} windows (H and W must be multiples of the window size)",
            height, width, window_h, window_w)
    return rows, cols


def window_partition(x, height, width, window_h, window_w):
    """(B, N=H*W, C) -> (B * nW, window_h * window_w, C), windows in window-row-major order."""
    rows, cols = _exact_grid(height, width, window_h, window_w)
    b, _, c = x.shape
    x = x.reshape(b, rows, window_h, cols, window_w, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(b * rows * cols, window_h * window_w, c)


def window_reverse(windows, height, width, window_h, window_w):
    """Inverse of :func:`window_partition`: (B * nW, window_h * window_w, C) -> (B, H*W, C)."""
    rows, cols = _exact_grid(height, width, window_h, window_w)
    c = windows.shape[-1]
    x = windows.reshape(-1, rows, cols, window_h, window_w, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, height * width, c)


def _image_to_windows(image, window_h, window_w, num_heads):
    """(B, h_img, w_img, C) image (any strides) -> (B * nW, heads, window_h * window_w, d), one copy."""
    b, height, width, c = image.shape
    rows, cols = height // window_h, width // window_w
    x = image.reshape(b, rows, window_h, cols, window_w, num_heads, c // num_heads).permute(0, 1, 3, 5, 2, 4, 6)
    return x.reshape(b * rows * cols, num_heads, window_h * window_w, c // num_heads)


def _windows_to_image(windows, batch, height, width, window_h, window_w):
    """(B * nW, heads, L, d) -> (B, rows, window_h, cols, window_w, heads, d) view (image order, no copy)."""
    _, num_heads, _, d = windows.shape
    rows, cols = height // window_h, width // window_w
    return windows.reshape(batch, rows, cols, num_heads, window_h, window_w, d).permute(0, 1, 4, 2, 5, 3, 6)


def _attend_windows(q, k, v, window_h, window_w, num_heads, scale, lepe_weight, lepe_bias, bias=None):
    """Attention (+ LePE) inside the windows of (B, h_img, w_img, C) images tiled exactly by the window."""
    vw = _image_to_windows(v, window_h, window_w, num_heads)
    out = attend(_image_to_windows(q, window_h, window_w, num_heads),
                 _image_to_windows(k, window_h, window_w, num_heads), vw, scale, bias)
    if lepe_weight is not None:
        count, _, length, d = vw.shape
        tokens = vw.transpose(1, 2).reshape(count, length, num_heads * d)
        local = lepe(tokens, window_h, window_w, lepe_weight, lepe_bias)
        out = out + local.reshape(count, length, num_heads, d).transpose(1, 2)
    return out


def _tiles(height, width, window_h, window_w):
    """Rectangles (y0, y1, tile_h, x0, x1, tile_w) tiling the map exactly: full windows, then the smaller
    windows of the last partial window row/column (what a masked padded window attends over)."""
    full_rows, rest_rows = divmod(height, window_h)
    full_cols, rest_cols = divmod(width, window_w)
    row_bands = [(0, full_rows * window_h, window_h)] if full_rows else []
    if rest_rows:
        row_bands.append((full_rows * window_h, height, rest_rows))
    col_bands = [(0, full_cols * window_w, window_w)] if full_cols else []
    if rest_cols:
        col_bands.append((full_cols * window_w, width, rest_cols))
    return [(y0, y1, th, x0, x1, tw) for y0, y1, th in row_bands for x0, x1, tw in col_bands]


def window_attention(q, k, v, *, num_heads, height, width, window_h, window_w, scale, lepe_weight=None,
                     lepe_bias=None, padding="zeros", out=None):
    """Multi-head softmax attention restricted to each window, plus optional per-window LePE.

    Shapes: q, k, v (B, N=H*W, C) in the compute dtype (callers upcast half inputs); returns (B, N, C).
    Per window and head: softmax(q k^T * scale) v (+ depthwise conv of the window's v with zero padding at the
    window border when ``lepe_weight`` (C, 1, k, k) is given). A map that is not a multiple of the window is
    padded at the bottom/right per ``padding`` ("zeros": padded keys take part; "masked": excluded) and the
    padded rows are cropped. ``out`` (eager only): a (B, N, C) tensor, e.g. a channel slice of a larger buffer,
    to write the result into; it is returned.
    """
    require(padding in PAD_MODES, "padding must be one of {}, got {!r}", PAD_MODES, padding)
    b, n, c = q.shape
    rows, cols = window_grid(height, width, window_h, window_w)
    padded_h, padded_w = rows * window_h, cols * window_w
    padded = (padded_h, padded_w) != (height, width)

    if exporting() or (padded and padding == "zeros"):
        images = [t.reshape(b, height, width, c) for t in (q, k, v)]
        bias = None
        if padded:
            images = [F.pad(t, (0, 0, 0, padded_w - width, 0, padded_h - height)) for t in images]
            if padding == "masked":
                bias = padded_key_bias(b, height, width, window_h, window_w, q.dtype, q.device)
        result = _attend_windows(*images, window_h, window_w, num_heads, scale, lepe_weight, lepe_bias, bias)
        image = _windows_to_image(result, b, padded_h, padded_w, window_h, window_w).reshape(b, padded_h,
                                                                                                padded_w, c)
        if padded:
            image = image[:, :height, :width]
        if out is None:
            return image.reshape(b, n, c)
        out.view(b, height, width, c).copy_(image)
        return out

    if out is None:
        out = q.new_empty(b, n, c)
    q4, k4, v4, o4 = (t.view(b, height, width, c) for t in (q, k, v, out))
    band_h = max(1, BAND_TOKENS // (window_h * width)) * window_h
    for band in range(0, height, band_h):
        band_end = min(height, band + band_h)
        for y0, y1, tile_h, x0, x1, tile_w in _tiles(band_end - band, width, window_h, window_w):
            ys, xs = slice(band + y0, band + y1), slice(x0, x1)
            result = _attend_windows(q4[:, ys, xs], k4[:, ys, xs], v4[:, ys, xs], tile_h, tile_w, num_heads, scale,
                                     lepe_weight, lepe_bias)
            grid = _windows_to_image(result, b, y1 - y0, x1 - x0, tile_h, tile_w)
            o4[:, ys, xs].view(grid.shape).copy_(grid)
    return out


def padded_key_bias(batch, height, width, window_h, window_w, dtype, device):
    """Additive key mask (B * nW, 1, 1, L) for padded windows: 0 for map tokens, -inf for padding.

    Padding is only at the bottom/right, so every window keeps its top-left token and no row is all -inf.
    """
    rows, cols = window_grid(height, width, window_h, window_w)
    valid = (torch.arange(rows * window_h, device=device) < height)[:, None] & \
        (torch.arange(cols * window_w, device=device) < width)[None, :]
    valid = valid.reshape(rows, window_h, cols, window_w).permute(0, 2, 1, 3).reshape(-1, 1, 1, window_h * window_w)
    bias = torch.zeros(valid.shape, dtype=dtype, device=device).masked_fill(~valid, float("-inf"))
    return bias.repeat(batch, 1, 1, 1)
