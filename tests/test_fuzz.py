"""Bad input everywhere public: every op, Conv2d, the Engine and load_model get arrays of any rank
(0-d to 5-d, zero-size, 1-pixel), every numpy dtype (numeric, bool, object, structured), any
strides (negative, zero, Fortran), both byte orders and NaN/inf. Each call must either raise
ValueError/TypeError (MemoryError with a message for a real size limit) or return what the numpy
reference returns. A crash (segfault) kills the pytest process and so fails the run; hypothesis'
deadline catches hangs. The number of cases tried is printed after the file's tests."""
import collections

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import a2r_edge
from a2r_edge import Engine, ops
from a2r_edge.model import reference as ref
from model_packages import make_package
from tolerances import ELEMENTWISE, REDUCTION

CASES = collections.Counter()
OK_ERRORS = (ValueError, TypeError)

DTYPES = [np.dtype(c) for c in "?bBhHiIlLqQefdgFDG"] + [
    np.dtype(object), np.dtype([("a", "<f4"), ("b", "u1")]), np.dtype("<M8[s]"),
    np.dtype("U3"), np.dtype("V4")]


@st.composite
def arrays(draw, ndims=st.integers(0, 5), sizes=st.sampled_from([0, 1, 1, 2, 3, 4, 7])):
    if draw(st.booleans()):  # half the cases: a shape and dtype some op accepts
        d = st.integers(1, 9)
        shape = draw(st.sampled_from([(1, 3, 0, 0), (3, 0, 0), (0, 0, 3), (0, 0), (1, 4, 0, 0),
                                      (0, 0, 4), (2, 3, 0, 0)]))
        shape = tuple(v or draw(d) for v in shape)
        ndim = len(shape)
        dtype = np.dtype(draw(st.sampled_from([np.float32, np.uint8])))
    else:
        ndim = draw(ndims)
        shape = tuple(draw(sizes) for _ in range(ndim))
        dtype = draw(st.sampled_from(DTYPES + [np.dtype(np.float32)] * 6 +
                                     [np.dtype(np.uint8)] * 4))
    if dtype.kind in "biufc":
        a = (np.random.default_rng(draw(st.integers(0, 99))).random(shape) * 4 - 2)
        a = a.astype(dtype) if dtype.kind != "u" else (a * 60 + 128).astype(dtype)
        if dtype.kind in "fc" and a.size and draw(st.booleans()):
            a.flat[draw(st.integers(0, a.size - 1))] = draw(st.sampled_from(
                [np.nan, np.inf, -np.inf]))
    else:
        a = np.zeros(shape, dtype)
    layout = draw(st.sampled_from(["c", "c", "fortran", "flip", "byteswap", "zero_stride"]))
    if layout == "fortran":
        a = np.asfortranarray(a)
    elif layout == "flip" and ndim:
        a = a[::-1]
    elif layout == "byteswap" and dtype.kind in "iufc" and dtype.itemsize > 1:
        a = a.astype(dtype.newbyteorder())
    elif layout == "zero_stride" and ndim and shape[0]:
        a = np.broadcast_to(a[:1], shape)
    return a


def native(a):
    return np.ascontiguousarray(a, a.dtype.newbyteorder("="))


def check(name, fn, expected=None, tol=ELEMENTWISE):
    """Calls fn(); a raised ValueError/TypeError is a pass; a result must equal expected()."""
    try:
        got = fn()
    except OK_ERRORS:
        CASES[name + ": refused"] += 1
        return
    CASES[name + ": computed"] += 1
    if expected is not None:
        want = expected()
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            assert g.shape == w.shape and g.dtype == np.asarray(w).dtype or g.dtype == np.float32
            np.testing.assert_allclose(g, w, equal_nan=True, **tol)


