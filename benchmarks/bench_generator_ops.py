"""The new heavy ops of issue 19 beside onnxruntime, one op per graph, at generator sizes:
ConvTranspose k3 s2 (pix2pix/CycleGAN upsampling), reflect Pad alone (the native pad2d kernel)
and reflect Pad + 7x7 Conv (CycleGAN head), depthwise 3x3 Conv, MaxPool 3x3 s2,
BatchNormalization, Resize linear x2, and U-GAT-IT's decomposed ILN (two normalisations, the rho
mix, gamma, beta, Relu: one AdaLIN step natively). And what Keras exports through tf2onnx lean
on: AveragePool 2x2 s2, the NHWC <-> NCHW Transposes (an NHWC map is the (1, H, W, C) input),
x^3 (tanh-GELU's cube, Pow by a constant 3), the mean over an NHWC map's H and W (an SE block's
squeeze). A one-op graph's time includes run()'s copy
of the input into the plan's arena (onnxruntime reads it in place): for the memory-bound ops
(Pad, MaxPool, BatchNormalization) that copy is a visible share.

    python -m pytest benchmarks/bench_generator_ops.py -k "1thr" --benchmark-disable-gc
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from onnx_graphs import Builder  # noqa: E402
from test_generator_ops import conv_transpose, _ints  # noqa: E402

from a2r_edge.model import NativeExecutor  # noqa: E402
from a2r_edge.runtime.ort import OrtSession  # noqa: E402
from conftest import compare  # noqa: E402


def upsample(b, c):
    return conv_transpose(b, "x", c, c // 2, 3, 2, 1, op=1)


def reflect_pad(b, c):
    return b.node("Pad", ["x", _ints(b, [0, 0, 3, 3, 0, 0, 3, 3])], mode="reflect")


def reflect_head(b, c):
    return b.conv(reflect_pad(b, c), c, c, k=7, pad=0)


def depthwise(b, c):
    return b.conv("x", c, c, k=3, groups=c)


def maxpool(b, c):
    return b.node("MaxPool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])


def batchnorm(b, c):
    r = b.rng
    return b.node("BatchNormalization", ["x", b.const(r.uniform(.5, 2, c)),
                                         b.const(r.standard_normal(c)),
                                         b.const(r.standard_normal(c)),
                                         b.const(r.uniform(.5, 2, c))])


def resize_linear(b, c):
    return b.node("Resize", ["x", "", b.const([1, 1, 2, 2])], mode="linear")


def iln(b, c):
    """U-GAT-IT's ILN as exported (rho, gamma, beta constants), then its Relu."""
    r = b.rng
    h_w = ILN_SIZE * ILN_SIZE
    rho = r.uniform(0, 0.5, (1, c, 1, 1))
    y = b.node("Add", [b.node("Mul", [b.const(rho), b.decomposed_norm("x", [2, 3], count=h_w)]),
                       b.node("Mul", [b.const(1 - rho),
                                      b.decomposed_norm("x", [1, 2, 3], count=c * h_w)])])
    y = b.node("Add", [b.node("Mul", [y, b.const(r.uniform(0.8, 1.2, (1, c, 1, 1)))]),
                       b.const(r.uniform(-0.1, 0.1, (1, c, 1, 1)))])
    return b.node("Relu", [y])


def avgpool(b, c):
    return b.node("AveragePool", ["x"], kernel_shape=[2, 2], strides=[2, 2])


def to_nhwc(b, c):
    return b.node("Transpose", ["x"], perm=[0, 2, 3, 1])


def from_nhwc(b, c):   # x read as (1, H, W, C)
    return b.node("Transpose", ["x"], perm=[0, 3, 1, 2])


def cube(b, c):
    return b.node("Pow", ["x", b.const(3.0)])


def mean_hw_nhwc(b, c):   # x read as (1, H, W, C): a Keras SE block's squeeze
    return b.node("ReduceMean", ["x"], axes=[1, 2], keepdims=1)


ILN_SIZE = 128
CASES = {  # name: (graph, channels, size)
    "ConvTranspose k3 s2 64->32": (upsample, 64, 128),
    "reflect Pad 3 x64": (reflect_pad, 64, 256),
    "reflect Pad 3 + Conv 7x7 32->32": (reflect_head, 32, 256),
    "depthwise Conv 3x3 x64": (depthwise, 64, 128),
    "MaxPool 3x3 s2 x64": (maxpool, 64, 128),
    "BatchNormalization x64": (batchnorm, 64, 128),
    "Resize linear x2 x32": (resize_linear, 32, 128),
    "ILN (AdaLIN) x64": (iln, 64, ILN_SIZE),
    "AveragePool 2x2 s2 x32": (avgpool, 32, 256),
    "Transpose to NHWC x64": (to_nhwc, 64, 256),
    "Transpose from NHWC x64": (from_nhwc, 256, (256, 64)),   # (1, 256, 256, 64)
    "Pow 3 x32": (cube, 32, 256),
    "ReduceMean H, W of NHWC x32": (mean_hw_nhwc, 512, (512, 32)),   # (1, 512, 512, 32)
}


@pytest.mark.parametrize("case", list(CASES))
def test_op(benchmark, threads, case):
    graph, c, size = CASES[case]
    h, w = (size, size) if isinstance(size, int) else size
    b = Builder(np.random.default_rng(0), c)
    model = b.model(graph(b, c)).SerializeToString()
    x = np.random.default_rng(1).standard_normal((1, c, h, w)).astype(np.float32)
    ex, ort = NativeExecutor(model), OrtSession(model, threads=threads)
    np.testing.assert_allclose(ex.run(x), ort.run({"x": x})[0], rtol=1e-3, atol=1e-3)
    compare(benchmark, lambda: ex.run(x), lambda: ort.run({"x": x}), op=case.split()[0],
            case=f"{case} {h}x{w}", threads=threads, peer_name="onnxruntime", target=1.0,
            rounds=7)
