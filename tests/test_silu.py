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
    x = (rng.standard_normal(n) * 8).astype(np.float32)
    np.testing.assert_allclose(ops.silu(x), ref.silu(x), **ELEMENTWISE)


def test_special_values(native):
    x = np.array([np.inf, -np.inf, np.nan, -120.0, 120.0, 0.0, -0.0, 88.7, -88.7, 1e-30],
                 np.float32)
    np.testing.assert_allclose(ops.silu(x), ref.silu(x), equal_nan=True, **ELEMENTWISE)


def test_in_place_and_out(native, rng):
    x = rng.standard_normal((3, 5, 7)).astype(np.float32)
    want = ref.silu(x)
    out = np.empty_like(x)
    assert ops.silu(x, out=out) is out
    np.testing.assert_allclose(out, want, **ELEMENTWISE)
    assert ops.silu(x, out=x) is x
    np.testing.assert_allclose(x, want, **ELEMENTWISE)


def test_vector_body_equals_scalar_tail(native):
    """Whole vectors go through the vector exp, a tail through the scalar one: the same bits,
    over the clamps and special cases too (each 1-element call is all tail)."""
    x = np.concatenate([np.linspace(-120, 120, 997), [-np.inf, np.inf, np.nan, -0.0, 0.0,
                        -88.72, -88.73, 88.7, 88.71, -87.3, 87.3, 103.9, 104.0, 1e-30, -1e-30]])
    x = x.astype(np.float32)
    whole = ops.silu(x)
    one_by_one = np.array([ops.silu(x[i:i + 1])[0] for i in range(x.size)], np.float32)
    np.testing.assert_array_equal(whole.view(np.uint32), one_by_one.view(np.uint32))


def test_relative_error_against_float64(native):
    """The polynomial e^-x (a2r_math.h) keeps the result within 5e-7 (about 4 ulp) of the exact
    SiLU wherever that is a normal float, over the whole range the clamps leave alone."""
    x = np.concatenate([np.linspace(-88.3, 88.3, 400_001),
                        np.random.default_rng(0).standard_normal(100_000) * 4]).astype(np.float32)
    exact = x.astype(np.float64) / (1 + np.exp(-x.astype(np.float64)))
    normal = np.abs(exact) >= np.finfo(np.float32).tiny
    got = ops.silu(x).astype(np.float64)
    assert np.max(np.abs(got[normal] - exact[normal]) / np.abs(exact[normal])) < 5e-7


def test_zero_dimensional(native):
    """A 0-d array keeps its shape (numpy's ascontiguousarray makes it 1-d), with out= too."""
    x = np.array(2.0, np.float32)
    got = ops.silu(x)
    assert got.shape == () and got.dtype == np.float32
    np.testing.assert_allclose(got, ref.silu(x), **ELEMENTWISE)
    out = np.empty((), np.float32)
    assert ops.silu(x, out=out) is out and out.shape == ()
    assert ops.silu(x, out=x) is x
    np.testing.assert_allclose(x, ref.silu(np.array(2.0, np.float32)), **ELEMENTWISE)


def test_non_contiguous_and_byteswapped(rng):
    x = rng.standard_normal((20, 30)).astype(np.float32)
    np.testing.assert_allclose(ops.silu(x[::2, ::3]), ref.silu(x[::2, ::3]), **ELEMENTWISE)
    np.testing.assert_allclose(ops.silu(x.astype(">f4")), ref.silu(x), **ELEMENTWISE)


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=40),
                  elements=st.floats(-1e4, 1e4, width=32)),
       st.sampled_from(cpu.available_isas()))
def test_hypothesis(x, level):
    with cpu.using_isa(level):
        np.testing.assert_allclose(ops.silu(x), ref.silu(x), **ELEMENTWISE)
