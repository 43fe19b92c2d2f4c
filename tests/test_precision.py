"""Precision of the native plans (model/precision.py): the quality guard of the bundled model
at bf16 and int8 against its own fp32 output on the bundled sample; "auto" never runs a stage at
a precision whose output fails the guard (models built to fail it); calibration, fallback and
bad input of NativeExecutor, Engine and the CLI."""
import io
import warnings
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from a2r_edge import ops
from a2r_edge.engine import Engine
from a2r_edge.model import NativeExecutor
from a2r_edge.model import package as pkg
from a2r_edge.model import precision as prec
from a2r_edge.model import reference as ref
from a2r_edge.runtime import cpu
from a2r_edge.runtime.scheduler import Plan
from onnx_graphs import random_graph, small_image_net
from tolerances import GUARD_PSNR_DB

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "astronaut_toon.png"


def one_conv_model(w, b=None):
    """x (1, C, H, W) -> Conv(w, b, pad k//2) as an ONNX model (bytes)."""
    o, c, k, _ = w.shape
    inits = [numpy_helper.from_array(w.astype(np.float32), "w")]
    ins = ["x", "w"]
    if b is not None:
        inits.append(numpy_helper.from_array(b.astype(np.float32), "b"))
        ins.append("b")
    node = helper.make_node("Conv", ins, ["y"], kernel_shape=[k, k], pads=[k // 2] * 4)
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, "H", "W"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, o, "H", "W"])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    buf = io.BytesIO()
    onnx.save(m, buf)
    return buf.getvalue()


def test_guard_table_matches_the_policy():
    """auto's guard is the one the tests hold the model to; the CLI offers the choices."""
    from a2r_edge.apps.convert import PRECISION_CHOICES
    assert prec.GUARD_PSNR_DB == GUARD_PSNR_DB
    assert PRECISION_CHOICES == prec.CHOICES


@pytest.fixture(scope="module")
def sample():
    img = cv2.imread(str(SAMPLE), cv2.IMREAD_COLOR)
    assert img is not None, SAMPLE
    return img


@pytest.fixture(scope="module")
def fp32_result(sample):
    return Engine(cache_mb=0).convert(sample)


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_bundled_model_keeps_the_guard(sample, fp32_result, precision):
    if precision not in prec.runnable():
        pytest.skip(f"{precision} does not run at {cpu.isa()}")
    engine = Engine(cache_mb=0, precision=precision, calibration=[sample])
    assert {e["precision"] for e in engine.precisions.values()} == {precision}
    got = engine.convert(sample)
    db = prec.psnr(got, fp32_result)
    assert db >= GUARD_PSNR_DB[precision], db
    assert np.any(got != fp32_result)  # really a different arithmetic
    assert f"convolutions at {precision}: asked for" in engine.plan.describe()


def test_bundled_model_auto(sample, fp32_result):
    # the plan's own choice of backend: at a reduced precision it keeps the stages native
    engine = Engine(cache_mb=0, precision="auto", calibration=[sample])
    assert set(engine.precisions) == {"encode", "decode"}
    text = engine.plan.describe()
    for stage, e in engine.precisions.items():
        assert e["precision"] in ("fp32", "bf16", "int8")
        assert f"{stage:<12} convolutions at {e['precision']}: fastest passing" in text
        for p, db in e["psnr"].items():
            assert (db >= GUARD_PSNR_DB[p]) or p != e["precision"]
    got = engine.convert(sample)
    assert prec.psnr(got, fp32_result) >= min(GUARD_PSNR_DB.values())


def test_each_calibration_set_has_its_own_stored_choices(sample):
    """The stored choices are named by the calibration pictures too: a second Engine with
    other pictures calibrates on them (before, it reused the first one's ranges), and the same
    pictures again reuse them."""
    if "int8" not in prec.runnable():
        pytest.skip(f"int8 does not run at {cpu.isa()}")
    small = cv2.resize(sample, (128, 128), interpolation=cv2.INTER_AREA)
    dark = (small * 0.2).astype(np.uint8)
    ranges = [Engine(cache_mb=0, precision="int8", calibration=[p]).precisions["decode"]
              ["act_ranges"] for p in (small, dark, small)]
    assert ranges[0] != ranges[1]
    assert ranges[0] == ranges[2]


