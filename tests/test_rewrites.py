"""Graph rewrites of exporter patterns (model/rewrite.py): each fires on the graphs the exporters
write and leaves the result equal to onnxruntime's."""
from __future__ import annotations

import os
import warnings

import numpy as np
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from a2r_edge.model import NativeExecutor
from onnx_graphs import Builder

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "generators")


def plan(ex, shape):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return ex.plan_for({ex.input_names[0]: shape})


def run_both(m, x):
    ex = NativeExecutor(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = ex.run(x).copy()
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return ex, got, sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("name,field,expected", [
    ("pix2pix_unet", "batchnorm_into_conv", 4),     # ConvTranspose -> BatchNorm (eval)
    ("ugatit_light", "adalin_pattern", 6),          # 4 adaILN (2 blocks x 2) + 2 ILN
    ("animeganv2", "groupnorm_pattern", 21),        # every GroupNorm(1, C)
    ("animeganv2", "groupnorm_affine", 21),         # ... with its affine as one node
])
def test_rewrites_fire_on_exported_generators(name, field, expected):
    ex = NativeExecutor(os.path.join(FIXTURES, name + ".onnx"))
    p = plan(ex, (1, 3, 37, 29))
    assert getattr(p.rewrites, field) == expected
    assert f"{field}={expected}" in p.describe()


@pytest.mark.parametrize("name,sizes", [("ugatit_light", [(32, 40), (33, 27)]),
                                        ("ugatit_full", [(24, 24)])])   # full: fixed 24^2
def test_ugatit_adalin_runs_as_one_native_op(name, sizes):
    """U-GAT-IT's AdaLIN/ILN (two decomposed norms, the rho mix, gamma, beta, the Relu after)
    is one native AdaLIN step each: no ReduceMean, Sqrt, Div or Sub left, nothing on
    onnxruntime, and every output equals onnxruntime's to 1e-4 at an even and an odd size."""
    path = os.path.join(FIXTURES, name + ".onnx")
    ex = NativeExecutor(path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for h, w in sizes:
        x = np.random.default_rng(h * w).uniform(-1, 1, (1, 3, h, w)).astype(np.float32)
        p = plan(ex, x.shape)
        left = {pl.op for pl in p.specialised.placements if pl.where != "folded"
                and pl.where != "fused"}
        assert not left & {"ReduceMean", "Sqrt", "Div", "Sub", "Pow"}, left
        assert not p.specialised.foreign()
        steps = [nd for nd in p.nodes if nd.op == "AdaLIN"]
        assert len(steps) == 6
        assert sum(nd.attrs.get("activation") == "relu" for nd in steps) == 4  # + their Relus
        assert "AdaLIN" in p.describe() and "adalin_pattern=6" in p.describe()
        got = ex.run_many({ex.input_names[0]: x})
        for out, want in zip(ex.output_names, sess.run(None, {ex.input_names[0]: x})):
            np.testing.assert_allclose(got[out], want, rtol=1e-4, atol=1e-4)


def layernorm_model(pow_form: bool, axes, unbiased: float = 1.0):
    """(x - mean) / sqrt(var * k + eps) written out, as torch / tf2onnx export it."""
    b = Builder(np.random.default_rng(3), 4)
    x = b.conv("x", 4, 4)
    mean = b.node("ReduceMean", [x], axes=axes, keepdims=1)
    d = b.node("Sub", [x, mean])
    sq = b.node("Pow", [d, b.const(2.0)]) if pow_form else b.node("Mul", [d, d])
    var = b.node("ReduceMean", [sq], axes=axes, keepdims=1)
    if unbiased != 1.0:
        var = b.node("Div", [b.node("Mul", [var, b.const(unbiased * 7)]), b.const(7.0)])
    den = b.node("Sqrt", [b.node("Add", [var, b.const(1e-5)])])
    return b.model(b.node("Relu", [b.node("Div", [d, den])]))


@pytest.mark.parametrize("pow_form,axes,k", [(True, [2, 3], 1.0), (False, [1, 2, 3], 1.0),
                                             (False, [2, 3], 64 / 63), (True, [-3, -2, -1], 1.2)])
def test_decomposed_norm_matches_onnxruntime(pow_form, axes, k):
    m = layernorm_model(pow_form, axes, k)
    x = np.random.default_rng(4).standard_normal((1, 4, 8, 7)).astype(np.float32) * 3 + 1
    ex, got, ref = run_both(m, x)
    assert plan(ex, x.shape).rewrites.norm_pattern == 1
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_partial_pattern_stays_op_by_op():
    """Sqrt of something that is not a variance: no rewrite, same result."""
    b = Builder(np.random.default_rng(5), 3)
    x = b.conv("x", 3, 3)
    mean = b.node("ReduceMean", [x], axes=[2, 3], keepdims=1)
    den = b.node("Sqrt", [b.node("Add", [b.node("Mul", [mean, mean]), b.const(1.0)])])
    m = b.model(b.node("Div", [b.node("Sub", [x, mean]), den]))
    x0 = np.random.default_rng(6).standard_normal((1, 3, 6, 5)).astype(np.float32)
    ex, got, ref = run_both(m, x0)
    assert plan(ex, x0.shape).rewrites.norm_pattern == 0
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_batchnorm_standalone_and_after_conv():
    b = Builder(np.random.default_rng(7), 3)
    rng = np.random.default_rng(8)

    def bn(t, c):
        return b.node("BatchNormalization", [t, b.const(rng.uniform(0.5, 1.5, c)),
                                             b.const(rng.normal(0, 0.1, c)),
                                             b.const(rng.normal(0, 0.1, c)),
                                             b.const(rng.uniform(0.5, 1.5, c))], epsilon=1e-3)
    y = bn(b.conv("x", 3, 5), 5)            # folded into the Conv
    y = bn(b.node("Relu", [y]), 5)          # after a Relu: a per-channel Mul and Add
    m = b.model(y)
    x = rng.standard_normal((1, 3, 9, 6)).astype(np.float32)
    ex, got, ref = run_both(m, x)
    rw = plan(ex, x.shape).rewrites
    assert (rw.batchnorm_into_conv, rw.batchnorm_as_affine) == (1, 1)
    assert not plan(ex, x.shape).specialised.foreign()
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_zero_pad_into_conv():
    b = Builder(np.random.default_rng(9), 3)
    b.inits.append(numpy_helper.from_array(np.array([0, 0, 1, 2, 0, 0, 3, 0], np.int64), "pads"))
    y = b.conv(b.node("Pad", ["x", "pads"]), 3, 4, pad=1)
    m = b.model(y)
    x = np.random.default_rng(10).standard_normal((1, 3, 7, 8)).astype(np.float32)
    ex, got, ref = run_both(m, x)
    p_ = plan(ex, x.shape)
    assert p_.rewrites.pad_into_conv == 1 and not p_.specialised.foreign()
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_pad_and_slice_that_copy_everything_at_a_size_are_dropped():
    """pix2pix pads its input to a multiple of 16 and slices the result back: at 256^2 the
    Pad (zeros) and both Slices copy everything and are dropped (the Tanh before the last one
    then writes the graph output); at 250^2 they do work and stay. Same values as
    onnxruntime."""
    path = os.path.join(FIXTURES, "pix2pix_unet.onnx")
    for side, dropped in ((256, 3), (250, 0)):
        x = np.random.default_rng(side).uniform(-1, 1, (1, 3, side, side)).astype(np.float32)
        ex = NativeExecutor(path)
        p = plan(ex, x.shape)
        assert p.rewrites.identity_at_size == dropped
        assert ("Slice" in [nd.op for nd in p.nodes]) == (not dropped)
        got = ex.run(x)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        want = sess.run(None, {ex.input_names[0]: x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.ptp(want)))


def nhwc_round_trips(extra_reader: bool, undo=(0, 3, 1, 2)):
    """x -> Transpose to NHWC -> Transpose ``undo`` -> Conv -> the same pair -> the output
    (a graph output: the Conv's own must then be written there); extra_reader: the first
    NHWC value is also read by a Relu whose result joins the output (the first Transpose must
    stay)."""
    b = Builder(np.random.default_rng(12), 3)
    nhwc = b.node("Transpose", ["x"], perm=[0, 2, 3, 1])
    y = b.conv(b.node("Transpose", [nhwc], perm=list(undo)), 3, 3)
    y = b.node("Transpose", [b.node("Transpose", [y], perm=[0, 2, 3, 1])], perm=[0, 3, 1, 2])
    if extra_reader:
        y = b.node("Add", [y, b.node("Transpose", [b.node("Relu", [nhwc])], perm=[0, 3, 1, 2])])
    return b.model(y)


@pytest.mark.parametrize("extra_reader", [False, True])
def test_transposes_that_undo_each_other_are_dropped(extra_reader):
    """tf2onnx's NHWC -> NCHW pairs, and those conventions.py adds around an NHWC network:
    each second Transpose goes (its readers read the first's input), the first too when only
    the second read it; the values are onnxruntime's. With the NHWC value also read by a
    Relu, the first Transpose then moves below the Relu and meets the one after it."""
    x = np.random.default_rng(13).standard_normal((1, 3, 7, 5)).astype(np.float32)
    ex, got, ref = run_both(nhwc_round_trips(extra_reader), x)
    p = plan(ex, x.shape)
    ops = [nd.op for nd in p.nodes]
    assert (p.rewrites.transpose_pair, p.rewrites.transpose_sunk) == \
        ((3, 1) if extra_reader else (2, 0))
    assert "Transpose" not in ops, ops
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_transposes_that_do_not_undo_each_other_stay():
    x = np.random.default_rng(14).standard_normal((1, 3, 6, 6)).astype(np.float32)
    ex, got, ref = run_both(nhwc_round_trips(False, undo=(0, 3, 2, 1)), x)  # H and W swapped
    p = plan(ex, x.shape)
    assert p.rewrites.transpose_pair == 1   # only the pair after the Conv
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


# --- AdaLIN pattern variants ----------------------------------------------------------------------

def adalin_model(variant: str = "adalin", seed: int = 11):
    """U-GAT-IT's adaILN as torch.onnx.export writes it (unbiased variances: the n / (n - 1)
    factor as Mul/Div by constants), after a Conv, with gamma and beta computed at run time from
    the picture (GlobalAveragePool, as U-GAT-IT's FC does), then a Relu. Variants:
      adalin       the pattern (matches)
      iln          gamma and beta constants (ILN; matches)
      mix_only     no gamma, no beta (matches)
      eps_differ   the two norms with different eps (matches: the op has one eps per norm)
      gamma_pixels gamma varies per pixel (the mix matches; its Mul and Add stay)
      rho_runtime  rho computed from the picture (no match; both norms rewritten alone)
      axes_differ  the 'layer' norm over (C, H) (no match; the instance norm rewritten alone)
      shared       the instance norm also read elsewhere (no match)"""
    rng = np.random.default_rng(seed)
    c = 4
    b = Builder(rng, 3)
    x = b.conv("x", 3, c)
    h_w = 7 * 6

    inorm = b.decomposed_norm(x, [2, 3], 1e-5, h_w)
    lnorm = b.decomposed_norm(x, [1, 2] if variant == "axes_differ" else [1, 2, 3],
                              1e-3 if variant == "eps_differ" else 1e-5, c * h_w)
    if variant == "rho_runtime":
        rho = b.node("Sigmoid", [b.node("GlobalAveragePool", [x])])
        one_minus = b.node("Sub", [b.const(np.ones((1, c, 1, 1))), rho])
    else:
        r = rng.uniform(0, 1, (1, c, 1, 1))
        rho, one_minus = b.const(r), b.const(1 - r)
    y = b.node("Add", [b.node("Mul", [rho, inorm]), b.node("Mul", [one_minus, lnorm])])
    if variant == "iln":
        y = b.node("Add", [b.node("Mul", [y, b.const(rng.uniform(0.5, 1.5, (1, c, 1, 1)))]),
                           b.const(rng.standard_normal((1, c, 1, 1)))])
    elif variant == "gamma_pixels":
        y = b.node("Add", [b.node("Mul", [y, b.node("Sigmoid", [x])]),
                           b.node("GlobalAveragePool", [x])])
    elif variant != "mix_only":
        pooled = b.node("GlobalAveragePool", [x])
        gamma = b.conv(pooled, c, c, k=1)
        beta = b.conv(pooled, c, c, k=1)
        y = b.node("Add", [b.node("Mul", [y, gamma]), beta])
    if variant == "shared":
        y = b.node("Add", [y, inorm])
    return b.model(b.node("Relu", [y]))


@pytest.mark.parametrize("variant,adalin,norms", [
    ("adalin", 1, 0), ("iln", 1, 0), ("mix_only", 1, 0), ("eps_differ", 1, 0),
    ("gamma_pixels", 1, 0), ("rho_runtime", 0, 2), ("axes_differ", 0, 1), ("shared", 0, 2)])
def test_adalin_variants_match_onnxruntime(variant, adalin, norms):
    m = adalin_model(variant)
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"   # batches too
    # the model's n / (n - 1) is for 7 x 6 only; two samples: per-sample statistics and gamma
    for shape in ((1, 3, 7, 6), (1, 3, 8, 5), (2, 3, 7, 6)):
        x = (np.random.default_rng(12).standard_normal(shape) * 3 + 1).astype(np.float32)
        ex, got, ref = run_both(m, x)
        rw = plan(ex, x.shape).rewrites
        assert (rw.adalin_pattern, rw.norm_pattern) == (adalin, norms)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
        assert ("AdaLIN" in plan(ex, x.shape).describe()) == bool(adalin)


def gelu_model(form: str, half: float = 0.5):
    """GELU written out as torch.onnx.export does below opset 20, in the product orders it
    uses: "end" (x * (1 + erf(x / sqrt 2))) * 0.5 (nn.GELU), "front" (x * 0.5) * (...) (a
    hand-written gelu), "mul" the same with x * sqrt(1/2) for the division."""
    b = Builder(np.random.default_rng(8), 4)
    x = b.conv("x", 4, 4)
    scaled = b.node("Mul", [b.const(np.sqrt(0.5)), x]) if form == "mul" else \
        b.node("Div", [x, b.const(np.sqrt(2.0))])
    one_plus = b.node("Add", [b.const(1.0), b.node("Erf", [scaled])])
    if form == "end":
        y = b.node("Mul", [b.node("Mul", [x, one_plus]), b.const(half)])
    else:
        y = b.node("Mul", [one_plus, b.node("Mul", [x, b.const(half)])])
    return b.model(b.conv(y, 4, 4))


def tanh_gelu_model(form: str, kappa: float = 0.044715):
    """tanh-GELU as the exporters write it: "torch" (nn.GELU(approximate="tanh") below opset
    20: 0.5 * (x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * (x * (x * x)))))), "keras"
    (tf.nn.gelu(approximate=True) through tf2onnx: (0.5 * x) * (1 + tanh(...)) with Pow(x, 3))."""
    b = Builder(np.random.default_rng(8), 4)
    x = b.conv("x", 4, 4)
    cube = b.node("Mul", [x, b.node("Mul", [x, x])]) if form == "torch" else \
        b.node("Pow", [x, b.const(3.0)])
    poly = b.node("Add", [x, b.node("Mul", [b.const(kappa), cube])])
    inner = b.node("Mul", [b.const(np.sqrt(2 / np.pi)), poly])
    one_plus = b.node("Add", [b.const(1.0), b.node("Tanh", [inner])])
    if form == "torch":
        y = b.node("Mul", [b.const(0.5), b.node("Mul", [x, one_plus])])
    else:
        y = b.node("Mul", [b.node("Mul", [b.const(0.5), x]), one_plus])
    return b.model(b.conv(y, 4, 4))


@pytest.mark.parametrize("form,approximate", [("end", "none"), ("front", "none"),
                                              ("mul", "none"), ("torch", "tanh"),
                                              ("keras", "tanh")])
def test_gelu_pattern_is_one_gelu(form, approximate):
    m = gelu_model(form) if approximate == "none" else tanh_gelu_model(form)
    x = np.random.default_rng(9).standard_normal((1, 4, 9, 7)).astype(np.float32) * 3
    ex, got, ref = run_both(m, x)
    p = plan(ex, x.shape)
    assert p.rewrites.gelu_pattern == 1
    left = [(nd.op, nd.attrs.get("approximate")) for nd in p.nodes
            if nd.op in ("Gelu", "Erf", "Tanh", "Pow", "Div", "Mul", "Add")]
    assert left == [("Gelu", approximate)]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lookalike", ["half", "kappa"])
def test_gelu_lookalikes_stay_op_by_op(lookalike):
    """x * 0.4 * (1 + erf(x / sqrt 2)), and tanh-GELU with 0.04 for the cube's 0.044715, are
    not GELU: no rewrite, the same result."""
    m = gelu_model("front", half=0.4) if lookalike == "half" else \
        tanh_gelu_model("keras", kappa=0.04)
    x = np.random.default_rng(10).standard_normal((1, 4, 6, 5)).astype(np.float32)
    ex, got, ref = run_both(m, x)
    assert plan(ex, x.shape).rewrites.gelu_pattern == 0
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


# --- ops tf2onnx exports write -------------------------------------------------------------------

@pytest.mark.parametrize("e", [2.0, 3.0, 0.5, 1.0, -1.0, 2.5])
def test_pow_by_a_constant_exponent(e):
    """x^e by products or a root where e allows (x^3 of tanh-GELU took np.power's slow path
    on a negative base), in place or not; onnxruntime's values (negative bases where the power
    is real)."""
    b = Builder(np.random.default_rng(15), 3)
    y = b.node("Pow", [b.node("Relu", ["x"]) if e in (0.5, 2.5) else "x", b.const(e)])
    m = b.model(b.node("Add", [y, "x"]))   # x read again after the Pow: it cannot write there
    x = np.random.default_rng(16).uniform(-3, 3, (1, 3, 9, 11)).astype(np.float32)
    _, got, ref = run_both(m, x)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-6)
    b = Builder(np.random.default_rng(15), 3)   # the Pow's output over its input (in place)
    m = b.model(b.node("Pow", [b.node("Abs", ["x"]), b.const(e)]))
    _, got, ref = run_both(m, x)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-6)


