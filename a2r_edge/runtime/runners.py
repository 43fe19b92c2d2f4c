"""The runners of a model's ONNX stages: functions float32 NCHW -> float32 NCHW, one per stage and
backend, made once. The same ``StageRunners`` objects serve conversion (the Engine runs the
plan's runners) and calibration (``measure.StageChain`` times every backend's runner), so the
scheduler plans with the costs of the path conversion takes.

Backends: "native" (``model.NativeExecutor``: its output is owned by the executor until its next
run) and "onnxruntime" (``OrtSession.runner``: IOBinding, input bound in place and the output
written into a buffer kept per input shape, so it allocates nothing after the first run at a
shape, like the native executor).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from ..model import NativeExecutor, UnsupportedOpError
from ..model import fit as fitting
from ..model.arena import SharedArena
from ..model.graph import build_graph, check_picture_stage, load_model
from ..model.specialise import fold
from .ort import OrtSession, unrunnable_ops

Runner = Callable  # float32 NCHW -> float32 NCHW


class StageRunners:
    """The runners of ``stages``' ONNX stages. native: make the native executors (False: they are
    never used, e.g. backend="onnxruntime"); a stage the native executor cannot run is listed in
    ``unsupported`` {stage: why}. The native executors share one arena: stages run one after
    another. onnxruntime sessions are made on first use, with the thread count of that use.
    strict: a stage with a node the native executor cannot run raises UnsupportedOpError instead
    of running that node (or the stage) on onnxruntime. precision: of the native executors'
    convolutions (NativeExecutor's; the Engine sets it after calibrating instead)."""

    def __init__(self, stages, *, native: bool = True, strict: bool = False,
                 precision: str = "fp32"):
        self.stages = tuple(s for s in stages if s.kind == "onnx")
        self.arena = SharedArena()
        self.executors: dict[str, NativeExecutor] = {}
        self.unsupported: dict[str, str] = {}
        self._sessions: dict[str, OrtSession] = {}
        self._ort: dict[str, Runner] = {}
        for i, stage in enumerate(self.stages):   # the first reads the picture, the last
            last = i == len(self.stages) - 1      # gives the result
            check_picture_stage(str(stage.params["file"]), stage.name, picture_in=i == 0,
                                picture_out=last)
        for stage in self.stages if native else ():
            try:
                self.executors[stage.name] = NativeExecutor(str(stage.params["file"]), self.arena,
                                                            strict=strict, precision=precision)
            except UnsupportedOpError as exc:
                if strict:
                    raise
                self.unsupported[stage.name] = str(exc)

    def with_size_multiple(self, model):
        """``model`` (the package of these stages) with the stride its network needs
        (``fit.size_multiple``: a U-Net plans only at multiples of its downsampling) when it is
        a plain ONNX file, which states none; else ``model`` itself. Whatever the backend: the
        native executor's graph, or the file's read for this."""
        if model.folder is not None or model.stride != 1 or len(self.stages) != 1:
            return model
        ex = self.executors.get(self.stages[0].name)
        try:
            graph = ex.graph if ex is not None else \
                fold(build_graph(load_model(str(self.stages[0].params["file"]))))
        except (ValueError, UnsupportedOpError):   # the runners say it in their own words
            return model
        s = fitting.size_multiple(graph)
        return model if s == 1 else dataclasses.replace(model, stride=s)

    def backends_of(self, stage: str) -> list[str]:
        return (["native"] if stage in self.executors else []) + ["onnxruntime"]

    def get(self, stage, backend: str, threads: int | None = None) -> Runner:
        """The runner of ONNX ``stage`` (a Stage) on ``backend``; the onnxruntime one is made on
        first use with ``threads`` intra-op threads."""
        if backend == "native":
            return self.executors[stage.name].run
        if backend != "onnxruntime":
            raise ValueError(f"no runner for backend {backend!r}")
        run = self._ort.get(stage.name)
        if run is None:
            session = self._sessions[stage.name] = OrtSession(str(stage.params["file"]),
                                                              threads=threads)
            run = self._ort[stage.name] = _fitted(session.runner(), fitting.fixed_hw(
                list(zip(session.input_names, session.input_shapes))))
        return run

    def variant(self, stage, backend: str, model, threads: int | None = None):
        """A function {input name: array} -> {output name: array} running ``model`` (an
        onnx.ModelProto made from ``stage``'s graph, e.g. a piece of it by
        model/whole_stats.py) on ``backend``. native: on a sibling of the stage's executor
        (``NativeExecutor.sibling``), at the stage's precision with its int8 ranges and fp32
        nodes, so tiles run as the whole picture does; a node it cannot run goes to onnxruntime
        inside its plan, as in the stage's. onnxruntime: at fp32, as the stage. Its outputs are
        owned by it until its next call."""
        if backend == "native":
            return self.executors[stage.name].sibling(model).run_many
        session = OrtSession(model.SerializeToString(), threads=threads)
        return lambda feeds: dict(zip(session.output_names, session.run(feeds)))

    def for_plan(self, plan) -> dict[str, Runner]:
        """{ONNX stage name: its runner on the backend ``plan`` places it on}."""
        return {s.name: self.get(s, plan.backend_of(s.name), plan.ort_threads or plan.threads)
                for s in self.stages}

    def keep_only(self, names) -> None:
        """Forget the native executors of stages not in ``names`` (no plan runs them there)."""
        self.executors = {n: ex for n, ex in self.executors.items() if n in names}


def _fitted(run: Runner, fixed: tuple[int, int] | None) -> Runner:
    """``run`` taking pictures of any size when its model declares a fixed H x W, as the native
    executor's run() does (fit.py's default, "resize")."""
    if fixed is None:
        return run
    return lambda x: run(x) if x.shape[2:] == fixed else fitting.run_fitted(run, x, fixed,
                                                                            "resize")


def backend_for_custom_ops(stages, backend: str | None, unsupported: dict) -> str | None:
    """The backend for ``Engine(backend=)`` when a stage has a node onnxruntime has no kernel
    for (the a2r AdaIN stage as one node, com.a2r_edge::AdaIN): that stage runs natively, so
    None becomes "native"; ValueError when onnxruntime is asked for, or another stage needs it
    (unsupported: StageRunners.unsupported)."""
    blocked = {s.name: unrunnable_ops(s.params["file"]) for s in stages if s.kind == "onnx"}
    blocked = {name: ops for name, ops in blocked.items() if ops}
    if not blocked or backend == "native":
        return backend
    name, ops = next(iter(blocked.items()))
    if backend == "onnxruntime" or unsupported:
        why = ("backend='onnxruntime' was asked for" if backend == "onnxruntime" else
               f"stage {next(iter(unsupported))!r} needs onnxruntime: "
               f"{next(iter(unsupported.values()))}")
        raise ValueError(f"stage {name!r} uses {', '.join(ops)}, which only the native "
                         f"executor runs, but {why}")
    return "native"
