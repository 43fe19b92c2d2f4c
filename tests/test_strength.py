"""The strength setting: Engine.convert / convert_batch / stream strength=, the manifest's default
and the CLI's --strength blend the input with the model's output."""
import json

import numpy as np
import pytest

from a2r_edge.engine import Engine
from a2r_edge.model.package import ModelPackageError, load_package
from a2r_edge.picture.stages import blend
from model_packages import make_package
from test_cli import cli, save


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    return make_package(tmp_path_factory.mktemp("strength") / "tiny")


@pytest.fixture(scope="module")
def engine(package):
    return Engine(str(package), device="cpu")


def picture(shape=(21, 27, 3), seed=3):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def test_strength_blends_input_and_output(engine):
    img = picture()
    full = engine.convert(img)
    assert np.array_equal(engine.convert(img, strength=1.0), full)
    assert np.array_equal(engine.convert(img, strength=0), img)
    half = engine.convert(img, strength=0.5).astype(np.int16)
    want = (img.astype(np.float32) + full) / 2
    assert np.abs(half - want).max() <= 0.5 + 1e-6
    assert not np.array_equal(full, img)   # the test's model does change the picture


def test_strength_keeps_the_layout(engine):
    bgra = picture((16, 19, 4))
    out = engine.convert(bgra, strength=0.3)
    assert out.shape == bgra.shape and np.array_equal(out[..., 3], bgra[..., 3])
    gray = picture((16, 19))
    assert engine.convert(gray, strength=0.3).shape == gray.shape


def test_batch_and_stream_match_convert(engine):
    imgs = [picture(seed=s) for s in range(3)]
    want = [engine.convert(i, strength=0.4) for i in imgs]
    for got in (engine.convert_batch(imgs, strength=0.4), list(engine.stream(imgs, strength=0.4))):
        assert all(np.array_equal(a, b) for a, b in zip(got, want))


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.5", True, float("nan")])
def test_bad_strength_is_refused(engine, bad):
    with pytest.raises(ValueError, match="strength"):
        engine.convert(picture(), strength=bad)


def test_manifest_default(tmp_path):
    folder = make_package(tmp_path / "p")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert load_package(folder).strength == 1.0
    manifest["strength"] = 0.25
    (folder / "manifest.json").write_text(json.dumps(manifest))
    img = picture()
    eng = Engine(str(folder), device="cpu")
    assert eng.model.strength == 0.25
    assert np.array_equal(eng.convert(img), eng.convert(img, strength=0.25))
    manifest["strength"] = 2
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ModelPackageError, match="strength"):
        load_package(folder)


def test_blend_rounds_and_clips():
    a = np.array([[[0, 100, 255]]], np.uint8)
    b = np.array([[[255, 101, 0]]], np.uint8)
    assert blend(a, b, 0.5).tolist() == [[[128, 100, 128]]]   # round half to even: 100.5 -> 100
    assert blend(a, b, 1.0) is b


def test_cli_strength(tmp_path, package):
    src = tmp_path / "in.png"
    img = save(src, (20, 24, 3))
    p = cli("convert", src, "-o", tmp_path / "o.png", "--model", package, "--strength", "0")
    assert p.returncode == 0, p.stderr
    import cv2
    assert np.array_equal(cv2.imread(str(tmp_path / "o.png")), img)
    p = cli("convert", src, "-o", tmp_path / "o2.png", "--model", package, "--strength", "2")
    assert p.returncode == 2 and "--strength must be a number in [0, 1]" in p.stderr
