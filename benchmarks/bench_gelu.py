"""GELU and Erf beside onnxruntime on 32x512x512 float32 (32 MB), the activation of transformer
and ConvNeXt-style generators, and a conv-GELU-conv model at 512x512. The onnxruntime peer runs
GELU as torch.onnx.export writes it below opset 20 (Div, Erf, Add, Mul, Mul; its graph
optimiser may fuse them, as our rewrite does) and Erf alone. No goal from an issue: before the
gelu kernel (at ead8df9) the executor computed both in float64 numpy: the model at 0.06x
onnxruntime."""
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


def gelu_model():
    """conv 3 -> 32, GELU as torch.onnx.export writes it below opset 20 (Div, Erf, Add, Mul,
    Mul: one Gelu after the executor's rewrite), conv 32 -> 3, Tanh."""
    import onnx
    from onnx import TensorProto, helper as h, numpy_helper as nh
    r = np.random.default_rng(0)
    inits = {"w0": r.standard_normal((32, 3, 3, 3)) * 0.3, "b0": np.zeros(32),
             "w1": r.standard_normal((3, 32, 3, 3)) * 0.1, "b1": np.zeros(3),
             "s2": np.sqrt(2), "one": 1.0, "half": 0.5}
    nodes = [h.make_node("Conv", ["x", "w0", "b0"], ["a"], pads=[1] * 4),
             h.make_node("Div", ["a", "s2"], ["d"]), h.make_node("Erf", ["d"], ["e"]),
             h.make_node("Add", ["e", "one"], ["p"]), h.make_node("Mul", ["a", "p"], ["m"]),
             h.make_node("Mul", ["m", "half"], ["g"]),
             h.make_node("Conv", ["g", "w1", "b1"], ["o"], pads=[1] * 4),
             h.make_node("Tanh", ["o"], ["y"])]
    io = [h.make_tensor_value_info(n, TensorProto.FLOAT, [1, 3, None, None]) for n in "xy"]
    g = h.make_graph(nodes, "gelu", io[:1], io[1:],
                     [nh.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def test_gelu_model_vs_onnxruntime(benchmark, threads):
    """The whole model at 512x512 through the native executor (its GELU rewritten into one
    Gelu) beside onnxruntime's session of the same graph."""
    from a2r_edge.model import NativeExecutor
    from a2r_edge.runtime.ort import OrtSession
    model = gelu_model()
    native, ort = NativeExecutor(model), OrtSession(model, threads=threads)
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 512, 512)).astype(np.float32)
    np.testing.assert_allclose(native.run(x), ort.run({"x": x})[0], rtol=1e-4, atol=1e-5)
    compare(benchmark, lambda: native.run(x), lambda: ort.run({"x": x}), op="gelu model",
            case="conv-GELU-conv 512x512", threads=threads, peer_name="onnxruntime")
