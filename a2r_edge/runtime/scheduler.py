"""Where each stage of a model runs, and why: the ``Plan``.

``make_plan`` enumerates every placement of the model's stages on the backends that can run
them, costs each placement with measured figures, and keeps the best:

- backends (``available_backends``): ``native`` (our CPU kernels and the native ONNX executor)
  and ``onnxruntime`` on the CPU; ``cuda`` (our CUDA kernels) and ``onnxruntime-cuda`` on the
  GPU. The GPU ones are unavailable in this build (no CUDA library): they exist so profiles can
  carry their figures and tests can plan for GPU boxes. A GPU backend plugs in by becoming
  available here; the cost model does not change.
- figures (``Costs``): stage times per backend and size, each stage's output bytes, and the
  host<->device link (GB/s each way + a fixed latency per copy), from a profile
  (``python -m a2r_edge.bench``, profiles/schema.json) or, with none stored for this model, a
  short calibration (measure.calibrate: the model's stages on each CPU backend at
  CALIBRATION_SIZE, 512x512, or the largest smaller size that fits A2R_MEMORY_MB and the
  Engine's tile, through the runners conversion uses, under 5 s), cached per machine and model
  in ``system.cache_dir()``.
- cost of a placement: latency = stage times + every copy between devices (the picture goes
  up as uint8 when the first stage is on the GPU, results come down as uint8 when the last is;
  a stage's output moves when the next stage is elsewhere; the picture itself moves to a device
  whose stage needs it: guided filter, ``add_input``). Frame time for streams: stages of
  successive frames overlap across devices, so the busiest of CPU, GPU and the copy link
  bounds the throughput (when a spare core can drive the GPU; else frame time = latency).
- objective: "latency" (single pictures) minimises latency; "throughput" (batches, streams)
  minimises frame time. Ties keep fewer device changes, then the native backend.
- threads: pools that run at the same time never sum to more than the cores. Stages on one
  device run one after another, so OpenMP and onnxruntime may each use every core (their waits
  are passive: OMP_WAIT_POLICY=PASSIVE after a short spin, allow_spinning=0:
  _settings.export_openmp_waits, runtime/ort.py);
  when a throughput plan overlaps a GPU with the CPU, one core is kept for the thread that
  drives the GPU.

The GPU is never assumed faster: without measured GPU figures a GPU placement is not costed
and not chosen, and a measured GPU slower than the CPU (Jetson-like) gets a CPU plan whose
``describe()`` says so.
"""
from __future__ import annotations

import dataclasses
import itertools
import warnings

from ..model.specialise import MemoryLimitError
from . import cpu
from .measure import CALIBRATION_SIZE, calibrate, model_digest, stage_figures

DEVICES = ("auto", "cpu", "gpu", "split")
BACKENDS = ("native", "onnxruntime")  # what ``backend=`` may force for the ONNX stages
OBJECTIVES = ("latency", "throughput")
REFERENCE_SIZE = 512    # the picture size plans are costed at when none is given
# Relative difference below which two placements' estimates are a tie: the bundled encoder's
# native and onnxruntime times (26 vs 32 ms at 512x512 on an idle box) swapped places in a
# calibration taken while other jobs ran.
NOISE = 0.10
# GPU stages need the CUDA library, a driver and a device, and an Engine that runs stages on
# the device: the last does not exist yet, so GPU backends are listed but never available.
NO_GPU_ENGINE = ("the Engine does not run stages on the GPU yet (a2r_edge.runtime.cuda "
                 "exposes the CUDA kernels directly)")


def _gpu_unavailable_reason() -> str:
    from . import cuda
    why = cuda.why_unavailable()
    return f"no usable CUDA library: {why}" if why else NO_GPU_ENGINE


@dataclasses.dataclass(frozen=True)
class Backend:
    """A place a stage can run. ``kinds``: the stage kinds it runs."""
    name: str        # "native", "onnxruntime", "cuda", "onnxruntime-cuda"
    device: str      # "cpu" or "gpu"
    kinds: tuple[str, ...]
    available: bool = True
    why_not: str = ""  # why it is unavailable


