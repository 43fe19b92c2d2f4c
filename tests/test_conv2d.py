"""ops.conv2d / ops.Conv2d: every ISA level x 1 and 2 threads against the float64 reference and
against onnxruntime Conv, over kernels 1x1-7x7, strides, pads, dilations, groups, depthwise, odd
sizes, batches, bias, activations, residual and out=; hypothesis-drawn shapes; bad inputs.
The Winograd F(4,3) path (3x3 stride 1) is forced on and off through _kernels.conv2d_set_algo,
and held, wherever it may run, to REDUCTION on the magnitude of the terms its sums add."""
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from a2r_edge import _kernels, ops
from a2r_edge.model import reference as ref
from a2r_edge.runtime import cpu
from tolerances import ACT_LIPSCHITZ, REDUCTION, winograd_magnitude

ACTS = [None, "relu", "leaky_relu", "silu"]


def make(rng, n, c, h, w, o, k, groups=1, bias=True):
    """x ~ N(0, 1), w scaled by 1/sqrt(fan-in) (as trained weights are) so y is O(1) and the
    float32 sum error (about eps * sqrt(K)) sits well inside rtol/atol 1e-4/1e-5."""
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    kh, kw = (k, k) if isinstance(k, int) else k
    cg = c // groups
    wt = (rng.standard_normal((o, cg, kh, kw)) / np.sqrt(cg * kh * kw)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32) if bias else None
    return x, wt, b


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def winograd_able(wt, stride=1, dil=1, groups=1):
    """The shapes the fp32 Winograd path may take (common/conv_common.h wino_able)."""
    o, c = wt.shape[:2]
    return (wt.shape[2:] == (3, 3) and pair(stride) == (1, 1) and pair(dil) == (1, 1) and
            groups == 1 and (c, o) != (1, 1))


def assert_conv_close(got, want, x, wt, stride=1, pad=0, dil=1, groups=1, act=None):
    """REDUCTION elementwise; where Winograd may run, REDUCTION's rtol applies to the magnitude
    of the terms Winograd's sums add (F(4,3)'s transforms multiply by up to 8 before values
    cancel: about 5e-6 of the output's scale, which can exceed rtol*|y| + atol at a y near 0)."""
    assert got.shape == want.shape
    if not winograd_able(wt, stride, dil, groups):
        np.testing.assert_allclose(got, want, **REDUCTION)
        return
    p = pair(pad)
    assert p[0] == p[1]
    mag = winograd_magnitude(x, wt, p[0], 4) * (ACT_LIPSCHITZ if act else 1.0)
    lim = REDUCTION["rtol"] * np.maximum(np.abs(want), mag) + REDUCTION["atol"]
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= lim), (float(err.max()), float((err / lim).max()))


def check(x, wt, b, stride=1, pad=0, dil=1, groups=1, act=None, residual=None, alpha=0.01):
    got = ops.conv2d(x, wt, b, stride, pad, dil, groups, act, alpha=alpha, residual=residual)
    want = ref.conv2d(x, wt, b, pair(stride), pair(pad), pair(dil), groups, act, alpha, residual)
    assert_conv_close(got, want, x, wt, stride, pad, dil, groups, act)
    return got


