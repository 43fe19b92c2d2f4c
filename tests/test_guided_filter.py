import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from a2r_edge import ops
from a2r_edge.model import reference as ref
from a2r_edge.runtime import cpu
from tolerances import FILTER

cv2 = pytest.importorskip("cv2")
if not hasattr(cv2, "ximgproc"):
    pytest.skip("cv2 without ximgproc (opencv-contrib)", allow_module_level=True)

# Sizes hit every vector tail (1, 5, 7, 13, 17, 127 columns) and images thinner than the window.
SHAPES = [(1, 1), (7, 13), (17, 127), (237, 5)]
CHANNELS = [(1, 1), (1, 2), (1, 3), (3, 1), (3, 2), (3, 3)]  # (guide, src)


def _images(rng, h, w, gc, sc, smooth=0.0):
    """float32 guide and src in [0, 1); (H, W) for one channel. smooth: Gaussian sigma."""
    g = rng.random((h, w, gc), dtype=np.float32)
    s = rng.random((h, w, sc), dtype=np.float32)
    if smooth:
        g = cv2.GaussianBlur(g, (0, 0), smooth).reshape(h, w, gc)
        s = cv2.GaussianBlur(s, (0, 0), smooth / 4).reshape(h, w, sc)
    return (g[..., 0] if gc == 1 else g), (s[..., 0] if sc == 1 else s)


def _radii(h, w):
    # 0 (identity window), 1, 2, 8 (the production radius, already beyond 1, 5 and 7 pixels) and
    # 2 * min(H, W) + 3: the window wraps the short side more than once (reflect period 2n).
    return [0, 1, 2, 8, 2 * min(h, w) + 3]


CASES = [(h, w, gc, sc, r) for (h, w), (gc, sc) in itertools.product(SHAPES, CHANNELS)
         for r in _radii(h, w)]


_REFERENCE_CACHE = {}


def _case(h, w, gc, sc, r):
    """Inputs and reference output of one case, computed once for every (isa, threads)."""
    key = (h, w, gc, sc, r)
    if key not in _REFERENCE_CACHE:
        g, s = _images(np.random.default_rng(list(key)), h, w, gc, sc)
        _REFERENCE_CACHE[key] = g, s, ref.guided_filter(g, s, r, 1e-2)
    return _REFERENCE_CACHE[key]


@pytest.mark.parametrize("h,w,gc,sc,r", CASES, ids=lambda v: str(v))
def test_matches_reference(native, h, w, gc, sc, r):
    g, s, want = _case(h, w, gc, sc, r)
    got = ops.guided_filter(g, s, r, 1e-2)
    assert got.shape == s.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, **FILTER)


@pytest.mark.parametrize("gc,sc", [(1, 1), (1, 3), (3, 3)])
@pytest.mark.parametrize("r", [3, 8, 140, 149])
def test_row_bands(native, gc, sc, r):
    """Big enough to run in bands on 2 threads; 140 and 149: halos of half the image, the ring of
    a, b rows just below and at the full height."""
    g, s, want = _case(300, 150, gc, sc, r)
    np.testing.assert_allclose(ops.guided_filter(g, s, r, 1e-2), want, **FILTER)


@pytest.mark.parametrize("detail", [-0.5, 0.75, 1.5])
@pytest.mark.parametrize("h,w,gc,sc,r", [(17, 127, 1, 1, 2), (17, 127, 1, 3, 8), (7, 13, 3, 1, 1),
                                         (7, 13, 3, 3, 2), (300, 150, 1, 1, 8),
                                         (300, 150, 3, 3, 3)], ids=lambda v: str(v))
def test_detail_blend(native, h, w, gc, sc, r, detail):
    """detail d: q + d * (src - q), every guide/source layout, also in row bands."""
    g, s, q = _case(h, w, gc, sc, r)
    want = q + detail * (s.astype(np.float64) - q)
    np.testing.assert_allclose(ops.guided_filter(g, s, r, 1e-2, detail=detail), want, **FILTER)


