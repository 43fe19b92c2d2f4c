"""Convolution precision of a native plan: the choices, what this CPU runs, the int8 calibration
and the "auto" choice under a quality guard.

Precisions (ops.PRECISIONS): "fp32"; "bf16" (inputs rounded to bf16, fp32 sums); "int8"
(per-output-channel weight scales, activations over calibrated ranges, int32 sums). Only the
convolutions change: Conv, ConvTranspose in its 2-D forms and MatMul/Gemm by a constant weight
large enough to gain (ops/matmul.py), each run on ops.Conv2d; every other op (norms, AdaIN
statistics, resize, a generic ConvTranspose, small products) stays fp32, and plan.describe()
tags each convolution-like step with what it runs at. A stage at
bf16 or int8 is a mixed plan where it must be: the convolutions whose rounding costs the most
(scored one at a time on the calibration pictures and their mirror images) stay at fp32 until
the stage's output keeps the guard plus a margin (fallback_nodes; plan.describe() counts them).
"auto" takes, per stage, the fastest precision whose output passes the quality guard against
fp32 on those pictures; a stage that fails the guard at a precision (every convolution falling
back) is never run at it. Within a reduced-precision stage, "auto" also keeps at fp32 the
convolutions that run faster there (faster_at_fp32: on an AVX2 CPU without VNNI, int8 has no
more multiplies per cycle than fp32, whose 3x3 convolutions have Winograd's fewer).

>>> check("bf16")
'bf16'
>>> check("fp16")                                   # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
ValueError: precision must be one of ('fp32', 'bf16', 'int8', 'auto'), got 'fp16'
"""
from __future__ import annotations

import json
import logging
import os
import time
import warnings

import numpy as np

from .. import ops
from ..runtime import cpu

CHOICES = ops.PRECISIONS + ("auto",)
# The lowest PSNR (dB) against the fp32 output of the same model that a precision must reach on
# the calibration pictures (peak: the fp32 output's value range) to be chosen by "auto".
GUARD_PSNR_DB = {"bf16": 45.0, "int8": 40.0}
# How far above the guard a bf16/int8 stage's output stays on the pictures it is judged on
# (with_mirrors; the per-layer fallback makes up any shortfall), for pictures it never saw: on the
# generator families of the tests (judged on another crop) 0 dB leaves 3 of 16 plans below the
# guard there, 1.5 dB none, by 0.5 dB at least; 3 dB by 1.2 dB at least.
FALLBACK_MARGIN_DB = 3.0
_log = logging.getLogger("a2r_edge")


def check(precision) -> str:
    """precision itself, or ValueError naming the choices."""
    if not isinstance(precision, str) or precision not in CHOICES:
        raise ValueError(f"precision must be one of {CHOICES}, got {precision!r}")
    return precision


def runnable() -> tuple[str, ...]:
    """The precisions the native CPU kernels run at the active ISA level: bf16 and int8 need
    a level above baseline (AVX2 or better; neon_dot on aarch64): the plain C variants exist
    for correctness but are slower than fp32."""
    return ops.PRECISIONS if cpu.isa() != "baseline" else ("fp32",)


def resolve(precision: str, strict: bool = False) -> str:
    """The precision to run: ``precision`` when this CPU runs it ("auto" as is), else fp32 with
    one warning; strict=True raises ValueError instead."""
    check(precision)
    if precision == "auto" or precision in runnable():
        return precision
    msg = (f"precision {precision!r} needs a kernel level above baseline (AVX2 or better; "
           f"neon_dot on aarch64); the CPU kernels run at {cpu.isa()!r}")
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
    """{node: (lo, hi)} of the activations each convolution of ``executor`` sees on
    ``inputs`` (float32 arrays of the model's one input) at fp32: the int8 activation ranges."""
    ranges: dict[str, tuple[float, float]] = {}
    with executor.probing(ranges):
        for x in inputs:
            executor.run(x)
    return ranges


