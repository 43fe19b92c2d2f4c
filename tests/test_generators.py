"""The six generator families as torch.onnx.export writes them (tests/fixtures/generators, made by
tools/export_fixtures.py) and a Keras generator as tf2onnx writes it (tools/export_keras_fixture.py)
run in the native executor and match onnxruntime to 1e-4 of the output range, at an even and an
odd size; nodes the native side cannot run go to onnxruntime inside the plan, and the plan says
which and why."""
from __future__ import annotations

import dataclasses
import os
import warnings

import numpy as np
import onnxruntime as ort
import pytest

from a2r_edge.model import NativeExecutor, UnsupportedOpError
from onnx_graphs import Builder

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "generators")
# name -> (even size, odd size); ugatit_full was exported at a fixed 24 x 24
SIZES = {
    "cyclegan_resnet": ((32, 48), (37, 29)),
    "pix2pix_unet": ((64, 32), (37, 45)),
    "ugatit_light": ((32, 40), (33, 27)),
    "animeganv2": ((32, 48), (37, 29)),
    "animeganv2_dynamo": ((32, 48), (37, 29)),
    "rrdb_x4": ((16, 24), (15, 21)),
    "realcugan_unet": ((32, 24), (21, 27)),
}
RANGE_TOL = 1e-4   # of the output range (max - min of onnxruntime's output)


def fixture(name):
    return os.path.join(FIXTURES, name + ".onnx")


def ort_outputs(path, x):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})


def assert_matches(path, ex, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # the partition warning
        got = {k: v.copy() for k, v in ex.run_many({ex.input_names[0]: x}).items()}
    for name, ref in zip(ex.output_names, ort_outputs(path, x)):
        assert got[name].shape == ref.shape, name
        tol = RANGE_TOL * max(float(ref.max() - ref.min()), 1e-6)
        err = float(np.abs(got[name] - ref).max())
        assert err <= tol, f"{name}: max error {err:.3g} > {tol:.3g}"


@pytest.mark.parametrize("name", sorted(SIZES))
def test_generator_matches_onnxruntime_at_even_and_odd_size(name):
    ex = NativeExecutor(fixture(name))
    rng = np.random.default_rng(0)
    for h, w in SIZES[name]:
        x = rng.uniform(-1, 1, (1, 3, h, w)).astype(np.float32)
        assert_matches(fixture(name), ex, x)
        text = ex.describe()
        assert "placement:" in text
        moved = ex.plan_for({ex.input_names[0]: x.shape}).specialised.foreign()
        for pl in moved:   # every node on onnxruntime is listed with its reason
            assert repr(pl.node) in text and pl.why


def test_a_keras_export_matches_onnxruntime_with_its_gelus_fused():
    """tf2onnx's export of a Keras generator (tools/export_keras_fixture.py: NHWC in and out,
    tanh-GELU, an SE block, ReLU6, a "same" Conv2DTranspose) runs wholly natively, matches
    onnxruntime at an even and an odd size, and each tanh-GELU is one Gelu."""
    path = fixture("keras_se")
    ex = NativeExecutor(path, strict=True)
    rng = np.random.default_rng(0)
    for h, w in ((32, 40), (37, 29)):
        x = rng.uniform(-1, 1, (1, h, w, 3)).astype(np.float32)
        assert_matches(path, ex, x)
    p = ex.plan_for({ex.input_names[0]: x.shape})
    assert p.rewrites.gelu_pattern == 2
    assert [nd.attrs.get("approximate") for nd in p.nodes if nd.op == "Gelu"] == ["tanh"] * 2


def test_fixed_size_generator_matches_at_its_size():
    ex = NativeExecutor(fixture("ugatit_full"))
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 24, 24)).astype(np.float32)
    assert_matches(fixture("ugatit_full"), ex, x)


