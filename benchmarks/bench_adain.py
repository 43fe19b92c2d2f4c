"""adain and channel_stats beside onnxruntime InstanceNormalization and numpy, same run.

adain reads x once from memory for the statistics and applies them while each plane is still in
cache, so bytes_moved = 2 * x.nbytes (read + write) compares it with the measured copy bandwidth.
Target (issue 20): >= 1.3x onnxruntime InstanceNormalization at every ISA level (A2R_MAX_ISA=avx2
runs the AVX2 variant on an AVX-512 CPU; the table's isa column says which ran).
"""
import numpy as np
import pytest

from a2r_edge import ops
from conftest import compare

SHAPES = [(1, 64, 256, 256), (1, 128, 128, 128)]
EPS = 1e-5


def _case(shape):
    return "x".join(map(str, shape))


def _data(shape):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 2 + 3).astype(np.float32)
    sm = rng.standard_normal(shape[1]).astype(np.float32)
    ss = (rng.random(shape[1]) + 0.5).astype(np.float32)
    return x, sm, ss


def _ort_instance_norm(shape, sm, ss, threads):
    """onnxruntime session of InstanceNormalization(scale = style_std, B = style_mean)."""
    from onnx import helper

    from a2r_edge.runtime.ort import single_op_session
    node = helper.make_node("InstanceNormalization", ["x", "scale", "B"], ["y"], epsilon=EPS)
    return single_op_session([node], {"scale": ss, "B": sm}, threads).session


@pytest.mark.parametrize("shape", SHAPES, ids=_case)
def test_adain_vs_onnxruntime(benchmark, threads, shape):
    x, sm, ss = _data(shape)
    out = np.empty_like(x)
    sess = _ort_instance_norm(shape, sm, ss, threads)
    feed = {"x": x}
    np.testing.assert_allclose(sess.run(None, feed)[0], ops.adain(x, sm, ss, EPS),
                               rtol=1e-4, atol=1e-4)
    compare(benchmark, lambda: ops.adain(x, sm, ss, EPS, out=out), lambda: sess.run(None, feed),
            op="adain", case=_case(shape), threads=threads,
            peer_name="ort InstanceNormalization", bytes_moved=2 * x.nbytes, target=1.3)


@pytest.mark.parametrize("shape", SHAPES, ids=_case)
def test_adain_vs_numpy(benchmark, threads, shape):
    x, sm, ss = _data(shape)
    out = np.empty_like(x)
    sm4, ss4 = sm.reshape(1, -1, 1, 1), ss.reshape(1, -1, 1, 1)

    def numpy_adain():
        mu = x.mean(axis=(2, 3), keepdims=True)
        var = x.var(axis=(2, 3), keepdims=True)
        return (x - mu) / np.sqrt(var + EPS) * ss4 + sm4

    compare(benchmark, lambda: ops.adain(x, sm, ss, EPS, out=out), numpy_adain,
            op="adain", case=_case(shape), threads=threads, peer_name="numpy mean/var",
            bytes_moved=2 * x.nbytes, target=8.0)


@pytest.mark.parametrize("shape", SHAPES, ids=_case)
def test_channel_stats_vs_numpy(benchmark, threads, shape):
    x, _, _ = _data(shape)

    def numpy_stats():
        return x.mean(axis=(2, 3)), np.sqrt(x.var(axis=(2, 3)) + EPS)

    # Reads x once: bytes_moved = x.nbytes.
    compare(benchmark, lambda: ops.channel_stats(x, EPS), numpy_stats, op="channel_stats",
            case=_case(shape), threads=threads, peer_name="numpy mean/var",
            bytes_moved=x.nbytes)


@pytest.mark.parametrize("shape", [(1, 1, 1080, 1920), (1, 3, 512, 512)], ids=_case)
def test_adain_few_planes(benchmark, threads, shape):
    """1-3 large planes: 2 threads must still help (each plane split between threads)."""
    x, sm, ss = _data(shape)
    out = np.empty_like(x)
    sess = _ort_instance_norm(shape, sm, ss, threads)
    feed = {"x": x}
    compare(benchmark, lambda: ops.adain(x, sm, ss, EPS, out=out), lambda: sess.run(None, feed),
            op="adain", case=_case(shape), threads=threads,
            peer_name="ort InstanceNormalization", bytes_moved=2 * x.nbytes)
