"""ConvTranspose and MatMul/Gemm at the plan's bf16/int8 precision (ops/conv_transpose.py,
ops/matmul.py): their low-precision forms against the same model at fp32 within the quality
guard, the per-node precision tag of plan.describe(), and the forms that stay fp32 (generic
ConvTranspose, small or non-constant products) saying why."""
import json
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from a2r_edge.model import NativeExecutor
from a2r_edge.model import precision as prec
from a2r_edge.model.ops.matmul import LOWP_MIN_INNER, LOWP_MIN_MACS, LOWP_MIN_ROWS
from a2r_edge.runtime import cpu
from test_precision import GENERATORS, generator, sample_crop
from tolerances import GUARD_PSNR_DB

LOWP = ("bf16", "int8")


@pytest.fixture(autouse=True)
def lowp_runs():
    if cpu.isa() == "baseline":
        pytest.skip("bf16/int8 need AVX2")


def model_of(nodes, inputs, output, inits):
    """An opset-17 ONNX model (bytes) of nodes; inputs: [(name, shape)]; output: (name, shape)."""
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(output[0], TensorProto.FLOAT, output[1])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def tag_lines(ex, x_shape, op):
    return [line for line in ex.describe(x_shape).splitlines() if f" {op} " in line]


# --- ConvTranspose: the generator families that have it ----------------------------------------

@pytest.mark.parametrize("precision", LOWP)
@pytest.mark.parametrize("name", ["cyclegan_resnet", "pix2pix_unet", "realcugan_unet"])
def test_generator_conv_transposes_at_low_precision(name, precision):
    """Only the ConvTranspose nodes at precision (every Conv kept at fp32 by the fallback
    list): the model output keeps the guard against fp32 on another crop than the ranges came
    from, really changes, and describe() tags each ConvTranspose with the precision."""
    h, w = GENERATORS[name]
    ex = generator(name)
    calib, x = sample_crop(h, w, 1), sample_crop(h, w, 2)
    want = ex.run(x).copy()
    ranges = prec.calibrate_ranges(ex, [calib])
    transposed = [n for n in ranges if "ConvTranspose" in n]
    assert transposed, "calibration ranged no ConvTranspose"
    ex.set_precision(precision, ranges, fp32_nodes=[n for n in ranges if n not in transposed])
    got = ex.run(x)
    assert not np.array_equal(got, want)   # really a different arithmetic
    assert prec.psnr(got, want) >= GUARD_PSNR_DB[precision]
    lines = tag_lines(ex, x.shape, "ConvTranspose")
    assert len(lines) == len(transposed) and all(f"@{precision}" in line for line in lines)


@pytest.mark.parametrize("precision", LOWP)
@pytest.mark.parametrize("name", ["cyclegan_resnet", "pix2pix_unet", "realcugan_unet"])
def test_generator_plans_keep_the_guard_with_conv_transposes(name, precision):
    """The whole plan (Conv and ConvTranspose, per-layer fallback) keeps the guard on another
    crop, and its ConvTranspose nodes are in the fallback's reach (calibrated ranges)."""
    h, w = GENERATORS[name]
    ex = generator(name)
    calib, x = sample_crop(h, w, 1), sample_crop(h, w, 2)
    want = ex.run(x).copy()
    entry = prec.plan(ex, [calib], precision)
    assert any("ConvTranspose" in n for n in entry["act_ranges"])
    assert prec.psnr(ex.run(x), want) >= GUARD_PSNR_DB[precision]
    for line in tag_lines(ex, x.shape, "ConvTranspose"):
        assert f"@{precision}" in line or "@fp32: per-layer fallback" in line


@pytest.mark.parametrize("kernel, stride", [((4, 4), 2), ((3, 3), 2), ((2, 2), 2), ((3, 3), 1)])
@pytest.mark.parametrize("precision", LOWP)
def test_conv_transpose_forms_at_low_precision(rng, kernel, stride, precision):
    """Each 2-D shape (k a multiple of s; k3 s2, stacked with zero taps at bf16/int8 and run
    per phase at fp32; stride 1) at precision, with a bias, against its fp32 output."""
    w = (rng.standard_normal((16, 8) + kernel) / 8).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], name="up",
                            kernel_shape=list(kernel), strides=[stride] * 2, pads=[1] * 4)
    model = model_of([node], [("x", [1, 16, "H", "W"])], ("y", [1, 8, "OH", "OW"]), {"w": w, "b": b})
    ex = NativeExecutor(model)
    x = rng.standard_normal((1, 16, 12, 10)).astype(np.float32)
    want = ex.run(x).copy()
    ex.set_precision(precision, prec.calibrate_ranges(ex, [x]))
    got = ex.run(x)
    assert not np.array_equal(got, want)
    assert prec.psnr(got, want) >= GUARD_PSNR_DB[precision]
    assert "@" + precision in tag_lines(ex, x.shape, "ConvTranspose")[0]


