"""Rules every public op shares (docs/architecture.md, how to add an op): a wrong type or dtype is
a TypeError, a wrong shape or an empty array a ValueError, both naming the argument; strided and
byte-swapped inputs work; out= is checked. Op-specific bad inputs live in each op's own test
file."""
import numpy as np
import pytest

from a2r_edge import ops

F32 = np.float32
GOOD = {  # op -> (function of the array argument, name of that argument, a valid array)
    "preprocess": (lambda a: ops.preprocess(a), "img", np.zeros((4, 5, 3), np.uint8)),
    "postprocess": (lambda a: ops.postprocess(a), "x", np.zeros((1, 3, 4, 5), F32)),
    "channel_stats": (lambda a: ops.channel_stats(a), "x", np.zeros((1, 2, 4, 5), F32)),
    "adain": (lambda a: ops.adain(a, np.zeros(2), np.ones(2)), "x", np.zeros((1, 2, 4, 5), F32)),
    "silu": (lambda a: ops.silu(a), "x", np.zeros((4, 5), F32)),
    "pixel_shuffle": (lambda a: ops.pixel_shuffle(a, 2), "x", np.zeros((1, 4, 4, 5), F32)),
    "im2col": (lambda a: ops.im2col(a, 3, pad=1), "x", np.zeros((2, 4, 5), F32)),
    "guided_filter": (lambda a: ops.guided_filter(a, a, 1, 0.01), "guide",
                      np.zeros((4, 5), F32)),
}


@pytest.mark.parametrize("op", GOOD)
def test_not_an_array_is_type_error(op):
    call, name, good = GOOD[op]
    with pytest.raises(TypeError, match=name):
        call(good.tolist())


@pytest.mark.parametrize("op", GOOD)
def test_wrong_dtype_is_type_error(op):
    call, name, good = GOOD[op]
    wrong = np.float64 if good.dtype != np.float64 else np.float32
    with pytest.raises(TypeError, match=f"{name} must have dtype {good.dtype}, got"):
        call(good.astype(wrong))


@pytest.mark.parametrize("op", GOOD)
def test_empty_is_value_error(op):
    call, name, good = GOOD[op]
    empty = np.zeros((0,) + good.shape[1:], good.dtype)
    with pytest.raises(ValueError, match=f"{name} must not be empty"):
        call(empty)


@pytest.mark.parametrize("op", [o for o in GOOD if o != "silu"])
def test_wrong_ndim_is_value_error(op):
    call, name, good = GOOD[op]
    with pytest.raises(ValueError, match=f"{name} must have shape"):
        call(good[None, None, None])


@pytest.mark.parametrize("op", GOOD)
def test_strided_and_byteswapped_inputs_give_the_same_result(op):
    call, _, good = GOOD[op]
    rng = np.random.default_rng(7)
    if good.dtype == np.uint8:
        data = rng.integers(0, 256, good.shape, dtype=np.uint8)
    else:
        data = rng.standard_normal(good.shape).astype(F32)
    want = call(data)
    # A view with the same values but non-unit strides: every other element of a doubled array.
    doubled = np.repeat(data, 2, axis=-1)[..., ::2]
    assert not doubled.flags.c_contiguous
    for variant in (doubled, data.astype(data.dtype.newbyteorder(">"))):
        got = call(variant)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("bad_out,error", [
    (np.empty((1, 3, 4, 4), F32), ValueError),        # wrong shape
    (np.empty((1, 3, 4, 5), np.float64), ValueError),  # wrong dtype
    (np.empty((1, 3, 5, 4), F32).transpose(0, 1, 3, 2), ValueError),  # not C-contiguous
    ([0.0], TypeError),
])
def test_bad_out_is_rejected(bad_out, error):
    img = np.zeros((4, 5, 3), np.uint8)
    with pytest.raises(error, match="out"):
        ops.preprocess(img, out=bad_out)


def test_read_only_out_is_rejected():
    out = np.empty((4, 5), F32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="out must be writeable"):
        ops.silu(np.zeros((4, 5), F32), out=out)


def test_partially_overlapping_out_is_rejected():
    buf = np.zeros(40, F32)
    with pytest.raises(ValueError, match="overlap"):
        ops.silu(buf[:20], out=buf[10:30])