def test_tile_and_tf_nearest_resize_run_natively():
    """Keras UpSampling2D at a fixed size (Tile of a reshaped map) and tf.image.resize nearest
    (Resize with coordinate_transformation_mode tf_half_pixel_for_nn): native, onnxruntime's
    values; a Tile written into a Concat's slice too."""
    b = Builder(np.random.default_rng(17), 3)
    b.inits += [numpy_helper.from_array(np.array(v, np.int64), name)
                for v, name in (([1, 1, 2, 3], "reps"), ([1, 3, 14, 33], "sizes"))]
    tiled = b.node("Tile", ["x", "reps"])
    near = b.node("Resize", ["x", "", "", "sizes"], mode="nearest",
                  coordinate_transformation_mode="tf_half_pixel_for_nn")
    y = b.node("Concat", [tiled, near], axis=1)
    m = b.model(y, opset=13)
    x = np.random.default_rng(18).standard_normal((1, 3, 7, 11)).astype(np.float32)
    ex, got, ref = run_both(m, x)
    assert not plan(ex, x.shape).specialised.foreign()
    np.testing.assert_array_equal(got, ref)


def test_compress_by_a_mask_known_at_plan_time():
    """tf2onnx writes tf.pad SYMMETRIC as Pads and Compress by masks built from the input's
    shape: the mask folds when the graph is planned, and Compress runs natively (it failed:
    onnx shape inference cannot size it). Here the mask drops row 0 and column W - 1."""
    b = Builder(np.random.default_rng(19), 3)
    b.inits += [numpy_helper.from_array(np.array(v, np.int64), name)
                for v, name in ((0, "zero"), (1, "one"), (2, "two"), (3, "three"))]
    shape = b.node("Shape", ["x"])
    y = "x"
    for axis, drop in ((2, "zero"), (3, "last")):
        n = b.node("Gather", [shape, "two" if axis == 2 else "three"], axis=0)
        if drop == "last":
            drop = b.node("Sub", [n, "one"])
        keep = b.node("Not", [b.node("Equal", [b.node("Range", ["zero", n, "one"]), drop])])
        y = b.node("Compress", [y, keep], axis=axis)
    m = b.model(b.conv(y, 3, 3))
    for size in ((9, 7), (6, 11)):
        x = np.random.default_rng(20).standard_normal((1, 3, *size)).astype(np.float32)
        ex, got, ref = run_both(m, x)
        assert not plan(ex, x.shape).specialised.foreign() and got.shape[2:] == (size[0] - 1,
                                                                                  size[1] - 1)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("order,lo,hi", [("min_max", -0.5, 0.7), ("max_min", -0.5, 0.7),
                                         ("max_min", 0.7, -0.5)])
