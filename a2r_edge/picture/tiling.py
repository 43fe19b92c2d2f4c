"""Tiled conversion without seams (the seams users of other upscalers report).

The picture, padded as an untiled one (``forward.pad_to_stride``), is cut into a grid of *cores*
(multiples of the model stride, so the encoder's down-sampling grid is the untiled one); each
tile is its core grown by a *margin* of the model's receptive field (rounded up to the stride)
on every side that has a neighbour, so adjacent tiles overlap by twice the receptive field.
Then:

1. Whole-picture statistics, gathered tile by tile (``_whole_picture_statistics``): a network
   that normalises by statistics of its whole input (InstanceNormalization: the bundled a2r_lite
   has four in the encoder and four in the decoder) would normalise each tile by the tile's own
   and differ everywhere, not only at seams (a2r_lite, 517x389, tile=256: 2.3 grey levels on
   average, up to 35). So, in graph order, each such node's input and the AdaIN stage's input
   are reduced over every tile's *core* only (every value counted once, none near an artificial
   tile edge), the per-tile (count, mean, M2) merged with Chan et al.'s parallel formula in
   float64, and the node then runs with the merged mean and variance
   (``model.whole_stats.with_fixed_norms``) in every later pass.
2. Every tile runs the whole model with those statistics, and its output is blended with linear
   feathering over a band of half a margin centred on each core boundary. The two weights of a
   band sum to 1 and the band ends 3/4 of a margin (>= half the receptive field) from either
   tile's cut edge, so every blended pixel sees its whole receptive field.

Tiled and untiled results agree up to float rounding (tests/test_tiling.py, test_stream.py:
a2r_lite 517x389 in tiles of 256: 5e-6 grey levels on average, at most 1).

Cost: one pass over the tiles per statistic, each running the stages up to it (a2r_lite: 9
statistics; 517x389 in tiles of 256 takes 26x the untiled time, 2.3x the time it took with
per-tile normalisation), so the memory bound holds (only statistics are kept between passes);
memory: one tile's network plus the float32 output accumulator.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _settings, ops
from ..model import whole_stats
from .forward import Slot, finish_layout, pad_to_stride

# Receptive field assumed for a model that does not declare one (a plain ONNX file): 32 pixels
# covers the 3x3-conv up-scalers such files usually hold with room to spare.
_UNKNOWN_RF = 32


def margin_for(model) -> int:
    """Per-side margin in input pixels: the receptive field rounded up to the stride."""
    rf = model.receptive_field or _UNKNOWN_RF
    s = model.stride
    return -(-rf // s) * s


def spans(n: int, tile: int, margin: int, stride: int) -> list[tuple[int, int, int, int]]:
    """(core0, core1, ext0, ext1) along an axis of n pixels (a multiple of stride): about equal
    cores of at most ``tile`` pixels on stride multiples, extents = cores + margin, clipped."""
    k = max(1, math.ceil(n / tile))
    bounds = [min(n, round(i * n / k / stride) * stride) for i in range(k + 1)]
    bounds = sorted(set(bounds))
    return [(a, b, max(0, a - margin), min(n, b + margin)) for a, b in zip(bounds, bounds[1:])]


def feather(span, n: int, band: float, scale: float, size_out: int) -> np.ndarray:
    """Blend weights over a tile's output extent (``size_out`` pixels, ``scale`` x its input
    extent): 1 inside the core, linear ramps of width ``band`` centred on inner core
    boundaries (0 at the far side), 1 at the picture's own borders."""
    c0, c1, e0, _ = span
    p = e0 + (np.arange(size_out, dtype=np.float64) + 0.5) / scale  # input coordinates
    w = np.ones(size_out)
    if c0 > 0:
        w *= np.clip((p - (c0 - band / 2)) / band, 0.0, 1.0)
    if c1 < n:
        w *= np.clip(((c1 + band / 2) - p) / band, 0.0, 1.0)
    return w.astype(np.float32)


def merge_moments(parts) -> tuple[int, np.ndarray, np.ndarray]:
    """Chan's parallel merge of [(count, mean (C,), M2 (C,))] -> (count, mean, M2), float64."""
    n, mean, m2 = parts[0]
    mean, m2 = mean.copy(), m2.copy()
    for nb, mb, m2b in parts[1:]:
        total = n + nb
        delta = mb - mean
        mean += delta * (nb / total)
        m2 += m2b + delta * delta * (n * nb / total)
        n = total
    return n, mean, m2


