"""GPU faults: out of memory -> smaller tiles -> the CPU, never a black picture.

A GPU stage runner is wrapped in ``GpuRunner``: its failures become ``GpuFault``, and it keeps the
CPU runner the chain switches to. ``recover`` converts the picture anew after a fault, each step
logged on the "a2r_edge" logger; strict=True raises instead.
"""
from __future__ import annotations

import logging
from typing import Callable

import numpy as np

# Smallest tile the out-of-memory retry tries before falling back to the CPU: below 64 px the
# tile margins (the receptive field) would be most of every tile.
MIN_RETRY_TILE = 64

log = logging.getLogger("a2r_edge")


class GpuFault(Exception):
    """A GPU stage runner failed: ``oom`` when it ran out of memory. Raised by ``GpuRunner``
    only, so the fallback chain never hides a CPU error."""

    def __init__(self, stage: str, exc: BaseException):
        super().__init__(f"GPU stage {stage!r} failed: {exc}")
        self.stage, self.exc, self.oom = stage, exc, isinstance(exc, MemoryError)


class GpuRunner:
    """Wraps a GPU stage runner: its failures become ``GpuFault``; ``cpu`` is the runner the
    fallback chain switches to."""

    def __init__(self, stage: str, gpu: Callable, cpu: Callable):
        self.stage, self.gpu, self.cpu = stage, gpu, cpu

    def __call__(self, x):
        try:
            return self.gpu(x)
        except Exception as exc:  # noqa: BLE001  (CudaError, CudaOutOfMemory, ...)
            raise GpuFault(self.stage, exc) from exc


def attach(runner_maps: list[dict], stage: str, runner: Callable) -> None:
    """Runs ONNX stage ``stage`` with ``runner`` (float32 NCHW -> float32 NCHW on a GPU) in every
    map of ``runner_maps``, keeping its current runner as the CPU fallback."""
    for runners in runner_maps:
        cpu = runners[stage]
        runners[stage] = GpuRunner(stage, runner, getattr(cpu, "cpu", cpu))


def recover(fault: GpuFault, img: np.ndarray, side: int, stride: int, *, strict: bool,
            runner_maps: list[dict], tiled: Callable, whole: Callable) -> np.ndarray:
    """After a GPU stage failed on ``img``: the whole converted picture, by smaller tiles
    (out of memory only: ``tiled(img, tile)``, halving from ``side``), else with every GPU
    stage of ``runner_maps`` switched to its CPU runner (``whole(img)``)."""
    if strict:
        raise RuntimeError(f"{fault} (strict=True: no fallback)") from fault.exc
    while fault.oom and side // 2 >= MIN_RETRY_TILE:
        side = max(stride, side // 2 // stride * stride)
        log.warning("%s: out of memory; retrying in tiles of %d px", fault, side)
        try:
            return tiled(img, side)
        except GpuFault as again:
            fault = again
    for runners in runner_maps:
        for name, runner in list(runners.items()):
            if isinstance(runner, GpuRunner):
                runners[name] = runner.cpu
    log.warning("%s; falling back to the CPU for every GPU stage", fault)
    return whole(img)