# n, c, h, w, o, kernel, stride, pad, dilation, groups
CASES = [
    (1, 3, 17, 13, 8, 3, 1, 1, 1, 1),
    (2, 16, 9, 7, 13, 3, 2, 2, 2, 1),
    (1, 32, 20, 20, 32, 1, 1, 0, 1, 1),     # 1x1: x read in place
    (2, 7, 13, 17, 5, 1, 1, 0, 1, 1),       # 1x1 with a partial last panel
    (1, 8, 17, 1, 4, 1, 2, 0, 1, 1),        # 1x1 strided: packed path
    (1, 5, 13, 13, 7, 5, 1, 2, 1, 1),
    (1, 4, 23, 19, 9, 7, 2, 3, 1, 1),
    (2, 8, 11, 11, 6, 5, 2, 3, 1, 2),       # groups 2
    (1, 12, 15, 15, 12, 3, 1, 1, 1, 12),    # depthwise
    (2, 6, 9, 14, 6, 5, 2, 2, 2, 6),        # depthwise, strided, dilated
    (2, 5, 11, 37, 5, 3, 1, 2, 2, 5),       # depthwise 3x3 nine-tap rows, dilated
    (1, 4, 6, 3, 4, 3, 1, 0, 1, 4),         # depthwise 3x3 no padding, narrow
    (1, 6, 7, 7, 12, 3, 1, 1, 1, 6),        # channel multiplier 2 (GEMM path)
    (1, 1, 1, 1, 1, 1, 1, 0, 1, 1),         # everything 1
    (1, 3, 1, 7, 17, 3, 1, 1, 1, 1),
    (1, 64, 31, 29, 70, 3, 1, 1, 1, 1),     # several row blocks and pixel tiles
    (2, 10, 19, 23, 9, 3, 1, 2, 2, 1),      # stride 1 (implicit GEMM strip), dilated
    (2, 8, 12, 10, 6, 3, 1, 0, 1, 2),       # implicit, groups 2, no padding
    (1, 16, 9, 300, 20, 3, 1, 1, 1, 1),     # implicit: tiles start and end mid-row
    (1, 96, 7, 700, 8, 5, 1, 2, 1, 1),      # implicit: strip budget bound (thin tiles)
    (1, 3, 200, 37, 12, 3, 1, 0, 1, 1),     # implicit, no padding: tiles read x in place,
    (2, 6, 150, 41, 10, 3, 1, 0, 1, 2),     # the last one a strip; groups 2, batch 2
    (1, 4, 120, 50, 7, 3, 1, 0, 2, 1),      # dilated
    (1, 13, 40, 60, 5, 3, 1, 0, 1, 1),      # 13 x 3 tap rows per panel: the strip again
    (1, 16, 40, 300, 24, 3, 2, 1, 1, 1),    # polyphase implicit, stride 2: tiles mid-row
    (1, 5, 19, 23, 7, 3, 3, 1, 1, 1),       # polyphase, stride 3: nine phase planes
    (2, 6, 16, 15, 9, 4, 2, 1, 1, 1),       # polyphase, even kernel
    (1, 6, 17, 17, 5, 3, 2, 1, 2, 1),       # stride 2 dilation 2 reads one phase: im2col
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_matches_reference(native, rng, case):
    n, c, h, w, o, k, s, p, d, g = case
    x, wt, b = make(rng, n, c, h, w, o, k, g)
    check(x, wt, b, s, p, d, g)
    check(x, wt, None, s, p, d, g)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[8]], ids=["3x3", "1x1", "dw"])
def test_epilogue(native, rng, case, act):
    n, c, h, w, o, k, s, p, d, g = case
    x, wt, b = make(rng, n, c, h, w, o, k, g)
    y = ops.conv2d(x, wt, b, s, p, d, g)
    residual = rng.standard_normal(y.shape).astype(np.float32)
    check(x, wt, b, s, p, d, g, act, residual=residual, alpha=0.2)
    check(x, wt, b, s, p, d, g, act, alpha=0.2)


# Output channels are split into the fewest blocks of at most MR rows (8 AVX-512, 6 AVX2, 4
# SSE2 and scalar), evenly: every block height 1..8 and uneven splits (7 -> 7, 9 -> 5 + 4,
# 13 -> 7 + 6, 17 -> 6 + 6 + 5 on AVX-512), on each GEMM path at odd sizes. A panel of NR
# pixels of one output row goes through the epilogue in registers (none, relu, leaky relu),
# the others (row ends, 19 columns wide) through the C tile: both in each picture but the narrow.
@pytest.mark.parametrize("o", [1, 2, 3, 4, 5, 6, 7, 9, 11, 12, 13, 17, 24])
@pytest.mark.parametrize("path", [(3, 1, 0), (3, 1, 1), (2, 2, 0), (1, 1, 0), (3, 2, 1)],
                         ids=["implicit", "implicit_pad", "polyphase", "1x1", "im2col"])
