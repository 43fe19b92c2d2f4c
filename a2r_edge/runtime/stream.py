"""Frames converted as they come, pipelined over three threads (``Engine.stream`` and
``convert_batch``): prepare (style step, result cache look-up, slot), network, finish.

It sits beside ``pipeline.py`` in the plan layer and takes the engine's steps as callables,
so it imports nothing of the engine.
"""
from __future__ import annotations

import threading
from typing import Callable, Iterable, Iterator

import numpy as np

from ..picture import roi as roi_mod, style as style_mod
from ..picture.forward import Slot, as_picture, to_bgr
from .pipeline import Pipeline

# Queue capacity between pipelined stages: 2 lets each stage start its next frame while the one
# after it is still busy; more only adds latency and memory.
_DEPTH = 2
# Frames in flight in a stream (each holds one slot of buffers, 7.75 MiB at 512^2): one per
# stage is all the overlap three stages can use; more would only sit in queues.
_IN_FLIGHT = 3


def with_roi(frames, detector, run):
    """run(frames), or with a ROI detector run(their regions), each result pasted back."""
    if detector is None:
        return run(frames)
    return roi_mod.each_region(frames, detector, run, as_picture, to_bgr)


def run(frames: Iterable[np.ndarray], *, colour, colour_stats, prepare: Callable,
        network: Callable, finish: Callable, cache=None, cache_key: Callable | None = None,
        metrics=None, started: Callable | None = None) -> Iterator[np.ndarray]:
    """The converted frames, same order.

    colour, colour_stats: the style colour step (``picture.style.styled``); prepare(frame,
    cache_key) -> Slot; network(slot) -> None; finish(slot) -> the result, the slot released
    (also when it raises); cache / cache_key(frame) -> key or None: the result cache, None: off;
    metrics: a ``runtime.metrics.StreamMetrics`` or None; started(pipeline): told the pipeline
    before the first frame (for its latencies)."""
    slots = threading.BoundedSemaphore(_IN_FLIGHT)

    def prep(item):
        i, frame = item
        frame = style_mod.styled(as_picture(frame, f"frame {i}"), colour, colour_stats)
        key = cache_key(frame) if cache_key is not None else None
        hit = cache.get(key) if key is not None else None
        if hit is not None:
            slot = Slot(None)
            slot.done = hit
            return slot
        return prepare(frame, key)

    def net(slot):
        network(slot)
        return slot

    def post(slot):
        key = slot.cache_key
        try:
            out = finish(slot)
        finally:
            slots.release()
        if key is not None:
            cache.put(key, out)
        return out

    pipe = Pipeline([("preprocess", prep), ("network", net), ("postprocess", post)],
                    depth=_DEPTH, observe=metrics.observe if metrics is not None else None)

    def gated():  # a frame enters only when a slot is free (outside the timed stages)
        for item in enumerate(frames):
            while not slots.acquire(timeout=0.05):
                if pipe.stopping():
                    return
            yield item

    if started is not None:
        started(pipe)
    if metrics is None:
        yield from pipe.run(gated())
        return
    for out in pipe.run(gated()):
        metrics.frame_done()
        yield out
