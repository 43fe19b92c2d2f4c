"""Reductions: ReduceMean, ReduceSum, ReduceMax, ReduceProd (axes as attribute or input,
keepdims, noop_with_empty_axes; an empty reduction gives the operation's identity), and Softmax
(max-subtracted, over one axis)."""
from __future__ import annotations

import numpy as np

from ... import _kernels
from .base import OpSpec, UnsupportedOpError, attr_axis, given, plan_consts, register


def reduce_axes(node, rank, get) -> tuple | None:
    """The reduced axes (sorted, non-negative), or None for "nothing: copy the input"."""
    axes = node.attrs.get("axes")
    if axes is None:
        v = get(1)
        axes = None if v is None else [int(a) for a in v.reshape(-1)]
    if not axes:
        if int(node.attrs.get("noop_with_empty_axes", 0)):
            return None
        return tuple(range(rank))
    if any(not -rank <= a < rank for a in axes):
        raise ValueError(f"axes {axes} out of range for rank {rank}")
    return tuple(sorted({a % rank for a in axes}))


def _reduced_shape(node, x_shape, axes):
    if axes is None:
        return tuple(x_shape)
    keep = int(node.attrs.get("keepdims", 1))
    return tuple((1 if i in axes else d) for i, d in enumerate(x_shape)
                 if keep or i not in axes)


def _out_shapes(node, in_shapes, graph):
    x = in_shapes[0]
    return [_reduced_shape(node, x, reduce_axes(node, len(x), plan_consts(node, graph)))]


def _builder(fn):
    def build(node, graph, shapes, view, scratch):
        x, y = view(node.inputs[0]), view(node.outputs[0])
        axes = reduce_axes(node, x.ndim, plan_consts(node, graph))
        if axes is None:
            return lambda: np.copyto(y, x)
        if x.size == 0 or y.size == 0:
            ident = _identity(fn, np.float32)
            return lambda: y.fill(ident)
        yk = y.reshape(_reduced_shape(node, x.shape, axes) if int(node.attrs.get(
            "keepdims", 1)) else tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
        rows = _rows_reduced(x, axes) if fn in (np.sum, np.mean) else None
        if rows is not None:
            x3, shape = rows
            y2, count = yk.reshape(shape), x3.shape[1]

            def sum_rows():
                np.einsum("arb->ab", x3, out=y2)
                if fn is np.mean:
                    np.divide(y2, count, out=y2)
            return sum_rows
        return lambda: fn(x, axis=axes, keepdims=True, out=yk)
    return build


def _rows_reduced(x, axes):
    """A sum over a block of consecutive axes followed by others (an NHWC map's H and W: the
    columns of a (H*W, C) matrix) as numpy's einsum over x as (A, R, B) into (A, B): (x3, the
    result's shape). numpy's reduction over a non-last axis adds B values per row: the one-op
    graph on a (1, 512, 512, 32) map took 7.2 ms with it, 4.6 ms with einsum, its input copy
    included (`benchmarks/bench_generator_ops.py -k ReduceMean`, 1 thread; np.matmul by ones
    was as fast but on BLAS, whose spinning threads took the second core from the native
    kernels). None where the axes are not such a block or x is not float32."""
    if x.dtype != np.float32 or list(axes) != list(range(axes[0], axes[-1] + 1)) \
            or axes[-1] == x.ndim - 1:
        return None
    a = int(np.prod(x.shape[:axes[0]]))
    r = int(np.prod(x.shape[axes[0]:axes[-1] + 1]))
    b = int(np.prod(x.shape[axes[-1] + 1:]))
    if r < 2 or b < 2:
        return None
    return x.reshape(a, r, b), (a, b)


def _identity(fn, dtype):
    dtype = np.dtype(dtype)
    if fn is np.max:
        return -np.inf if dtype.kind == "f" else (False if dtype.kind == "b"
                                                  else np.iinfo(dtype).min)
    return {np.sum: 0, np.prod: 1, np.mean: np.nan}[fn]


def _reference(fn):
    def reference(node, inputs):
        x = inputs[0]
        axes = reduce_axes(node, x.ndim, given(inputs))
        if axes is None:
            return [x.copy()]
        shape = _reduced_shape(node, x.shape, axes)
        if x.size == 0:
            return [np.full(shape, _identity(fn, x.dtype), x.dtype)]
        work = x.astype(np.float64) if x.dtype.kind == "f" and fn is not np.max else x
        y = fn(work, axis=axes, keepdims=True)
        return [np.asarray(y).reshape(shape).astype(x.dtype)]
    return reference


# --- Softmax -------------------------------------------------------------------------------------

def _softmax_axis(node, rank, opset=13):
    axis = attr_axis(node, rank, default=-1 if opset >= 13 else 1)
    if opset < 13 and axis != rank - 1:
        raise UnsupportedOpError("Softmax", node.name, f"opset {opset} with axis {axis} of a "
                                 f"rank-{rank} input (the pre-13 2-D coercion)")
    return axis


def _softmax_shapes(node, in_shapes, graph):
    _softmax_axis(node, len(in_shapes[0]), graph.opset)
    return [in_shapes[0]]


def _softmax_scratch(node, shapes, graph):
    """The per-row maxima and sums of the numpy form; none on the rows kernel (the last axis)."""
    x = shapes[node.inputs[0]]
    axis = _softmax_axis(node, len(x), graph.opset)
    if axis == len(x) - 1:
        return []
    return [tuple(1 if i == axis else d for i, d in enumerate(x))]


def _softmax_build(node, graph, shapes, view, scratch):
    x, y = view(node.inputs[0]), view(node.outputs[0])
    axis = _softmax_axis(node, x.ndim, graph.opset)
    if axis == x.ndim - 1:   # the rows kernel (attention's scores)
        xf, yf, n = x.reshape(-1), y.reshape(-1), x.shape[-1]
        return (lambda: _kernels.softmax_rows(xf, yf, x.size // n, n)) if x.size else \
            (lambda: None)
    m = scratch[0]

    def softmax():
        np.max(x, axis=axis, keepdims=True, out=m)
        np.subtract(x, m, out=y)
        np.exp(y, out=y)
        np.sum(y, axis=axis, keepdims=True, out=m)
        np.divide(y, m, out=y)
    return softmax


def _softmax(node, inputs):
    """Softmax with opset-13 semantics (one axis, default -1)."""
    x = inputs[0]
    axis = _softmax_axis(node, x.ndim)
    e = np.exp(x.astype(np.float64) - np.max(x, axis=axis, keepdims=True))
    return [(e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)]


for _op, _fn in (("ReduceMean", np.mean), ("ReduceSum", np.sum), ("ReduceMax", np.max),
                 ("ReduceProd", np.prod)):
    register(OpSpec(_op, _out_shapes, _builder(_fn), _reference(_fn)))
register(OpSpec("Softmax", _softmax_shapes, _softmax_build, _softmax, _softmax_scratch,
                inplace=True))
