"""onnxruntime backend: sessions with an explicit provider order and an honest report of the
providers that really run.

onnxruntime silently drops a provider it cannot load (a missing CUDA library, onnxruntime and
onnxruntime-gpu installed together) and runs on the CPU instead. ``OrtSession`` compares
``get_providers()`` with what was asked: a fallback is warned about and kept in ``.fallback``,
and ``strict=True`` turns it into an error.
"""
from __future__ import annotations

import os
import re
import warnings
from typing import Mapping, Sequence

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"

# Provider options applied unless the caller overrides them, each with its reason.
DEFAULT_PROVIDER_OPTIONS = {
    # EXHAUSTIVE (the default) benchmarks every cuDNN algorithm per new input shape: 634 ms vs
    # 1.9 ms on a new shape (PaddleX#5057); HEURISTIC picks one at once.
    CUDA: {"cudnn_conv_algo_search": "HEURISTIC"},
}


class ProviderFallbackError(RuntimeError):
    """A requested execution provider is not the one running (strict mode)."""


class OrtModelError(ValueError):
    """onnxruntime refused to load a model (bad attributes, opset, unknown op): one line."""


class OrtRunError(RuntimeError):
    """onnxruntime failed running a model on an input (shapes the model cannot take): one
    line; the caller reports the input and goes on with the next."""


# onnxruntime's exceptions (Fail, InvalidArgument, InvalidGraph, ...) derive from Exception
# alone; this prefix starts their messages.
_ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*\w+\s*:\s*")


def _is_ort_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("onnxruntime")


def ort_message(exc: BaseException) -> str:
    """An onnxruntime exception's message on one line, without its error-code prefix."""
    text = _ORT_PREFIX.sub("", str(exc).strip())
    return " ".join(text.split()) or type(exc).__name__


# ONNX domains onnxruntime implements; a node of another domain (the a2r AdaIN stage,
# com.a2r_edge) runs natively only.
ORT_DOMAINS = ("", "ai.onnx", "ai.onnx.ml", "com.microsoft")


def unrunnable_ops(model) -> list[str]:
    """"domain::op" of every node of ``model`` (path, bytes or ModelProto) onnxruntime has no
    kernel for (a custom domain); [] when it can run them all."""
    import onnx
    if isinstance(model, (str, os.PathLike)):
        model = onnx.load(os.fspath(model), load_external_data=False)
    elif isinstance(model, bytes):
        model = onnx.load_from_string(model)
    return sorted({f"{n.domain}::{n.op_type}" for n in model.graph.node
                   if n.domain not in ORT_DOMAINS})


def _onnxruntime():
    try:
        import onnxruntime
    except ImportError as exc:
        raise ImportError("the onnxruntime backend needs the onnxruntime package "
                          "(pip install onnxruntime, or onnxruntime-gpu for CUDA)") from exc
    return onnxruntime


