"""Reduced precision (ops.Conv2d precision=, Engine(precision="auto")), ratios in one run at 1 and
2 threads:
  - the conv kernel at bf16 and at int8 against the same layer at fp32 (goals: bf16 >= 1.6x and
    int8 >= 2.5x on a CPU with AVX512_BF16/VNNI), each with its share of its own roofline
    (measure.fma_peak / measure.lowp_peak, timed here at the same thread count) and the path
    each side took (Winograd, F(4,3) at fp32 and F(2,3) at bf16, or direct: for Winograd the
    share counts the direct
    multiplies, so it can pass 100%);
  - the bundled model's ONNX stages (the network) at precision="auto" against OpenVINO at its
    default precision (bf16 on such a CPU; goal >= 1.0x) and onnxruntime fp32 (goal >= 1.5x);
  - Engine.convert at precision="auto" against the straightforward pipeline on OpenVINO and on
    onnxruntime (benchmarks/straightforward.py), 512x512 and 1080p;
  - the generator families with ConvTranspose upsampling or many convs (tests/fixtures/
    generators: CycleGAN, pix2pix, Real-CUGAN, RRDB) at 256^2, precision="auto" (chosen on
    this input against its own fp32 output) against the same executor at fp32, OpenVINO at its
    default precision and onnxruntime fp32;
  - a MatMul by a constant weight around ops/matmul.py's low-precision threshold: the 1x1-conv
    form at bf16/int8 against numpy's fp32 product (the same executor at fp32);
  - 3x3 convolutions at fp32 (Winograd F(4,3)) and bf16 (F(2,3)) forced onto Winograd against
    forced direct, around the shapes where auto starts taking Winograd (test_winograd_rule: what
    the two rules are set from).
The native plans are settled first (conftest.settle: their per-step thread choice final, before
a peer runs). Nothing is asserted on time; the summary prints the ratios and whether each goal
was met.

    python -m pytest benchmarks/bench_precision.py -k "generator and 1thr"
"""
import warnings
from pathlib import Path

import cv2
import numpy as np
import pytest

from a2r_edge import Engine, _kernels, ops
from a2r_edge.model import NativeExecutor
from a2r_edge.model import precision as prec
from a2r_edge.runtime import cpu, measure
from conftest import compare, settle
from onnx import TensorProto, helper, numpy_helper
from straightforward import OPENVINO, OPENVINO_PRECISION, converter, stage_runner

MODEL = Path(__file__).resolve().parent.parent / "a2r_edge" / "models" / "a2r_lite"
SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "astronaut_toon.png"
GOAL = {"bf16": 1.6, "int8": 2.5}
# the ISA levels with a bf16 dot product; below them bf16 is widened to fp32 and has no goal
BF16_UNIT = ("avx512_bf16", "avx512_amx")
# against OpenVINO: 1.0x its default precision where that is bf16, 1.3x where it runs fp32 (an
# AVX2-only machine, or the stand-in for one: A2R_BENCH_OPENVINO_PRECISION=f32, benchmarks/README)
OPENVINO_GOAL = 1.3 if cpu.isa() == "avx2" or OPENVINO_PRECISION == "f32" else 1.0
_PEAKS: dict = {}


def peak(precision: str, threads: int) -> float:
    """op/s ceiling of ``precision`` at ``threads`` (kept per run)."""
    key = (precision, threads, cpu.isa())
    if key not in _PEAKS:
        _PEAKS[key] = (measure.fma_peak(threads) if precision == "fp32"
                       else measure.lowp_peak(precision, threads))
    return _PEAKS[key]


# (C = O, H = W): 3x3 pad 1, the bundled model's block shape (32 ch) and a wider one
CASES = [(32, 128), (64, 128), (32, 256)]
_DIRECT = 1  # A2R_CONV2D_DIRECT (a2r_kernels.h)


