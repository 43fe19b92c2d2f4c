"""guided_filter beside cv2.ximgproc.guidedFilter: 1024x1024, r = 8, eps = 1e-2, float32 in [0, 1).

Targets (1 thread): >= 4x OpenCV with a gray guide, >= 3x with a colour guide. The same cases
run at 2 threads (OpenCV gets 2 threads too, through the threads fixture). The detail-layer
case (the engine's detail stage, one channel) is held to the gray-guide target."""
import numpy as np
import pytest

from a2r_edge import ops
from conftest import compare

cv2 = pytest.importorskip("cv2")

SIZE, RADIUS, EPS = 1024, 8, 1e-2
CASES = {  # name: (guide channels, src channels, target speed-up over OpenCV)
    "gray guide, gray src": (1, 1, 4.0),
    "gray guide, 3ch src": (1, 3, 4.0),
    "colour guide, gray src": (3, 1, 3.0),
    "colour guide, 3ch src": (3, 3, 3.0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_guided_filter(benchmark, threads, case):
    gc, sc, target = CASES[case]
    rng = np.random.default_rng(0)
    guide = rng.random((SIZE, SIZE, gc) if gc > 1 else (SIZE, SIZE), dtype=np.float32)
    src = rng.random((SIZE, SIZE, sc) if sc > 1 else (SIZE, SIZE), dtype=np.float32)
    compare(benchmark, lambda: ops.guided_filter(guide, src, RADIUS, EPS),
            lambda: cv2.ximgproc.guidedFilter(guide, src, RADIUS, EPS),
            op="guided_filter", case=f"{SIZE}^2 r{RADIUS} {case}", threads=threads,
            peer_name="cv2.ximgproc.guidedFilter", target=target,
            bytes_moved=guide.nbytes + 2 * src.nbytes)


def test_detail_layer(benchmark, threads):
    """The detail stage's per-channel call, base + 0.75 * (src - base) blended in the kernel,
    beside OpenCV's filter followed by the same blend in numpy (what a user would write)."""
    rng = np.random.default_rng(0)
    guide = rng.random((SIZE, SIZE), dtype=np.float32)
    src = rng.random((SIZE, SIZE), dtype=np.float32)
    out = np.empty_like(src)
    detail = np.float32(0.75)

    def peer():
        base = cv2.ximgproc.guidedFilter(guide, src, RADIUS, EPS)
        return base + detail * (src - base)

    compare(benchmark, lambda: ops.guided_filter(guide, src, RADIUS, EPS, out=out, detail=0.75),
            peer, op="guided_filter", case=f"{SIZE}^2 r{RADIUS} gray, detail layer x0.75",
            threads=threads, peer_name="cv2.ximgproc.guidedFilter + numpy blend", target=4.0,
            bytes_moved=guide.nbytes + 2 * src.nbytes)