def test_min_and_max_by_constants_become_one_clip(order, lo, hi):
    """tf.clip_by_value as tf2onnx writes it, in either order: one Clip, onnxruntime's values;
    Max(Min(x, hi), lo) with lo > hi is lo everywhere, not Clip's hi: left as it is."""
    b = Builder(np.random.default_rng(23), 3)
    x = b.conv("x", 3, 3)
    if order == "min_max":
        y = b.node("Min", [b.node("Max", [x, b.const(lo)]), b.const(hi)])
    else:
        y = b.node("Max", [b.const(lo), b.node("Min", [b.const(hi), x])])
    m = b.model(y)
    x = np.random.default_rng(24).standard_normal((1, 3, 8, 9)).astype(np.float32)
    ex, got, ref = run_both(m, x)
    assert plan(ex, x.shape).rewrites.clip_pattern == (lo <= hi)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("act", [None, "LeakyRelu"])
def test_depth_to_space_dcr_after_a_conv_runs_as_crd(act):
    """tf.nn.depth_to_space (DCR) after a Conv, as Keras sub-pixel upscalers export: the Conv's
    output channels reordered and the node CRD (the pixel-shuffle kernel); onnxruntime's
    values. A Conv also read elsewhere keeps its channels (DCR stays)."""
    for shared in (False, True):
        b = Builder(np.random.default_rng(25), 3)
        y = b.conv("x", 3, 12)
        y2 = b.node(act, [y], alpha=0.2) if act else y
        out = b.node("DepthToSpace", [y2], blocksize=2)   # mode DCR, the default
        if shared:   # the conv's output read again: no reordering
            out = b.node("Add", [out, b.node("DepthToSpace", [y], blocksize=2, mode="CRD")])
        m = b.model(out)
        x = np.random.default_rng(26).standard_normal((1, 3, 7, 6)).astype(np.float32)
        ex, got, ref = run_both(m, x)
        p = plan(ex, x.shape)
        assert p.rewrites.depth_to_space_crd == (not shared)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_a_transpose_pair_whose_first_result_is_also_a_graph_output():
    """The NCHW picture through an NHWC copy that is itself a graph output: the second
    Transpose still goes, the first stays to write its output (the first was left reading a
    renamed tensor: KeyError when planned)."""
    from onnx import TensorProto, helper
    b = Builder(np.random.default_rng(27), 3)
    c = b.node("Tanh", [b.conv("x", 3, 3)])
    nhwc = b.node("Transpose", [c], perm=[0, 2, 3, 1])
    back = b.node("Transpose", [nhwc], perm=[0, 3, 1, 2])
    g = helper.make_graph(b.nodes, "g", [b.x], [
        helper.make_tensor_value_info(back, TensorProto.FLOAT, ["n", 3, "h", "w"]),
        helper.make_tensor_value_info(nhwc, TensorProto.FLOAT, ["n", "h", "w", 3])], b.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    x = np.random.default_rng(28).standard_normal((1, 3, 5, 6)).astype(np.float32)
    ex = NativeExecutor(m)
    got = {k: v.copy() for k, v in ex.run_many({"x": x}).items()}
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for name, want in zip((back, nhwc), sess.run(None, {"x": x})):
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["round_prefer_floor", "ceil"])
def test_tf_nearest_resize_at_the_same_size_copies(mode):
    """tf_half_pixel_for_nn at scale 1: onnxruntime copies the input; the formula would move a
    rounding-up nearest mode one pixel."""
    b = Builder(np.random.default_rng(29), 3)
    b.inits.append(numpy_helper.from_array(np.array([1, 1, 1, 1], np.float32), "same"))
    m = b.model(b.node("Resize", ["x", "", "same"], mode="nearest", nearest_mode=mode,
                       coordinate_transformation_mode="tf_half_pixel_for_nn"), opset=13)
    x = np.random.default_rng(30).standard_normal((1, 3, 6, 7)).astype(np.float32)
    _, got, ref = run_both(m, x)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got, x)


