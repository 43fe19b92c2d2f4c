"""One picture's way through a model: prepare -> features -> network -> finish.

    uint8 gray / BGR / BGRA (white under its transparent pixels: ``visible_bgr``)
    ->  pad: margin, stride (``pad_to_stride``)  ->  preprocess
    -> the model's stages in order (onnx networks, AdaIN to photo or reference statistics,
       guided-filter detail)  ->  postprocess  ->  crop  ->  gray / alpha restored

``Forward.prepare`` (pad, preprocess, guide luma), ``Forward.network`` (the model's stages, one at
a time, under ``Forward.lock``) and ``Forward.finish`` (postprocess, crop, layout) work on a
``Slot``: the recycled buffers of one picture in flight. The Engine runs them in the caller's
thread or pipelined over three threads; tiling.py runs them on tiles (``Forward.features`` gives
it the tensor the AdaIN stage reduces to content statistics).

The padding rule is ``pad_to_stride`` (the model's ``border_margin`` mirrored on every side, then
up to the stride), for whole pictures, tiled ones and reference photos alike.
"""
from __future__ import annotations

import collections
import threading

import numpy as np

from .. import _settings, ops
from ..model.graph import channels_problem
from . import stages

# Picture sizes whose recycled buffers are kept: the current one and the previous one (a
# stream that alternates between two sizes does not reallocate).
SIZES_KEPT = 2


def reflect_index(i: int, n: int) -> int:
    """Source index of position i (negative: before the start) of a length-n axis mirrored at its
    ends without repeating the edge pixel ("dcb|abcd|cba", numpy's 'reflect', period 2(n-1)); a
    1-pixel axis repeats its only pixel."""
    if n == 1:
        return 0
    period = 2 * (n - 1)
    i %= period
    return period - i if i >= n else i


def padded_size(h: int, w: int, stride: int, margin: int = 0) -> tuple[int, int]:
    """h, w grown by ``margin`` on both sides, then rounded up to a multiple of the stride."""
    return tuple(n + 2 * margin + (-(n + 2 * margin)) % stride for n in (h, w))


def is_padded_bgr(img: np.ndarray, stride: int, margin: int = 0) -> bool:
    """img is already what ``pad_to_stride`` makes: C-contiguous BGR at multiples of the stride
    (never with a margin: that is always added)."""
    return (margin == 0 and img.ndim == 3 and img.shape[2] == 3 and img.shape[0] % stride == 0
            and img.shape[1] % stride == 0 and img.flags.c_contiguous)


def pad_to_stride(img: np.ndarray, stride: int, margin: int = 0,
                  out: np.ndarray | None = None) -> np.ndarray:
    """The one padding rule: uint8 picture img (H, W), (H, W, 1|3|4) -> BGR (Hp, Wp, 3)
    (``padded_size``) holding img at (margin, margin), every added row and column mirrored
    (``reflect_index``): ``margin`` on the top and left, ``margin`` plus the stride's remainder
    on the bottom and right. The margin (a model's ``border_margin``) keeps the network's own
    zero padding away from the picture on all four sides alike: without it the top and left
    edges sat on that padding and the bottom and right ones did not (a one-sided bright line,
    issue 22). Gray is broadcast to three channels; BGRA gives ``visible_bgr``. out: an
    optional (Hp, Wp, 3) uint8 buffer; returns ``img`` itself when it is already BGR at a multiple of the stride,
    C-contiguous and there is no margin."""
    if is_padded_bgr(img, stride, margin):
        return img
    h, w = img.shape[:2]
    hp, wp = padded_size(h, w, stride, margin)
    if out is None:
        out = np.empty((hp, wp, 3), np.uint8)
    src = img.reshape(h, w, -1)
    m = margin
    region = out[m:m + h, m:m + w]
    np.copyto(region, src[:, :, :3])  # gray (one channel) broadcasts
    if src.shape[2] == 4:
        white_under_transparent(region, src[:, :, 3])
    for j in (*range(m), *range(m + w, wp)):   # columns beside the picture, its rows only
        np.copyto(out[m:m + h, j], out[m:m + h, m + reflect_index(j - m, w)])
    for i in (*range(m), *range(m + h, hp)):   # whole rows above and below
        np.copyto(out[i], out[m + reflect_index(i - m, h)])
    return out


