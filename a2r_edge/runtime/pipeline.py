"""Pipelined stages over threads (docs/architecture.md, the way of one video frame): one worker
thread per stage, bounded queues between them, order preserved, errors re-raised in the
consumer, clean stop when the consumer stops reading.

The stages of one picture (preprocess, network, postprocess) run in different threads, so the
preprocess of frame n+1 overlaps the network of frame n: our native kernels and numpy's large
copies release the GIL. Each stage runs in exactly one thread and queues are FIFO, so outputs come
out in input order. Queues hold at most ``depth`` items: a slow consumer stalls the producer
instead of piling frames up in memory.

>>> pipe = Pipeline([("double", lambda x: 2 * x), ("inc", lambda x: x + 1)], depth=2)
>>> list(pipe.run(range(4)))
[1, 3, 5, 7]
>>> pipe.latency()["double"]["count"]
4
"""
from __future__ import annotations

import collections
import queue
import threading
import time
from typing import Callable, Iterable, Iterator

# Latency samples kept per stage: enough for a stable p95 (the 95th of 1,000 has ~50 samples
# above it), small enough to never matter for memory (8 KB per stage).
_SAMPLES = 1000
# How often a blocked put/get re-checks the stop flag: short enough that a stop is quick, long
# enough to cost nothing.
_POLL_S = 0.05

_END = object()


class _Failure:
    """An exception raised by a stage, carried downstream to the consumer."""

    def __init__(self, exc: BaseException):
        self.exc = exc


class Pipeline:
    """Runs ``stages`` [(name, fn)] as a chain: item -> fn0 -> fn1 -> ... -> output.

    The first stage runs in a thread that also pulls the items; every later stage but the last
    has its own thread; the last stage runs in the consumer's thread (whoever iterates
    ``run()``). ``depth``: capacity of each queue between stages; nothing is ever dropped (the camera
    grabber drops stale frames before they get here). Per-stage latencies: ``latency()``, and each
    one passed to ``observe(stage, seconds)`` when given. One ``run`` at a time per Pipeline.
    """

    def __init__(self, stages: list[tuple[str, Callable]], depth: int = 2,
                 observe: Callable[[str, float], None] | None = None):
        if not stages:
            raise ValueError("a pipeline needs at least one stage")
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be an int >= 1, got {depth!r}")
        self.stages, self.depth, self.observe = list(stages), depth, observe
        self._times = {name: collections.deque(maxlen=_SAMPLES) for name, _ in stages}
        self._stop = threading.Event()

    def stopping(self) -> bool:
        """True once the current run is stopping: a stage blocked on its own resource (e.g.
        a buffer pool) polls this to give up instead of hanging the join."""
        return self._stop.is_set()

    def _timed(self, name, fn, item):
        t0 = time.perf_counter()
        out = fn(item)
        seconds = time.perf_counter() - t0
        self._times[name].append(seconds)
        if self.observe is not None:  # e.g. StreamMetrics.observe (runtime/metrics.py)
            self.observe(name, seconds)
        return out

    def latency(self) -> dict[str, dict[str, float]]:
        """{stage: {"median": s, "p95": s, "count": n}} over the last samples of each stage."""
        result = {}
        for name, samples in self._times.items():
            s = sorted(samples)
            n = len(s)
            result[name] = {"median": s[n // 2] if n else float("nan"),
                            "p95": s[min(n - 1, int(0.95 * n))] if n else float("nan"),
                            "count": n}
        return result

    def run(self, items: Iterable) -> Iterator:
        stop = self._stop = threading.Event()
        queues = [queue.Queue(maxsize=self.depth) for _ in self.stages[:-1]]

        def put(q, value) -> bool:
            while not stop.is_set():
                try:
                    q.put(value, timeout=_POLL_S)
                    return True
                except queue.Full:
                    pass
            return False

        def get(q):
            while True:
                try:
                    return q.get(timeout=_POLL_S)
                except queue.Empty:
                    if stop.is_set():
                        return _END

        def source(name, fn, out_q):
            try:
                for item in items:
                    if stop.is_set() or not put(out_q, self._timed(name, fn, item)):
                        return
            except BaseException as exc:  # noqa: BLE001  (re-raised in the consumer)
                put(out_q, _Failure(exc))
                return
            put(out_q, _END)

        def middle(name, fn, in_q, out_q):
            while True:
                item = get(in_q)
                if item is _END or isinstance(item, _Failure):
                    put(out_q, item)
                    return
                try:
                    item = self._timed(name, fn, item)
                except BaseException as exc:  # noqa: BLE001
                    put(out_q, _Failure(exc))
                    return
                if not put(out_q, item):
                    return

        if len(self.stages) == 1:
            name, fn = self.stages[0]
            for item in items:
                yield self._timed(name, fn, item)
            return
        threads = [threading.Thread(target=source, args=(*self.stages[0], queues[0]),
                                    name=f"a2r-{self.stages[0][0]}", daemon=True)]
        for k in range(1, len(self.stages) - 1):
            threads.append(threading.Thread(target=middle,
                                            args=(*self.stages[k], queues[k - 1], queues[k]),
                                            name=f"a2r-{self.stages[k][0]}", daemon=True))
        for t in threads:
            t.start()
        name, fn = self.stages[-1]
        try:
            while True:
                item = get(queues[-1])
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    raise item.exc
                yield self._timed(name, fn, item)
        finally:
            # Consumer done, failed or stopped reading (generator closed): stop every worker.
            stop.set()
            for t in threads:
                t.join()
