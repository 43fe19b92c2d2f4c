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
    domain: "" (ONNX), ADAIN_DOMAIN, or INTERNAL for ops that fusion creates.
    """
    op_type: str
    out_shapes: Callable
    build: Callable
    reference: Callable
    scratch_shapes: Callable = _no_scratch
    inplace: bool = False
    domain: str = ""


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
                         + "; the native executor runs " + ", ".join(sorted(onnx_ops()))
                         + f" and {ADAIN_DOMAIN}::{ADAIN_OP} (use onnxruntime for this model)")


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


def same_shape(node, in_shapes, graph) -> list[tuple]:
    """out_shapes of an op whose one output has its first input's shape."""
    return [in_shapes[0]]