def test_transposes_move_below_valuewise_ops_to_meet_their_inverse():
    """NHWC stretches tf2onnx leaves between NCHW Convs: Conv -> Transpose -> Relu -> Mul by
    a scalar -> Add of two such branches -> Transpose back -> Conv. Each Transpose moves below
    the valuewise ops (the Add's two become one) and meets its inverse: none is left, the
    values are onnxruntime's. A Transpose whose result is also read elsewhere stops there: no
    more Transposes than the graph had (4)."""
    for shared in (False, True):
        b = Builder(np.random.default_rng(31), 3)
        branches = []
        for _ in range(2):
            t = b.node("Transpose", [b.conv("x", 3, 4)], perm=[0, 2, 3, 1])
            branches.append(b.node("Mul", [b.node("Relu", [t]), b.const(0.5)]))
        y = b.node("Transpose", [b.node("Add", branches)], perm=[0, 3, 1, 2])
        y = b.conv(y, 4, 4)
        if shared:   # the first NHWC Relu read again, as NHWC, by the output
            y = b.node("Add", [y, b.node("Transpose", [b.node("Sigmoid", [branches[0]])],
                                         perm=[0, 3, 1, 2])])
        m = b.model(y)
        x = np.random.default_rng(32).standard_normal((1, 3, 6, 5)).astype(np.float32)
        ex, got, ref = run_both(m, x)
        ops = [nd.op for nd in plan(ex, x.shape).nodes]
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
        assert ops.count("Transpose") == (4 if shared else 0), ops