def output_window(h: int, w: int, stride: int, margin: int, out_h: int, out_w: int):
    """(y, x, height, width) of an h x w picture in a network output of out_h x out_w for its
    ``padded_size`` input: the margin and the stride's padding scaled to the output and cut."""
    hp, wp = padded_size(h, w, stride, margin)
    sy, sx = out_h / hp, out_w / wp
    return round(margin * sy), round(margin * sx), round(h * sy), round(w * sx)


def to_bgr(img: np.ndarray) -> np.ndarray:
    """uint8 (H, W), (H, W, 1|3|4) -> a C-contiguous BGR (H, W, 3) (img itself when it is one;
    BGRA: ``visible_bgr``)."""
    if img.ndim == 2 or img.shape[2] == 1:
        return np.repeat(img.reshape(img.shape[0], img.shape[1], 1), 3, axis=2)
    if img.shape[2] == 4:
        return visible_bgr(img)
    return np.ascontiguousarray(img[:, :, :3])


def visible_bgr(bgra: np.ndarray) -> np.ndarray:
    """The BGR of a uint8 BGRA picture with white under its fully transparent pixels, the
    background a sprite is usually shown on (and the one its quality is measured on:
    tools/fetch_eval_art.py). Files keep any colour there (black, magenta, a painter's
    leftovers), and the network sees past a pixel and takes statistics of the whole picture,
    so that colour reached the visible pixels (a magenta fringe, a colour cast). Filling with
    the nearest visible colour instead was tried: it skews those statistics (25 of 43 alpha
    drawings failed the artefact measures, against 1 with white). Partly transparent pixels
    keep their colour."""
    # a new array in C order whatever bgra's (ascontiguousarray would return a 1x1 view of the
    # caller's picture, and np.array keeps a Fortran order OpenCV cannot write into)
    bgr = bgra[:, :, :3].copy(order="C")
    white_under_transparent(bgr, bgra[:, :, 3])
    return bgr


def white_under_transparent(bgr: np.ndarray, alpha: np.ndarray) -> None:
    """In place: white in uint8 BGR ``bgr`` (a view may do) wherever ``alpha`` is 0: OpenCV's
    masked OR with 255. pad_to_stride writes a BGRA frame into its slot so, without a
    picture-sized copy. 1080p with 30% hidden: 0.70 ms on Zen 3; numpy's maximum with a broadcast
    0 / 255 mask took 12.6 ms on Zen 4 (its zero-stride channel axis runs slowly)."""
    import cv2
    # the mask by numpy: cv2.compare(alpha, 0) read a 1x1 alpha as the scalar (a 4x1 mask)
    cv2.bitwise_or(bgr, (255, 255, 255, 0), dst=bgr, mask=(alpha == 0).view(np.uint8))


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


class Slot:
    """The recycled buffers of one picture in flight, for one padded input size ``key``."""

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


class SlotPool:
    """Free slots per padded size; sizes beyond the last ``SIZES_KEPT`` are forgotten."""

    def __init__(self):
        self._free: collections.OrderedDict[tuple, list] = collections.OrderedDict()
        self._lock = threading.Lock()

    def acquire(self, key) -> Slot:
        with self._lock:
            free = self._free.get(key)
            if free:
                return free.pop()
        return Slot(key)

    def release(self, slot: Slot) -> None:
        slot.img = slot.result = slot.done = slot.cache_key = None
        with self._lock:
            self._free.setdefault(slot.key, []).append(slot)
            self._free.move_to_end(slot.key)
            while len(self._free) > SIZES_KEPT:
                self._free.popitem(last=False)