def available_backends(hw=None) -> tuple[Backend, ...]:
    """Every backend, available or not (with the reason). ``hw``: a HardwareProfile (only to
    say whether onnxruntime offers its CUDA provider; default: asked of onnxruntime when there
    is a GPU to run it on, so a CPU-only plan never loads onnxruntime)."""
    why = _gpu_unavailable_reason()
    if hw is not None:
        ort_cuda = bool(hw.onnxruntime_cuda)
    elif why == NO_GPU_ENGINE:  # a usable GPU: does onnxruntime offer its CUDA provider?
        from .system import onnxruntime_providers
        ort_cuda = "CUDAExecutionProvider" in (onnxruntime_providers() or ())
    else:  # no usable GPU, the reason for both GPU backends: onnxruntime is not loaded to ask
        ort_cuda = None
    return (
        Backend("native", "cpu", ("onnx", "adain", "guided_filter")),
        Backend("onnxruntime", "cpu", ("onnx",)),
        Backend("cuda", "gpu", ("adain", "guided_filter"), False, why),
        Backend("onnxruntime-cuda", "gpu", ("onnx",), False,
                "onnxruntime does not offer its CUDA provider (install onnxruntime-gpu)"
                if ort_cuda is False else why),
    )


# --- figures ----------------------------------------------------------------------------------

class Costs:
    """Measured figures: stage times (ms) per (stage, backend) and size, output bytes per stage
    and size, and the host<->device link. ``source`` says where they came from."""

    def __init__(self, entries=(), host_device: dict | None = None, source: str = "none"):
        """ValueError when ``entries`` (from a file) are not stage figures: a list of
        {"stage": str, "backend": str, "size": int > 0, "ms": number >= 0, "out_bytes"?}."""
        self.ms: dict[tuple[str, str], dict[int, float]] = {}
        self.out: dict[str, dict[int, int]] = {}
        for stage, backend, size, ms, out_bytes in stage_figures(entries):
            self.ms.setdefault((stage, backend), {})[size] = ms
            if out_bytes is not None:
                self.out.setdefault(stage, {})[size] = out_bytes
        if host_device is not None and not isinstance(host_device, dict):
            raise ValueError(f"host_device must be an object, got {type(host_device).__name__}")
        self.link = host_device or None
        self.source = source

    @classmethod
    def from_profile(cls, profile: dict, source: str, with_stages: bool = True) -> "Costs":
        return cls(profile.get("stages") or () if with_stages else (),
                   profile.get("host_device"), source)

    def merged(self, other: "Costs") -> "Costs":
        """These figures, completed by ``other``'s where these have none."""
        out = Costs(source=f"{self.source} + {other.source}")
        out.ms = {**other.ms, **self.ms}
        out.out = {**other.out, **self.out}
        out.link = self.link or other.link
        return out

    def has(self, stage: str, backend: str) -> bool:
        return (stage, backend) in self.ms

    @staticmethod
    def _scaled(table: dict[int, float], size: int) -> float | None:
        """The figure at the measured size nearest ``size`` (in pixel count), scaled by pixel
        count: the stages are convolutions and filters, linear in the pixels."""
        if not table:
            return None
        near = min(table, key=lambda s: abs(s * s - size * size))
        return table[near] * (size * size) / (near * near)

    def stage_s(self, stage: str, backend: str, size: int) -> float | None:
        ms = self._scaled(self.ms.get((stage, backend), {}), size)
        return None if ms is None else ms / 1e3

    def out_bytes(self, stage: str, size: int) -> float | None:
        return self._scaled(self.out.get(stage, {}), size)

    def transfer_s(self, nbytes: float | None, src: str, dst: str) -> float | None:
        """Seconds to copy ``nbytes`` from device ``src`` to ``dst``; None when unmeasured."""
        if src == dst:
            return 0.0
        if nbytes is None or not self.link:
            return None
        gbps = self.link.get("h2d_gbps" if dst == "gpu" else "d2h_gbps")
        if not gbps:
            return None
        return nbytes / (gbps * 1e9) + self.link.get("latency_us", 0.0) / 1e6


# --- the plan ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Placement:
    stage: str
    backend: str  # "native", "onnxruntime", "cuda", "onnxruntime-cuda"
    device: str   # "cpu" or "gpu"
    reason: str
    est_ms: float | None = None  # this stage's estimated time at the plan's size


