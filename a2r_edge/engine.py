"""The Engine: a model package, a plan, and the parts that take one picture through it (the
facade over picture/ and runtime/; who does what: docs/architecture.md, "The way of one picture").

Allocations per picture in steady state (same size, BGR, native backend): the returned array
and a few arrays of C floats (channel statistics); everything else is a recycled buffer
(tests/test_memory.py counts them).

>>> eng = Engine()                    # the bundled a2r_lite model, best plan for this machine
>>> out = eng.convert(picture)        # same layout and dtype, H and W times the model scale
"""
from __future__ import annotations

from typing import Callable, Iterable, Iterator

import numpy as np

from . import _settings
from .model import package as pkg
from .model.precision import resolve as resolve_precision
from .picture import fallback, roi as roi_mod, stages, style as style_mod, tiling
from .picture.cache import CacheInfo, ResultCache, model_key, picture_key
from .picture.forward import (Forward, Slot, SlotPool, as_picture, bytes_per_pixel, padded_size,
                              to_bgr)
from .picture.precision_setup import choose_precisions
from .runtime import stream as stream_mod
from .runtime.pipeline import Pipeline
from .runtime.runners import StageRunners, backend_for_custom_ops
from .runtime.measure import model_digest
from .runtime.scheduler import make_plan


class Engine:
    """Converts pictures with one model on one plan.

    model: None (the bundled default, a2r_lite), a model package folder, or a plain ONNX
    image-to-image file (RGB float32 NCHW in [-1, 1] in and out). device: "auto", "cpu", "gpu" or
    "split" ("gpu"/"split" raise ValueError with the reason: no plan runs stages on the GPU yet,
    see runtime/scheduler.py). backend: None (the plan's choice), "native" or "onnxruntime" for
    every ONNX stage. tile: convert pictures larger than tile x tile pixels in tiles (default:
    only when the network would need more than A2R_MEMORY_MB; the calibration then measures
    no larger pictures). cache_mb: size of the result
    cache (default A2R_CACHE_MB; 0: off). roi: None (whole pictures), "face" (the optional
    animeface detector) or a function BGR picture -> box (x0, y0, x1, y1) or None: only the box
    is converted and pasted back with a feathered edge; no box, the whole picture.
    strict: a failing GPU stage raises instead of falling back (out of memory -> smaller tiles
    -> the CPU, each step logged on the "a2r_edge" logger; only tests attach a GPU runner yet,
    ``_attach_gpu``), and a native ONNX stage with a node the native executor cannot run raises
    UnsupportedOpError instead of running that node on onnxruntime.
    precision: of the native stages' convolutions, "fp32" (default), "bf16", "int8" or "auto"
    (per stage the fastest that keeps the quality guard against fp32; model/precision.py),
    measured on ``calibration`` (a list of uint8 BGR pictures; default:
    ``model.precision.calibration_pictures``, the bundled sample and a generated drawing) at
    construction; with backend None the ONNX stages the plan puts on the CPU then run on the
    native backend (onnxruntime's CPU runs fp32; a GPU stays a candidate: make_plan).
    ``precisions`` and plan.describe() say what each stage runs at and why. A
    precision this machine or backend cannot run falls back to fp32 with one warning
    (strict=True: ValueError; "auto" on a plan with no native stage is fp32 without one); an
    unknown one is a ValueError.
    Thread-safe: the network steps of concurrent calls run one at a time; preparing and
    finishing pictures overlap. ``plan`` (the lowest latency) runs single pictures,
    ``stream_plan`` (the most frames per second) runs convert_batch and stream (on a
    CPU-only machine they agree).
    """

    def __init__(self, model=None, device: str = "auto", *, backend: str | None = None,
                 tile: int | None = None, cache_mb: int | None = None, roi=None,
                 strict: bool = False, precision: str = "fp32", calibration=None):
        if not isinstance(strict, bool):
            raise TypeError(f"strict must be a bool, got {type(strict).__name__}")
        self.strict = strict
        self.model = pkg.resolve(model)
        self._roi = roi_mod.resolve(roi)
        if self._roi is not None and self.model.scale != 1:
            raise ValueError(f"roi= needs a model of scale 1 (the region is pasted back into "
                             f"the picture); {self.model.name!r} has scale {self.model.scale}")
        precision = resolve_precision(precision, strict)
        self._stage_runners = runners = StageRunners(self.model.stages,
                                                     native=backend != "onnxruntime",
                                                     strict=strict)
        self.model = runners.with_size_multiple(self.model)   # a plain ONNX U-Net's stride
        self.tile = tiling.check_tile(tile, self.model.stride)
        backend = backend_for_custom_ops(self.model.stages, backend, runners.unsupported)
        # single pictures: the lowest latency; batches and streams: the most frames per second
        self.plan = make_plan(self.model.stages, device, backend, runners.unsupported,
                              precision=precision, tile=self.tile)
        self.stream_plan = make_plan(self.model.stages, device, backend, runners.unsupported,
                                     objective="throughput", precision=precision,
                                     tile=self.tile)
        single = runners.for_plan(self.plan)
        self._stream_runners = (single if self.stream_plan.placements == self.plan.placements
                                else runners.for_plan(self.stream_plan))
        runners.keep_only({p.stage for plan in (self.plan, self.stream_plan)
                           for p in plan.placements if p.backend == "native"})
        adain = self.model.stage("adain")
        self._forward = Forward(
            self.model, single, pkg.load_stats(adain.params["stats"]) if adain else None,
            variant=lambda stage, graph: runners.variant(
                stage, self.plan.backend_of(stage.name), graph,
                self.plan.ort_threads or self.plan.threads))
        self._pool = SlotPool()
        if cache_mb is None:
            cache_mb = _settings.get("A2R_CACHE_MB")
        if isinstance(cache_mb, bool) or not isinstance(cache_mb, int) or cache_mb < 0:
            raise ValueError(f"cache_mb must be an int >= 0, got {cache_mb!r}")
        self._cache = ResultCache(cache_mb << 20) if cache_mb else None
        self._model_id: bytes | None = None
        self._bpp: float | None = None
        self._pipe: Pipeline | None = None  # the last stream's pipeline (latency())
        self._metrics = None  # the last stream's StreamMetrics (GPU fallbacks are counted there)
        self.precisions = self._set_precision(precision, calibration)

    # --- public API ------------------------------------------------------------------------------

    def convert(self, img: np.ndarray, style: np.ndarray | None = None, *,
                tile: int | None = None, style_colour: float | None = None,
                strength: float | None = None) -> np.ndarray:
        """One picture: uint8 (H, W), (H, W, 3) BGR or (H, W, 4) BGRA -> the same layout, H and W
        times the model's scale. style: a reference photo (uint8 BGR) whose statistics replace
        the model's own target statistics in the AdaIN stage, after the picture's colour mean
        and std were moved the share style_colour (0..1; None: ``stages.STYLE_COLOUR``, half)
        of the way to the photo's (``stages.colour_transfer``; without style: ValueError).
        tile: convert in tiles of at most tile x tile pixels (default: the engine's ``tile``).
        strength: how much of the conversion is kept, 0..1: input + strength (output - input)
        (``stages.blend``; None: the model's default, its manifest's "strength")."""
        img = as_picture(img)
        tile = tiling.check_tile(tile, self.model.stride) or self.tile
        strength = stages.check_strength(self.model, strength)
        stats, colour = self._reference(style, style_colour)
        box = self._box(img)
        if box is not None:
            x0, y0, x1, y1 = box
            crop = style_mod.styled(img[y0:y1, x0:x1], colour)
            out = roi_mod.paste(img, self._convert(crop, stats, tile), box)
        else:
            out = self._convert(style_mod.styled(img, colour), stats, tile)
        return stages.blend(img, out, strength)

    def _convert(self, img: np.ndarray, stats, tile) -> np.ndarray:
        key = self._cache_key(img, stats, tile)
        if key is not None:
            hit = self._cache.get(key)
            if hit is not None:
                return hit
        out = self._convert_uncached(img, tile, stats)
        if key is not None:
            self._cache.put(key, out)
        return out

    def convert_batch(self, images: Iterable[np.ndarray], style: np.ndarray | None = None, *,
                      style_colour: float | None = None,
                      strength: float | None = None) -> list[np.ndarray]:
        """A list of pictures -> the list of results, same order (pipelined, result cache on)."""
        return list(stages.blend_each(self.model, images, strength, lambda frames: (
            stream_mod.with_roi(frames, self._roi, lambda fr: self._stream(
                fr, style, style_colour, cache=True)))))

    def stream(self, frames: Iterable[np.ndarray], style: np.ndarray | None = None, *,
               content_stats: Callable | None = None, colour_stats: Callable | None = None,
               style_colour: float | None = None, metrics=None,
               strength: float | None = None) -> Iterator[np.ndarray]:
        """Converts frames as they come, same order, pipelined over three threads (preprocess,
        network, postprocess; ``runtime.stream``). No result cache (video frames do not
        repeat). content_stats: a function of one argument, a frame's AdaIN content statistics
        as a (mean, std) pair of float32 (1, C) arrays (C: the AdaIN stage's channels), that
        returns the pair to use instead, of the same shapes; colour_stats: the same for each
        frame's own colour statistics, float64 (3,) each ((1,) for gray; B, G, R:
        ``stages.colour_moments``), before style='s colour step (only with style=). Both are
        called in frame order (apps/video.py smooths both over time); a result of another
        shape, not finite or with a std <= 0 is a ValueError (TypeError: not a pair of
        numbers). Per-stage latencies of the current or last stream: ``latency()``. metrics:
        a ``runtime.metrics.StreamMetrics`` that gets every stage time, frame and GPU fallback
        (Prometheus; ``metrics.serve(port)``). strength: as in ``convert``.
        """
        self._metrics = metrics
        return stages.blend_each(self.model, frames, strength, lambda frames: (
            stream_mod.with_roi(frames, self._roi, lambda fr: self._stream(
                fr, style, style_colour, content_stats=content_stats,
                colour_stats=colour_stats, metrics=metrics))))

    def style_stats(self, photo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """AdaIN statistics (mean, std) per feature channel of a reference photo: the features
        the stage before the AdaIN stage makes of it."""
        return style_mod.feature_stats(self._forward, to_bgr(as_picture(photo, "style")))

    def latency(self) -> dict[str, dict[str, float]]:
        """{stage: {"median": s, "p95": s, "count": n}} of the current or last stream."""
        return self._pipe.latency() if self._pipe is not None else {}

    def cache_info(self) -> CacheInfo:
        """Result cache counters: hits, misses, entries, bytes, max_bytes (all 0 when off)."""
        return self._cache.info() if self._cache else CacheInfo(0, 0, 0, 0, 0)

    def cache_clear(self) -> None:
        if self._cache:
            self._cache.clear()

    def bytes_per_pixel(self) -> float:
        """Estimated bytes one input pixel costs in the network (``forward.bytes_per_pixel``)."""
        if self._bpp is None:
            executors = list(self._stage_runners.executors.values())
            self._bpp = bytes_per_pixel(self._forward, executors,
                                        len(self._forward.runners) - len(executors))
        return self._bpp

    def tile_size_for(self, h: int, w: int, tile: int | None) -> int | None:
        """The tile size a picture of h x w input pixels gets (None: in one piece)."""
        return tiling.tile_size(self.model, self.bytes_per_pixel, h, w, tile)

    # --- the steps of a picture, with the GPU fallback around them ---------------------------------

    def _reference(self, style, strength):
        return style_mod.reference(self._forward,
                                   None if style is None else as_picture(style, "style"), strength)

    def _prepare(self, img, tile, stats, cache_key=None) -> Slot:
        """A slot holding ``img`` prepared; a picture to be tiled is converted whole here
        (``slot.done``), as is one whose GPU stage failed (the memory probe runs the network)."""
        hp, wp = padded_size(*img.shape[:2], self.model.stride, self.model.border_margin)
        try:
            size = self.tile_size_for(hp, wp, tile)
            if size is None:
                slot = self._forward.prepare(img, self._pool.acquire((hp, wp)))
            else:
                slot = Slot(None)  # not pooled
                slot.img = img
                slot.done = tiling.convert_tiled(self._forward, img, size, stats)
        except fallback.GpuFault as fault:
            slot = Slot(None)
            slot.img = img
            slot.done = self._recover(fault, img, tile, stats)
        slot.cache_key = cache_key
        return slot

    def _network(self, slot: Slot, tile, stats, content=None, runners=None) -> None:
        if slot.done is None:
            with self._forward.lock:
                try:
                    self._forward.network(slot, stats, content, runners)
                except fallback.GpuFault as fault:
                    slot.done = self._recover(fault, slot.img, tile, stats)

    def _release(self, slot: Slot) -> None:
        if slot.key is not None:
            self._pool.release(slot)

    def _finish(self, slot: Slot) -> np.ndarray:
        """The slot's result; the slot released (also when finishing raises)."""
        try:
            return self._forward.finish(slot)
        finally:
            self._release(slot)

    def _recover(self, fault, img, tile, stats) -> np.ndarray:
        """The picture converted anew after a GPU fault (``fallback.recover``). (A stream's
        content_stats smoothing does not apply to a recovered frame.)"""
        if self._metrics is not None:
            self._metrics.fallback("tiles" if fault.oom else "cpu")
        with self._forward.lock:
            return fallback.recover(
                fault, img, tile or max(img.shape[:2]), self.model.stride,
                strict=self.strict, runner_maps=self._runner_maps(),
                tiled=lambda im, side: tiling.convert_tiled(self._forward, im, side, stats),
                whole=lambda im: self._convert_uncached(im, tile, stats))

    def _convert_uncached(self, img, tile, stats) -> np.ndarray:
        slot = self._prepare(img, tile, stats)
        try:
            self._network(slot, tile, stats)
            return self._forward.finish(slot)
        finally:
            self._release(slot)

    def _runner_maps(self) -> list[dict]:
        """The runner maps of the single-picture and the stream plans (one when they agree)."""
        single = self._forward.runners
        return [single] + ([self._stream_runners] if self._stream_runners is not single else [])

    def _attach_gpu(self, stage: str, runner: Callable) -> None:
        """Runs ONNX stage ``stage`` with ``runner`` (float32 NCHW -> float32 NCHW on a GPU),
        keeping its current runner as the CPU fallback."""
        fallback.attach(self._runner_maps(), stage, runner)

    # --- pictures in bulk: ROI crops, the pipelined stream ---------------------------------------

    def _box(self, img: np.ndarray):
        """The ROI detector's box for ``img``, clipped to it (a detector's box may reach past
        the picture); None: no detector, no detection, or nothing of the box inside."""
        if self._roi is None:
            return None
        box = self._roi(to_bgr(img))
        return None if box is None else roi_mod.clip(box, img.shape)

    def _stream(self, frames, style, strength, cache=False, content_stats=None,
                colour_stats=None, metrics=None):
        stats, colour = self._reference(style, strength)  # a generator: at the first frame
        tile = self.tile
        yield from stream_mod.run(
            frames, colour=colour, colour_stats=colour_stats, cache=self._cache,
            cache_key=(lambda frame: self._cache_key(frame, stats, tile)) if cache else None,
            prepare=lambda frame, key: self._prepare(frame, tile, stats, cache_key=key),
            network=lambda slot: self._network(slot, tile, stats, content_stats,
                                               self._stream_runners),
            finish=self._finish, metrics=metrics, started=self._started)

    def _started(self, pipe: Pipeline) -> None:
        self._pipe = pipe

    # --- settings ----------------------------------------------------------------------------------

    def _set_precision(self, precision, calibration) -> dict:
        """Put the native stages at ``precision`` (``picture.precision_setup``); returns the
        choices and notes them in the plans' descriptions."""
        cache, self._cache = self._cache, None  # nothing cached while calibrating
        try:
            chosen = choose_precisions(
                precision, strict=self.strict, executors=self._stage_runners.executors,
                stage_names=[s.name for s in self.model.stages], runners=self._forward.runners,
                convert=self._calibration_convert, calibration=calibration,
                # the stages and what they are fed (a plain file's --input-range or --mean/--std
                # moves every int8 range; the stride and margin pad the calibration pictures)
                model_digest=lambda: model_key(model_digest(self.model.stages), self.model,
                                               None).hex(),
                picture_domain=self._picture_domain())
        finally:
            self._cache = cache
        self.plan = self.plan.with_precisions(chosen)
        self.stream_plan = self.stream_plan.with_precisions(chosen)
        return chosen

    def _calibration_convert(self, img: np.ndarray) -> np.ndarray:
        """The network alone (no ROI, no strength blend) on calibration picture ``img`` in one
        piece, whatever the Engine's tile: the stage inputs the calibration records give the
        int8 ranges, and tiles run pieces of the stages it does not see. ValueError for a
        picture too large for A2R_MEMORY_MB in one piece."""
        h, w = img.shape[:2]
        if self.tile_size_for(*padded_size(h, w, self.model.stride, self.model.border_margin),
                              None) is not None:
            raise ValueError(f"calibration picture {w}x{h} needs more than A2R_MEMORY_MB="
                             f"{_settings.get('A2R_MEMORY_MB')} in one piece, and calibration "
                             f"runs pictures whole: give smaller ones or raise A2R_MEMORY_MB")
        return self._convert_uncached(img, None, None)

    def _picture_domain(self) -> tuple[float, float]:
        """(lo, hi) of the normalised picture the first stage reads (ops.preprocess of 0..255)."""
        mean, std = np.asarray(self.model.mean), np.asarray(self.model.std)
        ends = np.concatenate([(0 - mean) / std, (1 - mean) / std])
        return float(ends.min()), float(ends.max())

    def _cache_key(self, img: np.ndarray, stats, tile) -> bytes | None:
        if self._cache is None:
            return None
        if self._model_id is None:
            self._model_id = model_key(model_digest(self.model.stages), self.model,
                                       (self.plan.placements, {k: v["precision"] for k, v
                                                               in self.precisions.items()}))
        return picture_key(self._model_id, img, stats, tile)
