"""The ops real generators use (ConvTranspose, reflect Pad, pools, norms, Gemm, Resize modes,
attention-style MatMul/Softmax, decomposed LayerNorm ...) at picture sizes, even and odd,
against onnxruntime; and the zero-allocation steady state of their float32 builds."""
import tracemalloc

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from a2r_edge.model import NativeExecutor
from a2r_edge.runtime.ort import OrtSession
from onnx_graphs import Builder
from tolerances import FILTER

SIZES = [(16, 16), (17, 23)]


def _ints(b, values):
    name = b.name("i")
    b.inits.append(numpy_helper.from_array(np.asarray(values, np.int64), name))
    return name


def conv_transpose(b, x, cin, cout, k, s, p, op=0, groups=1, out_shape=None):
    w = b.rng.standard_normal((cin, cout // groups, k, k)) / np.sqrt(cin * k * k / s / s)
    attrs = dict(kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p], group=groups,
                 output_padding=[op, op])
    if out_shape:
        attrs = dict(kernel_shape=[k, k], strides=[s, s], output_shape=out_shape, group=groups)
    return b.node("ConvTranspose", [x, b.const(w), b.const(b.rng.standard_normal(cout) * .1)],
                  **attrs)


def g_upsampler(b):
    """pix2pix / CycleGAN decoder: ConvTranspose k3 s2 p1 op1, k4 s2 p1, grouped, k2 s2."""
    y = conv_transpose(b, "x", 4, 8, 3, 2, 1, op=1)
    y = b.node("Relu", [b.node("InstanceNormalization", [y, b.const(np.ones(8)),
                                                          b.const(np.zeros(8))])])
    y = conv_transpose(b, y, 8, 8, 4, 2, 1, groups=2)
    return conv_transpose(b, b.node("LeakyRelu", [y], alpha=0.2), 8, 4, 2, 2, 0)


def g_reflect_head(b):
    """CycleGAN head: reflect Pad 3 (pads as input) + Conv 7x7, edge Pad, constant Pad."""
    y = b.node("Pad", ["x", _ints(b, [0, 0, 3, 3, 0, 0, 3, 3])], mode="reflect")
    y = b.conv(y, 4, 8, k=7, pad=0)
    y = b.node("Pad", [y, _ints(b, [0, 0, 1, 2, 0, 0, 2, 1])], mode="edge")
    y = b.node("Pad", [y, _ints(b, [0, 0, 0, 1, 0, 0, 1, 0]), b.const(np.array(0.5))],
               mode="constant")
    return b.conv(y, 8, 4, k=3, pad=0)


def g_pools_and_classifier(b):
    """Pools, BatchNorm, depthwise conv, GlobalAveragePool + Flatten + Gemm (a discriminator)."""
    y = b.node("MaxPool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = b.node("BatchNormalization", [y, b.const(b.rng.uniform(.5, 2, 4)),
                                      b.const(b.rng.standard_normal(4)),
                                      b.const(b.rng.standard_normal(4)),
                                      b.const(b.rng.uniform(.5, 2, 4))])
    y = b.conv(y, 4, 4, k=3, groups=4)
    y = b.node("AveragePool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
               ceil_mode=1)
    z = b.node("GlobalAveragePool", [y])
    z = b.node("Flatten", [z])
    z = b.node("Gemm", [z, b.const(b.rng.standard_normal((6, 4))),
                        b.const(b.rng.standard_normal(6))], transB=1)
    z = b.node("Reshape", [z, _ints(b, [1, 6, 1, 1])])
    y = b.conv(y, 4, 6, k=1)
    return b.node("Add", [y, z])


def g_norms_and_activations(b):
    """GroupNorm, LayerNorm over (C, H, W), PRelu, HardSwish, Elu, Gelu, HardSigmoid, Clip."""
    y = b.node("GroupNormalization", ["x", b.const(b.rng.uniform(.5, 2, 4)),
                                      b.const(b.rng.standard_normal(4))], num_groups=2)
    y = b.node("PRelu", [y, b.const(b.rng.uniform(0, .3, (4, 1, 1)))])
    y = b.node("HardSwish", [b.conv(y, 4, 4)])
    y = b.node("Elu", [b.conv(y, 4, 4)], alpha=0.7)
    y = b.node("Gelu", [y])
    y = b.node("HardSigmoid", [b.conv(y, 4, 4)], alpha=0.3, beta=0.4)
    return b.node("Clip", [y, b.const(np.array(0.1)), b.const(np.array(0.8))])


