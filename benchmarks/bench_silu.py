"""silu beside onnxruntime (x * Sigmoid(x), the graph an exported SiLU becomes) and numpy, on
64x256x256 float32 (16 MB: memory-bound once the exp is vectorised). The ISA level is the best
this CPU has, or A2R_MAX_ISA's (e.g. A2R_MAX_ISA=avx2 to measure the AVX2 variant on an AVX-512
box); the ratio table prints it."""
import numpy as np

from a2r_edge import ops
from conftest import compare

SHAPE = (64, 256, 256)


def _data():
    return np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)


def test_silu_vs_onnxruntime(benchmark, threads):
    from onnx import helper

    from a2r_edge.runtime.ort import single_op_session
    x = _data()
    out = np.empty_like(x)
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    sess = single_op_session(nodes, {}, threads).session
    feed = {"x": x}
    np.testing.assert_allclose(sess.run(None, feed)[0], ops.silu(x), rtol=1e-5, atol=1e-6)
    compare(benchmark, lambda: ops.silu(x, out=out), lambda: sess.run(None, feed), op="silu",
            case="64x256x256", threads=threads, peer_name="ort Sigmoid*Mul",
            bytes_moved=2 * x.nbytes, target=1.0)


def test_silu(benchmark, threads):
    x = _data()
    out = np.empty_like(x)

    def numpy_silu():
        np.divide(x, 1 + np.exp(-x), out=out)

    compare(benchmark, lambda: ops.silu(x, out=out), numpy_silu, op="silu",
            case="64x256x256", threads=threads, peer_name="numpy x/(1+exp(-x))",
            bytes_moved=2 * x.nbytes, target_bandwidth=0.6)
