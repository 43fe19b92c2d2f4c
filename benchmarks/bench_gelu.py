"""GELU and Erf beside onnxruntime on 32x512x512 float32 (32 MB), the activation of transformer
and ConvNeXt-style generators, and a conv-GELU-conv model at 512x512. The onnxruntime peer runs
GELU as torch.onnx.export writes it below opset 20 (Div, Erf, Add, Mul, Mul; its graph
optimiser may fuse them, as our rewrite does) and Erf alone; the model case also in tf2onnx's
tanh form (Keras approximate=True). No goal from an issue: before the
gelu kernel (at ead8df9) the executor computed both in float64 numpy: the model at 0.06x
onnxruntime."""
import numpy as np
import pytest

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


def gelu_model(form: str = "erf"):
    """conv 3 -> 32, GELU as the exporters write it, conv 32 -> 3, Tanh. form "erf": torch below
    opset 20 (Div, Erf, Add, Mul, Mul); "tanh": tf2onnx's Keras approximate=True (Pow 3, Mul,
    Add, Mul, Tanh, Add, Mul, Mul). Either is one Gelu after the executor's rewrite."""
    from onnx import TensorProto, helper as h, numpy_helper as nh
    r = np.random.default_rng(0)
    inits = {"w0": r.standard_normal((32, 3, 3, 3)) * 0.3, "b0": np.zeros(32),
             "w1": r.standard_normal((3, 32, 3, 3)) * 0.1, "b1": np.zeros(3),
             "s2": np.sqrt(2), "one": 1.0, "half": 0.5, "three": 3.0, "kappa": 0.044715,
             "beta": np.sqrt(2 / np.pi)}
    mk = h.make_node
    if form == "erf":
        gelu = [mk("Div", ["a", "s2"], ["d"]), mk("Erf", ["d"], ["e"]),
                mk("Add", ["e", "one"], ["p"]), mk("Mul", ["a", "p"], ["m"]),
                mk("Mul", ["m", "half"], ["g"])]
    else:
        gelu = [mk("Pow", ["a", "three"], ["c"]), mk("Mul", ["kappa", "c"], ["k"]),
                mk("Add", ["a", "k"], ["q"]), mk("Mul", ["beta", "q"], ["i"]),
                mk("Tanh", ["i"], ["t"]), mk("Add", ["one", "t"], ["p"]),
                mk("Mul", ["half", "a"], ["m"]), mk("Mul", ["m", "p"], ["g"])]
    nodes = [mk("Conv", ["x", "w0", "b0"], ["a"], pads=[1] * 4), *gelu,
             mk("Conv", ["g", "w1", "b1"], ["o"], pads=[1] * 4), mk("Tanh", ["o"], ["y"])]
    io = [h.make_tensor_value_info(n, TensorProto.FLOAT, [1, 3, None, None]) for n in "xy"]
    g = h.make_graph(nodes, "gelu", io[:1], io[1:],
                     [nh.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize("form", ["erf", "tanh"])
def test_gelu_model_vs_onnxruntime(benchmark, threads, form):
    """The whole model at 512x512 through the native executor (its GELU rewritten into one
    Gelu) beside onnxruntime's session of the same graph."""
    from a2r_edge.model import NativeExecutor
    from a2r_edge.runtime.ort import OrtSession
    model = gelu_model(form)
    native, ort = NativeExecutor(model), OrtSession(model, threads=threads)
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 512, 512)).astype(np.float32)
    np.testing.assert_allclose(native.run(x), ort.run({"x": x})[0], rtol=1e-4, atol=1e-5)
    compare(benchmark, lambda: native.run(x), lambda: ort.run({"x": x}), op="gelu model",
            case=f"conv-GELU({form})-conv 512x512", threads=threads, peer_name="onnxruntime")
