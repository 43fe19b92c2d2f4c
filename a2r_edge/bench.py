"""``python -m a2r_edge.bench``: measure this machine and write its hardware profile.

Measures, in one run and on this machine only:
  roofline   copy bandwidth (numpy copies at 1..N threads) and FMA peak (the native roofline loop)
  ops        every native op beside its peers (numpy, OpenCV, onnxruntime): time, GB/s or
             GFLOP/s, % of the roofline, ratio to each peer (peer time / our time: > 1 = faster)
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

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

SCHEMA = "a2r_edge.profile/1"
CANONICAL_SIZES = (256, 512, 1024)


# --- timing -----------------------------------------------------------------------------------

def median_time(fn, *, rounds: int = 9, warmup: int = 1, budget_s: float = 1.0) -> float:
    """Median seconds of ``fn()``: ``warmup`` untimed calls, then up to ``rounds`` timed calls,
    stopping early (after at least 3) once ``budget_s`` is spent."""
    return interleaved_median_times([fn], rounds=rounds, warmup=warmup, budget_s=budget_s)[0]


def interleaved_median_times(fns, *, rounds: int = 9, warmup: int = 1,
                             budget_s: float = 1.0) -> list[float]:
    """Median seconds of each of ``fns``, timed in turns (one call of each per round, after
    ``warmup`` untimed calls each), so that a load which comes and goes on a shared machine
    weighs on all of them alike: the ranking is what a plan needs. Up to ``rounds`` rounds,
    stopping early (after at least 3) once ``budget_s`` is spent."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    times = [[] for _ in fns]
    start = time.perf_counter()
    for i in range(rounds):
        for fn, ts in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        if i >= 2 and time.perf_counter() - start > budget_s:
            break
    return [statistics.median(ts) for ts in times]