@pytest.mark.parametrize("k,s,p,crop,folded", [
    (4, 2, 0, [1, 1, -1, -1], True),     # Keras's "same" Conv2DTranspose: 2H + 2 -> 2H
    (3, 2, 1, [0, 2, -1, -3], True),     # uneven, after the node's own pads
    (4, 2, 0, [1, 1, -1, -1, 2], False),  # step 2: kept
])
def test_a_crop_after_a_conv_transpose_becomes_its_pads(k, s, p, crop, folded):
    """tf2onnx's Slice of a ConvTranspose's spatial axes (starts, ends, steps constants) goes
    into the ConvTranspose's pads; the values are onnxruntime's at an even and an odd size."""
    from test_generator_ops import _ints, conv_transpose
    b = Builder(np.random.default_rng(36), 4)
    y = conv_transpose(b, b.conv("x", 4, 6), 6, 5, k, s, p)
    ins = [y, _ints(b, crop[:2]), _ints(b, crop[2:4]), _ints(b, [2, 3])]
    if len(crop) > 4:
        ins.append(_ints(b, [crop[4]] * 2))
    y = b.conv(b.node("Relu", [b.node("Slice", ins)]), 5, 4)
    m = b.model(y)
    for hw in ((8, 10), (7, 9)):
        x = np.random.default_rng(37).standard_normal((1, 4) + hw).astype(np.float32)
        ex, got, ref = run_both(m, x)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
        p_ = plan(ex, x.shape)
        assert p_.rewrites.crop_into_conv_transpose == int(folded)
        assert ("Slice" in [nd.op for nd in p_.nodes]) != folded


