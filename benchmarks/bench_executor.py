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
from conftest import compare  # noqa: E402

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
