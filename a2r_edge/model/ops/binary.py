"""Ops of several inputs combined element by element with numpy broadcasting: Add, Sub, Mul,
Div, Pow, Min, Max, PRelu, Equal, Where, Not.

The float32 builds run one ufunc into the output view; the references keep ONNX's integer
semantics (wrap-around, Div truncating towards zero, Pow typed like its base). An Add that
fusion gave a crop's input (graph.fuse: attribute ``crop``, the (start, stop) rows and columns
of input 0 it reads) runs as one native crop_add pass.
"""
from __future__ import annotations

import functools

import numpy as np

from ... import _kernels
from .base import OpSpec, keeping, never_built, operand, register


def _broadcast(node, in_shapes, graph):
    shapes = [s for s in in_shapes if s is not None]
    return [tuple(np.broadcast_shapes(*shapes))]


def _ufunc_build(ufunc):
    """Build of a variadic op folding ``ufunc`` over its inputs into the output view."""
    def build(node, graph, shapes, view, scratch):
        y = view(node.outputs[0])
        args = [operand(graph, view, s) for s in node.inputs if s]
        if len(args) == 1:
            return lambda: np.copyto(y, args[0])
        if len(args) > 2:   # variadic Min/Max (commutative): the input y is planned over
            args.sort(key=lambda a: not np.shares_memory(a, y))   # (in place) is read first
        first, rest = args[:2], args[2:]
        if not rest:   # the common case: one ufunc call, no Python frame of ours around it
            return functools.partial(ufunc, *first, out=y)

        def run():
            ufunc(*first, out=y)
            for a in rest:
                ufunc(y, a, out=y)
        return run
    return build


def _crop_add_build(node, graph, shapes, view, scratch):
    """Add of a crop: y = x[..., rows, cols] + b (a numpy add reading x's crop as a strided
    view took longer than the crop's copy and a contiguous add together)."""
    if "crop" not in node.attrs:
        return _ufunc_build(np.add)(node, graph, shapes, view, scratch)
    x, b, y = view(node.inputs[0]), view(node.inputs[1]), view(node.outputs[0])
    (top, _), (left, _) = node.attrs["crop"]
    args = (x.ctypes.data, x.shape[0] * x.shape[1], x.shape[2], x.shape[3], top, left,
            b.ctypes.data, y.shape[2], y.shape[3], y.ctypes.data)
    return keeping(functools.partial(_kernels.crop_add_at, *args), x, b, y)


def _crop_add(node, inputs):
    """Add's reference; with ``crop``, input 0 cropped to it first."""
    x, *rest = inputs
    if "crop" in node.attrs:
        (t, b), (l, r) = node.attrs["crop"]
        x = x[..., t:b, l:r]
    return _fold(np.add)(node, [x] + rest)


def _fold(ufunc):
    def reference(node, inputs):
        args = [a for a in inputs if a is not None]
        y = args[0]
        for a in args[1:]:
            y = ufunc(y, a)
        return [np.asarray(y).astype(args[0].dtype, copy=False)]
    return reference


def _div(node, inputs):
    a, b = inputs
    if np.issubdtype(a.dtype, np.integer):
        if np.any(b == 0):
            raise ZeroDivisionError(f"Div node {node.name!r}: integer division by zero")
        q = np.floor_divide(a, b)
        fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))   # ONNX truncates towards 0
        return [(q + fix.astype(q.dtype)).astype(a.dtype)]
    return [np.divide(a, b).astype(a.dtype)]


def _pow(node, inputs):
    base, e = inputs
    if np.issubdtype(base.dtype, np.integer) and np.issubdtype(e.dtype, np.integer):
        return [np.power(base, e).astype(base.dtype)]
    return [np.power(base.astype(np.float64), e.astype(np.float64)).astype(base.dtype)]


