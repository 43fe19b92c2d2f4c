"""Pad of the two spatial axes on the native a2r_pad2d kernel (what exported generators write
before their convolutions) against np.pad, at each ISA level x thread count: constant (with a
value), reflect and edge, asymmetric pads, pads as wide as reflect allows, 1-pixel sides, and
pictures large enough to split across threads. Other Pads (wrap, negative, N/C axes) keep the
numpy copies: one case each, so both paths stay tested."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from a2r_edge import _kernels
from a2r_edge.model import NativeExecutor

SHAPES = [(1, 1), (2, 7), (7, 13), (33, 5), (260, 257)]
PADS = [(1, 1, 1, 1), (3, 0, 2, 1), (0, 4, 0, 0), (6, 6, 6, 6)]


def _model(mode, pads, value=None):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "c", "oh", "ow"])
    inits = [helper.make_tensor("pads", TensorProto.INT64, [8], list(pads))]
    ins = ["x", "pads"]
    if value is not None:
        inits.append(helper.make_tensor("value", TensorProto.FLOAT, [], [value]))
        ins.append("value")
    g = helper.make_graph([helper.make_node("Pad", ins, ["y"], mode=mode)], "g", [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def _np_pads(pads):
    return [(pads[i], pads[i + 4]) for i in range(4)]


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("hw", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_spatial_pads_match_numpy(native, rng, mode, hw):
    data = rng.standard_normal((1, 3) + hw).astype(np.float32)
    for t, l, b, r in PADS:
        pads = [0, 0, t, l, 0, 0, b, r]
        limit = {"reflect": 1, "edge": 0}.get(mode)   # pads <= side - limit (pad_params)
        if limit is not None and (max(t, b) > hw[0] - limit or max(l, r) > hw[1] - limit):
            continue   # refused at plan time (test_generator_ops, test_hostile_graphs)
        value = 0.5 if mode == "constant" else None
        kw = dict(constant_values=np.float32(value)) if value is not None else {}
        want = np.pad(data, _np_pads(pads), mode=mode, **kw)
        ex = NativeExecutor(_model(mode, pads, value), strict=True)
        np.testing.assert_array_equal(ex.run(data), want, err_msg=f"{mode} {pads}")


def test_generator_pads_run_natively_other_pads_by_copies(rng):
    """The kernel runs the spatial non-negative case (its step is the pad2d_at call); wrap,
    negative pads and pads of the channel axis still give np.pad's values."""
    data = rng.standard_normal((1, 3, 9, 8)).astype(np.float32)
    ex = NativeExecutor(_model("reflect", [0, 0, 2, 1, 0, 0, 1, 2]), strict=True)
    ex.run(data)
    (step,) = ex.plan_for({"x": data.shape}).steps
    assert step.func is _kernels.pad2d_at
    for mode, pads in [("wrap", [0, 0, 2, 1, 0, 0, 1, 2]), ("edge", [0, 1, -2, 1, 0, 0, 1, -3]),
                       ("constant", [0, 2, 1, 0, 0, 1, 0, 1]),
                       ("constant", [0, 0, -1, -2, 0, 0, -3, 0]),   # crops only: one copy
                       ("reflect", [0, -1, 0, -1, 0, 0, -1, -1])]:
        x = data
        crop = tuple(slice(-min(pads[i], 0), data.shape[i] + min(pads[i + 4], 0))
                     for i in range(4))
        want = np.pad(x[crop], [(max(a, 0), max(b, 0)) for a, b in _np_pads(pads)], mode=mode)
        np.testing.assert_array_equal(NativeExecutor(_model(mode, pads), strict=True).run(x),
                                      want, err_msg=f"{mode} {pads}")
    assert set(_kernels.PAD2D_MODES) == {"constant", "reflect", "edge"}


@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 0, 0), (2, 7, 13, 3, 4, 2), (5, 9, 9, 0, 0, 1),
                                   (3, 261, 270, 131, 129, 5)],
                         ids=lambda s: "x".join(map(str, s)))
def test_crop_add_matches_numpy(native, rng, shape):
    """crop_add (the Add of a crop, Real-CUGAN's skips): x's kept part plus b, exactly; into a
    new buffer and in place over b; the last case splits across threads."""
    nc, xh, xw, h, w, top = shape
    h, w = max(1, xh - h), max(1, xw - w)   # the kept part
    left = (xw - w) // 2
    top = min(top, xh - h)
    x = rng.standard_normal((nc, xh, xw)).astype(np.float32)
    b = rng.standard_normal((nc, h, w)).astype(np.float32)
    want = x[:, top:top + h, left:left + w] + b
    y = np.full_like(b, np.nan)
    _kernels.crop_add_at(x.ctypes.data, nc, xh, xw, top, left, b.ctypes.data, h, w, y.ctypes.data)
    np.testing.assert_array_equal(y, want)
    _kernels.crop_add_at(x.ctypes.data, nc, xh, xw, top, left, b.ctypes.data, h, w, b.ctypes.data)
    np.testing.assert_array_equal(b, want)
