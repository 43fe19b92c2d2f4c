"""Matrix products: MatMul (numpy matmul semantics: batched, broadcast, 1-D promoted) and Gemm
(alpha * A' B' + beta * C, C broadcast to (M, N)); float32 through numpy's BLAS."""
from __future__ import annotations

import numpy as np

from .base import OpSpec, operand, register


def _matmul_shape(a, b) -> tuple:
    if not a or not b:
        raise ValueError("MatMul of a scalar")
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        raise ValueError(f"inner sizes differ: {a} @ {b}")
    batch = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def _matmul_build(node, graph, shapes, view, scratch):
    y = view(node.outputs[0])
    a, b = (operand(graph, view, s) for s in node.inputs[:2])
    return lambda: np.matmul(a, b, out=y)


def _matmul(node, inputs):
    a, b = inputs
    return [np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)
            if a.dtype.kind == "f" else np.matmul(a, b)]


def _gemm_params(node):
    a = node.attrs
    return float(a.get("alpha", 1.0)), float(a.get("beta", 1.0)), int(a.get("transA", 0)), \
        int(a.get("transB", 0))


def _gemm_shapes(node, in_shapes, graph):
    _, _, ta, tb = _gemm_params(node)
    a, b = in_shapes[0], in_shapes[1]
    if len(a) != 2 or len(b) != 2:
        raise ValueError(f"A and B must be matrices, got {a} and {b}")
    m, k = a[::-1] if ta else a
    k2, n = b[::-1] if tb else b
    if k != k2:
        raise ValueError(f"inner sizes differ: {a} (transA={ta}) and {b} (transB={tb})")
    if len(in_shapes) > 2 and in_shapes[2] is not None and \
            tuple(np.broadcast_shapes(in_shapes[2], (m, n))) != (m, n):
        raise ValueError(f"C of shape {in_shapes[2]} does not broadcast to {(m, n)}")
    return [(m, n)]


def _gemm_build(node, graph, shapes, view, scratch):
    alpha, beta, ta, tb = _gemm_params(node)
    y = view(node.outputs[0])
    a, b = (operand(graph, view, s) for s in node.inputs[:2])
    a, b = (a.T if ta else a), (b.T if tb else b)
    c_name = node.inputs[2] if len(node.inputs) > 2 else ""
    if b is not None and node.inputs[1] in graph.consts and alpha != 1.0:
        b, alpha = np.ascontiguousarray(b * np.float32(alpha)), 1.0   # folded once
    alpha32, beta32 = np.array(alpha, np.float32), np.array(beta, np.float32)
    c = None
    if c_name and beta != 0.0:
        c = operand(graph, view, c_name)
        if c_name in graph.consts:
            c, beta32 = np.ascontiguousarray(c * beta32), None
    c_scaled = scratch[0] if c is not None and beta32 is not None else None

    def gemm():
        np.matmul(a, b, out=y)
        if alpha != 1.0:
            np.multiply(y, alpha32, out=y)
        if c_scaled is not None:
            np.multiply(c, beta32, out=c_scaled)
            np.add(y, c_scaled, out=y)
        elif c is not None:
            np.add(y, c, out=y)
    return gemm


def _gemm_scratch(node, shapes, graph):
    c_name = node.inputs[2] if len(node.inputs) > 2 else ""
    if c_name and c_name not in graph.consts and float(node.attrs.get("beta", 1.0)) != 0.0:
        return [shapes[c_name]]
    return []


def _gemm(node, inputs):
    alpha, beta, ta, tb = _gemm_params(node)
    a, b = (v.astype(np.float64) for v in inputs[:2])
    y = alpha * ((a.T if ta else a) @ (b.T if tb else b))
    if len(inputs) > 2 and inputs[2] is not None:
        y = y + beta * inputs[2].astype(np.float64)
    return [y.astype(inputs[0].dtype)]


register(OpSpec("MatMul", lambda n, s, g: [_matmul_shape(s[0], s[1])], _matmul_build, _matmul))
register(OpSpec("Gemm", _gemm_shapes, _gemm_build, _gemm, _gemm_scratch))