def _fastest_ms(run, x, rounds: int = 3) -> float:
    """The fastest of ``rounds`` timed runs, in ms. The fastest, not the median: another process
    on a shared machine only ever slows a run down, and a choice made during such a burst is
    stored and kept (measured at load 7 on 2 cores, medians of 3 chose fp32, bf16 or int8 for
    the same CycleGAN stage in different runs)."""
    run(x)  # plan and packing outside the timing
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        run(x)
        times.append(time.perf_counter() - t)
    return 1e3 * min(times)


def fallback_nodes(executor, precision: str, ranges: dict, outputs, want) -> list[str]:
    """The convolutions of ``executor`` to keep at fp32 so that at ``precision`` otherwise the
    model's outputs (outputs(): on the calibration pictures) keep GUARD_PSNR_DB[precision] +
    FALLBACK_MARGIN_DB against want (their fp32 values): none when the whole stage passes; else
    each convolution is scored alone at precision (the others fp32) and the fewest of the worst
    go back to fp32 that make the stage pass (all of them at worst; found by bisection, taking
    the score as growing with the count). Leaves the executor at precision with that fallback."""
    need = GUARD_PSNR_DB[precision] + FALLBACK_MARGIN_DB

    def score(fp32) -> float:
        executor.set_precision(precision, ranges, fp32)
        return min(psnr(g, w) for g, w in zip(outputs(), want))

    if score(()) >= need:
        return []
    convs = list(ranges)   # the convolutions that ran natively while probing
    alone = {n: score([m for m in convs if m != n]) for n in convs}
    worst = sorted(convs, key=alone.get)
    lo, hi = 1, len(worst)   # the answer is in [lo, hi]: all of them always pass (fp32)
    while lo < hi:
        mid = (lo + hi) // 2
        if score(worst[:mid]) >= need:
            hi = mid
        else:
            lo = mid + 1
    executor.set_precision(precision, ranges, worst[:hi])
    return worst[:hi]


def _conv_step_times(executor, x, convs) -> dict[str, float]:
    """{convolution node: median seconds of its step} in ``executor``'s plan for x, as set now
    (step_threads.step_times; the plan's arena holds x's run)."""
    from .step_threads import step_times
    executor.run(x)
    plan = executor.plan_for({executor.input_names[0]: x.shape})
    return {nd.name: t for nd, t in zip(plan.step_nodes, step_times(plan, runs=3))
            if nd.name in convs}


def _u8_ends(executor, x) -> set[str]:
    """The nodes at either end of a u8 link (int8 conv to int8 conv) in ``executor``'s plan for
    x, as set now."""
    plan = executor.plan_for({executor.input_names[0]: x.shape})
    return {nd.name for nd in plan.step_nodes
            if nd.outputs[0] in plan.u8 or (nd.inputs and nd.inputs[0] in plan.u8)}


def faster_at_fp32(executor, precision: str, ranges: dict, fp32_nodes, fp32_times: dict,
                   x) -> list[str]:
    """The convolutions that "auto" keeps at fp32 in a plan at ``precision`` for speed: those
    whose step at fp32 (fp32_times, _conv_step_times of the all-fp32 plan) beats their step at
    precision (with fp32_nodes, the quality fallback, at fp32), kept only if the whole plan
    then runs faster on x. One at an end of a u8 link is also tried back at precision alone:
    at fp32 it breaks the link, and its int8 neighbour then reads or writes float32 (Zen 2, the
    bundled encoder at 512^2: its first conv timed faster at fp32, and the next one then read
    16 MB of floats instead of 4 MB of levels, 6.2 -> 8.1 ms in `model check --profile`). On
    an AVX2 CPU without VNNI (Zen 2) a
    u8 x s8 product costs two instructions: int8 has no more multiplies per cycle than fp32's
    FMA, and Winograd's fp32 3x3 stride-1 convolutions beat it. The executor comes set at
    precision with fp32_nodes and is left at it with the result."""
    times = _conv_step_times(executor, x, set(ranges) - set(fp32_nodes))
    slower = [n for n, t in times.items() if fp32_times.get(n, float("inf")) < t]
    if not slower:
        return []
    linked = _u8_ends(executor, x)
    before = _fastest_ms(executor.run, x)
    executor.set_precision(precision, ranges, fp32_nodes, slower)
    best = _fastest_ms(executor.run, x)
    for n in [n for n in slower if n in linked]:
        trial = [m for m in slower if m != n]
        if trial:
            executor.set_precision(precision, ranges, fp32_nodes, trial)
        t = _fastest_ms(executor.run, x) if trial else before
        if t < best:
            slower, best = trial, t
    if slower and best < before:
        executor.set_precision(precision, ranges, fp32_nodes, slower)
        return slower
    executor.set_precision(precision, ranges, fp32_nodes)
    return []


