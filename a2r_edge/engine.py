"""The Engine: a model package, a plan, and the pipeline of DESIGN.md §1 for one picture.

    uint8 gray / BGR / BGRA  ->  reflect-pad to the model's stride  ->  preprocess
    -> the model's stages in order (onnx networks, AdaIN to photo or reference statistics,
       guided-filter detail)  ->  postprocess  ->  crop  ->  gray / alpha restored

A picture goes through three steps, each on buffers recycled per picture size (``_Slot``):
``_prep`` (pad, preprocess, guide luma), ``_network`` (the model's stages, one at a time under the
engine lock) and ``_post`` (postprocess, crop, layout). ``convert`` runs them in the caller's
thread; ``stream`` and ``convert_batch`` run them pipelined over three threads
(``pipeline.Pipeline``), so the preprocess of frame n+1 overlaps the network of frame n.

Allocations per picture in steady state (same size, BGR, native backend): the returned array
and a few arrays of C floats (channel statistics); everything else is a recycled buffer
(tests/test_memory.py counts them).

Pictures whose network would need more than ``A2R_MEMORY_MB``, or larger than ``tile=``, are
converted in tiles (``picture/tiling.py``) with the content statistics of the whole picture: no seams.

>>> eng = Engine()                    # the bundled a2r_lite model, best plan for this machine
>>> out = eng.convert(picture)        # same layout and dtype, H and W times the model scale
"""
from __future__ import annotations

import collections
import hashlib
import logging
import numbers
import threading
from typing import Callable, Iterable, Iterator

import numpy as np

from . import _settings, ops
from .model import package as pkg
from .picture import roi as roi_mod
from .picture import stages
from .runtime.pipeline import Pipeline
from .runtime.scheduler import make_plan, model_digest

# Queue capacity between pipelined stages: 2 lets each stage start its next frame while the one
# after it is still busy; more only adds latency and memory.
_DEPTH = 2
# Frames in flight in a stream (each holds one slot of buffers, 7.75 MiB at 512^2): one per
# stage is all the overlap three stages can use; more would only sit in queues.
_IN_FLIGHT = 3
# Picture sizes whose recycled buffers are kept: the current one and the previous one (a
# stream that alternates between two sizes does not reallocate).
_SIZES_KEPT = 2
# Smallest tile the out-of-memory retry tries before falling back to the CPU: below 64 px the
# tile margins (the receptive field) would be most of every tile.
_MIN_RETRY_TILE = 64

log = logging.getLogger("a2r_edge")


class _GpuFault(Exception):
    """A GPU stage runner failed: ``oom`` when it ran out of memory. Raised by ``_GpuRunner``
    only, so the fallback chain never hides a CPU error."""

    def __init__(self, stage: str, exc: BaseException):
        super().__init__(f"GPU stage {stage!r} failed: {exc}")
        self.stage, self.exc, self.oom = stage, exc, isinstance(exc, MemoryError)


class _GpuRunner:
    """Wraps a GPU stage runner: its failures become ``_GpuFault``; ``cpu`` is the runner the
    fallback chain switches to."""

    def __init__(self, stage: str, gpu: Callable, cpu: Callable):
        self.stage, self.gpu, self.cpu = stage, gpu, cpu

    def __call__(self, x):
        try:
            return self.gpu(x)
        except Exception as exc:  # noqa: BLE001  (CudaError, CudaOutOfMemory, ...)
            raise _GpuFault(self.stage, exc) from exc


def _as_picture(img, name: str = "img") -> np.ndarray:
    if not isinstance(img, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray of uint8 (H, W), (H, W, 3) or "
                        f"(H, W, 4), got {type(img).__name__}")
    if img.dtype != np.uint8:
        raise TypeError(f"{name} must have dtype uint8, got {img.dtype}")
    if img.ndim not in (2, 3) or (img.ndim == 3 and img.shape[2] not in (1, 3, 4)):
        raise ValueError(f"{name} must have shape (H, W), (H, W, 3) BGR or (H, W, 4) BGRA, "
                         f"got {img.shape}")
    if img.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {img.shape}")
    limit = _settings.get("A2R_MAX_PIXELS")
    if img.shape[0] * img.shape[1] > limit:  # before any copy: a strided view may be huge
        raise ValueError(f"{name} is {img.shape[1]}x{img.shape[0]} = "
                         f"{img.shape[0] * img.shape[1]} pixels, more than the limit "
                         f"A2R_MAX_PIXELS={limit}")
    return img


