"""ops.postprocess: bit-exact against the numpy reference (model/reference.py) and across every ISA
level and thread count, special values and rounding ties included."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from a2r_edge import ops
from a2r_edge.model import reference as ref
from a2r_edge.runtime import cpu

DEFAULT = (0.5, 0.5, 0.5)
# Tails of every loop: 1 pixel, odd widths below one 256-pixel block, one block + 1, two blocks + 1,
# a frame (1920 = 7.5 blocks); 181x257 is above the 32768-pixel parallel grain, so 2 threads split it.
SHAPES = [(1, 1), (7, 13), (13, 17), (127, 237), (3, 257), (2, 513), (181, 257), (1080, 1920)]
SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e30, -1e30,
                    3.4e38, -3.4e38, 1e-45, -1e-45, 1.1754942e-38, 2.0 ** 22, 2.0 ** 23, 2.0 ** 24,
                    2.0 ** 31, -2.0 ** 31, 1.0039216, -1.0039216, 0.99999994, -0.99999994],
                   np.float32)


def _x(rng, h, w, specials=True):
    """Mostly [-1.2, 1.2] (clipping on both sides), with the special values sprinkled in."""
    x = rng.uniform(-1.2, 1.2, (1, 3, h, w)).astype(np.float32)
    if specials:
        flat = x.reshape(-1)
        idx = rng.choice(flat.size, min(flat.size, 4 * SPECIAL.size), replace=False)
        flat[idx] = np.resize(SPECIAL, idx.size)
    return x


def _ties(mean, std, per_tie=4):
    """float32 x whose v = (x * std + mean) * 255 is exactly k + 0.5, k = -1 .. 256, found by
    walking the ulps around each tie. Returns x and the tie values v."""
    t = np.arange(-1, 257) + 0.5
    x0 = ((t / 255 - mean) / std).astype(np.float32)
    steps = np.arange(-256, 257, dtype=np.int32)
    cand = (x0.view(np.int32)[:, None] + steps[None]).view(np.float32)
    v = (cand * np.float32(std) + np.float32(mean)) * np.float32(255)
    hit = v == t[:, None].astype(np.float32)
    xs = np.concatenate([c[h][:per_tie] for c, h in zip(cand, hit)])
    vs = np.concatenate([np.full(min(h.sum(), per_tie), tv) for tv, h in zip(t, hit)])
    return xs, vs


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_matches_reference(native, rng, shape):
    x = _x(rng, *shape)
    got = ops.postprocess(x)
    assert got.shape == shape + (3,) and got.dtype == np.uint8
    np.testing.assert_array_equal(got, ref.postprocess(x, DEFAULT, DEFAULT))


def test_round_half_to_even(native):
    # mean 0, std 1 reaches every tie k + 0.5 for k = -1 .. 256 exactly.
    xs, vs = _ties(0.0, 1.0)
    assert set(vs) == set(np.arange(-1, 257) + 0.5)
    x = np.broadcast_to(xs, (3, xs.size)).reshape(3, 1, xs.size).copy()
    got = ops.postprocess(x, mean=(0, 0, 0), std=(1, 1, 1))
    even = np.clip(  # the even one of k and k + 1, then the clip
        np.where((vs - 0.5) % 2 == 0, vs - 0.5, vs + 0.5), 0, 255).astype(np.uint8)
    for c in range(3):
        np.testing.assert_array_equal(got[0, :, c], even)
    np.testing.assert_array_equal(got, ref.postprocess(x, (0, 0, 0), (1, 1, 1)))
    # The default convention reaches a subset of the ties.
    xs, vs = _ties(0.5, 0.5)
    assert vs.size > 500
    x = np.broadcast_to(xs, (3, xs.size)).reshape(1, 3, 1, xs.size).copy()
    np.testing.assert_array_equal(ops.postprocess(x), ref.postprocess(x, DEFAULT, DEFAULT))


def test_special_values(native):
    x = np.broadcast_to(SPECIAL, (3, 2, SPECIAL.size)).copy()
    got = ops.postprocess(x)
    np.testing.assert_array_equal(got, ref.postprocess(x, DEFAULT, DEFAULT))
    row = got[0, :, 0]
    want = {np.nan: 0, np.inf: 255, -np.inf: 0, 0.0: 128, 1e30: 255, -1e30: 0, 1e-45: 128}
    for value, expected in want.items():
        i = np.flatnonzero(np.isnan(SPECIAL) if np.isnan(value) else SPECIAL == value)
        assert (row[i] == expected).all(), (value, row[i])


def test_bit_exact_across_isa_and_threads(rng):
    x = _x(rng, 181, 257)
    xs, _ = _ties(0.5, 0.5)
    x.reshape(-1)[: xs.size] = xs
    mean, std = (0.1, 0.7, 0.3), (0.9, 0.2, 1.7)
    want = {(0.5,) * 3: ref.postprocess(x, DEFAULT, DEFAULT), mean: ref.postprocess(x, mean, std)}
    runs = []
    for level in cpu.available_isas():
        for n in (1, 2):
            with cpu.using_isa(level), cpu.using_threads(n):
                runs.append(((level, n), ops.postprocess(x), ops.postprocess(x, mean, std)))
    assert len(runs) == 2 * len(cpu.available_isas())
    for who, a, b in runs:
        np.testing.assert_array_equal(a, want[(0.5,) * 3], err_msg=str(who))
        np.testing.assert_array_equal(b, want[mean], err_msg=str(who))
        assert a.tobytes() == runs[0][1].tobytes() and b.tobytes() == runs[0][2].tobytes(), who


def test_3d_and_4d_input(native, rng):
    x = _x(rng, 13, 300)
    a, b = ops.postprocess(x), ops.postprocess(x[0])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, ref.postprocess(x, DEFAULT, DEFAULT))


def test_out_and_non_default_mean_std(native, rng):
    x = _x(rng, 181, 257)
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    out = np.full((181, 257, 3), 7, np.uint8)
    assert ops.postprocess(x, mean, std, out=out) is out
    np.testing.assert_array_equal(out, ref.postprocess(x, mean, std))


def test_non_contiguous_and_byteswapped(rng):
    big = _x(rng, 40, 60)
    want = lambda v: ref.postprocess(np.ascontiguousarray(v), DEFAULT, DEFAULT)  # noqa: E731
    for x in (big[:, :, ::2, ::3], big[:, ::-1], big[0].transpose(0, 2, 1),
              np.asfortranarray(big[0])):
        np.testing.assert_array_equal(ops.postprocess(x), want(x))
    np.testing.assert_array_equal(ops.postprocess(big.astype(">f4")), want(big))


@settings(max_examples=80, deadline=None)
@given(hnp.arrays(np.float32,
                  st.tuples(st.sampled_from([(3,), (1, 3)]), st.integers(1, 20), st.integers(1, 300))
                  .map(lambda t: t[0] + t[1:]),
                  elements=st.floats(width=32, allow_nan=True, allow_infinity=True)
                  | st.floats(-1.5, 1.5, width=32)),
       st.tuples(*[st.floats(-2, 2, width=32)] * 3), st.tuples(*[st.floats(-4, 4, width=32)] * 3),
       st.sampled_from(cpu.available_isas()), st.sampled_from([1, 2]))
def test_hypothesis(x, mean, std, level, n_threads):
    with cpu.using_isa(level), cpu.using_threads(n_threads):
        np.testing.assert_array_equal(ops.postprocess(x, mean, std), ref.postprocess(x, mean, std))


X = np.zeros((1, 3, 4, 5), np.float32)


@pytest.mark.parametrize("kwargs, exc, name", [
    (dict(x=X.astype(np.float64)), TypeError, "x"),
    (dict(x=X.astype(np.float16)), TypeError, "x"),
    (dict(x=X.tolist()), TypeError, "x"),
    (dict(x=np.zeros((2, 3, 4, 5), np.float32)), ValueError, "x"),
    (dict(x=np.zeros((1, 4, 4, 5), np.float32)), ValueError, "x"),
    (dict(x=np.zeros((1, 3, 4, 5, 1), np.float32)), ValueError, "x"),
    (dict(x=np.zeros((3, 4), np.float32)), ValueError, "x"),
    (dict(x=np.zeros((1, 3, 0, 5), np.float32)), ValueError, "x"),
    (dict(x=X, mean=(0.5, 0.5)), ValueError, "mean"),
    (dict(x=X, mean=(0.5, np.nan, 0.5)), ValueError, "mean"),
    (dict(x=X, std=(0.5, 0.5, 0.5, 0.5)), ValueError, "std"),
    (dict(x=X, std=(0.5, np.inf, 0.5)), ValueError, "std"),
    (dict(x=X, std="abc"), TypeError, "std"),
    (dict(x=X, out=np.empty((5, 4, 3), np.uint8)), ValueError, "out"),
    (dict(x=X, out=np.empty((1, 4, 5, 3), np.uint8)), ValueError, "out"),
    (dict(x=X, out=np.empty((4, 5, 3), np.float32)), ValueError, "out"),
    (dict(x=X, out=np.empty((4, 3, 5), np.uint8).transpose(0, 2, 1)), ValueError, "out"),
    (dict(x=X, out=bytearray(60)), TypeError, "out"),
])
def test_bad_inputs(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        ops.postprocess(**kwargs)


def test_counts_non_finite_values_in_the_same_pass(native, rng):
    """finite=True: NonFiniteError with the count of NaN and +-inf values, wherever they sit
    (every channel, a block's last pixel, past the first 256-pixel block, any thread's rows);
    the picture is written as without it; finite inputs raise nothing."""
    x = rng.uniform(-1, 1, (1, 3, 37, 300)).astype(np.float32)
    want = ops.postprocess(x)
    np.testing.assert_array_equal(ops.postprocess(x, finite=True), want)
    spots = [(0, 0, 0, np.nan), (1, 5, 255, np.inf), (2, 36, 299, -np.inf), (0, 20, 256, np.nan)]
    for k, (c, y, xx, v) in enumerate(spots, 1):
        x[0, c, y, xx] = v
        with pytest.raises(ops.NonFiniteError, match=f"^{k} NaN or infinite value") as err:
            ops.postprocess(x, finite=True)
        assert (err.value.count, err.value.size) == (k, x.size)
        np.testing.assert_array_equal(ops.postprocess(x), ops.postprocess(np.nan_to_num(
            x, nan=-1e9, posinf=np.inf, neginf=-np.inf)))   # NaN -> 0 as before
