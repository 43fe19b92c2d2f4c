"""Benchmark harness: each op beside its peer (numpy, OpenCV, onnxruntime) or the measured copy
bandwidth, in the same run, as a ratio. Method: see benchmarks/README.md.

Use ``compare(benchmark, ours, peer, ...)``: pytest-benchmark times ``ours``; ``peer`` is timed
right after with the same method (warm-up, then the median of rounds). Every comparison lands in
``extra_info`` (so ``--benchmark-json`` keeps it) and in the ratio table printed at the end.
Targets are reported as met or missed, never asserted: these machines are shared and noisy.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import time

import pytest

from a2r_edge.runtime import cpu
from a2r_edge.runtime import measure


def keep_freed_memory() -> bool:
    """glibc only: freed blocks up to 32 MiB stay in the process (no mmap, no trim), so an op
    that allocates its temporaries (OpenCV's guided filter: about ten 4 MiB planes per call at
    1024^2) does not pay fresh page faults on every call. Without it such a peer timed bimodally
    by what ran before it in the process, glibc's adaptive mmap threshold deciding (OpenCV's
    gray guided filter, 1 thread: 25 ms after some benchmarks, 10 ms after others): the ratio
    followed the test order. With it both sides run as in a long-lived process. Returns whether
    it could be set."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    libc = ctypes.CDLL(name)
    if not hasattr(libc, "mallopt"):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3   # glibc's malloc.h
    return bool(libc.mallopt(m_mmap_threshold, 32 << 20)) and bool(
        libc.mallopt(m_trim_threshold, 1 << 30))


KEEPS_FREED_MEMORY = keep_freed_memory()
RESULTS: list[dict] = []
THREADS = (1, 2)
# A2R_BENCH_CPU_TIME=1: 1-thread comparisons are timed once more in CPU seconds of this process,
# ours and the peer in turns (measure.interleaved_median_times with time.process_time): on a
# shared machine whose other load takes turns on the cores, that ratio is steadier than the
# wall-clock one. Not for 2 threads: CPU time sums the threads and counts OpenMP's spin-waits.
CPU_TIME = os.environ.get("A2R_BENCH_CPU_TIME") == "1"


def median_time(fn, rounds: int = 15, warmup: int = 2) -> float:
    """Median wall time of ``fn()`` over ``rounds`` calls after ``warmup`` calls (no time
    budget: every round runs)."""
    return measure.median_time(fn, rounds=rounds, warmup=warmup, budget_s=float("inf"))


def settle(run) -> None:
    """Runs a native plan until its per-step thread choice is settled (model/step_threads.py:
    measured on the first runs and once more RECHECK runs later; the next measurement comes
    LATER_RECHECK runs on, after any benchmark's rounds), before any peer runs: the
    comparison is of the steady state a stream or a batch sees, and a peer's pool still
    spinning after its first run cannot make those measurements choose 1 thread."""
    from a2r_edge.model import step_threads
    for _ in range(step_threads.SETTLE_RUNS):
        run()


def copy_bandwidth(threads: int, nbytes: int = 64 << 20) -> float:
    """Measured copy bandwidth in bytes/s of an ``nbytes`` array (measure.copy_bandwidth), anew
    beside each comparison with the op's own footprint: on a shared machine it drifts between
    runs, and a footprint that fits the caches copies faster."""
    return measure.copy_bandwidth(threads, nbytes, budget_s=float("inf"))


@pytest.fixture(params=THREADS, ids=lambda n: f"{n}thr")
def threads(request):
    """Our kernels, OpenCV and (by the test's own session options) onnxruntime use n threads."""
    n = request.param
    try:
        import cv2
        previous = cv2.getNumThreads()
        cv2.setNumThreads(n)
    except ImportError:
        cv2 = None
    with cpu.using_threads(n):
        yield n
    if cv2 is not None:
        cv2.setNumThreads(previous)


