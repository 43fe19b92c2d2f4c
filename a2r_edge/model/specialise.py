"""Specialise a graph to one input size: fold what is known, shape what is left, and say for
every node where it runs.

Exporters compute sizes inside the graph (torch.onnx.export's Shape -> Gather -> Unsqueeze ->
Concat -> Reshape chains, ``n / (n - 1)`` of ``torch.var``, Resize sizes taken from the input).
For one input size all of that is constant: ``specialise`` walks the nodes once, in order, and

* folds every node whose inputs are all known (Shape and Size need only the input's shape) with
  the op's numpy ``reference`` (``ops/``) or, for ops without one, onnx's reference evaluator;
* gives every other node static output shapes, from its OpSpec's ``out_shapes`` or, for nodes
  the native side cannot run, onnx shape inference of that one node;
* places each remaining node: ``native`` or ``onnxruntime`` with the reason (no native kernel,
  an unsupported variant, a non-float tensor).

Cost: linear in the node count (one dict lookup per input). Every size is checked: a folded
constant larger than ``FOLD_LIMIT`` elements, a negative, zero or overflowing dimension, a tensor
larger than the memory setting gets a one-line ``ValueError`` naming the node.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .. import _settings
from .._settings import MemoryLimitError
from . import ops
from .graph import Graph, Node
from .ops import UnsupportedOpError

# Folded constants are shape arithmetic and small tables; 2^24 elements (64 MiB of float32) is
# far above any real one and stops a hostile ConstantOfShape/Expand/Range/Tile before numpy does.
FOLD_LIMIT = 1 << 24
# Ops that would allocate their output from values: their size is checked before evaluating.
_SIZED_BY_VALUE = ("ConstantOfShape", "Expand", "Range", "Tile", "Pad", "Resize", "Upsample")
_FLOAT = np.dtype(np.float32)


@dataclasses.dataclass
class Placement:
    node: str
    op: str
    where: str     # "folded", "native" or "onnxruntime"
    why: str = ""


@dataclasses.dataclass
class Specialised:
    graph: Graph                  # runtime nodes only; consts include the folded values
    shapes: dict[str, tuple]
    dtypes: dict[str, np.dtype]   # of the runtime tensors
    placements: list[Placement]   # one per node of the source graph, in order
    strict: bool = False

    def foreign(self) -> list[Placement]:
        return [p for p in self.placements if p.where == "onnxruntime"]


def memory_limit_elements() -> int:
    """Largest tensor (float32 elements) one plan may hold: the A2R_MEMORY_MB setting."""
    return (_settings.get("A2R_MEMORY_MB") << 20) // 4


def specialise(graph: Graph, input_shapes: dict[str, tuple] | None, *, strict: bool = False,
               foreign: dict | None = None) -> Specialised:
    """Fold, shape and place ``graph`` for ``input_shapes`` ({name: shape}); None: fold only what
    needs no input size (load time) and leave shapes of run-time tensors unknown. strict: a node
    the native side cannot run raises UnsupportedOpError. foreign: names of nodes to place on
    onnxruntime regardless, with the reason ({name: why}: their step builder refused)."""
    consts = dict(graph.consts)
    shapes: dict[str, tuple] = {}
    dtypes: dict[str, np.dtype] = {}
    for name, _ in graph.inputs:
        dtypes[name] = np.dtype(getattr(graph, "input_dtypes", {}).get(name, _FLOAT))
        if input_shapes is not None:
            shapes[name] = _checked_shape(tuple(input_shapes[name]), f"input {name!r}")
    limit = memory_limit_elements()
    outputs = set(graph.outputs)
    kept: list[Node] = []
    placements: list[Placement] = []
    for n in graph.nodes:
        ins = [s for s in n.inputs if s]
        value = None
        if n.op in ("Shape", "Size") and ins and ins[0] in shapes and not outputs & set(n.outputs):
            value = [_shape_value(n, shapes[ins[0]])]
        elif all(s in consts for s in ins) and not outputs & set(n.outputs) \
                and n.op not in ("RandomNormal", "RandomUniform", "RandomNormalLike",
                                 "RandomUniformLike", "Multinomial"):
            value = _evaluate(n, [consts[s] if s else None for s in n.inputs], graph)
        if value is not None:
            for name, v in zip(n.outputs, value):
                if name:
                    consts[name] = v
            placements.append(Placement(n.name, n.op, "folded"))
            continue
        if input_shapes is None:   # load time: the rest needs an input size
            kept.append(n)
            continue
        where, why, outs = _place(n, shapes, dtypes, consts, graph, strict,
                                  (foreign or {}).get(n.name, ""))
        for name, (shape, dtype) in zip(n.outputs, outs):
            if not name:
                continue
            shape = _checked_shape(shape, f"{n.op} node {n.name!r} output {name!r}")
            if int(np.prod(shape, dtype=object)) > limit:
                raise MemoryLimitError(f"{n.op} node {n.name!r}: output {name!r} of shape "
                                       f"{shape} needs more than A2R_MEMORY_MB="
                                       f"{_settings.get('A2R_MEMORY_MB')} MiB")
            shapes[name], dtypes[name] = shape, dtype
        kept.append(n)
        placements.append(Placement(n.name, n.op, where, why))
    for k, v in consts.items():
        shapes.setdefault(k, tuple(v.shape))
    spec_graph = dataclasses.replace(graph, nodes=kept, consts=consts)
    return Specialised(spec_graph, shapes, dtypes, placements, strict)


# --- folding ------------------------------------------------------------------------------------

def fold(graph: Graph) -> Graph:
    """``graph`` with every node that needs no input size folded (load time)."""
    return specialise(graph, None).graph


def _shape_value(n: Node, shape: tuple) -> np.ndarray:
    if n.op == "Size":
        return np.array(int(np.prod(shape, dtype=np.int64)), np.int64)
    rank = len(shape)
    start, end = n.attrs.get("start", 0), n.attrs.get("end", rank)
    return np.array(shape[slice(start, end)], np.int64)


def _evaluate(n: Node, inputs: list, graph: Graph) -> list[np.ndarray]:
    """The outputs of ``n`` on known inputs: its OpSpec's reference, else onnx's evaluator."""
    if n.op in _SIZED_BY_VALUE:
        _check_fold_size(n, inputs, graph)
    spec = ops.lookup(n.op) if n.domain in ops.DEFAULT_DOMAINS else None
    try:
        if spec is not None:
            outs = spec.reference(n, inputs)
        else:
            outs = _onnx_reference(n, inputs, graph)
    except (UnsupportedOpError, MemoryError):
        raise
    except Exception as exc:   # numpy/onnx errors on bad values: one line naming the node
        raise ValueError(f"{n.op} node {n.name!r}: cannot evaluate it on its constant inputs: "
                         f"{type(exc).__name__}: {one_line(exc)}") from exc
    outs = [np.asarray(o) for o in outs]
    _check_int_overflow(n, inputs, outs)
    for o in outs:
        if o.size > FOLD_LIMIT:
            raise ValueError(f"{n.op} node {n.name!r}: folded constant of shape {o.shape} is "
                             f"larger than {FOLD_LIMIT} elements")
    return outs


_INT_ARITHMETIC = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}


def _check_int_overflow(n: Node, inputs: list, outs: list) -> None:
    """Integer shape arithmetic wraps around silently in numpy (a pads of 2^62 times 8 is 0):
    the same sums in float64 must stay inside int64."""
    if not outs or outs[0].dtype.kind not in "iu":
        return
    if n.op in _INT_ARITHMETIC and len(inputs) == 2:
        approx = _INT_ARITHMETIC[n.op](*(np.asarray(v, np.float64) for v in inputs))
    elif n.op in ("ReduceProd", "ReduceSum") and inputs:
        approx = np.array([np.prod(np.abs(np.asarray(inputs[0], np.float64))) if n.op ==
                           "ReduceProd" else np.abs(np.asarray(inputs[0], np.float64)).sum()])
    else:
        return
    if approx.size and float(np.abs(approx).max()) >= 2.0 ** 63:
        raise ValueError(f"{n.op} node {n.name!r}: integer shape arithmetic overflows int64")


def _check_fold_size(n: Node, inputs: list, graph: Graph) -> None:
    """Refuse an op whose constant inputs ask for a huge output, before it is allocated: the
    output's dimensions, worked out from the values (an upper bound where the op is complex)."""
    def vec(k):
        return np.asarray(inputs[k], np.float64).reshape(-1) \
            if len(inputs) > k and inputs[k] is not None else None
    x = np.asarray(inputs[0]) if inputs and inputs[0] is not None else np.zeros(())
    shape = np.array(x.shape, np.float64)
    want = None
    if n.op == "ConstantOfShape":
        want = vec(0)
    elif n.op in ("Expand", "Tile") and vec(1) is not None:
        v = vec(1)
        if n.op == "Tile":
            want = shape * v if v.size == shape.size else v
        else:   # numpy broadcasting of x's shape with v (padded on the left)
            r = max(v.size, shape.size)
            a = np.concatenate([np.ones(r - shape.size), shape])
            b = np.concatenate([np.ones(r - v.size), v])
            want = np.maximum(a, b)
    elif n.op == "Range":
        start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in inputs[:3])
        if delta == 0 or not np.isfinite([start, limit, delta]).all():
            raise ValueError(f"Range node {n.name!r}: delta {delta} with start {start}, "
                             f"limit {limit}")
        want = np.array([max(0.0, np.ceil((limit - start) / delta))])
    elif n.op == "Pad":
        pads = vec(1) if graph.opset >= 11 else np.asarray(n.attrs.get("pads", []), np.float64)
        if pads is not None and pads.size == 2 * shape.size:
            want = shape + pads.reshape(2, -1).sum(0)
    else:   # Resize (X, roi, scales, sizes) from opset 11; Upsample and Resize-10 (X, scales)
        old = n.op == "Upsample" or graph.opset < 11
        scales, sizes = (vec(1), None) if old else (vec(2), vec(3))
        if sizes is not None and sizes.size:
            want = sizes
        elif scales is not None and scales.size == shape.size:
            want = shape * scales
    if want is not None and (np.any(want < 0) or float(np.prod(want)) > FOLD_LIMIT):
        raise ValueError(f"{n.op} node {n.name!r}: constant output of {want.tolist()} elements "
                         f"(limit {FOLD_LIMIT})")


