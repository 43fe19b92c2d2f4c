"""Engine: one picture's path (docs/architecture.md) on tiny random-weight packages, against an
independent numpy + onnxruntime implementation of the package semantics."""
import json
import warnings

import cv2
import numpy as np
import onnx
import onnxruntime
import pytest

import a2r_edge
from a2r_edge import Engine
from a2r_edge.model import reference as ref
from a2r_edge.model.package import ModelPackageError, load_package, sha256_of
from model_packages import make_package, upscaler_2x


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    return make_package(tmp_path_factory.mktemp("pkg") / "tiny")


@pytest.fixture(scope="module")
def engine(package):
    return Engine(str(package))


def picture(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def colour_moved(img_bgr, ref_bgr, k=0.5):
    """style='s colour step as the package oracle defines it."""
    return ref.colour_transfer(img_bgr, ref_bgr, k)


def expected(package, img_bgr, stats=None):
    """The package semantics: the numpy + onnxruntime oracle (model/reference.py)."""
    return ref.PackageReference(str(package)).convert(img_bgr, stats)


@pytest.mark.parametrize("shape", [(32, 32, 3), (37, 53, 3), (5, 9, 3), (1, 1, 3), (2, 3, 3)])
def test_matches_the_package_semantics(package, engine, shape):
    img = picture(shape)
    out = engine.convert(img)
    assert out.shape == img.shape and out.dtype == np.uint8
    diff = np.abs(out.astype(int) - expected(package, img))
    assert diff.max() <= 1, f"max difference {diff.max()} levels"


def test_a_cpu_plan_without_onnxruntime_stages_never_loads_it(package):
    """onnxruntime costs ~20 MiB of RSS: an Engine whose plan has no onnxruntime stage (and no
    GPU to ask it about) does not import it."""
    import subprocess
    import sys
    from a2r_edge.runtime import cuda
    if cuda.why_unavailable() is None:
        pytest.skip("a usable GPU: onnxruntime is asked whether it offers its CUDA provider")
    code = ("import sys; from a2r_edge import Engine; import numpy as np; "
            f"e = Engine({str(package)!r}, backend='native'); e.convert(np.zeros((8, 8, 3), np.uint8)); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'onnxruntime'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_native_and_onnxruntime_backends_agree(package, engine):
    img = picture((48, 40, 3), seed=3)
    other = Engine(str(package), backend="onnxruntime")
    assert "onnxruntime" in other.plan.describe()
    assert np.abs(engine.convert(img).astype(int) - other.convert(img)).max() <= 1


def test_gray_and_alpha_layouts(engine):
    bgr = picture((21, 30, 3), seed=1)
    gray = bgr[:, :, 1].copy()
    out = engine.convert(gray)
    assert out.shape == gray.shape and out.dtype == np.uint8
    np.testing.assert_array_equal(engine.convert(gray[:, :, None])[:, :, 0], out)
    alpha = np.maximum(picture((21, 30), seed=2), 1)   # nothing fully transparent
    bgra = np.dstack([bgr, alpha])
    out4 = engine.convert(bgra)
    assert out4.shape == bgra.shape
    np.testing.assert_array_equal(out4[:, :, 3], alpha)  # alpha kept exactly
    np.testing.assert_array_equal(out4[:, :, :3], engine.convert(bgr))


def test_colour_under_transparent_pixels_does_not_reach_the_visible_ones(engine):
    """A sprite on a transparent background: whatever colour the file keeps under alpha 0
    (magenta, black, noise), the visible pixels come out the same, and as the sprite
    composited over white converts (the background the drawings are measured on): white is
    put under alpha 0 before the network sees it (forward.visible_bgr)."""
    sprite = picture((40, 48, 3), seed=5)
    alpha = np.zeros((40, 48), np.uint8)
    cv2.circle(alpha, (24, 20), 14, 255, -1)
    alpha = cv2.GaussianBlur(alpha, (5, 5), 0)   # a soft, partly transparent edge
    outs = []
    for under in ((255, 0, 255), (0, 0, 0), None):
        bgr = sprite.copy()
        bgr[alpha == 0] = picture((40, 48, 3), seed=6)[alpha == 0] if under is None else under
        outs.append(engine.convert(np.dstack([bgr, alpha])))
    seen, opaque = alpha > 0, alpha == 255
    for out in outs[1:]:
        np.testing.assert_array_equal(out[seen], outs[0][seen])
        np.testing.assert_array_equal(out[:, :, 3], alpha)
    on_white = sprite.copy()
    on_white[~seen] = 255
    np.testing.assert_array_equal(outs[0][:, :, :3], engine.convert(on_white))
    assert opaque.sum() > 400
    # with style=, the colour step's statistics are of the visible pixels too
    ref_photo = picture((20, 20, 3), seed=10)
    styled = []
    for under in ((255, 0, 255), (0, 0, 0)):
        bgr = sprite.copy()
        bgr[alpha == 0] = under
        styled.append(engine.convert(np.dstack([bgr, alpha]), style=ref_photo))
    np.testing.assert_array_equal(styled[1][seen], styled[0][seen])
    # and a BGRA reference photo's colour statistics are of its visible pixels
    from a2r_edge.picture import stages, style
    photo_alpha = np.zeros((20, 20), np.uint8)
    photo_alpha[4:16, 3:17] = 255
    _, (colour, _) = style.reference(engine._forward, np.dstack([ref_photo, photo_alpha]), None)
    for got, want in zip(colour, stages.colour_stats(np.ascontiguousarray(ref_photo[4:16, 3:17]))):
        np.testing.assert_allclose(got, want, rtol=1e-9)


def test_bgra_in_any_memory_order(engine):
    """A BGRA picture in Fortran order (or flipped) converts, and gives style statistics, as
    its C-ordered copy: the BGR with white under alpha 0 is made in C order (OpenCV wrote
    into it, and refused the Fortran-ordered copy the fuzz test found); and the smallest
    pictures get their white too (OpenCV's compare took a 1x1 alpha for a scalar)."""
    from a2r_edge.picture.forward import visible_bgr
    for shape in ((1, 1), (1, 3), (4, 1), (2, 2)):
        tiny = np.full(shape + (4,), 9, np.uint8)
        tiny[..., 3] = 0
        tiny.flat[-1] = 200   # the last pixel visible
        want = np.full(shape + (3,), 255, np.uint8)
        want.reshape(-1, 3)[-1] = 9
        for order in ("C", "F"):
            np.testing.assert_array_equal(visible_bgr(tiny.copy(order=order)), want)
    bgra = np.dstack([picture((9, 7, 3), seed=11), np.tile([0, 128, 255], 21).reshape(9, 7)])
    bgra = bgra.astype(np.uint8)
    pixel = np.asfortranarray(bgra[:1, :1])   # 1x1: every order's strides pass as contiguous
    for odd in (np.asfortranarray(bgra), bgra[::-1, ::-1], pixel):
        want = np.ascontiguousarray(odd)
        np.testing.assert_array_equal(engine.convert(odd), engine.convert(want))
        for got, ref in zip(engine.style_stats(odd), engine.style_stats(want)):
            np.testing.assert_array_equal(got, ref)


def test_strided_input_and_batch_and_stream(engine):
    big = picture((40, 60, 3), seed=4)
    view = big[::2, ::2]
    np.testing.assert_array_equal(engine.convert(view), engine.convert(view.copy()))
    frames = [picture((16, 16 + 4 * i, 3), seed=i) for i in range(4)]
    singles = [engine.convert(f) for f in frames]
    for got, want in zip(engine.convert_batch(frames), singles):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(engine.stream(iter(frames)), singles):
        np.testing.assert_array_equal(got, want)


def test_style_reference_changes_the_result(package, engine):
    img, ref_photo = picture((32, 32, 3), seed=5), picture((24, 28, 3), seed=6)
    mean, std = engine.style_stats(ref_photo)
    assert mean.shape == std.shape == (1, 8) and np.all(std > 0)
    styled = engine.convert(img, style=ref_photo)
    want = expected(package, colour_moved(img, ref_photo), (mean, std))
    assert np.abs(styled.astype(int) - want).max() <= 1
    assert np.abs(styled.astype(int) - engine.convert(img)).mean() > 1


def test_style_moves_the_colours_towards_the_reference(engine):
    """A reddish reference: the output's mean colour gets nearer the reference's than without
    style= (the colour step); batches, streams and tiles give what convert gives."""
    img = picture((48, 40, 3), seed=7)
    red = np.zeros((30, 30, 3), np.uint8)
    red[..., 2] = picture((30, 30), seed=8) // 4 + 180
    plain, styled = engine.convert(img), engine.convert(img, style=red)
    target = red.reshape(-1, 3).mean(0)
    dist = lambda out: np.linalg.norm(out.reshape(-1, 3).mean(0) - target)  # noqa: E731
    assert dist(styled) < dist(plain) - 20
    frames = [img, picture((16, 24, 3), seed=9)]
    singles = [engine.convert(f, style=red) for f in frames]
    for got in (engine.convert_batch(frames, style=red), list(engine.stream(frames, style=red))):
        for g, want in zip(got, singles):
            np.testing.assert_array_equal(g, want)
    assert np.abs(engine.convert(img, style=red, tile=16).astype(int) - styled).mean() < 4


def test_style_colour_sets_how_far_the_colours_move(package, engine):
    """style_colour=k moves the colours k of the way (0: the AdaIN statistics alone, 1: the
    reference's mean and std), the same in convert, batches and streams; not a number in
    [0, 1], or given without style=: ValueError."""
    img, ref_photo = picture((32, 32, 3), seed=5), picture((24, 28, 3), seed=6) // 2 + 100
    stats = engine.style_stats(ref_photo)
    for k in (0.0, 0.25, 1.0):
        got = engine.convert(img, style=ref_photo, style_colour=k)
        want = img if k == 0 else colour_moved(img, ref_photo, k)
        assert np.abs(got.astype(int) - expected(package, want, stats)).max() <= 1
        np.testing.assert_array_equal(
            engine.convert_batch([img], style=ref_photo, style_colour=k)[0], got)
        np.testing.assert_array_equal(
            next(engine.stream([img], style=ref_photo, style_colour=k)), got)
    for bad in (-0.1, 1.5, float("nan"), True, "0.5"):
        with pytest.raises(ValueError, match="style_colour must be a number in"):
            engine.convert(img, style=ref_photo, style_colour=bad)
        with pytest.raises(ValueError, match="style_colour"):
            list(engine.stream([img], style=ref_photo, style_colour=bad))
    for call in (lambda: engine.convert(img, style_colour=0.5),
                 lambda: engine.convert_batch([img], style_colour=0.5),
                 lambda: list(engine.stream([img], style_colour=0.5))):
        with pytest.raises(ValueError, match="needs style="):   # ignored before
            call()


def test_style_keeps_gray_and_alpha_layouts_and_flat_pictures(engine):
    ref_photo = picture((20, 20, 3), seed=10)
    gray = picture((24, 24), seed=11)
    out = engine.convert(gray, style=ref_photo)
    assert out.shape == gray.shape and out.dtype == np.uint8
    bgra = np.dstack([picture((24, 24, 3), seed=12), np.maximum(picture((24, 24), seed=13), 1)])
    out4 = engine.convert(bgra, style=ref_photo)
    np.testing.assert_array_equal(out4[:, :, 3], bgra[:, :, 3])
    np.testing.assert_array_equal(out4[:, :, :3], engine.convert(bgra[:, :, :3], style=ref_photo))
    flat = np.full((16, 16, 3), 77, np.uint8)           # zero variance: no division by zero
    for content, reference in ((flat, ref_photo), (ref_photo, flat), (flat, flat)):
        assert engine.convert(content, style=reference).shape == content.shape


def test_colour_transfer_moves_mean_and_std_by_the_strength():
    from a2r_edge.picture import stages
    img, ref_photo = picture((64, 64, 3), seed=14), picture((40, 40, 3), seed=15) // 3 + 60
    ref_stats = stages.colour_stats(ref_photo)
    np.testing.assert_array_equal(stages.colour_transfer(img, ref_stats, strength=0.0), img)
    full = stages.colour_transfer(img, ref_stats, strength=1.0).reshape(-1, 3)
    np.testing.assert_allclose(full.mean(0), ref_photo.reshape(-1, 3).mean(0), atol=0.6)
    np.testing.assert_allclose(full.std(0), ref_photo.reshape(-1, 3).std(0), rtol=0.02)
    half = stages.colour_transfer(img, ref_stats)
    assert np.abs(half.astype(int) - colour_moved(img, ref_photo)).max() <= 1  # float32 vs 64


def test_colour_transfer_takes_the_pictures_own_statistics_when_given():
    """own= replaces the picture's measured statistics (video passes smoothed ones): its own
    give the same picture in every layout, another picture's give that picture's mapping."""
    from a2r_edge.picture import stages
    ref_stats = stages.colour_stats(picture((40, 40, 3), seed=15) // 3 + 60)
    bgr, other = picture((32, 32, 3), seed=16), picture((32, 32, 3), seed=17) // 2
    for img in (bgr, bgr[:, :, 0], bgr[:, :, :1], np.dstack([bgr, bgr[:, :, 1]])):
        own = stages.colour_moments(img)
        assert own[0].shape == ((1,) if img.ndim == 2 or img.shape[2] == 1 else (3,))
        np.testing.assert_array_equal(stages.colour_transfer(img, ref_stats, own=own),
                                      stages.colour_transfer(img, ref_stats))
    m, s = stages.colour_moments(other)
    got = stages.colour_transfer(bgr, ref_stats, own=(m, s)).astype(np.float64)
    gain = (ref_stats[1][:3] / s) ** stages.STYLE_COLOUR
    want = bgr * gain + (m + stages.STYLE_COLOUR * (ref_stats[0][:3] - m) - m * gain)
    assert np.abs(got - np.clip(np.rint(want), 0, 255)).max() == 0
    assert np.abs(got - stages.colour_transfer(bgr, ref_stats)).mean() > 5


def test_content_map_predicts_the_target_statistics(tmp_path):
    """A statistics file with a content map: each picture's target statistics come from its
    own features (semantics in expected()); a reference photo's still replace them; tiles share
    the whole picture's prediction."""
    folder = make_package(tmp_path / "p", content_map=True)
    engine = Engine(str(folder))
    plain = Engine(str(make_package(tmp_path / "q")))
    for seed, shape in [(1, (32, 32, 3)), (2, (37, 53, 3))]:
        img = picture(shape, seed)
        out = engine.convert(img)
        assert np.abs(out.astype(int) - expected(folder, img)).max() <= 1
        assert np.abs(out.astype(int) - plain.convert(img)).mean() > 1
    ref_photo = picture((24, 28, 3), seed=6)
    styled = engine.convert(img, style=ref_photo)
    want = expected(folder, colour_moved(img, ref_photo), engine.style_stats(ref_photo))
    assert np.abs(styled.astype(int) - want).max() <= 1
    big = picture((96, 120, 3), seed=3)
    tiled = engine.convert(big, tile=64)
    assert tiled.shape == big.shape
    whole = engine.convert(big)
    assert np.abs(tiled.astype(int) - whole).mean() < 4   # same targets; only tile seams differ


def test_content_map_targets_stay_near_the_fixed_statistics():
    """A picture far from the training data (flat: ln std = ln sqrt(eps)) gets clipped targets,
    not exp() of a large number."""
    from a2r_edge.model.package import AdainStats
    c = 4
    st = AdainStats(np.zeros(c, np.float32), np.ones(c, np.float32), 10 * np.eye(2 * c),
                    np.zeros(2 * c))
    mean, std = st.target((np.full((1, c), 100.0, np.float32), np.full((1, c), 3e-3, np.float32)))
    assert mean.shape == std.shape == (1, c)
    np.testing.assert_allclose(mean, 4.0)
    np.testing.assert_allclose(std, np.exp(-4.0), rtol=1e-6)
    with pytest.raises(ValueError, match="content="):
        st.target()


@pytest.mark.parametrize("content_map,match", [
    ({"weight": [[1.0]], "bias": [0.0]}, r"content_map needs a finite weight \(16, 16\)"),
    ({"weight": np.full((16, 16), np.nan).tolist(), "bias": [0.0] * 16}, "finite"),
    ({"bias": [0.0] * 16}, "not a statistics file"),
    ([1, 2], "not a statistics file"),
], ids=["shape", "nan", "no weight", "not an object"])
def test_bad_content_map(tmp_path, content_map, match):
    folder = make_package(tmp_path / "p")
    st = json.loads((folder / "photo_stats.json").read_text())
    st["content_map"] = content_map
    (folder / "photo_stats.json").write_text(json.dumps(st))
    _edit_manifest(folder, lambda m: m["files"].update({"photo_stats.json":
                                                        sha256_of(folder / "photo_stats.json")}))
    with pytest.raises(ModelPackageError, match=match):
        Engine(str(folder))


def test_plain_onnx_file_is_wrapped(tmp_path):
    path = tmp_path / "up2.onnx"
    onnx.save(upscaler_2x(np.random.default_rng(0)), path)
    eng = Engine(str(path))
    img = np.dstack([picture((13, 17, 3)), np.maximum(picture((13, 17), seed=9), 1)])
    out = eng.convert(img)
    assert out.shape == (26, 34, 4)
    x = ref.preprocess(img[:, :, :3], (0.5,) * 3, (0.5,) * 3)
    y = onnxruntime.InferenceSession(str(path)).run(None, {"x": x})[0]
    assert np.abs(out[:, :, :3].astype(int) - ref.postprocess(y, (0.5,) * 3, (0.5,) * 3)).max() <= 1


def test_plan_describes_every_stage(engine):
    text = engine.plan.describe()
    for stage in ("encode", "stylize", "decode", "enhance"):
        assert stage in text


def test_unsupported_op_runs_on_onnxruntime_inside_the_native_plan_and_says_why(tmp_path):
    folder = make_package(tmp_path / "p")
    model = onnx.load(folder / "decoder.onnx")
    tanh = next(n for n in model.graph.node if n.op_type == "Tanh")
    tanh.op_type = "Softsign"  # valid ONNX, not in the native executor's set
    onnx.save(model, folder / "decoder.onnx")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["decoder.onnx"] = sha256_of(folder / "decoder.onnx")
    (folder / "manifest.json").write_text(json.dumps(manifest))
    # the stage stays a native candidate (the scheduler may still pick onnxruntime by cost; a
    # calibration, unless one is cached, runs the native plan, which then says so once)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert "decode" not in Engine(str(folder))._stage_runners.unsupported
    eng = Engine(str(folder), backend="native")
    assert eng.plan.backend_of("decode") == "native"   # only the Softsign node is not
    with pytest.warns(RuntimeWarning, match="Softsign"):
        assert eng.convert(picture((16, 16, 3))).shape == (16, 16, 3)
    assert "no native kernel for Softsign" in eng._stage_runners.executors["decode"].describe()
    with pytest.raises(ValueError, match="Softsign"):
        Engine(str(folder), strict=True)


@pytest.mark.parametrize("bad,error,match", [
    (np.zeros((8, 8, 3), np.float32), TypeError, "uint8"),
    (np.zeros((8, 8, 2), np.uint8), ValueError, "shape"),
    (np.zeros((0, 8, 3), np.uint8), ValueError, "empty"),
    (np.zeros((2, 8, 8, 3), np.uint8), ValueError, "shape"),
    ([[0, 1]], TypeError, "ndarray"),
])
def test_bad_pictures(engine, bad, error, match):
    with pytest.raises(error, match=match):
        engine.convert(bad)


def test_devices(package):
    with pytest.raises(ValueError, match="CUDA"):
        Engine(str(package), device="gpu")
    with pytest.raises(ValueError, match="device must be one of"):
        Engine(str(package), device="tpu")
    assert Engine(str(package), device="cpu").plan.device == "cpu"


def _edit_manifest(folder, change):
    m = json.loads((folder / "manifest.json").read_text())
    change(m)
    (folder / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize("edit,match", [
    (lambda m: m["stages"][0].update(file="../../etc/passwd"), "outside the package"),
    (lambda m: m["files"].pop("decoder.onnx"), "no sha256 for 'decoder.onnx'"),
    (lambda m: m["stages"][1].update(kind="magic"), "kind must be one of"),
], ids=["path escapes", "file unlisted", "unknown kind"])
def test_bad_manifest(tmp_path, edit, match):
    folder = make_package(tmp_path / "p")
    _edit_manifest(folder, edit)
    with pytest.raises(ModelPackageError, match=match):
        load_package(folder)


def test_package_checks(tmp_path):
    folder = make_package(tmp_path / "ok")
    assert load_package(folder).name == "tiny"
    (folder / "photo_stats.json").write_text('{"mean": [0], "std": [1]}')
    with pytest.raises(ModelPackageError, match="photo_stats.json: sha256 mismatch"):
        load_package(folder)

    (tmp_path / "json").mkdir()
    (tmp_path / "json" / "manifest.json").write_text("{not json")
    with pytest.raises(ModelPackageError, match="not valid JSON"):
        load_package(tmp_path / "json")
    with pytest.raises(ModelPackageError, match="no manifest.json"):
        load_package(tmp_path)
    with pytest.raises(ModelPackageError, match="not found"):
        a2r_edge.load_model(str(tmp_path / "missing.onnx"))


def test_corrupt_onnx_file_is_a_clear_error(tmp_path):
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"\x08\x07garbage")
    with pytest.raises(ValueError, match="bad.onnx"):
        Engine(str(path))


@pytest.mark.parametrize("detail", [1.0, 0.75])
def test_enhance_detail(tmp_path, detail):
    folder = make_package(tmp_path / "p", enhance={"radius": 3, "eps": 1e-2, "detail": detail})
    img = picture((30, 26, 3), seed=8)
    diff = np.abs(Engine(str(folder)).convert(img).astype(int) - expected(folder, img))
    assert diff.max() <= 1


def test_truncated_empty_and_tampered_model_files(tmp_path):
    src = make_package(tmp_path / "src")
    data = (src / "decoder.onnx").read_bytes()
    for name, content in [("cut.onnx", data[:len(data) // 2]), ("zero.onnx", b"")]:
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=name):
            Engine(str(tmp_path / name))
    # a truncated file whose manifest checksum was updated to match: still a clear error
    folder = make_package(tmp_path / "cut")
    (folder / "decoder.onnx").write_bytes(data[:len(data) // 2])
    _edit_manifest(folder, lambda m: m["files"].update({"decoder.onnx": sha256_of(folder /
                                                                              "decoder.onnx")}))
    with pytest.raises(ValueError, match="decoder.onnx"):
        Engine(str(folder))
    # the same bytes behind a wrong checksum are refused before parsing
    folder = make_package(tmp_path / "sum")
    (folder / "decoder.onnx").write_bytes(data[:len(data) // 2])
    with pytest.raises(ModelPackageError, match="decoder.onnx: sha256 mismatch"):
        Engine(str(folder))
    # absolute paths and symlinks out of the folder escape it too
    folder = make_package(tmp_path / "abs")
    _edit_manifest(folder, lambda m: m["stages"][0].update(file=str(src / "encoder.onnx")))
    with pytest.raises(ModelPackageError, match="outside the package"):
        load_package(folder)
    folder = make_package(tmp_path / "link")
    (folder / "encoder.onnx").unlink()
    (folder / "encoder.onnx").symlink_to(src / "encoder.onnx")
    with pytest.raises(ModelPackageError, match="outside the package"):
        load_package(folder)