class Forward:
    """A model's stages on one picture at a time. runners: {ONNX stage name: float32 NCHW ->
    float32 NCHW} of the single-picture plan (``network`` may be given another map);
    photo_stats: the AdaIN stage's own target (``AdainStats``) or None.
    ``lock``: held around ``features`` and ``network`` by every caller (the native executors and
    their outputs are single-user); ``prepare`` and ``finish`` touch only the slot's buffers."""

    def __init__(self, model, runners: dict, photo_stats, variant=None):
        self.model, self.runners, self.photo_stats = model, runners, photo_stats
        # variant(stage, onnx.ModelProto) -> a function {input: array} -> {output: array} running
        # that graph on the stage's backend: tiled conversion runs pieces of the stages' graphs
        # with whole-picture statistics (tiling.py); None: not available, tiles run the stages'
        # own graphs
        self.variant = variant
        self.has_guide = model.stage("guided_filter") is not None
        self.lock = threading.RLock()

    def prepare(self, img: np.ndarray, slot: Slot, margin: int | None = None) -> Slot:
        """Pad (``pad_to_stride``) into the slot's BGR buffer, preprocess, guide luma. margin:
        None, the model's ``border_margin``; 0 for a tile cut from a picture padded already."""
        s = self.model.stride
        m = self.model.border_margin if margin is None else margin
        hp, wp = padded_size(*img.shape[:2], s, m)
        slot.img = img
        # already BGR at a multiple of the stride (no margin): preprocess reads it in place
        bgr = img if is_padded_bgr(img, s, m) else pad_to_stride(
            img, s, m, out=slot.buf("bgr", (hp, wp, 3), np.uint8))
        pic = ops.preprocess(bgr, self.model.mean, self.model.std,
                             out=slot.buf("picture", (1, 3, hp, wp)))
        if self.has_guide:
            stages.luma(pic, out=slot.buf("guide", (hp, wp)))
        return slot

    def features(self, x: np.ndarray) -> np.ndarray:
        """The stages before the AdaIN stage on x (the tensor the AdaIN stage receives)."""
        for stage in self.model.stages:
            if stage.kind == "adain":
                return x
            x = self._onnx(stage, x, x, self.runners)
        raise AssertionError("unreachable: the model has an AdaIN stage")

    def _onnx(self, stage, x, picture, runners):
        if stage.kind != "onnx":
            raise ValueError(f"model {self.model.name!r}: stage {stage.name!r} ({stage.kind}) "
                             f"must come after the AdaIN stage")
        # The native executor owns its output until its next run: consumed right away.
        return stages.onnx(stage, runners[stage.name], x, picture)

    def run_stages(self, slot: Slot, stats, content=None, runners=None, stop=None, *,
                   start: int = 0, x: np.ndarray | None = None) -> np.ndarray:
        """The model's stages [``start``, ``stop``) (default: all) on slot's picture, or on
        ``x``, the input of stage ``start`` (read only) -> the tensor they give (owned by the
        last runner or the slot: consume it before the next run).
        stats: the AdaIN target (a reference photo's pair; None: the model's own). content:
        None (each picture's own AdaIN content statistics), a fixed (mean, std) pair (tiles), or
        a function of the picture's own pair (video). runners: the ONNX stages' runners
        (default: the single-picture plan's)."""
        picture = slot.bufs["picture"]
        runners = runners or self.runners
        given = picture if x is None else x
        x = given
        for stage in self.model.stages[start:stop]:
            if stage.kind == "onnx":
                x = self._onnx(stage, x, picture, runners)
            elif stage.kind == "adain":
                x = stages.adain(stage, x, stats if stats is not None else self.photo_stats,
                                 content, out=None if x is given else x)
            else:  # guided_filter: detail guided by the input's luma, at the output's size
                oh, ow = x.shape[2:]
                x = stages.guided_filter(stage, x, slot.bufs["guide"],
                                         out=slot.buf("ychw", (1, 3, oh, ow)))
        return x

    def network(self, slot: Slot, stats, content=None, runners=None) -> None:
        """All the model's stages (``run_stages``) on slot's picture -> slot.result (a slot
        buffer, so it survives the executors' next run)."""
        x = self.run_stages(slot, stats, content, runners)
        if x.ndim != 4 or x.shape[0] != 1:
            raise ValueError(f"model {self.model.name!r} returned shape {x.shape}; "
                             f"expected (1, 3, H, W) RGB")
        problem = channels_problem(None, x.shape[1])   # where the model did not state them
        if problem:
            raise ValueError(f"model {self.model.name!r}: its network {problem}")
        ychw = slot.buf("ychw", x.shape)
        if x is not ychw:
            np.copyto(ychw, x)
        slot.result = ychw

    def finish(self, slot: Slot) -> np.ndarray:
        """Postprocess, crop, restore the layout -> a new array the caller owns."""
        if slot.done is not None:
            return slot.done
        img, x = slot.img, slot.result
        h, w = img.shape[:2]
        s, m = self.model.stride, self.model.border_margin
        hp, wp = padded_size(h, w, s, m)
        if self.model.scale is not None and x.shape[2:] != (hp * self.model.scale,
                                                            wp * self.model.scale):
            raise ValueError(f"model {self.model.name!r} declares scale {self.model.scale} but "
                             f"returned {x.shape[2:]} for {(hp, wp)}")
        oy, ox, oh, ow = output_window(h, w, s, m, *x.shape[2:])
        if (oh, ow) == x.shape[2:] and img.ndim == 3 and img.shape[2] == 3:
            return to_pixels(x, self.model)
        full = to_pixels(x, self.model, slot.buf("out8", (x.shape[2], x.shape[3], 3), np.uint8))
        return finish_layout(img, full[oy:oy + oh, ox:ox + ow])