def test_k3_s2_conv_transpose_is_stacked_below_fp32_only():
    """The form rule (ops/conv_transpose.py _form): k3 s2 runs per phase at fp32 and stacked
    (zero taps) at bf16/int8, where a phase's short lane loop costs more; k4 s2 always stacks."""
    from a2r_edge.model.graph import Node
    from a2r_edge.model.ops.conv_transpose import _form, convt_geometry
    for k, forms in ((3, {"fp32": "phases", "bf16": "stacked", "int8": "stacked"}),
                     (4, {"fp32": "stacked", "bf16": "stacked", "int8": "stacked"})):
        node = Node("ConvTranspose", "up", ["x", "w"], ["y"],
                    {"kernel_shape": [k, k], "strides": [2, 2], "pads": [1, 1, 1, 1]})
        geo = convt_geometry(node, (1, 16, 12, 10), (16, 8, k, k))
        assert {p: _form((1, 16, 12, 10), geo, p) for p in forms} == forms


def test_generic_conv_transpose_stays_fp32(rng):
    """A dilated ConvTranspose (the generic form) runs fp32 at any precision, is not ranged
    (so never in a fallback list) and describe() says why."""
    w = (rng.standard_normal((8, 4, 3, 3)) / 8).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up", kernel_shape=[3, 3],
                            strides=[2, 2], dilations=[2, 2])
    model = model_of([node], [("x", [1, 8, "H", "W"])], ("y", [1, 4, "OH", "OW"]), {"w": w})
    ex = NativeExecutor(model)
    x = rng.standard_normal((1, 8, 9, 7)).astype(np.float32)
    want = ex.run(x).copy()
    assert prec.calibrate_ranges(ex, [x]) == {}
    for p in LOWP:
        ex.set_precision(p, {})
        np.testing.assert_array_equal(ex.run(x), want)
        line, = tag_lines(ex, x.shape, "ConvTranspose")
        assert "@fp32: generic form" in line


# --- MatMul / Gemm with a constant weight ------------------------------------------------------

def matmul_model(rows, k, n, rng, batch=1):
    """a (batch, rows, k) -> MatMul by a constant (k, n) -> Relu, as an ONNX model."""
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["a", "w"], ["p"], name="fc"),
             helper.make_node("Relu", ["p"], ["y"])]
    return model_of(nodes, [("a", [batch, rows, k])], ("y", [batch, rows, n]), {"w": w})


def judged(ex, x, precision):
    """PSNR of ex at precision (ranges from x) against its fp32 output, and that output."""
    ex.set_precision("fp32")
    want = ex.run(x).copy()
    ex.set_precision(precision, prec.calibrate_ranges(ex, [x]))
    got = ex.run(x)
    return prec.psnr(got, want), got, want


AT_THRESHOLD = LOWP_MIN_MACS // LOWP_MIN_INNER ** 2   # rows of a K = N = LOWP_MIN_INNER product


