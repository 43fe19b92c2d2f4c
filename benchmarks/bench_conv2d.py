"""ops.Conv2d (weights prepacked, out= reused) beside onnxruntime Conv (one session per shape,
intra_op_num_threads = threads, no spinning), in GFLOP/s and as % of the measured FMA peak.

flops = 2 * O * (C/groups) * kh * kw * OH * OW * N; test_conv2d_layer times the bundled encoder's
first three layers (C -> O, stride 1 or 2, fp32: where it stands against onnxruntime per layer,
docs/architecture.md "The AVX2 level on Zen 3"). The FMA peak is the native roofline loop
(measure.fma_peak: independent vector FMAs on registers) timed here at the same thread count.
"""

import numpy as np
import pytest

from a2r_edge import ops
from a2r_edge.runtime import measure
from conftest import compare

from onnx import helper  # noqa: E402

from a2r_edge.runtime.ort import single_op_session  # noqa: E402

# (C = O, H = W, kernel, groups): 3x3 pad 1 at C 32/64/128 x 64^2/128^2/256^2 (128 ch at 256^2
# left out: over a second per ORT call on this 2-core box), a 1x1 and a depthwise 3x3.
CASES = [(c, hw, 3, 1) for hw in (64, 128, 256) for c in (32, 64, 128) if (c, hw) != (128, 256)]
CASES += [(64, 128, 1, 1), (64, 128, 3, 64)]
_PEAK: dict[int, float] = {}


def fma_peak(threads: int) -> float:
    """Measured FMA throughput in flop/s at ``threads`` threads (kept per thread count)."""
    if threads not in _PEAK:
        _PEAK[threads] = measure.fma_peak(threads)
    return _PEAK[threads]


def ort_session(w, b, pad, groups, threads, stride=1, leaky=None):
    """onnxruntime Conv (then LeakyRelu(leaky) when given) of x with w, b."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t" if leaky else "y"], pads=[pad] * 4,
                              group=groups, strides=[stride] * 2)]
    if leaky:
        nodes.append(helper.make_node("LeakyRelu", ["t"], ["y"], alpha=leaky))
    return single_op_session(nodes, {"w": w, "b": b}, threads).session


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"c{c[0]}_{c[1]}px_k{c[2]}_g{c[3]}")
def test_conv2d(benchmark, threads, case):
    c, hw, k, groups = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((c, c // groups, k, k)) / np.sqrt(c // groups * k * k)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    pad = k // 2
    conv = ops.Conv2d(w, b, pad=pad, groups=groups)
    out = conv(x)
    sess = ort_session(w, b, pad, groups, threads)
    np.testing.assert_allclose(out, sess.run(None, {"x": x})[0], rtol=1e-3, atol=1e-3)
    flops = 2 * c * (c // groups) * k * k * hw * hw
    rounds = 5 if flops * hw > 2e12 else 15  # big cases: fewer rounds keep the file short
    row = compare(benchmark, lambda: conv(x, out=out), lambda: sess.run(None, {"x": x}),
                  op="conv2d", case=f"{c}ch {hw}^2 {k}x{k}" + (" dw" if groups > 1 else ""),
                  threads=threads, peer_name="onnxruntime Conv", flops=flops, target=0.7,
                  rounds=rounds)
    peak = fma_peak(threads)
    row["of_peak"] = row["gflops"] * 1e9 / peak
    row["peak_gflops"] = peak / 1e9
    benchmark.extra_info.update(of_peak=row["of_peak"], peak_gflops=row["peak_gflops"])
    print(f"\nconv2d {row['case']} {threads}thr: {row['gflops']:.1f} GFLOP/s = "
          f"{row['of_peak']:.0%} of the {peak / 1e9:.0f} GFLOP/s FMA peak; "
          f"onnxruntime {flops / row['peer_ms'] / 1e6:.1f} GFLOP/s; ratio {row['speedup']:.2f}")


# The bundled encoder's first layers (C, O, input side, stride): 3x3 pad 1, leaky relu fused as
# the executor runs them.
LAYERS = [(3, 16, 512, 1), (16, 24, 512, 2), (24, 32, 256, 2)]


@pytest.mark.parametrize("layer", LAYERS, ids=lambda v: f"c{v[0]}_o{v[1]}_{v[2]}px_s{v[3]}")
def test_conv2d_layer(benchmark, threads, layer):
    c, o, hw, stride = layer
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    conv = ops.Conv2d(w, b, stride=stride, pad=1, activation="leaky_relu", alpha=0.2)
    out = conv(x)
    sess = ort_session(w, b, 1, 1, threads, stride=stride, leaky=0.2)
    np.testing.assert_allclose(out, sess.run(None, {"x": x})[0], rtol=1e-3, atol=1e-3)
    side = (hw - 1) // stride + 1
    compare(benchmark, lambda: conv(x, out=out), lambda: sess.run(None, {"x": x}),
            op="conv2d", case=f"{c}->{o} {hw}^2 3x3 s{stride} leaky", threads=threads,
            peer_name="onnxruntime Conv+LeakyRelu", flops=2 * o * c * 9 * side * side)
