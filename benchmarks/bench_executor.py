"""Native executor vs onnxruntime on the small image-to-image network (a small toon->photo shape):
encoder 3->32->64 (stride 2), 4 residual blocks with InstanceNorm, PixelShuffle decoder."""
import os
import resource
import sys
import tracemalloc

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from onnx_graphs import small_image_net  # noqa: E402

from a2r_edge.runtime.ort import OrtSession  # noqa: E402
from a2r_edge.model import NativeExecutor  # noqa: E402
from conftest import compare, settle  # noqa: E402

MODEL = small_image_net(seed=0).SerializeToString()


def _rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() // 1024


def _memory(run):
    """(tracemalloc peak MiB of numpy+python during ``run``, RSS growth KiB over it); the
    traced peak misses onnxruntime's own arena, RSS sees both (noisy: allocator reuse)."""
    rss0 = _rss_kib()
    tracemalloc.start()
    run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20, _rss_kib() - rss0


@pytest.mark.parametrize("size", [256, 512])
def test_executor(benchmark, threads, size):
    x = np.random.default_rng(0).standard_normal((1, 3, size, size)).astype(np.float32)
    ex = NativeExecutor(MODEL)
    ort = OrtSession(MODEL, threads=threads)   # spinning off (shares_cpu=True)
    ex.run(x)
    np.testing.assert_allclose(ex.run(x), ort.run({"x": x})[0], rtol=1e-3, atol=1e-3)
    p = ex.plan_for({"x": x.shape})
    row = compare(benchmark, lambda: ex.run(x), lambda: ort.run({"x": x}), op="executor",
                  case=f"small net {size}^2", threads=threads, peer_name="onnxruntime",
                  target=1.0, rounds=5)
    # first run of a fresh executor / session: where each one's buffers come into being
    fresh_ex, fresh_ort = NativeExecutor(MODEL), OrtSession(MODEL, threads=threads)
    nat, ortm = _memory(lambda: fresh_ex.run(x)), _memory(lambda: fresh_ort.run({"x": x}))
    row.update(arena_mib=p.arena_floats * 4 / 2**20)
    print(f"\n[{size}^2 {threads}thr] arena {p.arena_floats * 4 / 2**20:.1f} MiB "
          f"(without reuse {p.naive_floats * 4 / 2**20:.1f}); run peak traced: native "
          f"{nat[0]:.2f} MiB, onnxruntime {ortm[0]:.2f} MiB (its arena is not traced); RSS "
          f"growth of a first run: native {nat[1]} KiB, onnxruntime {ortm[1]} KiB")


def matmul_between_convs():
    """Conv 3 -> 64, Relu, Conv 64 -> 64, the map as (H*W, 64) rows through an fp32 MatMul by a
    constant 64 x 64 (numpy's BLAS), back, Conv 64 -> 3: a plan mixing BLAS and native steps."""
    from onnx import numpy_helper
    from onnx_graphs import Builder
    b = Builder(np.random.default_rng(0), 3)

    def shape(values):
        name = b.name("s")
        b.inits.append(numpy_helper.from_array(np.array(values, np.int64), name))
        return name
    y = b.conv(b.node("Relu", [b.conv("x", 3, 64)]), 64, 64)
    t = b.node("Transpose", [b.node("Reshape", [y, shape([64, -1])])], perm=[1, 0])
    t = b.node("MatMul", [t, b.const(b.rng.standard_normal((64, 64)) * 0.1)])
    y = b.node("Reshape", [b.node("Transpose", [t], perm=[1, 0]), shape([1, 64, 128, 128])])
    return b.model(b.conv(y, 64, 3)).SerializeToString()


def test_blas_limit_in_a_plan(benchmark, threads, monkeypatch):
    """The plan's BLAS products under a one-thread BLAS limit (runtime/threads.py
    blas_on_one_thread) beside the same plan without it (built with the limit's threshold out
    of reach), each settled first, at 128^2. Run without OPENBLAS_NUM_THREADS=1 (that setting
    removes what is measured: BLAS's own threads spinning after each call)."""
    from a2r_edge.runtime import threads as thr
    import time
    model = matmul_between_convs()
    x = np.random.default_rng(1).standard_normal((1, 3, 128, 128)).astype(np.float32)
    with monkeypatch.context() as m:
        m.setattr(thr, "BLAS_THREADED_MACS", 1 << 62)
        unlimited = NativeExecutor(model)
        settle(lambda: unlimited.run(x))
    limited = NativeExecutor(model)
    time.sleep(0.3)   # BLAS's threads asleep again before this plan's thread measurements
    settle(lambda: limited.run(x))
    np.testing.assert_array_equal(limited.run(x), unlimited.run(x))
    compare(benchmark, lambda: limited.run(x), lambda: unlimited.run(x), op="executor",
            case="Conv-MatMul-Conv 128^2", threads=threads,
            peer_name="the same plan, BLAS unlimited")
