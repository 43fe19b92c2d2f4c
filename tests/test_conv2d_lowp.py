"""ops.Conv2d at precision 'bf16' and 'int8': every ISA level (avx512_amx: AMX tiles where a tap
has 4+ channel lanes, e.g. the 16-64 channel cases; avx512_bf16: the BF16/VNNI dot
products; avx512 and avx2: widened bf16 and vpmaddubsw; baseline: plain C) x 1 and 2 threads
against the float64 reference, within bounds derived from the rounding (tolerances.py); exact
results where the inputs are representable; the calibrated int8 range and its clamping; bad
inputs. bf16 3x3 stride-1 convs also have a Winograd F(2,3) path, forced on and off through
_kernels.conv2d_set_algo (test_conv2d.conv_algo) and held to its own rounding bound."""
import numpy as np
import pytest

from a2r_edge import _kernels, ops
from a2r_edge.model import reference as ref
from test_conv2d import STRIDE2_WIDTHS, WINO_CASES, conv_algo
from tolerances import ACT_LIPSCHITZ, BF16_PRODUCT, INT8_SLACK, REDUCTION, winograd_magnitude

ACTS = [None, "relu", "leaky_relu", "silu"]


def make(rng, n, c, h, w, o, k, groups=1):
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    cg = c // groups
    wt = (rng.standard_normal((o, cg, k, k)) / np.sqrt(cg * k * k)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    return x, wt, b


def pair(v):
    return (v, v)


def bound(precision, x, wt, s, p, d, g, act_range=None):
    """Largest |y - reference| the rounding allows, per output value (before the activation)."""
    conv = lambda a, w: ref.conv2d(a, w, None, pair(s), pair(p), pair(d), g)  # noqa: E731
    fp32 = REDUCTION["rtol"] * conv(np.abs(x), np.abs(wt)) + REDUCTION["atol"]
    if precision == "bf16":
        return BF16_PRODUCT * conv(np.abs(x), np.abs(wt)) + fp32
    lo, hi = act_range if act_range is not None else (float(x.min()), float(x.max()))
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    sa = (hi - lo) / _kernels.conv2d_lowp_u8_levels()
    o = wt.shape[0]
    sw = np.abs(wt).reshape(o, -1).max(axis=1) / 127
    k = wt[0].size
    sum_w = np.abs(wt).reshape(o, -1).sum(axis=1)
    window_x = conv(np.abs(x), np.ones_like(wt))
    b = (sa / 2 * sum_w[:, None, None] + sw[:, None, None] / 2 * window_x +
         k * sa * sw[:, None, None] / 4)
    return INT8_SLACK * b + fp32


def wino_bound(x, wt, p):
    """Largest |y - reference| of the bf16 Winograd path (3x3, stride 1, pad p) per output value.
    Only U = G g G^T and V = BT d BT^T are rounded to bf16 (products exact, fp32 sums), so
    |dy| <= (2u + u^2) |AT| (sum_c |U_c| .* |V_c|) |AT|^T with |U| <= |G||g||G|^T and
    |V| <= |BT||d||BT|^T, plus the fp32 error of the transforms and sums (REDUCTION on the same
    magnitudes, tolerances.winograd_magnitude)."""
    mag = winograd_magnitude(x, wt, p, 2)
    return (BF16_PRODUCT + REDUCTION["rtol"]) * mag + REDUCTION["atol"]


def check(precision, x, wt, b, s=1, p=0, d=1, g=1, act=None, residual=None, act_range=None,
          winograd=False):
    """winograd: the bf16 Winograd path is forced (3x3 stride 1) and held to wino_bound."""
    with conv_algo("winograd" if winograd else "auto"):
        got = ops.conv2d(x, wt, b, s, p, d, g, act, alpha=0.2, residual=residual,
                         precision=precision, act_range=act_range)
    xr = x if act_range is None else np.clip(x, *act_range).astype(np.float32)
    want = ref.conv2d(xr, wt, b, pair(s), pair(p), pair(d), g, act, 0.2, residual)
    assert got.shape == want.shape
    err = np.abs(got.astype(np.float64) - want)
    lim = wino_bound(xr, wt, p) if winograd else bound(precision, xr, wt, s, p, d, g, act_range)
    lim = lim * (ACT_LIPSCHITZ if act else 1.0)
    assert np.all(err <= lim), (precision, float(err.max()), float((err / lim).max()))
    return got, err


# n, c, h, w, o, kernel, stride, pad, dilation, groups
CASES = [
    (1, 3, 17, 13, 8, 3, 1, 1, 1, 1),       # RGB input: one partial channel lane
    (2, 16, 9, 7, 13, 3, 2, 2, 2, 1),       # stride 2 dilation 2 reads one phase: gathered
    (1, 32, 20, 20, 32, 1, 1, 0, 1, 1),     # 1x1
    (2, 7, 13, 17, 5, 1, 1, 0, 1, 1),       # 1x1, odd channels, few outputs (half row block)
    (1, 5, 13, 13, 7, 5, 1, 2, 1, 1),
    (1, 4, 23, 19, 9, 7, 2, 3, 1, 1),
    (2, 8, 11, 11, 6, 5, 2, 3, 1, 2),       # groups 2, strided
    (1, 12, 15, 15, 12, 3, 1, 1, 1, 12),    # depthwise
    (1, 1, 1, 1, 1, 1, 1, 0, 1, 1),         # everything 1
    (1, 64, 31, 29, 70, 3, 1, 1, 1, 1),     # several row blocks and pixel tiles
    (2, 10, 19, 23, 9, 3, 1, 2, 2, 1),      # implicit, dilated
    (1, 16, 9, 300, 20, 3, 1, 1, 1, 1),     # implicit: tiles start and end mid-row
    (1, 37, 40, 300, 24, 3, 2, 1, 1, 1),    # polyphase strip, stride 2, tiles mid-row
    (1, 5, 19, 23, 7, 3, 3, 1, 1, 1),       # polyphase, stride 3: nine phase planes
    (1, 8, 17, 9, 4, 1, 2, 0, 1, 1),        # 1x1 stride 2 reads one phase: gathered panels
]


@pytest.mark.parametrize("precision", ["bf16", "int8"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_matches_reference_within_rounding(native, rng, case, precision):
    n, c, h, w, o, k, s, p, d, g = case
    x, wt, b = make(rng, n, c, h, w, o, k, g)
    _, err = check(precision, x, wt, b, s, p, d, g)
    check(precision, x, wt, None, s, p, d, g)
    if x.size > 1000:  # the rounding is there: not secretly fp32
        assert err.max() > 1e-5


@pytest.mark.parametrize("pad", [0, 1, 2, 3])
@pytest.mark.parametrize("k", [2, 3, 5])
def test_stride2_phase_edges_exact(native, rng, k, pad):
    """The stride-2 strip's phase dealing (test_conv2d.STRIDE2_WIDTHS) on int8 lanes, float and
    u8 sources: integer weights and activations on the u8 grid give y exactly."""
    levels = _kernels.conv2d_lowp_u8_levels()
    for w in STRIDE2_WIDTHS:
        if w + 2 * pad < k:
            continue
        x = rng.integers(0, levels + 1, (1, 5, 9, w)).astype(np.float32)
        wt = rng.integers(-127, 128, (6, 5, k, k)).astype(np.float32)
        wt[:, 0, 0, 0] = 127
        want = ref.conv2d(x, wt, None, (2, 2), (pad, pad), (1, 1), 1)
        conv = ops.Conv2d(wt, None, 2, pad, precision="int8", act_range=(0, levels))
        np.testing.assert_array_equal(conv(x), want)
        if conv.takes_u8(x.shape):
            np.testing.assert_array_equal(conv(x.astype(np.uint8)), want)


@pytest.mark.parametrize("precision", ["fp32", "bf16", "int8"])
def test_packed_weights_start_on_a_cache_line(native, rng, precision):
    """The packing every Conv2d makes starts on a 64-byte boundary (the AMX tile loads read it
    in 64-byte rows; split rows ran a bf16 conv 1.6x slower), whatever numpy's allocator gives."""
    for o in range(1, 20):  # packings of many sizes, so no allocator luck decides
        x, wt, b = make(rng, 1, 5, 9, 9, o, 3)
        conv = ops.Conv2d(wt, b, pad=1, precision=precision)
        conv(x)
        assert [p.ctypes.data % 64 for p in conv._packed.values()] == [0]


@pytest.mark.parametrize("precision", ["bf16", "int8"])
@pytest.mark.parametrize("act", ACTS)
def test_epilogue(native, rng, precision, act):
    x, wt, b = make(rng, 2, 9, 14, 11, 10, 3)
    residual = rng.standard_normal((2, 10, 14, 11)).astype(np.float32)
    check(precision, x, wt, b, 1, 1, 1, 1, act, residual=residual)
    check(precision, x, wt, b, 2, 1, 1, 1, act)


@pytest.mark.parametrize("algo", ["direct", "winograd"])
@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[9]], ids=["3x3", "strided", "big"])
def test_exact_where_representable(native, rng, case, algo):
    """bf16: small integers are exact in bf16 and their sums in fp32, so y equals fp32 exactly;
    on the Winograd path too (|x|, |w| <= 8: U is a multiple of 1/4 below 2^6, V an integer
    below 2^5, both exact in bf16's 8 bits). int8: integer weights with max |w| = 127 per
    channel (scale 1) and integer activations over the range (0, levels) (scale 1, zero point
    0) quantise without error: y is exact too (int8 has no Winograd path)."""
    n, c, h, w, o, k, s, p, d, g = case
    shape_x, shape_w = (n, c, h, w), (o, c // g, k, k)
    x = rng.integers(-8, 9, shape_x).astype(np.float32)
    wt = rng.integers(-8, 9, shape_w).astype(np.float32)
    want = ref.conv2d(x, wt, None, pair(s), pair(p), pair(d), g)
    with conv_algo(algo):
        got = ops.conv2d(x, wt, None, s, p, d, g, precision="bf16")
    np.testing.assert_array_equal(got, want)
    levels = _kernels.conv2d_lowp_u8_levels()
    x = rng.integers(0, levels + 1, shape_x).astype(np.float32)
    wt = rng.integers(-127, 128, shape_w).astype(np.float32)
    wt[:, 0, 0, 0] = 127
    want = ref.conv2d(x, wt, None, pair(s), pair(p), pair(d), g)
    got = ops.conv2d(x, wt, None, s, p, d, g, precision="int8", act_range=(0, levels))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", WINO_CASES, ids=lambda c: "x".join(map(str, c)))
def test_bf16_winograd_within_rounding(native, rng, case):
    n, c, h, w, o, p = case
    x, wt, b = make(rng, n, c, h, w, o, 3)
    got, err = check("bf16", x, wt, b, 1, p, winograd=True)
    check("bf16", x, wt, None, 1, p, winograd=True)
    with conv_algo("direct"):
        direct = ops.conv2d(x, wt, b, 1, p, precision="bf16")
    if x.size > 1000:  # really the Winograd path, really bf16
        assert not np.array_equal(got, direct) and err.max() > 1e-5
        # typical error: the worst-case bound above is ~7x the direct path's and never reached;
        # the RMS error is 1.55-1.78x the direct bf16 path's (measured at every ISA level)
        want = ref.conv2d(x, wt, b, (1, 1), pair(p), (1, 1), 1)
        rms = lambda y: np.sqrt(np.mean((y.astype(np.float64) - want) ** 2))  # noqa: E731
        assert rms(got) <= 2.5 * rms(direct), (rms(got), rms(direct))


@pytest.mark.parametrize("act", ACTS)
def test_bf16_winograd_epilogue(native, rng, act):
    x, wt, b = make(rng, 2, 12, 13, 7, 19, 3)
    residual = rng.standard_normal((2, 19, 13, 7)).astype(np.float32)
    check("bf16", x, wt, b, 1, 1, act=act, residual=residual, winograd=True)
    check("bf16", x, wt, b, 1, 0, act=act, winograd=True)


def test_bf16_winograd_auto_rule(isa, rng):
    """auto takes the bf16 Winograd path where it was measured faster than direct bf16: with the
    dot-product unit (avx512_bf16) from 24 channels in and out with C*O >= 768, without it (the
    GEMM widened to fp32) from 16, never where AMX tiles run (avx512_amx, 8+ channels here);
    bit-identical to the forced path. int8 stays direct."""
    dot = isa == "avx512_bf16"
    for c, o in ((24, 24), (24, 32), (32, 32), (24, 48), (64, 64), (16, 96), (8, 64)):
        wino = c >= 24 and o >= 24 and c * o >= 768 if dot else c >= 16 and o >= 16
        wino = wino and isa != "avx512_amx"
        x, wt, b = make(rng, 1, c, 12, 10, o, 3)
        conv = ops.Conv2d(wt, b, pad=1, precision="bf16")  # one packing serves both paths
        got = {}
        for algo in ("winograd", "direct", "auto"):
            with conv_algo(algo):
                got[algo] = conv(x)
        np.testing.assert_array_equal(got["auto"], got["winograd" if wino else "direct"])
        assert not np.array_equal(got["winograd"], got["direct"])
        q = ops.Conv2d(wt, b, pad=1, precision="int8", act_range=(-4, 4))
        with conv_algo("winograd"):
            forced = q(x)
        with conv_algo("direct"):
            np.testing.assert_array_equal(q(x), forced)


def test_int8_calibrated_range_clamps(native, rng):
    """With act_range, values outside it are clamped to it (not wrapped), and the layer's result
    does not depend on this call's own min/max."""
    x, wt, b = make(rng, 1, 8, 16, 16, 8, 3)
    x[0, 0, 3, 3], x[0, 1, 5, 9] = 40.0, -40.0  # outliers the calibration did not see
    check("int8", x, wt, b, 1, 1, act_range=(-3.0, 3.0))
    conv = ops.Conv2d(wt, b, pad=1, precision="int8", act_range=(-3.0, 3.0))
    y1 = conv(x)
    x2 = x.copy()
    x2[0, 0, 3, 3] = 80.0  # clamped to the same level
    np.testing.assert_array_equal(conv(x2), y1)


# producer (c, o, kernel, stride, pad, groups, residual), consumer (o2, kernel, stride, pad,
# dilation, groups): every consumer reads its strip of lanes (takes_u8)
U8_CHAINS = [
    ((3, 16, 3, 1, 1, 1, False), (24, 3, 2, 1, 1, 1)),   # the bundled encoder's stem
    ((16, 24, 3, 2, 1, 1, True), (32, 3, 2, 1, 1, 1)),   # residual into u8; stride 2 both
    ((8, 7, 1, 1, 0, 1, False), (9, 3, 1, 2, 2, 1)),     # channel tail of 3 (7 = 4 + 3), dilated
    ((12, 12, 3, 1, 1, 3, False), (6, 5, 1, 2, 1, 2)),   # groups on both sides
    ((32, 64, 3, 1, 1, 1, False), (64, 3, 1, 1, 1, 1)),  # AMX chunks of 16 lanes
]


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("chain", U8_CHAINS, ids=lambda c: f"{c[0][0]}-{c[0][1]}-{c[1][0]}")
def test_int8_u8_between_layers_is_bit_exact(native, rng, chain, act):
    """A layer writing u8 levels on the next layer's grid (out_range) and that layer reading them
    (a uint8 x) give bit for bit the next layer's output from the float32 tensor, outliers
    beyond the calibrated range clamped alike; at 1/4 of the float32 bytes."""
    (c, o, k, s, p, g, with_res), (o2, k2, s2, p2, d2, g2) = chain
    x, wt, b = make(rng, 1, c, 23, 30, o, k, g)
    first = ops.Conv2d(wt, b, stride=s, pad=p, groups=g, activation=act, alpha=0.2,
                       precision="int8", act_range=(-2.5, 3.0))
    mid_shape = first.output_shape(x.shape)
    res = rng.standard_normal(mid_shape).astype(np.float32) if with_res else None
    mid = first(x, residual=res)
    lo, hi = np.quantile(mid, [0.01, 0.97])   # the grid clamps a few values on each side
    w2 = make(rng, 1, o, 1, 1, o2, k2, g2)[1]
    second = ops.Conv2d(w2, None, stride=s2, pad=p2, dilation=d2, groups=g2, precision="int8",
                        act_range=(float(lo), float(hi)))
    assert second.takes_u8(mid.shape)
    levels = first(x, residual=res, out_range=(lo, hi))
    assert levels.dtype == np.uint8 and levels.shape == mid.shape
    assert levels.min() == 0 or lo >= 0
    assert levels.max() == _kernels.conv2d_lowp_u8_levels()
    np.testing.assert_array_equal(second(levels), second(mid))


def test_u8_activations_refused_where_they_cannot_run(rng):
    x, wt, b = make(rng, 1, 8, 16, 16, 8, 3)
    int8 = ops.Conv2d(wt, b, pad=1, precision="int8", act_range=(-3, 3))
    levels = int8(x, out_range=(-1, 1))
    gathered = ops.Conv2d(wt[:, :, :1, :1], b, stride=2, precision="int8", act_range=(-1, 1))
    unranged = ops.Conv2d(wt, b, pad=1, precision="int8")
    for conv in (ops.Conv2d(wt, b, pad=1), ops.Conv2d(wt, b, pad=1, precision="bf16"),
                 unranged, gathered):
        assert not conv.takes_u8(levels.shape)
        with pytest.raises(TypeError, match="a uint8 x needs precision='int8' with an act_range"):
            conv(levels)
    for conv in (ops.Conv2d(wt, b, pad=1), ops.Conv2d(wt, b, pad=1, precision="bf16")):
        with pytest.raises(ValueError, match="out_range applies to precision='int8' only"):
            conv(x, out_range=(0, 1))
        with pytest.raises(ValueError, match="out_range applies to precision='int8' only"):
            conv.bind(x, out=np.empty((1, 8, 16, 16), np.uint8), out_range=(0, 1))
    with pytest.raises(ValueError, match="out must be a C-contiguous uint8 array"):
        int8(x, out=np.empty((1, 8, 16, 16), np.float32), out_range=(-1, 1))
    with pytest.raises(ValueError, match="act_range"):
        int8(x, out_range=(1, 0))


def test_packing_follows_isa(rng):
    """One low-precision Conv2d used at every ISA level: each level gets its own packing."""
    from a2r_edge.runtime import cpu
    x, wt, b = make(rng, 1, 16, 12, 12, 16, 3)
    for precision in ("bf16", "int8"):
        conv = ops.Conv2d(wt, b, pad=1, precision=precision, act_range=(-5, 5)
                          if precision == "int8" else None)
        for level in cpu.available_isas():
            with cpu.using_isa(level):
                check(precision, x, wt, b, 1, 1, act_range=(-5, 5) if precision == "int8" else None)
                got = conv(x)
                want = ops.conv2d(x, wt, b, 1, 1, precision=precision,
                                  act_range=(-5, 5) if precision == "int8" else None)
                np.testing.assert_array_equal(got, want)
        assert len(conv._packed) == len(cpu.available_isas())


def test_bad_input(rng):
    x, wt, b = make(rng, 1, 4, 8, 8, 4, 3)
    with pytest.raises(ValueError, match=r"precision must be one of \('fp32', 'bf16', 'int8'\)"):
        ops.Conv2d(wt, b, precision="fp16")
    with pytest.raises(ValueError, match="act_range applies to precision='int8' only"):
        ops.Conv2d(wt, b, precision="bf16", act_range=(0, 1))
    for bad in [(1, 0), (0, float("nan")), (0,), "ab", 3]:
        with pytest.raises(ValueError, match="act_range"):
            ops.Conv2d(wt, b, precision="int8", act_range=bad)
    x[0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="x must be finite for int8"):
        ops.conv2d(x, wt, b, precision="int8")