def test_each_pixel_convention_has_its_own_stored_choices(sample, tmp_path):
    """The same plain ONNX file fed [0, 1] and then [-1, 1] (convert --input-range): the
    second calibrates anew (it reused the first one's int8 ranges: 30 dB from fp32 where its
    own give 58, a user's trial) and a third Engine at [0, 1] again reuses the first's."""
    if "int8" not in prec.runnable():
        pytest.skip(f"int8 does not run at {cpu.isa()}")
    from a2r_edge.model import conventions, package as pkg
    path = tmp_path / "net.onnx"
    onnx.save(small_image_net(c1=8, c2=8, blocks=1), str(path))
    small = cv2.resize(sample, (64, 64), interpolation=cv2.INTER_AREA)
    models = [pkg.wrap_onnx(path, conventions.from_fields({"input_range": r}, None, None))
              for r in ("0,1", "-1,1", "0,1")]
    ranges = [Engine(m, cache_mb=0, precision="int8", calibration=[small]).precisions[
        "network"]["act_ranges"] for m in models]
    assert ranges[0] != ranges[1] and ranges[0] == ranges[2]


def test_an_engine_with_tiles_calibrates_on_whole_pictures(sample, monkeypatch):
    """Calibration runs each picture whole whatever the Engine's tile: an Engine(tile=256) got
    no int8 ranges at all (its tiles ran graph pieces the recording never saw; "auto" then
    failed on an empty list), and its ranges now are the untiled Engine's."""
    if "int8" not in prec.runnable():
        pytest.skip(f"int8 does not run at {cpu.isa()}")
    monkeypatch.setattr(prec, "load", lambda path, precision: {})   # calibrate, not reuse
    ranges = [{stage: e["act_ranges"] for stage, e in Engine(
        cache_mb=0, precision="int8", calibration=[sample], tile=tile).precisions.items()}
        for tile in (256, None)]
    assert ranges[0]["encode"] and ranges[0]["decode"]
    assert ranges[0] == ranges[1]


def test_scaled_within_shrinks_by_the_pixels_and_keeps_a_floor():
    pics = [np.zeros((512, 512, 3), np.uint8), np.zeros((256, 200, 3), np.uint8)]
    budget = prec.CALIBRATION_CONVERT_S
    assert [p.shape for p in prec.scaled_within(pics, budget / 2)] == [p.shape for p in pics]
    assert [p.shape for p in prec.scaled_within(pics, 4 * budget)] == [(256, 256, 3),
                                                                      (128, 100, 3)]
    assert prec.scaled_within(pics, 10_000 * budget)[1].shape == (64, 64, 3)


@pytest.mark.parametrize("given", [False, True], ids=["default pictures", "the user's"])
def test_a_slow_model_calibrates_on_the_default_pictures_scaled_down(sample, monkeypatch, given):
    """A model converting the first default picture slower than CALIBRATION_CONVERT_S is
    calibrated and judged on the default pictures scaled to fit it (here any model is that
    slow); pictures the user gave are taken as they are."""
    if "int8" not in prec.runnable():
        pytest.skip(f"int8 does not run at {cpu.isa()}")
    monkeypatch.setattr(prec, "load", lambda path, precision: {})
    monkeypatch.setattr(prec, "CALIBRATION_CONVERT_S", 1e-9)
    seen = {}
    plan = prec.plan_stages

    def plan_stages(executors, stage_inputs, *a, **k):
        seen.update({n: [x.shape[2:] for x in xs] for n, xs in stage_inputs.items()})
        return plan(executors, stage_inputs, *a, **k)

    monkeypatch.setattr(prec, "plan_stages", plan_stages)
    Engine(cache_mb=0, precision="int8", calibration=[sample] if given else None)
    largest = max(max(hw) for hw in seen["encode"])   # the picture, with its border margins
    assert largest >= 512 if given else largest < 128


def test_a_calibration_picture_too_large_to_run_whole_is_a_value_error(sample, monkeypatch):
    """At A2R_MEMORY_MB=32 the 512x512 sample is converted in tiles: its ranges were taken from
    nothing but the Engine's 96x96 memory probe, silently; now a ValueError says why."""
    if "int8" not in prec.runnable():
        pytest.skip(f"int8 does not run at {cpu.isa()}")
    monkeypatch.setattr(prec, "load", lambda path, precision: {})
    monkeypatch.setenv("A2R_MEMORY_MB", "32")
    with pytest.raises(ValueError, match="calibration picture 512x512 needs more than "
                                         "A2R_MEMORY_MB=32 in one piece"):
        Engine(cache_mb=0, precision="int8", calibration=[sample])


@pytest.mark.parametrize("calibration", ["pictures.png", [], np.zeros((8, 8, 3), np.uint8)],
                         ids=["a string", "empty", "one array"])
@pytest.mark.parametrize("precision", ["fp32", "auto"])
def test_calibration_must_be_a_list_of_pictures(calibration, precision):
    with pytest.raises(TypeError, match="calibration must be a non-empty list of pictures"):
        Engine(cache_mb=0, precision=precision, calibration=calibration)