def _pow_build(node, graph, shapes, view, scratch):
    y = view(node.outputs[0])
    p, q = operand(graph, view, node.inputs[0]), operand(graph, view, node.inputs[1])
    e = _const_exponent(node, graph)
    # A constant exponent as products or a root: np.power's float path takes ~30x longer on
    # a negative base (tanh-GELU's x^3), and LayerNorm decompositions square. y may be p's
    # buffer (in place): each form reads p before it writes y, or only once.
    if e == 2.0:
        return lambda: np.multiply(p, p, out=y)
    if e == 3.0:
        sq = scratch[0]
        return lambda: (np.multiply(p, p, out=sq), np.multiply(sq, p, out=y))
    if e == 0.5:
        return lambda: np.sqrt(p, out=y)
    if e == 1.0:
        return lambda: np.copyto(y, p)
    if e == -1.0:
        return lambda: np.reciprocal(p, out=y)
    return lambda: np.power(p, q, out=y)


def _const_exponent(node, graph) -> float | None:
    q = graph.consts.get(node.inputs[1])
    return float(np.asarray(q).reshape(-1)[0]) if q is not None and np.size(q) == 1 else None


def _pow_scratch(node, shapes, graph):
    """x^3's square (the output may be x's own buffer)."""
    return [shapes[node.outputs[0]]] if _const_exponent(node, graph) == 3.0 else []


# --- PRelu: slope broadcast onto x (unidirectional) ---------------------------------------------

def _prelu_shapes(node, in_shapes, graph):
    x, slope = in_shapes[0], in_shapes[1]
    if tuple(np.broadcast_shapes(x, slope)) != tuple(x):
        raise ValueError(f"slope of shape {slope} does not broadcast onto x of shape {x}")
    return [x]


def _prelu_build(node, graph, shapes, view, scratch):
    x, y = view(node.inputs[0]), view(node.outputs[0])
    slope = operand(graph, view, node.inputs[1])
    tmp = scratch[0]
    zero = np.zeros((), np.float32)

    def prelu():   # y = max(x, 0) + slope * min(x, 0)
        np.minimum(x, zero, out=tmp)
        np.multiply(tmp, slope, out=tmp)
        np.maximum(x, zero, out=y)
        np.add(y, tmp, out=y)
    return prelu


def _prelu(node, inputs):
    x, slope = inputs
    return [np.where(x >= 0, x, x * slope).astype(x.dtype)]


# --- Equal, Where, Not: bool tensors, run by their references --------------------------------

def _bool_out(node, in_dtypes):
    return [np.dtype(bool)]


def _where_dtypes(node, in_dtypes):
    return [in_dtypes[1]]


def _where_build(node, graph, shapes, view, scratch):
    """Float32 x, y with a constant condition (a run-time bool one runs the reference)."""
    out = view(node.outputs[0])
    c = np.asarray(graph.consts[node.inputs[0]], bool)
    x, y = operand(graph, view, node.inputs[1]), operand(graph, view, node.inputs[2])

    def where():
        np.copyto(out, y)
        np.copyto(out, x, where=c)
    return where


def _equal(node, inputs):
    return [np.equal(inputs[0], inputs[1])]


def _where(node, inputs):
    c, x, y = inputs
    return [np.where(c, x, y).astype(x.dtype, copy=False)]


register(OpSpec("Add", _broadcast, _crop_add_build, _crop_add, inplace=True))
register(OpSpec("Sub", _broadcast, _ufunc_build(np.subtract), _fold(np.subtract), inplace=True))
register(OpSpec("Mul", _broadcast, _ufunc_build(np.multiply), _fold(np.multiply),
                inplace=True))
register(OpSpec("Div", _broadcast, _ufunc_build(np.divide), _div, inplace=True))
register(OpSpec("Pow", _broadcast, _pow_build, _pow, _pow_scratch, inplace=True))
register(OpSpec("Min", _broadcast, _ufunc_build(np.minimum), _fold(np.minimum), inplace=True))
register(OpSpec("Max", _broadcast, _ufunc_build(np.maximum), _fold(np.maximum), inplace=True))
register(OpSpec("PRelu", _prelu_shapes, _prelu_build, _prelu,
                lambda n, shapes, g: [shapes[n.outputs[0]]]))
register(OpSpec("Equal", _broadcast, never_built, _equal, out_dtypes=_bool_out))
register(OpSpec("Where", _broadcast, _where_build, _where, out_dtypes=_where_dtypes))
register(OpSpec("Not", lambda n, s, g: [s[0]], never_built,
                lambda n, i: [np.logical_not(i[0])]))
