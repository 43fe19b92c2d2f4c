"""What each kind of model stage computes, written once (package format in model/package.py,
docs/architecture.md). The Engine runs these on its recycled buffers; the bench and the
scheduler's calibration time them stage by stage on each backend."""
from __future__ import annotations

import collections
import numbers

import numpy as np

from .. import ops
from ..model.package import AdainStats

# ITU-R BT.601 luma weights (R, G, B), the ones OpenCV's BGR2GRAY uses.
LUMA = np.array([0.299, 0.587, 0.114], np.float32)


def blend(img: np.ndarray, out: np.ndarray, strength: float) -> np.ndarray:
    """The strength setting: round(img + strength * (out - img)), per channel, for a result
    ``out`` of the input ``img``'s layout and size (uint8; alpha is the input's in both, so it
    stays). strength 1: out itself, 0: a copy of the input.

    >>> blend(np.zeros((1, 1, 3), np.uint8), np.full((1, 1, 3), 200, np.uint8), 0.25)[0, 0]
    array([50, 50, 50], dtype=uint8)
    """
    if strength == 1.0:
        return out
    f = img.astype(np.float32)
    d = out.astype(np.float32)   # one float scratch besides f, updated in place
    d -= f
    d *= np.float32(strength)
    d += f
    np.rint(d, out=d)
    np.clip(d, 0, 255, out=d)
    return d.astype(np.uint8)


def check_strength(model, strength) -> float:
    """``strength`` (None: the model's manifest default) checked: a number in [0, 1], and 1 for
    a model that changes the size (the input cannot be blended with its output)."""
    strength = model.strength if strength is None else strength
    if isinstance(strength, bool) or not isinstance(strength, numbers.Real) \
            or not 0 <= strength <= 1:
        raise ValueError(f"strength must be a number in [0, 1], got {strength!r}")
    if strength != 1 and model.scale != 1:
        raise ValueError(f"strength {strength:g} blends the input with the output: model "
                         f"{model.name!r} changes the size (scale {model.scale})")
    return float(strength)


def blend_each(model, frames, strength, run):
    """run(frames)'s results, each blended with its own input frame (``blend``); a generator,
    so ``check_strength(model, strength)`` runs at the first result."""
    strength = check_strength(model, strength)
    if strength == 1.0:
        yield from run(frames)
        return
    pending = collections.deque()

    def kept():
        for frame in frames:
            pending.append(frame)
            yield frame

    for out in run(kept()):
        yield blend(pending.popleft(), out, strength)


