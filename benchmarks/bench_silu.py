import numpy as np

from a2r_edge import ops
from conftest import compare


def test_silu(benchmark, threads):
    x = np.random.default_rng(0).standard_normal((64, 256, 256)).astype(np.float32)
    out = np.empty_like(x)

    def numpy_silu():
        np.divide(x, 1 + np.exp(-x), out=out)

    compare(benchmark, lambda: ops.silu(x, out=out), numpy_silu, op="silu",
            case="64x256x256", threads=threads, peer_name="numpy x/(1+exp(-x))",
            bytes_moved=2 * x.nbytes, target_bandwidth=0.6)