FUZZ = settings(max_examples=150, deadline=2000,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def c_of(a):
    return a.shape[1] if a.ndim == 4 else 3


@FUZZ
@given(arrays())
def test_ops_never_crash_and_agree_with_the_reference(a):
    f32 = a.dtype.kind == "f" and a.dtype.itemsize == 4
    check("preprocess", lambda: ops.preprocess(a),
          lambda: ref.preprocess(native(a), (0.5,) * 3, (0.5,) * 3))
    check("postprocess", lambda: ops.postprocess(a),
          lambda: ref.postprocess(native(a), (0.5,) * 3, (0.5,) * 3), dict(rtol=0, atol=0))
    # a constant plane: the reference's variance would cancel; the ops must not crash
    finite = f32 and np.isfinite(a).all()
    check("channel_stats", lambda: ops.channel_stats(a),
          (lambda: ref.channel_stats(native(a))) if finite else None, REDUCTION)
    if finite:  # values near FLT_MAX: the float32 lane sums overflow, the result must not
        huge = (native(a) * np.float32(3e37)).astype(np.float32)
        check("channel_stats(x * 3e37)", lambda: ops.channel_stats(huge),
              lambda: ref.channel_stats(huge), dict(rtol=1e-4, atol=3e37 * 1e-5))
    c = c_of(a)
    check("adain", lambda: ops.adain(a, np.zeros(c), np.ones(c)), None)
    check("adalin", lambda: ops.adalin(a, np.full(c, 0.5), np.full(c, 0.5), np.ones(c),
                                       np.zeros(c)), None)
    check("silu", lambda: ops.silu(a), lambda: ref.silu(native(a)))
    check("pixel_shuffle", lambda: ops.pixel_shuffle(a, 1), lambda: ref.pixel_shuffle(native(a), 1))
    check("im2col", lambda: ops.im2col(a, 3, pad=1),
          lambda: ref.im2col(native(a), (3, 3), pad=(1, 1)))
    w = np.linspace(-1, 1, 2 * c * 9, dtype=np.float32).reshape(2, c, 3, 3)
    check("conv2d", lambda: ops.conv2d(a, w, pad=1, activation="relu"),
          (lambda: ref.conv2d(native(a), w, pad=(1, 1), activation_kind="relu")) if finite else None,
          REDUCTION)
    check("Conv2d", lambda: ops.Conv2d(a), None)  # a as the weights
    guide = a[..., 0] if a.ndim == 3 and a.shape[2] else a
    check("guided_filter", lambda: ops.guided_filter(guide, a, 1, 0.01),
          (lambda: ref.guided_filter(native(guide), native(a), 1, 0.01)) if finite else None,
          REDUCTION)


@FUZZ
@given(a=st.one_of(st.just(None), st.text(max_size=3), st.floats(), st.integers(),
                   st.lists(st.integers(0, 255), max_size=3)),
       r=st.one_of(st.integers(-3, 3), st.floats(-2, 2), st.none(), st.text(max_size=2)),
       eps=st.one_of(st.floats(allow_nan=True), st.integers(-1, 1), st.none()),
       big=st.sampled_from([23200, 2**20, 2**24 + 1, 2**31, 2**62, 2**63, 2**64]))
def test_ops_scalar_arguments(a, r, eps, big):
    x = np.ones((1, 4, 3, 3), np.float32)
    # sizes that overflowed the kernels' arithmetic (SIGSEGV, double free, hangs)
    check("guided_filter(huge radius)", lambda: ops.guided_filter(x[0, 0], x[0, 0], big, 0.01))
    check("conv2d(huge pad and dilation)", lambda: ops.conv2d(x, x, pad=big, dilation=big),
          lambda: ref.conv2d(x, np.ascontiguousarray(x[:, :, 1:2, 1:2])))
    check("im2col(huge dilation)", lambda: ops.im2col(x[0], 3, pad=big, dilation=big))
    check("ops(non-array)", lambda: ops.silu(a))
    check("pixel_shuffle(r)", lambda: ops.pixel_shuffle(x, r))
    check("im2col(kernel)", lambda: ops.im2col(x[0], r))
    check("channel_stats(eps)", lambda: ops.channel_stats(x, eps))
    check("guided_filter(radius, eps)", lambda: ops.guided_filter(x[0, 0], x[0, 0], r, eps))
    check("conv2d(stride, groups)", lambda: ops.conv2d(x, x, stride=r, groups=r))
    check("preprocess(mean)", lambda: ops.preprocess(np.zeros((2, 2, 3), np.uint8), mean=a))


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    return Engine(str(make_package(tmp_path_factory.mktemp("fuzz") / "tiny")), cache_mb=0)


@FUZZ
@given(arrays(ndims=st.integers(0, 5), sizes=st.sampled_from([0, 1, 1, 2, 3, 4, 5])))
def test_engine_never_crashes(engine, a):
    ok = a.dtype == np.uint8 and a.size and (a.ndim == 2 or a.ndim == 3 and a.shape[2] in (1, 3, 4))
    want = engine.convert(native(a)) if ok else None
    check("Engine.convert", lambda: engine.convert(a),
          (lambda: want) if ok else None, dict(rtol=0, atol=0))
    check("Engine.convert_batch", lambda: engine.convert_batch([a])[0],
          (lambda: want) if ok else None, dict(rtol=0, atol=0))
    check("Engine.stream", lambda: next(iter(engine.stream([a]))),
          (lambda: want) if ok else None, dict(rtol=0, atol=0))
    check("Engine.style_stats", lambda: engine.style_stats(a))


def test_huge_declared_sizes_are_refused_before_allocating(engine):
    tiny = np.zeros(3, np.uint8)
    huge = np.lib.stride_tricks.as_strided(tiny, (100000, 100000, 3), (0, 0, 1))
    for fn in (engine.convert, engine.style_stats, lambda a: engine.convert_batch([a]),
               lambda a: next(iter(engine.stream([a])))):
        with pytest.raises(ValueError, match="A2R_MAX_PIXELS"):
            fn(huge)
        CASES["Engine huge picture: refused"] += 1
    # 12 TB as float32: beyond the memory of any machine these tests run on (a 120 GB view
    # would really be allocated on a large GPU box).
    big = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (1, 3, 10**6, 10**6),
                                          (0, 0, 0, 0))
    for name, fn in [("silu", ops.silu), ("channel_stats", ops.channel_stats),
                     ("postprocess", ops.postprocess), ("adain", lambda x: ops.adain(
                         x, np.zeros(3), np.ones(3))),
                     ("adalin", lambda x: ops.adalin(x, *[np.ones(3)] * 4))]:
        with pytest.raises(MemoryError, match="more than this machine's"):
            fn(big)
        CASES[f"{name} huge view: refused"] += 1
    with pytest.raises(MemoryError, match="more than this machine's"):
        ops.im2col(np.zeros((1, 1, 1), np.float32), 1, pad=10**6)  # 16 TB of output
    CASES["im2col huge output: refused"] += 1