def test_shape_arithmetic_is_folded_per_size():
    """U-GAT-IT's torch.var exports n / (n - 1) from Shape -> Gather -> ReduceProd -> Cast ->
    Sub -> Div; pix2pix's pad to a multiple of 32 uses Mod and Sub on the input's shape: for
    one size every such node is a constant, none runs."""
    for name, shape in (("ugatit_light", (1, 3, 33, 27)), ("pix2pix_unet", (1, 3, 37, 45))):
        ex = NativeExecutor(fixture(name))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sp = ex.plan_for({ex.input_names[0]: shape}).specialised
        where = {pl.node: pl.where for pl in sp.placements}
        shape_ops = {"Shape", "Gather", "ReduceProd", "Cast", "Mod", "Equal", "Where",
                     "ConstantOfShape", "Expand"}
        ran = [n.op for n in ex.graph.nodes if n.op in shape_ops and where[n.name] != "folded"
               and n.op != "Expand"]
        assert not ran, ran
        assert sum(1 for w in where.values() if w == "folded") > 20


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("fit", ["resize", "tile"])
def test_fixed_size_generator_runs_other_sizes_by_fitting(fit):
    """ugatit_full takes 24 x 24 only; pictures of other sizes (even and odd) are resized to it
    (or tiled), the same as doing so around onnxruntime; describe() says so."""
    from a2r_edge.model import fit as fitting
    path = fixture("ugatit_full")
    ex = NativeExecutor(path, fit=fit)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ort_run = lambda t: sess.run(None, {"input": t})[0]  # noqa: E731
    rng = np.random.default_rng(3)
    for h, w in ((40, 32), (37, 29)):
        x = rng.uniform(-1, 1, (1, 3, h, w)).astype(np.float32)
        got = ex.run(x)
        ref = fitting.run_fitted(ort_run, x, (24, 24), fit)
        assert got.shape == (1, 3, h, w)
        tol = RANGE_TOL * float(ref.max() - ref.min())
        assert float(np.abs(got - ref).max()) <= tol
        text = ex.describe(x.shape)
        assert f"input {h}x{w}" in text and "fixed 24x24" in text
    with pytest.raises(ValueError, match="must have shape"):
        ex.run_many({"input": np.zeros((1, 3, 40, 32), np.float32)})   # no fitting there


def hardmax_model():
    """Conv -> Hardmax (an op no image generator uses, so no native kernel) -> Relu."""
    b = Builder(np.random.default_rng(0), 3)
    y = b.node("Hardmax", [b.conv("x", 3, 4)], axis=-1)
    return b.model(b.node("Relu", [b.conv(y, 4, 3)]))


def test_partition_runs_the_rest_natively_warns_once_and_strict_refuses():
    m = hardmax_model()
    x = np.random.default_rng(2).uniform(-1, 1, (1, 3, 9, 12)).astype(np.float32)
    ex = NativeExecutor(m)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = ex.run(x).copy()
        ex.run(np.ascontiguousarray(x[:, :, :7, :5]))
    moved = [str(w.message) for w in caught if "onnxruntime" in str(w.message)]
    assert len(moved) == 1 and "1 of 4 nodes" in moved[0] and "strict=True" in moved[0]
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(y, sess.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)
    text = ex.describe(x.shape)
    assert "3 nodes native, 1 on onnxruntime in 1 regions" in text
    assert "no native kernel for Hardmax" in text
    with pytest.raises(UnsupportedOpError, match="Hardmax"):
        NativeExecutor(m, strict=True)


