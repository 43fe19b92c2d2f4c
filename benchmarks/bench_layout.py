"""pixel_shuffle and im2col: pure data movement, judged against the measured copy bandwidth and
against the numpy way of doing the same thing (a strided view, then one copy)."""
import numpy as np
import pytest

from a2r_edge import ops
from conftest import compare


@pytest.mark.parametrize("r", [2, 3])
def test_pixel_shuffle(benchmark, threads, r):
    # Output 64 channels at 512x512 for r = 2 (the usual x2 up-sampler tail); r = 3 same input size.
    x = np.random.default_rng(0).standard_normal((1, 64 * r * r, 512 // r, 512 // r),
                                                 dtype=np.float32)
    n, c, h, w = x.shape
    y = np.empty((n, c // (r * r), h * r, w * r), np.float32)

    def numpy_shuffle():
        v = x.reshape(n, c // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3)
        np.copyto(y.reshape(n, c // (r * r), h, r, w, r), v)

    numpy_shuffle()
    np.testing.assert_array_equal(ops.pixel_shuffle(x, r), y)
    compare(benchmark, lambda: ops.pixel_shuffle(x, r), numpy_shuffle, op="pixel_shuffle",
            case=f"r={r} {c}x{h}x{w}", threads=threads,
            peer_name="numpy reshape/transpose/copy", bytes_moved=2 * x.nbytes,
            target_bandwidth=0.6)


@pytest.mark.parametrize("stride", [1, 2])
def test_im2col(benchmark, threads, stride):
    x = np.random.default_rng(0).standard_normal((64, 128, 128), dtype=np.float32)
    k, pad = 3, 1
    c, h, w = x.shape
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    xp = np.empty((c, h + 2 * pad, w + 2 * pad), np.float32)
    cols = np.empty((c, k, k, oh, ow), np.float32)

    def numpy_im2col():
        # Pad into a reused buffer, a (c, oh, ow, k, k) window view, one copy into Caffe layout.
        xp[:, :pad], xp[:, -pad:], xp[:, :, :pad], xp[:, :, -pad:] = 0, 0, 0, 0
        xp[:, pad:-pad, pad:-pad] = x
        win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(1, 2))
        np.copyto(cols, win[:, ::stride, ::stride].transpose(0, 3, 4, 1, 2))
        return cols.reshape(c * k * k, oh * ow)

    out = ops.im2col(x, k, stride=stride, pad=pad)
    np.testing.assert_array_equal(numpy_im2col(), out)
    compare(benchmark, lambda: ops.im2col(x, k, stride=stride, pad=pad), numpy_im2col,
            op="im2col", case=f"3x3 s{stride} p1 {c}x{h}x{w}", threads=threads,
            peer_name="numpy sliding_window_view", bytes_moved=out.nbytes + x.nbytes,
            target=3.0 if stride == 1 else None, target_bandwidth=0.6)