@pytest.mark.parametrize("scale", ["se", "const", "large"])
def test_transposes_move_past_a_multiply_by_a_small_broadcast_operand(scale):
    """tf2onnx's SE block: Conv -> Transpose to NHWC -> Mul by a (1, 1, 1, C) scale ->
    Transpose back -> Conv. The Transpose moves below the Mul, the scale taking the inverse
    permutation (a runtime one through a Transpose of its C values, a constant folded), and
    meets its inverse: only the scale's small Transpose is left. A (1, H, W, 1) operand larger
    than _SMALL_OPERAND keeps the Transposes. onnxruntime's values every way."""
    b = Builder(np.random.default_rng(33), 3)
    c = b.conv("x", 3, 4)
    t = b.node("Transpose", [c], perm=[0, 2, 3, 1])
    if scale == "se":   # the scale from the NHWC map itself: a second reader of t's source
        s = b.node("Sigmoid", [b.node("ReduceMean", [b.node("Transpose", [c],
                                                            perm=[0, 2, 3, 1])],
                                      axes=[1, 2], keepdims=1)])
    elif scale == "const":
        s = b.const(np.random.default_rng(34).uniform(0.5, 2, (1, 1, 1, 4)))
    else:
        s = b.node("Sigmoid", [b.node("ReduceMean", [t], axes=[3], keepdims=1)])
    y = b.conv(b.node("Transpose", [b.node("Mul", [t, s])], perm=[0, 3, 1, 2]), 4, 4)
    hw = (70, 66) if scale == "large" else (9, 7)
    x = np.random.default_rng(35).standard_normal((1, 3) + hw).astype(np.float32)
    ex, got, ref = run_both(b.model(y), x)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    p = plan(ex, x.shape)
    big = [nd for nd in p.nodes if nd.op == "Transpose"
           and np.prod(p.shapes[nd.outputs[0]]) > 4]
    small = [nd for nd in p.nodes if nd.op == "Transpose" and nd not in big]
    if scale == "large":
        assert len(big) == 2
    else:
        assert len(big) == (1 if scale == "se" else 0), [nd.name for nd in big]
        assert len(small) == (1 if scale == "se" else 0)


