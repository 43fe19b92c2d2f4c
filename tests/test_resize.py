"""Resize on the native a2r_resize kernel (model/ops/resize.py) against its numpy reference, at
each ISA level x thread count, odd and tail sizes, every mode; plus the refusals."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from a2r_edge.model import NativeExecutor, UnsupportedOpError, ops
from a2r_edge.model.graph import Node
from tolerances import ELEMENTWISE

SHAPES = [(1, 1), (1, 237), (7, 13), (13, 17), (17, 127), (127, 7)]
MODES = [dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
         dict(mode="nearest", nearest_mode="round_prefer_ceil"),
         dict(mode="linear"),
         dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
         dict(mode="cubic", exclude_outside=1, cubic_coeff_a=-0.5),
         dict(mode="linear", antialias=1)]


def resize_model(sizes, **attrs):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "c", "oh", "ow"])
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)
    g = helper.make_graph([node], "g", [x], [y],
                          [numpy_helper.from_array(np.asarray(sizes, np.int64), "sizes")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


@pytest.mark.parametrize("attrs", MODES, ids=lambda a: "-".join(str(v) for v in a.values()))
@pytest.mark.parametrize("hw", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_matches_reference(native, rng, attrs, hw):
    h, w = hw
    out = (1, 2, 2 * h + 1, max(w // 2, 1))   # enlarge H, shrink W
    ex = NativeExecutor(resize_model(out, **attrs), strict=True)
    x = rng.standard_normal((1, 2, h, w)).astype(np.float32)
    node = Node("Resize", "r", ["x", "", "", "sizes"], ["y"], attrs)
    (want,) = ops.spec("Resize").reference(node, [x, None, None, np.asarray(out, np.int64)])
    np.testing.assert_allclose(ex.run(x), want, **ELEMENTWISE)


@pytest.mark.parametrize("attrs", MODES[:2] + [dict(mode="nearest")],
                         ids=["asymmetric-floor", "round_prefer_ceil", "default"])
@pytest.mark.parametrize("factor", [(2, 2), (3, 2), (2, 3), (1, 2)], ids=lambda f: "x".join(
    map(str, f)))
@pytest.mark.parametrize("hw", [(1, 1), (7, 13), (33, 64)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_nearest_upscale_copies_exactly(native, rng, attrs, factor, hw):
    """Nearest enlargement (the kernel's copy path: doubled columns, rows copied from the row
    before): the reference's values exactly, NaN included, at every row split."""
    (h, w), (fh, fw) = hw, factor
    out = (1, 2, fh * h, fw * w)
    ex = NativeExecutor(resize_model(out, **attrs), strict=True)
    x = rng.standard_normal((1, 2, h, w)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    node = Node("Resize", "r", ["x", "", "", "sizes"], ["y"], attrs)
    (want,) = ops.spec("Resize").reference(node, [x, None, None, np.asarray(out, np.int64)])
    np.testing.assert_array_equal(ex.run(x), want)


def test_refusals_name_the_reason():
    for attrs, why in [(dict(mode="area"), "mode 'area'"),
                       (dict(mode="linear", coordinate_transformation_mode="crop"), "crop")]:
        with pytest.raises(UnsupportedOpError, match=why):
            NativeExecutor(resize_model((1, 2, 8, 8), **attrs), strict=True).run(
                np.zeros((1, 2, 4, 4), np.float32))
