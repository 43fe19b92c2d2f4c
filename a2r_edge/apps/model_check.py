"""``python -m a2r_edge model check MODEL``: what a user runs before trusting a model.

For one input size (default 256 x 256, or the model's fixed size) it reports
  * load time (reading, checking and folding the graph) and plan time;
  * per-op coverage: how many nodes of each op type run natively, on onnxruntime inside the
    native plan (and why), were folded at plan time, or were rewritten into other nodes;
  * whether convert and the Engine can use it: they convert RGB pictures, so the network must
    take and give 3 channels (exit code 1 when not; the rest is still checked);
  * parity against onnxruntime on a seeded random input in [-1, 1]: the largest difference per
    output, against 1e-4 of the output's range, or where the range is at float32's resolution
    (a deep network whose output collapses, or cancels large values into a tiny output), 8
    times the change of onnxruntime's output when every weight moves one unit in the last place
    (not for graphs with thresholds or roundings, where one ulp moves a whole step; exit code 1
    when both fail);
  * speed against onnxruntime at the machine's thread counts (1 and all kernel threads):
    medians of --runs runs after warm-up runs (onnxruntime's one; the native side's as many as
    its per-step thread counts take to settle: step_threads.SETTLE_RUNS, or where that would
    take over SETTLE_BUDGET_S, a heavy model, their first measurement), and their ratio; the
    native side at --precision (bf16, int8 or auto: calibrated on the bundled sample picture,
    its PSNR against the native fp32 output printed beside the quality guard);
  * with --profile, where the native time goes: each op type's share of a run, and the
    slowest steps (fused nodes) with their precision and output shape.
Bad models print one line and exit 2, like every command.
"""
from __future__ import annotations

import argparse
import functools
import time
import warnings
from pathlib import Path

import numpy as np

from ..runtime.files import not_a_file
from . import positive_int
from .convert import PRECISION_CHOICES

PARITY = 1e-4   # of the output range, as the generator tests
# Failing that, this many times onnxruntime's change for one-ulp changes of the weights: on a
# 120-layer 32-channel ReLU CNN (3x3 pad 1 convolutions without bias, weights normal with
# variance 1 / (9 C_in), seed 0; model check's 256^2 input: the output's range collapsed to
# 2.6e-20) the native fp32 output (3x3 convolutions on Winograd F(4,3)) differed from
# onnxruntime's by 3.6 times that change, onnxruntime optimised from its unoptimised graph by
# 1.1 times; a wrong result differs by about the output's range, orders of magnitude above.
NOISE_FACTOR = 8
SETTLE_BUDGET_S = 15.0   # the most the speed section spends settling a plan's thread counts


def add_parser(sub) -> None:
    p = sub.add_parser("model", help="inspect a bring-your-own model (model check MODEL)")
    msub = p.add_subparsers(dest="model_command", required=True, metavar="SUBCOMMAND")
    c = msub.add_parser("check", help="coverage, parity and speed of an ONNX model against "
                                      "onnxruntime")
    c.add_argument("model", metavar="MODEL", help="an .onnx file")
    c.add_argument("--size", type=_size, default=None, metavar="HxW",
                   help="input size (default 256x256, or the model's fixed size)")
    c.add_argument("--runs", type=positive_int, default=5,
                   help="timed runs per backend (default 5)")
    c.add_argument("--no-speed", action="store_true", help="skip the timing")
    c.add_argument("--precision", default="fp32", choices=PRECISION_CHOICES,
                   help="the native convolutions' precision in the timing (default fp32)")
    c.add_argument("--profile", action="store_true",
                   help="print each op type's share of the native run time")


def _size(text: str) -> tuple[int, int]:
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must be HxW, e.g. 256x256, got {text!r}")
    if h < 1 or w < 1:
        raise argparse.ArgumentTypeError(f"size must be positive, got {text!r}")
    return h, w


def coverage(placements) -> dict[str, dict[str, int]]:
    """{op: {where: count}} of a plan's source nodes."""
    table: dict[str, dict[str, int]] = {}
    for pl in placements:
        row = table.setdefault(pl.op, {})
        row[pl.where] = row.get(pl.where, 0) + 1
    return table


def _median_ms(fn, runs: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times))