def _onnx_reference(n: Node, inputs: list, graph: Graph) -> list[np.ndarray]:
    from onnx.reference import ReferenceEvaluator
    names = [f"in{i}" if s else "" for i, s in enumerate(n.inputs)]
    model = single_node_model(n, names, {nm: v for nm, v in zip(names, inputs) if nm}, {}, graph)
    outs = ReferenceEvaluator(model).run(None, {})
    return [np.asarray(o) for o in outs]


def node_proto(n: Node, inputs=None, outputs=None):
    """The onnx NodeProto of IR node ``n`` (inputs/outputs renamed when given)."""
    from onnx import helper
    return helper.make_node(n.op if n.op != "AdaIN" else ops.ADAIN_OP,
                            n.inputs if inputs is None else inputs,
                            n.outputs if outputs is None else outputs,
                            name=n.name, domain=n.domain or None,
                            **{k: v for k, v in n.attrs.items() if v is not None})


def single_node_model(n: Node, in_names, consts: dict, runtime: dict, graph: Graph):
    """A model of node ``n`` alone: ``consts`` {name: array} as initializers, ``runtime``
    {name: (shape, dtype)} as typed inputs; outputs untyped."""
    import onnx
    from onnx import helper, numpy_helper
    outs = [o if o else "" for o in n.outputs]
    g = helper.make_graph(
        [node_proto(n, in_names, outs)], "node",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(np.dtype(d)), s)
         for k, (s, d) in runtime.items()],
        [onnx.ValueInfoProto(name=o) for o in outs if o],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid(d, v)
                                               for d, v in graph.opsets.items()],
                             ir_version=graph.ir_version)