def test_cli_strict_refuses_and_default_runs_the_partitioned_model(tmp_path):
    import subprocess
    import sys

    import cv2
    import onnx
    path = tmp_path / "hardmax.onnx"
    onnx.save(hardmax_model(), str(path))
    cv2.imwrite(str(tmp_path / "in.png"), np.full((20, 24, 3), 100, np.uint8))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    base = [sys.executable, "-m", "a2r_edge", "convert", "--model", str(path), "-q",
            str(tmp_path / "in.png")]
    strict = subprocess.run(base + ["-o", str(tmp_path / "a.png"), "--strict"], cwd=root,
                            capture_output=True, text=True, timeout=120)
    assert strict.returncode == 2 and "Hardmax" in strict.stderr, strict.stderr
    assert "Traceback" not in strict.stderr and not (tmp_path / "a.png").exists()
    ok = subprocess.run(base + ["-o", str(tmp_path / "b.png")], cwd=root,
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert cv2.imread(str(tmp_path / "b.png")).shape == (20, 24, 3)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("backend", ["native", "onnxruntime"])
@pytest.mark.parametrize("name", ["ugatit_light", "ugatit_full"])
def test_engine_converts_with_multi_output_and_fixed_size_generators(name, backend):
    """U-GAT-IT returns (picture, cam_logit, heatmap): the picture is the first output; the full
    model takes 24 x 24 only: other pictures are fitted to it. (A plain ONNX file has stride 1:
    the light model's two stride-2 stages give 40 x 32 for 37 x 29, as in onnxruntime; a
    manifest with "stride": 4 pads such pictures.)"""
    from a2r_edge.engine import Engine
    img = np.random.default_rng(4).integers(0, 256, (36, 28, 3), dtype=np.uint8)
    out = Engine(fixture(name), backend=backend).convert(img)
    assert out.shape == img.shape and out.dtype == np.uint8


def test_integer_tensor_between_two_onnxruntime_regions():
    """ArgMax (int64) in one region, read by a Cast in a later one, a native node between."""
    b = Builder(np.random.default_rng(5), 3)
    am = b.node("ArgMax", ["x"], axis=1, keepdims=1)
    r = b.node("Relu", ["x"])
    c = b.node("Cast", [am], to=1)
    m = b.model(b.node("Add", [r, c]))
    x = np.random.default_rng(6).standard_normal((1, 3, 5, 7)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = NativeExecutor(m).run(x)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(got, sess.run(None, {"x": x})[0])


def unet_without_padding(path, levels=2, channels=8):
    """A U-Net as Keras/tf2onnx or a bare torch export write it: ``levels`` stride-2 convs
    down, nearest x2 up, skip Concats; it plans only at multiples of 2^levels (an upsampled
    map one pixel wider than its skip elsewhere). Saved to ``path``."""
    import onnx
    from onnx import numpy_helper
    b = Builder(np.random.default_rng(21), 3)
    b.inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "up"))
    skips, t, c = [], "x", 3
    for _ in range(levels):
        skips.append((t, c))
        t, c = b.conv(t, c, channels, stride=2), channels
    for skip, sc in reversed(skips):
        t = b.node("Concat", [b.node("Resize", [t, "", "up"], mode="nearest"), skip], axis=1)
        t = b.conv(t, channels + sc, channels)
    onnx.save(b.model(b.node("Tanh", [b.conv(t, channels, 3)])), str(path))
    return path


def test_a_plain_unet_gets_the_stride_its_skips_need(tmp_path):
    """A plain ONNX file states no stride: the Engine finds the multiple its network plans at
    (model.fit.size_multiple) and pads pictures to it, as a manifest's "stride" does; a 101 x 66
    picture converts (it failed: Concat inputs differ off axis 1). A network planning at any
    size keeps stride 1."""
    from a2r_edge import Engine
    from a2r_edge.model import fit
    from a2r_edge.model.package import wrap_onnx
    path = unet_without_padding(tmp_path / "unet.onnx")
    with pytest.raises(ValueError, match="differ off axis 1"):
        NativeExecutor(str(path)).plan_for({"x": (1, 3, 66, 101)})
    engine = Engine(str(path), cache_mb=0)
    assert engine.model.stride == 4
    assert fit.size_multiple(NativeExecutor(fixture("cyclegan_resnet")).graph) == 1
    img = np.random.default_rng(22).integers(0, 256, (66, 101, 3), dtype=np.uint8)
    declared = Engine(dataclasses.replace(wrap_onnx(path), stride=4), cache_mb=0)
    np.testing.assert_array_equal(engine.convert(img), declared.convert(img))
    on_ort = Engine(str(path), cache_mb=0, backend="onnxruntime")   # no native executor
    assert on_ort.model.stride == 4 and on_ort.convert(img).shape == img.shape


@pytest.mark.parametrize("levels,channels", [(6, 64), (8, 4)])
def test_size_multiple_of_deep_unets(tmp_path, levels, channels):
    """6 levels of 64 channels: probing at 33 x 64 pixels needed more than A2R_MEMORY_MB and
    read as "not this multiple" (stride 1); 8 levels need 256. Probes stay within 528 px."""
    from a2r_edge.model import fit
    path = unet_without_padding(tmp_path / "u.onnx", levels, channels)
    assert fit.size_multiple(NativeExecutor(str(path)).graph) == 2 ** levels
