"""pixel_shuffle and im2col: pure data movement, judged against the measured copy bandwidth and
against the numpy way of doing the same thing (a strided view, then one copy).

Two rows per case. "fresh": ops.* as called (a new output array per call) against the numpy
expression that also returns a new array. "reused": the same kernel writing into one output
buffer (out=) against numpy copying into one buffer.
The copy bandwidth is measured on reused buffers, so "reused" is the row that judges the kernel;
"fresh" adds the kernel zeroing the new pages (first touch), the same for both sides.
"""
import numpy as np
import pytest

from a2r_edge import ops
from conftest import compare

MODES = ["fresh", "reused"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("r", [2, 3])
def test_pixel_shuffle(benchmark, threads, r, mode):
    # Output 64 channels at 512x512 for r = 2 (the usual x2 up-sampler tail); r = 3 same input size.
    x = np.random.default_rng(0).standard_normal((1, 64 * r * r, 512 // r, 512 // r),
                                                 dtype=np.float32)
    n, c, h, w = x.shape
    y = np.empty((n, c // (r * r), h * r, w * r), np.float32)

    def view():
        return x.reshape(n, c // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3)

    if mode == "fresh":
        def ours():
            return ops.pixel_shuffle(x, r)

        def numpy_shuffle():
            return np.ascontiguousarray(view()).reshape(y.shape)
    else:
        y_peer = np.empty((n, c // (r * r), h, r, w, r), np.float32)

        def ours():
            return ops.pixel_shuffle(x, r, out=y)

        def numpy_shuffle():
            y_peer[...] = view()
            return y_peer.reshape(y.shape)

    np.testing.assert_array_equal(ours(), numpy_shuffle())
    np.testing.assert_array_equal(ours(), ops.pixel_shuffle(x, r))
    compare(benchmark, ours, numpy_shuffle, op="pixel_shuffle",
            case=f"r={r} {c}x{h}x{w} {mode}", threads=threads,
            peer_name="numpy reshape/transpose/copy", bytes_moved=2 * x.nbytes,
            target_bandwidth=0.6, rounds=31)  # 31: medians steadier on a shared machine


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stride", [1, 2])
def test_im2col(benchmark, threads, stride, mode):
    x = np.random.default_rng(0).standard_normal((64, 128, 128), dtype=np.float32)
    k, pad = 3, 1
    c, h, w = x.shape
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    xp = np.zeros((c, h + 2 * pad, w + 2 * pad), np.float32)
    cols = np.empty((c, k, k, oh, ow), np.float32)
    out = np.empty((c * k * k, oh * ow), np.float32)

    def windows(padded):
        # (c, oh, ow, k, k) view -> (c, k, k, oh, ow): Caffe row order (c*k + i)*k + j.
        win = np.lib.stride_tricks.sliding_window_view(padded, (k, k), axis=(1, 2))
        return win[:, ::stride, ::stride].transpose(0, 3, 4, 1, 2)

    if mode == "fresh":
        def ours():
            return ops.im2col(x, k, stride=stride, pad=pad)

        def numpy_im2col():
            padded = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
            return windows(padded).reshape(c * k * k, oh * ow)  # the reshape copies
    else:
        def ours():
            return ops.im2col(x, k, stride=stride, pad=pad, out=out)

        def numpy_im2col():
            xp[:, pad:-pad, pad:-pad] = x  # the border of xp stays zero
            np.copyto(cols, windows(xp))
            return cols.reshape(c * k * k, oh * ow)

    np.testing.assert_array_equal(ours(), numpy_im2col())
    np.testing.assert_array_equal(ours(), ops.im2col(x, k, stride=stride, pad=pad))
    compare(benchmark, ours, numpy_im2col,
            op="im2col", case=f"3x3 s{stride} p1 {c}x{h}x{w} {mode}", threads=threads,
            peer_name="numpy sliding_window_view", bytes_moved=out.nbytes + x.nbytes,
            target=3.0 if stride == 1 else None, target_bandwidth=0.6, rounds=31)
