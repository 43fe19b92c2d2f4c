"""a2r_edge.quality.artefacts: each measure is neutral on the identity and catches the artefact
it is named after, on a synthetic drawing (flat paint, ink outlines, a dark area, mild texture)."""
import cv2
import numpy as np
import pytest

from a2r_edge.quality import artefacts as A


def drawing(h=192, w=224, seed=0):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:h, :w].astype(np.float64)
    img = np.empty((h, w, 3))
    img[:] = (120 + 0.4 * yy)[..., None] * np.array([1.0, 0.9, 0.75])   # warm gradient sky
    img = np.ascontiguousarray(img)
    cv2.rectangle(img, (0, 120), (w, h), (30, 35, 45), -1)                   # dark ground
    cv2.circle(img, (80, 80), 42, (90, 140, 220), -1)                        # face paint
    cv2.circle(img, (80, 80), 42, (20, 20, 25), 2)                           # ink outline
    cv2.ellipse(img, (160, 70), (30, 50), 15, 0, 360, (60, 160, 90), -1)     # green cloak
    cv2.ellipse(img, (160, 70), (30, 50), 15, 0, 360, (15, 25, 20), 2)
    cv2.line(img, (20, 150), (200, 170), (200, 200, 210), 2)                 # a bright line
    img += rng.normal(0, 1.5, img.shape)                                     # brush texture
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def u8(f):
    return np.clip(np.rint(f), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def pic():
    return drawing()


def test_identity_is_neutral(pic):
    m = A.measure(pic, pic.copy())
    assert m["grid"] == pytest.approx(1.0) and m["grid_dark"] == pytest.approx(1.0)
    assert m["border"] == 0 and m["d_ab"] == 0 and m["halo"] == 0 and m["new_edges"] == 0
    assert m["chroma"] == pytest.approx(1.0) and m["std_l"] == pytest.approx(1.0)
    assert A.failures(m) == []


@pytest.mark.parametrize("period", [2, 4])
def test_grid_catches_a_fixed_pattern(pic, period):
    yy, xx = np.mgrid[:pic.shape[0], :pic.shape[1]]
    pattern = np.where(((yy // (period // 2)) + (xx // (period // 2))) % 2 == 0, 1.0, -1.0)
    out = u8(pic + pattern[..., None])          # +-1 gray level: faint, as the model's grid
    g, gd = A.grid(pic, out)
    assert g > A.LIMITS["grid"][1] and gd > A.LIMITS["grid_dark"][1]
    assert {"grid", "grid_dark"} <= set(A.failures(A.measure(pic, out)))


def test_grid_passes_a_mild_blur_and_ignores_the_drawings_lines(pic):
    g, gd = A.grid(pic, cv2.GaussianBlur(pic, (0, 0), 1.0))
    assert g <= 1.0 and gd <= 1.0
    thicker = pic.copy()        # a change confined to the lines is not a grid
    cv2.circle(thicker, (80, 80), 42, (20, 20, 25), 3)
    assert A.grid(pic, thicker)[0] == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("side", ["top", "bottom", "left", "right"])
def test_border_catches_a_one_sided_line(pic, side):
    out = pic.astype(np.float64)
    band = {"top": np.s_[:2], "bottom": np.s_[-2:], "left": np.s_[:, :2],
            "right": np.s_[:, -2:]}[side]
    out[band] += 6.0
    worst, sides = A.border(pic, u8(out))
    assert worst > A.LIMITS["border"][1] and sides[side][1] > 2.0
    assert A.border(pic, u8(pic + 3.0))[0] < 0.5    # an even shift is not a border line


def _lab_edit(pic, fn):
    lab = cv2.cvtColor(pic.astype(np.float32) / 255, cv2.COLOR_BGR2LAB)
    fn(lab)
    return u8(cv2.cvtColor(lab, cv2.COLOR_LAB2BGR) * 255)


def test_colour_catches_cast_desaturation_and_contrast(pic):
    def cast(lab):
        lab[..., 1] += 5.0          # towards magenta
    def desaturate(lab):
        lab[..., 1:] *= 0.8
    def flatten(lab):
        lab[..., 0] = lab[..., 0].mean() + 0.85 * (lab[..., 0] - lab[..., 0].mean())
    assert "d_ab" in A.failures(A.measure(pic, _lab_edit(pic, cast)))
    assert "chroma" in A.failures(A.measure(pic, _lab_edit(pic, desaturate)))
    assert "std_l" in A.failures(A.measure(pic, _lab_edit(pic, flatten)))
    d_ab, chroma, std_l = A.colour(pic, _lab_edit(pic, lambda lab: None))   # round trip only
    assert d_ab < 0.5 and abs(chroma - 1) < 0.02 and abs(std_l - 1) < 0.02


def test_halo_fails_an_unsharp_mask_and_passes_a_mild_blur(pic):
    f = pic.astype(np.float64)
    usm = u8(f + 1.0 * (f - cv2.GaussianBlur(f, (0, 0), 2.0)))
    assert A.halo(pic, usm) > A.LIMITS["halo"][1]
    assert A.halo(pic, cv2.GaussianBlur(pic, (0, 0), 1.0)) <= A.LIMITS["halo"][1]


def test_new_edges_catch_a_ghost_line(pic):
    ghost = pic.copy()
    cv2.circle(ghost, (86, 84), 42, (60, 60, 70), 1)     # a doubled rail beside the outline
    assert A.new_edges(pic, ghost) > A.LIMITS["new_edges"][1]
    assert A.new_edges(pic, cv2.GaussianBlur(pic, (0, 0), 1.0)) <= A.LIMITS["new_edges"][1]


def test_faded_strokes_catch_erased_strokes_and_not_a_mild_blur(pic):
    """Reported, not a limit: the identity and a mild blur keep the strokes, removing the ink
    outlines (painted over with the paint beside them) is caught, and it is no failure."""
    assert A.faded_strokes(pic, pic.copy()) == 0
    assert A.faded_strokes(pic, cv2.GaussianBlur(pic, (0, 0), 0.7)) <= 0.05
    erased = pic.copy()
    cv2.circle(erased, (80, 80), 42, (90, 140, 220), 4)
    cv2.ellipse(erased, (160, 70), (30, 50), 15, 0, 360, (60, 160, 90), 4)
    m = A.measure(pic, erased)
    assert m["faded_strokes"] > 0.5 and "faded_strokes" not in A.failures(m)
    assert set(A.REPORTED).isdisjoint(A.LIMITS)


def test_alpha_ignores_the_empty_background(pic):
    alpha = np.zeros(pic.shape[:2], np.uint8)
    cv2.circle(alpha, (80, 80), 44, 255, -1)
    out = pic.copy()
    out[:30, -40:] = (255, 0, 255)     # far from the opaque circle
    m = A.measure(pic, out, alpha)
    assert m["d_ab"] == 0 and m["chroma"] == pytest.approx(1.0)


def test_bad_input_is_refused(pic):
    with pytest.raises(ValueError, match="shape"):
        A.measure(pic, pic[:-1])
    with pytest.raises(ValueError, match="uint8"):
        A.measure(pic, pic.astype(np.float32))
    with pytest.raises(ValueError, match="alpha"):
        A.measure(pic, pic, np.zeros((3, 3), np.uint8))
    with pytest.raises(ValueError, match="too small"):
        A.measure(pic[:8, :8], pic[:8, :8])