def _reflect_index(i: int, n: int) -> int:
    """np.pad 'reflect' source index of position i of a length-n axis (n == 1: 'edge')."""
    if n == 1:
        return 0
    period = 2 * (n - 1)
    i %= period
    return period - i if i >= n else i


CacheInfo = collections.namedtuple("CacheInfo", "hits misses entries bytes max_bytes")


class ResultCache:
    """LRU of converted pictures, bounded in bytes. Stores and returns copies: a caller that
    edits a result in place never changes what the next hit returns. Thread-safe."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._items: collections.OrderedDict[bytes, np.ndarray] = collections.OrderedDict()
        self._bytes = self.hits = self.misses = 0
        self._lock = threading.Lock()

    def get(self, key: bytes) -> np.ndarray | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value.copy()

    def put(self, key: bytes, value: np.ndarray) -> None:
        if value.nbytes > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._items[key] = value.copy()
            self._bytes += value.nbytes
            while self._bytes > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= dropped.nbytes

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self.hits, self.misses, len(self._items), self._bytes,
                             self.max_bytes)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = self.hits = self.misses = 0


class _Slot:
    """The recycled buffers of one picture in flight, for one padded input size."""

    def __init__(self, key):
        self.key = key
        self.bufs: dict[str, np.ndarray] = {}
        self.img = None     # the caller's picture (alpha, layout)
        self.result = None  # network output: float32 (1, 3, H', W') in self.bufs["ychw"]
        self.done = None    # a finished uint8 output (cache hit, tiled picture)
        self.cache_key = None

    def buf(self, name: str, shape: tuple, dtype=np.float32) -> np.ndarray:
        b = self.bufs.get(name)
        if b is None or b.shape != shape or b.dtype != dtype:
            b = self.bufs[name] = np.empty(shape, dtype)
        return b


class _SlotPool:
    """Free slots per padded size; sizes beyond the last ``_SIZES_KEPT`` are forgotten."""

    def __init__(self):
        self._free: collections.OrderedDict[tuple, list] = collections.OrderedDict()
        self._lock = threading.Lock()

    def acquire(self, key) -> _Slot:
        with self._lock:
            free = self._free.get(key)
            if free:
                return free.pop()
        return _Slot(key)

    def release(self, slot: _Slot) -> None:
        slot.img = slot.result = slot.done = slot.cache_key = None
        with self._lock:
            self._free.setdefault(slot.key, []).append(slot)
            self._free.move_to_end(slot.key)
            while len(self._free) > _SIZES_KEPT:
                self._free.popitem(last=False)


class Engine:
    """Converts pictures with one model on one plan.

    model: None (the bundled default, a2r_lite), a model package folder, or a plain ONNX
    image-to-image file (RGB float32 NCHW in [-1, 1] in and out). device: "auto", "cpu", "gpu" or
    "split" ("gpu"/"split" raise ValueError with the reason: no plan runs stages on the GPU yet,
    see runtime/scheduler.py). backend:
    None (the plan's choice), "native" or "onnxruntime" for every ONNX stage. tile: convert
    pictures larger than tile x tile pixels in tiles (default: only when the network would need
    more than A2R_MEMORY_MB). cache_mb: size of the result cache (default A2R_CACHE_MB; 0: off).
    roi: None (whole pictures), "face" (the optional animeface detector) or a function
    BGR picture -> box (x0, y0, x1, y1) or None: only the box is converted and pasted back with
    a feathered edge; no box, the whole picture.
    strict: a failing GPU stage raises instead of falling back (out of memory -> smaller tiles
    -> the CPU, each step logged on the "a2r_edge" logger). The fallback chain is in place for
    the GPU runner to come (``_attach_gpu``); today only tests attach one. It also makes a
    native ONNX stage with a node the native executor cannot run raise UnsupportedOpError
    instead of running that node (or the stage) on onnxruntime.
    Thread-safe: the network steps of concurrent calls run one at a time; preparing and
    finishing pictures overlap.
    Plans: ``plan`` (the lowest latency) runs single pictures, ``stream_plan`` (the most frames
    per second) runs convert_batch and stream; on a CPU-only machine they agree.
    """

    def __init__(self, model=None, device: str = "auto", *, backend: str | None = None,
                 tile: int | None = None, cache_mb: int | None = None, roi=None,
                 strict: bool = False):
        if not isinstance(strict, bool):
            raise TypeError(f"strict must be a bool, got {type(strict).__name__}")
        self.strict = strict
        self.model = pkg.resolve(model)
        self._roi = roi_mod.resolve(roi)
        if self._roi is not None and self.model.scale != 1:
            raise ValueError(f"roi= needs a model of scale 1 (the region is pasted back into "
                             f"the picture); {self.model.name!r} has scale {self.model.scale}")
        self.tile = self._check_tile(tile)
        # Each ONNX stage becomes a function float32 NCHW -> float32 NCHW on its backend.
        unsupported, self._executors = {}, {}
        from .model.arena import SharedArena
        self._arena = SharedArena()  # the native stages run one after another: one arena
        for stage in self.model.stages:
            if stage.kind == "onnx" and backend != "onnxruntime":
                from .model import NativeExecutor, UnsupportedOpError
                try:
                    self._executors[stage.name] = NativeExecutor(
                        str(stage.params["file"]), self._arena, strict=strict)
                except UnsupportedOpError as exc:
                    if strict:
                        raise
                    unsupported[stage.name] = str(exc)
        # single pictures: the lowest latency; batches and streams: the most frames per second
        self.plan = make_plan(self.model.stages, device, backend, unsupported)
        self.stream_plan = make_plan(self.model.stages, device, backend, unsupported,
                                     objective="throughput")
        sessions: dict = {}
        self._runners = self._runners_for(self.plan, sessions)
        self._stream_runners = (self._runners if self.stream_plan.placements == self.plan.placements
                                else self._runners_for(self.stream_plan, sessions))
        native = {p.stage for plan in (self.plan, self.stream_plan) for p in plan.placements
                  if p.backend == "native"}
        self._executors = {n: ex for n, ex in self._executors.items() if n in native}
        adain = self.model.stage("adain")
        self._photo_stats = pkg.load_stats(adain.params["stats"]) if adain else None
        self._has_gf = self.model.stage("guided_filter") is not None
        self._lock = threading.RLock()
        self._pool = _SlotPool()
        self._shared = _Slot(None)  # buffers of the network step (under the lock)
        if cache_mb is None:
            cache_mb = _settings.get("A2R_CACHE_MB")
        if isinstance(cache_mb, bool) or not isinstance(cache_mb, int) or cache_mb < 0:
            raise ValueError(f"cache_mb must be an int >= 0, got {cache_mb!r}")
        self._cache = ResultCache(cache_mb << 20) if cache_mb else None
        self._model_id: bytes | None = None
        self._bpp: float | None = None
        self._pipe: Pipeline | None = None  # the last stream's pipeline (latency())

    def _runners_for(self, plan, sessions: dict) -> dict[str, Callable]:
        """{ONNX stage: runner on the backend ``plan`` places it on}; onnxruntime sessions are
        made once (``sessions``) and shared by the plans."""
        runners = {}
        for stage in self.model.stages:
            if stage.kind != "onnx":
                continue
            if plan.backend_of(stage.name) == "native":
                runners[stage.name] = self._executors[stage.name].run
                continue
            session = sessions.get(stage.name)
            if session is None:
                from .runtime.ort import OrtSession
                session = sessions[stage.name] = OrtSession(
                    str(stage.params["file"]), threads=plan.ort_threads or plan.threads)
            runners[stage.name] = session.runner()
        return runners

    # --- public API ------------------------------------------------------------------------------

    def convert(self, img: np.ndarray, style: np.ndarray | None = None, *,
                tile: int | None = None, style_colour: float | None = None) -> np.ndarray:
        """One picture: uint8 (H, W), (H, W, 3) BGR or (H, W, 4) BGRA -> the same layout, H and W
        times the model's scale. style: a reference photo (uint8 BGR) whose statistics replace
        the model's own target statistics in the AdaIN stage, after the picture's colour mean
        and std were moved the share style_colour (0..1; None: ``stages.STYLE_COLOUR``, half)
        of the way to the photo's (``stages.colour_transfer``). tile: convert in tiles of at
        most tile x tile pixels (default: the engine's ``tile``)."""
        img = _as_picture(img)
        tile = self._check_tile(tile) or self.tile
        stats, colour = self._reference(style, style_colour)
        box = self._roi(self._bgr(img)) if self._roi is not None else None
        if box is not None:
            x0, y0, x1, y1 = box
            crop = _styled(img[y0:y1, x0:x1], colour)
            return roi_mod.paste(img, self._convert(crop, stats, tile), box)
        return self._convert(_styled(img, colour), stats, tile)

    def _convert(self, img: np.ndarray, stats, tile) -> np.ndarray:
        key = self._cache_key(img, stats, tile)
        if key is not None:
            hit = self._cache.get(key)
            if hit is not None:
                return hit
        # Only the network step is serialised (the executors and shared buffers are single
        # users); preparing and finishing use the slot's own buffers.
        slot = self._prep_guarded(img, tile, stats)
        try:
            if slot.done is None:
                with self._lock:
                    self._network_guarded(slot, tile, stats)
            out = self._post(slot)
        finally:
            if slot.key is not None:
                self._pool.release(slot)
        if key is not None:
            self._cache.put(key, out)
        return out

    def convert_batch(self, images: Iterable[np.ndarray], style: np.ndarray | None = None, *,
                      style_colour: float | None = None) -> list[np.ndarray]:
        """A list of pictures -> the list of results, same order (pipelined, result cache on)."""
        return list(self._with_roi(images, lambda fr: self._stream(
            fr, style, style_colour, cache=True)))

    def _with_roi(self, frames, run):
        """run(crops) over the ROI crops of ``frames``, each result pasted back (no ROI: as is)."""
        if self._roi is None:
            yield from run(frames)
            return
        pending = collections.deque()

        def crops():
            for i, frame in enumerate(frames):
                frame = _as_picture(frame, f"frame {i}")
                box = self._roi(self._bgr(frame))
                pending.append((frame, box))
                yield frame if box is None else frame[box[1]:box[3], box[0]:box[2]]

        for out in run(crops()):
            frame, box = pending.popleft()
            yield out if box is None else roi_mod.paste(frame, out, box)

    def stream(self, frames: Iterable[np.ndarray], style: np.ndarray | None = None, *,
               content_stats: Callable | None = None, colour_stats: Callable | None = None,
               style_colour: float | None = None) -> Iterator[np.ndarray]:
        """Converts frames as they come, same order, pipelined over three threads (preprocess,
        network, postprocess; at most ``_DEPTH`` frames wait between two of them). No result
        cache (video frames do not repeat). content_stats: a function (mean, std) -> (mean, std)
        applied to each frame's AdaIN content statistics before use; colour_stats: the same for
        each frame's own colour statistics (``stages.colour_moments``) before style='s colour
        step, called in frame order (apps/video.py smooths both over time). Per-stage latencies of
        the current or last stream: ``latency()``."""
        return self._with_roi(frames, lambda fr: self._stream(
            fr, style, style_colour, content_stats=content_stats, colour_stats=colour_stats))

    def style_stats(self, photo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """AdaIN statistics (mean, std) per feature channel of a reference photo: the features
        the stage before the AdaIN stage makes of it."""
        return self._feature_stats(self._bgr(_as_picture(photo, "style")))

    def _feature_stats(self, bgr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """style_stats of a picture already in BGR."""
        if self.model.stage("adain") is None:
            raise ValueError(f"model {self.model.name!r} has no AdaIN stage: style= does not apply")
        with self._lock:
            x = ops.preprocess(bgr, self.model.mean, self.model.std)
            x = self._features(x)
            return ops.channel_stats(x, self.model.stage("adain").params["eps"])

    def _reference(self, style, strength):
        """(AdaIN statistics, (colour statistics, strength)) of a reference photo and the share
        of the way the colours move to it (None: the default); (None, None) without a photo."""
        strength = stages.STYLE_COLOUR if strength is None else strength
        if isinstance(strength, bool) or not isinstance(strength, numbers.Real) \
                or not 0 <= strength <= 1:
            raise ValueError(f"style_colour must be a number in [0, 1], got {strength!r}")
        if style is None:
            return None, None
        bgr = self._bgr(_as_picture(style, "style"))
        return self._feature_stats(bgr), (stages.colour_stats(bgr), float(strength))

    def latency(self) -> dict[str, dict[str, float]]:
        """{stage: {"median": s, "p95": s, "count": n}} of the current or last stream."""
        return self._pipe.latency() if self._pipe is not None else {}

    def cache_info(self) -> CacheInfo:
        """Result cache counters: hits, misses, entries, bytes, max_bytes (all 0 when off)."""
        return self._cache.info() if self._cache else CacheInfo(0, 0, 0, 0, 0)

    def cache_clear(self) -> None:
        if self._cache:
            self._cache.clear()

    # --- settings ----------------------------------------------------------------------------------

    def _check_tile(self, tile) -> int | None:
        if tile is None:
            return None
        if isinstance(tile, bool) or not isinstance(tile, int) or tile < 1:
            raise ValueError(f"tile must be an int >= 1 (pixels), got {tile!r}")
        return -(-tile // self.model.stride) * self.model.stride  # a multiple of the stride

    def _cache_key(self, img: np.ndarray, stats, tile) -> bytes | None:
        """Hash of the picture bytes + shape, the model, and the settings that change results."""
        if self._cache is None:
            return None
        if self._model_id is None:
            h = hashlib.blake2b(model_digest(self.model.stages).encode(), digest_size=16)
            h.update(repr((self.model.mean, self.model.std, self.model.stride,
                           self.plan.placements)).encode())
            self._model_id = h.digest()
        h = hashlib.blake2b(self._model_id, digest_size=20)
        h.update(repr((img.shape, img.dtype.str, tile)).encode())
        if stats is not None:
            h.update(np.ascontiguousarray(stats[0]).tobytes())
            h.update(np.ascontiguousarray(stats[1]).tobytes())
        if img.flags.c_contiguous:
            h.update(img.data)
        else:  # row by row: a crop's rows are contiguous, no whole-picture copy
            for row in img:
                h.update(np.ascontiguousarray(row).data)
        return h.digest()

    def bytes_per_pixel(self) -> float:
        """Estimated bytes one input pixel costs in the network: the native executors' arenas
        and outputs measured on a 64 x 64 probe, plus the engine's own buffers."""
        if self._bpp is None:
            probe = 64  # small enough to cost nothing, large enough to amortise fixed buffers
            side = -(-probe // self.model.stride) * self.model.stride
            with self._lock:
                slot = _Slot(None)
                self._prep(np.zeros((side, side, 3), np.uint8), slot=slot)
                self._network(slot, None)
            scale = slot.result.shape[-1] / side
            exs = self._executors.values()  # their plans share one arena
            total = max((ex.arena_bytes() for ex in exs), default=0)
            total += sum(ex.output_bytes() for ex in exs)
            # onnxruntime stages: ~256 B per pixel each (its arena is not visible)
            total += 256 * side * side * (len(self._runners) - len(self._executors))
            # ours: bgr 3 + picture 12 + guide/tmp 8; per output pixel ychw 12 (the guided
            # filter writes into it), the filter's working sums (at most 24), out8 3
            self._bpp = total / (side * side) + 23 + scale * scale * (12 + 24 + 3)
        return self._bpp

    def tile_size_for(self, h: int, w: int, tile: int | None) -> int | None:
        """The tile size a picture of h x w input pixels gets (None: in one piece)."""
        from .picture import tiling
        if tile is not None:
            return tile if max(h, w) > tile else None
        budget = _settings.get("A2R_MEMORY_MB") << 20
        if self.bytes_per_pixel() * h * w <= budget:
            return None
        margin = tiling.margin_for(self.model)
        side = int((budget / self.bytes_per_pixel()) ** 0.5) - 2 * margin
        s = self.model.stride
        return max(s * max(1, 64 // s), side // s * s)  # at least 64 px: margins stay a minority

    def _stream(self, frames, style, strength, cache=False, content_stats=None,
                colour_stats=None):
        stats, colour = self._reference(style, strength)
        tile = self.tile

        slots = threading.BoundedSemaphore(_IN_FLIGHT)

        def prep(item):
            i, frame = item
            frame = _styled(_as_picture(frame, f"frame {i}"), colour, colour_stats)
            key = self._cache_key(frame, stats, tile) if cache else None
            if key is not None:
                hit = self._cache.get(key)
                if hit is not None:
                    slot = _Slot(None)
                    slot.done = hit
                    return slot
            return self._prep_guarded(frame, tile, stats, cache_key=key)

        def network(slot):
            if slot.done is None:
                with self._lock:
                    self._network_guarded(slot, tile, stats, content_stats,
                                          self._stream_runners)
            return slot

        def post(slot):
            key = slot.cache_key
            try:
                out = self._post(slot)
            finally:
                if slot.key is not None:
                    self._pool.release(slot)
                slots.release()
            if key is not None:
                self._cache.put(key, out)
            return out

        pipe = Pipeline([("preprocess", prep), ("network", network), ("postprocess", post)],
                        depth=_DEPTH)
        def gated():  # a frame enters only when a slot is free (outside the timed stages)
            for item in enumerate(frames):
                while not slots.acquire(timeout=0.05):
                    if pipe.stopping():
                        return
                yield item

        self._pipe = pipe
        yield from pipe.run(gated())

    # --- GPU faults: out of memory -> smaller tiles -> the CPU, never a black picture ---------------

    def _runner_maps(self) -> list[dict]:
        """The runner maps of the single-picture and the stream plans (one when they agree)."""
        return [self._runners] + ([self._stream_runners]
                                  if self._stream_runners is not self._runners else [])

    def _attach_gpu(self, stage: str, runner: Callable) -> None:
        """Runs ONNX stage ``stage`` with ``runner`` (float32 NCHW -> float32 NCHW on a GPU),
        keeping its current runner as the CPU fallback."""
        for runners in self._runner_maps():
            cpu = runners[stage]
            runners[stage] = _GpuRunner(stage, runner, getattr(cpu, "cpu", cpu))

    def _prep_guarded(self, img, tile, stats, cache_key=None) -> _Slot:
        """``_prep``; a tiled picture runs its network there, so GPU faults are handled here too."""
        try:
            return self._prep(img, tile=tile, stats=stats, cache_key=cache_key)
        except _GpuFault as fault:
            slot = _Slot(None)  # not pooled (key None)
            slot.img, slot.cache_key = img, cache_key
            with self._lock:
                slot.done = self._recover(fault, img, tile, stats)
            return slot

    def _network_guarded(self, slot: _Slot, tile, stats, content=None, runners=None) -> None:
        try:
            self._network(slot, stats, content, runners)
        except _GpuFault as fault:
            slot.done = self._recover(fault, slot.img, tile, stats)

    def _recover(self, fault: _GpuFault, img, tile, stats) -> np.ndarray:
        """After a GPU stage failed on ``img``: the whole converted picture, by smaller tiles
        (out of memory only), else with every GPU stage on its CPU runner. Caller holds the lock.
        (A stream's content_stats smoothing does not apply to a recovered frame.)"""
        from .picture import tiling
        if self.strict:
            raise RuntimeError(f"{fault} (strict=True: no fallback)") from fault.exc
        s = self.model.stride
        side = tile or max(img.shape[:2])
        while fault.oom and side // 2 >= _MIN_RETRY_TILE:
            side = max(s, side // 2 // s * s)
            log.warning("%s: out of memory; retrying in tiles of %d px", fault, side)
            try:
                return tiling.convert_tiled(self, img, side, stats)
            except _GpuFault as again:
                fault = again
        for runners in self._runner_maps():
            for name, runner in list(runners.items()):
                if isinstance(runner, _GpuRunner):
                    runners[name] = runner.cpu
        log.warning("%s; falling back to the CPU for every GPU stage", fault)
        slot = self._prep(img, tile=tile, stats=stats)
        try:
            if slot.done is None:
                self._network(slot, stats)
            return self._post(slot)
        finally:
            self._pool.release(slot)

    # --- the three steps of a picture ------------------------------------------------------------

    @staticmethod
    def _bgr(img: np.ndarray) -> np.ndarray:
        if img.ndim == 2 or img.shape[2] == 1:
            return np.repeat(img.reshape(img.shape[0], img.shape[1], 1), 3, axis=2)
        return np.ascontiguousarray(img[:, :, :3])

    def _prep(self, img: np.ndarray, *, tile=None, stats=None, cache_key=None,
              slot=None) -> _Slot:
        """Pad (reflect) into the slot's BGR buffer, preprocess, guide luma. A picture to be
        tiled is converted whole here (``slot.done``): the network stage then passes it on."""
        h, w = img.shape[:2]
        s = self.model.stride
        hp, wp = h + (-h) % s, w + (-w) % s
        tile_size = self.tile_size_for(hp, wp, tile) if slot is None else None
        if slot is None:
            slot = self._pool.acquire((hp, wp))
        slot.img, slot.cache_key = img, cache_key
        if tile_size is not None:
            from .picture import tiling
            slot.done = tiling.convert_tiled(self, img, tile_size, stats)
            return slot
        if (h, w) == (hp, wp) and img.ndim == 3 and img.shape[2] == 3 \
                and img.flags.c_contiguous:
            bgr = img  # already BGR at a multiple of the stride: preprocess reads it in place
        else:
            bgr = slot.buf("bgr", (hp, wp, 3), np.uint8)
            src = img.reshape(h, w, -1)
            np.copyto(bgr[:h, :w], src[:, :, :3] if src.shape[2] >= 3 else src)  # gray broadcasts
            for i in range(h, hp):
                np.copyto(bgr[i, :w], bgr[_reflect_index(i, h), :w])
            for j in range(w, wp):
                np.copyto(bgr[:, j], bgr[:, _reflect_index(j, w)])
        pic = ops.preprocess(bgr, self.model.mean, self.model.std,
                             out=slot.buf("picture", (1, 3, hp, wp)))
        if self._has_gf:
            stages.luma(pic, out=slot.buf("guide", (hp, wp)))
        return slot

    def _features(self, x: np.ndarray) -> np.ndarray:
        """The stages before the AdaIN stage on x (the tensor the AdaIN stage receives)."""
        for stage in self.model.stages:
            if stage.kind == "adain":
                return x
            x = self._run_onnx(stage, x, x)
        raise AssertionError("unreachable: the model has an AdaIN stage")

    def _run_onnx(self, stage, x, picture, runners=None):
        if stage.kind != "onnx":
            raise ValueError(f"model {self.model.name!r}: stage {stage.name!r} ({stage.kind}) "
                             f"must come after the AdaIN stage")
        # The native executor owns its output until its next run: consumed right away.
        return stages.onnx(stage, (runners or self._runners)[stage.name], x, picture)

    def _network(self, slot: _Slot, stats, content=None, runners=None) -> None:
        """The model's stages on slot's picture -> slot.result (a slot buffer, so it survives
        the executors' next run). content: None (each picture's own AdaIN content statistics),
        a fixed (mean, std) pair (tiles), or a function of the picture's own pair (video).
        runners: the ONNX stages' runners (default: the single-picture plan's)."""
        picture = slot.bufs["picture"]
        x = picture
        for stage in self.model.stages:
            if stage.kind == "onnx":
                x = self._run_onnx(stage, x, picture, runners)
            elif stage.kind == "adain":
                x = stages.adain(stage, x, stats if stats is not None else self._photo_stats,
                                 content, out=None if x is picture else x)
            else:
                x = self._enhance(slot, stage, x)
        if x.ndim != 4 or x.shape[:2] != (1, 3):
            raise ValueError(f"model {self.model.name!r} returned shape {x.shape}; "
                             f"expected (1, 3, H, W) RGB")
        ychw = slot.buf("ychw", x.shape)
        if x is not ychw:
            np.copyto(ychw, x)
        slot.result = ychw

    def _enhance(self, slot: _Slot, stage, x: np.ndarray) -> np.ndarray:
        """guided_filter stage: detail guided by the input's luma, at the output's size."""
        oh, ow = x.shape[2:]
        return stages.guided_filter(stage, x, slot.bufs["guide"],
                                    out=slot.buf("ychw", (1, 3, oh, ow)))

    def _post(self, slot: _Slot) -> np.ndarray:
        """Postprocess, crop, restore the layout -> a new array the caller owns."""
        if slot.done is not None:
            return slot.done
        img, x = slot.img, slot.result
        h, w = img.shape[:2]
        hp, wp = slot.key
        sy, sx = x.shape[2] / hp, x.shape[3] / wp
        if self.model.scale is not None and (sy, sx) != (self.model.scale,) * 2:
            raise ValueError(f"model {self.model.name!r} declares scale {self.model.scale} but "
                             f"returned {x.shape[2:]} for {(hp, wp)}")
        oh, ow = round(h * sy), round(w * sx)
        if (oh, ow) == x.shape[2:] and img.ndim == 3 and img.shape[2] == 3:
            return ops.postprocess(x, self.model.mean, self.model.std)
        full = ops.postprocess(x, self.model.mean, self.model.std,
                               out=slot.buf("out8", (x.shape[2], x.shape[3], 3), np.uint8))
        return finish_layout(img, full[:oh, :ow])


def _styled(img: np.ndarray, colour, own_stats: Callable | None = None) -> np.ndarray:
    """The picture to convert: as given, or its colours moved towards a reference photo's
    (colour: its colour statistics and the strength; own_stats: applied to the picture's own
    colour statistics first, as in ``stream``)."""
    if colour is None:
        return img
    ref, strength = colour
    own = None if own_stats is None else own_stats(stages.colour_moments(img))
    return stages.colour_transfer(img, ref, strength, own=own)


def finish_layout(img: np.ndarray, out: np.ndarray) -> np.ndarray:
    """BGR result ``out`` (a view; not kept) in the layout of the input ``img`` -> a new array:
    gray by BT.601 luma, alpha resized (if scaled) and re-attached."""
    oh, ow = out.shape[:2]
    if img.ndim == 2 or img.shape[2] == 1:
        luma = out.astype(np.float32) @ stages.LUMA[::-1]  # BGR order
        gray = np.clip(np.rint(luma), 0, 255).astype(np.uint8)
        return gray if img.ndim == 2 else gray[..., None]
    if img.shape[2] == 4:
        alpha = img[:, :, 3]
        if alpha.shape != (oh, ow):
            import cv2
            alpha = cv2.resize(alpha, (ow, oh), interpolation=cv2.INTER_LINEAR)
        return np.dstack([out, alpha])
    return np.array(out)
