"""The six exported generator families and a Keras generator through tf2onnx
(tests/fixtures/generators, small widths: a graph-shape benchmark, not a full-width one):
native executor against onnxruntime and OpenVINO fp32 (INFERENCE_PRECISION_HINT=f32) at 256^2
and 512^2 on 1 and 2 threads, ratios in one run
(medians of 5 to 50 rounds, more for the faster models; the native plan settled first:
conftest.settle), and a per-op profile of each native
plan (where the time goes; "OnnxRuntimeRegion" is the time of the nodes still run by
onnxruntime inside the plan).

    python -m pytest benchmarks/bench_generators.py -k "256 and 1thr"   (one size, one count)
"""
import os
import time
import warnings

import numpy as np
import onnxruntime as ort
import pytest

from a2r_edge.model import NativeExecutor
from a2r_edge.model.step_threads import profile
from conftest import compare, settle

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "generators")
MODELS = ["cyclegan_resnet", "pix2pix_unet", "ugatit_light", "ugatit_full", "animeganv2",
          "rrdb_x4", "realcugan_unet", "keras_se"]
FIXED = {"ugatit_full": (24, 24)}   # exported at a fixed size: benchmarked at it
NHWC = {"keras_se"}   # tf2onnx's default export: the picture in as (1, H, W, 3)
PEERS = ("onnxruntime", "openvino")


def _ort(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return lambda x: sess.run(None, {name: x})[0]


def _openvino(path, threads, shape):
    ov = pytest.importorskip("openvino")
    core = ov.Core()
    model = core.read_model(path)
    model.reshape({model.inputs[0].get_any_name(): list(shape)})
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32",
                                                 "INFERENCE_NUM_THREADS": threads,
                                                 "PERFORMANCE_HINT": "LATENCY"})
    req = compiled.create_infer_request()
    out = compiled.outputs[0]
    return lambda x: req.infer({0: x})[out]


def _rounds(run) -> int:
    """5 rounds, more for a model of a few milliseconds (up to 50, about 0.25 s of runs): a
    median of 5 sub-millisecond runs on a shared machine is mostly its neighbours' noise."""
    start = time.perf_counter()
    run()
    return int(min(50, max(5, 0.25 / max(time.perf_counter() - start, 1e-6))))


@pytest.mark.parametrize("peer", PEERS)
@pytest.mark.parametrize("size", [256, 512])
@pytest.mark.parametrize("name", MODELS)
def test_generator(benchmark, threads, name, size, peer):
    path = os.path.join(FIXTURES, name + ".onnx")
    hw = FIXED.get(name, (size, size))
    if name in FIXED and size != 256:
        pytest.skip("fixed-size model: benchmarked once, at its own size")
    shape = (1,) + hw + (3,) if name in NHWC else (1, 3) + hw
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ex = NativeExecutor(path)
        settle(lambda: ex.run(x))
    other = _ort(path, threads) if peer == "onnxruntime" else _openvino(path, threads, x.shape)
    ref = other(x)
    assert float(np.abs(ex.run(x) - ref).max()) <= 1e-4 * float(ref.max() - ref.min())
    row = compare(benchmark, lambda: ex.run(x), lambda: other(x), op=name,
                  case=f"{hw[0]}x{hw[1]}", threads=threads, peer_name=peer, target=1.0,
                  rounds=_rounds(lambda: ex.run(x)))
    if peer == "onnxruntime":
        plan = ex.plan_for({ex.input_names[0]: x.shape})
        prof = profile(plan)
        total = sum(prof.values())
        top = sorted(prof.items(), key=lambda kv: -kv[1])[:5]
        moved = len(plan.specialised.foreign())
        row["profile"] = {op: round(t * 1e3, 3) for op, t in prof.items()}
        print(f"\n[{name} {hw[0]}x{hw[1]} {threads}thr] {total * 1e3:.1f} ms in steps; "
              f"{moved} source nodes on onnxruntime; top: "
              + ", ".join(f"{op} {t / total:.0%}" for op, t in top))
