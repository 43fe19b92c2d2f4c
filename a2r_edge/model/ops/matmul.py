"""Matrix products: MatMul (numpy matmul semantics: batched, broadcast, 1-D promoted) and Gemm
(alpha * A' B' + beta * C, C broadcast to (M, N)); float32 through numpy's BLAS.

A product by a constant (K, N) matrix with K, N >= LOWP_MIN_INNER, at least LOWP_MIN_ROWS rows
(A's leading axes together) and LOWP_MIN_MACS multiply-adds runs at the plan's bf16/int8
precision (the conv.py attributes) as a 1x1 convolution on ops.Conv2d: x = A transposed (K
channels, the rows as pixels), weights B transposed, packed once per plan, then y transposed
back (the transpose kernel: numpy's strided copy costs 3-6x more). At fp32 and below those
sizes numpy's BLAS runs it. Measured at 1 thread, CPU time against numpy fp32 (docs/models.md,
"Reduced precision"): the 1x1 form at fp32 is 0.8-1.0x; at bf16 / int8, at the threshold
(32x256 @ 256x256, 128x128 @ 128x128) 1.0x / 1.3-1.5x, below it 0.6-0.85x / 0.75-1.1x
(64x128 @ 128x128, 16x256 @ 256x256, 8x512 @ 512x512: the transposes and conversions cost
more than the faster products gain), and with K = 64 0.8-0.9x / 0.9-1.0x even at 4096 rows;
above it 1.1-1.7x / 1.3-2.8x (256 to 1024 rows, K, N 128 to 512).
"""
from __future__ import annotations

import functools

import numpy as np

from ... import _kernels, ops
from ...runtime.threads import blas_on_one_thread
from .base import OpSpec, operand, register
from .conv import precision_args, probing

LOWP_MIN_ROWS, LOWP_MIN_INNER, LOWP_MIN_MACS = 32, 128, 1 << 21


def _lowp_why(node, a_shape, b_shape, graph) -> str:
    """"" when A (rows..., K) @ B (K, N) runs at low precision (module doc), else why not."""
    if node.inputs[1] not in graph.consts:
        return "B is not a constant (nothing to pack once)"
    if len(b_shape) != 2 or len(a_shape) < 2:
        return f"not a matrix by a matrix ({a_shape} @ {b_shape})"
    rows, (k, n) = int(np.prod(a_shape[:-1])), b_shape
    if rows < LOWP_MIN_ROWS or min(k, n) < LOWP_MIN_INNER or rows * k * n < LOWP_MIN_MACS:
        return (f"small product ({rows}x{k} @ {k}x{n}; numpy fp32 is faster below "
                f"{LOWP_MIN_ROWS} rows, K, N {LOWP_MIN_INNER}, {LOWP_MIN_MACS >> 20}M "
                f"multiply-adds)")
    return ""


def _at_lowp(node) -> bool:
    return node.attrs.get("precision", "fp32") != "fp32"


def _lowp_scratch(rows, k, n, transposed_a=False) -> list[tuple]:
    """A transposed (unless it already is) and y transposed: the 1x1 conv's x and output."""
    return ([] if transposed_a else [(k, rows)]) + [(n, rows)]


def _lowp_product(node, a2, w, bias, y2, scratch, transposed_a=False):
    """Closure y2 (R, N) = a2 @ w + bias by a 1x1 ops.Conv2d at the node's precision; a2 is
    (R, K), or (K, R) when transposed_a (Gemm transA: x as it is); w (K, N) constant."""
    k, n = w.shape
    rows = y2.shape[0]
    xt = a2 if transposed_a else scratch[0]
    yt = scratch[-1]
    conv = ops.Conv2d(np.ascontiguousarray(w.T).reshape(n, k, 1, 1), bias,
                      **precision_args(node)).bind(xt.reshape(1, k, 1, rows),
                                                   out=yt.reshape(1, n, 1, rows))

    # flat views for the kernel (a plan's tensors are C-contiguous: reshape copies nothing)
    assert all(t.flags.c_contiguous for t in (xt, yt, y2)) and \
        (transposed_a or a2.flags.c_contiguous)
    af, xf, yf, y2f = (t.reshape(-1) for t in (a2 if not transposed_a else xt, xt, yt, y2))

    def product():
        if not transposed_a:
            _kernels.transpose(af, 1, rows, k, xf)
        conv()
        _kernels.transpose(yf, 1, n, rows, y2f)
    return product


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
    if _at_lowp(node):
        return _lowp_product(node, a.reshape(-1, a.shape[-1]), b, None,
                             y.reshape(-1, b.shape[1]), scratch)
    return probing(node, a, blas_on_one_thread(lambda: np.matmul(a, b, out=y),
                                               y.size * a.shape[-1]))


def _matmul_lowp(node, shapes, graph) -> str:
    return _lowp_why(node, shapes[node.inputs[0]], shapes[node.inputs[1]], graph)


def _matmul_scratch(node, shapes, graph):
    if not _at_lowp(node):
        return []
    a, b = shapes[node.inputs[0]], shapes[node.inputs[1]]
    return _lowp_scratch(int(np.prod(a[:-1])), *b)


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
    product = functools.partial(np.matmul, a, b, out=y)
    if _at_lowp(node):   # a constant row of C (beta folded) goes into the conv's bias
        bias = None
        if c is not None and beta32 is None and c.size == b.shape[1] == c.shape[-1]:
            bias, c = c.reshape(-1), None
        own = scratch[len(scratch) - len(_lowp_scratch(1, 1, 1, bool(ta))):]   # after C's
        product = _lowp_product(node, a.T if ta else a, b, bias, y, own, bool(ta))
    else:
        product = probing(node, a, blas_on_one_thread(product, y.size * a.shape[-1]))

    def gemm():
        product()
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
    scaled_c = []
    if c_name and c_name not in graph.consts and float(node.attrs.get("beta", 1.0)) != 0.0:
        scaled_c = [shapes[c_name]]
    if not _at_lowp(node):
        return scaled_c
    (m, k), (_, n) = _gemm_operands(node, shapes)
    return scaled_c + _lowp_scratch(m, k, n, bool(_gemm_params(node)[2]))


def _gemm_operands(node, shapes) -> tuple[tuple, tuple]:
    """The shapes of A' and B' (transA/transB applied)."""
    _, _, ta, tb = _gemm_params(node)
    a, b = shapes[node.inputs[0]], shapes[node.inputs[1]]
    return tuple(a[::-1] if ta else a), tuple(b[::-1] if tb else b)


def _gemm_lowp(node, shapes, graph) -> str:
    return _lowp_why(node, *_gemm_operands(node, shapes), graph)


def _gemm(node, inputs):
    alpha, beta, ta, tb = _gemm_params(node)
    a, b = (v.astype(np.float64) for v in inputs[:2])
    y = alpha * ((a.T if ta else a) @ (b.T if tb else b))
    if len(inputs) > 2 and inputs[2] is not None:
        y = y + beta * inputs[2].astype(np.float64)
    return [y.astype(inputs[0].dtype)]


register(OpSpec("MatMul", lambda n, s, g: [_matmul_shape(s[0], s[1])], _matmul_build, _matmul,
                 _matmul_scratch, lowp=_matmul_lowp))
register(OpSpec("Gemm", _gemm_shapes, _gemm_build, _gemm, _gemm_scratch, lowp=_gemm_lowp))
