"""ops.tanh (and the model ops Tanh and Sigmoid built on it): every ISA level x 1 and 2 threads
against the float64 oracle, its special values and sign, the vector body against the scalar
tail bit for bit, its relative error, in place and out=, odd shapes."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from a2r_edge import ops
from a2r_edge.model import reference as ref
from a2r_edge.runtime import cpu
from tolerances import ELEMENTWISE

SIZES = [1, 7, 13, 17, 127, 237, 1080 * 1920]


@pytest.mark.parametrize("n", SIZES)
def test_matches_reference(native, rng, n):
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    np.testing.assert_allclose(ops.tanh(x), ref.tanh(x), **ELEMENTWISE)


def test_special_values_and_sign(native):
    x = np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 1e-30, -1e-30, 1e-45, -1e-45,
                  9.0, -9.0, 88.7, -88.7, 1e4, -3e38], np.float32)
    got = ops.tanh(x)
    np.testing.assert_allclose(got, ref.tanh(x), equal_nan=True, **ELEMENTWISE)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(x))
    np.testing.assert_array_equal(np.signbit(got[2:]), np.signbit(x[2:]))  # -0 stays -0
    assert np.all(np.abs(got[~np.isnan(got)]) <= 1)


def test_vector_body_equals_scalar_tail(native):
    """Whole vectors go through a2r_vtanh, a tail through a2r_tanh1: the same bits, across the
    switch from the series to the exp (at |x| = 0.25) and the clamps (each 1-element call is all
    tail)."""
    x = np.concatenate([np.linspace(-30, 30, 997), np.linspace(-0.3, 0.3, 601),
                        [-np.inf, np.inf, np.nan, -0.0, 0.0, 0.25, -0.25, 0.24999999, 43.6,
                         43.7, 1e-30, -1e-30]]).astype(np.float32)
    whole = ops.tanh(x)
    one_by_one = np.array([ops.tanh(x[i:i + 1])[0] for i in range(x.size)], np.float32)
    np.testing.assert_array_equal(whole.view(np.uint32), one_by_one.view(np.uint32))


def test_relative_error_against_float64(native):
    """The series below |x| = 0.25 and (1 - e) / (1 + e) above it (a2r_math.h) keep the result
    within 1e-6 of the exact tanh wherever that is a normal float (measured: 3.1e-7)."""
    x = np.concatenate([np.linspace(-12, 12, 400_001), np.geomspace(1e-30, 0.5, 10_000),
                        np.random.default_rng(0).standard_normal(100_000) * 2]).astype(np.float32)
    exact = np.tanh(x.astype(np.float64))
    normal = np.abs(exact) >= np.finfo(np.float32).tiny
    got = ops.tanh(x).astype(np.float64)
    assert np.max(np.abs(got[normal] - exact[normal]) / np.abs(exact[normal])) < 1e-6


def test_in_place_out_and_shapes(native, rng):
    x = rng.standard_normal((3, 5, 7)).astype(np.float32)
    want = ref.tanh(x)
    out = np.empty_like(x)
    assert ops.tanh(x, out=out) is out
    np.testing.assert_allclose(out, want, **ELEMENTWISE)
    assert ops.tanh(x, out=x) is x
    np.testing.assert_allclose(x, want, **ELEMENTWISE)
    z = np.array(0.5, np.float32)
    assert ops.tanh(z).shape == ()
    y = rng.standard_normal((20, 30)).astype(np.float32)
    np.testing.assert_allclose(ops.tanh(y[::2, ::3]), ref.tanh(y[::2, ::3]), **ELEMENTWISE)
    np.testing.assert_allclose(ops.tanh(y.astype(">f4")), ref.tanh(y), **ELEMENTWISE)


def test_bad_input():
    with pytest.raises(TypeError, match="x"):
        ops.tanh(np.zeros(3, np.float64))
    with pytest.raises(ValueError, match="out"):
        ops.tanh(np.zeros(3, np.float32), out=np.zeros(4, np.float32))


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=40),
                  elements=st.floats(-1e4, 1e4, width=32)),
       st.sampled_from(cpu.available_isas()))
def test_hypothesis(x, level):
    with cpu.using_isa(level):
        np.testing.assert_allclose(ops.tanh(x), ref.tanh(x), **ELEMENTWISE)