def merge_stats(parts, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """``merge_moments`` -> (mean, std) float32 (1, C), std = sqrt(biased variance + eps), as
    ``ops.channel_stats`` defines it."""
    n, mean, m2 = merge_moments(parts)
    return (mean[None].astype(np.float32),
            np.sqrt(m2 / n + eps)[None].astype(np.float32))


def _core_moments(x: np.ndarray, core_y, core_x, fs: float):
    """(count, mean, M2) per channel of features x (1, C, h, w) over a core given in tile-local
    input pixels; fs: input pixels per feature pixel."""
    y0, y1 = (round(v / fs) for v in core_y)
    x0, x1 = (round(v / fs) for v in core_x)
    f = x[0, :, y0:y1, x0:x1].reshape(x.shape[1], -1).astype(np.float64)
    mean = f.mean(axis=1)
    return f.shape[1], mean, ((f - mean[:, None]) ** 2).sum(axis=1)


def convert_tiled(forward, img: np.ndarray, tile: int, stats=None) -> np.ndarray:
    """The picture ``img`` through ``forward`` (a ``Forward``; AdaIN target ``stats``, None: the
    model's own) in tiles of at most ``tile`` x ``tile`` core pixels -> the converted picture, as
    ``forward`` gives it untiled. Holds ``forward.lock`` throughout."""
    model = forward.model
    s = model.stride
    margin = margin_for(model)
    band = margin / 2
    tile = max(tile, margin)  # cores at least a margin wide: two ramps of a core never meet
    h, w = img.shape[:2]
    bgr = pad_to_stride(img, s)  # the untiled path's padding, on the whole picture
    hp, wp = bgr.shape[:2]
    rows, cols = spans(hp, tile, margin, s), spans(wp, tile, margin, s)
    tiles = [(r, c) for r in rows for c in cols]
    slots: dict[tuple, Slot] = {}

    def prepared(r, c):
        shape = (r[3] - r[2], c[3] - c[2])
        t = slots.get(shape)
        if t is None:
            t = slots[shape] = Slot(shape)
        return forward.prepare(bgr[r[2]:r[3], c[2]:c[3]], t)

    def moments(run):
        """(count, mean, M2) over the cores of run(tile slot) (1, C, h, w) of every tile."""
        parts = []
        for r, c in tiles:
            x = run(prepared(r, c))
            fs = (r[3] - r[2]) / x.shape[2]  # input pixels per pixel of x
            parts.append(_core_moments(x, (r[0] - r[2], r[1] - r[2]),
                                       (c[0] - c[2], c[1] - c[2]), fs))
        return parts

    with forward.lock:
        runners, content = forward.runners, None
        if len(tiles) > 1:
            runners, content = _whole_picture_statistics(forward, stats, moments)
        acc = None
        for r, c in tiles:
            t = prepared(r, c)
            forward.network(t, stats, content, runners)
            y = t.result
            scale = y.shape[2] / (r[3] - r[2])
            if acc is None:
                acc = np.zeros((1, 3, round(hp * scale), round(wp * scale)), np.float32)
            wy = feather(r, hp, band, scale, y.shape[2])
            wx = feather(c, wp, band, scale, y.shape[3])
            oy, ox = round(r[2] * scale), round(c[2] * scale)
            y *= wy[:, None]
            y *= wx
            acc[:, :, oy:oy + y.shape[2], ox:ox + y.shape[3]] += y
    out = ops.postprocess(acc, model.mean, model.std)
    oh, ow = round(h * acc.shape[2] / hp), round(w * acc.shape[3] / wp)
    return finish_layout(img, out[:oh, :ow])


def _whole_picture_statistics(forward, stats, moments):
    """(ONNX stage runners, AdaIN content statistics) that make every tile see the statistics of
    the whole picture: each InstanceNormalization node's mean and variance (its stage then runs
    a graph with them fixed, ``whole_stats.with_fixed_norms``; only with ``forward.variant``) and
    the AdaIN stage's content (mean, std). One pass over the tiles per statistic, in graph
    order, each pass running the stages up to that statistic with the ones before it fixed."""
    runners, content = dict(forward.runners), None
    for j, stage in enumerate(forward.model.stages):
        if stage.kind == "onnx" and forward.variant is not None:
            graph = whole_stats.load(stage.params["file"])
            fixed = {}
            for norm in whole_stats.instance_norms(graph):
                probe = forward.variant(stage, whole_stats.truncated(
                    whole_stats.with_fixed_norms(graph, fixed), norm.input))
                n, mean, m2 = merge_moments(moments(
                    lambda t: probe(forward.run_stages(t, stats, content, runners, stop=j))))
                fixed[norm.index] = (mean, m2 / n)
            if fixed:
                runners[stage.name] = forward.variant(
                    stage, whole_stats.with_fixed_norms(graph, fixed))
        elif stage.kind == "adain":
            content = merge_stats(moments(
                lambda t: forward.run_stages(t, stats, content, runners, stop=j)),
                stage.params["eps"])
    return runners, content


def check_tile(tile, stride: int) -> int | None:
    """tile= checked (None, or an int >= 1: ValueError otherwise), rounded up to a multiple of
    the stride."""
    if tile is None:
        return None
    if isinstance(tile, bool) or not isinstance(tile, int) or tile < 1:
        raise ValueError(f"tile must be an int >= 1 (pixels), got {tile!r}")
    return -(-tile // stride) * stride


def tile_size(model, bytes_per_pixel, h: int, w: int, tile: int | None) -> int | None:
    """The tile size a picture of h x w (padded) input pixels gets, None: in one piece. tile:
    the caller's (tiles when the picture is larger); None: tiles only when the network would
    need more than A2R_MEMORY_MB at ``bytes_per_pixel()`` bytes per pixel."""
    if tile is not None:
        return tile if max(h, w) > tile else None
    budget = _settings.get("A2R_MEMORY_MB") << 20
    bpp = bytes_per_pixel()
    if bpp * h * w <= budget:
        return None
    side = int((budget / bpp) ** 0.5) - 2 * margin_for(model)
    s = model.stride
    return max(s * max(1, 64 // s), side // s * s)  # at least 64 px: margins stay a minority
