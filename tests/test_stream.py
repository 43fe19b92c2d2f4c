"""Engine.stream / convert_batch pipelined (order, same pictures as convert, errors, early
stop), pipeline.Pipeline, tiling without seams, the result cache."""
import threading
import time

import numpy as np
import pytest

from a2r_edge import Engine
from a2r_edge.picture import tiling
from a2r_edge.runtime.pipeline import Pipeline
from model_packages import make_package


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    return make_package(tmp_path_factory.mktemp("spkg") / "tiny")


@pytest.fixture(scope="module")
def engine(package):
    return Engine(str(package), cache_mb=0)


def picture(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def smooth_picture(shape, seed=0):
    import cv2
    return cv2.GaussianBlur(picture(shape, seed), (0, 0), 2)


# --- pipeline -------------------------------------------------------------------------------------

def test_pipeline_keeps_order_and_overlaps_stages():
    active, peak = [0], [0]
    lock = threading.Lock()

    def slow(x):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.01 * (x % 3))  # uneven times: order must still hold
        with lock:
            active[0] -= 1
        return x

    pipe = Pipeline([("a", slow), ("b", slow), ("c", lambda x: x * 10)], depth=2)
    assert list(pipe.run(range(30))) == [10 * i for i in range(30)]
    assert peak[0] == 2  # stages a and b were busy at the same time
    lat = pipe.latency()
    assert lat["a"]["count"] == 30 and lat["a"]["p95"] >= lat["a"]["median"]


def test_pipeline_reraises_a_stage_error_and_stops_workers():
    def boom(x):
        if x == 5:
            raise RuntimeError("frame 5 is bad")
        return x

    before = threading.active_count()
    pipe = Pipeline([("a", lambda x: x), ("b", boom), ("c", lambda x: x)])
    got = []
    with pytest.raises(RuntimeError, match="frame 5"):
        for y in pipe.run(range(100)):
            got.append(y)
    assert got == [0, 1, 2, 3, 4]
    assert threading.active_count() == before


def test_pipeline_bounded_queues_and_early_stop():
    pulled = []

    def source():
        for i in range(10_000):
            pulled.append(i)
            yield i

    pipe = Pipeline([("a", lambda x: x), ("b", lambda x: x), ("c", lambda x: x)], depth=2)
    gen = pipe.run(source())
    assert next(gen) == 0
    time.sleep(0.2)
    assert len(pulled) <= 2 * 2 + 4  # two queues of 2, one item in each stage, one pulled
    before = threading.active_count()
    gen.close()
    assert threading.active_count() <= before - 2


# --- engine stream ---------------------------------------------------------------------------------

def test_stream_equals_sequential_convert(engine):
    frames = [picture((48, 64, 3), seed=i) for i in range(12)]
    frames += [picture((37, 50, 3), seed=99), picture((37, 50), seed=98),
               picture((20, 24, 4), seed=97), picture((48, 64, 3), seed=96)]
    want = [engine.convert(f) for f in frames]
    got = list(engine.stream(iter(frames)))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    for g, w in zip(engine.convert_batch(frames), want):
        np.testing.assert_array_equal(g, w)
    lat = engine.latency()
    assert set(lat) == {"preprocess", "network", "postprocess"}
    assert lat["network"]["count"] == len(frames)


def test_streams_run_the_throughput_plan(package, monkeypatch):
    """Single pictures run ``plan`` (latency), batches and streams ``stream_plan`` (throughput):
    a scheduler that places the decoder differently for the two gets each plan used where it
    belongs, with one onnxruntime session and one native executor."""
    from a2r_edge import engine as engine_mod
    real = engine_mod.make_plan

    def two_minds(stages, device, backend, unsupported, *, objective="latency", **kw):
        return real(stages, device, "native" if objective == "latency" else "onnxruntime",
                    unsupported, objective=objective, **kw)
    monkeypatch.setattr(engine_mod, "make_plan", two_minds)
    eng = Engine(str(package), cache_mb=0)
    assert eng.plan.backend_of("decode") == "native"
    assert eng.stream_plan.backend_of("decode") == "onnxruntime"
    calls = {"plan": 0, "stream_plan": 0}
    for runners, name in ((eng._forward.runners, "plan"), (eng._stream_runners, "stream_plan")):
        def counted(x, run=runners["decode"], name=name):
            calls[name] += 1
            return run(x)
        runners["decode"] = counted
    frames = [smooth_picture((40, 56, 3), seed=i) for i in range(5)]
    eng.convert(frames[0])  # the first picture also probes the memory estimate
    calls.update(plan=0)
    want = [eng.convert(f) for f in frames]
    assert calls == {"plan": 5, "stream_plan": 0}
    got = list(eng.stream(frames)) + eng.convert_batch(frames)
    assert calls == {"plan": 5, "stream_plan": 10}
    for g, w in zip(got, want + want):  # native vs onnxruntime: within one level
        assert np.abs(g.astype(int) - w).max() <= 1


