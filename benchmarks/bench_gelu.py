"""GELU and Erf beside onnxruntime on 32x512x512 float32 (32 MB), the activation of transformer
and ConvNeXt-style generators. The onnxruntime peer runs GELU as torch.onnx.export writes it
below opset 20 (Div, Erf, Add, Mul, Mul; its graph optimiser may fuse them, as our rewrite
does) and Erf alone. No goal from an issue: before the gelu kernel the executor computed both
in float64 numpy, 0.06x onnxruntime on a GELU model (a user trial, 2026-12-07)."""
import numpy as np

from a2r_edge import ops
from conftest import compare

SHAPE = (32, 512, 512)


def _data():
    return (np.random.default_rng(0).standard_normal(SHAPE) * 2).astype(np.float32)


def _session(nodes, threads):
    from a2r_edge.runtime.ort import single_op_session
    consts = {"sqrt2": np.array(np.sqrt(2), np.float32), "one": np.array(1, np.float32),
              "half": np.array(0.5, np.float32)}
    return single_op_session(nodes, consts, threads).session


def test_gelu_vs_onnxruntime(benchmark, threads):
    from onnx import helper
    mk = helper.make_node
    sess = _session([mk("Div", ["x", "sqrt2"], ["d"]), mk("Erf", ["d"], ["e"]),
                     mk("Add", ["e", "one"], ["a"]), mk("Mul", ["x", "a"], ["m"]),
                     mk("Mul", ["m", "half"], ["y"])], threads)
    x = _data()
    out = np.empty_like(x)
    feed = {"x": x}
    np.testing.assert_allclose(sess.run(None, feed)[0], ops.gelu(x), rtol=1e-5, atol=1e-6)
    compare(benchmark, lambda: ops.gelu(x, out=out), lambda: sess.run(None, feed), op="gelu",
            case="32x512x512", threads=threads, peer_name="ort Div-Erf-Add-Mul-Mul",
            bytes_moved=2 * x.nbytes)


def test_erf_vs_onnxruntime(benchmark, threads):
    from onnx import helper
    sess = _session([helper.make_node("Erf", ["x"], ["y"])], threads)
    x = _data()
    out = np.empty_like(x)
    feed = {"x": x}
    np.testing.assert_allclose(sess.run(None, feed)[0], ops.erf(x), rtol=1e-5, atol=1e-6)
    compare(benchmark, lambda: ops.erf(x, out=out), lambda: sess.run(None, feed), op="erf",
            case="32x512x512", threads=threads, peer_name="ort Erf", bytes_moved=2 * x.nbytes)