def g_adalin_decomposed(b):
    """U-GAT-IT's AdaLIN as exporters write it: ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add."""
    mean = b.node("ReduceMean", ["x", _ints(b, [2, 3])], keepdims=1)
    d = b.node("Sub", ["x", mean])
    var = b.node("ReduceMean", [b.node("Pow", [d, b.const(np.array(2.0))]), _ints(b, [2, 3])],
                 keepdims=1)
    inorm = b.node("Div", [d, b.node("Sqrt", [b.node("Add", [var, b.const(np.array(1e-5))])])])
    lmean = b.node("ReduceMean", ["x", _ints(b, [1, 2, 3])], keepdims=1)
    ld = b.node("Sub", ["x", lmean])
    lvar = b.node("ReduceMean", [b.node("Mul", [ld, ld]), _ints(b, [1, 2, 3])], keepdims=1)
    lnorm = b.node("Div", [ld, b.node("Sqrt", [b.node("Add", [lvar, b.const(np.array(1e-5))])])])
    rho = b.const(b.rng.uniform(0, 1, (1, 4, 1, 1)))
    y = b.node("Add", [b.node("Mul", [inorm, rho]),
                       b.node("Mul", [lnorm, b.node("Sub", [b.const(np.array(1.0)), rho])])])
    return b.node("Exp", [b.node("Neg", [b.node("Abs", [y])])])


def g_resize_modes(b):
    """Resize: linear half_pixel x2, cubic x2 (pytorch_half_pixel), nearest floor back down."""
    y = b.node("Resize", ["x", "", b.const([1, 1, 2, 2])], mode="linear")
    y = b.node("Resize", [y, "", b.const([1, 1, 0.5, 0.5])], mode="cubic",
               coordinate_transformation_mode="pytorch_half_pixel")
    return b.node("Resize", [y, "", b.const([1, 1, 1.5, 1.5])], mode="nearest",
                  coordinate_transformation_mode="asymmetric", nearest_mode="floor")


def g_attention(b):
    """Self-attention over pixels: Reshape, Transpose, MatMul, Softmax, Split, Concat, Slice."""
    q, k = b.node("Split", [b.conv("x", 4, 8, k=1), _ints(b, [4, 4])], axis=1), None
    k = q + "_k"
    b.nodes[-1].output.append(k)
    flat_q = b.node("Reshape", [q, _ints(b, [1, 4, -1])])
    flat_k = b.node("Reshape", [k, _ints(b, [1, 4, -1])])
    att = b.node("Softmax", [b.node("MatMul", [b.node("Transpose", [flat_q], perm=[0, 2, 1]),
                                                flat_k])], axis=-1)
    v = b.node("Reshape", ["x", _ints(b, [1, 4, -1])])
    o = b.node("MatMul", [v, b.node("Transpose", [att], perm=[0, 2, 1])])
    o = b.node("Reshape", [o, _ints(b, [0, 4, -1, 1])])
    o = b.node("Squeeze", [o, _ints(b, [3])])
    o = b.node("Unsqueeze", [o, _ints(b, [3])])
    s = b.node("Slice", [o, _ints(b, [0]), _ints(b, [2]), _ints(b, [1])])
    return b.node("Concat", [s, b.node("Sigmoid", [s])], axis=1)


GRAPHS = [g_upsampler, g_reflect_head, g_pools_and_classifier, g_norms_and_activations,
          g_adalin_decomposed, g_resize_modes]