def test_stream_outputs_are_independent_arrays(engine):
    frames = [picture((32, 32, 3), seed=i) for i in range(6)]
    outs = list(engine.stream(frames))
    for a, b in zip(outs, outs[1:]):
        assert not np.shares_memory(a, b)
    np.testing.assert_array_equal(outs[0], engine.convert(frames[0]))


def test_stream_bad_frame_names_its_index(engine):
    frames = [picture((16, 16, 3)), picture((16, 16, 3)), np.zeros((4, 4), np.float32)]
    with pytest.raises(TypeError, match="frame 2"):
        list(engine.stream(frames))


def test_stream_with_style(engine):
    frames = [picture((32, 32, 3), seed=i) for i in range(3)]
    style = picture((24, 24, 3), seed=50)
    for g, f in zip(engine.stream(frames, style=style), frames):
        np.testing.assert_array_equal(g, engine.convert(f, style=style))


def test_stream_statistics_functions_take_and_return_a_pair(engine):
    """content_stats and colour_stats take one argument, the frame's (mean, std) pair, and
    return such a pair (the identity: convert's result, within a level: the AdaIN kernel
    then takes the statistics given rather than its own). Any other result is an error naming
    the function and the shapes: a wrong channel count failed in a matrix product of
    model/package.py, and None was taken as "the frame's own statistics"."""
    frames = [smooth_picture((32, 32, 3), seed=i) for i in range(2)]
    style = picture((24, 24, 3), seed=50)
    seen = {}

    def identity(name):
        def stats(pair):
            seen[name] = tuple(v.shape for v in pair)
            return pair
        return stats

    for got, frame in zip(engine.stream(frames, style, content_stats=identity("content"),
                                        colour_stats=identity("colour")), frames):
        assert np.abs(got.astype(np.int16) - engine.convert(frame, style=style)).max() <= 1
    channels = seen["content"][0][1]
    assert seen == {"content": ((1, channels),) * 2, "colour": ((3,), (3,))}
    bad = [(lambda pair: None, TypeError, r"must return a \(mean, std\) pair of arrays of "
                                          r"shapes \([^)]*\) and \([^)]*\).* got NoneType"),
           (lambda pair: (pair[0][..., :1], pair[1][..., :1]), ValueError,
            r"its mean has shape \((1, 1|1,)\)"),
           (lambda pair: ("a", "b"), TypeError, "its mean is not numbers: str"),
           (lambda pair: (pair[0] * np.nan, pair[1]), ValueError, "mean that is not finite"),
           (lambda pair: (pair[0], -pair[1]), ValueError, "std <= 0")]
    for name in ("content_stats", "colour_stats"):
        for stats, error, message in bad:
            with pytest.raises(error, match=f"^{name} .*{message}"):
                list(engine.stream(frames, style, **{name: stats}))


# --- tiling ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,tile", [((150, 203, 3), 40), ((96, 97, 3), 64),
                                        ((61, 130, 4), 32), ((80, 80), 48)])
def test_tiled_equals_untiled_within_2_levels(engine, shape, tile):
    img = smooth_picture(shape, seed=sum(shape))
    whole = engine.convert(img)
    tiled = engine.convert(img, tile=tile)
    assert tiled.shape == whole.shape
    assert np.abs(tiled.astype(int) - whole).max() <= 2


def test_tiles_actually_overlap_and_cover(package):
    eng = Engine(str(package), tile=40, cache_mb=0)
    margin = tiling.margin_for(eng.model)
    assert margin >= eng.model.receptive_field and margin % eng.model.stride == 0
    sp = tiling.spans(152, 40, margin, 4)
    assert sp[0][0] == 0 and sp[-1][1] == 152 and len(sp) == 4
    assert all(a[1] == b[0] and a[3] - b[2] >= eng.model.receptive_field
               for a, b in zip(sp, sp[1:]))
    # feather weights of neighbours sum to 1 everywhere
    total = np.zeros(152)
    for s in sp:
        total[s[2]:s[3]] += tiling.feather(s, 152, margin / 2, 1.0, s[3] - s[2])
    np.testing.assert_allclose(total, 1.0, atol=1e-6)
    img = smooth_picture((150, 150, 3), seed=3)
    assert np.abs(eng.convert(img).astype(int) - Engine(str(package)).convert(img)).max() <= 2