def test_every_block_height(native, rng, o, path):
    k, s, p = path
    d = 2 if path == (3, 2, 1) else 1   # stride 2 dilation 2 reads one phase: the im2col path
    for hw in [(23, 19), (13, 213)]:
        x, wt, b = make(rng, 1, 5, *hw, o, k)
        y = check(x, wt, b, s, p, d)
        residual = rng.standard_normal(y.shape).astype(np.float32)
        for act in ACTS:
            check(x, wt, b, s, p, d, act=act, residual=residual, alpha=0.1)
        check(x, wt, None, s, p, d, act="leaky_relu", alpha=0.3)


# Stride 2 deals each input row to its two column phases in one pass (deal_phases2): the phase
# read first changes with the padding's parity, the two phases differ in length by one with the
# width's, and a phase can be all padding (narrow rows, wide pads). Widths from 1 to past one
# vector of each phase.
STRIDE2_WIDTHS = [1, 2, 3, 4, 5, 8, 9, 16, 17, 18, 33]


@pytest.mark.parametrize("pad", [0, 1, 2, 3])
@pytest.mark.parametrize("k", [2, 3, 5])
def test_stride2_phase_edges(native, rng, k, pad):
    for w in STRIDE2_WIDTHS:
        if w + 2 * pad < k:
            continue
        x, wt, b = make(rng, 1, 5, 9, w, 6, k)
        check(x, wt, b, 2, pad)


def test_out_and_prepacked_reuse(native, rng):
    x, wt, b = make(rng, 2, 8, 13, 11, 16, 3)
    conv = ops.Conv2d(wt, b, stride=1, pad=1, activation="relu")
    out = np.empty((2, 16, 13, 11), np.float32)
    for _ in range(2):  # the second call reuses packed weights and workspace
        assert conv(x, out=out) is out
        np.testing.assert_allclose(out, ref.conv2d(x, wt, b, (1, 1), (1, 1), (1, 1), 1, "relu"),
                                   **REDUCTION)
    x2 = rng.standard_normal((1, 8, 40, 33)).astype(np.float32)  # a new size grows the workspace
    np.testing.assert_allclose(conv(x2), ref.conv2d(x2, wt, b, (1, 1), (1, 1), (1, 1), 1, "relu"),
                               **REDUCTION)


@pytest.mark.skipif(not cpu.openmp_enabled(), reason="one thread without OpenMP")
def test_bound_conv_takes_a_slot_per_thread_when_the_count_rises(rng):
    """The kernel runs on as many threads as its workspace has slots: a conv bound at 1 thread
    and run at 2 must get the 2-thread workspace (a plan built at 1 thread stayed at 1)."""
    x, wt, b = make(rng, 1, 16, 64, 64, 16, 3)
    conv = ops.Conv2d(wt, b, pad=1)
    out = np.empty((1, 16, 64, 64), np.float32)
    ops._conv_scratch.__dict__.clear()   # this thread's workspace starts empty
    with cpu.using_threads(1):
        run = conv.bind(x, out=out)
        run()
        one = _kernels.conv2d_workspace_size(conv._shape(x.shape))
    with cpu.using_threads(2):
        two = _kernels.conv2d_workspace_size(conv._shape(x.shape))
        assert two > one
        run()
        assert ops._conv_scratch.floats >= two
    np.testing.assert_allclose(out, conv(x), **REDUCTION)