def test_int8_ranges_from_the_sample_hold_on_pictures_unlike_it(sample):
    """The int8 activation ranges come from the calibration picture; pictures far from it
    (dark, washed out, noise, thin lines on white) must not clip or band: 40 dB PSNR over 8-bit
    levels (peak 255) against fp32. (The guard's own PSNR takes the picture's range as the peak,
    which a dark picture's small range makes stricter: about 38 dB on "dark" at about one level
    of RMS error; docs/architecture.md, "The way of one picture", step 4.)"""
    if "int8" not in prec.runnable():
        pytest.skip(f"int8 does not run at {cpu.isa()}")
    rng = np.random.default_rng(3)
    small = cv2.resize(sample, (256, 256), interpolation=cv2.INTER_AREA)
    lines = 255 - cv2.GaussianBlur(((rng.random((200, 264)) > 0.97) * 255).astype(np.uint8),
                                   (0, 0), 0.8)
    pictures = {"dark": (small * 0.25).astype(np.uint8),
                "washed out": np.clip(small * 0.5 + 140, 0, 255).astype(np.uint8),
                "noise": rng.integers(0, 256, (192, 240, 3), dtype=np.uint8),
                "lines": np.repeat(lines[..., None], 3, axis=2)}
    fp32, int8 = Engine(cache_mb=0), Engine(cache_mb=0, precision="int8", calibration=[sample])
    for name, img in pictures.items():
        got, want = int8.convert(img), fp32.convert(img)
        err = got.astype(np.float64) - want
        rms = float(np.sqrt(np.mean(err ** 2)))
        db = 20 * np.log10(255.0 / max(rms, 1e-6))
        print(f"{name}: RMS {rms:.2f} levels, {db:.1f} dB over 8-bit levels, "
              f"{prec.psnr(got, want):.1f} dB by the guard's measure")   # (with -s)
        assert db >= GUARD_PSNR_DB["int8"], (name, db)


@pytest.mark.parametrize("seed", range(4))
def test_random_architectures_keep_the_guard(native, seed):
    """Random graphs of the executor's op set (convolutions, norms, residuals, resizes...) at
    bf16 and int8 (ranges calibrated on one input, judged on another) against their fp32."""
    if cpu.isa() == "baseline":
        pytest.skip("bf16/int8 need AVX2")
    model = random_graph(seed)
    c = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    rng = np.random.default_rng(seed)
    calib, x = (rng.standard_normal((1, c, 24, 29)).astype(np.float32) for _ in range(2))
    ex = NativeExecutor(model.SerializeToString())
    want = ex.run(x).copy()
    ranges = prec.calibrate_ranges(ex, [calib, x])
    for p in ("bf16", "int8"):
        ex.set_precision(p, ranges)
        assert prec.psnr(ex.run(x), want) >= GUARD_PSNR_DB[p], (seed, p)


def x_where(rng, c, h, w, offset=0.0, zero_first=False):
    x = rng.standard_normal((1, c, h, w)).astype(np.float32) + np.float32(offset)
    if zero_first:
        x[:, 0] = 0
    return x


def test_auto_never_runs_a_precision_that_fails_the_guard(rng):
    """int8 fails (each output channel has one large weight on a silent input channel: the
    per-channel int8 scale rounds the small weights that carry the signal to zero); bf16
    keeps them (8 significant bits each), so auto may take bf16 or fp32 but never int8."""
    if "int8" not in prec.runnable():
        pytest.skip("int8 does not run here")
    w = (rng.standard_normal((8, 8, 3, 3)) * 1e-3).astype(np.float32)
    w[:, 0, 1, 1] = 1.0
    ex = NativeExecutor(one_conv_model(w), precision="auto")
    x = x_where(rng, 8, 32, 32, zero_first=True)
    ex.run(x)
    c = ex.choice
    assert c["psnr"]["int8"] < GUARD_PSNR_DB["int8"], c
    if "bf16" in c["psnr"]:   # not when its one conv runs faster at fp32 (AVX2: widened)
        assert c["psnr"]["bf16"] >= GUARD_PSNR_DB["bf16"], c
    else:
        assert "bf16: every convolution faster at fp32" in c["reason"], c
    assert c["precision"] != "int8" and ex.precision == c["precision"]
    assert "failed: int8" in ex.describe()


def test_auto_falls_back_to_fp32_when_everything_fails(rng):
    """A large offset under a small signal: bf16 (spacing 4 near 1000) and int8 (range 0..1004)
    both lose the signal; auto keeps fp32. (1x1: no zero-padded border to widen the range.)"""
    w = (rng.standard_normal((1, 4, 1, 1)) * 0.1).astype(np.float32)  # one output: its range
    ex = NativeExecutor(one_conv_model(w))
    x = (1000 + 0.05 * rng.standard_normal((1, 4, 24, 24))).astype(np.float32)
    c = ex.calibrate([x])
    assert c["precision"] == "fp32", c
    assert all(db < GUARD_PSNR_DB[p] for p, db in c["psnr"].items()), c
    assert ex.precision == "fp32"


