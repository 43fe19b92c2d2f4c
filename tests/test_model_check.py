"""``python -m a2r_edge model check MODEL``: coverage, parity and speed in one report."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from a2r_edge.model import precision as prec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "generators")


def check(*args):
    return subprocess.run([sys.executable, "-m", "a2r_edge", "model", "check", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_model_check_reports_coverage_parity_and_speed():
    r = check(os.path.join(FIXTURES, "cyclegan_resnet.onnx"), "--size", "33x40", "--runs", "1")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "input (1, 3, 33, 40)" in out and "load" in out and "plan" in out
    assert "Conv" in out and "native" in out
    assert "output: max |native - onnxruntime|" in out and "(ok," in out
    assert "1 thread: native" in out and "x onnxruntime" in out


def test_model_check_fixed_size_model_and_bad_input(tmp_path):
    r = check(os.path.join(FIXTURES, "ugatit_full.onnx"), "--no-speed")
    assert r.returncode == 0 and "input (1, 3, 24, 24)" in r.stdout, r.stderr
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    r = check(str(bad), "--no-speed")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_model_check_says_what_a_path_that_is_no_file_is(tmp_path):
    os.mkfifo(tmp_path / "pipe.onnx")
    for path, says in ((tmp_path, "a folder, not a model file (.onnx)"),
                       (tmp_path / "pipe.onnx", "a pipe (FIFO), not a model file (.onnx)"),
                       (tmp_path / "none.onnx", "no such file or folder")):
        r = check(str(path), "--no-speed")
        assert r.returncode == 2 and r.stderr == f"a2r_edge: error: {path}: {says}\n", r.stderr


def test_model_check_times_a_precision_and_profiles_the_ops():
    r = check(os.path.join(FIXTURES, "cyclegan_resnet.onnx"), "--size", "32x32", "--runs", "1",
              "--precision", "int8", "--profile")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "native at int8, calibrated on the bundled sample" in out
    if "int8" in prec.runnable():   # (the baseline level runs fp32)
        assert "1 thread at int8: " in out and "dB against fp32 (guard 40 dB): asked for" in out
    assert "where the native time goes: " in out and "Conv " in out
    assert "the 5 slowest steps:" in out and " ms " in out and "/model/" in out
    r = check(os.path.join(FIXTURES, "cyclegan_resnet.onnx"), "--precision", "fp16")
    assert r.returncode == 2 and "invalid choice: 'fp16'" in r.stderr


def _model(path, nodes, inits, channels=(3, 3), elem=TensorProto.FLOAT):
    """An image model x (1, C_in, H, W) -> y (1, C_out, H, W) of ``elem`` tensors, saved."""
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(
        "x", elem, [1, channels[0], "H", "W"])], [helper.make_tensor_value_info(
            "y", elem, [1, channels[1], "H", "W"])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def test_model_check_refuses_a_float16_model_in_one_line(tmp_path):
    half = (np.random.default_rng(0).standard_normal((3, 3, 3, 3)) * 0.2).astype(np.float16)
    conv = _model(tmp_path / "half.onnx", [helper.make_node("Conv", ["x", "w"], ["y"],
                                                            pads=[1] * 4)], {"w": half},
                  elem=TensorProto.FLOAT16)
    relu = _model(tmp_path / "half_relu.onnx", [helper.make_node("Relu", ["x"], ["y"])], {},
                  elem=TensorProto.FLOAT16)
    for path, says in ((conv, "float16 weights: the native executor runs float32 networks; "
                              "export the model in float32"),
                       (relu, "takes float32 pictures; the input is float16")):
        r = check(path, "--no-speed")
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1 and says in r.stderr, r.stderr


@pytest.mark.parametrize("channels", [(1, 1), (3, 4), (3, 1)])
def test_model_check_says_convert_cannot_use_a_model_without_3_channels(tmp_path, channels):
    """The raw network's parity is still checked; the verdict says convert and the Engine
    cannot use it, with the channels it has, and the exit code is 1."""
    w = (np.random.default_rng(0).standard_normal((channels[1], channels[0], 3, 3)) * 0.2)
    path = _model(tmp_path / "m.onnx", [helper.make_node("Conv", ["x", "w"], ["y"],
                                                         pads=[1] * 4)],
                  {"w": w.astype(np.float32)}, channels)
    r = check(path, "--no-speed")
    assert r.returncode == 1 and "(ok," in r.stdout, (r.stdout, r.stderr)
    plural = lambda n: f"{n} channel{'s' if n != 1 else ''}"  # noqa: E731
    assert (f"convert and the Engine cannot use this model: the network takes "
            f"{plural(channels[0])} and gives {plural(channels[1])}") in r.stdout


@pytest.mark.parametrize("runs", ["0", "-1", "two"])
def test_model_check_refuses_a_run_count_below_1(runs):
    r = check(os.path.join(FIXTURES, "ugatit_full.onnx"), "--runs", runs)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "expected an integer >= 1" in r.stderr and "Traceback" not in r.stderr


def test_model_check_feeds_an_nhwc_model_nhwc(tmp_path):
    """A tf2onnx export without --inputs-as-nchw: checked at (1, H, W, 3), its layout said
    (it was fed NCHW and failed on its own shape check)."""
    sys.path.insert(0, os.path.dirname(__file__))
    from test_conventions import tf2onnx_shaped
    path, _ = tf2onnx_shaped(tmp_path / "m.onnx", hw=(20, 24))
    r = check(str(path), "--runs", "1")
    assert r.returncode == 0, r.stderr
    assert "input (1, 20, 24, 3)" in r.stdout and "layout: input NHWC, output NHWC" in r.stdout
    assert "(ok," in r.stdout


def test_model_check_says_the_multiple_a_unet_needs(tmp_path):
    sys.path.insert(0, os.path.dirname(__file__))
    from test_generators import unet_without_padding
    r = check(str(unet_without_padding(tmp_path / "unet.onnx")), "--no-speed")
    assert r.returncode == 0, r.stderr
    assert "it plans at multiples of 4 only" in r.stdout
    r = check(os.path.join(FIXTURES, "cyclegan_resnet.onnx"), "--no-speed")
    assert r.returncode == 0 and "multiples of" not in r.stdout


def test_parity_verdict_falls_back_to_the_outputs_float32_noise_only_when_needed():
    from a2r_edge.apps.model_check import parity_verdict
    asked = []

    def noise(n):
        return lambda: asked.append(n) or n

    assert parity_verdict(1e-6, 1.0, noise(1.0)) == (True, parity_verdict(1e-6, 1.0, None)[1])
    assert not asked                                        # within 1e-4 of the range: no noise
    good, says = parity_verdict(1e-3, 1.0, noise(1e-5))     # a real difference: fails
    assert not good and "FAIL" in says and asked == [1e-5]
    good, says = parity_verdict(1e-3, 1e-3, noise(1e-3))    # at the output's float32 noise
    assert good and "ok: below 8x 0.001" in says
    good, says = parity_verdict(float("inf"), 1.0, noise(1.0))   # shapes differ
    assert not good and asked == [1e-5, 1e-3]


def test_model_check_passes_a_network_that_cancels_into_a_tiny_output(tmp_path):
    """Conv (bias ~1000, weights 1e-6) then a 1x1 Conv whose weights sum to 0 and whose bias
    cancels the 1000s: an output range of ~3e-4 made of values whose float32 ulp is 6e-5, so
    native and onnxruntime differ by ~1e-4 (a third of the range: summation order alone). It
    passes against the output's own noise (onnxruntime with its weights nudged one ulp)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 3, 3, 3)) * 1e-6
    b = 1000 + rng.random(8)
    w2 = rng.standard_normal((3, 8, 1, 1))
    w2 -= w2.mean(axis=(1, 2, 3), keepdims=True)
    inits = {"w": w, "b": b, "w2": w2, "b2": -(w2[:, :, 0, 0] @ b)}
    path = _model(tmp_path / "cancel.onnx",
                  [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1] * 4),
                   helper.make_node("Conv", ["c", "w2", "b2"], ["y"])],
                  {k: v.astype(np.float32) for k, v in inits.items()})
    r = check(path, "--no-speed", "--size", "64x64")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "ok: below 8x" in r.stdout and "FAIL" not in r.stdout


