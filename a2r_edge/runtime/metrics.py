"""Metrics of long runs in Prometheus format: per-stage latency histograms, frames, frames per
second, dropped frames, fallbacks and memory (the optional ``[metrics]`` extra,
prometheus_client).

    m = StreamMetrics()
    m.serve(9100)                      # http://127.0.0.1:9100/metrics
    for out in engine.stream(frames, metrics=m): ...

``python -m a2r_edge.video --metrics-port 9100`` does the same for the video loop. Each
StreamMetrics has its own registry (two engines in one process do not mix their figures).
Thread-safe: the pipeline's threads observe their stages concurrently.
"""
from __future__ import annotations

import collections
import os
import threading
import time

# Stage latency buckets, seconds: 1 ms (preprocess of a small frame) to 10 s (a large picture's
# network step on a slow CPU), about 2.5x apart.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# frames per second is taken over the frames of the last FPS_WINDOW_S seconds
FPS_WINDOW_S = 5.0


def prometheus_client():
    """The prometheus_client module; ImportError naming the extra when it is missing."""
    try:
        import prometheus_client as pc
    except ImportError:
        raise ImportError("metrics need the prometheus_client package: "
                          "pip install 'a2r_edge[metrics]' (or prometheus_client)") from None
    return pc


def resident_bytes() -> float:
    """This process's resident memory (Linux /proc; 0 where it cannot be read)."""
    try:
        with open("/proc/self/statm") as f:
            return float(int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, IndexError):
        return 0.0


class StreamMetrics:
    """The figures of one stream or video run, exported as:

    a2r_stage_seconds{stage}   histogram: time of each frame in each pipeline stage
    a2r_frames_total           counter: frames converted
    a2r_frames_per_second      gauge: over the last FPS_WINDOW_S seconds
    a2r_dropped_frames_total   counter: camera frames replaced by a newer one before conversion
    a2r_fallbacks_total{kind}  counter: GPU faults recovered ("tiles": smaller tiles after out
                               of memory; "cpu": the stage moved to the CPU)
    a2r_resident_memory_bytes  gauge: this process's resident memory, read at each scrape
    """

    def __init__(self):
        pc = prometheus_client()
        self.registry = pc.CollectorRegistry()
        r = self.registry
        self.stage_seconds = pc.Histogram("a2r_stage_seconds", "Time per frame in each stage",
                                          ["stage"], buckets=LATENCY_BUCKETS, registry=r)
        self.frames = pc.Counter("a2r_frames", "Frames converted", registry=r)
        self.fps = pc.Gauge("a2r_frames_per_second",
                            f"Frames per second over the last {FPS_WINDOW_S:g} s", registry=r)
        self.dropped = pc.Counter("a2r_dropped_frames",
                                  "Camera frames replaced by a newer one before conversion",
                                  registry=r)
        self.fallbacks = pc.Counter("a2r_fallbacks", "GPU faults recovered", ["kind"],
                                    registry=r)
        self.memory = pc.Gauge("a2r_resident_memory_bytes", "Resident memory of this process",
                               registry=r)
        self.memory.set_function(resident_bytes)
        self._lock = threading.Lock()
        self._recent: collections.deque = collections.deque()
        self._dropped_seen = 0
        self._server = None

    def observe(self, stage: str, seconds: float) -> None:
        self.stage_seconds.labels(stage=stage).observe(seconds)

    def frame_done(self) -> None:
        now = time.monotonic()
        self.frames.inc()
        with self._lock:
            self._recent.append(now)
            while self._recent and now - self._recent[0] > FPS_WINDOW_S:
                self._recent.popleft()
            span = now - self._recent[0]
            self.fps.set((len(self._recent) - 1) / span if span > 0 else 0.0)

    def dropped_total(self, total: int) -> None:
        """The source's running count of dropped frames (the grabber's ``dropped``)."""
        with self._lock:
            if total > self._dropped_seen:
                self.dropped.inc(total - self._dropped_seen)
                self._dropped_seen = total

    def fallback(self, kind: str) -> None:
        self.fallbacks.labels(kind=kind).inc()

    def text(self) -> str:
        """The exposition text a scrape gets."""
        return prometheus_client().generate_latest(self.registry).decode()

    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        """Serves /metrics on ``addr``:``port`` in a daemon thread (port 0: any free one);
        returns the port. Loopback by default: the figures are not for the whole network
        unless asked (addr="0.0.0.0")."""
        from http.server import ThreadingHTTPServer
        pc = prometheus_client()
        handler = pc.MetricsHandler.factory(self.registry)
        self._server = ThreadingHTTPServer((addr, port), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="a2r-metrics",
                         daemon=True).start()
        return self._server.server_address[1]

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