@pytest.mark.parametrize("precision", LOWP)
@pytest.mark.parametrize("batch, rows, k, n", [
    (1, AT_THRESHOLD, LOWP_MIN_INNER, LOWP_MIN_INNER),
    (2, AT_THRESHOLD // 2, LOWP_MIN_INNER, LOWP_MIN_INNER),   # rows counted over the batch
    (1, LOWP_MIN_ROWS, 2 * LOWP_MIN_INNER, 2 * LOWP_MIN_INNER)])
def test_large_matmul_runs_at_low_precision(rng, precision, batch, rows, k, n):
    """A product at the size threshold runs as a 1x1 conv at precision: within the guard of
    fp32, not equal to it, tagged in describe()."""
    ex = NativeExecutor(matmul_model(rows, k, n, rng, batch))
    x = rng.standard_normal((batch, rows, k)).astype(np.float32)
    db, got, want = judged(ex, x, precision)
    assert not np.array_equal(got, want) and db >= GUARD_PSNR_DB[precision], db
    np.testing.assert_allclose(want, np.maximum(x @ ex.graph.consts["w"], 0), rtol=1e-4,
                               atol=1e-4)
    assert f"@{precision}" in tag_lines(ex, x.shape, "MatMul")[0]


@pytest.mark.parametrize("rows, k, n", [
    (AT_THRESHOLD - 1, LOWP_MIN_INNER, LOWP_MIN_INNER),           # too few multiply-adds
    (LOWP_MIN_ROWS - 1, 4 * LOWP_MIN_INNER, 4 * LOWP_MIN_INNER),  # too few rows
    (512, LOWP_MIN_INNER // 2, 256), (512, 256, LOWP_MIN_INNER - 1)])   # K or N too small
def test_small_matmul_stays_fp32(rng, rows, k, n):
    """Below the threshold numpy's fp32 product runs at any precision, unranged, and
    describe() says why."""
    ex = NativeExecutor(matmul_model(rows, k, n, rng))
    x = rng.standard_normal((1, rows, k)).astype(np.float32)
    want = ex.run(x).copy()
    assert prec.calibrate_ranges(ex, [x]) == {}
    ex.set_precision("int8", {})
    np.testing.assert_array_equal(ex.run(x), want)
    assert "@fp32: small product" in tag_lines(ex, x.shape, "MatMul")[0]


def test_matmul_by_a_runtime_tensor_stays_fp32(rng):
    """B computed at run time (a @ a^T): nothing to pack once, fp32."""
    nodes = [helper.make_node("Transpose", ["a"], ["at"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["a", "at"], ["y"], name="gram")]
    ex = NativeExecutor(model_of(nodes, [("a", [1, 256, 256])], ("y", [1, 256, 256]), {}))
    x = rng.standard_normal((1, 256, 256)).astype(np.float32)
    ex.set_precision("bf16")
    np.testing.assert_allclose(ex.run(x), x @ x.transpose(0, 2, 1), rtol=1e-4, atol=1e-3)
    assert "@fp32: B is not a constant" in tag_lines(ex, x.shape, "MatMul")[0]


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("c_shape", [None, (160,), (1, 160), (256, 160), (256, 1)])
@pytest.mark.parametrize("precision", LOWP)
def test_gemm_at_low_precision(rng, precision, trans_a, c_shape):
    """Gemm (alpha, beta, transA, transB, C as a row, a matrix or a column) at precision
    against the float64 reference, within the guard."""
    m, k, n = 256, 192, 160
    w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)   # transB=1
    inits, ins = {"w": w}, ["a", "w"]
    if c_shape is not None:
        inits["c"] = rng.standard_normal(c_shape).astype(np.float32)
        ins.append("c")
    node = helper.make_node("Gemm", ins, ["y"], name="fc", alpha=0.5, beta=2.0, transA=trans_a,
                            transB=1)
    a_shape = [k, m] if trans_a else [m, k]
    ex = NativeExecutor(model_of([node], [("a", a_shape)], ("y", [m, n]), inits))
    x = rng.standard_normal(a_shape).astype(np.float32)
    ref = 0.5 * ((x.T if trans_a else x).astype(np.float64) @ w.T.astype(np.float64))
    if c_shape is not None:
        ref = ref + 2.0 * inits["c"]
    db, got, want = judged(ex, x, precision)
    np.testing.assert_allclose(want, ref, rtol=1e-4, atol=1e-4)
    assert db >= GUARD_PSNR_DB[precision] and prec.psnr(got, ref) >= GUARD_PSNR_DB[precision]
    assert f"@{precision}" in tag_lines(ex, x.shape, "Gemm")[0]


def test_auto_chooses_for_a_matmul_stage(rng):
    """auto judges a model whose only low-precision step is a large MatMul like a conv model:
    whatever it takes passes the guard, and describe() tags the step with it."""
    ex = NativeExecutor(matmul_model(512, 256, 256, rng), precision="auto")
    x = rng.standard_normal((1, 512, 256)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ex.run(x)
    c = ex.choice
    assert list(c["act_ranges"]) == ["fc"]
    for p in LOWP:   # judged, or not offered: its one product runs faster at fp32
        assert p in c["psnr"] or f"{p}: every convolution faster at fp32" in c["reason"], c
    if c["precision"] != "fp32":
        assert c["psnr"][c["precision"]] >= GUARD_PSNR_DB[c["precision"]]
    assert f"@{c['precision']}" in tag_lines(ex, x.shape, "MatMul")[0]


def test_choices_stored_before_these_ops_are_not_reused(rng, tmp_path):
    """A stored plan of the previous schema (its fallback judged with ConvTranspose and MatMul
    at fp32) is not brought back; one of the current schema is."""
    path = str(tmp_path / "choices.json")
    entry = {"model": {"precision": "int8", "act_ranges": {}, "fp32_nodes": {"int8": []}}}
    prec.store(path, "int8", entry)
    assert prec.load(path, "int8") == entry
    with open(path) as f:
        old = json.load(f)
    old["schema"] = "a2r_edge.precision/1"
    with open(path, "w") as f:
        json.dump(old, f)
    assert prec.load(path, "int8") == {}


@pytest.mark.parametrize("precision", LOWP)
def test_gemm_with_a_runtime_c_at_low_precision(rng, precision):
    """C computed at run time (each row's mean of A, broadcast over N) scaled by beta after the
    low-precision product: its scratch and the product's do not overlap."""
    m, k, n = 256, 192, 160
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    nodes = [helper.make_node("ReduceMean", ["a"], ["c"], axes=[1], keepdims=1),
             helper.make_node("Gemm", ["a", "w", "c"], ["y"], name="fc", beta=3.0)]
    ex = NativeExecutor(model_of(nodes, [("a", [m, k])], ("y", [m, n]), {"w": w}))
    x = rng.standard_normal((m, k)).astype(np.float32)
    ref = x.astype(np.float64) @ w + 3.0 * x.mean(axis=1, keepdims=True)
    db, got, want = judged(ex, x, precision)
    np.testing.assert_allclose(want, ref, rtol=1e-4, atol=1e-4)
    assert prec.psnr(got, ref) >= GUARD_PSNR_DB[precision] and f"@{precision}" in \
        tag_lines(ex, x.shape, "Gemm")[0]