# --- shapes and placement of run-time nodes -----------------------------------------------------

def place(sp: Specialised, n: Node) -> Placement:
    """Shapes and placement of a node a rewrite made or changed (its inputs known in ``sp``)."""
    where, why, outs = _place(n, sp.shapes, sp.dtypes, sp.graph.consts, sp.graph, sp.strict, "")
    for name, (shape, dtype) in zip(n.outputs, outs):
        if name:
            sp.shapes[name], sp.dtypes[name] = _checked_shape(shape, f"{n.op} {n.name!r}"), dtype
    return Placement(n.name, n.op, where, why)


def _place(n: Node, shapes, dtypes, consts, graph, strict, refused):
    """(where, why, [(shape, dtype) per output]) of run-time node ``n``."""
    spec = ops.lookup(n.op) if n.domain in ops.DEFAULT_DOMAINS or n.op == "AdaIN" else None
    runtime_ins = [s for s in n.inputs if s and s not in consts]
    why = ""
    # an op that states its output dtypes (out_dtypes) runs non-float tensors natively too
    out_dtypes = getattr(spec, "out_dtypes", None)
    if refused:
        why = refused
    elif spec is None:
        why = f"no native kernel for {n.domain + '::' if n.domain else ''}{n.op}"
    elif out_dtypes is None and any(dtypes[s] != _FLOAT for s in runtime_ins):
        why = "a run-time input is not float32"
    else:
        in_shapes = [None if not s else tuple(consts[s].shape) if s in consts else shapes[s]
                     for s in n.inputs]
        try:
            outs = spec.out_shapes(n, in_shapes, graph_with(graph, consts))
            in_dtypes = [None if not s else consts[s].dtype if s in consts else dtypes[s]
                         for s in n.inputs]
            kinds = [_FLOAT] * len(outs) if out_dtypes is None else \
                [np.dtype(d) for d in out_dtypes(n, in_dtypes)]
            return "native", "", [(tuple(int(d) for d in s), k) for s, k in zip(outs, kinds)]
        except UnsupportedOpError as exc:
            why = str(exc).split("; the native executor runs")[0]
        except (ValueError, IndexError, KeyError, TypeError, ArithmeticError) as exc:
            raise ValueError(f"{n.op} node {n.name!r}: cannot infer its output shape from "
                             f"inputs {in_shapes}: {one_line(exc)}") from exc
    if strict:
        raise UnsupportedOpError(n.op, n.name, why + " (strict: no onnxruntime fallback)",
                                 domain=n.domain)
    return "onnxruntime", why, _foreign_outputs(n, shapes, dtypes, consts, graph)