@pytest.mark.parametrize("detail", [float("nan"), float("inf"), "1", None])
def test_detail_must_be_a_finite_number(detail):
    g = np.zeros((4, 4), np.float32)
    with pytest.raises((TypeError, ValueError), match="detail"):
        ops.guided_filter(g, g, 1, 1e-2, detail=detail)


@pytest.fixture(scope="module")
def full_hd():
    """1080x1920 gray guide and src with the reference result, computed once (0.7 s)."""
    g, s = _images(np.random.default_rng(7), 1080, 1920, 1, 1)
    return g, s, ref.guided_filter(g, s, 8, 1e-2)


def test_full_hd_gray(native, full_hd):
    g, s, want = full_hd
    np.testing.assert_allclose(ops.guided_filter(g, s, 8, 1e-2), want, **FILTER)


# --- against OpenCV -------------------------------------------------------------------------------

@pytest.mark.parametrize("gc,sc", [(1, 1), (1, 3), (3, 1), (3, 3)])
@pytest.mark.parametrize("h,w,r,eps,smooth", [
    (64, 80, 8, 1e-2, 0.0),
    (33, 47, 3, 0.2, 0.0),
    (9, 11, 20, 1e-2, 0.0),    # r beyond both sides
    (96, 96, 8, 1e-3, 6.0),    # smooth + small eps: OpenCV's colour determinant guard is active
    (96, 96, 4, 1e-4, 3.0),
])
def test_matches_opencv(isa, rng, h, w, gc, sc, r, eps, smooth):
    g, s = _images(rng, h, w, gc, sc, smooth)
    want = cv2.ximgproc.guidedFilter(g, s, r, eps)
    np.testing.assert_allclose(ops.guided_filter(g, s, r, eps), want, **FILTER)
    np.testing.assert_allclose(ref.guided_filter(g, s, r, eps), want, **FILTER)


def test_opencv_guard_case_is_exercised(rng):
    """The smooth small-eps colour case above really differs from the unguarded solve, so
    matching OpenCV there proves that its determinant guard is reproduced."""
    g, s = _images(rng, 96, 96, 3, 1, 6.0)
    I, p = g.astype(np.float64), s.astype(np.float64)[..., None]
    mI, mp = ref.box_mean(I, 8), ref.box_mean(p, 8)
    sigma = ref.box_mean(I[..., :, None] * I[..., None, :], 8) \
        - mI[..., :, None] * mI[..., None, :] + 1e-3 * np.eye(3)
    cov = ref.box_mean(I[..., :, None] * p[..., None, :], 8) - mI[..., :, None] * mp[..., None, :]
    a = np.linalg.solve(sigma, cov)
    b = mp - np.einsum("hwk,hwkc->hwc", mI, a)
    plain = np.einsum("hwk,hwkc->hwc", I, ref.box_mean(a, 8)) + ref.box_mean(b, 8)
    want = cv2.ximgproc.guidedFilter(g, s, 8, 1e-3)
    assert np.abs(plain[..., 0] - want).max() > 1e-3


# --- the reference against a brute-force window computation ------------------------------------

def _reflect(p, n):
    """OpenCV borderInterpolate, BORDER_REFLECT ("cba|abc"), written as OpenCV's loop."""
    if n == 1:
        return 0
    while not 0 <= p < n:
        p = -p - 1 if p < 0 else 2 * n - 1 - p
    return p


def _window_mean(a, y, x, r):
    h, w = a.shape[:2]
    rows = [_reflect(j, h) for j in range(y - r, y + r + 1)]
    cols = [_reflect(i, w) for i in range(x - r, x + r + 1)]
    return a[np.ix_(rows, cols)].mean(axis=(0, 1))


