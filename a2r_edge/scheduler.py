"""Where each stage of a model runs, and why: the ``Plan``.

Today one device exists in every build: the CPU. ONNX stages run on the native executor
(``model.NativeExecutor``) unless their graph holds an op it does not run, in which case
onnxruntime runs that stage and the plan says so; the image ops (AdaIN, guided filter, pre- and
post-processing) run on the native CPU kernels. GPU and split plans need the CUDA library, which
this build does not have: asking for them is an error that says so, never a silent CPU run.
"""
from __future__ import annotations

import dataclasses

from .backends import cpu

DEVICES = ("auto", "cpu", "gpu", "split")
BACKENDS = ("native", "onnxruntime")


@dataclasses.dataclass(frozen=True)
class Placement:
    stage: str
    backend: str  # "native" (our kernels / executor) or "onnxruntime"
    device: str   # "cpu"
    reason: str


@dataclasses.dataclass(frozen=True)
class Plan:
    device: str
    threads: int
    isa: str
    placements: tuple[Placement, ...]

    def backend_of(self, stage: str) -> str:
        return next(p.backend for p in self.placements if p.stage == stage)

    def describe(self) -> str:
        lines = [f"plan: device={self.device}, {self.threads} thread(s), CPU kernels {self.isa}"]
        for p in self.placements:
            lines.append(f"  {p.stage:<12} {p.device}/{p.backend:<12} {p.reason}")
        return "\n".join(lines)


def check_device(device) -> str:
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if device in ("gpu", "split"):
        raise ValueError(f"device={device!r} needs a2r_edge's CUDA library, which this build "
                         f"does not have (cuda_ops/ is not built yet); use 'cpu' or 'auto'")
    return "cpu"


def make_plan(stages, device: str = "auto", backend: str | None = None,
              unsupported: dict[str, str] | None = None) -> Plan:
    """A plan for ``stages`` (the model's Stage list). ``backend`` forces the ONNX stages onto
    one backend; ``unsupported``: {stage name: why the native executor cannot run it}."""
    resolved = check_device(device)
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS} or None, got {backend!r}")
    unsupported = unsupported or {}
    placements = []
    for s in stages:
        if s.kind != "onnx":
            placements.append(Placement(s.name, "native", resolved, f"{s.kind}: native CPU kernel"))
        elif s.name in unsupported:
            if backend == "native":
                raise ValueError(f"stage {s.name!r} cannot run natively: {unsupported[s.name]}")
            placements.append(Placement(s.name, "onnxruntime", resolved,
                                        f"the native executor cannot run it: "
                                        f"{unsupported[s.name]}"))
        elif backend == "onnxruntime":
            placements.append(Placement(s.name, "onnxruntime", resolved, "asked for"))
        else:
            placements.append(Placement(s.name, "native", resolved,
                                        "native executor: fused ops, one arena" +
                                        (" (asked for)" if backend == "native" else "")))
    return Plan(device=resolved, threads=cpu.num_threads(), isa=cpu.isa(),
                placements=tuple(placements))
