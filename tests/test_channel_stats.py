import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from a2r_edge import ops
from a2r_edge.model import reference as ref
from a2r_edge.runtime import cpu
from tolerances import REDUCTION

# (N, C, H, W): plane sizes 1, 7, 13, 17, 127, 237 and 1080*1920 (not multiples of any vector
# width or block), N and C varied; 1x3x512x512 and the full-HD plane are split across 2 threads.
SHAPES = [(1, 1, 1, 1), (2, 3, 1, 7), (1, 5, 13, 1), (3, 2, 1, 17), (1, 4, 127, 1),
          (2, 3, 3, 79), (1, 3, 512, 512), (1, 1, 1080, 1920)]

# The contract (tests/tolerances.py): relative error <= 1e-4, no absolute slack.
RELATIVE = dict(rtol=REDUCTION["rtol"], atol=0)


def _check(x, eps=1e-5, **tol):
    mean, std = ops.channel_stats(x, eps)
    want_mean, want_std = ref.channel_stats(x, eps)
    assert mean.dtype == std.dtype == np.float32 and mean.shape == std.shape == x.shape[:2]
    np.testing.assert_allclose(mean, want_mean, **(tol or REDUCTION))
    np.testing.assert_allclose(std, want_std, **(tol or REDUCTION))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matches_reference(native, rng, shape):
    _check((rng.standard_normal(shape) * 3 + 0.5).astype(np.float32))


@pytest.mark.parametrize("offset", [1e3, 1e4])
@pytest.mark.parametrize("shape", [(2, 3, 37, 41), (1, 2, 300, 301)], ids=str)
def test_large_offset(native, rng, shape, offset):
    """Mean 1000 (or 1e4), std 1: naive float32 E[x^2] - E[x]^2 is off by 100 %+ here."""
    _check((rng.standard_normal(shape) + offset).astype(np.float32), **RELATIVE)