def _brute_force(I, p, r, eps):
    """He et al. per pixel with explicit reflect indexing; float64; no determinant guard."""
    h, w = I.shape[:2]
    I3 = I.reshape(h, w, -1)
    p3 = p.reshape(h, w, -1)
    k, c = I3.shape[2], p3.shape[2]
    a = np.empty((h, w, k, c))
    b = np.empty((h, w, c))
    outer_II = I3[..., :, None] * I3[..., None, :]
    outer_Ip = I3[..., :, None] * p3[..., None, :]
    for y in range(h):
        for x in range(w):
            mI = _window_mean(I3, y, x, r)
            mp = _window_mean(p3, y, x, r)
            sigma = _window_mean(outer_II, y, x, r) - np.outer(mI, mI) + eps * np.eye(k)
            cov = _window_mean(outer_Ip, y, x, r) - np.outer(mI, mp)
            a[y, x] = np.linalg.solve(sigma, cov)
            b[y, x] = mp - mI @ a[y, x]
    q = np.empty((h, w, c))
    for y in range(h):
        for x in range(w):
            q[y, x] = I3[y, x] @ _window_mean(a, y, x, r) + _window_mean(b, y, x, r)
    return q.reshape(p.shape)


@pytest.mark.parametrize("r", [0, 1, 2, 3, 4, 11])  # 4 = H; 11 > 2 * W: several periods
@pytest.mark.parametrize("gc,sc", [(1, 1), (1, 2), (3, 3)])
def test_reference_vs_brute_force(rng, r, gc, sc):
    g, s = _images(rng, 4, 5, gc, sc)
    want = _brute_force(g.astype(np.float64), s.astype(np.float64), r, 0.05)
    np.testing.assert_allclose(ref.guided_filter(g, s, r, 0.05), want, rtol=1e-6, atol=1e-6)


def test_reference_box_mean_reflects(rng):
    a = rng.random((3, 4))
    for r in (0, 1, 2, 5, 9):
        want = np.array([[_window_mean(a, y, x, r) for x in range(4)] for y in range(3)])
        np.testing.assert_allclose(ref.box_mean(a, r), want, rtol=1e-12, atol=1e-12)


# --- special values, layouts ----------------------------------------------------------------------

@pytest.mark.parametrize("gc", [1, 3])
def test_nan_does_not_crash(native, rng, gc):
    g, s = _images(rng, 40, 50, gc, 3)
    g[10, 20] = np.nan
    s[30, 5, 1] = np.inf
    got = ops.guided_filter(g, s, 4, 1e-2)
    assert got.shape == s.shape and got.dtype == np.float32
    assert np.isnan(got).any()          # NaN propagates, it is not silently dropped
    assert np.isfinite(got[:2]).all()   # rows whose windows never see the NaN stay finite


@pytest.mark.parametrize("r", [300, 303])
def test_radius_many_periods(native, r):
    """A window dozens of reflect periods wide: whole periods are counted, not walked."""
    g, s, want = _case(5, 7, 3, 2, r)
    np.testing.assert_allclose(ops.guided_filter(g, s, r, 1e-2), want, **FILTER)


@pytest.mark.parametrize("r", [2**24 + 1, 2**31, 2**62, 2**63, 2**64])
def test_huge_radius_refused(r):
    """Radii past GUIDED_FILTER_MAX_RADIUS are refused before the native call (2**62 crashed:
    2r+1 overflowed int64)."""
    g = np.ones((5, 7), np.float32)
    with pytest.raises(ValueError, match="radius must be <= 16777216"):
        ops.guided_filter(g, g, r, 1e-2)