def two_conv_model(w1, w2, expose_h=False):
    """x -> Conv(w1) -> Conv(w2), 3x3 pad 1, no bias, as an ONNX model (bytes); expose_h: the
    tensor h between them is a graph output too."""
    c = w1.shape[1]
    inits = [numpy_helper.from_array(w.astype(np.float32), n) for w, n in ((w1, "w1"), (w2, "w2"))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"], name="first", kernel_shape=[3, 3],
                              pads=[1] * 4),
             helper.make_node("Conv", ["h", "w2"], ["y"], name="second", kernel_shape=[3, 3],
                              pads=[1] * 4)]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, "H", "W"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         [1, w2.shape[0], "H", "W"])]
                          + ([helper.make_tensor_value_info("h", TensorProto.FLOAT,
                                                            [1, w1.shape[0], "H", "W"])]
                             if expose_h else []), inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def conv_shuffle_conv_model(w1, w2, r, mode):
    """x -> Conv(w1) -> DepthToSpace(r, mode) -> Conv(w2), 3x3 pad 1 (the bundled decoder's
    up-sampling), as an ONNX model (bytes)."""
    c = w1.shape[1]
    inits = [numpy_helper.from_array(w, n) for w, n in ((w1, "w1"), (w2, "w2"))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"], name="first", kernel_shape=[3, 3],
                              pads=[1] * 4),
             helper.make_node("DepthToSpace", ["h"], ["s"], blocksize=r, mode=mode),
             helper.make_node("Conv", ["s", "w2"], ["y"], name="second", kernel_shape=[3, 3],
                              pads=[1] * 4)]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, "H", "W"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         [1, w2.shape[0], "H2", "W2"])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


@pytest.mark.parametrize("mode", ["CRD", "DCR"])
def test_int8_u8_through_the_pixel_shuffle(rng, mode):
    """Conv -> DepthToSpace CRD -> Conv at int8: both tensors stay u8 (the byte shuffle moves
    the levels) and the output is bit for bit that of the same two int8 layers with floats
    between them (ops.Conv2d, the shuffle in numpy). DCR too: the plan reorders the first
    Conv's channels and shuffles CRD (rewrite.py)."""
    if "int8" not in prec.runnable():
        pytest.skip("int8 does not run here")
    w1 = (rng.standard_normal((24, 6, 3, 3)) / 8).astype(np.float32)
    w2 = (rng.standard_normal((5, 6, 3, 3)) / 8).astype(np.float32)
    calib, x = (rng.standard_normal((1, 6, 13, 17)).astype(np.float32) for _ in range(2))
    ex = NativeExecutor(conv_shuffle_conv_model(w1, w2, 2, mode))
    ex.set_precision("int8", prec.calibrate_ranges(ex, [calib]))
    got = ex.run(x).copy()
    text = ex.describe()
    # the same arithmetic by hand, floats between the layers
    (lo1, hi1), (lo2, hi2) = ex.act_ranges["first"], ex.act_ranges["second"]
    h = ops.Conv2d(w1, None, pad=1, precision="int8", act_range=(lo1, hi1))(x)
    s = ref.pixel_shuffle(h, 2) if mode == "CRD" else \
        h.reshape(1, 2, 2, 6, 13, 17).transpose(0, 3, 4, 1, 5, 2).reshape(1, 6, 26, 34)
    want = ops.Conv2d(w2, None, pad=1, precision="int8", act_range=(lo2, hi2))(
        np.ascontiguousarray(s))
    np.testing.assert_array_equal(got, want)
    assert "2 kept as u8 between int8 convolutions" in text


def test_int8_convs_keep_u8_between_them(native, rng):
    """Conv -> Conv at int8: the plan keeps the tensor between them as u8 levels on the second
    conv's grid (a quarter of its arena bytes), and the output is bit for bit that of the plan
    where the tensor must stay float32 (also a graph output)."""
    if "int8" not in prec.runnable():
        pytest.skip("int8 does not run here")
    w1 = (rng.standard_normal((16, 8, 3, 3)) / 8).astype(np.float32)
    w2 = (rng.standard_normal((12, 16, 3, 3)) / 12).astype(np.float32)
    calib, x = (rng.standard_normal((1, 8, 21, 34)).astype(np.float32) for _ in range(2))
    linked, exposed = NativeExecutor(two_conv_model(w1, w2)), \
        NativeExecutor(two_conv_model(w1, w2, expose_h=True))
    ranges = prec.calibrate_ranges(linked, [calib])
    for ex in (linked, exposed):
        ex.set_precision("int8", ranges)
    got = linked.run(x)
    np.testing.assert_array_equal(got, exposed.run_many({"x": x})["y"])
    assert "1 kept as u8 between int8 convolutions" in linked.describe()
    assert "'first'" in next(ln for ln in linked.describe().splitlines() if "->u8" in ln)
    assert "0 kept as u8" in exposed.describe()
    h_floats = 16 * x.shape[2] * x.shape[3]
    assert linked.arena_bytes() < 4 * (x.size + h_floats / 2)   # x and a quarter of h