def path_taken(conv, x) -> str:
    """'direct' or 'winograd': the path ``conv`` takes by default (its output is bit-identical to
    the forced direct path's exactly when it runs direct)."""
    auto = conv(x).copy()
    old = _kernels.conv2d_set_algo(_DIRECT)
    try:
        return "direct" if np.array_equal(conv(x), auto) else "winograd"
    finally:
        _kernels.conv2d_set_algo(old)


@pytest.mark.parametrize("precision", ["bf16", "int8"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"c{c[0]}_{c[1]}px")
def test_conv_kernel(benchmark, threads, case, precision):
    c, hw = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    fp32 = ops.Conv2d(w, b, pad=1)
    low = ops.Conv2d(w, b, pad=1, precision=precision,
                     act_range=(float(x.min()), float(x.max())) if precision == "int8" else None)
    out32, out = fp32(x), low(x)
    assert prec.psnr(out, out32) >= prec.GUARD_PSNR_DB[precision]  # the same layer
    paths = {"fp32": path_taken(fp32, x), precision: path_taken(low, x)}
    flops = 2 * c * c * 9 * hw * hw
    row = compare(benchmark, lambda: low(x, out=out), lambda: fp32(x, out=out32),
                  op=f"conv2d {precision}", case=f"{c}ch {hw}^2 3x3", threads=threads,
                  peer_name="the same conv at fp32", flops=flops,
                  target=GOAL[precision] if precision != "bf16" or cpu.isa() in BF16_UNIT
                  else None)
    roof = peak(precision, threads)
    row["of_peak"] = row["gflops"] * 1e9 / roof
    of32 = flops / (row["peer_ms"] / 1e3) / peak("fp32", threads)
    row["case"] += (f" {paths[precision]} {row['of_peak']:.0%} of {precision} roof, fp32 "
                    f"{paths['fp32']} {of32:.0%} of FMA roof")
    benchmark.extra_info.update(of_peak=row["of_peak"], peak_gops=roof / 1e9,
                                fp32_of_peak=of32, paths=paths)


# (C, O, H = W): around the Winograd rules, fp32 (F(4,3), conv2d/kernel.c use_winograd: channels
# and map size) and bf16 (F(2,3), conv2d_lowp/kernel.c use_winograd: channels)
WINOGRAD_RULE_CASES = {
    "fp32": [(1, 16, 256), (3, 16, 256), (4, 4, 128), (8, 8, 128), (32, 3, 256), (32, 8, 128),
             (16, 16, 128), (24, 32, 128), (32, 32, 8), (32, 32, 12), (32, 32, 16), (64, 64, 16),
             (128, 128, 8), (16, 16, 256), (16, 24, 128), (8, 16, 256), (32, 32, 24),
             (32, 32, 32), (32, 32, 48), (32, 32, 64), (16, 16, 64), (64, 64, 32), (64, 64, 48),
             (64, 64, 64), (128, 128, 16), (128, 128, 32)],
    "bf16": [(16, 16, 256), (16, 24, 128), (16, 32, 128), (32, 16, 128), (24, 24, 128),
             (24, 24, 256), (24, 32, 128), (32, 24, 128), (32, 32, 64), (32, 32, 128),
             (32, 32, 256), (32, 48, 64), (48, 48, 64), (24, 48, 256), (64, 64, 128)],
}
_WINOGRAD = 2  # A2R_CONV2D_WINOGRAD (a2r_kernels.h)


@pytest.mark.parametrize("precision, case",
                         [(p, c) for p, cases in WINOGRAD_RULE_CASES.items() for c in cases],
                         ids=lambda v: v if isinstance(v, str) else f"c{v[0]}_o{v[1]}_{v[2]}px")
def test_winograd_rule(benchmark, threads, precision, case):
    """3x3 convolutions forced onto Winograd against the same forced direct: where Winograd pays
    at this ISA level and precision, and which path auto takes (its rule should take the faster
    one). No goal: the figures are what the rules are set from."""
    c, o, hw = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    conv = ops.Conv2d(w, None, pad=1, precision=precision)
    y = conv(x)
    auto = path_taken(conv, x)

    def forced(algo):
        def run():
            old = _kernels.conv2d_set_algo(algo)
            try:
                conv(x, out=y)
            finally:
                _kernels.conv2d_set_algo(old)
        return run
    compare(benchmark, forced(_WINOGRAD), forced(_DIRECT), op=f"{precision} winograd",
            case=f"{c}->{o} {hw}^2 3x3, auto: {auto}", threads=threads,
            peer_name="the same conv direct")


def stage_input(stage: str, side: int) -> np.ndarray:
    """The stage's input at a side x side picture: the picture itself (encode) or the encoder's
    features of the sample (decode)."""
    img = cv2.resize(cv2.imread(str(SAMPLE)), (side, side), interpolation=cv2.INTER_CUBIC)
    x = np.ascontiguousarray((img[:, :, ::-1].transpose(2, 0, 1)[None] / 127.5 - 1)
                             .astype(np.float32))
    if stage == "encoder":
        return x
    return NativeExecutor(str(MODEL / "encoder.onnx")).run(x).copy()


@pytest.mark.parametrize("peer", ["openvino", "onnxruntime"])
@pytest.mark.parametrize("stage", ["encoder", "decoder"])
def test_network_stage(benchmark, threads, stage, peer):
    """One ONNX stage at 512x512: the native executor at precision="auto" (chosen on this input
    against its own fp32 output) against OpenVINO's default precision or onnxruntime fp32. The
    bundled decoder adds the input after the network (stage semantics): both sides skip it."""
    x = stage_input(stage, 512)
    ex = NativeExecutor(str(MODEL / f"{stage}.onnx"), precision="auto")
    ours = ex.run(x).copy()
    settle(lambda: ex.run(x))
    other = stage_runner(MODEL / f"{stage}.onnx", threads, peer)
    theirs = other(x)
    # the same work: within 5% of the output's range (the encoder's features reach +-13; int8
    # at 127 levels, AVX2, differs from fp32 by up to 0.36 there) or 0.25
    assert ours.shape == theirs.shape and \
        np.abs(ours - theirs).max() < max(0.25, 0.05 * float(np.abs(theirs).max()))
    compare(benchmark, lambda: ex.run(x), lambda: other(x),
            op=stage, case=f"512^2 auto: {ex.choice['precision']}",
            threads=threads, peer_name=OPENVINO if peer == "openvino" else
            "onnxruntime fp32", target=OPENVINO_GOAL if peer == "openvino" else 1.5, rounds=9)


@pytest.mark.parametrize("peer", ["openvino", "onnxruntime"])
@pytest.mark.parametrize("size", [(512, 512), (1920, 1080)], ids=["512", "1080p"])
def test_convert_auto(benchmark, threads, size, peer):
    img = cv2.resize(cv2.imread(str(SAMPLE)), size, interpolation=cv2.INTER_CUBIC)
    eng = Engine(cache_mb=0, precision="auto")  # chosen (or read back) on the bundled sample
    settle(lambda: eng.convert(img))
    plain = converter(MODEL, threads, peer)
    assert np.abs(eng.convert(img).astype(int) - plain(img)).mean() < 3  # the same work
    chosen = ",".join(f"{k}:{v['precision']}" for k, v in eng.precisions.items())
    compare(benchmark, lambda: eng.convert(img), lambda: plain(img), op="convert auto",
            case=f"{size[0]}x{size[1]} {chosen}", threads=threads,
            peer_name=f"numpy+cv2+{OPENVINO if peer == 'openvino' else peer}",
            target=OPENVINO_GOAL if peer == "openvino" else 1.5,
            rounds=5 if size[0] > 1000 else 9)


GENERATORS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "generators"


def generator_input(side: int) -> np.ndarray:
    """The bundled sample at side x side, RGB in [-1, 1], as a generator's input."""
    img = cv2.resize(cv2.imread(str(SAMPLE)), (side, side), interpolation=cv2.INTER_AREA)
    return np.ascontiguousarray((img[:, :, ::-1].transpose(2, 0, 1)[None] / 127.5 - 1)
                                .astype(np.float32))


@pytest.mark.parametrize("peer", ["fp32", "openvino", "onnxruntime"])
@pytest.mark.parametrize("name", ["cyclegan_resnet", "pix2pix_unet", "realcugan_unet",
                                  "rrdb_x4"])
def test_generator_auto(benchmark, threads, name, peer):
    """A generator at 256^2, precision="auto" (its choice in the case column), against the
    same model on the native executor at fp32, OpenVINO's default precision or onnxruntime."""
    path = str(GENERATORS / f"{name}.onnx")
    x = generator_input(256)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # nodes placed on onnxruntime
        ex = NativeExecutor(path, precision="auto")
        ours = ex.run(x).copy()
        settle(lambda: ex.run(x))
        if peer == "fp32":
            plain = NativeExecutor(path)
            other = plain.run
            settle(lambda: plain.run(x))
        else:
            other = stage_runner(path, threads, peer)
    theirs = other(x)
    assert ours.shape == theirs.shape and prec.psnr(ours, theirs) >= 30   # the same model
    fallback = ex.fp32_nodes
    compare(benchmark, lambda: ex.run(x), lambda: other(x), op=name,
            case=f"256^2 auto: {ex.choice['precision']}"
                 + (f" ({len(fallback)} fp32)" if fallback else ""),
            threads=threads, peer_name={"fp32": "native fp32", "openvino": OPENVINO,
                                        "onnxruntime": "onnxruntime fp32"}[peer],
            target={"fp32": 1.3, "openvino": OPENVINO_GOAL, "onnxruntime": 1.5}[peer], rounds=9)


def matmul_model(rows: int, k: int, n: int) -> bytes:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["a", "w"], ["y"], name="fc")], "g",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, rows, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, rows, n])],
                          [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


@pytest.mark.parametrize("precision", ["bf16", "int8"])
@pytest.mark.parametrize("shape", [(1024, 64, 64), (64, 128, 128), (128, 128, 128),
                                   (1024, 128, 128), (16, 256, 256), (32, 256, 256),
                                   (256, 256, 256), (1024, 512, 512)],
                         ids=lambda s: "x".join(map(str, s)))
def test_matmul(benchmark, threads, shape, precision, monkeypatch):
    """A MatMul (rows, K) @ (K, N) forced into the 1x1-conv form at precision (the thresholds
    lowered to 0) against the same executor at fp32 (numpy's product): where the threshold
    of ops/matmul.py comes from."""
    from a2r_edge.model.ops import matmul
    monkeypatch.setattr(matmul, "LOWP_MIN_ROWS", 0)
    monkeypatch.setattr(matmul, "LOWP_MIN_INNER", 0)
    monkeypatch.setattr(matmul, "LOWP_MIN_MACS", 0)
    rows, k, n = shape
    model = matmul_model(rows, k, n)
    x = np.random.default_rng(1).standard_normal((1, rows, k)).astype(np.float32)
    fp32, low = NativeExecutor(model), NativeExecutor(model)
    low.set_precision(precision, {"fc": (float(x.min()), float(x.max()))})
    want = fp32.run(x).copy()
    assert prec.psnr(low.run(x), want) >= prec.GUARD_PSNR_DB["int8"]
    compare(benchmark, lambda: low.run(x), lambda: fp32.run(x), op=f"matmul {precision}",
            case=f"{rows}x{k} @ {k}x{n}", threads=threads, peer_name="numpy fp32",
            flops=2 * rows * k * n, rounds=25)
