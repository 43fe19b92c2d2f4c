"""Tiled and untiled conversions of one picture agree: the one padding rule (picture/forward.py
pad_to_stride, 1-pixel sides included) and whole-picture statistics in the tiles, also those the
network holds itself (the bundled a2r_lite's InstanceNormalization nodes)."""
from pathlib import Path

import cv2
import numpy as np
import pytest

from a2r_edge import Engine
from a2r_edge.picture.forward import pad_to_stride, reflect_index

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "astronaut_toon.png"


@pytest.mark.parametrize("h,w", [(1, 1), (1, 6), (6, 1), (2, 3), (5, 7), (4, 8), (13, 2)])
@pytest.mark.parametrize("channels", [None, 1, 3, 4])
def test_pad_to_stride_is_reflect_and_repeats_a_1_pixel_side(h, w, channels):
    rng = np.random.default_rng(h * 100 + w)
    shape = (h, w) if channels is None else (h, w, channels)
    img = rng.integers(0, 256, shape, dtype=np.uint8)
    out = pad_to_stride(img, 4)
    assert out.shape == (h + -h % 4, w + -w % 4, 3)
    bgr = np.repeat(img.reshape(h, w, -1)[:, :, :1], 3, 2) if channels in (None, 1) \
        else img[:, :, :3]
    mode_h, mode_w = ("edge" if h == 1 else "reflect"), ("edge" if w == 1 else "reflect")
    want = np.pad(bgr, ((0, -h % 4), (0, 0), (0, 0)), mode=mode_h)
    want = np.pad(want, ((0, 0), (0, -w % 4), (0, 0)), mode=mode_w)
    np.testing.assert_array_equal(out, want)
    assert [reflect_index(i, 3) for i in range(8)] == [0, 1, 2, 1, 0, 1, 2, 1]


@pytest.fixture(scope="module")
def engine():
    return Engine(cache_mb=0)  # the bundled a2r_lite: InstanceNormalization in both networks


def bands(diff, width=8):
    """Mean of |diff| in the outer ``width``-pixel band of the picture and inside it."""
    border = np.ones(diff.shape[:2], bool)
    border[width:-width, width:-width] = False
    return diff[border].mean(), diff[~border].mean()


def test_tiled_equals_untiled_on_the_bundled_model(engine):
    """517x389 in tiles of 256: before whole-picture statistics reached the network's
    InstanceNormalization nodes, 2.3 grey levels apart on average and up to 35, everywhere."""
    img = cv2.resize(cv2.imread(str(SAMPLE)), (517, 389), interpolation=cv2.INTER_AREA)
    whole = engine.convert(img).astype(np.int16)
    diff = np.abs(engine.convert(img, tile=256).astype(np.int16) - whole)
    border, interior = bands(diff)
    assert diff.mean() <= 0.05 and diff.max() <= 2
    assert border <= 0.05 and interior <= 0.05


@pytest.mark.parametrize("shape", [(1, 517, 3), (389, 1, 3), (1, 300), (2, 301, 4), (300, 3, 3)])
def test_tiled_equals_untiled_with_thin_sides(engine, shape):
    rng = np.random.default_rng(sum(shape))
    base = cv2.imread(str(SAMPLE))[:shape[0], :shape[1]]
    img = base if len(shape) == 3 and shape[2] == 3 else (
        cv2.cvtColor(base, cv2.COLOR_BGR2GRAY) if len(shape) == 2
        else np.dstack([base, rng.integers(0, 256, shape[:2], dtype=np.uint8)]))
    whole = engine.convert(img).astype(np.int16)
    tiled = engine.convert(img, tile=128).astype(np.int16)
    assert tiled.shape == whole.shape == img.shape
    assert np.abs(tiled - whole).max() <= 2
