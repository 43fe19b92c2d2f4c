"""Region of interest: only the detected box is converted and pasted back feathered."""
import numpy as np
import pytest

from a2r_edge import Engine
from a2r_edge.picture import roi
from model_packages import make_package


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    return str(make_package(tmp_path_factory.mktemp("roi") / "tiny"))


def picture(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


BOX = (8, 4, 40, 36)  # x0, y0, x1, y1


@pytest.mark.parametrize("channels", [None, 3, 4])
def test_only_the_box_changes(package, channels):
    shape = (48, 64) if channels is None else (48, 64, channels)
    img = picture(shape)
    seen = []

    def detector(bgr):
        seen.append(bgr.shape)
        return BOX

    out = Engine(package, roi=detector, cache_mb=0).convert(img)
    assert out.shape == img.shape and seen == [(48, 64, 3)]
    x0, y0, x1, y1 = BOX
    outside = np.ones(img.shape[:2], bool)
    outside[y0:y1, x0:x1] = False
    np.testing.assert_array_equal(out[outside], img[outside])  # untouched outside the box
    crop = Engine(package, cache_mb=0).convert(img[y0:y1, x0:x1])
    feather = 8  # inside the feathered edge the crop's conversion is pasted as is
    np.testing.assert_array_equal(out[y0 + feather:y1 - feather, x0 + feather:x1 - feather],
                                  crop[feather:-feather, feather:-feather])


@pytest.mark.parametrize("channels", [None, 3, 4])
def test_a_box_of_the_whole_picture_is_the_whole_conversion(package, channels):
    """No feather on a side at the picture's border: it left an 8-pixel ring of the input
    blended in (a2r_lite on a landscape: up to 121 levels from the whole conversion)."""
    shape = (48, 64) if channels is None else (48, 64, channels)
    img = picture(shape, seed=2)
    got = Engine(package, roi=lambda bgr: (0, 0, 64, 48), cache_mb=0).convert(img)
    np.testing.assert_array_equal(got, Engine(package, cache_mb=0).convert(img))


def test_only_sides_inside_the_picture_are_feathered(package):
    """A box on the left and bottom borders: the converted crop as is up to those borders, the
    input outside, and the feather on its top and right sides only."""
    img = picture((48, 64, 3), seed=3)
    x1, y0 = 40, 12
    out = Engine(package, roi=lambda bgr: (0, y0, x1, 48), cache_mb=0).convert(img)
    crop = Engine(package, cache_mb=0).convert(img[y0:, :x1])
    feather = 8
    np.testing.assert_array_equal(out[y0 + feather:, :x1 - feather],
                                  crop[feather:, :-feather])
    np.testing.assert_array_equal(out[:y0], img[:y0])
    np.testing.assert_array_equal(out[:, x1:], img[:, x1:])
    top = img[y0, :x1 - feather]   # the top row: the ramp's first step, 1/8 of the crop
    blend = np.rint(top + (crop[0, :-feather].astype(np.float32) - top) / feather)
    np.testing.assert_array_equal(out[y0, :x1 - feather], blend.astype(np.uint8))


def test_no_detection_converts_the_whole_picture(package):
    img = picture((32, 40, 3), seed=1)
    got = Engine(package, roi=lambda bgr: None, cache_mb=0).convert(img)
    np.testing.assert_array_equal(got, Engine(package, cache_mb=0).convert(img))


def test_stream_and_batch_apply_the_roi(package):
    frames = [picture((40, 48, 3), seed=i) for i in range(3)]
    eng = Engine(package, roi=lambda bgr: BOX, cache_mb=0)
    singles = [eng.convert(f) for f in frames]
    for got, want in zip(eng.convert_batch(frames), singles):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(eng.stream(iter(frames)), singles):
        np.testing.assert_array_equal(got, want)


def test_face_detector_or_a_clear_error(monkeypatch):
    try:
        import animeface  # noqa: F401
    except ImportError:
        with pytest.raises(ValueError, match="animeface"):
            roi.resolve("face")
        return
    detect = roi.resolve("face")
    assert detect(np.full((64, 64, 3), 200, np.uint8)) is None  # a flat picture has no face


def test_bad_roi_and_grow():
    with pytest.raises(ValueError, match="roi must be"):
        roi.resolve("hands")
    assert roi.grow((10, 10, 20, 20), (25, 100), 0.5) == (5, 5, 25, 25)


@pytest.mark.parametrize("box,inside", [((-20, -10, 30, 20), (0, 0, 30, 20)),
                                        ((50, 40, 500, 400), (50, 40, 64, 48)),
                                        ((10.4, 5.6, 20.2, 30.9), (10, 5, 21, 31))])
def test_boxes_outside_the_picture_are_clipped(package, box, inside):
    img = picture((48, 64, 3))
    eng = Engine(package, roi=lambda bgr: box)
    out = eng.convert(img)
    assert out.shape == img.shape
    x0, y0, x1, y1 = inside
    changed = np.argwhere(np.any(out != img, axis=2))
    assert changed.size
    assert changed[:, 0].min() >= y0 and changed[:, 0].max() < y1
    assert changed[:, 1].min() >= x0 and changed[:, 1].max() < x1


@pytest.mark.parametrize("box", [(100, 100, 200, 200), (-5, -5, -1, -1), (10, 10, 10, 20)])
def test_a_box_with_nothing_inside_converts_the_whole_picture(package, box):
    img = picture((48, 64, 3))
    whole = Engine(package).convert(img)
    np.testing.assert_array_equal(Engine(package, roi=lambda bgr: box).convert(img), whole)


@pytest.mark.parametrize("box", [(0, 0, float("nan"), 5), (1, 2, 3), "abcd"])
def test_a_box_that_is_not_four_numbers_is_a_value_error(package, box):
    with pytest.raises(ValueError, match="ROI box"):
        Engine(package, roi=lambda bgr: box).convert(picture((48, 64, 3)))
