"""transpose (the executor's Transpose of float32 NCHW <-> NHWC, the 2-D case) beside
onnxruntime's Transpose and OpenCV's cv2.transpose, on a 64-channel 256x256 map (16 MB each way:
memory-bound), both directions. The executor's one-op graph adds its input copy
(bench_generator_ops.py); these call the kernel on the arrays themselves, as a plan's step does.
Target (the executor's peer): >= 1.3x onnxruntime."""
import numpy as np
import pytest

from a2r_edge import _kernels
from conftest import compare

C, HW = 64, 256 * 256
CASES = {"NCHW -> NHWC": (C, HW, (0, 2, 1)), "NHWC -> NCHW": (HW, C, (0, 2, 1))}


def _arrays(rows, cols):
    x = np.random.default_rng(0).standard_normal((1, rows, cols)).astype(np.float32)
    return x, np.empty((1, cols, rows), np.float32)


@pytest.mark.parametrize("case", list(CASES))
def test_transpose_vs_onnxruntime(benchmark, threads, case):
    from onnx import helper

    from a2r_edge.runtime.ort import single_op_session
    rows, cols, perm = CASES[case]
    x, y = _arrays(rows, cols)
    sess = single_op_session([helper.make_node("Transpose", ["x"], ["y"], perm=list(perm))], {},
                             threads).session
    feed = {"x": x}
    _kernels.transpose(x.reshape(-1), 1, rows, cols, y.reshape(-1))
    np.testing.assert_array_equal(sess.run(None, feed)[0], y)
    compare(benchmark, lambda: _kernels.transpose(x.reshape(-1), 1, rows, cols, y.reshape(-1)),
            lambda: sess.run(None, feed), op="transpose", case=f"{case} {C}x256^2",
            threads=threads, peer_name="ort Transpose", bytes_moved=2 * x.nbytes, target=1.3)


@pytest.mark.parametrize("case", list(CASES))
def test_transpose_vs_opencv(benchmark, threads, case):
    cv2 = pytest.importorskip("cv2")
    rows, cols, _ = CASES[case]
    x, y = _arrays(rows, cols)
    x2, y2 = x[0], np.empty((cols, rows), np.float32)
    compare(benchmark, lambda: _kernels.transpose(x.reshape(-1), 1, rows, cols, y.reshape(-1)),
            lambda: cv2.transpose(x2, y2), op="transpose", case=f"{case} {C}x256^2",
            threads=threads, peer_name="cv2.transpose", bytes_moved=2 * x.nbytes)
