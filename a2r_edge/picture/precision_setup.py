"""The precision of a model's native stages, chosen at construction (``Engine(precision=...)``).

Each native stage's inputs are recorded on the calibration pictures at fp32, then
``model.precision.plan_stages`` picks per stage the fastest precision that keeps the quality
guard; the choices are kept in the cache folder for this model, machine and calibration set.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from ..model import precision as prec
from .cache import picture_key
from .forward import as_picture

log = logging.getLogger("a2r_edge")


def choose_precisions(precision, *, strict: bool, executors: dict, stage_names: list[str],
                      runners: dict, convert: Callable, calibration,
                      model_digest: Callable[[], str], picture_domain=None) -> dict:
    """{stage: entry of model.precision.plan_stages} for ``precision`` ({} for fp32), a
    precision already resolved for this CPU (model.precision.resolve, as Engine does first).

    executors: {stage: native executor}; stage_names: the model's stages in order; runners: the
    forward's {stage: runner} (wrapped to record inputs while calibrating, restored after);
    convert: picture -> converted picture through those runners (nothing cached);
    calibration: a non-empty list of uint8 BGR pictures or None
    (precision.calibration_pictures, scaled down for a model that converts them slowly:
    precision.scaled_within);
    model_digest: () -> the model's digest naming the stored choices (its stages and what they
    are fed: cache.model_key), with the calibration pictures' own (asked only when
    calibrating); picture_domain:
    (lo, hi) of the normalised picture the first stage reads, which its int8 ranges cover
    whatever the calibration pictures span (model.precision.within_domain). bf16 or int8 where
    no stage runs natively falls back to fp32 with one warning (strict: ValueError); "auto"
    then has nothing to choose and returns {}."""
    if calibration is not None and (not isinstance(calibration, (list, tuple))
                                    or not calibration):
        raise TypeError(f"calibration must be a non-empty list of pictures or None, got "
                        f"{type(calibration).__name__}"
                        f"{' (empty)' if isinstance(calibration, (list, tuple)) else ''}")
    if precision == "auto" and not executors:   # a GPU plan, or backend="onnxruntime"
        return {}
    if precision != "fp32" and not executors:
        msg = f"precision {precision!r} needs the native backend; no stage runs on it"
        if strict:
            raise ValueError(msg + " (strict=True refuses the fp32 fallback)")
        log.warning("%s: running fp32", msg)
        precision = "fp32"
    if precision == "fp32":
        return {}
    pictures = [as_picture(p, "calibration picture") for p in
                (calibration if calibration is not None else prec.calibration_pictures())]
    order = [name for name in stage_names if name in executors]
    inputs: dict[str, list] = {name: [] for name in order}
    saved = dict(runners)
    try:
        for name in order:  # record each stage's inputs on the pictures at fp32
            runners[name] = (lambda x, name=name, run=saved[name]:
                             inputs[name].append(x.copy()) or run(x))
        t0 = time.perf_counter()
        convert(pictures[0])
        seconds = time.perf_counter() - t0
        if calibration is None and seconds > prec.CALIBRATION_CONVERT_S:   # a heavy model
            pictures = prec.scaled_within(pictures, seconds)
            for name in order:
                inputs[name].clear()
            convert(pictures[0])
        for p in pictures[1:]:
            convert(p)
        runners.update(saved)
        stored_at = prec.store_path(_choice_key(model_digest(),
                                                None if calibration is None else pictures))
        judged = prec.with_mirrors(pictures, 1)   # (H, W[, C]): mirrored left to right
        chosen = prec.plan_stages({n: executors[n] for n in order}, inputs,
                                  lambda: [convert(p) for p in judged], precision,
                                  prec.load(stored_at, precision),
                                  input_domains={stage_names[0]: picture_domain})
        prec.store(stored_at, precision, chosen)
    finally:
        runners.update(saved)
    return chosen


def _choice_key(model_digest: str, pictures: list | None) -> str:
    """The name of the stored choices: the model's digest, and for the user's own calibration
    ``pictures`` (None: the default ones) their digest too (the ranges and choices depend on
    them; the default pictures' choices keep the model's name)."""
    key = model_digest.encode()
    for p in pictures or ():
        key = picture_key(key, p, None, None)
    return model_digest if pictures is None else key.hex()
