"""ops.preprocess against the numpy reference (model/reference.py) at every ISA level x 1/2
threads."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from a2r_edge import ops
from a2r_edge.model import reference as ref
from a2r_edge.runtime import cpu
from tolerances import ELEMENTWISE

DEFAULT = (0.5, 0.5, 0.5)
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
# Tails of every loop: 1 pixel, odd widths below one 256-pixel block, one block + 1, two blocks + 1,
# a frame (1920 = 7.5 blocks); 181x257 is above the 32768-pixel parallel grain, so 2 threads split it.
SHAPES = [(1, 1), (7, 13), (13, 17), (127, 237), (3, 257), (2, 513), (181, 257), (1080, 1920)]


def _img(rng, h, w):
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_matches_reference(native, rng, shape):
    img = _img(rng, *shape)
    got = ops.preprocess(img)
    assert got.shape == (1, 3) + shape and got.dtype == np.float32
    np.testing.assert_allclose(got, ref.preprocess(img, DEFAULT, DEFAULT), **ELEMENTWISE)


@pytest.mark.parametrize("shape", [(13, 17), (181, 257)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_non_default_mean_std(native, rng, shape):
    img = _img(rng, *shape)
    got = ops.preprocess(img, mean=IMAGENET_MEAN, std=IMAGENET_STD)
    np.testing.assert_allclose(got, ref.preprocess(img, IMAGENET_MEAN, IMAGENET_STD),
                               **ELEMENTWISE)


def test_channel_order_exact_values(native):
    # B, G, R = 0, 51, 255 everywhere -> R plane +1, G plane 51/127.5 - 1, B plane -1.
    img = np.empty((5, 300, 3), np.uint8)
    img[...] = (0, 51, 255)
    got = ops.preprocess(img)
    np.testing.assert_allclose(got[0, 0], 1.0, **ELEMENTWISE)
    np.testing.assert_allclose(got[0, 1], 51 / 127.5 - 1, **ELEMENTWISE)
    np.testing.assert_allclose(got[0, 2], -1.0, **ELEMENTWISE)
    # The whole range 0..255 in every channel and in every position of a block.
    ramp = np.broadcast_to(np.arange(256, dtype=np.uint8)[:, None, None], (256, 3, 3))
    img = np.ascontiguousarray(ramp.transpose(1, 0, 2))  # (3, 256, 3)
    np.testing.assert_allclose(ops.preprocess(img, IMAGENET_MEAN, IMAGENET_STD),
                               ref.preprocess(img, IMAGENET_MEAN, IMAGENET_STD), **ELEMENTWISE)


def test_out(native, rng):
    img = _img(rng, 181, 257)
    out = np.full((1, 3, 181, 257), np.nan, np.float32)
    assert ops.preprocess(img, out=out) is out
    np.testing.assert_allclose(out, ref.preprocess(img, DEFAULT, DEFAULT), **ELEMENTWISE)


def test_non_contiguous_inputs(rng):
    big = _img(rng, 40, 60)
    for img in (big[::2, ::3],                                   # strided view
                big[..., ::-1],                                  # channels reversed (negative stride)
                np.asfortranarray(big),                          # Fortran order
                big.transpose(1, 0, 2)):                         # transposed view
        np.testing.assert_allclose(ops.preprocess(img),
                                   ref.preprocess(np.ascontiguousarray(img), DEFAULT, DEFAULT),
                                   **ELEMENTWISE)
    # uint8 has no byte order: a '>u1' array is plain uint8 and must be accepted as such.
    be = big.astype(np.dtype(">u1"))
    np.testing.assert_allclose(ops.preprocess(be), ref.preprocess(big, DEFAULT, DEFAULT),
                               **ELEMENTWISE)


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.uint8, st.tuples(st.integers(1, 40), st.integers(1, 300), st.just(3))),
       st.tuples(*[st.floats(-1, 1)] * 3),
       # |std| >= 0.2: below it the folded scale/bias and the reference's own rounding, amplified
       # by 1/std, approach the float32 ELEMENTWISE tolerance near 0 (measured: half of it at 0.2).
       st.tuples(*[st.floats(0.2, 4) | st.floats(-4, -0.2)] * 3),
       st.sampled_from(cpu.available_isas()), st.sampled_from([1, 2]))
def test_hypothesis(img, mean, std, level, n_threads):
    with cpu.using_isa(level), cpu.using_threads(n_threads):
        np.testing.assert_allclose(ops.preprocess(img, mean, std), ref.preprocess(img, mean, std),
                                   **ELEMENTWISE)


IMG = np.zeros((4, 5, 3), np.uint8)


@pytest.mark.parametrize("kwargs, exc, name", [
    (dict(img=IMG.astype(np.float32)), TypeError, "img"),
    (dict(img=IMG.astype(np.int16)), TypeError, "img"),
    (dict(img=IMG.tolist()), TypeError, "img"),
    (dict(img=np.zeros((4, 5, 4), np.uint8)), ValueError, "img"),
    (dict(img=np.zeros((4, 5), np.uint8)), ValueError, "img"),
    (dict(img=np.zeros((1, 4, 5, 3), np.uint8)), ValueError, "img"),
    (dict(img=np.zeros((0, 5, 3), np.uint8)), ValueError, "img"),
    (dict(img=IMG, std=(0.5, 0.0, 0.5)), ValueError, "std"),
    (dict(img=IMG, std=(0.5, np.inf, 0.5)), ValueError, "std"),
    (dict(img=IMG, mean=(0.5, 0.5)), ValueError, "mean"),
    (dict(img=IMG, mean=(0.5, np.nan, 0.5)), ValueError, "mean"),
    (dict(img=IMG, mean="abc"), TypeError, "mean"),
    (dict(img=IMG, out=np.empty((1, 3, 5, 4), np.float32)), ValueError, "out"),
    (dict(img=IMG, out=np.empty((3, 4, 5), np.float32)), ValueError, "out"),
    (dict(img=IMG, out=np.empty((1, 3, 4, 5), np.float64)), ValueError, "out"),
    (dict(img=IMG, out=np.empty((1, 3, 5, 4), np.float32).transpose(0, 1, 3, 2)),
     ValueError, "out"),
    (dict(img=IMG, out=[0.0] * 60), TypeError, "out"),
])
def test_bad_inputs(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        ops.preprocess(**kwargs)