def run(args: argparse.Namespace) -> int:
    import onnx  # noqa: F401  (imported before the clock starts: load time is the model's)
    import onnxruntime as ort

    from ..model import NativeExecutor, conventions
    from ..model.fit import fixed_hw, size_multiple
    from ..model.graph import channels_problem

    if (why := not_a_file(Path(args.model), "model file (.onnx)")) is not None:
        raise ValueError(f"{args.model}: {why}")  # a folder is no model "not found"
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # the report says it in full
        ex = NativeExecutor(args.model)
        load_s = time.perf_counter() - t0
        if len(ex.input_names) != 1:
            raise ValueError(f"model check takes one-input models; this one has "
                             f"{ex.input_names}")
        dims = ex.graph.inputs[0][1]
        if len(dims) != 4:
            raise ValueError(f"model check takes NCHW or NHWC pictures; the input has shape "
                             f"{dims}")
        if ex.input_names[0] in ex.graph.input_dtypes:
            raise ValueError(f"model check takes float32 pictures; the input is "
                             f"{ex.graph.input_dtypes[ex.input_names[0]]}")
        layouts = conventions.with_layouts(conventions.Conventions(), args.model)
        nhwc = layouts.layout == "NHWC"
        nchw = (dims[0], dims[3], dims[1], dims[2]) if nhwc else dims
        hw = fixed_hw([("x", nchw)]) or args.size or (256, 256)
        shape = (nchw[0] or 1, nchw[1] or 3) + tuple(hw)   # NCHW
        if nhwc:
            shape = (shape[0], *hw, shape[1])
        t0 = time.perf_counter()
        plan = ex.plan_for({ex.input_names[0]: shape})
        plan_s = time.perf_counter() - t0
        x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
        got = {k: v.copy() for k, v in ex.run_many({ex.input_names[0]: x}).items()}
    print(f"model {args.model}: {len(ex.graph.nodes)} nodes after load-time folding; "
          f"input {shape}; load {load_s * 1e3:.0f} ms, plan {plan_s * 1e3:.0f} ms")
    if "NHWC" in (layouts.layout, layouts.out_layout):
        print(f"layout: input {layouts.layout}, output {layouts.out_layout}; convert adapts "
              f"it with a Transpose at each NHWC end, which the native plan drops against the "
              f"network's own")
    multiple = size_multiple(ex.graph if not nhwc else NativeExecutor(
        str(conventions.adapt(Path(args.model), layouts))).graph)   # the NCHW one convert runs
    if multiple > 1:
        print(f"sizes: it plans at multiples of {multiple} only (its downsampling); convert "
              f"pads pictures to them")
    picture = got[ex.output_names[0]]
    gives = None if picture.ndim != 4 else \
        picture.shape[3 if layouts.out_layout == "NHWC" else 1]
    unusable = channels_problem(shape[3 if nhwc else 1], gives)
    if unusable:
        print(f"convert and the Engine cannot use this model: the network {unusable}")
    print("\ncoverage (source nodes):")
    table = coverage(plan.specialised.placements)
    cols = ("native", "onnxruntime", "fused", "folded")
    print(f"  {'op':<24}" + "".join(f"{c:>12}" for c in cols))
    for op in sorted(table, key=lambda o: (-table[o].get("onnxruntime", 0), o)):
        print(f"  {op:<24}" + "".join(f"{table[op].get(c, 0) or '':>12}" for c in cols))
    moved = plan.specialised.foreign()
    if moved:
        print("\non onnxruntime inside the native plan:")
        for why in sorted({pl.why for pl in moved}):
            ops_ = sorted({pl.op for pl in moved if pl.why == why})
            print(f"  {', '.join(ops_)}: {why}")
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    feed = {ex.input_names[0]: x}
    refs = sess.run(None, feed)
    print("\nparity against onnxruntime (random input in [-1, 1]):")
    ok = True
    nudged = functools.cache(lambda: _nudged_outputs(args.model, so, feed))   # when first needed

    def noise(i: int, ref) -> float:
        """The output's float32 noise; inf where it cannot be had (no fallback then)."""
        out = None if nudged() is None else nudged()[i]
        if out is None or out.shape != ref.shape:
            return float("inf")
        return float(np.abs(out.astype(np.float64) - ref).max())

    for i, (name, ref) in enumerate(zip(ex.output_names, refs)):
        err = float(np.abs(got[name].astype(np.float64) - ref).max()) \
            if got[name].shape == ref.shape else float("inf")
        good, says = parity_verdict(err, float(ref.max() - ref.min()), lambda: noise(i, ref))
        ok &= good
        print(f"  {name}: {says}")
    if not args.no_speed:
        _speed(args, ex.input_names[0], x, nhwc)
    return 0 if ok and not unusable else 1


