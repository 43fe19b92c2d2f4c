"""The op registry's storage, the ``OpSpec`` record and the error every op raises for what it
cannot run. Family modules (elementwise.py, conv.py, ...) ``register`` their specs at import;
``ops/__init__.py`` imports every family and is the place to look an op up.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

# The a2r AdaIN stage as one node (domain below); every other op is in ONNX's default domain.
ADAIN_DOMAIN, ADAIN_OP = "com.a2r_edge", "AdaIN"
DEFAULT_DOMAINS = ("", "ai.onnx")
INTERNAL = "internal"   # domain of ops only fusion creates (SiLU): never accepted from a file


def _no_scratch(node, shapes, graph) -> list[tuple]:
    return []


def _like_first(node, in_dtypes) -> list:
    first = next((d for d in in_dtypes if d is not None), np.dtype(np.float32))
    return [first] * len(node.outputs)


@dataclasses.dataclass(frozen=True)
class OpSpec:
    """Everything the executor and the graph code know about one op type.

    out_shapes(node, in_shapes, graph) -> [shape per output]; in_shapes has None for an absent
        optional input; graph.consts holds the values known at load time.
    build(node, graph, shapes, view, scratch) -> closure or None: called once per plan with
        ``view(name)`` giving the bound array of a tensor and ``scratch`` the node's scratch
        buffers (shapes from ``scratch_shapes``); the closure writes the outputs' views and
        allocates nothing. None: nothing to run (the outputs alias their inputs).
    reference(node, inputs) -> [array per output]: plain numpy with ONNX semantics (dtypes kept,
        int64 shapes), for constant folding and as the tests' oracle.
    scratch_shapes(node, shapes, graph) -> [shape]: float32 buffers live only during the node.
    inplace: the output may be planned over a dying input of the same shape (in place).
    view: the output is the first input's values in another shape (Reshape and kin): the
        planner may give it the input's memory, and ``build`` then returns None.
    out_dtypes(node, in_dtypes) -> [numpy dtype per output] (default: the first input's).
        ``build`` is only called for nodes whose run-time tensors are all float32; a node that
        reads or writes another dtype at run time runs its ``reference`` instead.
    domain: "" (ONNX), ADAIN_DOMAIN, or INTERNAL for ops that fusion creates.
    lowp(node, shapes, graph) -> str, for ops whose products may run at the plan's bf16/int8
        precision (Conv, ConvTranspose, MatMul/Gemm): "" when this node does (its build then
        reads the ``precision``/``act_range``/``probe`` attributes the executor sets, as
        ops/conv.py describes), else why it stays fp32. None: an op without such products.
    """
    op_type: str
    out_shapes: Callable
    build: Callable
    reference: Callable
    scratch_shapes: Callable = _no_scratch
    inplace: bool = False
    view: bool = False
    domain: str = ""
    out_dtypes: Callable = _like_first
    lowp: Callable | None = None


_REGISTRY: dict[str, OpSpec] = {}


def register(spec: OpSpec) -> OpSpec:
    if spec.op_type in _REGISTRY:
        raise AssertionError(f"op {spec.op_type} registered twice")
    _REGISTRY[spec.op_type] = spec
    return spec


def lookup(op_type: str) -> OpSpec | None:
    return _REGISTRY.get(op_type)


def onnx_ops() -> frozenset:
    """ONNX (default-domain) op types with a spec."""
    return frozenset(k for k, s in _REGISTRY.items() if s.domain == "")


class UnsupportedOpError(ValueError):
    """A node whose op (or op variant) the native executor does not run."""

    def __init__(self, op_type: str, node_name: str, detail: str = "", domain: str = ""):
        self.op_type, self.node_name, self.domain = op_type, node_name, domain
        what = f"{domain}::{op_type}" if domain not in DEFAULT_DOMAINS else op_type
        super().__init__(f"unsupported op {what} in node {node_name!r}"
                         + (f": {detail}" if detail else "")
                         + f"; the native executor runs {len(onnx_ops())} ONNX op types "
                         "(a2r_edge.model.ops.supported()) and "
                         f"{ADAIN_DOMAIN}::{ADAIN_OP} (use onnxruntime for this model)")


# --- helpers shared by the families -------------------------------------------------------------

def const_input(graph, node, k: int, what: str, dtype=np.float32):
    """Input k of node as a load-time constant of ``dtype`` (None when absent); refuses a
    run-time tensor with UnsupportedOpError."""
    name = node.inputs[k] if len(node.inputs) > k else ""
    if not name:
        return None
    if name not in graph.consts:
        raise UnsupportedOpError(node.op, node.name, f"{what} must be a constant")
    return np.asarray(graph.consts[name], dtype)


def float_dtypes(node, in_dtypes) -> list:
    """out_dtypes of an op whose outputs are float32 whatever its other inputs are."""
    return [np.dtype(np.float32)] * len(node.outputs)


def attr_axis(node, rank: int, name: str = "axis", default: int = 0) -> int:
    """A checked axis attribute, negative values counted from the end."""
    axis = int(node.attrs.get(name, default))
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"{name}={axis} out of range for rank {rank}")
    return axis % max(rank, 1)


def operand(graph, view, name: str):
    """A float32 input of a build: the constant (made contiguous float32) or the bound view."""
    if name in graph.consts:
        return np.ascontiguousarray(graph.consts[name], np.float32)
    return view(name)


def plan_consts(node, graph):
    """get(k): input k of node as its load-time constant (None when absent); UnsupportedOpError
    when it is a run-time tensor (a size, axis list or pad amount the plan must know)."""
    def get(k):
        name = node.inputs[k] if len(node.inputs) > k else ""
        if not name:
            return None
        if name not in graph.consts:
            raise UnsupportedOpError(node.op, node.name, f"input {k} ({name!r}) must be known "
                                     "when the graph is planned (a constant or folded shape)")
        return np.asarray(graph.consts[name])
    return get


def given(inputs):
    """get(k) over a reference's input arrays (None when absent)."""
    return lambda k: inputs[k] if len(inputs) > k and inputs[k] is not None else None


def copy_build(view_of_x):
    """Build of a pure data movement: y <- view_of_x(x view, y view), one numpy copy per run."""
    def build(node, graph, shapes, view, scratch):
        y = view(node.outputs[0])
        src = view_of_x(node, view(node.inputs[0]), y)
        return lambda: np.copyto(y, src)
    return build


def keeping(step, *arrays):
    """``step`` (a functools.partial of a native ``*_at`` entry point, which takes buffer
    addresses) holding references to the arrays those addresses are in, so they live as long
    as the step does."""
    step.keeps = arrays
    return step


def view_build(node, graph, shapes, view, scratch):
    """Build of a ``view`` op: nothing to run when the plan put y on x's memory, else a copy."""
    x, y = view(node.inputs[0]), view(node.outputs[0])
    if x.__array_interface__["data"][0] == y.__array_interface__["data"][0]:
        return None
    src = x.reshape(y.shape)
    return lambda: np.copyto(y, src)


def never_built(node, graph, shapes, view, scratch):
    """Build of an op with no float32-only form (its outputs are integer or bool tensors)."""
    raise AssertionError(f"{node.op} node {node.name!r}: built as float32 (never is)")


def same_shape(node, in_shapes, graph) -> list[tuple]:
    """out_shapes of an op whose one output has its first input's shape."""
    return [in_shapes[0]]