@pytest.mark.parametrize("perm", [(0, 3, 1, 2), (0, 2, 3, 1), (0, 2, 1, 3)])
def test_a_large_transpose_copied_in_slices(perm):
    """Transposes of over 2^18 values: NHWC -> NCHW copied slice by slice (model/ops/tensor.py),
    the others in one copy: numpy's whole transpose's values either way."""
    from onnx import TensorProto, helper
    shape = (1, 70, 66, 64)
    g = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], perm=list(perm))], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         [shape[p] for p in perm])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    x = np.random.default_rng(34).standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(NativeExecutor(m).run(x), x.transpose(perm))


def test_patterns_behind_transposes_that_went_still_match():
    """tf2onnx's NHWC stretches around a sub-pixel Conv and a clip: once their Transposes go,
    the DepthToSpace still becomes CRD and Max/Min still one Clip (the dropped Transposes'
    reads kept the patterns' "read once" tests failing); onnxruntime's values."""
    x = np.random.default_rng(36).standard_normal((1, 3, 6, 5)).astype(np.float32)
    b = Builder(np.random.default_rng(37), 3)
    t = b.node("Relu", [b.node("Transpose", [b.conv("x", 3, 12)], perm=[0, 2, 3, 1])])
    d2s = b.node("DepthToSpace", [b.node("Transpose", [t], perm=[0, 3, 1, 2])], blocksize=2)
    t = b.node("Transpose", [b.conv(d2s, 3, 4)], perm=[0, 2, 3, 1])
    t = b.node("Min", [b.node("Max", [t, b.const(-0.5)]), b.const(0.5)])
    ex, got, ref = run_both(b.model(b.node("Transpose", [t], perm=[0, 3, 1, 2])), x)
    p = plan(ex, x.shape)
    assert (p.rewrites.depth_to_space_crd, p.rewrites.clip_pattern) == (1, 1)
    assert "Transpose" not in [nd.op for nd in p.nodes]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
