"""Tiled conversion without seams (the seams users of other upscalers report).

The picture, padded as an untiled one (``forward.pad_to_stride``: the model's border_margin on
every side, then to the stride), is cut into a grid of *cores* (multiples of the model stride,
so the encoder's down-sampling grid is the untiled one); each tile is its core grown by a
*margin* of the model's receptive field (rounded up to the stride) on every side that has a
neighbour, so adjacent tiles overlap by twice the receptive field.
Then:

1. Whole-picture statistics, gathered tile by tile: a network that normalises by statistics of
   its whole input (InstanceNormalization: the bundled a2r_lite has four in the encoder and four
   in the decoder; a ReduceMean over H and W: its decoder's gate has one) would normalise each
   tile by the tile's own and differ everywhere, not only at seams (a2r_lite, 517x389,
   tile=256: 2.3 grey levels on average, up to 35). So, in graph
   order, each such node's input and the AdaIN stage's input are reduced over every tile's
   *core* only (every value counted once, none near an artificial tile edge), the per-tile
   (count, mean, M2) merged with Chan et al.'s parallel formula in float64, and the node then
   runs with the merged mean and variance in every tile. A graph with such nodes runs in pieces
   cut before each of them (``model.whole_stats.pieces``): a statistic needs all tiles up to its
   node, and the next piece needs the statistic.
2. Every tile runs the rest of the model with those statistics, and its output is blended with
   linear feathering over a band of half a margin centred on each core boundary. The two
   weights of a band sum to 1 and the band ends 3/4 of a margin (>= half the receptive field)
   from either tile's cut edge, so every blended pixel sees its whole receptive field.

Tiled and untiled results agree up to float rounding (tests/test_tiling.py, test_stream.py:
a2r_lite 517x389 in tiles of 256: 3e-6 grey levels on average, at most 1).

Cost: one pass over the tiles per statistic (a2r_lite: 9), each resuming every tile from the
values it kept at the previous cut (``_Passes``), so each node runs once per tile, as in one
untiled run over the tiles' extents (a2r_lite 517x389 in tiles of 256, whose extents cover 2.4x
the picture: 3.3-5x the untiled time on a loaded 2-core box, where it was 8-18x when each pass
ran from the picture; benchmarks/bench_convert.py ``test_tiled_vs_untiled``). Memory: one
tile's network, the float32 output accumulator and the kept values, at most A2R_MEMORY_MB
(a2r_lite: 16 bytes per input pixel of the tiles' extents); a tile whose values do not fit
resumes from the last ones it could keep, at worst from the picture (the same result, more
work). The runners of pieces no tile needs again are dropped after each pass.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _settings, ops
from .._settings import MemoryLimitError
from ..model import whole_stats
from ..runtime import files
from . import stages
from .forward import Slot, finish_layout, output_window, pad_to_stride, to_pixels

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
    core = np.ascontiguousarray(x[:1, :, y0:y1, x0:x1])
    mean, std = ops.channel_stats(core, eps=0.0)   # the kernel the untiled network uses
    count = core.shape[2] * core.shape[3]
    return count, mean[0].astype(np.float64), std[0].astype(np.float64) ** 2 * count


def convert_tiled(forward, img: np.ndarray, tile: int, stats=None,
                  keep_bytes: int | None = None) -> np.ndarray:
    """The picture ``img`` through ``forward`` (a ``Forward``; AdaIN target ``stats``, None: the
    model's own) in tiles of at most ``tile`` x ``tile`` core pixels -> the converted picture, as
    ``forward`` gives it untiled. keep_bytes: the most the tiles' intermediate values kept
    between passes may take (default: A2R_MEMORY_MB; 0: every pass runs from the picture).
    Holds ``forward.lock`` throughout."""
    model = forward.model
    s = model.stride
    margin = margin_for(model)
    band = margin / 2
    tile = max(tile, margin)  # cores at least a margin wide: two ramps of a core never meet
    h, w = img.shape[:2]
    bgr = pad_to_stride(img, s, model.border_margin)  # the untiled path's padding, all of it
    hp, wp = bgr.shape[:2]
    rows, cols = spans(hp, tile, margin, s), spans(wp, tile, margin, s)
    if keep_bytes is None:
        keep_bytes = _settings.get("A2R_MEMORY_MB") << 20
    passes = _Passes(forward, bgr, [(r, c) for r in rows for c in cols], keep_bytes)
    try:
        acc = _run_tiles(forward, passes, stats, hp, wp, band)
    except MemoryLimitError as exc:   # the plans' words name tile shapes
        raise MemoryLimitError(
            f"even in tiles of {tile} pixels (plus {margin} on each side) model "
            f"{model.name!r} needs more than A2R_MEMORY_MB={_settings.get('A2R_MEMORY_MB')} "
            f"MiB: raise A2R_MEMORY_MB ({' '.join(str(exc).split())})") from exc
    out = to_pixels(acc, model)
    oy, ox, oh, ow = output_window(h, w, s, model.border_margin, *acc.shape[2:])
    return finish_layout(img, out[oy:oy + oh, ox:ox + ow])


def _run_tiles(forward, passes, stats, hp: int, wp: int, band: float) -> np.ndarray:
    """The tiles through every pass, their outputs feathered into one (1, 3, H', W') sum."""
    model = forward.model
    with forward.lock:
        _add_stages(passes, forward, stats, whole=len(passes.tiles) > 1)
        acc = None
        for r, c in passes.tiles:
            y = passes.advance((r, c))[_X]
            passes.kept.pop((r, c), None)  # the last pass: what it kept is not needed again
            scale = y.shape[2] / (r[3] - r[2])
            if acc is None:
                acc = np.zeros((1, 3, round(hp * scale), round(wp * scale)), np.float32)
            if y.shape[3] != (c[3] - c[2]) * scale or acc.shape[2] != round(hp * scale):
                raise ValueError(f"model {model.name!r} returned {y.shape[2]}x{y.shape[3]} for "
                                 f"a tile of {r[3] - r[2]}x{c[3] - c[2]}: tiles need outputs "
                                 f"of one scale of their size (is its stride larger than the "
                                 f"declared {model.stride}?)")
            wy = feather(r, hp, band, scale, y.shape[2])
            wx = feather(c, wp, band, scale, y.shape[3])
            oy, ox = round(r[2] * scale), round(c[2] * scale)
            y *= wy[:, None]  # the last step's own buffer (or a kept value no longer needed)
            y *= wx
            acc[:, :, oy:oy + y.shape[2], ox:ox + y.shape[3]] += y
    return acc


# The key of the tensor between two stages in a tile's values (ONNX names are never empty).
_X = ""


class _Passes:
    """The tiles' way through the model as ``steps``, which grow as whole-picture statistics
    become known. A step maps a tile's values ({name: array}: what is live at that point) to the
    values after it; it never writes into the arrays it is given. After each pass a tile keeps
    its values (copied) while all tiles' kept values fit ``keep_bytes``, and its next pass starts
    there; a tile whose values do not fit keeps what it had (at worst nothing: it runs from the
    picture again, so the result is the same, only slower)."""

    def __init__(self, forward, bgr: np.ndarray, tiles: list, keep_bytes: int):
        self.forward, self.bgr, self.tiles, self.keep_bytes = forward, bgr, tiles, keep_bytes
        # (step(values, slot or None) -> values, reads the slot); None: no tile needs it again
        self.steps: list[tuple | None] = []
        self.kept: dict[tuple, tuple[int, dict]] = {}   # tile: (steps done, values)
        self.kept_bytes = 0
        self._slots: dict[tuple, list] = {}   # tile extent: [Slot, the tile prepared in it]

    def add(self, step, reads_slot: bool = False) -> None:
        self.steps.append((step, reads_slot))

    def slot(self, tile) -> Slot:
        """A slot holding ``tile`` prepared (``Forward.prepare``; one slot per tile extent)."""
        r, c = tile
        shape = (r[3] - r[2], c[3] - c[2])
        entry = self._slots.setdefault(shape, [Slot(shape), None])
        if entry[1] != tile:
            self.forward.prepare(self.bgr[r[2]:r[3], c[2]:c[3]], entry[0], margin=0)
            entry[1] = tile
        return entry[0]

    def advance(self, tile) -> dict:
        """``tile``'s values after every step, from those it kept (valid until the next call)."""
        done, values = self.kept.get(tile, (0, {}))
        for step, reads_slot in self.steps[done:]:
            values = step(values, self.slot(tile) if reads_slot else None)
        return values

    def keep(self, tile, values: dict) -> None:
        """Keep ``values`` (``advance``'s) as ``tile``'s if they fit beside the others' kept."""
        done, old = self.kept.get(tile, (0, {}))
        owned = {id(v) for v in old.values()}   # kept already: passed through, not copied
        size = sum(v.nbytes for v in values.values())
        freed = sum(v.nbytes for v in old.values())
        if self.kept_bytes - freed + size > self.keep_bytes:
            return
        self.kept[tile] = (len(self.steps), {k: v if id(v) in owned else np.array(v)
                                             for k, v in values.items()})
        self.kept_bytes += size - freed

    def gather(self, name: str) -> list:
        """[(count, mean, M2)] of value ``name`` over each tile's core after the steps so far
        (one pass over the tiles; each tile keeps its values)."""
        parts = []
        for r, c in self.tiles:
            values = self.advance((r, c))
            x = values[name]
            fs = (r[3] - r[2]) / x.shape[2]  # input pixels per pixel of x
            parts.append(_core_moments(x, (r[0] - r[2], r[1] - r[2]),
                                       (c[0] - c[2], c[1] - c[2]), fs))
            self.keep((r, c), values)
        # Steps every tile has kept its values past never run again: forgotten, their runners
        # (graph pieces, with output buffers per tile size) go with them.
        done = min(self.kept.get(t, (0, None))[0] for t in self.tiles)
        self.steps[:done] = [None] * done
        return parts


def _add_stages(passes: _Passes, forward, stats, whole: bool) -> None:
    """The model's stages as ``passes``' steps. whole: each statistic the network takes over
    its whole input is gathered over the whole picture (``_Passes.gather``) and fixed in the
    steps after it: the AdaIN stage's content (mean, std), and, with ``forward.variant``, each
    InstanceNormalization node's mean and variance and each spatial ReduceMean's mean (its
    graph then runs in pieces, ``_add_pieces``). Otherwise each tile runs the stages as a
    picture of its own."""
    passes.add(lambda values, slot: {_X: slot.bufs["picture"]}, reads_slot=True)
    for j, stage in enumerate(forward.model.stages):
        if stage.kind == "onnx" and whole and forward.variant is not None:
            path = str(stage.params["file"])
            graph, norms, pieces, skipped = _statistics_of(path)
            if skipped:
                name, why = next(iter(skipped.items()))
                warnings.warn(f"stage {stage.name!r}: {len(skipped)} node(s) taking statistics "
                              f"of the whole picture keep each tile's own (e.g. {name!r}: "
                              f"{why}); the tiled result differs from an untiled one",
                              RuntimeWarning, stacklevel=2)
            if norms:
                _add_pieces(passes, forward, stage, graph, pieces)
                continue
        content = None
        if stage.kind == "adain" and whole:
            content = merge_stats(passes.gather(_X), stage.params["eps"])

        def run_stage(values, slot, j=j, content=content):
            return {_X: forward.run_stages(slot, stats, content, start=j, stop=j + 1,
                                           x=values[_X])}
        passes.add(run_stage, reads_slot=True)


@files.per_version(4)   # (each entry holds a model's weights)
def _statistics_of(path: str) -> tuple:
    """(the loaded graph, left unchanged: ``piece_graph`` copies from it; the statistic nodes
    tiles can be given, the pieces they cut the graph into, {node: why} of the statistics they
    cannot be given) of an ONNX stage file (``whole_stats``; shape inference at two sizes),
    once per file version (``files.per_version``): not read again for every tiled picture."""
    graph = whole_stats.load(path)
    types, sized = whole_stats.value_types(graph), whole_stats.picture_sized(graph)
    norms, skipped = whole_stats.statistic_nodes(graph, types, sized)
    skipped.update(whole_stats.picture_wide_nodes(graph, {n.index for n in norms}, sized))
    return graph, norms, whole_stats.pieces(graph, norms, types) if norms else [], skipped


def _add_pieces(passes: _Passes, forward, stage, graph, pieces) -> None:
    """ONNX ``stage`` (its graph ``graph``, cut in ``pieces``: ``whole_stats.pieces``, before
    each node taking a statistic of the whole picture) as one step per piece, each piece run
    with the whole-picture statistics of the node it starts with, gathered from the tiles'
    values at that cut, on the stage's backend at the stage's precision (``forward.variant``:
    ``StageRunners.variant``)."""
    inits = set(whole_stats.constants(graph))
    name_in = next(vi.name for vi in graph.graph.input if vi.name not in inits)
    name_out = graph.graph.output[0].name
    for piece in pieces:
        fixed = None
        if piece.norm is not None:   # before the first piece the input is the picture, _X
            at = _X if piece.start == 0 else piece.norm.input
            n, mean, m2 = merge_moments(passes.gather(at))
            fixed = (mean, m2 / n)
        run = forward.variant(stage, whole_stats.piece_graph(graph, piece, fixed))
        last = piece is pieces[-1]

        def run_piece(values, slot, run=run, piece=piece, last=last):
            if piece.start == 0:
                values = {name_in: values[_X]}
            feeds = {t: values[t] for t in piece.inputs}
            if not last:
                out = run(feeds)
                return {t: out[t] if t in out else values[t] for t in piece.live}

            def result(f):   # stages.onnx adds the picture to it in place: never a kept value
                out = run(f)
                return out[name_out] if name_out in out else np.array(values[name_out])
            return {_X: stages.onnx(stage, result, feeds, slot and slot.bufs["picture"])}
        passes.add(run_piece, reads_slot=last and bool(stage.params.get("add_input")))


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