@pytest.mark.parametrize("model", [None, 3, b"", "", "/nonexistent/model.onnx", ".", "..",
                                   ["a"], object()])
def test_load_model_bad_arguments(model, tmp_path, monkeypatch):
    if model is None:  # the bundled one: fine if installed, a clear error if not
        try:
            a2r_edge.load_model(None)
        except OK_ERRORS + (OSError,):
            pass
        CASES["load_model"] += 1
        return
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OK_ERRORS + (OSError,)):
        a2r_edge.load_model(model)
    CASES["load_model: refused"] += 1


@pytest.fixture(scope="module")
def video_files(tmp_path_factory):
    import cv2
    folder = tmp_path_factory.mktemp("video_fuzz")
    good = folder / "ok.avi"
    wr = cv2.VideoWriter(str(good), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (32, 24))
    for i in range(2):
        wr.write(np.full((24, 32, 3), 40 * i, np.uint8))
    wr.release()
    (folder / "bad.avi").write_bytes(b"not a video")
    return folder


# Video CLI words: valid and invalid values of every option (no --camera: no camera here).
VIDEO_WORDS = ["--input", "@ok.avi", "@bad.avi", "@missing.avi", "--output", "@out.mp4",
               "@out.gif", "--size", "32x24", "0x0", "abc", "--smooth", "0.5", "-1", "nan",
               "--max-frames", "0", "1", "-5", "--device", "cpu", "gpu", "tpu", "--roi",
               "face", "hands", "--show", "-q", "--model", "@model", "--camera", "-1", "99",
               "@out.webm", "@ok.avi", "--metrics-port", "70000", "x"]


@FUZZ
@given(st.lists(st.sampled_from(VIDEO_WORDS), max_size=7))
def test_video_cli_arguments(engine, video_files, words):
    """Any argument list: exit 0 (it ran) or 2 with one line, never a traceback."""
    import contextlib
    import io
    from a2r_edge.apps import video
    model = str(engine.model.folder)
    argv = [model if w == "@model" else str(video_files / w[1:]) if w.startswith("@") else w
            for w in words]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = video.main(argv)
        except SystemExit as exc:  # argparse usage errors
            code = exc.code
    assert code in (0, 2), (argv, code, err.getvalue())
    assert "Traceback" not in err.getvalue()
    if code == 2:
        assert err.getvalue().strip(), argv
    CASES[f"video cli: exit {code}"] += 1