@pytest.fixture
def one_failing_conv(rng):
    """(model bytes, input): the first conv fails int8 (the silent-channel weights of the test
    above), the second does not."""
    if "int8" not in prec.runnable():
        pytest.skip("int8 does not run here")
    w1 = (rng.standard_normal((8, 8, 3, 3)) * 1e-3).astype(np.float32)
    w1[:, 0, 1, 1] = 1.0
    w2 = rng.standard_normal((4, 8, 3, 3)).astype(np.float32)
    x = x_where(rng, 8, 32, 32, zero_first=True)
    return two_conv_model(w1, w2), x


def test_per_layer_fallback_keeps_only_the_failing_conv(one_failing_conv):
    """The first conv fails int8 (the silent-channel weights of the test above), the second
    does not: the int8 plan keeps the first at fp32, runs the second at int8, passes the guard
    and says so."""
    model, x = one_failing_conv
    ex = NativeExecutor(model)
    want = ex.run(x).copy()
    entry = prec.plan(ex, [x], "int8")
    assert entry["fp32_nodes"]["int8"] == ["first"] and ex.fp32_nodes == {"first"}
    assert prec.psnr(ex.run(x), want) >= GUARD_PSNR_DB["int8"] + prec.FALLBACK_MARGIN_DB
    assert "convolutions at int8 (1 of 2 at fp32: below the per-layer check)" in ex.describe()
    assert "1 of 2 convolutions kept at fp32" in entry["reason"]
    assert "0 kept as u8" in ex.describe()   # the fp32 conv writes float32 for the int8 one
    ex.set_precision("int8")  # no fallback: the first conv at int8 loses the signal
    assert prec.psnr(ex.run(x), want) < GUARD_PSNR_DB["int8"]


def test_stored_fallback_is_reused(one_failing_conv, tmp_path, monkeypatch):
    """A stored plan (precision.store / load, JSON) brings its fallback back without scoring
    or judging anything again."""
    model, x = one_failing_conv
    ex = NativeExecutor(model)
    path = str(tmp_path / "choices.json")
    prec.store(path, "int8", {"model": prec.plan(ex, [x], "int8")})
    again = NativeExecutor(model)
    monkeypatch.setattr(prec, "fallback_nodes", lambda *a: pytest.fail("scored again"))
    entry = prec.plan_stages({"model": again}, {"model": [x]},
                             lambda: pytest.fail("judged again"), "int8",
                             prec.load(path, "int8"))["model"]
    assert entry["fp32_nodes"]["int8"] == ["first"] and again.fp32_nodes == {"first"}


@pytest.fixture
def two_convs(rng):
    """(executor, input, int8 ranges) of two 3x3 convs that keep the int8 guard."""
    if "int8" not in prec.runnable():
        pytest.skip("int8 does not run here")
    w1 = (rng.standard_normal((16, 8, 3, 3)) / 8).astype(np.float32)
    w2 = (rng.standard_normal((12, 16, 3, 3)) / 12).astype(np.float32)
    x = rng.standard_normal((1, 8, 21, 34)).astype(np.float32)
    ex = NativeExecutor(two_conv_model(w1, w2))
    return ex, x, prec.calibrate_ranges(ex, [x])


def test_input_domain_widens_only_the_ranges_of_the_input_readers(two_convs):
    """A stage input's known value domain (the normalised picture's) covers the int8 range of
    the convolution reading it, not the others', so an input past the calibration's range (a
    white page where the sample had none) is not clipped there."""
    ex, x, ranges = two_convs
    assert ex.input_readers == {"first"}
    lo, hi = ranges["first"]
    domain = (2.5 * lo, 2.5 * hi)
    entry = prec.plan_stages({"model": ex}, {"model": [x]}, lambda: [ex.run(x).copy()],
                             "int8", input_domains={"model": domain})["model"]
    assert entry["act_ranges"]["first"] == [domain[0], domain[1]]
    assert entry["act_ranges"]["second"] == list(ranges["second"])
    assert ex.act_ranges["first"] == domain
    bright = x * 2.5   # past the calibrated range, within the domain
    ex.set_precision("fp32")
    want = ex.run(bright).copy()
    db = {}
    for name, first in (("calibrated", ranges["first"]), ("widened", domain)):
        ex.set_precision("int8", dict(ranges, first=first), ["second"])   # the first alone
        db[name] = prec.psnr(ex.run(bright), want)
    print(f"first conv at int8 on an input 2.5x past its calibration: {db}")   # (with -s)
    assert db["widened"] >= GUARD_PSNR_DB["int8"] and db["calibrated"] < db["widened"] - 6, db