def test_adversarial_layouts(native, rng):
    """Data whose local means wander far from the plane's: the per-block pivots (the running
    mean) are then far from the block, which must not cancel (moments.h error bound)."""
    hw = 257 * 263
    base = rng.standard_normal((6, hw)).astype(np.float64)
    base[0, : hw // 2] += 1e4                            # bright top half, dark bottom half
    base[1, 0] += 1e5                                    # one far outlier first
    base[2] += np.linspace(0, 5e3, hw)                   # a ramp: every block has a new mean
    base[3] = base[3] * 1e-3 + 1e3                       # tiny spread on a large offset
    base[4, hw // 2:] = 7.0                              # half constant
    base[5] = np.sort(base[5])                           # sorted: block means climb
    x = base.astype(np.float32).reshape(1, 6, 257, 263)
    _check(x, **RELATIVE)


def test_constant_planes(native):
    x = np.full((2, 3, 45, 77), 1234.5, np.float32)
    x[1, 2] = -3.0
    mean, std = ops.channel_stats(x, eps=1e-5)
    np.testing.assert_array_equal(mean, x[:, :, 0, 0])
    np.testing.assert_allclose(std, np.sqrt(np.float32(1e-5)), rtol=1e-6)
    mean, std = ops.channel_stats(x, eps=0.0)
    np.testing.assert_array_equal(std, 0.0)


def test_one_element_planes(native, rng):
    x = rng.standard_normal((4, 9, 1, 1)).astype(np.float32)
    mean, std = ops.channel_stats(x, eps=0.25)
    np.testing.assert_array_equal(mean, x[:, :, 0, 0])
    np.testing.assert_array_equal(std, 0.5)


def test_nan_and_inf_stay_in_their_plane(native, rng):
    x = rng.standard_normal((1, 4, 300, 301)).astype(np.float32)
    x[0, 1, 5, 7] = np.nan
    x[0, 2, 299, 300] = np.inf
    mean, std = ops.channel_stats(x)
    assert np.isnan(std[0, 1]) and np.isnan(mean[0, 1]) and not np.isfinite(std[0, 2])
    want_mean, want_std = ref.channel_stats(x[:, [0, 3]])
    np.testing.assert_allclose(mean[:, [0, 3]], want_mean, **REDUCTION)
    np.testing.assert_allclose(std[:, [0, 3]], want_std, **REDUCTION)


@pytest.mark.parametrize("scale", [1e19, 1e38, 3.4e38])
def test_values_near_float_max(native, rng, scale):
    """Finite values whose deviations or squares overflow float32 (d*d beyond 3.4e38): the
    blocks whose float lanes overflow are redone in float64, never NaN."""
    x = (rng.random((2, 3, 37, 129)) * 2 - 1).astype(np.float64) * scale
    x[0, 0] = np.abs(x[0, 0])                       # one plane of one sign: mean near max
    x = x.astype(np.float32)
    assert np.isfinite(x).all()
    mean, std = ops.channel_stats(x)
    assert np.isfinite(mean).all() and np.isfinite(std).all()
    want_mean, want_std = ref.channel_stats(x)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-5, atol=1e-6 * scale)
    np.testing.assert_allclose(std, want_std, rtol=1e-5)
    if scale <= 1e38:  # adain shares the moments; at 3.4e38 its x - mean itself overflows
        y = ops.adain(x, np.zeros(3), np.ones(3))
        np.testing.assert_allclose(y, ref.adain(x, np.zeros(3), np.ones(3)), rtol=1e-4,
                                   atol=1e-4)


def test_non_contiguous_and_byteswapped(rng):
    x = (rng.standard_normal((2, 6, 40, 30)) + 5).astype(np.float32)
    _check(x[:, ::2, 3:, ::3])
    mean, std = ops.channel_stats(x.astype(">f4"))
    want_mean, want_std = ref.channel_stats(x)
    np.testing.assert_allclose(mean, want_mean, **REDUCTION)
    np.testing.assert_allclose(std, want_std, **REDUCTION)


@pytest.mark.parametrize("x, eps, exc, match", [
    (np.zeros((1, 2, 3, 4), np.float64), 1e-5, TypeError, "x must have dtype float32"),
    ([[[[1.0]]]], 1e-5, TypeError, "x must be a numpy.ndarray"),
    (np.zeros((2, 3, 4), np.float32), 1e-5, ValueError, r"x must have shape \(N, C, H, W\)"),
    (np.zeros((1, 0, 3, 4), np.float32), 1e-5, ValueError, "x must not be empty"),
    (np.zeros((1, 2, 3, 4), np.float32), -1e-5, ValueError, "eps must be >= 0"),
    (np.zeros((1, 2, 3, 4), np.float32), float("nan"), ValueError, "eps must be finite"),
    (np.zeros((1, 2, 3, 4), np.float32), "1e-5", TypeError, "eps must be a real number"),
])
def test_bad_inputs(x, eps, exc, match):
    with pytest.raises(exc, match=match):
        ops.channel_stats(x, eps)


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=4, max_dims=4, max_side=24),
                  elements=st.floats(-1e3, 1e3, width=32)),
       st.floats(-1e4, 1e4, width=32), st.sampled_from(cpu.available_isas()),
       st.sampled_from([1, 2]))
def test_hypothesis(x, offset, level, threads):
    x = x + np.float32(offset)
    want_mean, want_std = ref.channel_stats(x)
    with cpu.using_isa(level), cpu.using_threads(threads):
        mean, std = ops.channel_stats(x)
    # Inputs are float32: x's own rounding at |offset| + 1e3 bounds what any method can resolve.
    scale = np.abs(x.astype(np.float64)).max(axis=(2, 3)) * 2.0 ** -23
    np.testing.assert_allclose(mean, want_mean, rtol=REDUCTION["rtol"], atol=scale.max() + 1e-6)
    np.testing.assert_allclose(std, want_std, rtol=REDUCTION["rtol"], atol=scale.max() + 1e-6)