def _picture_templates():
    import cv2
    img = np.random.default_rng(0).integers(0, 256, (12, 9, 3), dtype=np.uint8)
    out = {ext: cv2.imencode(ext, img)[1].tobytes()
           for ext in (".png", ".jpg", ".bmp", ".webp", ".tiff")}
    out[".png16"] = cv2.imencode(".png", img.astype(np.uint16) * 257)[1].tobytes()
    out[".gif"] = (b"GIF89a" + bytes([9, 0, 12, 0, 0x80, 0, 0]) + bytes(6) + b"\x2c" +
                   bytes([0, 0, 0, 0, 1, 0, 1, 0, 0]) + bytes([2, 2, 0x4C, 0x01, 0]) + b"\x3b")
    out[".os2.bmp"] = (b"BM" + (26 + 48).to_bytes(4, "little") + bytes(4) +
                       (26).to_bytes(4, "little") + (12).to_bytes(4, "little") +
                       (4).to_bytes(2, "little") + (4).to_bytes(2, "little") +
                       (1).to_bytes(2, "little") + (24).to_bytes(2, "little") + bytes(48))
    return out


PICTURES = _picture_templates()


@FUZZ
@given(kind=st.sampled_from(sorted(PICTURES)), edits=st.lists(
    st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=6),
    cut=st.one_of(st.none(), st.integers(0, 400)), dims=st.integers(0, 2 ** 32 - 1))
def test_picture_bytes_never_crash(kind, edits, cut, dims, monkeypatch):
    """Picture files with flipped bytes, truncated, or sizes in their headers set to anything:
    decoding raises InputError (one line) or gives uint8 within A2R_MAX_PIXELS."""
    from pathlib import Path
    from a2r_edge.picture import io as pio
    monkeypatch.setenv("A2R_MAX_PIXELS", "4096")
    data = bytearray(PICTURES[kind])
    for at, value in edits:
        if at < len(data):
            data[at] = value
    if kind in (".png", ".png16"):  # the IHDR width, the field a bomb lies in
        data[16:20] = dims.to_bytes(4, "big")
    elif kind == ".gif":
        data[6:8] = (dims & 0xFFFF).to_bytes(2, "little")
    if cut is not None:
        data = data[:cut]
    try:
        img = pio.decode_picture(np.frombuffer(bytes(data), np.uint8), Path("fuzz" + kind))
    except pio.InputError:
        CASES["picture bytes: refused"] += 1
        return
    assert img.dtype == np.uint8 and img.shape[0] * img.shape[1] <= 4096
    CASES["picture bytes: decoded"] += 1


@pytest.fixture(scope="module")
def convert_files(tmp_path_factory):
    import os
    import cv2
    folder = tmp_path_factory.mktemp("convert_fuzz")
    (folder / "in" / "sub").mkdir(parents=True)
    bgra = np.zeros((8, 8, 4), np.uint8)
    cv2.imwrite(str(folder / "in" / "a.png"), bgra)
    cv2.imwrite(str(folder / "in" / "sub" / "b.png"), np.full((9, 8, 3), 90, np.uint8))
    cv2.imwrite(str(folder / "one.png"), np.full((8, 8, 3), 30, np.uint8))
    (folder / "bad.png").write_bytes(PICTURES[".gif"])
    os.mkfifo(folder / "fifo.png")
    return folder


CONVERT_WORDS = ["@in", "@one.png", "@bad.png", "@fifo.png", "@missing.png", "-o", "@out",
                 "@out.jpg", "@one.png", "@out/x.png", "--recursive", "--resume", "--overwrite",
                 "--background", "#00ff00", "red", "--style", "--side-by-side", "-q",
                 "--model", "@model"]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(CONVERT_WORDS), max_size=7))
def test_convert_cli_arguments(engine, convert_files, monkeypatch, words):
    """Any argument list: exit 0 or 2 with one-line errors, never a traceback or a hang (a FIFO
    as input or --style is refused without being read). Run inside the fixture's folder: a bare
    word taken as -o ("-o #00ff00") writes there, not into the checkout."""
    import contextlib
    import io
    from a2r_edge.__main__ import main
    monkeypatch.chdir(convert_files)
    model = str(engine.model.folder)
    argv = ["convert"] + [model if w == "@model" else str(convert_files / w[1:])
                          if w.startswith("@") else w for w in words]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse usage errors
            code = exc.code
    assert code in (0, 2), (argv, code, err.getvalue())
    assert "Traceback" not in err.getvalue()
    CASES[f"convert cli: exit {code}"] += 1


@pytest.fixture(scope="module", autouse=True)
def report_cases(request):
    """After the last test of this file that ran (any selection, any order): how many cases were
    tried, on the terminal (not captured)."""
    CASES.clear()
    yield
    lines = [f"fuzz cases tried: {sum(CASES.values())}"]
    lines += [f"  {k}: {v}" for k, v in sorted(CASES.items())]
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    for line in lines:
        reporter.write_line(line) if reporter else print(line)
