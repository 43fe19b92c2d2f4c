"""Measuring on this machine: median timings, copy bandwidth, FMA peak, and the model's
stages on every CPU backend (``StageChain``). The scheduler's calibration and the bench CLI
(apps/bench.py, ``python -m a2r_edge.bench``) both measure through this module.

Method: each figure is the median of several timed calls after warm-up calls, with a time budget
per figure (slow cases get fewer rounds, never fewer than 3). Shared machines are noisy: compare
the ratios of one run, not absolute times across runs.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import statistics
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np


# --- timing -----------------------------------------------------------------------------------

def median_time(fn, *, rounds: int = 9, warmup: int = 1, budget_s: float = 1.0) -> float:
    """Median seconds of ``fn()``: ``warmup`` untimed calls, then up to ``rounds`` timed calls,
    stopping early (after at least 3) once ``budget_s`` is spent."""
    return interleaved_median_times([fn], rounds=rounds, warmup=warmup, budget_s=budget_s)[0]


def interleaved_median_times(fns, *, rounds: int = 9, warmup: int = 1,
                             budget_s: float = 1.0, clock=None) -> list[float]:
    """Median seconds of each of ``fns``, timed in turns (one call of each per round, after
    ``warmup`` untimed calls each), so that a load which comes and goes on a shared machine
    weighs on all of them alike: the ranking is what a plan needs. Up to ``rounds`` rounds,
    stopping early (after at least 3) once ``budget_s`` (wall time) is spent. clock: what is
    timed, wall time (``time.perf_counter``) by default; ``time.process_time`` gives this
    process's CPU seconds, which time spent waiting for a busy core does not inflate (meaningful
    for single-threaded calls)."""
    clock = clock or time.perf_counter
    for fn in fns:
        for _ in range(warmup):
            fn()
    times = [[] for _ in fns]
    start = time.perf_counter()
    for i in range(rounds):
        for fn, ts in zip(fns, times):
            t0 = clock()
            fn()
            ts.append(clock() - t0)
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
    from .. import _kernels
    from . import cpu
    with cpu.using_threads(threads):
        flops = _kernels.fma_peak(iters)
        return flops / median_time(lambda: _kernels.fma_peak(iters), budget_s=budget_s)


def lowp_peak(precision: str, threads: int, iters: int = 2_000_000,
              budget_s: float = 1.0) -> float:
    """Multiply-add throughput in op/s (2 per multiply-add) of conv2d_lowp's micro-kernel at
    "bf16" or "int8" on operands in L1, at ``threads`` threads and the active ISA level: the
    roofline ceiling of that precision, as fma_peak is fp32's."""
    from .. import _kernels
    from . import cpu
    code = {"bf16": 1, "int8": 2}[precision]
    with cpu.using_threads(threads):
        ops = _kernels.lowp_peak(code, iters)
        return ops / median_time(lambda: _kernels.lowp_peak(code, iters), budget_s=budget_s)


# --- model stages -----------------------------------------------------------------------------