def test_conv_faster_at_fp32_stays_there_when_the_plan_gains(two_convs, monkeypatch):
    """auto's speed rule (precision.faster_at_fp32): a conv whose step is faster at fp32 than
    at int8 stays at fp32 if the whole plan then runs faster, not otherwise. Which conv is
    faster is this machine's business, so the timings are stubbed: the rule is what is tested."""
    ex, x, ranges = two_convs
    monkeypatch.setattr(prec, "_conv_step_times",
                        lambda ex, x, convs: {n: 2.0 if n == "second" else 0.5 for n in convs})
    fp32_times = {"first": 1.0, "second": 1.0}
    for with_it, kept in ((5.0, ["second"]), (20.0, [])):   # the plan without it takes 10
        monkeypatch.setattr(prec, "_fastest_ms", lambda run, x, rounds=3, t=with_it:
                            t if run.__self__.fp32_nodes else 10.0)
        ex.set_precision("int8", ranges)
        assert prec.faster_at_fp32(ex, "int8", ranges, [], fp32_times, x) == kept
        assert ex.fp32_nodes == set(kept) and ex.precision == "int8"
    ex.set_precision("int8", ranges, [], ["second"])
    ex.run(x)
    assert "convolutions at int8 (1 of 2 at fp32: faster at fp32 here)" in ex.describe()


def test_conv_that_breaks_a_u8_link_is_tried_back_at_int8(two_convs, monkeypatch):
    """Two convs each faster at fp32 by its own step, where the first at fp32 costs the second
    its u8 input: the rule tries each conv at a link's end back at int8 and keeps the fastest
    plan it saw (stubbed timings, as above)."""
    ex, x, ranges = two_convs
    ex.set_precision("int8", ranges)
    ex.run(x)
    assert prec._u8_ends(ex, x) == {"first", "second"}   # the link between them
    monkeypatch.setattr(prec, "_conv_step_times", lambda ex, x, convs: {n: 2.0 for n in convs})
    whole = {(): 10.0, ("first", "second"): 8.0, ("second",): 6.0, ("first",): 9.0}
    tried = []

    def timed(run, x, rounds=3):
        key = tuple(sorted(run.__self__.fp32_nodes))
        tried.append(key)
        return whole[key]
    monkeypatch.setattr(prec, "_fastest_ms", timed)
    kept = prec.faster_at_fp32(ex, "int8", ranges, [], {"first": 1.0, "second": 1.0}, x)
    assert kept == ["second"] and ex.fp32_nodes == {"second"}
    assert tried[:2] == [(), ("first", "second")] and ("second",) in tried[2:]
    assert () not in tried[2:]   # the plan with neither at fp32 is timed once


def test_auto_skips_a_precision_slower_at_every_conv(two_convs, monkeypatch):
    """When every conv of a stage is faster at fp32, auto does not offer that precision (it
    would be fp32 by another name) and says why."""
    ex, x, ranges = two_convs

    def lowp_slower(run, x, rounds=3):   # each conv at int8/bf16 costs 1 more
        e = run.__self__
        return 1.0 if e.precision == "fp32" else 1.0 + len(set(ranges) - e.fp32_nodes)

    monkeypatch.setattr(prec, "_fastest_ms", lowp_slower)
    monkeypatch.setattr(prec, "_conv_step_times", lambda e, x, convs: {
        n: 1.0 if e.precision == "fp32" or n in e.fp32_nodes else 2.0 for n in convs})
    entry = prec.plan(ex, [x], "auto")
    assert entry["precision"] == "fp32" and ex.precision == "fp32"
    for p in prec.runnable()[1:]:
        assert f"{p}: every convolution faster at fp32" in entry["reason"]
        assert p not in entry["ms"]