def with_mirrors(pictures, axis: int) -> list:
    """``pictures`` and each one mirrored along ``axis`` (its width): the pictures a plan is
    judged on. The int8 ranges come from the pictures alone, so the mirror images stand for
    pictures they were not taken from: the generator families of the tests lose up to 7 dB on
    another crop of the sample against the calibrated one, and judged on the mirrors too, their
    plans keep the guard there (tests/test_precision.py)."""
    pictures = list(pictures)
    return pictures + [np.ascontiguousarray(np.flip(p, axis)) for p in pictures]


def plan(executor, inputs, precision: str) -> dict:
    """Set one executor to ``precision`` on ``inputs`` (float32 (N, C, H, W) arrays of its one
    input): bf16 or int8 with the ranges and per-layer fallback they give, or "auto"'s choice,
    judged on its own output for the inputs and their mirror images. Returns plan_stages'
    entry."""
    inputs = list(inputs)
    judged = with_mirrors(inputs, -1)
    return plan_stages({"model": executor}, {"model": inputs},
                       lambda: [executor.run(x).copy() for x in judged], precision)["model"]


def choose(executor, inputs) -> dict:
    """The "auto" choice for one executor on ``inputs``; leaves it at the choice (plan)."""
    return plan(executor, inputs, "auto")


def within_domain(ranges: dict, readers, domain) -> dict:
    """ranges with those of the ``readers`` (convolutions reading the stage's input itself)
    widened to cover ``domain`` (lo, hi), the values that input can take: a calibration
    picture without pure white must not clip a white page at int8 (the bundled encoder's first
    convolution: 32 dB against fp32 on lines on white with the sample's range, 58 dB with the
    picture's; tests/test_precision.py)."""
    if domain is None:
        return ranges
    lo, hi = domain
    return {k: (min(v[0], lo), max(v[1], hi)) if k in readers else v for k, v in ranges.items()}


