"""No line along the picture's edges (issue 22, border): the padding rule mirrors the model's
``border_margin`` onto every side (picture/forward.py pad_to_stride), so the network's own zero
padding is as far from the top and left edges as from the bottom and right ones."""
import json
import shutil

import numpy as np
import pytest

from a2r_edge import Engine
from a2r_edge.model import package
from a2r_edge.quality import artefacts

BUNDLED = package.BUNDLED / package.DEFAULT_MODEL


def landscape(h=240, w=320):
    """A smooth sky fading downwards over a dark textured ground: the top edge the old rule
    (bottom and right mirrored only) darkened by 3.7 grey levels against the band inside it."""
    rng = np.random.default_rng(1)
    fade = 1 - 0.3 * np.linspace(0, 1, h)[:, None, None]
    img = np.array([185.0, 160.0, 140.0]) * fade + rng.normal(0, 2, (h, w, 3))
    ground = h * 2 // 3
    img[ground:] = np.array([40.0, 90.0, 60.0]) + rng.normal(0, 12, (h - ground, w, 3))
    img = np.clip(img, 0, 255).astype(np.uint8)
    # a 3x3 box blur: the ground's noise as texture, not single pixels
    pad = np.pad(img.astype(np.float32), ((1, 1), (1, 1), (0, 0)), mode="edge")
    blur = sum(pad[i:i + h, j:j + w] for i in range(3) for j in range(3)) / 9
    return np.rint(blur).astype(np.uint8)


def with_margin(tmp_path, margin):
    """The bundled package copied with another border_margin."""
    folder = tmp_path / f"a2r_lite_margin{margin}"
    shutil.copytree(BUNDLED, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["border_margin"] = margin
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


@pytest.fixture(scope="module")
def engine():
    return Engine(cache_mb=0)


def test_the_bundled_model_mirrors_a_margin_onto_every_side():
    model = package.load_package(BUNDLED)
    assert model.border_margin >= 4 * model.stride and model.border_margin % model.stride == 0


def test_the_top_edge_of_a_landscape_passes_the_border_measure(engine, tmp_path):
    img = landscape()
    worst, sides = artefacts.border(img, engine.convert(img))
    limit = artefacts.LIMITS["border"][1]
    assert worst <= limit, sides
    # the same network with the old rule (no margin: the top and left edges on its zero padding)
    # draws a line along the top (0.3.0's was past the limit; this network's, trained with the
    # margin, is fainter): the cause, and proof that this picture shows it
    old = Engine(with_margin(tmp_path, 0), cache_mb=0)
    old_worst, old_sides = artefacts.border(img, old.convert(img))
    assert old_worst > 2 * worst and abs(old_sides["top"][1]) > 0.5, old_sides
    assert abs(sides["top"][1]) < abs(old_sides["top"][1]) / 2


def test_tiles_and_a_gray_picture_get_the_same_margin(engine):
    img = landscape(200, 300)
    whole = engine.convert(img).astype(np.int16)
    assert np.abs(engine.convert(img, tile=96).astype(np.int16) - whole).max() <= 2
    gray = img[:, :, 1]
    out = engine.convert(gray)
    assert out.shape == gray.shape
    assert artefacts.border(gray, out)[0] <= artefacts.LIMITS["border"][1]


@pytest.mark.parametrize("value", [-1, 1025, 2.5, "8", True])
def test_a_bad_border_margin_is_refused_by_name(tmp_path, value):
    folder = with_margin(tmp_path, value)
    with pytest.raises(package.ModelPackageError, match="border_margin"):
        package.load_package(folder)