@dataclasses.dataclass(frozen=True)
class Plan:
    device: str                  # "cpu", "gpu" or "split": where the stages run
    threads: int                 # native (OpenMP) kernel threads
    isa: str
    placements: tuple[Placement, ...]
    ort_threads: int = 0         # onnxruntime intra-op threads (0: no CPU onnxruntime stage)
    gpu_host_threads: int = 0    # CPU threads that drive the GPU
    cores: int = 0               # the CPU threads this plan may use in all
    overlap: bool = False        # CPU and GPU stages of successive frames run at once
    objective: str = "latency"
    size: int = REFERENCE_SIZE   # picture side the estimates are for
    est_latency_ms: float | None = None
    est_frame_ms: float | None = None
    costs_source: str = "none"
    why: str = ""                # why this placement beat the others
    unavailable: tuple[str, ...] = ()  # backends that could not be used, with the reason
    # (stage, precision, why) of the native stages' convolutions (Engine(precision=...))
    precisions: tuple[tuple[str, str, str], ...] = ()

    def with_precisions(self, chosen: dict) -> "Plan":
        """This plan noting {stage: {"precision", "reason", ...}} (model/precision.py)."""
        return dataclasses.replace(self, precisions=tuple(
            (stage, e["precision"], e["reason"] + (" [stored]" if e.get("stored") else ""))
            for stage, e in chosen.items()))

    def backend_of(self, stage: str) -> str:
        return next(p.backend for p in self.placements if p.stage == stage)

    @property
    def concurrent_threads(self) -> int:
        """The most CPU threads busy at one time: pools that overlap add up, pools that take
        turns do not (onnxruntime and OpenMP stages on the CPU run one after another)."""
        cpu_pool = max(self.threads, self.ort_threads)
        if self.overlap:
            return cpu_pool + self.gpu_host_threads
        return max(cpu_pool, self.gpu_host_threads)

    def describe(self) -> str:
        est = ""
        if self.est_latency_ms is not None:
            est = (f", est. {self.est_latency_ms:.2f} ms latency / {self.est_frame_ms:.2f} ms "
                   f"per frame at {self.size}x{self.size}")
        lines = [f"plan: device={self.device}, objective={self.objective}{est}",
                 f"  threads: native (OpenMP) {self.threads}, onnxruntime {self.ort_threads}, "
                 f"GPU driver {self.gpu_host_threads}; at most {self.concurrent_threads} busy "
                 f"at once of {self.cores}; CPU kernels {self.isa}",
                 f"  figures: {self.costs_source}"]
        if self.why:
            lines.append(f"  why: {self.why}")
        for p in self.placements:
            lines.append(f"  {p.stage:<12} {p.device}/{p.backend:<16} {p.reason}")
        for stage, precision, why in self.precisions:
            lines.append(f"  {stage:<12} convolutions at {precision}: {why}")
        for u in self.unavailable:
            lines.append(f"  unavailable: {u}")
        return "\n".join(lines)