def parity_verdict(err: float, span: float, noise) -> tuple[bool, str]:
    """Whether the largest difference ``err`` from onnxruntime's output passes, and the line
    saying so: err <= PARITY of the output's range ``span``; failing that (and finite), err <=
    NOISE_FACTOR x noise(), the output's float32 noise (an output whose range is at the
    resolution of the values behind it: a deep network whose output collapses, one that cancels
    large values; inf: none)."""
    span = span or 1.0
    line = f"max |native - onnxruntime| {err:.3g} = {err / span:.2g} of the range"
    if err <= PARITY * span:
        return True, f"{line} (ok, limit {PARITY:g})"
    if np.isfinite(err):
        n = noise()
        if np.isfinite(n) and err <= NOISE_FACTOR * n:
            return True, (f"{line} (ok: below {NOISE_FACTOR:g}x {n:.3g}, how far onnxruntime's "
                          f"output moves when every weight moves one ulp; limit {PARITY:g} of "
                          f"the range)")
    return False, f"{line} (FAIL, limit {PARITY:g})"


# The weights nudged for the noise: the parameter inputs (index >= 1) of the ops that sum products
# of them, where float32 rounding of large terms is what a tiny output inherits
_WEIGHTED_OPS = {"Conv", "ConvTranspose", "Gemm", "MatMul", "BatchNormalization",
                 "InstanceNormalization", "LayerNormalization", "GroupNormalization", "PRelu"}
# Ops whose output jumps with their input (a threshold, a rounding, an index): one ulp there
# can move an output by a whole step, so no noise is measured where one is in the graph
_STEPPED_OPS = {"Round", "Floor", "Ceil", "Sign", "Mod", "ArgMax", "ArgMin", "TopK", "Greater",
                "Less", "GreaterOrEqual", "LessOrEqual", "Equal", "Where", "Hardmax",
                "QuantizeLinear", "NonZero", "Cast"}