def test_tiling_without_margin_would_show_seams(engine, monkeypatch):
    """The check above can fail: with a too-small margin the same comparison breaks."""
    img = smooth_picture((120, 120, 3), seed=7)
    whole = engine.convert(img)
    monkeypatch.setattr(tiling, "margin_for", lambda model: model.stride)
    assert np.abs(engine.convert(img, tile=40).astype(int) - whole).max() > 2


def test_whole_picture_stats_merge_like_one_pass():
    rng = np.random.default_rng(0)
    x = rng.normal(5, 3, (4, 1000))
    parts = []
    for a, b in ((0, 100), (100, 550), (550, 1000)):
        f = x[:, a:b]
        m = f.mean(axis=1)
        parts.append((f.shape[1], m, ((f - m[:, None]) ** 2).sum(axis=1)))
    mean, std = tiling.merge_stats(parts, 1e-5)
    np.testing.assert_allclose(mean[0], x.mean(axis=1), rtol=1e-6)
    np.testing.assert_allclose(std[0], np.sqrt(x.var(axis=1) + 1e-5), rtol=1e-6)


def test_memory_budget_turns_tiling_on(package, monkeypatch):
    eng = Engine(str(package), cache_mb=0)
    bpp = eng.bytes_per_pixel()
    assert 20 < bpp < 100_000
    # 8 MiB: small enough to tile a 400x360 picture, large enough that the 64 px tile floor
    # does not decide the size.
    monkeypatch.setenv("A2R_MEMORY_MB", "8")
    side = eng.tile_size_for(2000, 2000, None)
    assert side is not None and side * side * bpp < (8 << 20)
    assert eng.tile_size_for(400, 360, None) is not None
    assert eng.tile_size_for(16, 16, None) is None
    img = smooth_picture((400, 360, 3), seed=11)
    tiled = eng.convert(img)   # over the 8 MiB budget: tiled
    monkeypatch.delenv("A2R_MEMORY_MB")
    assert np.abs(tiled.astype(int) - eng.convert(img)).max() <= 2


def test_bad_tile(package):
    with pytest.raises(ValueError, match="tile"):
        Engine(str(package), tile=0)
    with pytest.raises(ValueError, match="tile"):
        Engine(str(package)).convert(picture((8, 8, 3)), tile=2.5)


# --- result cache ------------------------------------------------------------------------------------

def test_cache_hits_misses_and_copies(package):
    eng = Engine(str(package), cache_mb=1)
    img = picture((32, 32, 3), seed=1)
    a = eng.convert(img)
    want = a.copy()
    info = eng.cache_info()
    assert (info.hits, info.misses, info.entries) == (0, 1, 1)
    b = eng.convert(img.copy())
    assert eng.cache_info().hits == 1
    np.testing.assert_array_equal(a, b)
    assert not np.shares_memory(a, b)
    b[:] = 0                                   # editing a hit never changes the next hit
    np.testing.assert_array_equal(eng.convert(img), a)
    a[:] = 7                                   # nor does editing the first result
    np.testing.assert_array_equal(eng.convert(img), want)
    # the key covers shape, settings and style
    eng.convert(img.reshape(16, 64, 3))
    eng.convert(img, tile=16)
    eng.convert(img, style=picture((16, 16, 3), seed=3))
    assert eng.cache_info().misses == 4
    other = img.copy()
    other[0, 0, 0] ^= 1
    eng.convert(other)
    assert eng.cache_info().misses == 5


def test_cache_is_bounded_in_bytes_lru(package):
    eng = Engine(str(package), cache_mb=1)
    pics = [picture((256, 256, 3), seed=i) for i in range(6)]   # 192 KiB each: 5 fit in 1 MiB
    for p in pics:
        eng.convert(p)
    info = eng.cache_info()
    assert info.bytes <= info.max_bytes == 1 << 20 and info.entries == 5
    eng.convert(pics[0])                        # evicted (least recently used): a miss
    assert eng.cache_info().hits == 0
    eng.convert(pics[5])
    assert eng.cache_info().hits == 1


def test_cache_in_batch_and_off(package):
    eng = Engine(str(package), cache_mb=4)
    img = picture((24, 24, 3), seed=5)
    outs = eng.convert_batch([img, img, img])
    assert eng.cache_info().misses >= 1 and eng.cache_info().entries == 1
    np.testing.assert_array_equal(outs[0], outs[2])
    off = Engine(str(package), cache_mb=0)
    off.convert(img)
    off.convert(img)
    assert off.cache_info() == (0, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="cache_mb"):
        Engine(str(package), cache_mb=-1)
