"""MaxPool on the native a2r_maxpool kernel against the numpy window reference, at each ISA
level x thread count, odd and tail sizes, strides, pads, dilations, ceil_mode."""
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
