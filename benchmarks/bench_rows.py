"""Softmax and LayerNormalization over the last axis (the rows kernels) beside onnxruntime's,
at the shapes of a window-attention generator (SwinIR-like: 8x8 windows of 16 channels at
256x256, 2 heads) and of a global one (256 tokens): the executor's steps, as a plan runs them.
No goal from an issue: before these kernels, numpy's five passes (Softmax) and the per-plane
adain kernel plus two numpy passes (LayerNorm) ran them (a user trial, 2026-12-07)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from a2r_edge.model import NativeExecutor
from a2r_edge.runtime.ort import OrtSession
from conftest import compare

SOFTMAX = [(4096, 2, 16, 16), (2, 256, 256)]
LAYERNORM = [(1, 65536, 16), (1, 4096, 256)]


def _case(shape):
    return "x".join(map(str, shape))


def _pair(node, inits, shape, threads):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))
    m = helper.make_model(helper.make_graph(
        [node], "g", [x], [y], [numpy_helper.from_array(v, k) for k, v in inits.items()]),
        opset_imports=[helper.make_opsetid("", 17)])
    native = NativeExecutor(m, strict=True)
    return native, OrtSession(m.SerializeToString(), threads=threads)


@pytest.mark.parametrize("shape", SOFTMAX, ids=_case)
def test_softmax_vs_onnxruntime(benchmark, threads, shape):
    x = (np.random.default_rng(0).standard_normal(shape) * 3).astype(np.float32)
    native, ort = _pair(helper.make_node("Softmax", ["x"], ["y"], axis=-1), {}, shape, threads)
    np.testing.assert_allclose(native.run(x), ort.run({"x": x})[0], rtol=1e-5, atol=1e-7)
    compare(benchmark, lambda: native.run(x), lambda: ort.run({"x": x}), op="softmax",
            case=_case(shape), threads=threads, peer_name="ort Softmax",
            bytes_moved=2 * x.nbytes)


@pytest.mark.parametrize("shape", LAYERNORM, ids=_case)
def test_layernorm_vs_onnxruntime(benchmark, threads, shape):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    inits = {"scale": rng.uniform(0.5, 2, shape[-1]).astype(np.float32),
             "bias": rng.standard_normal(shape[-1]).astype(np.float32)}
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=-1)
    native, ort = _pair(node, inits, shape, threads)
    np.testing.assert_allclose(native.run(x), ort.run({"x": x})[0], rtol=1e-4, atol=1e-4)
    compare(benchmark, lambda: native.run(x), lambda: ort.run({"x": x}), op="layernorm",
            case=_case(shape), threads=threads, peer_name="ort LayerNormalization",
            bytes_moved=2 * x.nbytes)
