"""Convolution precision of a native plan: the choices, what this CPU runs, the int8 calibration
and the "auto" choice under a quality guard.

Precisions (ops.PRECISIONS): "fp32"; "bf16" (inputs rounded to bf16, fp32 sums); "int8"
(per-output-channel weight scales, activations over calibrated ranges, int32 sums). Only the
convolutions change; every other op (norms, AdaIN statistics, resize) stays fp32. "auto" takes,
per stage, the fastest precision whose output passes the quality guard against fp32 on the
calibration pictures; a stage that fails the guard at a precision is never run at it.

>>> check("bf16")
'bf16'
>>> check("fp16")                                   # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
ValueError: precision must be one of ('fp32', 'bf16', 'int8', 'auto'), got 'fp16'
"""
from __future__ import annotations

import logging
import time
import warnings

import numpy as np

from .. import ops
from ..runtime import cpu

CHOICES = ops.PRECISIONS + ("auto",)
# The lowest PSNR (dB) against the fp32 output of the same model that a precision must reach on
# the calibration pictures (peak: the fp32 output's value range) to be chosen by "auto".
GUARD_PSNR_DB = {"bf16": 45.0, "int8": 40.0}
_log = logging.getLogger("a2r_edge")


def check(precision) -> str:
    """precision itself, or ValueError naming the choices."""
    if not isinstance(precision, str) or precision not in CHOICES:
        raise ValueError(f"precision must be one of {CHOICES}, got {precision!r}")
    return precision


def runnable() -> tuple[str, ...]:
    """The precisions the native CPU kernels run at the active ISA level: bf16 and int8 need
    AVX2 or better (the plain C variants exist for correctness but are slower than fp32)."""
    return ops.PRECISIONS if cpu.isa() != "baseline" else ("fp32",)


def has_dot_units() -> bool:
    """The CPU has AVX512_BF16 and AVX512_VNNI and the active level uses them."""
    from .. import _kernels
    return bool(_kernels.conv2d_lowp_has_dot()) and cpu.isa() == "avx512"


def resolve(precision: str, strict: bool = False) -> str:
    """The precision to run: ``precision`` when this CPU runs it ("auto" as is), else fp32 with
    one warning; strict=True raises ValueError instead."""
    check(precision)
    if precision == "auto" or precision in runnable():
        return precision
    msg = (f"precision {precision!r} needs AVX2 or better; the CPU kernels run at "
           f"{cpu.isa()!r}")
    if strict:
        raise ValueError(msg + " (strict=True refuses the fp32 fallback)")
    warnings.warn(msg + ": running fp32", RuntimeWarning, stacklevel=3)
    return "fp32"


def psnr(got: np.ndarray, want: np.ndarray) -> float:
    """PSNR of got against want in dB, the peak being want's value range (inf when equal)."""
    want = want.astype(np.float64)
    mse = float(np.mean((got.astype(np.float64) - want) ** 2))
    peak = float(want.max() - want.min()) or 1.0
    return float("inf") if mse == 0 else 10 * np.log10(peak * peak / mse)


def calibrate_ranges(executor, inputs) -> dict[str, tuple[float, float]]:
    """{Conv node: (lo, hi)} of the activations each convolution of ``executor`` sees on
    ``inputs`` (float32 arrays of the model's one input) at fp32: the int8 activation ranges."""
    ranges: dict[str, tuple[float, float]] = {}
    with executor.probing(ranges):
        for x in inputs:
            executor.run(x)
    return ranges


def _median_ms(run, x, rounds: int = 3) -> float:
    run(x)  # plan and packing outside the timing
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        run(x)
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times))


def choose(executor, inputs, output_of=None, candidates=("int8", "bf16")) -> dict:
    """The "auto" choice for one executor (one stage): its run time at fp32 and at each
    candidate on inputs[0], and the guard's PSNR on every input; the fastest precision that
    passes wins, fp32 when none does. output_of(precision) -> list of arrays judged against
    fp32 (default: the executor's own outputs on ``inputs``). Leaves the executor at the choice.

    Returns {"precision", "ms": {p: ms}, "psnr": {p: dB}, "reason", "act_ranges"}."""
    inputs = list(inputs)
    ranges = calibrate_ranges(executor, inputs)
    if output_of is None:
        def output_of(p):
            executor.set_precision(p, ranges)
            return [executor.run(x).copy() for x in inputs]
    executor.set_precision("fp32")
    ms = {"fp32": _median_ms(executor.run, inputs[0])}
    want = output_of("fp32")
    scores: dict[str, float] = {}
    for p in candidates:
        if p not in runnable():
            continue
        executor.set_precision(p, ranges)
        ms[p] = _median_ms(executor.run, inputs[0])
        got = output_of(p)
        scores[p] = min(psnr(g, w) for g, w in zip(got, want))
    passing = [p for p in scores if scores[p] >= GUARD_PSNR_DB[p]]
    best = min(passing + ["fp32"], key=lambda p: ms[p])
    failed = [f"{p} {scores[p]:.1f} dB < {GUARD_PSNR_DB[p]:.0f}" for p in scores
              if p not in passing]
    speeds = ", ".join(f"{p} {ms[p]:.1f} ms" for p in ms)
    reason = (f"fastest passing the guard ({speeds}"
              + (f"; failed: {', '.join(failed)}" if failed else "") + ")")
    executor.set_precision(best, ranges)
    _log.info("precision %s: %s", best, reason)
    return {"precision": best, "ms": ms, "psnr": scores, "reason": reason,
            "act_ranges": {k: list(v) for k, v in ranges.items()}}