def test_radius_at_the_limit(native, rng):
    """The largest radius: millions of reflected periods, every window within ~1e-6 of uniform
    weights over the picture, so q is the global linear model a * I + b (gray guide)."""
    g, s = _images(rng, 5, 7, 1, 2)
    eps = 1e-2
    got = ops.guided_filter(g, s, ops.GUIDED_FILTER_MAX_RADIUS, eps)
    I, p = g.astype(np.float64)[..., None], s.astype(np.float64)
    a = ((I * p).mean((0, 1)) - I.mean() * p.mean((0, 1))) / (I.var() + eps)
    want = a * I + (p.mean((0, 1)) - a * I.mean())
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_huge_radius_in_a_package_is_refused(tmp_path):
    """Through a model package's guided_filter stage: a clear ValueError, not a crash."""
    from a2r_edge import Engine
    from model_packages import make_package
    pkg = make_package(tmp_path / "pkg", enhance={"radius": 2**62, "eps": 1e-3, "detail": 1.5})
    picture = np.full((24, 32, 3), 90, np.uint8)
    with pytest.raises(ValueError, match="radius"):
        Engine(str(pkg), cache_mb=0).convert(picture)


def test_non_contiguous_and_byteswapped(rng):
    g, s = _images(rng, 40, 60, 3, 3)
    gv, sv = g[::2, ::3], s[::2, ::3]
    np.testing.assert_allclose(ops.guided_filter(gv, sv, 2, 1e-2),
                               ref.guided_filter(gv, sv, 2, 1e-2), **FILTER)
    np.testing.assert_allclose(ops.guided_filter(g.astype(">f4"), s, 2, 1e-2),
                               ref.guided_filter(g, s, 2, 1e-2), **FILTER)


@pytest.mark.parametrize("gc", [1, 3])
def test_running_sums_do_not_drift(native, rng, gc):
    """Huge values in the top rows, then [0, 1): once the windows have left the top rows, the
    running column sums must be back to exact (float32 sums never re-summed would keep errors of
    ~0.01)."""
    g, s = _images(rng, 1500, 37, gc, 2)
    s[:8] += np.float32(1e6)
    got = ops.guided_filter(g, s, 3, 1e-2)
    np.testing.assert_allclose(got[40:], ref.guided_filter(g, s, 3, 1e-2)[40:], **FILTER)


RESUM_ROWS = 32  # GF_RESUM_ROWS in float_band.h: float running sums are re-summed at multiples


@pytest.mark.parametrize("gc", [1, 3])
@pytest.mark.parametrize("start", [RESUM_ROWS - 4, RESUM_ROWS - 1, RESUM_ROWS, RESUM_ROWS + 1])
def test_resum_boundary(native, rng, start, gc):
    """Float running sums (windows narrower than two periods, gray or colour guide). Three rows of
    1e6 just before, at and after a re-sum row: rows whose windows never saw them match from the
    start, and every row after the next re-sum past them matches again (a missed or misplaced
    re-sum leaves errors of ~0.01)."""
    r = 3
    g, s = _images(rng, 4 * RESUM_ROWS + 40, 29, gc, 1)
    s[start:start + 3] += np.float32(1e6)
    got, want = ops.guided_filter(g, s, r, 1e-2), ref.guided_filter(g, s, r, 1e-2)
    clean_until = start - 2 * r  # stage-2 windows of these rows reach stage-1 rows < start - r
    np.testing.assert_allclose(got[:clean_until], want[:clean_until], **FILTER)
    # Stage 1 is clean from the first re-sum whose window is past the rows, stage 2 from the
    # first re-sum after its window is past those: 2 re-sums later at most.
    clean_from = (start + 3 + 2 * r) // RESUM_ROWS * RESUM_ROWS + 2 * RESUM_ROWS
    np.testing.assert_allclose(got[clean_from:], want[clean_from:], **FILTER)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 24), st.integers(1, 24), st.sampled_from([1, 3]), st.integers(1, 4),
       st.integers(0, 30), st.floats(1e-2, 1.0), st.integers(0, 2**32 - 1),
       st.sampled_from(cpu.available_isas()), st.sampled_from([1, 2]))
def test_hypothesis(h, w, gc, sc, r, eps, seed, level, threads):
    g, s = _images(np.random.default_rng(seed), h, w, gc, sc)
    with cpu.using_isa(level), cpu.using_threads(threads):
        got = ops.guided_filter(g, s, r, eps)
    np.testing.assert_allclose(got, ref.guided_filter(g, s, r, eps), **FILTER)


