"""``python -m a2r_edge.bench``: measure this machine and write its hardware profile.

Measures, in one run and on this machine only:
  roofline   reference rates: copy bandwidth (numpy copies at 1..N threads) and the FMA
             throughput of the native roofline loop
  ops        every native op beside its peers (numpy, OpenCV, onnxruntime): time, GB/s or
             GFLOP/s, its share of a reference rate measured beside it (a reference, not a
             ceiling: a read-mostly op can pass 100% of a copy), ratio to each peer (peer time /
             our time: > 1 = faster)
  stages     every stage of the model (the bundled a2r_lite when present, else a tiny random
             package made in a temporary folder: the output says which) on every CPU backend
             that runs it (native executor vs onnxruntime for ONNX stages; native kernels for
             AdaIN and the guided filter) at the canonical sizes 256, 512, 1024
  transfers  host<->device bandwidth when a GPU backend exists (this build has none: a note)
prints a table, shows progress on stderr, and writes a profile JSON (profiles/schema.json).

Method: each figure is the median of several timed calls after warm-up calls, with a time budget
per figure (slow cases get fewer rounds, never fewer than 3). Shared machines are noisy: compare
the ratios of one run, not absolute times across runs.

    python -m a2r_edge.bench --quick --json /tmp/profile.json
    python -m a2r_edge.bench --save-profile          # the scheduler uses it from then on
"""
from __future__ import annotations

import datetime
import os
import platform
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..runtime import measure
from ..runtime.files import make_folder, write_json
from ..runtime.measure import (StageChain, bench_model, copy_bandwidth, fma_peak, lowp_peak,
                               median_time)
from . import OneLineParser, positive_int
from .convert import PRECISION_CHOICES

SCHEMA = "a2r_edge.profile/1"
CANONICAL_SIZES = (256, 512, 1024)


# --- ops beside their peers -------------------------------------------------------------------

def _ort_session(nodes, inits, threads):
    from ..runtime.ort import single_op_session
    return single_op_session(nodes, inits, threads).session