def tiny_package(folder: Path, features: int = 8, seed: int = 0) -> Path:
    """A tiny random-weight package with the bundled model's stage layout (encode -> adain ->
    decode + input -> guided filter): for machines (and tests) without the bundled model."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from ..model.package import write_manifest

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
    manifest = {"name": "tiny", "version": "0", "license": "MIT",
                "description": "random weights: bench stand-in for the bundled model",
                "scale": 1, "stride": 4, "receptive_field": 23,
                "normalization": {"mean": [0.5] * 3, "std": [0.5] * 3},
                "stages": [{"name": "encode", "kind": "onnx", "file": "encoder.onnx"},
                           {"name": "stylize", "kind": "adain", "stats": "photo_stats.json",
                            "eps": 1e-5},
                           {"name": "decode", "kind": "onnx", "file": "decoder.onnx",
                            "add_input": True},
                           {"name": "enhance", "kind": "guided_filter", "radius": 2,
                            "eps": 1e-3, "detail": 1.5}]}
    write_manifest(folder, manifest, ["encoder.onnx", "decoder.onnx", "photo_stats.json"])
    return folder


def bench_model(tmp: str):
    """(ModelPackage, which): the bundled model when present, else a tiny one made in ``tmp``."""
    from ..model import package as pkg
    if (pkg.BUNDLED / pkg.DEFAULT_MODEL / "manifest.json").exists():
        return pkg.resolve(None), f"bundled {pkg.DEFAULT_MODEL}"
    return (pkg.load_package(tiny_package(Path(tmp) / "tiny")),
            f"tiny random-weight stand-in (bundled {pkg.DEFAULT_MODEL} not installed)")


class StageChain:
    """The model's stages, runnable one by one on every CPU backend that can run each, with the
    Engine's stage semantics (AdaIN to the package statistics; the guided filter guided by the
    input's luma; ``add_input`` residual) and the Engine's runners (``runners.StageRunners``:
    the native executor, onnxruntime through IOBinding). For timing stages and placements.

    runners[(stage, backend)](x, picture) -> y; ``unsupported``: {stage: why native cannot}.
    """

    def __init__(self, stages, threads: int, precision: str = "fp32"):
        from ..model.package import load_stats
        from ..picture import stages as run_stage
        from .runners import StageRunners

        self.stages = tuple(stages)
        self.runners = {}
        onnx = StageRunners(self.stages, precision=precision)  # the runners conversion uses
        self.unsupported = dict(onnx.unsupported)
        for s in self.stages:
            p = s.params
            if s.kind == "onnx":
                for backend in onnx.backends_of(s.name):
                    self.runners[(s.name, backend)] = (
                        lambda x, picture, s=s, run=onnx.get(s, backend, threads):
                        run_stage.onnx(s, run, x, picture))
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
        from .. import ops
        img = np.random.default_rng(size).integers(0, 256, (size, size, 3), dtype=np.uint8)
        return ops.preprocess(img)

    def run(self, picture: np.ndarray, assignment: dict[str, str]) -> np.ndarray:
        """The whole chain with stage -> backend from ``assignment`` (native by default)."""
        x = picture
        for s in self.stages:
            x = self.runners[(s.name, assignment.get(s.name, "native"))](x, picture)
        return x

    def time_stages(self, size: int, *, rounds: int = 5, budget_s: float = 0.5, warmup: int = 1,
                    progress=None) -> list[dict]:
        """Each (stage, backend) timed on the same input: that stage's input in a chain run
        (ONNX stages: onnxruntime's output feeds the next stage, native where it cannot run),
        after ``warmup`` untimed calls (``interleaved_median_times``). Returns profile "stages"
        entries."""
        picture = self.picture(size)
        x, entries = picture, []
        for s in self.stages:
            x_in = np.array(x, copy=True)
            backends = self.backends_of(s.name)
            if progress:
                progress(f"stage {s.name} {'/'.join(backends)} {size}^2")
            last = {}   # each backend's latest output, intact until its next call

            def call(b, run):
                return lambda: last.__setitem__(b, run(x_in, picture))

            times = interleaved_median_times([call(b, self.runners[(s.name, b)])
                                              for b in backends], rounds=rounds,
                                             warmup=warmup, budget_s=budget_s * len(backends))
            for backend, t in zip(backends, times):
                entries.append({"stage": s.name, "kind": s.kind, "backend": backend,
                                "device": "cpu", "size": size, "ms": t * 1e3,
                                "out_bytes": int(last[backend].nbytes)})
            x = last[backends[-1]]   # the last call made; the next stage copies it first
        return entries

    def slowest_call(self, size: int) -> float:
        """Seconds of the longest single call among the stages and backends at ``size``: one
        call each after a warm-up call: a first call plans, which took the bundled model's
        slowest 64^2 call to 6.8-11 ms against 1.6-2.2 ms warm (scaled to 512^2, 0.43-0.70 s
        against its 0.055 s calls there; 2 threads, Zen 4). A native call may run at 1 thread
        while its steps' thread counts are measured (step_threads): the figure errs high."""
        return max(e["ms"] for e in self.time_stages(size, rounds=1, warmup=1)) / 1e3


# --- the model's stages measured once per machine: calibration --------------------------------

# The size plans are costed at: stage times do not scale alike across backends (the bundled
# encoder: native 8.9 vs onnxruntime 7.8 ms at 256x256 but 26 vs 32 ms at 512x512; at 128x128 even
# the decoder measured faster on onnxruntime), so calibrating smaller misplaces stages. The 0.3 s
# budget per stage and backend keeps it at a few seconds (2.3 s here for a2r_lite, loaded box; 3
# rounds at least, after a warm-up call). A model whose stages do not fit A2R_MEMORY_MB at this
# size (or an Engine's tile) is measured at the largest of its halvings that fits, down to
# MIN_CALIBRATION_SIZE (the smallest tile, tiling.tile_size; every halving is a multiple of any
# model stride up to 64).
CALIBRATION_SIZE = 512
MIN_CALIBRATION_SIZE = 64
# A model whose slowest call would take longer than this at a calibration size (estimated from
# one call of each stage and backend at the smallest size, scaled by the pixels) is measured at
# the largest size whose estimate fits: such a model's times follow its pixels, and measuring
# it at 512x512 took 104 s (a 120-layer, 64-channel CNN at 2 threads: every call 7.6-10.8 s).
CALL_BUDGET_S = 1.0


def model_digest(stages) -> str:
    """Identity of a model's stages (kinds, parameters, file contents; not file paths): the
    key its measured stage times are kept under."""
    from ..model.package import sha256_of
    h = hashlib.sha256()
    for s in stages:
        h.update(f"{s.name}|{s.kind}".encode())
        for key, value in sorted(s.params.items()):
            if key in ("file", "stats") and value is not None and os.path.exists(str(value)):
                value = sha256_of(value)
            h.update(f"|{key}={value}".encode())
    return h.hexdigest()[:16]


# --- calibration ------------------------------------------------------------------------------

def calibration_paths(digest: str, threads: int, sizes: list[int]) -> list[str]:
    """Where the calibration of the model ``digest`` (``model_digest``) at each of ``sizes`` is
    cached; the sizes after the first are fallbacks, taken because a larger one did not fit
    A2R_MEMORY_MB (or would take too long: CALL_BUDGET_S), so the limit is in their names (a raised
    limit measures the larger size anew instead of reusing the smaller one). The machine key and
    the model's digest are made once (the digest hashes every stage file)."""
    from .. import _settings
    from . import cpu, system
    stem = os.path.join(system.cache_dir(), f"calibration-{system.machine_key()}-{digest}-"
                                            f"{cpu.build_id()}")
    limit = f"-within{_settings.get('A2R_MEMORY_MB')}MB"
    return [f"{stem}{limit if i else ''}-{size}px-{threads}t.json"
            for i, size in enumerate(sizes)]


def calibration_sizes(largest: int = CALIBRATION_SIZE) -> list[int]:
    """The sizes a calibration tries, largest first: CALIBRATION_SIZE and its halves down to
    MIN_CALIBRATION_SIZE, those above ``largest`` (an Engine's tile) left out; at least the
    smallest."""
    sizes, size = [], CALIBRATION_SIZE
    while size >= MIN_CALIBRATION_SIZE:
        if size <= largest:
            sizes.append(size)
        size //= 2
    return sizes or [MIN_CALIBRATION_SIZE]


def stage_figures(entries):
    """(stage, backend, size, ms, out_bytes or None) of each stage figure in ``entries`` (from a
    file: a list of {"stage": str, "backend": str, "size": int > 0, "ms": number >= 0,
    "out_bytes"?}); ValueError naming the first that is not one."""
    if not isinstance(entries, (list, tuple)):
        raise ValueError(f"stage figures must be a list, got {type(entries).__name__}")
    figures = []
    for e in entries:
        try:
            stage, backend = e["stage"], e["backend"]
            size, ms = int(e["size"]), float(e["ms"])
            out_bytes = None if e.get("out_bytes") is None else int(e["out_bytes"])
        except (TypeError, KeyError, ValueError, AttributeError) as exc:
            raise ValueError(f"bad stage figure {e!r}: {type(exc).__name__} {exc}") from None
        if not (isinstance(stage, str) and isinstance(backend, str) and size > 0
                and 0 <= ms < float("inf")):
            raise ValueError(f"bad stage figure {e!r}")
        figures.append((stage, backend, size, ms, out_bytes))
    return figures


def _cached_calibration(path: str) -> dict | None:
    """The calibration cached at ``path``; None when there is none, or (with one warning) when
    it is damaged: then the stages are measured again and the file rewritten."""
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
    else:
        try:
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            if not data.get("stages"):
                raise ValueError("no stage figures")
            stage_figures(data["stages"])
            if not isinstance(data.get("threads"), int) or not isinstance(data.get("date"), str):
                raise ValueError("threads or date missing")
        except ValueError as exc:
            reason = str(exc)
        else:
            data["cached"] = path
            return data
    warnings.warn(f"ignoring the damaged calibration cache {path} ({reason[:200]}); "
                  f"measuring again", RuntimeWarning, stacklevel=3)
    return None


def calibrate(stages, threads: int | None = None, *, size: int = CALIBRATION_SIZE,
              use_cache: bool = True) -> dict:
    """Stage times of ``stages`` on every CPU backend (a profile-like dict with "stages" entries
    and the "size" they were measured at), measured once per machine, model and thread count and
    then read from the cache: the first of ``calibration_sizes(size)`` cached, else measured at the
    first whose native plans fit A2R_MEMORY_MB and whose slowest call is estimated within
    CALL_BUDGET_S (MemoryLimitError, naming no size, when none fits). A smaller size's cache is
    kept under the limit it was taken at (``calibration_paths``). A cache that cannot be written is
    not an error (the figures are still used)."""
    import a2r_edge

    from .. import _settings
    from ..model.specialise import MemoryLimitError
    from . import cpu, files

    threads = threads or cpu.num_threads()
    sizes = calibration_sizes(size)
    digest = model_digest(stages)
    paths = calibration_paths(digest, threads, sizes)
    for size, path in zip(sizes, paths) if use_cache else ():
        data = _cached_calibration(path)
        if data is not None:
            data["size"] = size
            return data
    chain = StageChain(stages, threads)   # loaded once, timed at each size tried
    probe = None                          # (smallest size, its slowest call in seconds)
    for size, path in zip(sizes, paths):
        try:
            with cpu.using_threads(threads):
                if size > sizes[-1]:
                    probe = probe or (sizes[-1], chain.slowest_call(sizes[-1]))
                    if probe[1] * (size / probe[0]) ** 2 > CALL_BUDGET_S:
                        continue
                # 5 rounds x 0.3 s budget per (stage, backend): a few ms each at 512x512 on
                # small models; a large one takes 4 calls of at most about CALL_BUDGET_S each.
                entries = chain.time_stages(size, rounds=5, budget_s=0.3)
        except MemoryLimitError:
            continue
        data = {"schema": "a2r_edge.calibration/1", "source": "calibration",
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                    timespec="seconds"),
                "version": a2r_edge.__version__, "threads": threads, "size": size,
                "model": {"digest": digest}, "stages": entries}
        try:
            files.write_json(path, data)
            data["cached"] = path
        except OSError:
            data["cached"] = None
        return data
    raise MemoryLimitError(f"the model's stages do not fit A2R_MEMORY_MB="
                           f"{_settings.get('A2R_MEMORY_MB')} MiB at any calibration size")
