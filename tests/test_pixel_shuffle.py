import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from a2r_edge import ops
from a2r_edge.model import reference as ref
from a2r_edge.runtime import cpu

# (h, w) pairs over the tail sizes 1, 7, 13, 17, 127, 237: every width hits a different remainder
# of the 4/8/16-float vector loop (times r for the output row).
SHAPES = [(1, 1), (1, 237), (7, 13), (13, 17), (17, 127), (127, 7), (237, 1)]


def depth_to_space_crd(x, r):
    """ONNX DepthToSpace, mode CRD (= torch PixelShuffle), element by element."""
    n, c, h, w = x.shape
    y = np.zeros((n, c // (r * r), h * r, w * r), x.dtype)
    for b in range(n):
        for k in range(c // (r * r)):
            for i in range(h):
                for p in range(r):
                    for j in range(w):
                        for q in range(r):
                            y[b, k, i * r + p, j * r + q] = x[b, k * r * r + p * r + q, i, j]
    return y


def test_reference_equals_definition(rng):
    for n, c, h, w, r in [(1, 1, 1, 1, 1), (2, 2, 3, 5, 2), (1, 3, 2, 4, 3), (2, 1, 3, 2, 4)]:
        x = rng.standard_normal((n, c * r * r, h, w)).astype(np.float32)
        np.testing.assert_array_equal(ref.pixel_shuffle(x, r), depth_to_space_crd(x, r))


@pytest.mark.parametrize("r", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("hw", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_u8_levels_move_as_floats_do(native, rng, r, hw):
    """The byte variant (u8 levels between two int8 convolutions) moves each byte where the
    float kernel moves its float."""
    from a2r_edge import _kernels
    h, w = hw
    n, c = 1 + (h + w) % 2, 1 + (h * w + r) % 5
    x = rng.integers(0, 256, (n, c * r * r, h, w), dtype=np.uint8)
    y = np.empty((n, c, h * r, w * r), np.uint8)
    _kernels.pixel_shuffle_u8(x.reshape(-1), n, c, h, w, r, 0, 0, h * r, w * r, y.reshape(-1))
    np.testing.assert_array_equal(y, ref.pixel_shuffle(x, r))
    # a window, as a ConvTranspose crop takes one: partial groups at both ends
    top, left = (h * r - 1) // 2, (w * r - 1) // 3
    win = np.empty((n, c, h * r - top, max(1, w * r - left - 1)), np.uint8)
    _kernels.pixel_shuffle_u8(x.reshape(-1), n, c, h, w, r, top, left, *win.shape[2:],
                              win.reshape(-1))
    np.testing.assert_array_equal(
        win, ref.pixel_shuffle(x, r)[:, :, top:top + win.shape[2], left:left + win.shape[3]])


@pytest.mark.parametrize("r", [1, 2, 3, 4])
@pytest.mark.parametrize("hw", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_matches_reference(native, rng, r, hw):
    h, w = hw
    n, c = 1 + (h + w) % 2, 1 + (h * w + r) % 5  # batch 1-2, output channels 1-5
    x = rng.standard_normal((n, c * r * r, h, w)).astype(np.float32)
    y = ops.pixel_shuffle(x, r)
    assert y.shape == (n, c, h * r, w * r) and y.dtype == np.float32
    np.testing.assert_array_equal(y, ref.pixel_shuffle(x, r))  # a permutation: exact


@pytest.mark.parametrize("r", [2, 3, 4])
def test_definition_tiny(native, rng, r):
    x = rng.standard_normal((2, 3 * r * r, 3, 5)).astype(np.float32)
    np.testing.assert_array_equal(ops.pixel_shuffle(x, r), depth_to_space_crd(x, r))


def test_large(native, rng):
    # A 1080p x2 up-sampler tail at quarter channel count: 16 output channels of 540x960.
    x = rng.standard_normal((1, 64, 1080 // 4, 1920 // 4)).astype(np.float32)
    np.testing.assert_array_equal(ops.pixel_shuffle(x, 2), ref.pixel_shuffle(x, 2))


def test_every_element_moves_once(native):
    # Distinct values: a wrong index shows up as a duplicate or a missing value, not a near miss.
    x = np.arange(2 * 3 * 9 * 7 * 11, dtype=np.float32).reshape(2, 27, 7, 11)
    y = ops.pixel_shuffle(x, 3)
    np.testing.assert_array_equal(np.sort(y, axis=None), x.reshape(-1))
    np.testing.assert_array_equal(y, depth_to_space_crd(x, 3))


def test_non_contiguous_and_byteswapped(rng):
    x = rng.standard_normal((2, 16, 9, 14)).astype(np.float32)
    view = x[:, :, ::2, ::3]
    np.testing.assert_array_equal(ops.pixel_shuffle(view, 2), ref.pixel_shuffle(view.copy(), 2))
    np.testing.assert_array_equal(ops.pixel_shuffle(x.astype(">f4"), 4), ref.pixel_shuffle(x, 4))


def test_onnx_depth_to_space(rng):
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    r, shape = 2, (2, 12, 5, 7)
    node = helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=r, mode="CRD")
    graph = helper.make_graph(
        [node], "d2s", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # readable by every onnxruntime release the project supports
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(ops.pixel_shuffle(x, r), sess.run(None, {"x": x})[0])


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 4), st.integers(1, 23),
       st.integers(1, 41), st.data(), st.sampled_from(cpu.available_isas()),
       st.sampled_from([1, 2]))
def test_window_hypothesis(n, c, r, h, w, data, level, threads):
    """offset= and a smaller out take the window of the shuffled picture: partial groups of r
    at either end (odd offsets, widths that end inside a group), one column or row included."""
    x = np.random.default_rng(n * 1000 + h * 50 + w).standard_normal(
        (n, c * r * r, h, w)).astype(np.float32)
    top, left = data.draw(st.integers(0, h * r - 1)), data.draw(st.integers(0, w * r - 1))
    oh = data.draw(st.integers(1, h * r - top))
    ow = data.draw(st.integers(1, w * r - left))
    out = np.full((n, c, oh, ow), np.nan, np.float32)
    with cpu.using_isa(level), cpu.using_threads(threads):
        assert ops.pixel_shuffle(x, r, out=out, offset=(top, left)) is out
    np.testing.assert_array_equal(out, ref.pixel_shuffle(x, r)[:, :, top:top + oh,
                                                                left:left + ow])
    rest = ops.pixel_shuffle(x, r, offset=(top, left))  # no out: to the end
    np.testing.assert_array_equal(rest, ref.pixel_shuffle(x, r)[:, :, top:, left:])


def test_window_checked(rng):
    x = rng.standard_normal((1, 8, 3, 5)).astype(np.float32)   # shuffled: (1, 2, 6, 10)
    with pytest.raises(ValueError, match="offset"):
        ops.pixel_shuffle(x, 2, offset=(6, 0))
    with pytest.raises(ValueError, match="offset"):
        ops.pixel_shuffle(x, 2, offset=(-1, 0))
    with pytest.raises(ValueError, match="out"):   # taller than what is left below the offset
        ops.pixel_shuffle(x, 2, out=np.empty((1, 2, 6, 4), np.float32), offset=(1, 1))
    with pytest.raises(ValueError, match="out"):
        ops.pixel_shuffle(x, 2, out=np.empty((1, 3, 2, 2), np.float32), offset=(1, 1))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 2), st.integers(1, 4), st.integers(1, 4), st.integers(1, 23),
       st.integers(1, 41), st.sampled_from(cpu.available_isas()), st.sampled_from([1, 2]))
def test_hypothesis(n, c, r, h, w, level, threads):
    x = np.random.default_rng(n * 1000 + h * 50 + w).standard_normal(
        (n, c * r * r, h, w)).astype(np.float32)
    with cpu.using_isa(level), cpu.using_threads(threads):
        np.testing.assert_array_equal(ops.pixel_shuffle(x, r), ref.pixel_shuffle(x, r))


X = np.zeros((1, 8, 3, 3), np.float32)


@pytest.mark.parametrize("x, r, exc, name", [
    (X.astype(np.float64), 2, TypeError, "x"),
    (X.astype(np.float16), 2, TypeError, "x"),
    (X.tolist(), 2, TypeError, "x"),
    (X[0], 2, ValueError, "x"),
    (X[None], 2, ValueError, "x"),
    (np.zeros((1, 8, 0, 3), np.float32), 2, ValueError, "x"),
    (np.zeros((1, 6, 3, 3), np.float32), 2, ValueError, "r"),  # C = 6 not a multiple of r*r = 4
    (X, 3, ValueError, "r"),
    (X, 0, ValueError, "r"),
    (X, -2, ValueError, "r"),
    (X, True, TypeError, "r"),
    (X, 2.0, TypeError, "r"),
    (X, "2", TypeError, "r"),
    (X, None, TypeError, "r"),
])
def test_bad_inputs(x, r, exc, name):
    with pytest.raises(exc, match=rf"\b{name}\b"):
        ops.pixel_shuffle(x, r)


def test_out_is_filled_and_checked(rng):
    x = rng.standard_normal((2, 8, 5, 3)).astype(np.float32)
    out = np.empty((2, 2, 10, 6), np.float32)
    assert ops.pixel_shuffle(x, 2, out=out) is out
    np.testing.assert_array_equal(out, ref.pixel_shuffle(x, 2))
    with pytest.raises(ValueError, match="out must be a C-contiguous float32 array"):
        ops.pixel_shuffle(x, 2, out=np.empty((2, 2, 6, 10), np.float32))