# --- bad input --------------------------------------------------------------------------------------

GOOD = np.zeros((8, 9), np.float32)


@pytest.mark.parametrize("guide,src,radius,eps,exc,name", [
    (GOOD.astype(np.float64), GOOD, 1, 1e-2, TypeError, "guide"),
    (GOOD, GOOD.astype(np.uint8), 1, 1e-2, TypeError, "src"),
    (GOOD.tolist(), GOOD, 1, 1e-2, TypeError, "guide"),
    (np.zeros((8, 9, 2), np.float32), GOOD, 1, 1e-2, ValueError, "guide"),
    (np.zeros((8, 9, 1), np.float32), GOOD, 1, 1e-2, ValueError, "guide"),
    (np.zeros((8, 9, 3, 1), np.float32), GOOD, 1, 1e-2, ValueError, "guide"),
    (GOOD, np.zeros(8, np.float32), 1, 1e-2, ValueError, "src"),
    (GOOD, np.zeros((8, 0), np.float32), 1, 1e-2, ValueError, "src"),
    (GOOD, np.zeros((9, 8), np.float32), 1, 1e-2, ValueError, "src"),
    (np.zeros((8, 10, 3), np.float32), GOOD, 1, 1e-2, ValueError, "src"),
    (GOOD, GOOD, -1, 1e-2, ValueError, "radius"),
    (GOOD, GOOD, 1.0, 1e-2, TypeError, "radius"),
    (GOOD, GOOD, True, 1e-2, TypeError, "radius"),
    (GOOD, GOOD, 1, 0.0, ValueError, "eps"),
    (GOOD, GOOD, 1, -1e-2, ValueError, "eps"),
    (GOOD, GOOD, 1, float("nan"), ValueError, "eps"),
    (GOOD, GOOD, 1, "0.1", TypeError, "eps"),
])
def test_bad_input(guide, src, radius, eps, exc, name):
    with pytest.raises(exc, match=name):
        ops.guided_filter(guide, src, radius, eps)


def test_out_is_filled_and_checked():
    rng = np.random.default_rng(5)
    guide = rng.random((20, 24), dtype=np.float32)
    src = rng.random((20, 24, 3), dtype=np.float32)
    out = np.full_like(src, np.nan)
    assert ops.guided_filter(guide, src, 2, 1e-2, out=out) is out
    np.testing.assert_array_equal(out, ops.guided_filter(guide, src, 2, 1e-2))
    with pytest.raises(ValueError, match="out must be a C-contiguous float32 array"):
        ops.guided_filter(guide, src, 2, 1e-2, out=np.empty((20, 24), np.float32))
    with pytest.raises(ValueError, match="overlap"):
        ops.guided_filter(guide, src, 2, 1e-2, out=src)


@pytest.mark.parametrize("where", ["new", "apart", "in place"])
def test_detail_stage_output_buffers(native, where):
    """The detail stage gives the same picture whether it allocates its output, writes into a
    buffer apart from x, or overwrites x itself (the kernel's out may not overlap its source)."""
    from a2r_edge.picture import stages
    from a2r_edge.model.package import Stage
    rng = np.random.default_rng(5)
    x = rng.random((1, 3, 37, 53), dtype=np.float32)
    guide = rng.random((37, 53), dtype=np.float32)
    stage = Stage("enhance", "guided_filter", {"radius": 2, "eps": 1e-2, "detail": 0.75})
    want = np.stack([ops.guided_filter(guide, x[0, k], 2, 1e-2, detail=0.75) for k in range(3)])
    src = x.copy()
    out = {"new": None, "apart": np.empty_like(x), "in place": src}[where]
    got = stages.guided_filter(stage, src, guide, out=out)
    assert out is None or got is out
    np.testing.assert_array_equal(got[0], want)