def graph_with(graph: Graph, consts: dict) -> Graph:
    """``graph`` seen with these constants (an op's out_shapes and build read graph.consts)."""
    return graph if graph.consts is consts else dataclasses.replace(graph, consts=consts)


def _foreign_outputs(n: Node, shapes, dtypes, consts, graph) -> list[tuple]:
    """Output shapes and dtypes of a node the native side does not run: onnx shape inference of
    the node alone (its constant inputs as initializers)."""
    import onnx
    from onnx import helper
    const_in = {s: consts[s] for s in n.inputs if s and s in consts}
    runtime = {s: (shapes[s], dtypes[s]) for s in n.inputs if s and s not in consts}
    model = single_node_model(n, n.inputs, const_in, runtime, graph)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as exc:
        raise ValueError(f"{n.op} node {n.name!r}: onnx shape inference failed for inputs "
                         f"{[shapes.get(s) for s in n.inputs if s]}: {one_line(exc)}") from exc
    found = {o.name: o.type.tensor_type for o in inferred.graph.output}
    result = []
    for name in n.outputs:
        if not name:
            result.append(((), _FLOAT))
            continue
        tt = found.get(name)
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim] \
            if tt is not None and tt.HasField("shape") else None
        if tt is None or not tt.elem_type or dims is None or None in dims:
            raise ValueError(f"{n.op} node {n.name!r}: the size of output {name!r} is not known "
                             f"for this input size (the native side does not run {n.op}, and "
                             f"onnx shape inference cannot size it)")
        result.append((tuple(dims), np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))))
    return result


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's message on one line, at most ``limit`` characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _checked_shape(shape: tuple, what: str) -> tuple:
    if any(not isinstance(d, (int, np.integer)) or d < 1 or d >= 1 << 31 for d in shape):
        raise ValueError(f"{what}: shape {shape} has a dimension that is not in 1 .. 2^31-1")
    return tuple(int(d) for d in shape)