def compare(benchmark, ours, peer=None, *, op: str, case: str, threads: int,
            peer_name: str | None = None, bytes_moved: int | None = None,
            flops: float | None = None, target: float | None = None,
            target_bandwidth: float | None = None, rounds: int = 15) -> dict:
    """Time ``ours`` with pytest-benchmark and ``peer`` with the same method; record the ratio.

    target: the speed-up over the peer the issue asks for; target_bandwidth: the fraction of
    the measured copy bandwidth (bytes_moved / time) it asks for.
    """
    benchmark.pedantic(ours, rounds=rounds, warmup_rounds=2, iterations=1)
    t_ours = benchmark.stats.stats.median
    row = {"op": op, "case": case, "threads": threads, "isa": cpu.isa(),
           "ours_ms": t_ours * 1e3}
    if peer is not None:
        t_peer = median_time(peer, rounds=rounds)
        row.update(peer=peer_name, peer_ms=t_peer * 1e3, speedup=t_peer / t_ours)
        if target is not None:
            row["target"] = f">= {target:g}x {peer_name}"
            row["met"] = row["speedup"] >= target
    if peer is not None and CPU_TIME and threads == 1:
        c_ours, c_peer = measure.interleaved_median_times(
            [ours, peer], rounds=rounds, warmup=1, budget_s=float("inf"), clock=time.process_time)
        row.update(ours_cpu_ms=c_ours * 1e3, peer_cpu_ms=c_peer * 1e3,
                   cpu_speedup=c_peer / c_ours)
    if bytes_moved is not None:
        bw = copy_bandwidth(threads, nbytes=max(bytes_moved // 2, 1 << 20))
        row.update(gbps=bytes_moved / t_ours / 1e9, copy_gbps=bw / 1e9,
                   of_copy=bytes_moved / t_ours / bw)
        if target_bandwidth is not None:
            row["target_bw"] = f">= {target_bandwidth:.0%} of copy"
            row["met_bw"] = row["of_copy"] >= target_bandwidth
    if flops is not None:
        row["gflops"] = flops / t_ours / 1e9
    benchmark.extra_info.update(row)
    RESULTS.append(row)
    return row


def pytest_terminal_summary(terminalreporter):
    if not RESULTS:
        return
    tr = terminalreporter
    tr.section("a2r_edge: ratios against peers (same run)")
    if not KEEPS_FREED_MEMORY:
        tr.write_line("(the allocator keeps returning freed memory: allocating ops pay page "
                      "faults, and their timings depend on what ran before them)")
    tr.write_line(f"{'op':<17}{'case':<28}{'isa':>9}{'thr':>4}{'ours ms':>10}{'peer':>26}"
                  f"{'peer ms':>10}"
                  f"{'speedup':>9}{'cpu x':>7}{'GB/s':>8}{'%copy':>7}  target")
    for r in RESULTS:
        targets = []
        if "target" in r:
            targets.append(f"{r['target']}: {'met' if r['met'] else 'MISSED'}")
        if "target_bw" in r:
            targets.append(f"{r['target_bw']}: {'met' if r['met_bw'] else 'MISSED'}")
        tr.write_line(
            f"{r['op']:<17}{r['case']:<28}{r['isa']:>9}{r['threads']:>4}{r['ours_ms']:>10.3f}"
            f"{(r.get('peer') or '-'):>26}"
            f"{(format(r['peer_ms'], '.3f') if 'peer_ms' in r else '-'):>10}"
            f"{(format(r['speedup'], '.2f') + 'x' if 'speedup' in r else '-'):>9}"
            f"{(format(r['cpu_speedup'], '.2f') + 'x' if 'cpu_speedup' in r else '-'):>7}"
            f"{(format(r['gbps'], '.1f') if 'gbps' in r else '-'):>8}"
            f"{(format(r['of_copy'], '.0%') if 'of_copy' in r else '-'):>7}  "
            + "; ".join(targets))