def op_cases(quick: bool, threads: int):
    """(op, case, ours, [(peer name, peer fn)], bytes moved or None, flops or None) per case;
    the same peers as benchmarks/bench_*.py."""
    import cv2
    from onnx import helper
    from .. import ops

    rng = np.random.default_rng(0)
    cases = []

    c = 16 if quick else 64
    x = rng.standard_normal((c, 256, 256)).astype(np.float32)
    out = np.empty_like(x)
    cases.append(("silu", f"{c}x256x256", lambda: ops.silu(x, out=out),
                  [("numpy x/(1+exp(-x))", lambda: np.divide(x, 1 + np.exp(-x), out=out))],
                  2 * x.nbytes, None))

    shape = (1, 16, 128, 128) if quick else (1, 64, 256, 256)
    xa = (rng.standard_normal(shape) * 2 + 3).astype(np.float32)
    sm = rng.standard_normal(shape[1]).astype(np.float32)
    ss = (rng.random(shape[1]) + 0.5).astype(np.float32)
    outa = np.empty_like(xa)
    inorm = _ort_session([helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"],
                                           epsilon=1e-5)], {"s": ss, "b": sm}, threads)

    def numpy_adain():
        mu, var = xa.mean(axis=(2, 3), keepdims=True), xa.var(axis=(2, 3), keepdims=True)
        return (xa - mu) / np.sqrt(var + 1e-5) * ss.reshape(1, -1, 1, 1) + sm.reshape(1, -1, 1, 1)

    cases.append(("adain", "x".join(map(str, shape)),
                  lambda: ops.adain(xa, sm, ss, 1e-5, out=outa),
                  [("ort InstanceNormalization", lambda: inorm.run(None, {"x": xa})),
                   ("numpy mean/var", numpy_adain)], 2 * xa.nbytes, None))
    cases.append(("channel_stats", "x".join(map(str, shape)), lambda: ops.channel_stats(xa),
                  [("numpy mean/var", lambda: (xa.mean(axis=(2, 3)), xa.var(axis=(2, 3))))],
                  xa.nbytes, None))

    h, w = (540, 960) if quick else (1080, 1920)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    pre = np.empty((1, 3, h, w), np.float32)
    cases.append(("preprocess", f"{h}x{w} bgr u8->f32",
                  lambda: ops.preprocess(img, out=pre),
                  [("cv2.dnn.blobFromImage",
                    lambda: cv2.dnn.blobFromImage(img, 1 / 127.5, mean=(127.5,) * 3,
                                                  swapRB=True))],
                  h * w * 3 * 5, None))
    xp = rng.uniform(-1.1, 1.1, (1, 3, h, w)).astype(np.float32)
    post, tmp = np.empty((h, w, 3), np.uint8), np.empty((3, h, w), np.float32)

    def numpy_post():
        np.multiply(xp[0], np.float32(127.5), out=tmp)
        np.add(tmp, np.float32(127.5), out=tmp)
        np.rint(tmp, out=tmp)
        np.clip(tmp, 0, 255, out=tmp)
        return cv2.cvtColor(tmp.transpose(1, 2, 0).astype(np.uint8), cv2.COLOR_RGB2BGR)

    cases.append(("postprocess", f"{h}x{w} f32->bgr u8", lambda: ops.postprocess(xp, out=post),
                  [("numpy + cv2.cvtColor", numpy_post)], h * w * 3 * 5, None))

    hw = 128 if quick else 256
    xs = rng.standard_normal((1, 256, hw, hw)).astype(np.float32)
    ys = np.empty((1, 64, 2 * hw, 2 * hw), np.float32)
    ys_peer = np.empty((1, 64, hw, 2, hw, 2), np.float32)

    def numpy_shuffle(hw=hw):  # hw bound now: the name is reused below
        ys_peer[...] = xs.reshape(1, 64, 2, 2, hw, hw).transpose(0, 1, 4, 2, 5, 3)

    cases.append(("pixel_shuffle", f"r=2 256x{hw}x{hw}", lambda: ops.pixel_shuffle(xs, 2, out=ys),
                  [("numpy reshape/transpose/copy", numpy_shuffle)], 2 * xs.nbytes, None))

    c, hw = (32, 64) if quick else (64, 128)
    xi = rng.standard_normal((c, hw, hw)).astype(np.float32)
    cols = np.empty((c * 9, hw * hw), np.float32)
    xpad = np.zeros((c, hw + 2, hw + 2), np.float32)
    cols_peer = np.empty((c, 3, 3, hw, hw), np.float32)

    def numpy_im2col():
        xpad[:, 1:-1, 1:-1] = xi
        win = np.lib.stride_tricks.sliding_window_view(xpad, (3, 3), axis=(1, 2))
        np.copyto(cols_peer, win.transpose(0, 3, 4, 1, 2))

    cases.append(("im2col", f"3x3 s1 p1 {c}x{hw}x{hw}",
                  lambda: ops.im2col(xi, 3, pad=1, out=cols),
                  [("numpy sliding_window_view", numpy_im2col)], cols.nbytes + xi.nbytes, None))

    xc = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    wc = (rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    bc = rng.standard_normal(c).astype(np.float32)
    conv = ops.Conv2d(wc, bc, pad=1)
    yc = conv(xc)
    conv_ort = _ort_session([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1] * 4)],
                            {"w": wc, "b": bc}, threads)
    cases.append(("conv2d", f"{c}ch {hw}^2 3x3", lambda: conv(xc, out=yc),
                  [("onnxruntime Conv", lambda: conv_ort.run(None, {"x": xc}))], None,
                  2.0 * c * c * 9 * hw * hw))

    size = 512 if quick else 1024
    guide = rng.random((size, size), dtype=np.float32)
    src = rng.random((size, size, 3), dtype=np.float32)
    cases.append(("guided_filter", f"{size}^2 r8 gray guide 3ch src",
                  lambda: ops.guided_filter(guide, src, 8, 1e-2),
                  [("cv2.ximgproc.guidedFilter",
                    lambda: cv2.ximgproc.guidedFilter(guide, src, 8, 1e-2))],
                  guide.nbytes + 2 * src.nbytes, None))
    return cases


