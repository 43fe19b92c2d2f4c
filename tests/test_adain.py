import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from a2r_edge import _kernels, ops
from a2r_edge.model import reference as ref
from a2r_edge.runtime import cpu
from tolerances import ELEMENTWISE, REDUCTION

# Plane sizes 1, 7, 13, 17, 127, 237 and 1080*1920; N and C varied; the last two are split
# across 2 threads inside a plane (moments.h).
SHAPES = [(1, 1, 1, 1), (2, 3, 1, 7), (1, 5, 13, 1), (3, 2, 1, 17), (1, 4, 127, 1),
          (2, 3, 3, 79), (1, 3, 512, 512), (1, 1, 1080, 1920)]


def _style(rng, n, c, per_sample):
    shape = (n, c) if per_sample else (c,)
    return (rng.standard_normal(shape).astype(np.float32),
            (rng.random(shape) + 0.5).astype(np.float32))


@pytest.mark.parametrize("per_sample", [False, True], ids=["style(C,)", "style(N,C)"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matches_reference(native, rng, shape, per_sample):
    x = (rng.standard_normal(shape) * 3 + 0.5).astype(np.float32)
    sm, ss = _style(rng, *shape[:2], per_sample)
    np.testing.assert_allclose(ops.adain(x, sm, ss), ref.adain(x, sm, ss), **REDUCTION)


@pytest.mark.parametrize("offset", [1e3, 1e4])
def test_large_offset(native, rng, offset):
    """The (x - mu) first keeps the output exact to x's own float32 resolution."""
    x = (rng.standard_normal((2, 3, 61, 67)) + offset).astype(np.float32)
    sm, ss = _style(rng, 2, 3, True)
    # float32 x at |offset| has ulp(offset) of resolution; both sides carry mu rounded to float32.
    atol = np.spacing(np.float32(offset)) * float(ss.max())
    np.testing.assert_allclose(ops.adain(x, sm, ss), ref.adain(x, sm, ss),
                               rtol=REDUCTION["rtol"], atol=atol)


def test_constant_planes(native):
    """std = sqrt(eps): a constant plane maps to style_mean, nothing blows up."""
    x = np.full((1, 2, 33, 35), 1000.0, np.float32)
    y = ops.adain(x, [0.25, -1.0], [2.0, 3.0])
    np.testing.assert_array_equal(y[0, 0], 0.25)
    np.testing.assert_array_equal(y[0, 1], -1.0)


def test_given_stats_equal_elementwise(native, rng):
    x = (rng.standard_normal((2, 3, 17, 19)) * 2 + 1).astype(np.float32)
    sm, ss = _style(rng, 2, 3, True)
    stats = (rng.standard_normal((2, 3)).astype(np.float32),
             (rng.random((2, 3)) + 0.1).astype(np.float32))
    np.testing.assert_allclose(ops.adain(x, sm, ss, content_stats=stats),
                               ref.adain(x, sm, ss, content_stats=stats), **ELEMENTWISE)


@pytest.mark.parametrize("crop", [(slice(0, 64), slice(0, 80)), (slice(37, 250), slice(91, 93)),
                                  (slice(255, 256), slice(0, 300))], ids=["corner", "mid", "row"])
def test_tiles_share_whole_picture_stats(native, rng, crop):
    """adain of a crop with the whole picture's content_stats = the crop of the whole's adain."""
    x = (rng.standard_normal((1, 4, 256, 300)) * 2 + 3).astype(np.float32)
    sm, ss = _style(rng, 1, 4, False)
    whole = ops.adain(x, sm, ss)
    stats = ops.channel_stats(x)
    tile = ops.adain(x[:, :, crop[0], crop[1]], sm, ss, content_stats=stats)
    np.testing.assert_allclose(tile, whole[:, :, crop[0], crop[1]], **ELEMENTWISE)


def test_out_and_in_place(native, stores, rng):
    x = (rng.standard_normal((2, 3, 200, 201)) + 4).astype(np.float32)
    sm, ss = _style(rng, 2, 3, False)
    want = ref.adain(x, sm, ss)
    out = np.empty_like(x)
    assert ops.adain(x, sm, ss, out=out) is out
    np.testing.assert_allclose(out, want, **REDUCTION)
    stats = ops.channel_stats(x)
    y = x.copy()
    assert ops.adain(y, sm, ss, content_stats=stats, out=y) is y
    np.testing.assert_allclose(y, want, **REDUCTION)
    assert ops.adain(x, sm, ss, out=x) is x              # statistics of x, then x overwritten
    np.testing.assert_allclose(x, want, **REDUCTION)


@pytest.mark.parametrize("skew", [0, 1, 5, 15])
def test_streamed_equals_cached_at_any_alignment(native, rng, skew):
    """Streaming stores (an op filling the last-level cache) write exactly what plain stores do,
    wherever the output starts against the vector size: plain stores before the first aligned
    vector and after the last, each plane's blocks aligned after its first."""
    x = (rng.standard_normal((1, 3, 97, 101)) + 1).astype(np.float32)
    sm, ss = _style(rng, 1, 3, False)
    want = ops.adain(x, sm, ss)
    old = _kernels.set_stream_min_bytes(1)
    try:
        out = np.empty(x.size + 16, np.float32)[skew:skew + x.size].reshape(x.shape)
        ops.adain(x, sm, ss, out=out)
    finally:
        _kernels.set_stream_min_bytes(old)
    np.testing.assert_array_equal(out, want)


def test_silu_epilogue(native, stores, rng):
    """A2R_ACT_SILU fused into the apply (the kernel entry; ops.adain does not expose it)."""
    x = (rng.standard_normal((1, 3, 300, 257)) * 2).astype(np.float32)
    sm, ss = _style(rng, 1, 3, False)
    y = np.empty_like(x)
    _kernels.adain(x.reshape(-1), 3, 300 * 257, sm, ss, None, None, 1e-5, 1, 0.0, y.reshape(-1))
    np.testing.assert_allclose(y, ref.silu(ref.adain(x, sm, ss)), **REDUCTION)


# A2R_ACT_* codes of a2r_kernels.h and their numpy meaning (same as the conv2d epilogue).
ACTS = {"relu": (2, lambda v, a: np.where(v > 0, v, np.float32(0))),
        "leaky_relu": (3, lambda v, a: np.where(v >= 0, v, np.float32(a) * v))}


@pytest.mark.parametrize("alpha", [0.2, 1.5])
@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("given", [False, True], ids=["own_stats", "given_stats"])
@pytest.mark.parametrize("shape", [(1, 1, 1, 7), (2, 3, 13, 17), (1, 3, 300, 257)],
                         ids=lambda s: "x".join(map(str, s)))
def test_relu_epilogues(native, stores, rng, shape, given, act, alpha):
    """A2R_ACT_RELU / A2R_ACT_LEAKY_RELU fused into the apply (executor: InstanceNorm + Relu /
    LeakyRelu), on every ISA level and thread count; the 300x257 planes are split across
    threads. alpha is ignored by relu (1.5 checks that)."""
    n, c = shape[:2]
    x = (rng.standard_normal(shape) * 2 + 0.3).astype(np.float32)
    sm, ss = _style(rng, n, c, True)
    stats = ops.channel_stats(x) if given else None
    cm, cs = (s.reshape(-1) for s in stats) if given else (None, None)
    code, fn = ACTS[act]
    y = np.empty_like(x)
    _kernels.adain(x.reshape(-1), n * c, shape[2] * shape[3], sm.reshape(-1), ss.reshape(-1),
                   cm, cs, 1e-5, code, alpha, y.reshape(-1))
    want = fn(ref.adain(x, sm, ss, content_stats=stats), alpha)
    np.testing.assert_allclose(y, want, **REDUCTION)
    assert (y < 0).any() == (act == "leaky_relu")   # the activation really ran
    # in place, as the executor runs it
    z = x.copy()
    _kernels.adain(z.reshape(-1), n * c, shape[2] * shape[3], sm.reshape(-1), ss.reshape(-1),
                   cm, cs, 1e-5, code, alpha, z.reshape(-1))
    np.testing.assert_array_equal(z, y)


@pytest.mark.parametrize("given", [False, True], ids=["own_stats", "given_stats"])
@pytest.mark.parametrize("shape", [(1, 1, 1, 7), (2, 3, 13, 17), (1, 3, 300, 257)],
                         ids=lambda s: "x".join(map(str, s)))
def test_residual_epilogue(native, stores, rng, shape, given):
    """A residual added before the activation (executor: InstanceNorm + Add), on every ISA level
    and thread count, out of place and in place on the residual or on x."""
    n, c = shape[:2]
    x = (rng.standard_normal(shape) * 2 + 0.3).astype(np.float32)
    r = rng.standard_normal(shape).astype(np.float32)
    sm, ss = _style(rng, n, c, True)
    stats = ops.channel_stats(x) if given else None
    cm, cs = (s.reshape(-1) for s in stats) if given else (None, None)
    hw = shape[2] * shape[3]
    want = ACTS["leaky_relu"][1](ref.adain(x, sm, ss, content_stats=stats) + r, 0.2)
    y = np.empty_like(x)
    _kernels.adain(x.reshape(-1), n * c, hw, sm.reshape(-1), ss.reshape(-1), cm, cs, 1e-5,
                   ACTS["leaky_relu"][0], 0.2, y.reshape(-1), r.reshape(-1))
    np.testing.assert_allclose(y, want, **REDUCTION)
    for target in ("residual", "x"):
        xz, rz = x.copy(), r.copy()
        out = rz if target == "residual" else xz
        _kernels.adain(xz.reshape(-1), n * c, hw, sm.reshape(-1), ss.reshape(-1), cm, cs, 1e-5,
                       ACTS["leaky_relu"][0], 0.2, out.reshape(-1), rz.reshape(-1))
        np.testing.assert_array_equal(out, y)


def test_nan_and_inf_do_not_crash(native, rng):
    x = rng.standard_normal((1, 3, 300, 301)).astype(np.float32)
    x[0, 0, 1, 2], x[0, 1, 299, 300] = np.nan, -np.inf
    sm, ss = _style(rng, 1, 3, False)
    y = ops.adain(x, sm, ss)
    assert np.isnan(y[0, 0]).all() and not np.isfinite(y[0, 1]).any()
    np.testing.assert_allclose(y[:, 2:], ref.adain(x[:, 2:], sm[2:], ss[2:]), **REDUCTION)


def test_non_contiguous_and_byteswapped(rng):
    x = (rng.standard_normal((2, 6, 40, 30)) + 5).astype(np.float32)
    sm, ss = _style(rng, 2, 3, True)
    v = x[:, ::2, 3:, ::3]
    np.testing.assert_allclose(ops.adain(v, sm, ss), ref.adain(v, sm, ss), **REDUCTION)
    sm, ss = _style(rng, 2, 6, False)
    np.testing.assert_allclose(ops.adain(x.astype(">f4"), sm, ss), ref.adain(x, sm, ss),
                               **REDUCTION)


def test_matches_onnxruntime(rng):
    """InstanceNormalization(scale = style_std, B = style_mean) is adain with the content's own
    statistics."""
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    for shape in [(2, 3, 17, 19), (1, 8, 64, 64)]:
        x = (rng.standard_normal(shape) * 2 + 10).astype(np.float32)
        sm, ss = _style(rng, 1, shape[1], False)
        node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-5)
        graph = helper.make_graph(
            [node], "adain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
            initializer=[numpy_helper.from_array(ss, "s"), numpy_helper.from_array(sm, "b")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(ops.adain(x, sm, ss), sess.run(None, {"x": x})[0],
                                   rtol=1e-4, atol=1e-4)


X = np.zeros((2, 3, 4, 5), np.float32)
S3 = np.ones(3, np.float32)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(x=X.astype(np.float64)), TypeError, "x must have dtype float32"),
    (dict(x=X[0]), ValueError, r"x must have shape \(N, C, H, W\)"),
    (dict(x=X.tolist()), TypeError, "x must be a numpy.ndarray"),
    (dict(style_mean=np.ones(4)), ValueError, r"style_mean must have shape \(3,\) or \(2, 3\)"),
    (dict(style_std=np.ones((3, 2))), ValueError, r"style_std must have shape \(3,\) or \(2, 3\)"),
    (dict(style_std=["a", "b", "c"]), TypeError, "style_std must be an array of real numbers"),
    (dict(style_mean=[0, np.nan, 0]), ValueError, "style_mean must be finite"),
    (dict(content_stats=np.ones((2, 3))), TypeError, "content_stats must be a"),
    (dict(content_stats=(S3,)), TypeError, "content_stats must be a"),
    (dict(content_stats=(np.ones((2, 4)), np.ones((2, 4)))), ValueError,
     r"content_stats\[0\] \(mean\) must have shape"),
    (dict(content_stats=(S3, np.ones(5))), ValueError, r"content_stats\[1\] \(std\) must have"),
    (dict(content_stats=(S3, [1.0, 0.0, 1.0])), ValueError, r"content_stats\[1\].*> 0"),
    (dict(content_stats=(S3, [1.0, -2.0, 1.0])), ValueError, r"content_stats\[1\].*> 0"),
    (dict(eps=-1e-3), ValueError, "eps must be > 0"),
    (dict(eps=0.0), ValueError, "eps must be > 0"),
    (dict(eps=None), TypeError, "eps must be a real number"),
    (dict(out=np.empty((2, 3, 4, 6), np.float32)), ValueError, "out must be a C-contiguous"),
    (dict(out=np.empty((2, 3, 4, 5), np.float64)), ValueError, "out must be a C-contiguous"),
    (dict(out=np.empty((2, 3, 4, 10), np.float32)[..., ::2]), ValueError, "not C-contiguous"),
    (dict(out=[0.0]), TypeError, "out must be a numpy.ndarray"),
])
def test_bad_inputs(kwargs, exc, match):
    args = dict(x=X, style_mean=S3, style_std=S3) | kwargs
    with pytest.raises(exc, match=match):
        ops.adain(**args)