def test_bind_checks_once_and_computes_what_a_call_does(rng):
    """Conv2d.bind: the bound callable writes what conv(x, residual, out) writes, at every ISA
    level (packing per level on use) and after x's contents change; bad buffers are refused
    at bind time; strided buffers and low precisions get a deferred plain call."""
    x, wt, b = make(rng, 1, 8, 13, 11, 16, 3)
    res = rng.standard_normal((1, 16, 13, 11)).astype(np.float32)
    conv = ops.Conv2d(wt, b, pad=1, activation="leaky_relu", alpha=0.1)
    out = np.empty((1, 16, 13, 11), np.float32)
    run = conv.bind(x, residual=res, out=out)
    for level in cpu.available_isas():
        with cpu.using_isa(level):
            x[:] = rng.standard_normal(x.shape)
            run()
            np.testing.assert_allclose(out, conv(x, residual=res), **REDUCTION)
    with pytest.raises(ValueError, match="out"):
        conv.bind(x)
    with pytest.raises(ValueError, match="shape"):
        conv.bind(x, out=np.empty((1, 16, 12, 11), np.float32))
    with pytest.raises(ValueError, match="residual"):
        conv.bind(x, residual=res[:, :8].copy(), out=out)
    with pytest.raises(ValueError, match="overlap"):
        conv.bind(out[:, :8], out=out)
    wide = np.zeros((1, 8, 13, 22), np.float32)
    strided = wide[:, :, :, ::2]
    strided[:] = x
    conv.bind(strided, out=out)()
    np.testing.assert_allclose(out, conv(x), **REDUCTION)
    lowp = ops.Conv2d(wt, b, pad=1, precision="bf16")
    lowp.bind(x, out=out)()
    np.testing.assert_array_equal(out, lowp(x))