def plan_stages(executors: dict, stage_inputs: dict, outputs, precision: str,
                known: dict | None = None, input_domains: dict | None = None) -> dict:
    """Set each executor (one per model stage, in model order) to its precision and return
    {stage: {"precision", "reason", "act_ranges", "fp32_nodes", "faster_fp32", "ms", "psnr"}},
    with "stored": True on the stages whose "auto" choice came from ``known``.

    stage_inputs: {stage: [float32 inputs of that stage on the calibration pictures]}: its int8
    activation ranges come from them (probed at fp32). outputs(): the whole model's outputs on
    the calibration pictures and their mirror images (with_mirrors) with the executors as they
    are now, judged against the all-fp32 ones. precision: "bf16"/"int8" sets every stage to
    it, with its per-layer fallback (fallback_nodes, kept in fp32_nodes: {precision:
    [convolution nodes]}); "auto" takes per stage, in order (earlier stages at their choice),
    the fastest precision whose run time on the stage's largest input beats the others and
    whose model output keeps GUARD_PSNR_DB, a precision whose every convolution falls back
    failing; fp32 when none passes. Each reduced precision it times keeps at fp32 the
    convolutions that run faster there (faster_at_fp32, kept in faster_fp32: {precision:
    [nodes]}). known: a previous result for the same model and machine (ranges, fallbacks and
    choices are reused; outputs() is not called when every stage's plan is in it).
    input_domains: {stage: (lo, hi)}, the values a stage's input can take where they are known
    (the normalised picture): its input's int8 ranges cover them (within_domain)."""
    known, input_domains = known or {}, input_domains or {}

    def stored(hit) -> bool:   # the stage's plan is in known, fallback included
        p = hit.get("precision") if precision == "auto" else precision
        return p in runnable() and (p == "fp32" or p in (hit.get("fp32_nodes") or {}))

    # the all-fp32 outputs, before any stage changes (not needed when every plan is stored)
    judged = not all(stored(known.get(name) or {}) for name in executors)
    want = outputs() if judged else None
    result = {}
    for name, ex in executors.items():
        hit = known.get(name) or {}
        ranges = {k: tuple(v) for k, v in hit["act_ranges"].items()} if "act_ranges" in hit \
            else calibrate_ranges(ex, stage_inputs[name])
        ranges = within_domain(ranges, ex.input_readers, input_domains.get(name))
        fallback = dict(hit.get("fp32_nodes") or {})
        faster = dict(hit.get("faster_fp32") or {})

        def set_at(p):   # p with its per-layer fallback (found once per stage and precision)
            if p == "fp32":
                ex.set_precision(p, ranges)
                return
            if p not in fallback:
                fallback[p] = fallback_nodes(ex, p, ranges, outputs, want)
            ex.set_precision(p, ranges, fallback[p], faster.get(p, ()))

        entry = {"act_ranges": {k: list(v) for k, v in ranges.items()}, "fp32_nodes": fallback,
                 "faster_fp32": faster}
        if precision != "auto":
            set_at(precision)
            result[name] = dict(entry, precision=precision, reason="asked for" + _fallback_note(
                fallback[precision], ranges), ms={}, psnr={})
            continue
        if stored(hit):
            set_at(hit["precision"])
            # the reason as judged (files written before the flag carry " [stored]" in it,
            # once more per load: cut)
            result[name] = dict(hit, reason=hit["reason"].split(" [stored]")[0], stored=True)
            continue
        # timed on its largest input: a conversion may also run a stage on a thumbnail (the
        # bundled model's statistics, 96^2), where the paths rank otherwise than at full size
        x0 = max(stage_inputs[name], key=lambda a: a.size)
        set_at("fp32")
        ms, scores, all_fp32, slower = {"fp32": _fastest_ms(ex.run, x0)}, {}, [], []
        # per-step fp32 times, for faster_at_fp32 (none to compare where only fp32 runs)
        fp32_times = _conv_step_times(ex, x0, set(ranges)) if ranges and runnable()[1:] else {}
        for p in ("int8", "bf16"):
            if p not in runnable():
                continue
            faster.pop(p, None)   # judged anew below; set_at(p) then leaves the quality fallback
            set_at(p)
            if ranges and len(fallback[p]) == len(ranges):   # no convolution left at p
                all_fp32.append(p)
                ex.set_precision(p, ranges)
            elif ranges:
                faster[p] = faster_at_fp32(ex, p, ranges, fallback[p], fp32_times, x0)
                if len(fallback[p]) + len(faster[p]) == len(ranges):   # fp32 by another name
                    slower.append(p)
                    continue
            ms[p] = _fastest_ms(ex.run, x0)
            scores[p] = min(psnr(g, w) for g, w in zip(outputs(), want))
        passing = [p for p in scores if scores[p] >= GUARD_PSNR_DB[p] and p not in all_fp32]
        best = min(passing + ["fp32"], key=lambda p: ms[p])
        failed = [f"{p} {scores[p]:.1f} dB < {GUARD_PSNR_DB[p]:.0f}" for p in scores
                  if p not in passing]
        reason = ("fastest passing the guard: " + ", ".join(f"{p} {ms[p]:.1f} ms" for p in ms)
                  + "".join(f"; {p} {scores[p]:.1f} dB" for p in scores)
                  + (f"; failed: {', '.join(failed)}" if failed else "")
                  + "".join(f"; {p}: every convolution faster at fp32" for p in slower)
                  + (_fallback_note(fallback[best], ranges) if best != "fp32" else "")
                  + (f"; {len(faster[best])} faster at fp32 kept there"
                     if faster.get(best) else ""))
        set_at(best)
        _log.info("stage %s at %s: %s", name, best, reason)
        result[name] = dict(entry, precision=best, reason=reason, ms=ms, psnr=scores)
    return result