def test_out_overlapping_x_partially():
    buf = np.zeros(2 * 3 * 4 * 5 + 5, np.float32)
    x = buf[:-5].reshape(2, 3, 4, 5)
    out = buf[5:].reshape(2, 3, 4, 5)
    with pytest.raises(ValueError, match="out must not overlap an input"):
        ops.adain(x, S3, S3, out=out)


def test_eps_zero_allowed_with_given_stats(rng):
    x = rng.standard_normal((1, 3, 4, 5)).astype(np.float32)
    stats = ops.channel_stats(x)
    np.testing.assert_allclose(ops.adain(x, S3, S3, eps=0.0, content_stats=stats),
                               ref.adain(x, S3, S3, content_stats=stats), **ELEMENTWISE)


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=4, max_dims=4, max_side=24),
                  elements=st.floats(-1e3, 1e3, width=32)),
       st.sampled_from(cpu.available_isas()), st.sampled_from([1, 2]), st.booleans(),
       st.integers(0, 2**32 - 1))
def test_hypothesis(x, level, threads, per_sample, seed):
    n, c = x.shape[:2]
    sm, ss = _style(np.random.default_rng(seed), n, c, per_sample)
    want = ref.adain(x, sm, ss)
    with cpu.using_isa(level), cpu.using_threads(threads):
        y = ops.adain(x, sm, ss)
    # Near-constant planes amplify x's own float32 rounding by style_std / sqrt(eps).
    _, sigma = ref.channel_stats(x)
    amp = (np.broadcast_to(ss, (n, c)) / sigma)[:, :, None, None]
    ulp = np.abs(x).max(axis=(2, 3), keepdims=True) * 2.0 ** -23
    err = np.abs(y.astype(np.float64) - want)
    bound = REDUCTION["rtol"] * np.abs(want) + REDUCTION["atol"] + 4 * amp * ulp
    assert np.all(err <= bound), float((err - bound).max())