def single_op_session(nodes, inits: Mapping[str, "object"], threads: int, opset: int = 17):
    """A CPU session of a one-input ("x") one-output ("y") graph built from ``nodes`` and
    initializers ``inits`` (name -> array): the onnxruntime peer of an op in benchmarks."""
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph(
        nodes, "op", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8  # readable by older onnxruntime releases too
    return OrtSession(model.SerializeToString(), threads=threads)


def available_providers() -> list[str]:
    """Providers this onnxruntime build offers (being offered is not being usable)."""
    return list(_onnxruntime().get_available_providers())


class OrtSession:
    """One onnxruntime inference session.

    model: path to an .onnx file or its bytes. providers: in priority order; the CPU provider is
    appended when missing, as the last resort onnxruntime would use anyway. threads: intra-op
    threads (None: onnxruntime's default). shares_cpu: our OpenMP kernels run beside this
    session, so its pool must not spin between runs (spinning pools double the time of stages
    that alternate). strict: raise ProviderFallbackError instead of warning on a fallback.
    """

    def __init__(self, model: str | os.PathLike | bytes, providers: Sequence[str] = (CPU,), *,
                 threads: int | None = None, shares_cpu: bool = True, strict: bool = False,
                 provider_options: Mapping[str, Mapping[str, str]] | None = None):
        ort = _onnxruntime()
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                    or threads < 1):
            raise ValueError(f"threads must be an int >= 1 or None, got {threads!r}")
        requested = list(dict.fromkeys(providers))
        if not requested:
            raise ValueError("providers must name at least one execution provider")
        if CPU not in requested:
            requested.append(CPU)
        options = ort.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        if requested == [CPU]:
            # The memory pattern pre-plans one block per input shape beside the arena: measured
            # on a2r_lite's encoder at 512x512, peak RSS +77 MiB with it, +52 MiB without, same
            # speed (34.6 vs 33.8 ms, 2 threads).
            options.enable_mem_pattern = False
        # onnxruntime logs a failing node to stderr besides raising; the OrtModelError /
        # OrtRunError carries that message, so only a provider fallback (a warning) is logged
        options.log_severity_level = 4 if requested == [CPU] else 2
        if shares_cpu:
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        per_provider = []
        for name in requested:
            merged = dict(DEFAULT_PROVIDER_OPTIONS.get(name, {}))
            merged.update((provider_options or {}).get(name, {}))
            per_provider.append(merged)
        if isinstance(model, (str, os.PathLike)):
            model = os.fspath(model)
        offered = set(ort.get_available_providers())
        usable = [(n, o) for n, o in zip(requested, per_provider) if n in offered]
        self.name = model if isinstance(model, str) else "the model"
        try:
            self.session = ort.InferenceSession(model, sess_options=options,
                                                providers=[n for n, _ in usable],
                                                provider_options=[o for _, o in usable])
        except Exception as exc:  # noqa: BLE001  (onnxruntime's own exception types)
            if not _is_ort_error(exc):
                raise
            raise OrtModelError(f"onnxruntime cannot load {self.name}: {ort_message(exc)}") \
                from None
        self.requested = requested
        self.providers = list(self.session.get_providers())
        # The first requested provider that is not running means a fallback to a later one.
        self.fallback = [n for n in requested if n not in self.providers and n != CPU]
        if self.fallback:
            message = (f"onnxruntime is not running {', '.join(self.fallback)} (requested "
                       f"{requested}, running {self.providers}); "
                       + ("not offered by this onnxruntime build"
                          if any(n not in offered for n in self.fallback)
                          else "the provider failed to load (see onnxruntime's log)"))
            if strict:
                raise ProviderFallbackError(message)
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        self.input_names = [i.name for i in self.session.get_inputs()]
        # declared shapes: ints where fixed, names (or None) where dynamic
        self.input_shapes = [tuple(i.shape) for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]

    def run(self, feeds: Mapping[str, object]) -> list:
        """Run with {input name: array}; returns the outputs in the model's order. OrtRunError
        when onnxruntime fails on these inputs."""
        try:
            return self.session.run(self.output_names, dict(feeds))
        except Exception as exc:  # noqa: BLE001
            if not _is_ort_error(exc):
                raise
            raise OrtRunError(f"onnxruntime failed running {self.name}: "
                              f"{ort_message(exc)}") from None

    def runner(self):
        """A function x -> y for a one-input model on the CPU, y its first output (the picture; a
        generator's other outputs, such as U-GAT-IT's attention maps, are not fetched: as the
        native executor's run()). The first run at an input shape is a plain one, which tells y's
        shape; later ones allocate nothing: x is bound in place and y is written into a buffer
        kept per input shape (onnxruntime's IOBinding), so y is owned by the runner and
        overwritten by its next run at that shape."""
        if len(self.input_names) != 1:
            raise ValueError(f"runner() needs a single-input model; this one has inputs "
                             f"{self.input_names}")
        import numpy as np
        name_in, name_out = self.input_names[0], self.output_names[0]
        bindings: dict[tuple, tuple] = {}

        def run(x):
            x = np.ascontiguousarray(x, np.float32)
            bound = bindings.get(x.shape)
            if bound is None:  # a plain run tells the output's shape; its result is this run's
                y = np.ascontiguousarray(self.run({name_in: x})[0], np.float32)  # ours to bind
                io = self.session.io_binding()
                io.bind_output(name_out, "cpu", 0, np.float32, y.shape, y.ctypes.data)
                bindings[x.shape] = (io, y)
                return y
            io, y = bound
            io.bind_input(name_in, "cpu", 0, np.float32, x.shape, x.ctypes.data)
            try:
                self.session.run_with_iobinding(io)
            except Exception as exc:  # noqa: BLE001
                if not _is_ort_error(exc):
                    raise
                raise OrtRunError(f"onnxruntime failed running {self.name}: "
                                  f"{ort_message(exc)}") from None
            return y
        return run
