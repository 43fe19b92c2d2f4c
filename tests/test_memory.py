"""Steady-state memory of the Engine: after warm-up a frame allocates (numpy domain, counted by
tracemalloc) only its returned array, and RSS stays flat over 1,000 streamed frames."""
import tracemalloc

import numpy as np
import pytest

from a2r_edge import Engine
from model_packages import make_package

# Slack for numpy's small per-call arrays that are still alive at a snapshot (channel statistics
# of C floats, 0-d scalars): far below one 64 x 64 float plane (16 KiB).
SLACK = 4096


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    return str(make_package(tmp_path_factory.mktemp("mpkg") / "tiny"))


@pytest.fixture(scope="module")
def engine(package):
    return Engine(package, backend="native", cache_mb=0)


@pytest.fixture(scope="module")
def ort_engine(package):
    return Engine(package, backend="onnxruntime", cache_mb=0)


def frames(n, shape=(64, 64, 3)):
    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, shape, dtype=np.uint8)
    for i in range(n):
        yield np.roll(base, i, axis=1)


def _numpy_bytes(snapshot):
    dom = np.lib.tracemalloc_domain
    return sum(s.size for s in snapshot.filter_traces(
        [tracemalloc.DomainFilter(True, dom)]).statistics("filename"))


@pytest.mark.parametrize("backend", ["native", "onnxruntime"])
@pytest.mark.parametrize("mode", ["convert", "stream"])
def test_steady_state_allocates_only_the_outputs(request, backend, mode):
    engine = request.getfixturevalue("engine" if backend == "native" else "ort_engine")
    run = (lambda fs: [engine.convert(f) for f in fs]) if mode == "convert" \
        else (lambda fs: list(engine.stream(fs)))
    run(list(frames(12)))  # warm-up: executor plans, slots, workspaces
    inputs = list(frames(20))
    tracemalloc.start()
    try:
        before = _numpy_bytes(tracemalloc.take_snapshot())
        outs = run(inputs)
        after = _numpy_bytes(tracemalloc.take_snapshot())
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        one = engine.convert(next(frames(1)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    kept = sum(o.nbytes for o in outs)
    assert kept <= after - before <= kept + SLACK
    # transient: the output and its input frame, nothing the size of a float32 picture more
    assert peak - base <= one.nbytes + one.nbytes + 64 * 1024


def _rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


def test_rss_flat_over_1000_frames(engine):
    # warm-up, then 1,000 frames to settle the allocator: after a whole test suite its heap can
    # be fragmented enough that the first 1,000 frames grow RSS by more than 5 MiB once (seen in
    # a serial run: +5.8 MiB; alone +0.05-0.1 MiB, flat over 5,000), where a leak grows in every
    # batch of frames alike
    for _ in engine.stream(frames(1100)):
        pass
    start = _rss_kib()
    n = 0
    for out in engine.stream(frames(1000)):
        n += out.shape[0] > 0
    grown = _rss_kib() - start
    assert n == 1000
    assert grown < 5 * 1024, f"RSS grew {grown} KiB over 1,000 frames"


def test_native_stages_share_one_arena(engine):
    engine.convert(next(frames(1)))
    exs = list(engine._stage_runners.executors.values())
    assert len(exs) == 2 and all(ex.memory is engine._stage_runners.arena for ex in exs)
    assert engine._stage_runners.arena.nbytes == max(ex.arena_bytes() for ex in exs) > 0
