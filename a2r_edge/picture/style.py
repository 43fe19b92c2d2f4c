"""A reference photo (style=): its AdaIN statistics replace the model's own target, and the
picture's colour mean and std move a share of the way to the photo's first (stages.py:
``colour_transfer``; the network predicts a residual to its input, so the AdaIN statistics
alone barely move the colours)."""
from __future__ import annotations

import numbers
from typing import Callable

import numpy as np

from .. import ops
from . import stages
from .forward import pad_to_stride, to_bgr


def check_strength(strength) -> float:
    """style_colour: a number in [0, 1]; None: ``stages.STYLE_COLOUR`` (half-way)."""
    strength = stages.STYLE_COLOUR if strength is None else strength
    if isinstance(strength, bool) or not isinstance(strength, numbers.Real) \
            or not 0 <= strength <= 1:
        raise ValueError(f"style_colour must be a number in [0, 1], got {strength!r}")
    return float(strength)


def feature_stats(forward, bgr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """AdaIN statistics (mean, std) per feature channel of a BGR picture: the features the
    stages before the AdaIN stage make of it, padded as a picture to convert (``forward``: a
    ``Forward``)."""
    model = forward.model
    if model.stage("adain") is None:
        raise ValueError(f"model {model.name!r} has no AdaIN stage: style= does not apply")
    with forward.lock:
        x = forward.features(ops.preprocess(pad_to_stride(bgr, model.stride, model.border_margin),
                                            model.mean, model.std))
        return ops.channel_stats(x, model.stage("adain").params["eps"])


def reference(forward, photo: np.ndarray | None, strength):
    """(AdaIN statistics, (colour statistics, strength)) of a reference photo (an already
    checked uint8 picture) and the share of the way the colours move to it (None: the default);
    (None, None) without a photo. A share without a photo is refused (ValueError), not
    ignored."""
    if photo is None:
        if strength is not None:
            raise ValueError(f"style_colour={strength!r} needs style= (a reference photo)")
        return None, None
    strength = check_strength(strength)
    bgr = to_bgr(photo)
    return (feature_stats(forward, bgr),
            (stages.colour_stats(bgr, stages.visible_mask(photo)), strength))


def styled(img: np.ndarray, colour, own_stats: Callable | None = None) -> np.ndarray:
    """The picture to convert: as given, or its colours moved towards a reference photo's
    (colour: its colour statistics and the strength; own_stats: a function taking the
    picture's own colour statistics, a (mean, std) pair of float64 (C,) arrays
    (``stages.colour_moments``), and returning such a pair (``stages.checked_stats``), as in
    ``Engine.stream``)."""
    if colour is None:
        return img
    ref, strength = colour
    own = None
    if own_stats is not None:
        own = stages.colour_moments(img)
        own = stages.checked_stats(own_stats(own), own, "colour_stats")
    return stages.colour_transfer(img, ref, strength, own=own)
