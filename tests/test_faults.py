"""Faults and long runs: GPU stage failures (out of memory -> smaller tiles -> CPU, strict mode),
concurrent use of one Engine, streams stopped halfway, and a short soak (RSS, fds, threads)."""
import gc
import logging
import os
import threading

import numpy as np
import pytest

from a2r_edge import Engine
from a2r_edge.runtime import cuda
from model_packages import make_package


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    return make_package(tmp_path_factory.mktemp("faults") / "tiny")


def picture(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


class FakeGpu:
    """A GPU stage runner that runs out of memory above ``max_pixels`` (None: always fails with
    ``exc``) and otherwise computes with the CPU runner; counts its calls and failures."""

    def __init__(self, cpu, max_pixels=None, exc=None):
        self.cpu, self.max_pixels, self.calls, self.failures = cpu, max_pixels, 0, 0
        self.exc = exc or cuda.CudaOutOfMemory("cudaMalloc: out of memory (injected)",
                                               cuda.ENOMEM)

    def __call__(self, x):
        self.calls += 1
        if self.max_pixels is None or x.shape[2] * x.shape[3] > self.max_pixels:
            self.failures += 1
            raise self.exc
        return self.cpu(x)


def attach(eng, **fake_kw):
    fake = FakeGpu(eng._forward.runners["decode"], **fake_kw)
    eng._attach_gpu("decode", fake)
    return fake


def test_oom_retries_with_smaller_tiles(package, caplog):
    img = picture((160, 160, 3))
    eng = Engine(str(package), cache_mb=0)
    # decode sees features at 1/4 size: 40x40 for the whole picture fails, 26x26 tiles of
    # 80 px + 24 px margins fit
    fake = attach(eng, max_pixels=30 * 30)
    with caplog.at_level(logging.WARNING, logger="a2r_edge"):
        out = eng.convert(img)
    assert fake.failures == 1 and fake.calls > fake.failures  # the tiles ran on the "GPU"
    assert "retrying in tiles of 80 px" in caplog.text
    assert "falling back to the CPU" not in caplog.text
    want = Engine(str(package), cache_mb=0).convert(img, tile=80)
    np.testing.assert_array_equal(out, want)


def test_oom_everywhere_falls_back_to_cpu(package, caplog):
    img = picture((160, 160, 3), 1)
    eng = Engine(str(package), cache_mb=0)
    fake = attach(eng)  # every call fails
    with caplog.at_level(logging.WARNING, logger="a2r_edge"):
        out = eng.convert(img)
    lines = [r.getMessage() for r in caplog.records]
    assert [l for l in lines if "retrying in tiles of 80 px" in l]
    assert "falling back to the CPU for every GPU stage" in lines[-1]
    np.testing.assert_array_equal(out, Engine(str(package), cache_mb=0).convert(img))
    calls = fake.calls
    eng.convert(img)  # stays on the CPU: the GPU is not tried again
    assert fake.calls == calls


def test_loader_error_falls_back_without_tile_retry(package, caplog, monkeypatch):
    """A real GPU call through the CUDA loader: unavailable here (no library or no device), or
    out of memory with A2R_CUDA_FAULT=oom where the library and a device exist."""
    monkeypatch.setenv("A2R_CUDA_FAULT", "oom")
    eng = Engine(str(package), cache_mb=0)

    def gpu(x):
        cuda.DeviceBuffer(x.nbytes)  # raises: CudaUnavailable here, CudaOutOfMemory on a GPU
        raise AssertionError("allocation should have failed")

    eng._attach_gpu("decode", gpu)
    img = picture((40, 48, 3), 2)
    with caplog.at_level(logging.WARNING, logger="a2r_edge"):
        out = eng.convert(img)
    assert "falling back to the CPU" in caplog.text
    np.testing.assert_array_equal(out, Engine(str(package), cache_mb=0).convert(img))


def test_strict_raises_instead_of_falling_back(package):
    eng = Engine(str(package), cache_mb=0, strict=True)
    attach(eng)
    with pytest.raises(RuntimeError, match="strict=True") as info:
        eng.convert(picture((32, 32, 3)))
    assert isinstance(info.value.__cause__, cuda.CudaOutOfMemory)
    with pytest.raises(TypeError, match="strict"):
        Engine(str(package), strict="yes")


def test_cpu_errors_are_not_swallowed(package):
    eng = Engine(str(package), cache_mb=0)
    eng._forward.runners["decode"] = lambda x: (_ for _ in ()).throw(MemoryError("cpu oom"))
    with pytest.raises(MemoryError, match="cpu oom"):
        eng.convert(picture((32, 32, 3)))


def test_stream_and_batch_fall_back(package, caplog):
    frames = [picture((40, 40, 3), i) for i in range(5)]
    want = [Engine(str(package), cache_mb=0).convert(f) for f in frames]
    for method in ("stream", "convert_batch"):
        eng = Engine(str(package), cache_mb=0)
        attach(eng, exc=cuda.CudaError("kernel launch failed (injected)"))
        with caplog.at_level(logging.WARNING, logger="a2r_edge"):
            got = list(getattr(eng, method)(iter(frames)))
        assert "kernel launch failed" in caplog.text
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_four_threads_equal_sequential(package):
    eng = Engine(str(package), cache_mb=0)
    shapes = [(24, 32, 3), (17, 9), (20, 20, 4), (33, 16, 3)]
    pics = [picture(shapes[i % 4], i) for i in range(16)]
    want = [eng.convert(p) for p in pics]
    got = [None] * len(pics)
    errors = []

    def work(k):
        try:
            for i in range(k, len(pics), 4):
                got[i] = eng.convert(pics[i])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_stream_closed_halfway_releases_threads(package):
    eng = Engine(str(package), cache_mb=0)
    baseline = threading.active_count()

    def endless():
        i = 0
        while True:
            yield picture((24, 24, 3), i % 3)
            i += 1

    for _ in range(3):
        it = eng.stream(endless())
        for _, _out in zip(range(5), it):
            pass
        assert threading.active_count() > baseline  # the pipeline's workers are running
        it.close()
        assert threading.active_count() == baseline


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_soak_300_frames_no_growth(package):
    eng = Engine(str(package), cache_mb=0)
    frames = [picture((48, 64, 3), i) for i in range(4)]

    def feed(n):
        for i in range(n):
            yield frames[i % 4]

    for _ in eng.stream(feed(60)):  # warm-up: buffers, executor arenas, thread stacks
        pass
    gc.collect()
    rss0, fds0 = _rss_bytes(), len(os.listdir("/proc/self/fd"))
    threads0 = threading.active_count()
    n = 0
    for _ in eng.stream(feed(300)):
        n += 1
    gc.collect()
    growth = _rss_bytes() - rss0
    assert n == 300
    assert growth < 5 << 20, f"RSS grew by {growth / 2**20:.1f} MiB over 300 frames"
    assert len(os.listdir("/proc/self/fd")) <= fds0
    assert threading.active_count() == threads0
