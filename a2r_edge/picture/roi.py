"""Region of interest: find the character's face, convert that region, paste it back feathered.

``anime_face_detector()`` wraps the optional ``animeface`` package (``pip install
"a2r_edge[face]"``): a detector is any function BGR uint8 (H, W, 3) -> box (x0, y0, x1, y1) or
None. No detection means the whole picture is converted.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

Box = tuple[int, int, int, int]
Detector = Callable[[np.ndarray], "Box | None"]


def anime_face_detector(min_likelihood: float = 0.5, margin: float = 0.6) -> Detector:
    """The largest anime face found by ``animeface`` with at least ``min_likelihood``, its box
    grown by ``margin`` of its size on every side (hair, chin and neck belong to the head)."""
    try:
        import animeface
        from PIL import Image
    except ImportError:
        raise ValueError("ROI detection 'face' needs the optional animeface package: "
                         "pip install \"a2r_edge[face]\"") from None

    def detect(bgr: np.ndarray) -> Box | None:
        faces = [f for f in animeface.detect(Image.fromarray(bgr[:, :, ::-1]))
                 if f.likelihood >= min_likelihood]
        if not faces:
            return None
        pos = max(faces, key=lambda f: f.face.pos.width * f.face.pos.height).face.pos
        return grow((pos.x, pos.y, pos.x + pos.width, pos.y + pos.height), bgr.shape, margin)

    return detect


def grow(box, shape, margin: float) -> Box:
    """``box`` grown by ``margin`` x its size on each side, clipped to a picture of ``shape``."""
    h, w = shape[:2]
    x0, y0, x1, y1 = box
    dx, dy = (x1 - x0) * margin, (y1 - y0) * margin
    x0, y0 = max(0, int(x0 - dx)), max(0, int(y0 - dy))
    return x0, y0, max(x0 + 1, min(w, int(np.ceil(x1 + dx)))), \
        max(y0 + 1, min(h, int(np.ceil(y1 + dy))))


def clip(box, shape) -> Box | None:
    """A detector's ``box`` clipped to a picture of ``shape``: whole pixels, inside the
    picture; None when nothing of it is left (then the whole picture is converted). ValueError
    for what is not 4 finite numbers."""
    try:
        x0, y0, x1, y1 = (float(v) for v in box)
    except (TypeError, ValueError):
        raise ValueError(f"an ROI box must be 4 numbers (x0, y0, x1, y1), got {box!r}") from None
    if not all(np.isfinite(v) for v in (x0, y0, x1, y1)):
        raise ValueError(f"an ROI box must be 4 finite numbers, got {box!r}")
    h, w = shape[:2]
    x0, y0 = int(min(max(np.floor(x0), 0), w)), int(min(max(np.floor(y0), 0), h))
    x1, y1 = int(min(max(np.ceil(x1), 0), w)), int(min(max(np.ceil(y1), 0), h))
    return (x0, y0, x1, y1) if x1 > x0 and y1 > y0 else None


def resolve(roi) -> Detector | None:
    """None, "face" (animeface) or a detector function."""
    if roi is None or callable(roi):
        return roi
    if roi == "face":
        return anime_face_detector()
    raise ValueError(f"roi must be None, 'face' or a function picture -> box, got {roi!r}")


def paste(frame: np.ndarray, region: np.ndarray, box, feather: int = 8) -> np.ndarray:
    """``region`` (converted crop of ``box``) pasted into a copy of ``frame`` with a linear
    ``feather``-pixel edge (8: wide enough to hide the seam, narrow next to a face) on each side
    of the box inside the picture; a side on the picture's border has no seam to hide and is
    pasted as converted (a box of the whole picture gives the region itself)."""
    import cv2
    x0, y0, x1, y1 = box
    h, w = frame.shape[:2]
    if region.shape[:2] != (y1 - y0, x1 - x0):
        region = cv2.resize(region, (x1 - x0, y1 - y0), interpolation=cv2.INTER_AREA)
        region = region.reshape(region.shape[:2] + frame.shape[2:])

    def ramp(n, start: bool, end: bool):   # start, end: that side is inside the picture
        i = np.arange(n)
        up = (i + 1) / feather if start else np.ones(n)
        down = (n - i) / feather if end else np.ones(n)
        return np.minimum(np.minimum(up, down), 1.0).astype(np.float32)

    m = ramp(y1 - y0, y0 > 0, y1 < h)[:, None] * ramp(x1 - x0, x0 > 0, x1 < w)[None, :]
    if frame.ndim == 3:
        m = m[..., None]
    out = frame.copy()
    roi = out[y0:y1, x0:x1].astype(np.float32)
    out[y0:y1, x0:x1] = np.rint(roi + m * (region.astype(np.float32) - roi)).astype(np.uint8)
    return out


def each_region(frames, detector: Detector, run, check: Callable, to_bgr: Callable):
    """run(crops) over the regions ``detector`` finds in ``frames`` (each checked by
    ``check(frame, name)`` first; ``to_bgr`` gives the detector its BGR view), each result
    pasted back into its frame; a frame without a region is converted whole."""
    import collections
    pending = collections.deque()

    def crops():
        for i, frame in enumerate(frames):
            frame = check(frame, f"frame {i}")
            box = detector(to_bgr(frame))
            box = None if box is None else clip(box, frame.shape)
            pending.append((frame, box))
            yield frame if box is None else frame[box[1]:box[3], box[0]:box[2]]

    for out in run(crops()):
        frame, box = pending.popleft()
        yield out if box is None else paste(frame, out, box)
