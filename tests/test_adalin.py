"""The AdaLIN kernel (a2r_adalin, ops.adalin): U-GAT-IT's instance/layer norm mix with its
per-(sample, channel) gamma and beta in one call, against the float64 reference, on every ISA
level and thread count (the large planes are split between threads)."""
import numpy as np
import pytest

from a2r_edge import _kernels, ops
from a2r_edge.model import reference as ref
from tolerances import REDUCTION

SHAPES = [(1, 1, 1, 1), (2, 3, 1, 7), (1, 16, 8, 10), (2, 5, 33, 27), (1, 4, 256, 256),
          (3, 2, 512, 3), (1, 1, 1080, 1920)]


def _params(rng, n, c, per_sample=True):
    rho = rng.uniform(0, 1, c).astype(np.float32)
    shape = (n, c) if per_sample else (c,)
    return (rho, (1 - rho).astype(np.float32), rng.uniform(0.5, 1.5, shape).astype(np.float32),
            rng.standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("per_sample", [False, True], ids=["affine(C,)", "affine(N,C)"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matches_reference(native, rng, shape, per_sample):
    x = (rng.standard_normal(shape) * 3 + 0.5).astype(np.float32)
    p = _params(rng, *shape[:2], per_sample)
    np.testing.assert_allclose(ops.adalin(x, *p, in_eps=1e-5, ln_eps=3e-5),
                               ref.adalin(x, *p, 1e-5, 3e-5), **REDUCTION)


def test_layer_statistics_are_per_sample(native, rng):
    """Samples of very different scale: each one's layer statistics are its own."""
    x = rng.standard_normal((3, 4, 40, 50)).astype(np.float32)
    x *= np.array([0.01, 1.0, 100.0], np.float32).reshape(3, 1, 1, 1)
    x += np.array([5.0, -2.0, 0.0], np.float32).reshape(3, 1, 1, 1)
    p = (np.zeros(4, np.float32), np.ones(4, np.float32), np.ones(4, np.float32),
         np.zeros(4, np.float32))   # layer norm alone
    y = ops.adalin(x, *p, ln_eps=1e-9)
    np.testing.assert_allclose(y, ref.adalin(x, *p, ln_eps=1e-9), **REDUCTION)
    np.testing.assert_allclose(y.std(axis=(1, 2, 3)), 1.0, rtol=1e-3)


@pytest.mark.parametrize("offset", [1e3, 1e4])
def test_large_offset(native, rng, offset):
    x = (rng.standard_normal((2, 3, 61, 67)) + offset).astype(np.float32)
    p = _params(rng, 2, 3)
    atol = np.spacing(np.float32(offset)) * 2 * float(p[2].max())
    np.testing.assert_allclose(ops.adalin(x, *p), ref.adalin(x, *p), rtol=REDUCTION["rtol"],
                               atol=atol)


def test_constant_sample_maps_to_beta(native):
    x = np.full((1, 2, 33, 35), 7.0, np.float32)
    y = ops.adalin(x, [0.3, 0.9], [0.7, 0.1], [2.0, 3.0], [0.25, -1.0])
    np.testing.assert_array_equal(y[0, 0], 0.25)
    np.testing.assert_array_equal(y[0, 1], -1.0)


def test_out_and_in_place(native, stores, rng):
    x = (rng.standard_normal((2, 3, 200, 201)) + 4).astype(np.float32)
    p = _params(rng, 2, 3)
    want = ref.adalin(x, *p)
    out = np.empty_like(x)
    assert ops.adalin(x, *p, out=out) is out
    np.testing.assert_allclose(out, want, **REDUCTION)
    assert ops.adalin(x, *p, out=x) is x      # every statistic read before x is overwritten
    np.testing.assert_array_equal(x, out)


# A2R_ACT_* codes (a2r_kernels.h) and their numpy meaning
ACTS = {1: lambda v, a: ref.silu(v), 2: lambda v, a: np.maximum(v, np.float32(0)),
        3: lambda v, a: np.where(v >= 0, v, np.float32(a) * v)}


@pytest.mark.parametrize("code", sorted(ACTS))
@pytest.mark.parametrize("shape", [(1, 3, 13, 17), (2, 4, 300, 257)],
                         ids=lambda s: "x".join(map(str, s)))
def test_activation_epilogues(native, stores, rng, shape, code):
    """The fused activation (executor: AdaLIN + Relu); the kernel entry, in place."""
    n, c = shape[:2]
    x = (rng.standard_normal(shape) * 2 + 0.3).astype(np.float32)
    wi, wl, g, b = (v.reshape(-1) for v in _params(rng, n, c))
    want = ACTS[code](ref.adalin(x, wi, wl, g.reshape(n, c), b.reshape(n, c), 1e-5, 1e-5), 0.2)
    _kernels.adalin(x.reshape(-1), n, c, shape[2] * shape[3], wi, wl, g, b, 1e-5, 1e-5, code,
                    0.2, np.empty(2 * n * c), x.reshape(-1))
    np.testing.assert_allclose(x, want, **REDUCTION)


def test_nan_stays_in_its_sample(native, rng):
    x = rng.standard_normal((2, 3, 30, 31)).astype(np.float32)
    x[0, 1, 2, 3] = np.nan
    p = _params(rng, 2, 3)
    y = ops.adalin(x, *p)
    assert np.isnan(y[0]).all()      # the layer statistics of sample 0 are NaN
    np.testing.assert_allclose(y[1:], ref.adalin(x[1:], p[0], p[1], p[2][1:], p[3][1:]),
                               **REDUCTION)


X = np.zeros((2, 3, 4, 5), np.float32)
S3 = np.ones(3, np.float32)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(x=X[0]), ValueError, r"x must have shape \(N, C, H, W\)"),
    (dict(x=X.astype(np.float64)), TypeError, "x must have dtype float32"),
    (dict(in_weight=np.ones(4)), ValueError, r"in_weight must have shape \(3,\)"),
    (dict(ln_weight=np.ones((2, 3))), ValueError, r"ln_weight must have shape \(3,\)"),
    (dict(gamma=np.ones((3, 2))), ValueError, r"gamma must have shape \(3,\) or \(2, 3\)"),
    (dict(beta=[0, np.inf, 0]), ValueError, "beta must be finite"),
    (dict(in_eps=0.0), ValueError, "in_eps must be > 0"),
    (dict(ln_eps=-1.0), ValueError, "ln_eps must be > 0"),
    (dict(out=np.empty((2, 3, 4, 6), np.float32)), ValueError, "out must be a C-contiguous"),
])
def test_bad_inputs(kwargs, exc, match):
    args = dict(x=X, in_weight=S3, ln_weight=S3, gamma=S3, beta=S3) | kwargs
    with pytest.raises(exc, match=match):
        ops.adalin(**args)