def copy_bandwidth(threads: int, nbytes: int = 64 << 20, budget_s: float = 1.0) -> float:
    """Copy bandwidth in bytes/s (read + written) of an ``nbytes`` float32 array, ``threads``
    threads each copying its own slice with numpy (it releases the GIL for large copies).
    64 MiB: larger than the last-level cache of the boxes we target, so this is DRAM speed."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    bounds = np.linspace(0, src.size, threads + 1).astype(int)
    slices = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
    with ThreadPoolExecutor(threads) as pool:
        def run():
            list(pool.map(lambda s: np.copyto(dst[s], src[s]), slices))
        t = median_time(run, rounds=9, budget_s=budget_s)
    return 2 * nbytes / t


def fma_peak(threads: int, iters: int = 2_000_000, budget_s: float = 1.0) -> float:
    """FMA throughput in flop/s of the native roofline loop at ``threads`` threads.
    2e6 iterations: 10-20 ms with AVX-512, long enough for a steady median."""
    from . import _kernels
    from .backends import cpu
    with cpu.using_threads(threads):
        flops = _kernels.fma_peak(iters)
        return flops / median_time(lambda: _kernels.fma_peak(iters), budget_s=budget_s)


# --- model stages -----------------------------------------------------------------------------

def tiny_package(folder: Path, features: int = 8, seed: int = 0) -> Path:
    """A tiny random-weight package with the bundled model's stage layout (encode -> adain ->
    decode + input -> guided filter): for machines (and tests) without the bundled model."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from .model.package import sha256_of

    rng = np.random.default_rng(seed)

    def conv(o, c, k=3, scale=1.0):
        return (rng.standard_normal((o, c, k, k)) * scale / np.sqrt(c * k * k)).astype(np.float32)

    def save(nodes, inits, out_channels, name):
        graph = helper.make_graph(
            nodes, name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, None, None, None])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                           [1, out_channels, None, None])],
            [numpy_helper.from_array(v, k) for k, v in inits.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.save(model, folder / f"{name}.onnx")

    folder.mkdir(parents=True, exist_ok=True)
    f = features
    save([helper.make_node("Conv", ["x", "w1", "b1"], ["h1"], strides=[2, 2], pads=[1] * 4),
          helper.make_node("Relu", ["h1"], ["r1"]),
          helper.make_node("Conv", ["r1", "w2", "b2"], ["y"], strides=[2, 2], pads=[1] * 4)],
         {"w1": conv(f, 3), "b1": np.zeros(f, np.float32), "w2": conv(f, f),
          "b2": np.zeros(f, np.float32)}, f, "encoder")
    save([helper.make_node("Conv", ["x", "w1"], ["h1"], pads=[1] * 4),
          helper.make_node("DepthToSpace", ["h1"], ["u1"], blocksize=2, mode="CRD"),
          helper.make_node("Conv", ["u1", "w2"], ["h2"], pads=[1] * 4),
          helper.make_node("DepthToSpace", ["h2"], ["u2"], blocksize=2, mode="CRD"),
          helper.make_node("Tanh", ["u2"], ["y"])],
         {"w1": conv(12, f), "w2": conv(12, 3, scale=0.3)}, 3, "decoder")
    stats = {"mean": [0.0] * f, "std": [1.0] * f}
    (folder / "photo_stats.json").write_text(json.dumps(stats))
    files = ["encoder.onnx", "decoder.onnx", "photo_stats.json"]
    manifest = {"format": "a2r_edge.model/1", "name": "tiny", "version": "0", "license": "MIT",
                "description": "random weights: bench stand-in for the bundled model",
                "scale": 1, "stride": 4, "receptive_field": 23,
                "normalization": {"mean": [0.5] * 3, "std": [0.5] * 3},
                "stages": [{"name": "encode", "kind": "onnx", "file": "encoder.onnx"},
                           {"name": "stylize", "kind": "adain", "stats": "photo_stats.json",
                            "eps": 1e-5},
                           {"name": "decode", "kind": "onnx", "file": "decoder.onnx",
                            "add_input": True},
                           {"name": "enhance", "kind": "guided_filter", "radius": 2,
                            "eps": 1e-3, "detail": 1.5}],
                "files": {n: sha256_of(folder / n) for n in files}}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return folder


def bench_model(tmp: str):
    """(ModelPackage, which): the bundled model when present, else a tiny one made in ``tmp``."""
    from .model import package as pkg
    if (pkg.BUNDLED / pkg.DEFAULT_MODEL / "manifest.json").exists():
        return pkg.resolve(None), f"bundled {pkg.DEFAULT_MODEL}"
    return (pkg.load_package(tiny_package(Path(tmp) / "tiny")),
            f"tiny random-weight stand-in (bundled {pkg.DEFAULT_MODEL} not installed)")


class StageChain:
    """The model's stages, runnable one by one on every CPU backend that can run each, with the
    Engine's stage semantics (AdaIN to the package statistics; the guided filter guided by the
    input's luma; ``add_input`` residual). For timing stages and whole placements.

    runners[(stage, backend)](x, picture) -> y; ``unsupported``: {stage: why native cannot}.
    """

    def __init__(self, stages, threads: int):
        from . import stages as run_stage
        from .backends.ort import OrtSession
        from .model import NativeExecutor, UnsupportedOpError
        from .model.package import load_stats

        self.stages = tuple(stages)
        self.runners, self.unsupported = {}, {}
        for s in self.stages:
            p = s.params
            if s.kind == "onnx":
                try:
                    ex = NativeExecutor(str(p["file"]))
                    self.runners[(s.name, "native")] = (
                        lambda x, picture, s=s, run=ex.run: run_stage.onnx(s, run, x, picture))
                except UnsupportedOpError as exc:
                    self.unsupported[s.name] = str(exc)
                sess = OrtSession(str(p["file"]), threads=threads)
                self.runners[(s.name, "onnxruntime")] = (
                    lambda x, picture, s=s, sess=sess: run_stage.onnx(
                        s, lambda v: sess.run({sess.input_names[0]: v})[0], x, picture))
            elif s.kind == "adain":
                style = load_stats(p["stats"])
                self.runners[(s.name, "native")] = (
                    lambda x, picture, s=s, style=style: run_stage.adain(s, x, style))
            elif s.kind == "guided_filter":
                self.runners[(s.name, "native")] = (
                    lambda x, picture, s=s: run_stage.guided_filter(s, x, run_stage.luma(picture)))

    def backends_of(self, stage: str) -> list[str]:
        return [b for (s, b) in self.runners if s == stage]

    @staticmethod
    def picture(size: int) -> np.ndarray:
        from . import ops
        img = np.random.default_rng(size).integers(0, 256, (size, size, 3), dtype=np.uint8)
        return ops.preprocess(img)

    def run(self, picture: np.ndarray, assignment: dict[str, str]) -> np.ndarray:
        """The whole chain with stage -> backend from ``assignment`` (native by default)."""
        x = picture
        for s in self.stages:
            x = self.runners[(s.name, assignment.get(s.name, "native"))](x, picture)
        return x

    def time_stages(self, size: int, *, rounds: int = 5, budget_s: float = 0.5,
                    progress=None) -> list[dict]:
        """Each (stage, backend) timed on the same input: that stage's input in a chain run
        (ONNX stages: onnxruntime's output feeds the next stage, native where it cannot run).
        Returns profile "stages" entries."""
        picture = self.picture(size)
        x, entries = picture, []
        for s in self.stages:
            x_in = np.array(x, copy=True)
            backends = self.backends_of(s.name)
            if progress:
                progress(f"stage {s.name} {'/'.join(backends)} {size}^2")
            runs = [lambda run=self.runners[(s.name, b)]: run(x_in, picture) for b in backends]
            times = interleaved_median_times(runs, rounds=rounds,
                                             budget_s=budget_s * len(runs))
            y = None
            for backend, run, t in zip(backends, runs, times):
                y = np.array(run(), copy=True)
                entries.append({"stage": s.name, "kind": s.kind, "backend": backend,
                                "device": "cpu", "size": size, "ms": t * 1e3,
                                "out_bytes": int(y.nbytes)})
            x = y
        return entries


# --- ops beside their peers -------------------------------------------------------------------

def _ort_session(nodes, inits, threads):
    from .backends.ort import single_op_session
    return single_op_session(nodes, inits, threads).session


def op_cases(quick: bool, threads: int):
    """(op, case, ours, [(peer name, peer fn)], bytes moved or None, flops or None) per case;
    the same peers as benchmarks/bench_*.py."""
    import cv2
    from onnx import helper
    from . import ops

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
              progress: bool = True) -> dict:
    """Measure and return the profile dict (profiles/schema.json)."""
    import a2r_edge
    from . import hardware, scheduler
    from .backends import cpu

    hw = hardware.detect_hardware()
    threads = threads or cpu.num_threads()
    sizes = tuple(sizes or ((256,) if quick else CANONICAL_SIZES))
    budget = 0.3 if quick else 1.0  # seconds per figure: --quick stays under a minute on 2 cores
    notes = []
    tmp = tempfile.TemporaryDirectory(prefix="a2r_bench_")
    try:
        model, which = bench_model(tmp.name)
        notes.append(f"model: {which}")
        try:  # other work on the machine slows every figure: say how busy it was
            notes.append(f"load average at start: {os.getloadavg()[0]:.2f} "
                         f"({os.cpu_count()} CPUs)")
        except OSError:
            pass
        with cpu.using_threads(threads):
            chain = StageChain(model.stages, threads)
            cases = op_cases(quick, threads)
            n_stage_steps = sum(len(chain.backends_of(s.name)) for s in model.stages)
            prog = Progress(2 * threads + len(cases) + n_stage_steps * len(sizes), progress)

            roofline = {"copy_gbps": {}, "fma_gflops": {}}
            for n in range(1, threads + 1):
                prog(f"copy bandwidth {n} thread(s)")
                roofline["copy_gbps"][str(n)] = copy_bandwidth(
                    n, (32 << 20) if quick else (64 << 20), budget) / 1e9
                prog(f"FMA peak {n} thread(s)")
                roofline["fma_gflops"][str(n)] = fma_peak(
                    n, 500_000 if quick else 2_000_000, budget) / 1e9
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
                      "digest": scheduler.model_digest(model.stages)},
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
    lines.append("\nroofline")
    for n, gbps in profile["roofline"]["copy_gbps"].items():
        lines.append(f"  {n} thread(s): copy {gbps:7.1f} GB/s   FMA peak "
                     f"{profile['roofline']['fma_gflops'][n]:7.1f} GFLOP/s")
    lines.append(f"\nops (%roof: of the copy bandwidth at the op's footprint, or of the FMA "
                 f"peak; ratio = peer time / ours: > 1 means ours is faster)\n"
                 f"  {'op':<14}{'case':<30}{'ms':>9}{'rate':>15}{'%roof':>7}  "
                 f"{'peer':<28}{'peer ms':>9}{'ratio':>8}")
    for r in profile["ops"]:
        rate = (f"{r['gflops']:.1f} GFLOP/s" if "gflops" in r else
                f"{r['gbps']:.1f} GB/s" if "gbps" in r else "-")
        roof = f"{r['of_roofline']:.0%}" if "of_roofline" in r else "-"
        for i, p in enumerate(r["peers"] or [{"name": "-", "ms": float("nan"), "ratio": 0}]):
            head = (f"  {r['op']:<14}{r['case']:<30}{r['ms']:>9.3f}{rate:>15}{roof:>7}" if i == 0
                    else " " * 77)
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


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints the whole usage otherwise)
        sys.stderr.write(f"python -m a2r_edge.bench: error: {message}\n")
        sys.exit(2)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="python -m a2r_edge.bench",
                     description="Measure this machine and write its hardware profile.")
    parser.add_argument("--quick", action="store_true",
                        help="smaller cases, size 256 only: under a minute on 2 cores")
    parser.add_argument("--json", metavar="PATH", help="write the profile JSON here")
    parser.add_argument("--save-profile", action="store_true",
                        help="store the profile in the per-machine cache the scheduler reads")
    parser.add_argument("--threads", type=_positive, metavar="N",
                        help="threads for ops and stages; roofline at 1..N (default: the "
                             "kernels' thread count)")
    parser.add_argument("--sizes", type=_positive, nargs="+", metavar="S",
                        help=f"stage sizes (default {' '.join(map(str, CANONICAL_SIZES))}; "
                             f"--quick: 256)")
    parser.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    from . import hardware
    try:
        profile = run_bench(quick=args.quick, threads=args.threads, sizes=args.sizes,
                            progress=not args.no_progress)
    except (ValueError, OSError, ImportError) as exc:
        sys.stderr.write(f"python -m a2r_edge.bench: error: {exc}\n")
        return 2
    print(format_table(profile))
    if args.json:
        hardware.write_json_atomic(args.json, profile)
        print(f"\nprofile written to {args.json}")
    if args.save_profile:
        path = hardware.profile_path()
        hardware.write_json_atomic(path, profile)
        print(f"profile saved for this machine: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