def test_model_check_settles_a_heavy_models_threads_on_their_first_measurement(monkeypatch,
                                                                               capsys):
    """Where settling every step's thread count (SETTLE_RUNS runs at 2 threads) would take
    over SETTLE_BUDGET_S, the speed section times after the first measurement and says so (a
    120-layer 64-channel CNN at 256^2 took about 2 minutes in all before)."""
    from a2r_edge.__main__ import main
    from a2r_edge.apps import model_check
    from a2r_edge.runtime import cpu
    if cpu.num_threads() < 2:
        pytest.skip("one kernel thread: nothing to settle")
    calls = []
    monkeypatch.setattr(model_check, "SETTLE_BUDGET_S", 0.0)
    real = model_check._median_ms
    monkeypatch.setattr(model_check, "_median_ms",
                        lambda fn, runs, warmup=1: calls.append(warmup) or real(fn, runs, warmup))
    assert main(["model", "check", os.path.join(FIXTURES, "pix2pix_unet.onnx"), "--size",
                 "32x32", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "each step's thread count from its first measurement (5 runs" in out
    assert 3 in calls and 24 not in calls   # two runs, then 3 more: not SETTLE_RUNS


def test_the_noise_nudges_weights_only_and_not_graphs_with_steps(tmp_path):
    """_nudged_outputs moves the weights of the summing ops (a Resize's scales stay: the output
    keeps its size) and measures nothing for a graph with a threshold or a rounding (one ulp
    there moves an output by a whole step)."""
    from a2r_edge.apps.model_check import _nudged_outputs
    import onnxruntime as ort
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((3, 3, 3, 3)) * 0.2).astype(np.float32)
    conv = helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 4)
    resize = helper.make_node("Resize", ["c", "", "scales"], ["y"], mode="nearest")
    scales = np.array([1, 1, 2, 2], np.float32)
    smooth = _model(tmp_path / "resize.onnx", [conv, resize], {"w": w, "scales": scales})
    stepped = _model(tmp_path / "floor.onnx", [conv, helper.make_node("Floor", ["c"], ["y"])],
                     {"w": w})
    x = rng.uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32)
    so = ort.SessionOptions()
    out = _nudged_outputs(smooth, so, {"x": x})
    ref = ort.InferenceSession(smooth, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert out[0].shape == ref[0].shape == (1, 3, 16, 16)
    assert 0 < np.abs(out[0] - ref[0]).max() < 1e-5   # the weights moved, by float32 noise
    assert _nudged_outputs(stepped, so, {"x": x}) is None