def _fallback_note(nodes: list, ranges: dict) -> str:
    return (f"; {len(nodes)} of {len(ranges)} convolutions kept at fp32 (per-layer fallback)"
            if nodes else "")


# --- calibration pictures and the stored choices -------------------------------------------------

_SAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "astronaut_toon.png")


def calibration_pictures() -> list[np.ndarray]:
    """uint8 BGR pictures to calibrate on: the bundled sample (examples/ of a source checkout;
    a toonified photo, where the bundled model's gate opens) and a generated drawing (flat
    colour shapes with dark outlines on white, where it shuts: int8 errors that move the gate
    show there, on real drawings up to 124 levels with the sample alone)."""
    import cv2
    rng = np.random.default_rng(20)
    drawing = np.full((256, 256, 3), 235, np.uint8)
    for _ in range(12):
        colour = tuple(int(v) for v in rng.integers(30, 250, 3))
        centre = tuple(int(v) for v in rng.integers(20, 236, 2))
        axes = tuple(int(v) for v in rng.integers(10, 70, 2))
        cv2.ellipse(drawing, centre, axes, float(rng.integers(0, 180)), 0, 360, colour, -1)
        cv2.ellipse(drawing, centre, axes, 0, 0, 360, (25, 20, 30), 2)
    sample = cv2.imread(_SAMPLE, cv2.IMREAD_COLOR) if os.path.exists(_SAMPLE) else None
    return [drawing] if sample is None else [sample, drawing]


# A conversion of the first default calibration picture slower than this has the default
# pictures scaled down until it fits: "auto" judges a plan on some 60 conversions and timings
# of them (227 s for a 120-layer, 64-channel CNN on 2 threads, 3.5 s a conversion on average),
# and such a model's activation ranges and per-layer errors do not hang on the size.
CALIBRATION_CONVERT_S = 0.5
MIN_CALIBRATION_SIDE = 64


def scaled_within(pictures: list, seconds: float) -> list:
    """``pictures`` whose first took ``seconds`` to convert, shrunk (area interpolation, at
    least MIN_CALIBRATION_SIDE pixels a side) so that it would take CALIBRATION_CONVERT_S:
    conversion time follows the pixels."""
    import cv2
    scale = (CALIBRATION_CONVERT_S / seconds) ** 0.5
    if scale >= 1:
        return list(pictures)
    return [cv2.resize(p, (max(MIN_CALIBRATION_SIDE, round(p.shape[1] * scale)),
                           max(MIN_CALIBRATION_SIDE, round(p.shape[0] * scale))),
                       interpolation=cv2.INTER_AREA) for p in pictures]


# The stored choices' format; /2: the plans cover ConvTranspose and MatMul/Gemm too, so a /1
# file's fallback lists were judged with those at fp32 and are not reused; /3: "auto" keeps
# at fp32 the convolutions faster there (faster_fp32), which a /2 choice never looked for; /4:
# timed on each stage's largest input, where a /3 choice may have been timed on a thumbnail.
SCHEMA = "a2r_edge.precision/4"


def store_path(model_digest: str) -> str:
    """Where the choices for this model on this machine, kernels build, ISA level and thread
    count live."""
    from ..runtime import system
    return os.path.join(system.cache_dir(), f"precision-{system.machine_key()}-"
                                            f"{model_digest[:16]}-{cpu.build_id()}-{cpu.isa()}-"
                                            f"{cpu.num_threads()}t.json")


def load(path: str, precision: str) -> dict:
    """The stored plan_stages result for ``precision`` ({} when none, unreadable or of another
    SCHEMA)."""
    try:
        with open(path) as f:
            data = json.load(f)
        return (data.get(precision) or {}) if data.get("schema") == SCHEMA else {}
    except (OSError, ValueError, AttributeError):
        return {}


def store(path: str, precision: str, chosen: dict) -> None:
    """Keep ``chosen`` under ``precision``; a cache that cannot be written is not an error."""
    from ..runtime import files
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        data = {}
    data["schema"] = SCHEMA
    data[precision] = chosen
    try:
        files.write_json(path, data)
    except OSError as exc:
        _log.info("precision choices not stored (%s)", exc)