def to_pixels(x: np.ndarray, model, out=None) -> np.ndarray:
    """The network's result (1, 3, H, W) as BGR uint8 (``ops.postprocess`` with the model's
    mean and std); ValueError when it holds NaN or infinite values, which would be written as
    black or white pixels, a silently wrong picture (counted by the same pass)."""
    try:
        return ops.postprocess(x, model.mean, model.std, out=out, finite=True)
    except ops.NonFiniteError as exc:
        raise ValueError(f"model {model.name!r} returned {exc}; no picture written") from None


def as_picture(img, name: str = "img") -> np.ndarray:
    """``img`` checked: a non-empty uint8 numpy array (H, W), (H, W, 1), (H, W, 3) BGR or
    (H, W, 4) BGRA of at most A2R_MAX_PIXELS pixels (checked before any copy: a strided view
    may be huge). TypeError or ValueError naming ``name`` otherwise."""
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
    if img.shape[0] * img.shape[1] > limit:
        raise ValueError(f"{name} is {img.shape[1]}x{img.shape[0]} = "
                         f"{img.shape[0] * img.shape[1]} pixels, more than the limit "
                         f"A2R_MAX_PIXELS={limit}")
    return img


def bytes_per_pixel(forward: Forward, executors, onnxruntime_stages: int) -> float:
    """Estimated bytes one pixel of the network's (padded) input costs in ``forward``'s network:
    the native ``executors``' arenas and outputs measured on a 64 x 64 probe, ~256 B per pixel
    for each onnxruntime stage (its arena is not visible), plus the forward's own buffers."""
    probe = 64  # small enough to cost nothing, large enough to amortise fixed buffers
    slot = Slot(None)
    with forward.lock:
        forward.prepare(np.zeros((probe, probe, 3), np.uint8), slot)
        forward.network(slot, None)
    side = slot.bufs["picture"].shape[-1]   # the network's input: margin and stride padding in
    scale = slot.result.shape[-1] / side
    total = max((ex.arena_bytes() for ex in executors), default=0)  # one shared arena
    total += sum(ex.output_bytes() for ex in executors)
    total += 256 * side * side * onnxruntime_stages
    # ours: bgr 3 + picture 12 + guide/tmp 8; per output pixel ychw 12 (the guided filter
    # writes into it), the filter's working sums (at most 24), out8 3
    return total / (side * side) + 23 + scale * scale * (12 + 24 + 3)