# --- the run ----------------------------------------------------------------------------------

class Progress:
    """One line on stderr, rewritten in place on a terminal, one line a step otherwise."""

    def __init__(self, total: int, enabled: bool = True):
        self.total, self.done, self.enabled = total, 0, enabled
        self.tty = sys.stderr.isatty()

    def __call__(self, what: str) -> None:
        self.done += 1
        if self.enabled:
            line = f"[{min(self.done, self.total)}/{self.total}] {what}"
            sys.stderr.write(f"\r{line}\033[K" if self.tty else f"{line}\n")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\n")


def run_bench(*, quick: bool = False, threads: int | None = None, sizes=None,
              progress: bool = True, precision: str = "fp32") -> dict:
    """Measure and return the profile dict (profiles/schema.json). precision: of the native
    stages' convolutions ("auto": each stage chooses on its first run, model/precision.py).
    ValueError before anything is measured for a size the model cannot take."""
    import a2r_edge
    from ..runtime import cpu, scheduler, system

    hw = system.detect_hardware()
    threads = threads or cpu.num_threads()
    sizes = tuple(sizes or ((256,) if quick else CANONICAL_SIZES))
    budget = 0.3 if quick else 1.0  # seconds per figure: --quick stays under a minute on 2 cores
    notes = []
    tmp = tempfile.TemporaryDirectory(prefix="a2r_bench_")
    try:
        model, which = bench_model(tmp.name)
        check_sizes(sizes, model.stride, which)
        notes.append(f"model: {which}")
        if precision != "fp32":
            notes.append(f"native stages' convolutions at precision {precision}")
        try:  # other work on the machine slows every figure: say how busy it was
            notes.append(f"load average at start: {os.getloadavg()[0]:.2f} "
                         f"({os.cpu_count()} CPUs)")
        except OSError:
            pass
        with cpu.using_threads(threads):
            chain = StageChain(model.stages, threads, precision)
            cases = op_cases(quick, threads)
            n_stage_steps = sum(len(chain.backends_of(s.name)) for s in model.stages)
            prog = Progress(4 * threads + len(cases) + n_stage_steps * len(sizes), progress)

            roofline = {"copy_gbps": {}, "fma_gflops": {}, "bf16_gops": {}, "int8_gops": {}}
            for n in range(1, threads + 1):
                prog(f"copy bandwidth {n} thread(s)")
                roofline["copy_gbps"][str(n)] = copy_bandwidth(
                    n, (32 << 20) if quick else (64 << 20), budget) / 1e9
                prog(f"FMA peak {n} thread(s)")
                roofline["fma_gflops"][str(n)] = fma_peak(
                    n, 500_000 if quick else 2_000_000, budget) / 1e9
                for p in ("bf16", "int8"):
                    prog(f"{p} peak {n} thread(s)")
                    roofline[f"{p}_gops"][str(n)] = lowp_peak(
                        p, n, 500_000 if quick else 2_000_000, budget) / 1e9
            peak = roofline["fma_gflops"][str(threads)] * 1e9

            op_rows = []
            for op, case, ours, peers, nbytes, flops in cases:
                prog(f"op {op} {case}")
                t = median_time(ours, rounds=15, budget_s=budget)
                row = {"op": op, "case": case, "backend": "native", "threads": threads,
                       "isa": cpu.isa(), "ms": t * 1e3, "peers": []}
                if nbytes:
                    # judged against copies of the op's own footprint: a footprint that fits
                    # the caches copies faster than the DRAM figure of the roofline section
                    bw = copy_bandwidth(threads, max(nbytes // 2, 1 << 20), budget / 3)
                    row["gbps"] = nbytes / t / 1e9
                    row["roofline_gbps"] = bw / 1e9
                    row["of_roofline"] = nbytes / t / bw
                if flops:
                    row["gflops"] = flops / t / 1e9
                    row["roofline_gflops"] = peak / 1e9
                    row["of_roofline"] = flops / t / peak
                for name, fn in peers:
                    tp = median_time(fn, rounds=15, budget_s=budget)
                    row["peers"].append({"name": name, "ms": tp * 1e3, "ratio": tp / t})
                op_rows.append(row)

            stages = []
            for size in sizes:
                stages += chain.time_stages(size, rounds=5 if quick else 9, budget_s=budget,
                                            progress=prog)
            for e in stages:
                e["threads"] = threads
            prog.close()
        notes += [f"stage {s}: native executor cannot run it ({why}); onnxruntime only"
                  for s, why in chain.unsupported.items()]
        gpu_backends = [b for b in scheduler.available_backends(hw) if b.device == "gpu"]
        if not any(b.available for b in gpu_backends):
            why = gpu_backends[0].why_not if gpu_backends else "no GPU backend"
            notes.append(f"host<->device bandwidth and GPU stages skipped: {why}")
        return {
            "schema": SCHEMA,
            "source": "measured",
            "machine": hw.to_dict(),
            "machine_key": hw.machine_key(),
            "hostname": platform.node() or None,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "version": a2r_edge.__version__,
            "threads": threads,
            "isa": cpu.isa(),
            "quick": quick,
            "model": {"name": model.name, "version": model.version, "which": which,
                      "digest": measure.model_digest(model.stages)},
            "roofline": roofline,
            "host_device": None,
            "ops": op_rows,
            "stages": stages,
            "notes": notes,
        }
    finally:
        tmp.cleanup()


def format_table(profile: dict) -> str:
    lines = [f"a2r_edge {profile['version']} bench, {profile['date']}, {profile['threads']} "
             f"thread(s), CPU kernels {profile['isa']}"]
    m = profile["machine"]
    lines.append(f"machine: {m.get('cpu_model')} ({m.get('architecture')}), "
                 f"{m.get('physical_cores')} physical cores")
    lines.append("\nreference rates (measured here, now: what the ops are compared with)")
    for n, gbps in profile["roofline"]["copy_gbps"].items():
        r = profile["roofline"]
        lines.append(f"  {n} thread(s): copy {gbps:7.1f} GB/s   FMA peak "
                     f"{r['fma_gflops'][n]:7.1f} GFLOP/s"
                     + (f"   bf16 {r['bf16_gops'][n]:7.1f}   int8 {r['int8_gops'][n]:7.1f} Gop/s"
                        if n in r.get("bf16_gops", {}) else ""))
    lines.append("\nops (vs ref: the op's rate as a share of a numpy copy of the same footprint "
                 "(copy) or of the native FMA loop (FMA), both measured beside it. References, "
                 "not ceilings: a read-mostly op or a quieter moment can pass 100%. ratio = peer "
                 "time / ours: > 1 means ours is faster)\n"
                 f"  {'op':<14}{'case':<30}{'ms':>9}{'rate':>15}{'vs ref':>11}  "
                 f"{'peer':<28}{'peer ms':>9}{'ratio':>8}")
    for r in profile["ops"]:
        rate = (f"{r['gflops']:.1f} GFLOP/s" if "gflops" in r else
                f"{r['gbps']:.1f} GB/s" if "gbps" in r else "-")
        ref = "FMA" if "gflops" in r else "copy"
        roof = f"{r['of_roofline']:.0%} {ref}" if "of_roofline" in r else "-"
        for i, p in enumerate(r["peers"] or [{"name": "-", "ms": float("nan"), "ratio": 0}]):
            head = (f"  {r['op']:<14}{r['case']:<30}{r['ms']:>9.3f}{rate:>15}{roof:>11}" if i == 0
                    else " " * 81)
            lines.append(f"{head}  {p['name']:<28}{p['ms']:>9.3f}{p['ratio']:>7.2f}x")
    lines.append(f"\nstages of {profile['model']['which']} "
                 f"(ratio = onnxruntime / native: > 1 means native is faster)")
    lines.append(f"  {'stage':<12}{'kind':<15}{'size':>6}{'native ms':>11}{'ort ms':>9}"
                 f"{'ratio':>8}")
    by = {}
    for e in profile["stages"]:
        by.setdefault((e["stage"], e["kind"], e["size"]), {})[e["backend"]] = e["ms"]
    for (stage, kind, size), t in by.items():
        nat, ort = t.get("native"), t.get("onnxruntime")
        ratio = f"{ort / nat:7.2f}x" if nat and ort else "      -"
        lines.append(f"  {stage:<12}{kind:<15}{size:>6}"
                     f"{(format(nat, '.3f') if nat else '-'):>11}"
                     f"{(format(ort, '.3f') if ort else '-'):>9} {ratio}")
    if profile.get("notes"):
        lines.append("\nnotes")
        lines += [f"  {n}" for n in profile["notes"]]
    return "\n".join(lines)


def check_sizes(sizes, stride: int, which: str) -> None:
    """The stages are timed on square pictures of each size as they are, unpadded (a
    conversion pads to the stride, picture/forward.py): a size that is not a multiple of the
    model's stride comes out of its decoder at another size. ValueError naming them."""
    bad = [s for s in sizes if s % stride]
    if bad:
        near = sorted({s + -s % stride for s in bad})
        raise ValueError(f"stage size(s) {', '.join(map(str, bad))}: the model ({which}) takes "
                         f"multiples of its stride {stride}, e.g. {', '.join(map(str, near))}")


def check_json_path(path: str) -> None:
    """--json PATH, checked before the run (minutes) so that its results can be written: a
    file name whose folder exists or is created now. ValueError in one line otherwise."""
    if not path:
        raise ValueError("--json is empty: give a file name")
    if Path(path).is_dir():
        raise ValueError(f"--json {path} is a folder: give a file name")
    folder = Path(path).parent
    make_folder(folder)
    if not os.access(folder, os.W_OK):
        raise ValueError(f"--json {path}: cannot write in {folder}")


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m a2r_edge.bench",
                           description="Measure this machine and write its hardware profile.")
    parser.add_argument("--quick", action="store_true",
                        help="smaller cases, size 256 only: under a minute on 2 cores")
    parser.add_argument("--json", metavar="PATH", help="write the profile JSON here")
    parser.add_argument("--save-profile", action="store_true",
                        help="store the profile in the per-machine cache the scheduler reads")
    parser.add_argument("--threads", type=positive_int, metavar="N",
                        help="threads for ops and stages; roofline at 1..N (default: the "
                             "kernels' thread count)")
    parser.add_argument("--sizes", type=positive_int, nargs="+", metavar="S",
                        help=f"stage sizes (default {' '.join(map(str, CANONICAL_SIZES))}; "
                             f"--quick: 256)")
    parser.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    parser.add_argument("--precision", default="fp32", choices=PRECISION_CHOICES,
                        help="convolution precision of the native stages timed (auto: each "
                             "stage's fastest keeping the quality guard, chosen on its first "
                             "run); the roofline lists fp32, bf16 and int8 either way")
    args = parser.parse_args(argv)
    from ..runtime import system
    try:
        if args.json is not None:
            check_json_path(args.json)
        profile = run_bench(quick=args.quick, threads=args.threads, sizes=args.sizes,
                            progress=not args.no_progress, precision=args.precision)
        print(format_table(profile))
        if args.json is not None:
            write_json(args.json, profile)
            print(f"\nprofile written to {args.json}")
        if args.save_profile:
            path = system.profile_path()
            write_json(path, profile)
            print(f"profile saved for this machine: {path}")
    except (ValueError, OSError, ImportError) as exc:
        sys.stderr.write(f"a2r_edge.bench: error: {' '.join(str(exc).split())}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
