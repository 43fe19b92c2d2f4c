"""The rows kernels (cpu_ops/src/rows): the executor's Softmax over the last axis and
LayerNormalization without its statistics outputs, at every ISA level x 1 and 2 threads,
against onnxruntime and a float64 oracle: short rows (window attention's 16 tokens), long and
odd ones, large offsets, -inf scores (masks), run-time scale and bias, in place."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from a2r_edge import _kernels
from a2r_edge.model import NativeExecutor
from a2r_edge.runtime.ort import OrtSession


def _model(nodes, inits, shape, opset=17):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))
    g = helper.make_graph(nodes, "g", [x], [y],
                          [numpy_helper.from_array(v.astype(np.float32), k)
                           for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _both(m, x):
    want = OrtSession(m.SerializeToString(), threads=1).run({"x": x})[0]
    return NativeExecutor(m, strict=True).run(x), want


def _softmax64(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("shape", [(512, 2, 16, 16), (3, 7, 1), (5, 200), (2, 3, 33)], ids=str)
def test_softmax_rows(native, shape):
    x = (np.random.default_rng(0).standard_normal(shape) * 6).astype(np.float32)
    m = _model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], {}, shape)
    got, want = _both(m, x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    exact = _softmax64(x)
    normal = exact >= np.finfo(np.float32).tiny
    assert np.max(np.abs(got[normal] - exact[normal]) / exact[normal]) < 4e-6   # the contract


@pytest.mark.parametrize("n", [1, 16, 37])
def test_rows_kernels_in_place(native, n):
    """y may be x: the same bits as into another array."""
    x = (np.random.default_rng(n).standard_normal(50 * n) * 4).astype(np.float32)
    scale, bias = np.linspace(0.5, 2, n, dtype=np.float32), np.linspace(-1, 1, n, dtype=np.float32)
    for run in (lambda a, b: _kernels.softmax_rows(a, b, 50, n),
                lambda a, b: _kernels.layernorm_rows(a, 50, n, scale, bias, 1e-5, b)):
        apart, inplace = np.empty_like(x), x.copy()
        run(x, apart)
        run(inplace, inplace)
        np.testing.assert_array_equal(inplace.view(np.uint32), apart.view(np.uint32))


def test_softmax_masked_and_extreme_scores(native):
    """-inf scores weigh exactly 0; scores 200 apart give 0, not e^-87; a NaN row is NaN."""
    x = np.tile(np.linspace(-3, 3, 37, dtype=np.float32), (4, 1))
    x[0, ::2] = -np.inf
    x[1, 5] = 200.0
    x[2, 3] = np.nan
    m = _model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], {}, x.shape)
    got = NativeExecutor(m, strict=True).run(x)
    assert np.all(got[0, ::2] == 0) and got[1, 5] == 1 and np.all(got[1, :5] == 0)
    assert np.all(np.isnan(got[2]))
    np.testing.assert_allclose(got[[0, 3]], _softmax64(x[[0, 3]]), rtol=2e-6, atol=1e-9)


@pytest.mark.parametrize("shape,axis", [((1, 64, 64, 16), -1), ((2, 9, 200), -1),
                                        ((1, 5, 7, 9), 1), ((3, 17), -1)], ids=str)
@pytest.mark.parametrize("with_bias", [True, False])
def test_layernorm_rows(native, shape, axis, with_bias):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 2 + 1000).astype(np.float32)   # a large offset
    row = shape[axis:]
    inits = {"scale": rng.uniform(0.5, 2, row)}
    if with_bias:
        inits["bias"] = rng.standard_normal(row[-1:])   # broadcast over the row
    node = helper.make_node("LayerNormalization", ["x", "scale"] + ["bias"] * with_bias, ["y"],
                            axis=axis, epsilon=1e-5)
    m = _model([node], inits, shape)
    got, want = _both(m, x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    axes = tuple(range(len(shape) + axis if axis < 0 else axis, len(shape)))
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean(axes, keepdims=True)) / np.sqrt(x64.var(axes, keepdims=True) + 1e-5)
    ref = ref * inits["scale"] + (inits["bias"] if with_bias else 0)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=2e-4)


def test_layernorm_scale_and_bias_computed_at_run_time(native):
    """Scale and bias computed from the input (x's mean over its first two axes): read on each
    run, two inputs giving two scales."""
    shape = (2, 6, 8)
    rng = np.random.default_rng(2)
    axes = numpy_helper.from_array(np.array([0, 1], np.int64), "axes")
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["mean"], keepdims=0),
             helper.make_node("Abs", ["mean"], ["a"]),
             helper.make_node("Add", ["a", "half"], ["scale"]),
             helper.make_node("Neg", ["mean"], ["bias"]),
             helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=-1)]
    m = _model(nodes, {"half": np.array(0.5)}, shape, opset=18)
    m.graph.initializer.append(axes)
    ex = NativeExecutor(m, strict=True)
    for seed in (3, 4):
        x = rng.standard_normal(shape).astype(np.float32) + seed
        want = OrtSession(m.SerializeToString(), threads=1).run({"x": x})[0]
        np.testing.assert_allclose(ex.run(x), want, rtol=1e-4, atol=1e-4)