def check_device(device, backends=None) -> str:
    """``device`` checked; "gpu"/"split" without an available GPU backend is a ValueError that
    names the missing CUDA library."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    backends = available_backends() if backends is None else backends
    if device in ("gpu", "split") and not any(b.available and b.device == "gpu"
                                              for b in backends):
        why = next((b.why_not for b in backends if b.device == "gpu" and b.why_not),
                   NO_GPU_ENGINE)
        raise ValueError(f"device={device!r} needs a GPU backend: {why}; use 'cpu' or 'auto'")
    return device


def _figures(stages, profile, calibrate_missing: bool, choices, tile: int | None) -> Costs:
    """The figures for ``stages``: ``profile`` as given; else the stored profile (its stage
    times only when measured on this model); calibration for CPU choices still unmeasured (at
    most ``tile`` pixels a side when given)."""
    from . import system
    if profile is not None:
        return Costs.from_profile(profile, "the given profile")
    costs = Costs()
    stored = system.load_profile()
    if stored is not None:
        model = stored.get("model")
        same_model = isinstance(model, dict) and model.get("digest") == model_digest(stages)
        try:
            costs = Costs.from_profile(stored, f"profile {stored.get('date', '?')} ("
                                       f"{stored.get('source', '?')})", with_stages=same_model)
        except ValueError as exc:
            if system.profile_is_explicit():
                raise ValueError(f"hardware profile {system.profile_source()}: {exc}") from None
            warnings.warn(f"ignoring the damaged cached profile {system.profile_source()} "
                          f"({str(exc)[:200]})", RuntimeWarning, stacklevel=2)
    needed = [(s.name, b.name) for s, opts in zip(stages, choices) if len(opts) > 1
              for b in opts if b.device == "cpu"]
    if calibrate_missing and any(not costs.has(*k) for k in needed):
        data = calibrate(stages, size=tile or CALIBRATION_SIZE)
        where = f"cached in {data['cached']}" if data.get("cached") else "not cached"
        cal = Costs(data["stages"], source=f"calibration at {data['size']}x{data['size']}, "
                                           f"{data['threads']} thread(s), {data['date']} "
                                           f"({where})")
        costs = costs.merged(cal) if costs.ms or costs.link else cal
    return costs


# --- choosing ---------------------------------------------------------------------------------

def _choices(stages, backends, device, backend, unsupported, lowp: bool):
    choices = []
    for s in stages:
        opts = [b for b in backends if b.available and s.kind in b.kinds]
        if s.kind == "onnx":
            if s.name in unsupported:
                if backend == "native":
                    raise ValueError(f"stage {s.name!r} cannot run natively: "
                                     f"{unsupported[s.name]}")
                opts = [b for b in opts if b.name != "native"]
            if backend is not None:
                opts = [b for b in opts if b.name == backend]
            elif lowp and s.name not in unsupported:
                opts = [b for b in opts if b.device != "cpu" or b.name == "native"]
        if device == "cpu":
            opts = [b for b in opts if b.device == "cpu"]
        elif device == "gpu" and any(b.device == "gpu" for b in opts):
            opts = [b for b in opts if b.device == "gpu"]
        if not opts:
            raise ValueError(f"no backend can run stage {s.name!r} (kind {s.kind!r}) with "
                             f"device={device!r}, backend={backend!r}")
        choices.append(opts)
    return choices


def _cost(stages, combo, costs: Costs, size: int, overlap_ok: bool):
    """(latency s, frame s, per-stage s) of one placement; None when a figure is missing."""
    busy = {"cpu": 0.0, "gpu": 0.0}
    link, per_stage = 0.0, []
    u8 = 3 * size * size          # the picture as uint8 BGR
    picture_f32 = 4 * u8          # the normalised picture, float32 NCHW
    first = combo[0].device
    if first == "gpu":            # preprocess runs on the GPU: the uint8 picture goes up
        t = costs.transfer_s(u8, "cpu", "gpu")
        if t is None:
            return None
        link += t
    picture_on, prev_dev, prev_bytes = {first}, first, picture_f32
    for s, b in zip(stages, combo):
        t = costs.stage_s(s.name, b.name, size)
        if t is None:
            return None
        moves = [(prev_bytes, prev_dev)] if b.device != prev_dev else []
        if (s.kind == "guided_filter" or s.params.get("add_input")) and \
                b.device not in picture_on:
            moves.append((picture_f32, first))
            picture_on.add(b.device)
        for nbytes, src in moves:
            tt = costs.transfer_s(nbytes, src, b.device)
            if tt is None:
                return None
            link += tt
        busy[b.device] += t
        per_stage.append(t)
        prev_dev, prev_bytes = b.device, costs.out_bytes(s.name, size)
    if prev_dev == "gpu":         # postprocess on the GPU: the uint8 result comes down
        t = costs.transfer_s(u8, "gpu", "cpu")
        if t is None:
            return None
        link += t
    latency = busy["cpu"] + busy["gpu"] + link
    uses_both = {b.device for b in combo} == {"cpu", "gpu"} or first == "gpu"
    frame = max(busy["cpu"], busy["gpu"], link) if overlap_ok and uses_both else latency
    return latency, frame, per_stage


def _kind(combo) -> str:
    devices = {b.device for b in combo}
    return "split" if len(devices) > 1 else devices.pop()


def make_plan(stages, device: str = "auto", backend: str | None = None,
              unsupported: dict[str, str] | None = None, *, objective: str = "latency",
              size: int | None = None, profile: dict | None = None, backends=None,
              cores: int | None = None, calibrate: bool = True, precision: str = "fp32",
              tile: int | None = None) -> Plan:
    """The best plan for ``stages`` (the model's Stage list).

    device: "auto" | "cpu" | "gpu" | "split". backend: force every ONNX stage onto "native" or
    "onnxruntime". precision: of the native convolutions (model/precision.py); one other than
    "fp32" keeps the ONNX stages that run on the CPU on the native executor, the one CPU backend
    that has it (onnxruntime's CPU stays fp32), while the GPU backends stay candidates; the
    stages are costed at their fp32 figures. unsupported: {stage: why the native executor
    cannot run it}. objective: "latency" (single pictures) or "throughput" (batches, streams).
    size: picture side to cost at (default 512). profile: a profile dict to use instead of the
    stored one / calibration. backends: the Backend list (default ``available_backends()``;
    tests pass GPU ones).
    cores: CPU threads to share out (default: the kernels' thread count). calibrate: measure
    the stages when no figures exist (False: fall back to the native backend by rule); tile:
    the Engine's tile size, the largest picture the calibration then measures (pictures are
    converted in such tiles). A model that fits A2R_MEMORY_MB at no calibration size is planned
    without figures (native by rule): the build never fails on the calibration's size.

    >>> from a2r_edge.model import package
    >>> plan = make_plan(package.resolve(None).stages)   # the bundled model
    >>> print(plan.describe())
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS} or None, got {backend!r}")
    if backends is None:
        backends = available_backends()
    backends = tuple(backends)
    check_device(device, backends)
    stages = tuple(stages)
    unsupported = unsupported or {}
    cores = cores or cpu.num_threads()
    lowp = precision != "fp32"
    choices = _choices(stages, backends, device, backend, unsupported, lowp)
    unavailable = tuple(f"{b.device}/{b.name}: {b.why_not}" for b in backends if not b.available)
    unavailable = tuple(dict.fromkeys(unavailable))

    figures_note = ""
    costs = Costs()
    if any(len(opts) > 1 for opts in choices) or profile is not None:
        try:
            costs = _figures(stages, profile, calibrate, choices, tile)
        except (ImportError, RuntimeError, OSError, MemoryLimitError) as exc:
            figures_note = f"no figures ({type(exc).__name__}: {exc})"
    size = size or REFERENCE_SIZE
    gpu_driver = 1 if cores >= 2 else 0  # one core can drive the GPU while the others compute

    scored = []
    for combo in itertools.product(*choices):
        if device == "split" and _kind(combo) != "split":
            continue
        c = _cost(stages, combo, costs, size, overlap_ok=gpu_driver == 1)
        if c is not None:
            switches = sum(a.device != b.device for a, b in zip(combo, combo[1:]))
            non_native = sum(b.name != "native" for b in combo)
            key = ((c[0], c[1]) if objective == "latency" else (c[1], c[0]))
            scored.append((key + (switches, non_native), combo, c))
    if scored:
        scored.sort(key=lambda t: t[0])
        # Placements within NOISE of the fastest are a tie (calibrations on shared machines
        # move by that much): the tie goes to the fewest device switches, then the fewest
        # onnxruntime stages (less memory: a CPU-only plan then never loads onnxruntime).
        limit = scored[0][0][0] * (1 + NOISE)
        chosen = min((t for t in scored if t[0][0] <= limit),
                     key=lambda t: (t[0][2], t[0][3], t[0]))
        _, best, (latency, frame, per_stage) = chosen
        why = _why(scored, chosen, objective)
        source = costs.source
    else:
        # No costable placement: by rule, the native backend where it can run, never the GPU
        # without figures.
        best = tuple(next((b for b in opts if b.device == "cpu" and b.name == "native"),
                          next((b for b in opts if b.device == "cpu"), opts[0]))
                     for opts in choices)
        if device in ("gpu", "split"):
            raise ValueError(f"device={device!r}: no measured GPU figures to plan with; run "
                             f"python -m a2r_edge.bench --save-profile")
        latency = frame = None
        per_stage = [None] * len(stages)
        source = figures_note or ("no figures needed: one backend per stage"
                                  if all(len(o) == 1 for o in choices) else
                                  "no figures (calibration off): native by rule")
        why = ""

    placements = tuple(Placement(s.name, b.name, b.device,
                                 _reason(s, b, opts, costs, size, unsupported, backend,
                                         per_stage[i] is not None, precision),
                                 None if per_stage[i] is None else per_stage[i] * 1e3)
                       for i, (s, b, opts) in enumerate(zip(stages, best, choices)))
    uses_gpu = any(b.device == "gpu" for b in best)
    overlap = objective == "throughput" and uses_gpu and gpu_driver == 1 and frame is not None \
        and latency is not None and frame < latency
    pool = cores - 1 if overlap else cores
    return Plan(device=_kind(best), threads=pool, isa=cpu.isa(), placements=placements,
                ort_threads=pool if any(b.name == "onnxruntime" for b in best) else 0,
                gpu_host_threads=1 if uses_gpu else 0, cores=cores, overlap=overlap,
                objective=objective, size=size,
                est_latency_ms=None if latency is None else latency * 1e3,
                est_frame_ms=None if frame is None else frame * 1e3,
                costs_source=source, why=why, unavailable=unavailable)


def _why(scored, chosen, objective) -> str:
    """The chosen placement against the best placement of every other device kind."""
    metric = 0 if objective == "latency" else 1
    name = "latency" if objective == "latency" else "frame time"
    best_of = {}
    for _, combo, c in scored:
        best_of.setdefault(_kind(combo), c[metric])
    _, best, cost = chosen
    kind = _kind(best)
    others = [f"best {k}-only {v * 1e3:.2f} ms" if k != "split" else f"best split "
              f"{v * 1e3:.2f} ms" for k, v in best_of.items() if k != kind]
    if chosen is scored[0]:
        text = f"{kind} has the lowest estimated {name} ({cost[metric] * 1e3:.2f} ms)"
    else:
        text = (f"{kind}, estimated {name} {cost[metric] * 1e3:.2f} ms: within {NOISE:.0%} of "
                f"the fastest placement ({scored[0][2][metric] * 1e3:.2f} ms), a tie won by "
                f"fewer device switches and onnxruntime stages")
    if others:
        text += "; " + ", ".join(others)
    if kind == "cpu" and "gpu" in best_of and best_of["gpu"] > best_of["cpu"]:
        text += " (the GPU is slower than the CPU here)"
    if kind == "split":
        text += " (each device runs the stages it is faster at; copies included)"
    return text


def _reason(stage, chosen: Backend, options, costs: Costs, size, unsupported, backend,
            costed: bool, precision: str) -> str:
    if stage.kind == "onnx" and stage.name in unsupported:
        prefix = f"the native executor cannot run it: {unsupported[stage.name]}; "
    elif stage.kind == "onnx" and backend is not None:
        prefix = "asked for; "
    elif stage.kind == "onnx" and precision != "fp32" and chosen.device == "cpu":
        prefix = f"precision {precision}, which onnxruntime's CPU backend does not run; "
    else:
        prefix = ""
    if not costed or len(options) == 1:
        what = {"native": {"onnx": "native executor: fused ops, one arena",
                           "adain": "adain: native CPU kernel",
                           "guided_filter": "guided_filter: native CPU kernel"}.get(stage.kind,
                                                                                   "native"),
                "onnxruntime": "onnxruntime"}.get(chosen.name, chosen.name)
        only = "; the only backend for it" if len(options) == 1 and not prefix else ""
        if len(options) > 1 and not costed:
            only = "; no figures to compare (native by rule)"
        return f"{prefix}{what}{only}"
    figures = []
    for b in sorted(options, key=lambda b: b is not chosen):
        t = costs.stage_s(stage.name, b.name, size)
        figures.append(f"{b.device}/{b.name} {t * 1e3:.2f} ms" if t is not None
                       else f"{b.device}/{b.name} unmeasured")
    t_chosen = costs.stage_s(stage.name, chosen.name, size)
    faster_alone = [b for b in options if b is not chosen and
                    (costs.stage_s(stage.name, b.name, size) or float("inf")) < t_chosen]
    if not faster_alone:
        note = ""
    elif all(b.device == chosen.device for b in faster_alone) and \
            all(costs.stage_s(stage.name, b.name, size) * (1 + NOISE) >= t_chosen
                for b in faster_alone):
        note = f"; within {NOISE:.0%} of the faster one: a tie, see why"
    else:
        note = ("; faster alone elsewhere, but the copies between devices (or the balance of "
                "a stream, or a tie of the whole plan) cost more")
    return f"{prefix}" + " vs ".join(figures) + note
