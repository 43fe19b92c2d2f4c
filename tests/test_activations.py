"""ops.silu, ops.tanh, ops.erf and ops.gelu (the executor's SiLU, Tanh, Sigmoid, Erf and Gelu
run them): every ISA level x 1
and 2 threads against the float64 oracle, special values, the vector body against the scalar
tail bit for bit, the relative error of each polynomial, in place and out=, 0-d, non-contiguous
and byteswapped arrays."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from a2r_edge import ops
from a2r_edge.model import reference as ref
from a2r_edge.runtime import cpu
from tolerances import ELEMENTWISE

SIZES = [1, 7, 13, 17, 127, 237, 1080 * 1920]
# name -> (op, oracle, scale of the random test inputs)


def _erf64(x):
    """erf in float64 (math.erf, value by value: the test extra has no scipy)."""
    return np.asarray(np.frompyfunc(math.erf, 1, 1)(np.asarray(x, np.float64)), np.float64)


def _erfc64(x):
    return np.asarray(np.frompyfunc(math.erfc, 1, 1)(np.asarray(x, np.float64)), np.float64)


def _gelu64(x, approximate="none"):
    """GELU in float64 without cancellation: x/2 erfc(-x / sqrt 2), and the tanh form as
    x / (1 + e^(-2u)) (= x/2 (1 + tanh u))."""
    x = x.astype(np.float64)
    if approximate == "tanh":
        with np.errstate(over="ignore"):   # e^(-2u) = inf far left: x / inf = -0, as wanted
            return x / (1 + np.exp(-2 * np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * _erfc64(-x / np.sqrt(2))


OPS = {"silu": (ops.silu, ref.silu, 8.0), "tanh": (ops.tanh, ref.tanh, 3.0),
       "erf": (ops.erf, _erf64, 2.0),
       "gelu": (ops.gelu, _gelu64, 3.0),
       "gelu_tanh": (lambda x, out=None: ops.gelu(x, "tanh", out=out),
                     lambda x: _gelu64(x, "tanh"), 3.0)}
both = pytest.mark.parametrize("name", list(OPS))


@both
@pytest.mark.parametrize("n", SIZES)
def test_matches_reference(native, rng, n, name):
    op, oracle, scale = OPS[name]
    x = (rng.standard_normal(n) * scale).astype(np.float32)
    np.testing.assert_allclose(op(x), oracle(x), **ELEMENTWISE)


def test_silu_special_values(native):
    x = np.array([np.inf, -np.inf, np.nan, -120.0, 120.0, 0.0, -0.0, 88.7, -88.7, 1e-30],
                 np.float32)
    np.testing.assert_allclose(ops.silu(x), ref.silu(x), equal_nan=True, **ELEMENTWISE)


def test_tanh_special_values_and_sign(native):
    x = np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 1e-30, -1e-30, 1e-45, -1e-45,
                  9.0, -9.0, 88.7, -88.7, 1e4, -3e38], np.float32)
    got = ops.tanh(x)
    np.testing.assert_allclose(got, ref.tanh(x), equal_nan=True, **ELEMENTWISE)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(x))
    np.testing.assert_array_equal(np.signbit(got[2:]), np.signbit(x[2:]))  # -0 stays -0
    assert np.all(np.abs(got[~np.isnan(got)]) <= 1)


# values around each op's clamps and branch points, and the special ones
EDGES = {"silu": [-88.72, -88.73, 88.7, 88.71, -87.3, 87.3, 103.9, 104.0],
         "tanh": [9.0, -9.0, 9.000001, -9.000001, 8.999999, 1e-38, -1e-38],
         # erf's branch point 0.875 (GELU's at 0.875 sqrt 2), erfc's underflow (z^2 = 87.3)
         "erf": [0.875, -0.875, 0.87499994, 0.8750001, 9.3434, 9.3435, -9.3435],
         "gelu": [1.2374369, -1.2374369, 1.2374368, 13.213, 13.214, -13.213, -13.214],
         "gelu_tanh": [-30.0, -9.41, -9.42, 9.42, 30.0]}


@both
def test_vector_body_equals_scalar_tail(native, name):
    """Whole vectors go through the vector form (a2r_vsilu, a2r_vtanh), a tail through the
    scalar one: the same bits, over the clamps and special cases too (each 1-element call is
    all tail)."""
    op = OPS[name][0]
    x = np.concatenate([np.linspace(-120, 120, 997), np.linspace(-0.3, 0.3, 601), EDGES[name],
                        [-np.inf, np.inf, np.nan, -0.0, 0.0, 1e-30, -1e-30]]).astype(np.float32)
    whole = op(x)
    one_by_one = np.array([op(x[i:i + 1])[0] for i in range(x.size)], np.float32)
    np.testing.assert_array_equal(whole.view(np.uint32), one_by_one.view(np.uint32))


def test_erf_and_gelu_special_values(native):
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30, -1e-30, 1e4, -1e4, 3e38, -3e38],
                 np.float32)
    e = ops.erf(x)
    np.testing.assert_array_equal(e[[0, 1, 7, 8, 9, 10]], [1, -1, 1, -1, 1, -1])
    assert np.isnan(e[2]) and np.signbit(e[4]) and not np.signbit(e[3])
    np.testing.assert_allclose(e[5:7], [1.1283792e-30, -1.1283792e-30], rtol=1e-6)
    for form in ("none", "tanh"):
        g = ops.gelu(x, form)
        # +inf -> inf; -inf -> NaN as x/2 (1 + erf) gives (-inf * 0), like onnxruntime's
        assert g[0] == np.inf and np.isnan(g[1]) and np.isnan(g[2])
        assert g[3] == 0 and np.signbit(g[4]) and g[7] == 1e4 and g[8] == 0 and g[9] == 3e38
        np.testing.assert_allclose(g[5:7], [5e-31, -5e-31], rtol=1e-6)


def test_gelu_rejects_an_unknown_form():
    with pytest.raises(ValueError, match="approximate must be"):
        ops.gelu(np.zeros(3, np.float32), "erf")


def test_erf_absolute_error(native):
    """erf within 2e-7 of the exact value everywhere (measured 1.2e-7): the small-|x| series
    keeps the relative error below 2e-7 too, so tiny values keep their digits."""
    x = np.concatenate([np.linspace(-12, 12, 400_001), np.geomspace(1e-30, 1, 10_000),
                        -np.geomspace(1e-30, 1, 10_000)]).astype(np.float32)
    exact = _erf64(x)
    got = ops.erf(x).astype(np.float64)
    assert np.max(np.abs(got - exact)) < 2e-7
    small = (np.abs(x) < 0.875) & (x != 0)
    assert np.max(np.abs(got - exact)[small] / np.abs(exact[small])) < 2e-7


@pytest.mark.parametrize("name, bound", [("silu", 5e-7), ("tanh", 1e-6), ("gelu", 5e-6),
                                         ("gelu_tanh", 2e-5)])
def test_relative_error_against_float64(native, name, bound):
    """silu: the polynomial e^-x (a2r_math.h) keeps the result within 5e-7 (about 4 ulp) of the
    exact SiLU; tanh: its fitted rational within 1e-6 (measured: 8.5e-7); GELU within 5e-6
    (9.1e-7 with FMA, 4.4e-6 without), its tanh form within 2e-5 (9.9e-6: the rounding of its
    float32 argument); wherever the exact value is a normal float, over the range the clamps
    leave alone."""
    rng = np.random.default_rng(0)
    if name == "silu":
        x = np.concatenate([np.linspace(-88.3, 88.3, 400_001), rng.standard_normal(100_000) * 4])
        exact64 = lambda v: v / (1 + np.exp(-v))  # noqa: E731
    elif name == "tanh":
        x = np.concatenate([np.linspace(-12, 12, 400_001), np.geomspace(1e-30, 0.5, 10_000),
                            rng.standard_normal(100_000) * 2])
        exact64 = np.tanh
    else:   # gelu: the negative tail to its clamp (x^2 / 2 = 87.3; the tanh form's exponent
        # at -88.5, as silu's); float32's argument rounding bounds the error there
        low = -13.2 if name == "gelu" else -9.9
        x = np.concatenate([np.linspace(low, 12, 400_001), np.geomspace(1e-30, 1, 10_000),
                            -np.geomspace(1e-30, 1, 10_000),
                            np.clip(rng.standard_normal(100_000) * 3, low, 12)])
        exact64 = OPS[name][1]
    x = x.astype(np.float32)
    exact = exact64(x.astype(np.float64))
    normal = np.abs(exact) >= np.finfo(np.float32).tiny
    got = OPS[name][0](x).astype(np.float64)
    assert np.max(np.abs(got[normal] - exact[normal]) / np.abs(exact[normal])) < bound


@both
def test_in_place_and_out(native, rng, name):
    op, oracle, _ = OPS[name]
    x = rng.standard_normal((3, 5, 7)).astype(np.float32)
    want = oracle(x)
    out = np.empty_like(x)
    assert op(x, out=out) is out
    np.testing.assert_allclose(out, want, **ELEMENTWISE)
    assert op(x, out=x) is x
    np.testing.assert_allclose(x, want, **ELEMENTWISE)


@both
def test_zero_dimensional(native, name):
    """A 0-d array keeps its shape (numpy's ascontiguousarray makes it 1-d), with out= too."""
    op, oracle, _ = OPS[name]
    x = np.array(2.0, np.float32)
    got = op(x)
    assert got.shape == () and got.dtype == np.float32
    np.testing.assert_allclose(got, oracle(x), **ELEMENTWISE)
    out = np.empty((), np.float32)
    assert op(x, out=out) is out and out.shape == ()
    assert op(x, out=x) is x
    np.testing.assert_allclose(x, oracle(np.array(2.0, np.float32)), **ELEMENTWISE)


@both
def test_non_contiguous_and_byteswapped(rng, name):
    op, oracle, _ = OPS[name]
    x = rng.standard_normal((20, 30)).astype(np.float32)
    np.testing.assert_allclose(op(x[::2, ::3]), oracle(x[::2, ::3]), **ELEMENTWISE)
    np.testing.assert_allclose(op(x.astype(">f4")), oracle(x), **ELEMENTWISE)


@both
def test_bad_input(name):
    op = OPS[name][0]
    with pytest.raises(TypeError, match="x"):
        op(np.zeros(3, np.float64))
    with pytest.raises(ValueError, match="out"):
        op(np.zeros(3, np.float32), out=np.zeros(4, np.float32))


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=40),
                  elements=st.floats(-1e4, 1e4, width=32)),
       st.sampled_from(cpu.available_isas()), st.sampled_from(list(OPS)))
def test_hypothesis(x, level, name):
    op, oracle, _ = OPS[name]
    with cpu.using_isa(level):
        np.testing.assert_allclose(op(x), oracle(x), **ELEMENTWISE)


def test_tanh_kernel_affine_form_is_sigmoid(native, rng):
    """The executor's Sigmoid is the tanh kernel with its affine map, 0.5 tanh(x / 2) + 0.5, in
    one pass: within ELEMENTWISE of the float64 sigmoid, 0 and 1 at the far ends."""
    from a2r_edge import _kernels
    x = np.concatenate([rng.standard_normal(1001) * 8, [-1e4, 1e4, 0.0, -0.0]]).astype(np.float32)
    y = np.empty_like(x)
    _kernels.tanh(x, y, 0.5, 0.5, 0.5)
    want = 0.5 * np.tanh(0.5 * x.astype(np.float64)) + 0.5   # the sigmoid, without overflow
    np.testing.assert_allclose(y, want, **ELEMENTWISE)
    assert y[-4] == 0.0 and y[-3] == 1.0 and y[-2] == y[-1] == 0.5
