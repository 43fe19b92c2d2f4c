"""MaxPool and AveragePool on the native a2r_maxpool and a2r_avgpool kernels against the numpy
window reference, at each ISA level x thread count, odd and tail sizes, strides, pads,
dilations, ceil_mode, count_include_pad."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from a2r_edge.model import NativeExecutor, ops
from a2r_edge.model.graph import Node

SHAPES = [(1, 1), (1, 237), (7, 13), (13, 17), (17, 127), (127, 7)]
POOLS = [dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
         dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
         dict(kernel_shape=[3, 1], strides=[1, 3], pads=[2, 0, 1, 0], dilations=[2, 1]),
         dict(kernel_shape=[1, 5], auto_pad="SAME_UPPER")]


@pytest.mark.parametrize("attrs", POOLS, ids=str)
@pytest.mark.parametrize("hw", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_matches_reference(native, rng, attrs, hw):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "c", "oh", "ow"])
    g = helper.make_graph([helper.make_node("MaxPool", ["x"], ["y"], **attrs)], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    data = rng.standard_normal((2, 3) + hw).astype(np.float32)
    try:
        (want,) = ops.spec("MaxPool").reference(Node("MaxPool", "p", ["x"], ["y"], attrs),
                                                [data])
    except ValueError:   # the window does not fit this size: the executor refuses it too
        with pytest.raises(ValueError):
            NativeExecutor(m, strict=True).run(data)
        return
    np.testing.assert_array_equal(NativeExecutor(m, strict=True).run(data), want)


AVG_POOLS = POOLS + [dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
                     dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1,
                          count_include_pad=1)]


@pytest.mark.parametrize("attrs", AVG_POOLS, ids=str)
@pytest.mark.parametrize("hw", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_average_pool_matches_reference(native, rng, attrs, hw):
    """AveragePool on the native a2r_avgpool kernel (it ran one numpy add per tap over a
    padded copy): the float64 reference's values to float32 rounding, pads counted or not."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "c", "oh", "ow"])
    g = helper.make_graph([helper.make_node("AveragePool", ["x"], ["y"], **attrs)], "g", [x],
                          [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    data = rng.standard_normal((2, 3) + hw).astype(np.float32)
    try:
        (want,) = ops.spec("AveragePool").reference(
            Node("AveragePool", "p", ["x"], ["y"], attrs), [data])
    except ValueError:
        with pytest.raises(ValueError):
            NativeExecutor(m, strict=True).run(data)
        return
    ex = NativeExecutor(m, strict=True)
    np.testing.assert_allclose(ex.run(data), want, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("stride", [1, 2, 3])
def test_max_pool_skips_nans_and_keeps_infinities(native, rng, stride):
    """The kernel's max (a row buffer of the window's rows, then its columns) never lets a NaN
    win, keeps +-inf, and gives -inf for a window of NaNs only: the max of the taps with every
    NaN read as -inf, whatever the order the taps are taken in."""
    from a2r_edge import _kernels
    h, w, k, p = 11, 13, 3, 1
    x = rng.standard_normal((2, h, w)).astype(np.float32)
    x[rng.random(x.shape) < 0.3] = np.nan
    x[0, :3, :3] = np.nan                      # a window of NaNs only
    x[1, 5, 6], x[1, 7, 2] = np.inf, -np.inf
    oh, ow = (h + 2 * p - k) // stride + 1, (w + 2 * p - k) // stride + 1
    y = np.empty((2, oh, ow), np.float32)
    _kernels.maxpool(x.reshape(-1), 2, h, w, k, k, stride, stride, p, p, 1, 1, oh, ow,
                     y.reshape(-1))
    padded = np.pad(np.where(np.isnan(x), -np.inf, x), ((0, 0), (p, p), (p, p)),
                    constant_values=-np.inf)
    want = np.array([[[padded[c, i * stride:i * stride + k, j * stride:j * stride + k].max()
                       for j in range(ow)] for i in range(oh)] for c in range(2)])
    np.testing.assert_array_equal(y, want)
    assert y[0, 0, 0] == -np.inf