def build(fn, seed=0):
    """The graph at opset 21 (GroupNormalization's per-channel form, Gelu)."""
    b = Builder(np.random.default_rng(seed), 4)
    y = fn(b)
    out = helper.make_tensor_value_info(y, TensorProto.FLOAT, ["n", "c", "h", "w"])
    g = helper.make_graph(b.nodes, "g", [b.x], [out], b.inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize("fn", GRAPHS + [g_attention], ids=lambda f: f.__name__)
@pytest.mark.parametrize("hw", SIZES, ids=str)
def test_matches_onnxruntime(fn, hw):
    m = build(fn)
    x = np.random.default_rng(1).standard_normal((1, 4) + hw).astype(np.float32)
    want = OrtSession(m.SerializeToString(), threads=1).run({"x": x})[0]
    got = NativeExecutor(m, strict=True).run(x)   # every node native
    scale = max(float(np.abs(want).max()), 1.0)   # 1e-4 of the output range, as issue 19 asks
    np.testing.assert_allclose(got, want, rtol=FILTER["rtol"], atol=FILTER["atol"] * scale)


def test_conv_transpose_output_shape_and_odd_kernels():
    for k, s, p, op in [(3, 2, 1, 1), (4, 2, 1, 0), (5, 3, 2, 2), (1, 2, 0, 1), (3, 1, 1, 0)]:
        b = Builder(np.random.default_rng(k + s), 4)
        m = b.model(conv_transpose(b, "x", 4, 6, k, s, p, op=op))
        x = np.random.default_rng(2).standard_normal((1, 4, 9, 14)).astype(np.float32)
        want = OrtSession(m.SerializeToString(), threads=1).run({"x": x})[0]
        np.testing.assert_allclose(NativeExecutor(m, strict=True).run(x), want, **FILTER,
                                   err_msg=f"k{k} s{s} p{p} op{op}")


def _convt_model(cin, cout, kernel, strides, pads, out_pad, groups, out_shape, seed):
    b = Builder(np.random.default_rng(seed), cin)
    w = b.rng.standard_normal((cin, cout // groups) + tuple(kernel))
    attrs = dict(kernel_shape=list(kernel), strides=list(strides), group=groups)
    if out_shape:
        attrs["output_shape"] = list(out_shape)
    else:
        attrs.update(pads=list(pads), output_padding=list(out_pad))
    y = b.node("ConvTranspose", ["x", b.const(w), b.const(b.rng.standard_normal(cout))],
               **attrs)
    return b.model(y)


def test_conv_transpose_forms_sweep():
    """Both 2-D forms (stacked sub-pixel, per phase) against onnxruntime over the geometry:
    kernels that are and are not multiples of the stride, smaller than the stride (phases with
    no taps), unequal strides and kernels, asymmetric and large pads (x cropped),
    output_padding, output_shape, groups, stride 1, odd sizes."""
    rng = np.random.default_rng(7)
    cases = [((4, 4), (2, 2), (1, 1, 1, 1), (0, 0), 1, None),
             ((2, 2), (2, 2), (0, 0, 0, 0), (0, 0), 1, None),
             ((4, 4), (2, 2), (3, 3, 3, 3), (0, 0), 1, None),
             ((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 2, None),
             ((3, 5), (2, 3), (0, 2, 1, 1), (1, 2), 1, None),
             ((1, 1), (3, 3), (0, 0, 0, 0), (2, 1), 1, None),
             ((2, 3), (3, 2), (2, 0, 0, 1), (0, 0), 2, None),
             ((3, 3), (1, 1), (1, 2, 0, 1), (0, 0), 1, None),
             ((5, 5), (2, 2), (4, 4, 4, 4), (1, 1), 1, None),
             ((4, 4), (4, 4), (0, 1, 2, 3), (3, 0), 1, None),
             ((4, 3), (2, 3), (1, 0, 2, 1), (1, 2), 1, None),
             ((4, 4), (2, 2), (5, 0, 0, 5), (0, 0), 2, None),
             ((3, 3), (2, 2), None, None, 1, (16, 19))]
    for i, (k, s, p, op, groups, out_shape) in enumerate(cases):
        cin, cout = 4, 6
        m = _convt_model(cin, cout, k, s, p, op, groups, out_shape, seed=i)
        for hw in ((7, 9),) if out_shape else ((7, 9), (8, 8)):
            x = rng.standard_normal((1, cin) + hw).astype(np.float32)
            want = OrtSession(m.SerializeToString(), threads=1).run({"x": x})[0]
            got = NativeExecutor(m, strict=True).run(x)
            assert got.shape == want.shape, (k, s, p, op, out_shape, hw)
            scale = max(float(np.abs(want).max()), 1.0)
            np.testing.assert_allclose(got, want, rtol=FILTER["rtol"],
                                       atol=FILTER["atol"] * scale,
                                       err_msg=f"k{k} s{s} p{p} op{op} g{groups} {hw}")


@pytest.mark.parametrize("fn", [g_upsampler, g_reflect_head, g_pools_and_classifier,
                                g_resize_modes], ids=lambda f: f.__name__)
def test_no_allocation_after_first_run(fn):
    ex = NativeExecutor(build(fn), strict=True)
    x = np.ones((1, 4, 97, 101), np.float32)
    ex.run(x)
    tracemalloc.start()
    cur0, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    ex.run(x)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak - cur0 < 64 << 10, f"a run allocated {peak - cur0} bytes"


def test_integer_graph_input_runs_by_reference():
    """A graph whose int64 input is shape arithmetic: run through the references."""
    x = helper.make_tensor_value_info("x", TensorProto.INT64, [3])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [3])
    g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["y"])], "g", [x], [y],
                          [numpy_helper.from_array(np.array(2, np.int64), "two")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    ex = NativeExecutor(m, strict=True)
    assert ex.run(np.array([1, 5, 1 << 40], np.int64)).tolist() == [2, 10, 2 << 40]
    with pytest.raises(TypeError, match="int64"):
        ex.run(np.zeros(3, np.float32))


def test_in_place_over_any_input_keeps_operand_order():
    """Outputs planned over a dying input (any position): Max of three whose output reuses its
    third input, Sub whose output reuses its second."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 7])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 5, 7])
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["x"], ["b"]),
             helper.make_node("Abs", ["x"], ["c"]), helper.make_node("Max", ["a", "b", "c"], ["m"]),
             helper.make_node("Sub", ["x", "m"], ["s"]), helper.make_node("Div", ["s", "x"], ["y"])]
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17)])
    xv = np.random.default_rng(0).standard_normal((1, 2, 5, 7)).astype(np.float32)
    ex = NativeExecutor(m, strict=True)
    want = OrtSession(m.SerializeToString(), threads=1).run({"x": xv})[0]
    np.testing.assert_allclose(ex.run(xv), want, **FILTER)
    assert ex.plan_for({"x": xv.shape}).inplace >= 2
