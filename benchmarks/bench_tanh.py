"""tanh beside onnxruntime Tanh and numpy's float32 tanh, on 64x256x256 float32 (16 MB), the
output activation of most image generators (pix2pix, CycleGAN, ...). The ISA level is the best
this CPU has, or A2R_MAX_ISA's; the ratio table prints it. No goal from an issue: before this
kernel the executor ran numpy's tanh, which is libm one value at a time below AVX-512."""
import numpy as np

from a2r_edge import ops
from conftest import compare

SHAPE = (64, 256, 256)


def _data():
    return (np.random.default_rng(0).standard_normal(SHAPE) * 2).astype(np.float32)


def test_tanh_vs_onnxruntime(benchmark, threads):
    from onnx import helper

    from a2r_edge.runtime.ort import single_op_session
    x = _data()
    out = np.empty_like(x)
    sess = single_op_session([helper.make_node("Tanh", ["x"], ["y"])], {}, threads).session
    feed = {"x": x}
    np.testing.assert_allclose(sess.run(None, feed)[0], ops.tanh(x), rtol=1e-5, atol=1e-6)
    compare(benchmark, lambda: ops.tanh(x, out=out), lambda: sess.run(None, feed), op="tanh",
            case="64x256x256", threads=threads, peer_name="ort Tanh", bytes_moved=2 * x.nbytes)


def test_tanh_vs_numpy(benchmark, threads):
    x = _data()
    out = np.empty_like(x)
    compare(benchmark, lambda: ops.tanh(x, out=out), lambda: np.tanh(x, out=out), op="tanh",
            case="64x256x256", threads=threads, peer_name="numpy tanh",
            bytes_moved=2 * x.nbytes)