def test_convolutions_share_their_thread_s_workspace(rng):
    """Conv2d layers called from one thread keep one scratch buffer between them, not one each,
    and one instance can run in several threads at once (each thread has its own scratch)."""
    import threading
    import tracemalloc
    ws = [rng.standard_normal((16, 16, 3, 3)).astype(np.float32) for _ in range(12)]
    x = rng.standard_normal((1, 16, 64, 64)).astype(np.float32)
    want = [ref.conv2d(x, w, None, (1, 1), (1, 1), (1, 1), 1) for w in ws]
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        layers = [ops.Conv2d(w, pad=1) for w in ws]
        for c in layers:
            c(x)  # output dropped at once
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    weights = sum(c.w.nbytes + sum(p.nbytes for p in c._packed.values()) for c in layers)
    need = 4 * _kernels.conv2d_workspace_size(layers[0]._shape(x.shape))
    # one workspace, plus 64 KiB for the Python objects (12 workspaces would be 12 x need)
    assert kept - before - weights <= need + (64 << 10), (kept - before - weights, need)

    results = {}

    def run(k):
        results[k] = [c(x) for c in layers]
    threads = [threading.Thread(target=run, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    run("main")
    for t in threads:
        t.join()
    for got in results.values():
        for g, want_k, wt in zip(got, want, ws):
            assert_conv_close(g, want_k, x, wt, pad=1)


def test_packing_follows_isa(rng):
    """One Conv2d used at every ISA level: each level gets its own packed weights."""
    x, wt, b = make(rng, 1, 9, 10, 12, 11, 3)
    conv = ops.Conv2d(wt, b, pad=1)
    want = ref.conv2d(x, wt, b, (1, 1), (1, 1), (1, 1), 1)
    for level in cpu.available_isas() + cpu.available_isas()[::-1]:
        with cpu.using_isa(level):
            np.testing.assert_allclose(conv(x), want, **REDUCTION)


def test_weights_copied(rng):
    x, wt, b = make(rng, 1, 4, 6, 6, 4, 3)
    conv = ops.Conv2d(wt, b, pad=1)
    want = conv(x).copy()
    wt[:] = 0
    b[:] = 0
    np.testing.assert_array_equal(conv(x), want)


def test_non_contiguous_inputs(rng):
    x, wt, b = make(rng, 1, 6, 20, 18, 4, 3)
    xs, ws = x[:, ::2, ::2, ::3], wt[:, ::2].astype(">f4")
    got = ops.conv2d(xs, ws, b, pad=1)
    want = ref.conv2d(np.ascontiguousarray(xs), np.ascontiguousarray(ws, np.float32), b,
                      (1, 1), (1, 1), (1, 1), 1)
    np.testing.assert_allclose(got, want, **REDUCTION)


def test_large_map(native, rng):
    """A 3x3 conv at the benchmark scale: many tiles over both threads."""
    x, wt, b = make(rng, 1, 32, 96, 80, 32, 3)
    check(x, wt, b, 1, 1, 1, 1, "silu")


# --- Winograd F(4,3) path (3x3, stride 1, dilation 1, groups 1) ------------------------------

ALGO = {"auto": 0, "direct": 1, "winograd": 2}  # A2R_CONV2D_* in a2r_kernels.h


@contextmanager
def conv_algo(name):
    old = _kernels.conv2d_set_algo(ALGO[name])
    try:
        yield
    finally:
        _kernels.conv2d_set_algo(old)


# n, c, h, w, o, pad: odd and tiny maps (partial 2x2 tiles at the right and bottom edges), row
# segments that start mid tile row, several MR blocks and tile blocks, N > 1
WINO_CASES = [
    (1, 3, 1, 1, 5, 1),
    (1, 2, 3, 3, 1, 0),       # one output pixel, one output channel
    (2, 16, 7, 13, 17, 1),
    (1, 8, 17, 13, 9, 0),
    (2, 32, 13, 17, 20, 1),
    (1, 5, 17, 1, 4, 1),
    (1, 7, 1, 17, 6, 1),
    (1, 64, 31, 29, 70, 1),
    (1, 16, 9, 300, 20, 1),   # tile blocks that wrap across tile rows
    (3, 33, 18, 18, 33, 1),
]


@pytest.mark.parametrize("case", WINO_CASES, ids=lambda c: "x".join(map(str, c)))
def test_winograd_matches_reference(native, rng, case):
    n, c, h, w, o, p = case
    x, wt, b = make(rng, n, c, h, w, o, 3)
    with conv_algo("winograd"):
        check(x, wt, b, 1, p)
        check(x, wt, None, 1, p)


@pytest.mark.parametrize("act", ACTS)
def test_winograd_epilogue(native, rng, act):
    x, wt, b = make(rng, 2, 12, 13, 7, 19, 3)
    residual = rng.standard_normal((2, 19, 13, 7)).astype(np.float32)
    with conv_algo("winograd"):
        check(x, wt, b, 1, 1, act=act, residual=residual, alpha=0.2)
        check(x, wt, b, 1, 0, act=act, alpha=0.2)


@pytest.mark.parametrize("offset", [100.0, -1000.0])
def test_winograd_large_offset(native, rng, offset):
    """Inputs far from 0: every row of F(4,3)'s B^T sums to 0, so the offset cancels in the
    input transform (its one rounding product, 5 * d, rounds at |offset|'s scale) and Winograd
    is about as accurate as the direct path. Outputs pass through 0 while the
    terms are ~|offset|, so the float32 error of EITHER path is measured against the output
    scale (max |y|), not per element: REDUCTION's rtol would demand more than float32 sums of
    288 terms of size ~|offset| can give near y = 0 (the direct path fails it too)."""
    x, wt, b = make(rng, 1, 32, 17, 13, 24, 3)
    x += np.float32(offset)
    want = ref.conv2d(x, wt, b, (1, 1), (1, 1), (1, 1), 1)
    err = {}
    for algo in ("winograd", "direct"):
        with conv_algo(algo):
            err[algo] = np.abs(ops.conv2d(x, wt, b, pad=1) - want).max()
    scale = np.abs(want).max()
    assert err["winograd"] <= REDUCTION["rtol"] * 0.1 * scale  # measured: 3.2-3.9e-7 * scale
    assert err["winograd"] <= 2 * err["direct"]                 # measured: 0.45-0.54x


def auto_takes_winograd(c, o, side):
    """conv2d/kernel.c use_winograd at the running ISA level, for a square map of ``side``."""
    x86_vector = cpu.isa().startswith("avx")  # AVX2 and the AVX-512 levels share a rule
    min_c, min_o, min_co, min_side, wide_co, wide_side = ((8, 8, 128, 64, 4096, 32) if x86_vector
                                                          else (3, 8, 24, 16, 24, 16))
    return (c >= min_c and o >= min_o and c * o >= min_co
            and side >= (wide_side if c * o >= wide_co else min_side))


def test_winograd_vs_direct(native, rng):
    """Forced Winograd and forced direct agree at the benchmark scale; auto takes Winograd by the
    kernel's rule (channels and map side per ISA level) and the direct path otherwise
    (bit-identical to the forced path)."""
    x, wt, b = make(rng, 1, 32, 72, 64, 32, 3)
    conv = ops.Conv2d(wt, b, pad=1, activation="silu")  # one packing serves both paths
    got = {}
    for algo in ("winograd", "direct", "auto"):
        with conv_algo(algo):
            got[algo] = conv(x)
    assert_conv_close(got["winograd"], got["direct"], x, wt, pad=1, act="silu")
    assert not np.array_equal(got["winograd"], got["direct"])  # two different sums
    np.testing.assert_array_equal(got["auto"], got["winograd"])
    for c, o, side in ((16, 16, 20), (16, 24, 20), (24, 24, 20), (24, 32, 20), (24, 48, 20),
                       (48, 16, 20), (8, 96, 20), (3, 16, 20), (1, 16, 20), (32, 4, 20),
                       (32, 32, 12), (32, 32, 16), (32, 32, 32), (8, 8, 64), (8, 16, 64),
                       (7, 32, 64), (32, 32, 64), (64, 64, 24), (64, 64, 32)):
        x, wt, b = make(rng, 1, c, side, side, o, 3)
        conv = ops.Conv2d(wt, b, pad=1)
        with conv_algo("direct"):
            direct = conv(x)
        with conv_algo("winograd"):
            wino = conv(x)
        assert_conv_close(wino, direct, x, wt, pad=1)
        assert not np.array_equal(wino, direct)
        auto = wino if auto_takes_winograd(c, o, side) else direct
        np.testing.assert_array_equal(conv(x), auto, err_msg=f"{c} -> {o} at {side}^2")


def test_winograd_not_for_other_shapes(rng):
    """Forcing Winograd leaves strided, dilated, grouped and non-3x3 convs on their own path."""
    for n, c, h, w, o, k, s, p, d, g in [CASES[1], CASES[5], CASES[16], CASES[17], CASES[8]]:
        x, wt, b = make(rng, n, c, h, w, o, k, g)
        with conv_algo("direct"):
            want = ops.conv2d(x, wt, b, s, p, d, g)
        with conv_algo("winograd"):
            np.testing.assert_array_equal(ops.conv2d(x, wt, b, s, p, d, g), want)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 2), st.integers(1, 40), st.integers(1, 40), st.integers(0, 2),
       st.integers(1, 21), st.integers(1, 21), st.sampled_from(ACTS), st.booleans(),
       st.sampled_from(cpu.available_isas()), st.sampled_from([1, 2]), st.integers(0, 2**32 - 1))