def _nudged_outputs(path: str, so, feed) -> list | None:
    """onnxruntime's outputs for ``feed`` with the float32 weights of _WEIGHTED_OPS moved one
    unit in the last place, up or down (seeded): how far they move from the plain outputs is
    the outputs' float32 noise. None where the graph has a _STEPPED_OPS node or the nudged
    model does not run."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    model = onnx.load(path)
    if any(n.op_type in _STEPPED_OPS for n in model.graph.node):
        return None
    weights = {t for n in model.graph.node if n.op_type in _WEIGHTED_OPS for t in n.input[1:]}
    rng = np.random.default_rng(0)
    for init in model.graph.initializer:
        v = numpy_helper.to_array(init)
        if init.name in weights and v.dtype == np.float32:
            away = np.where(rng.random(v.shape) < 0.5, np.inf, -np.inf).astype(np.float32)
            init.CopyFrom(numpy_helper.from_array(np.nextafter(v, away), init.name))
    try:
        return ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"]).run(None, feed)
    except Exception:   # noqa: BLE001 (onnxruntime's own error types; no noise then)
        return None


def _speed(args: argparse.Namespace, name: str, x: np.ndarray, nhwc: bool) -> None:
    """The native executor at args.precision against onnxruntime fp32, per thread count (x:
    the input, NHWC when ``nhwc``)."""
    import onnxruntime as ort

    from ..model import NativeExecutor, precision as prec
    from ..model.step_threads import SAMPLES, SETTLE_RUNS, step_times
    from ..runtime import cpu

    low = args.precision != "fp32"
    cal = _calibration_input(x.shape, nhwc) if low else None
    print(f"\nspeed (median of {args.runs} runs, ms; native at {args.precision}"
          f"{', calibrated on the bundled sample' if low else ''}):")
    for threads in sorted({1, cpu.num_threads()}):
        label = f"{threads} thread{'s' if threads > 1 else ''}"
        with cpu.using_threads(threads), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            timed = NativeExecutor(args.model)
            if low:
                want = timed.run(cal).copy()
                entry = prec.plan(timed, [cal], args.precision)
                db = prec.psnr(timed.run(cal), want)
                guard = prec.GUARD_PSNR_DB.get(entry["precision"])
                quality = ("the fp32 output itself" if db == float("inf") else
                           f"{db:.1f} dB against fp32"
                           f"{f' (guard {guard:.0f} dB)' if guard else ''}")
                print(f"  {label} at {entry['precision']}: {quality}: {entry['reason']}")
            run = lambda: timed.run_many({name: x})   # noqa: E731
            warmup = 1
            if threads > 1:
                # past the runs that measure each step's thread count (every other one at 1
                # thread), and their recheck unless that would take over SETTLE_BUDGET_S (the
                # second run timed: the first plans; it runs at 1 thread, so the estimate errs
                # long)
                run()
                first = time.perf_counter()
                run()
                warmup = SETTLE_RUNS - 2
                if (time.perf_counter() - first) * SETTLE_RUNS > SETTLE_BUDGET_S:
                    warmup = 2 * SAMPLES - 1
                    print(f"  {label}: each step's thread count from its first measurement "
                          f"({2 * SAMPLES + 1} runs; settling it, {SETTLE_RUNS} runs, would "
                          f"take over {SETTLE_BUDGET_S:.0f} s)")
            native = _median_ms(run, args.runs, warmup=warmup)
            if args.profile:
                plan = timed.plan_for({name: x.shape})
                steps = step_times(plan, args.runs)
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        so.log_severity_level = 3
        s2 = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
        peer = _median_ms(lambda: s2.run(None, {name: x}), args.runs)
        print(f"  {label}: native {native:.1f}, "
              f"onnxruntime {peer:.1f} -> {peer / native:.2f}x onnxruntime")
        if args.profile:
            _print_profile(plan, steps)


def _print_profile(plan, steps: list[float], slowest: int = 5) -> None:
    """Each op type's share of the steps' total time, then the slowest steps."""
    total = sum(steps) or 1.0
    per_op: dict[str, float] = {}
    for nd, t in zip(plan.step_nodes, steps):
        per_op[nd.op] = per_op.get(nd.op, 0.0) + t
    print("    where the native time goes: " + ", ".join(
        f"{op} {t / total:.0%}" for op, t in sorted(per_op.items(), key=lambda i: -i[1])
        if t / total >= 0.01))
    print(f"    the {slowest} slowest steps:")
    for i in sorted(range(len(steps)), key=lambda i: -steps[i])[:slowest]:
        nd = plan.step_nodes[i]
        at = plan.node_precision.get(nd.name)   # convolution-like nodes: "int8", "fp32: why"
        print(f"      {steps[i] * 1e3:7.3f} ms {steps[i] / total:4.0%}  {nd.op}"
              f"{f' @{at}' if at else ''} {nd.name} -> "
              f"{'x'.join(str(d) for d in plan.shapes[nd.outputs[0]])}"
              f"{' (u8)' if nd.outputs[0] in plan.u8 else ''}")


def _calibration_input(shape, nhwc: bool = False) -> np.ndarray:
    """The bundled sample picture (precision.calibration_pictures) at ``shape``'s size, RGB in
    [-1, 1] (N, C, H, W; nhwc: shape and result (N, H, W, C)): a picture's activation ranges,
    where the random input has noise's."""
    import cv2

    from ..model import precision as prec
    n, c, h, w = (shape[0], shape[3], shape[1], shape[2]) if nhwc else shape
    img = cv2.resize(prec.calibration_pictures()[0], (w, h), interpolation=cv2.INTER_AREA)
    rgb = img[:, :, ::-1].transpose(2, 0, 1).astype(np.float32) / 127.5 - 1
    planes = rgb[np.arange(c) % 3] if c != 3 else rgb
    x = np.broadcast_to(planes, (n, c, h, w))
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1) if nhwc else x)
