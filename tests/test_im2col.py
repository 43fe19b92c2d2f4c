import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from a2r_edge import ops
from a2r_edge.model import reference as ref
from a2r_edge.runtime import cpu
from tolerances import REDUCTION

KERNELS = [(1, 1), (3, 3), (5, 5), (7, 7), (3, 1)]
STRIDES, PADS, DILATIONS = [1, 2, 3], [0, 1, 2, 3], [1, 2]
# (c, h, w) over the tail sizes 1, 7, 13, 17, 127, 237 and channel counts 1-5.
SHAPES = [(1, 1, 1), (2, 7, 13), (3, 13, 17), (4, 17, 7), (5, 1, 237), (1, 237, 1),
          (2, 127, 17)]


def out_size(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def im2col_loops(x, kernel, stride, pad, dilation):
    """Caffe im2col with zero padding, element by element."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, pad, dilation
    c, h, w = x.shape
    oh, ow = out_size(h, kh, sh, ph, dh), out_size(w, kw, sw, pw, dw)
    out = np.zeros((c * kh * kw, oh * ow), x.dtype)
    for ci in range(c):
        for i in range(kh):
            for j in range(kw):
                for y in range(oh):
                    for x_ in range(ow):
                        iy, ix = y * sh - ph + i * dh, x_ * sw - pw + j * dw
                        if 0 <= iy < h and 0 <= ix < w:
                            out[(ci * kh + i) * kw + j, y * ow + x_] = x[ci, iy, ix]
    return out


def test_reference_equals_definition(rng):
    x = rng.standard_normal((2, 5, 6)).astype(np.float32)
    for k, s, p, d in [((3, 3), (1, 1), (1, 1), (1, 1)), ((3, 1), (2, 1), (0, 2), (1, 2)),
                       ((2, 3), (3, 2), (3, 0), (2, 1)), ((1, 1), (1, 1), (0, 0), (1, 1))]:
        np.testing.assert_array_equal(ref.im2col(x, k, s, p, d), im2col_loops(x, k, s, p, d))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_option_matrix(native, rng, shape):
    """Every kernel x stride x pad x dilation; combinations that do not fit must raise."""
    x = rng.standard_normal(shape).astype(np.float32)
    c, h, w = shape
    for k, s, p, d in itertools.product(KERNELS, STRIDES, PADS, DILATIONS):
        args = dict(stride=s, pad=p, dilation=d)
        if out_size(h, k[0], s, p, d) < 1 or out_size(w, k[1], s, p, d) < 1:
            with pytest.raises(ValueError, match="kernel"):
                ops.im2col(x, k, **args)
            continue
        got = ops.im2col(x, k, **args)
        want = ref.im2col(x, k, (s, s), (p, p), (d, d))
        assert got.shape == want.shape, (k, s, p, d)
        np.testing.assert_array_equal(got, want, err_msg=f"kernel {k} stride {s} pad {p} dil {d}")


def test_definition_tiny(native, rng):
    x = rng.standard_normal((2, 4, 5)).astype(np.float32)
    for k, s, p, d in [(3, 1, 1, 1), ((3, 1), (1, 2), (2, 0), (1, 2)), (2, 3, 3, 2),
                       ((1, 3), 2, (0, 1), 1), (5, 1, 2, 1)]:
        kk, ss, pp, dd = [(v, v) if isinstance(v, int) else v for v in (k, s, p, d)]
        np.testing.assert_array_equal(ops.im2col(x, k, s, p, d), im2col_loops(x, kk, ss, pp, dd))


def test_asymmetric_pairs(native, rng):
    x = rng.standard_normal((3, 19, 23)).astype(np.float32)
    got = ops.im2col(x, (5, 3), stride=(2, 3), pad=(1, 3), dilation=(2, 1))
    np.testing.assert_array_equal(got, ref.im2col(x, (5, 3), (2, 3), (1, 3), (2, 1)))


@pytest.mark.parametrize("stride", [1, 2])
def test_large(native, rng, stride):
    x = rng.standard_normal((64, 128, 128)).astype(np.float32)
    np.testing.assert_array_equal(ops.im2col(x, 3, stride=stride, pad=1),
                                  ref.im2col(x, (3, 3), (stride, stride), (1, 1), (1, 1)))


@pytest.mark.parametrize("shape, kernel, stride, pad", [
    ((2, 40, 1100), 7, 1, 3),    # 17 MB result
    ((8, 64, 2100), 5, 2, 2),    # 27 MB result, stride-2 gather
    ((1, 3, 3000), (1, 3), 1, (0, 1)),
])
def test_wide_rows(native, rng, shape, kernel, stride, pad):
    """Long output rows and results larger than a last-level cache."""
    x = rng.standard_normal(shape).astype(np.float32)
    k, s, p = [(v, v) if isinstance(v, int) else v for v in (kernel, stride, pad)]
    np.testing.assert_array_equal(ops.im2col(x, kernel, stride, pad),
                                  ref.im2col(x, k, s, p, (1, 1)))


def test_conv_via_im2col(rng):
    """im2col @ weights.reshape(O, -1) is the convolution computed tap by tap."""
    c, h, w, o, k, s, p, d = 5, 17, 13, 4, 3, 2, 2, 1
    x = rng.standard_normal((c, h, w)).astype(np.float32)
    wt = rng.standard_normal((o, c, k, k)).astype(np.float32)
    oh, ow = out_size(h, k, s, p, d), out_size(w, k, s, p, d)
    xp = np.pad(x.astype(np.float64), ((0, 0), (p, p), (p, p)))
    direct = np.zeros((o, oh, ow))
    for i in range(k):
        for j in range(k):
            patch = xp[:, i * d: i * d + s * (oh - 1) + 1: s, j * d: j * d + s * (ow - 1) + 1: s]
            direct += np.einsum("oc,cyx->oyx", wt[:, :, i, j].astype(np.float64), patch)
    got = (wt.reshape(o, -1) @ ops.im2col(x, k, stride=s, pad=p, dilation=d)).reshape(o, oh, ow)
    np.testing.assert_allclose(got, direct, **REDUCTION)


def test_non_contiguous_and_byteswapped(rng):
    x = rng.standard_normal((4, 20, 30)).astype(np.float32)
    view = x[::2, 1::2, ::3]
    np.testing.assert_array_equal(ops.im2col(view, 3, pad=1),
                                  ref.im2col(view.copy(), (3, 3), (1, 1), (1, 1), (1, 1)))
    np.testing.assert_array_equal(ops.im2col(x.astype(">f4"), (3, 1), stride=2),
                                  ref.im2col(x, (3, 1), (2, 2), (0, 0), (1, 1)))


pair = st.tuples(st.integers(1, 4), st.integers(1, 4))


@settings(max_examples=80, deadline=None)
@given(st.tuples(st.integers(1, 4), st.integers(1, 30), st.integers(1, 30)), pair,
       st.tuples(st.integers(1, 3), st.integers(1, 3)), st.tuples(st.integers(0, 3),
                                                                   st.integers(0, 3)),
       st.tuples(st.integers(1, 2), st.integers(1, 2)), st.sampled_from(cpu.available_isas()),
       st.sampled_from([1, 2]))
def test_hypothesis(shape, kernel, stride, pad, dilation, level, threads):
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    fits = all(out_size(n, k, s, p, d) >= 1 for n, k, s, p, d in
               zip(shape[1:], kernel, stride, pad, dilation))
    with cpu.using_isa(level), cpu.using_threads(threads):
        if not fits:
            with pytest.raises(ValueError, match="kernel"):
                ops.im2col(x, kernel, stride, pad, dilation)
            return
        np.testing.assert_array_equal(ops.im2col(x, kernel, stride, pad, dilation),
                                      ref.im2col(x, kernel, stride, pad, dilation))


X = np.zeros((2, 5, 5), np.float32)


@pytest.mark.parametrize("x, kwargs, exc, name", [
    (X.astype(np.float64), {}, TypeError, "x"),
    (X.astype(np.int32), {}, TypeError, "x"),
    (X.tolist(), {}, TypeError, "x"),
    (X[0], {}, ValueError, "x"),
    (X[None], {}, ValueError, "x"),
    (np.zeros((2, 0, 5), np.float32), {}, ValueError, "x"),
    (X, dict(kernel=6), ValueError, "kernel"),                      # larger than 5x5
    (X, dict(kernel=8, pad=1), ValueError, "kernel"),               # larger than padded 7x7
    (X, dict(kernel=3, dilation=3), ValueError, "kernel"),          # spans 7 > 5
    (X, dict(kernel=(3, 3, 3)), ValueError, "kernel"),
    (X, dict(kernel=0), ValueError, "kernel"),
    (X, dict(kernel=True), TypeError, "kernel"),
    (X, dict(kernel=3.0), TypeError, "kernel"),
    (X, dict(kernel=(3, "3")), TypeError, "kernel"),
    (X, dict(stride=0), ValueError, "stride"),
    (X, dict(stride=(1, 0)), ValueError, "stride"),
    (X, dict(pad=-1), ValueError, "pad"),
    (X, dict(pad=(0, -2)), ValueError, "pad"),
    (X, dict(dilation=0), ValueError, "dilation"),
    (X, dict(dilation=False), TypeError, "dilation"),
])
def test_bad_inputs(x, kwargs, exc, name):
    kwargs = {"kernel": 3, **kwargs}
    with pytest.raises(exc, match=rf"\b{name}\b"):
        ops.im2col(x, **kwargs)


def test_out_is_filled_and_checked(rng):
    x = rng.standard_normal((2, 6, 7)).astype(np.float32)
    out = np.full((18, 42), np.nan, np.float32)
    assert ops.im2col(x, 3, pad=1, out=out) is out
    np.testing.assert_array_equal(out, ref.im2col(x, (3, 3), (1, 1), (1, 1), (1, 1)))
    with pytest.raises(ValueError, match="out must be a C-contiguous float32 array"):
        ops.im2col(x, 3, pad=1, out=np.empty((18, 41), np.float32))