def test_stored_auto_choice_says_so_once(rng, tmp_path):
    """An auto choice read back from the store (and stored again, as the Engine does on every
    start) keeps the reason it was judged with, marked stored once in the plan's text."""
    if "int8" not in prec.runnable():
        pytest.skip("int8 does not run here")
    w = (rng.standard_normal((8, 3, 3, 3)) / 5).astype(np.float32)
    x = rng.standard_normal((1, 3, 24, 24)).astype(np.float32)
    path = str(tmp_path / "choices.json")
    first = None
    for _ in range(3):
        ex = NativeExecutor(one_conv_model(w))
        chosen = prec.plan_stages({"model": ex}, {"model": [x]}, lambda: [ex.run(x).copy()],
                                  "auto", prec.load(path, "auto"))
        prec.store(path, "auto", chosen)
        first = first or chosen["model"]["reason"]
        assert chosen["model"]["reason"] == first
    assert chosen["model"]["stored"]
    text = Plan("cpu", 1, "avx2", ()).with_precisions(chosen).precisions
    assert text == (("model", chosen["model"]["precision"], first + " [stored]"),)


def test_calibrated_ranges_and_probing(rng):
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    ex = NativeExecutor(one_conv_model(w))
    a = rng.uniform(-2, 3, (1, 3, 16, 16)).astype(np.float32)
    b = rng.uniform(-5, 1, (1, 3, 16, 16)).astype(np.float32)
    ranges = prec.calibrate_ranges(ex, [a, b])
    (lo, hi), = ranges.values()
    assert lo == min(a.min(), b.min()) and hi == max(a.max(), b.max())
    assert ex.precision == "fp32"  # probing leaves the executor as it was
    ex.set_precision("int8", ranges)
    assert ex.act_ranges == ranges and "convolutions at int8" in ex.describe((1, 3, 16, 16))


def test_a_sibling_runs_at_the_executors_precision(rng):
    """NativeExecutor.sibling (the graph pieces tiles run): the executor's precision, int8
    ranges and fp32 nodes as they are when it is made; refused while "auto" has not chosen."""
    if "int8" not in prec.runnable():
        pytest.skip(f"int8 does not run at {cpu.isa()}")
    model = one_conv_model(rng.standard_normal((8, 3, 3, 3)).astype(np.float32))
    x = rng.uniform(-1, 1, (1, 3, 20, 20)).astype(np.float32)
    ex = NativeExecutor(model)
    fp32 = ex.run(x).copy()
    ex.set_precision("int8", {"Conv_0": (-0.5, 0.5)})   # clips: far from fp32
    int8 = ex.run(x).copy()
    assert np.abs(int8 - fp32).max() > 0.1
    np.testing.assert_array_equal(ex.sibling(model).run(x), int8)
    ex.set_precision("int8", fp32_nodes=["Conv_0"])
    np.testing.assert_array_equal(ex.sibling(model).run(x), fp32)
    with pytest.raises(ValueError, match="'auto' is chosen on the first run"):
        NativeExecutor(model, precision="auto").sibling(model)


def test_bad_precision_and_fallback(rng, monkeypatch):
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    model = one_conv_model(w)
    for bad in ["fp16", "FP32", None, 8]:
        with pytest.raises(ValueError, match=r"precision must be one of \('fp32', 'bf16', "
                                             r"'int8', 'auto'\)"):
            NativeExecutor(model, precision=bad)
    with pytest.raises(ValueError, match="precision must be one of"):
        Engine(precision="half")
    with pytest.raises(ValueError, match="set_precision takes"):
        NativeExecutor(model).set_precision("auto")
    with cpu.using_isa("baseline"):  # bf16/int8 are not run at the baseline level
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ex = NativeExecutor(model, precision="int8")
        assert ex.precision == "fp32"
        assert len(caught) == 1 and "running fp32" in str(caught[0].message)
        with pytest.raises(ValueError, match="strict=True refuses"):
            NativeExecutor(model, precision="bf16", strict=True)


def test_engine_onnxruntime_backend_refuses_or_warns(caplog):
    if "bf16" not in prec.runnable():   # the refusal then names the kernel level instead
        pytest.skip("bf16 and int8 do not run here")
    with pytest.raises(ValueError, match="needs the native backend"):
        Engine(backend="onnxruntime", precision="bf16", strict=True, cache_mb=0)
    with caplog.at_level("WARNING", logger="a2r_edge"):
        engine = Engine(backend="onnxruntime", precision="int8", cache_mb=0)
    assert engine.precisions == {}
    assert sum("running fp32" in r.getMessage() for r in caplog.records) == 1
    caplog.clear()
    with caplog.at_level("WARNING", logger="a2r_edge"):   # auto: nothing to choose, no warning
        assert Engine(backend="onnxruntime", precision="auto", strict=True,
                      cache_mb=0).precisions == {}
    assert not caplog.records