def luma(picture: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The guide of the guided-filter stage: luma of a (1, 3, H, W) RGB picture, (H, W)."""
    _, _, h, w = picture.shape
    if out is None:
        out = np.empty((h, w), np.float32)
    # einsum writes straight into out: 0.25 ms at 512x512, where np.dot with out= took 7.9 ms
    # (not BLAS's path), both without a temporary
    np.einsum("c,chw->hw", LUMA, picture[0], out=out)
    return out


def onnx(stage, run, x: np.ndarray, picture: np.ndarray) -> np.ndarray:
    """A network stage: run(x), plus the normalised input picture when it predicts a residual
    (``add_input``). The result may be owned by ``run`` (the native executor's output)."""
    y = run(x)
    if stage.params.get("add_input"):
        if y.shape != picture.shape:
            raise ValueError(f"stage {stage.name!r}: add_input needs an output of the input "
                             f"picture's shape {picture.shape}, got {y.shape}")
        y += picture
    return y


def adain(stage, x: np.ndarray, target, content=None, out=None) -> np.ndarray:
    """AdaIN stage: x's features renormalised to target statistics. target: a (mean, std) pair
    (a reference photo's), or the model's ``AdainStats`` (its fixed statistics, or those its
    content map predicts from the content statistics). content: None (x's own statistics), a
    (mean, std) pair (shared by tiles), or a function taking x's own pair, float32 (1, C) each,
    and returning such a pair (smoothed over video frames; ``checked_stats``)."""
    eps = stage.params["eps"]
    if callable(content):
        own = ops.channel_stats(x, eps)
        content = checked_stats(content(own), own, "content_stats")
    if isinstance(target, AdainStats):
        if target.weight is not None and content is None:
            content = ops.channel_stats(x, eps)
        target = target.target(content)
    mean, std = target
    if mean.shape[-1] != x.shape[1]:
        raise ValueError(f"stage {stage.name!r}: {mean.shape[-1]} statistics for {x.shape[1]} "
                         f"feature channels")
    return ops.adain(x, mean, std, eps=eps, content_stats=content, out=out)


def checked_stats(result, given, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``result`` of a caller's statistics function (``Engine.stream``'s ``name``, content_stats
    or colour_stats) called with the pair ``given``: it must be a (mean, std) pair of
    arrays of given's shapes, finite, std > 0 -> the pair as arrays of given's dtypes.
    TypeError or ValueError naming ``name`` and the shapes otherwise (a wrong channel count
    failed inside a matrix product, and None passed as "no statistics")."""
    want = f"a (mean, std) pair of arrays of shapes {given[0].shape} and {given[1].shape}"
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise TypeError(f"{name} must return {want}, like the pair it is given; got "
                        f"{type(result).__name__}")
    pair = []
    for part, v, g in zip(("mean", "std"), result, given):
        try:
            a = np.asarray(v, g.dtype)
        except (TypeError, ValueError):
            raise TypeError(f"{name} must return {want}; its {part} is not numbers: "
                            f"{type(v).__name__}") from None
        if a.shape != g.shape:
            raise ValueError(f"{name} must return {want}; its {part} has shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} returned a {part} that is not finite")
        if part == "std" and np.any(a <= 0):
            raise ValueError(f"{name} returned a std <= 0")
        pair.append(a)
    return pair[0], pair[1]


def guided_filter(stage, x: np.ndarray, guide: np.ndarray, out=None) -> np.ndarray:
    """Detail stage on x (1, C, H, W): per channel, base = guided filter of the channel guided by
    ``guide`` (H, W), then base + detail * (x - base), blended inside the filter's last pass.
    out: optional (1, C, H, W) result buffer (apart from x, nothing is allocated; x itself, each
    channel goes through an (H, W) scratch). Channel by channel on the planar tensor: the same
    result as one colour-source filter on an HWC copy, without the two transposing copies."""
    p = stage.params
    if p["detail"] == 1.0:  # base + 1 * (x - base) = x: nothing to compute
        return x
    _, c, h, w = x.shape
    if guide.shape != (h, w):
        import cv2
        guide = cv2.resize(guide, (w, h), interpolation=cv2.INTER_LINEAR)
    if out is None:
        out = np.empty((1, c, h, w), np.float32)
    # the kernel's output may not overlap its source
    scratch = np.empty((h, w), np.float32) if np.may_share_memory(out, x) else None
    for k in range(c):
        dst = out[0, k] if scratch is None else scratch
        ops.guided_filter(guide, x[0, k], p["radius"], p["eps"], out=dst, detail=p["detail"])
        if scratch is not None:
            np.copyto(out[0, k], scratch)
    return out


# A reference photo (style=) moves the input picture's colour statistics this share of the way
# to its own before the network runs: the network predicts a residual to its input, so the
# AdaIN statistics alone barely move the colours (docs/a2r_lite_quality.md, reference photo).
STYLE_COLOUR = 0.5


def visible_mask(img: np.ndarray) -> np.ndarray | None:
    """uint8 (H, W) mask of a BGRA picture's pixels that are not fully transparent (files keep
    any colour under those), for cv2's statistics; None: count every pixel (no alpha, or
    nothing visible)."""
    if img.ndim != 3 or img.shape[2] != 4:
        return None
    seen = (img[:, :, 3] > 0).view(np.uint8)
    return seen if seen.any() else None


def colour_stats(bgr: np.ndarray, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A reference photo's colour statistics: mean and sqrt(var + 1) over its pixels of B, G, R
    and its gray picture (OpenCV BGR2GRAY, for gray inputs), float64 (4,) each.
    bgr: uint8 (H, W, 3); mask: ``visible_mask`` of the photo (None: every pixel)."""
    import cv2
    gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    moments = [cv2.meanStdDev(v, mask=mask) for v in (bgr, gray)]
    mean = np.concatenate([m.ravel() for m, _ in moments])
    std = np.concatenate([sd.ravel() for _, sd in moments])
    return mean, np.sqrt(std * std + 1.0)


def colour_moments(img: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A picture's own colour statistics, as colour_transfer measures them: mean and
    sqrt(var + 1) of each colour channel (1 for gray, B, G, R otherwise; alpha is not a colour),
    float64; of a BGRA picture over its pixels that are not fully transparent (files keep any
    colour under those). img: uint8 (H, W), (H, W, 1), (H, W, 3) BGR or (H, W, 4) BGRA."""
    import cv2
    planes = img.reshape(img.shape[0], img.shape[1], -1)
    nc_colour = 1 if planes.shape[2] == 1 else 3
    m, sd = (v.ravel()[:nc_colour] for v in cv2.meanStdDev(planes, mask=visible_mask(img)))
    return m, np.sqrt(sd * sd + 1.0)


def colour_transfer(img: np.ndarray, ref, strength: float = STYLE_COLOUR,
                    own=None) -> np.ndarray:
    """img uint8 (H, W), (H, W, 1), (H, W, 3) BGR or (H, W, 4) BGRA -> a new picture, same
    layout: per colour channel, (v - m) / s * s' + m' rounded and clipped, with the picture's
    own statistics m, s (colour_moments, or ``own`` when given: video passes them smoothed over
    time), m' = m + strength * (ref mean - m) and s' = s * (ref std / s) ** strength; ref =
    colour_stats of the reference (a gray picture takes its gray statistics). Alpha is kept.
    One 256-entry table per channel (cv2.LUT)."""
    import cv2
    planes = img.reshape(img.shape[0], img.shape[1], -1)
    nc = planes.shape[2]
    rm, rs = (ref[0][3:], ref[1][3:]) if nc == 1 else (ref[0][:3], ref[1][:3])
    m, s = colour_moments(img) if own is None else own
    gain = (rs / s) ** strength
    offset = m + strength * (rm - m) - m * gain            # v -> v * gain + offset
    v = np.arange(256, dtype=np.float64)[:, None]
    table = np.clip(np.rint(v * gain + offset), 0, 255).astype(np.uint8)
    if nc == 4:                                            # alpha: the identity
        table = np.concatenate([table, v.astype(np.uint8)], axis=1)
    out = cv2.LUT(planes, table.reshape(256, 1, nc) if nc > 1 else table.reshape(256))
    return out.reshape(img.shape)