def test_winograd_hypothesis(n, c, o, p, h, w, act, with_residual, level, threads, seed):
    rng = np.random.default_rng(seed)
    h, w = max(h, 3 - 2 * p), max(w, 3 - 2 * p)
    x, wt, b = make(rng, n, c, h, w, o, 3)
    residual = (rng.standard_normal((n, o, h + 2 * p - 2, w + 2 * p - 2)).astype(np.float32)
                if with_residual else None)
    with cpu.using_isa(level), cpu.using_threads(threads), conv_algo("winograd"):
        check(x, wt, b, 1, p, act=act, residual=residual)


onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def ort_conv(x, wt, b, stride, pad, dil, groups):
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(wt, "w")] + ([numpy_helper.from_array(b, "b")] if b is not None else [])
    node = helper.make_node("Conv", ["x", "w"] + (["b"] if b is not None else []), ["y"],
                            strides=list(pair(stride)), pads=list(pair(pad)) * 2,
                            dilations=list(pair(dil)), group=groups)
    graph = helper.make_graph([node], "conv",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_matches_onnxruntime(rng, case):
    n, c, h, w, o, k, s, p, d, g = case
    x, wt, b = make(rng, n, c, h, w, o, k, g)
    assert_conv_close(ops.conv2d(x, wt, b, s, p, d, g), ort_conv(x, wt, b, s, p, d, g),
                      x, wt, s, p, d, g)


@st.composite
def conv_cases(draw):
    groups = draw(st.sampled_from([1, 1, 2, "dw"]))
    cg = draw(st.integers(1, 9))
    og = draw(st.integers(1, 19))
    if groups == "dw":
        c = o = draw(st.integers(1, 12))
        groups = c
    else:
        c, o = cg * groups, og * groups
    kh, kw = draw(st.sampled_from([1, 2, 3, 5, 7])), draw(st.sampled_from([1, 3, 5]))
    s, d = draw(st.sampled_from([(1, 1), (2, 1), (1, 2), (2, 2)])), draw(st.integers(1, 2))
    p = draw(st.integers(0, 3))
    h = draw(st.integers(max(1, d * (kh - 1) + 1 - 2 * p), 24))
    w = draw(st.integers(max(1, d * (kw - 1) + 1 - 2 * p), 24))
    n = draw(st.integers(1, 2))
    return n, c, h, w, o, (kh, kw), s, p, d, groups


@settings(max_examples=40, deadline=None)
@given(conv_cases(), st.sampled_from(ACTS), st.booleans(), st.booleans(),
       st.sampled_from(cpu.available_isas()), st.sampled_from([1, 2]), st.integers(0, 2**32 - 1))
def test_hypothesis(case, act, bias, with_residual, level, threads, seed):
    rng = np.random.default_rng(seed)
    n, c, h, w, o, k, s, p, d, g = case
    x, wt, b = make(rng, n, c, h, w, o, k, g, bias)
    with cpu.using_isa(level), cpu.using_threads(threads):
        oh_ow = ops.Conv2d(wt, b, s, p, d, g).output_shape(x.shape)
        residual = rng.standard_normal(oh_ow).astype(np.float32) if with_residual else None
        check(x, wt, b, s, p, d, g, act, residual=residual)


# --- bad inputs: the error names the argument --------------------------------------------------

@pytest.mark.parametrize("p", [11, 23200, 2**20])
def test_huge_pad_and_dilation(native, rng, p):
    """pad = dilation = p >= 11 on a 3x3 kernel and a 9x11 picture: only the centre tap meets
    the picture, so the
    conv is the 1x1 conv by w[:, :, 1, 1]. Around 23200 the implicit path's strip would hold
    the 2p halo rows (tens of GB; int32 tap offsets past 2^31, SIGSEGV): it takes the im2col
    path, whose scratch does not grow with the dilation."""
    x, wt, b = make(rng, 1, 8, 9, 11, 6, 3)
    got = ops.conv2d(x, wt, b, pad=p, dilation=p)
    want = ref.conv2d(x, np.ascontiguousarray(wt[:, :, 1:2, 1:2]), b)
    np.testing.assert_allclose(got, want, **REDUCTION)


@pytest.mark.parametrize("kw", [dict(pad=2**31, dilation=2**31), dict(pad=2**62, dilation=2**62),
                                dict(pad=(0, 2**63), dilation=1), dict(stride=2**31)])
def test_extents_past_int32_refused(kw):
    x = np.ones((1, 2, 4, 4), np.float32)
    with pytest.raises(ValueError, match="exceeds 2147483647"):
        ops.conv2d(x, np.ones((2, 2, 3, 3), np.float32), **kw)
    with pytest.raises(ValueError, match="exceeds 2147483647"):
        ops.im2col(x[0], 3, **kw)


def test_scratch_counts_against_the_memory_setting(rng, monkeypatch):
    """The conv's scratch (its per-thread workspace) is refused past A2R_MEMORY_MB. Each slot
    is capped near 0.5 MiB by the paths' cache budgets, so two threads' slots make 1.16 MiB."""
    x, wt, b = make(rng, 1, 256, 32, 32, 256, 3)
    monkeypatch.setenv("A2R_MEMORY_MB", "1")
    with cpu.using_threads(2), pytest.raises(MemoryError, match="A2R_MEMORY_MB=1"):
        ops.conv2d(x, wt, b, pad=1)
    monkeypatch.setenv("A2R_MEMORY_MB", "64")
    with cpu.using_threads(2):
        assert ops.conv2d(x, wt, b, pad=1).shape == (1, 256, 32, 32)


def test_bad_inputs(rng):
    x, wt, b = make(rng, 1, 4, 8, 8, 6, 3)
    bad = [
        (dict(x=x.astype(np.float64)), TypeError, "x"),
        (dict(x=[[1.0]]), TypeError, "x"),
        (dict(x=x[0]), ValueError, "x"),
        (dict(w=wt.astype(np.int32)), TypeError, "w"),
        (dict(w=wt[:, :3]), ValueError, "w"),
        (dict(b=b[:5]), ValueError, "b"),
        (dict(b=b.astype(np.float64)), TypeError, "b"),
        (dict(stride=0), ValueError, "stride"),
        (dict(stride=1.5), TypeError, "stride"),
        (dict(pad=-1), ValueError, "pad"),
        (dict(pad=(1, 2, 3)), ValueError, "pad"),
        (dict(dilation=0), ValueError, "dilation"),
        (dict(groups=3), ValueError, "groups"),
        (dict(groups=0), ValueError, "groups"),
        (dict(activation="tanh"), ValueError, "activation"),
        (dict(alpha=float("nan")), ValueError, "alpha"),
        (dict(alpha="0.1"), TypeError, "alpha"),
        (dict(residual=np.zeros((1, 6, 8, 7), np.float32)), ValueError, "residual"),
        (dict(residual=np.zeros((1, 6, 8, 8), np.float64)), TypeError, "residual"),
        (dict(out=np.zeros((1, 6, 8, 7), np.float32)), ValueError, "out"),
        (dict(out=np.zeros((1, 6, 8, 8), np.float32)[..., ::-1]), ValueError, "out"),
        (dict(x=np.zeros((1, 4, 2, 2), np.float32), pad=0), ValueError, "kernel"),
        (dict(x=np.zeros((1, 4, 0, 8), np.float32)), ValueError, "x"),
    ]
    for change, exc, name in bad:
        args = dict(x=x, w=wt, b=b, stride=1, pad=1, dilation=1, groups=1, activation=None)
        args.update(change)
        with pytest.raises(exc, match=name):
            ops.conv2d(**args)
    y = np.zeros((1, 6, 8, 8), np.float32)
    with pytest.raises(ValueError, match="out must not overlap"):
        ops.conv2d(x, wt, b, pad=1, residual=y, out=y)
    conv = ops.Conv2d(wt, b, pad=1)
    with pytest.raises(ValueError, match="x must have C"):
        conv(np.zeros((1, 5, 8, 8), np.float32))
    with pytest.raises(ValueError, match="groups"):
        ops.Conv2d(wt, b, groups=4)