def test_engine_keeps_reduced_precision_stages_native(monkeypatch):
    """With backend None a reduced precision keeps the ONNX stages on the native backend, even
    where the figures (here a stand-in for a calibration run that measured onnxruntime faster
    at fp32) would have put them on onnxruntime: strict bf16 then runs, not refuses."""
    if "bf16" not in prec.runnable():
        pytest.skip("bf16 does not run here")
    from a2r_edge import engine as engine_mod
    real = engine_mod.make_plan
    stages = pkg.resolve(None).stages   # the bundled model's
    onnxruntime_faster = {"schema": "a2r_edge.profile/1", "source": "measured", "stages": [
        {"stage": s.name, "kind": s.kind, "backend": b, "device": "cpu", "size": 512, "ms": ms}
        for s in stages for b, ms in (("native", 50.0), ("onnxruntime", 10.0))
        if s.kind == "onnx" or b == "native"]}
    monkeypatch.setattr(engine_mod, "make_plan",
                        lambda *a, **kw: real(*a, profile=onnxruntime_faster, **kw))
    assert Engine(cache_mb=0).plan.backend_of("encode") == "onnxruntime"
    engine = Engine(precision="bf16", strict=True, cache_mb=0)
    assert {engine.plan.backend_of(s) for s in ("encode", "decode")} == {"native"}
    assert set(engine.precisions) == {"encode", "decode"}
    assert "precision bf16, which onnxruntime's CPU backend does not run" in \
        engine.plan.describe()


# --- the generator families of tests/fixtures/generators (seeded random weights) -------------

GENERATORS = {"cyclegan_resnet": (32, 48), "pix2pix_unet": (64, 32), "ugatit_light": (32, 40),
              "animeganv2": (32, 48), "animeganv2_dynamo": (32, 48), "rrdb_x4": (16, 24),
              "realcugan_unet": (32, 24), "ugatit_full": (24, 24)}
# Planned on one crop of the sample (ranges from it; the per-layer fallback judged on it and its
# mirror image), judged on another. Before the fallback these fell short of the guard at
# avx512_bf16: ugatit_full at bf16 41.3 dB; cyclegan 38.1, ugatit_light 35.7, animeganv2 25.9,
# animeganv2_dynamo 31.6, ugatit_full 27.4 dB at int8 (random-weight networks with instance
# norms amplify the rounding, and the second crop lost up to 7 dB against the first).


def sample_crop(h, w, seed):
    """The bundled sample, a different crop per seed, shrunk to h x w, as the model's input."""
    img = cv2.imread(str(SAMPLE), cv2.IMREAD_COLOR)
    crop = img[37 * seed:37 * seed + 4 * h, 50:50 + 4 * w]
    small = cv2.resize(crop, (w, h), interpolation=cv2.INTER_AREA)
    return np.ascontiguousarray((small[:, :, ::-1].transpose(2, 0, 1)[None] / 127.5 - 1)
                                .astype(np.float32))


def generator(name):
    path = Path(__file__).resolve().parent / "fixtures" / "generators" / f"{name}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nodes placed on onnxruntime
        return NativeExecutor(str(path))


@pytest.mark.parametrize("precision", ["bf16", "int8"])
@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_generator_families_keep_the_guard(name, precision):
    if precision not in prec.runnable():
        pytest.skip(f"{precision} does not run at {cpu.isa()}")
    h, w = GENERATORS[name]
    ex = generator(name)
    calib, x = sample_crop(h, w, 1), sample_crop(h, w, 2)
    want = ex.run(x).copy()
    entry = prec.plan(ex, [calib], precision)
    fallback = entry["fp32_nodes"][precision]
    assert len(fallback) < len(entry["act_ranges"])  # some convolutions really at precision
    if fallback:
        assert f"{len(fallback)} of {len(entry['act_ranges'])} at fp32" in ex.describe(x.shape)
    assert prec.psnr(ex.run(x), want) >= GUARD_PSNR_DB[precision]


@pytest.mark.parametrize("name", ["animeganv2", "ugatit_full", "rrdb_x4"])
def test_auto_on_generator_families_keeps_the_guard(name):
    """Where a precision fails the guard on the calibration pictures auto does not take it."""
    h, w = GENERATORS[name]
    ex = generator(name)
    pics = [sample_crop(h, w, 1), sample_crop(h, w, 2)]
    c = ex.calibrate(pics)
    for p, db in c["psnr"].items():
        if db < GUARD_PSNR_DB[p]:
            assert c["precision"] != p, c
    assert ex.precision == c["precision"]


def test_stored_choices_are_kept_per_kernels_build(monkeypatch):
    """A new kernels build (faster or slower paths) does not reuse what auto timed with the old
    one: the store's path names the build, beside the machine, ISA level and thread count."""
    here = prec.store_path("0123456789abcdef0123")
    assert cpu.build_id() in here and cpu.isa() in here
    monkeypatch.setattr(cpu, "build_id", lambda: "another-build")
    assert prec.store_path("0123456789abcdef0123") != here
