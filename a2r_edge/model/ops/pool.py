"""Pooling over the spatial axes of (N, C, D1, ..., Dk): MaxPool, AveragePool (pads, strides,
dilations, auto_pad, ceil_mode, count_include_pad), GlobalAveragePool, GlobalMaxPool.

2-D MaxPool and AveragePool run on the native kernels (a2r_maxpool, a2r_avgpool; the
average's divisor per output position computed once per plan). Other window pools (1-D, 3-D)
run one numpy max/add per kernel tap over strided views of a padded copy of x (padding -inf
for max, 0 for average). MaxPool's optional
Indices output is refused.
"""
from __future__ import annotations

import itertools

import numpy as np

from ... import _kernels
from .base import OpSpec, UnsupportedOpError, register


def pool_geometry(node, x_shape) -> dict:
    """Kernel, strides, dilations, pads before, pads after (including the ceil_mode overhang),
    the real pads after, and the output size, per spatial axis."""
    a, sp = node.attrs, len(x_shape) - 2
    if sp < 1:
        raise ValueError(f"input rank {len(x_shape)}: pooling needs (N, C, spatial...)")
    k = [int(v) for v in a["kernel_shape"]]
    s = [int(v) for v in a.get("strides") or [1] * sp]
    d = [int(v) for v in a.get("dilations") or [1] * sp]
    p = [int(v) for v in a.get("pads") or [0] * 2 * sp]
    if not len(k) == len(s) == len(d) == sp or len(p) != 2 * sp:
        raise ValueError(f"kernel {k}, strides {s}, dilations {d}, pads {p} do not fit "
                         f"{sp} spatial axes")
    if min(k + s + d) < 1 or min(p) < 0:
        raise ValueError(f"kernel {k}, strides {s}, dilations {d} must be >= 1, pads >= 0")
    ins = list(x_shape[2:])
    auto, ceil_mode = a.get("auto_pad", "NOTSET"), int(a.get("ceil_mode", 0))
    reach = [(kk - 1) * dd + 1 for kk, dd in zip(k, d)]
    pb, pe, out = p[:sp], p[sp:], []
    for i in range(sp):
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-ins[i] // s[i])
            total = max((o - 1) * s[i] + reach[i] - ins[i], 0)
            small = total // 2
            pb[i], pe[i] = (small, total - small) if auto == "SAME_UPPER" else \
                (total - small, small)
        elif auto == "VALID":
            pb[i] = pe[i] = 0
        elif auto not in ("NOTSET", ""):
            raise UnsupportedOpError(node.op, node.name, f"auto_pad {auto!r}")
        span = ins[i] + pb[i] + pe[i] - reach[i]
        if span < 0:
            raise ValueError(f"kernel reach {reach[i]} exceeds padded size "
                             f"{ins[i] + pb[i] + pe[i]}")
        o = (-(-span // s[i]) if ceil_mode else span // s[i]) + 1
        if ceil_mode and (o - 1) * s[i] >= ins[i] + pb[i]:
            o -= 1   # the last window would start in the end padding
        out.append(o)
    pe_ext = [max(pe[i], (out[i] - 1) * s[i] + reach[i] - ins[i] - pb[i]) for i in range(sp)]
    return dict(k=k, s=s, d=d, pb=pb, pe=pe, pe_ext=pe_ext, out=out)


def _taps(g):
    """Index tuples (over all axes) of the strided view of the padded x under each kernel tap."""
    lead = (slice(None), slice(None))
    for tap in itertools.product(*(range(kk) for kk in g["k"])):
        yield lead + tuple(slice(t * dd, t * dd + ss * (oo - 1) + 1, ss)
                           for t, dd, ss, oo in zip(tap, g["d"], g["s"], g["out"]))


def _window_shapes(node, in_shapes, graph):
    if len(node.outputs) > 1 and node.outputs[1]:
        raise UnsupportedOpError(node.op, node.name, "the Indices output")
    g = pool_geometry(node, in_shapes[0])
    return [tuple(in_shapes[0][:2]) + tuple(g["out"])]


def _padded_shape(x_shape, g):
    return tuple(x_shape[:2]) + tuple(n + b + e for n, b, e in
                                      zip(x_shape[2:], g["pb"], g["pe_ext"]))


def _needs_padding(g):
    return any(g["pb"]) or any(g["pe_ext"])


def _native(x_shape):
    """2-D MaxPool and AveragePool run on the native kernels (no padded copy)."""
    return len(x_shape) == 4


def _scratch(node, shapes, graph):
    x = shapes[node.inputs[0]]
    if _native(x):
        return []
    g = pool_geometry(node, x)
    return [_padded_shape(x, g)] if _needs_padding(g) else []


def _divisor(node, x_shape, g) -> np.ndarray:
    """Per output position: how many inputs an AveragePool window averages."""
    include = int(node.attrs.get("count_include_pad", 0))
    mask = np.zeros((1, 1) + _padded_shape(x_shape, g)[2:], np.float64)
    inner = tuple(slice(b, b + n) for b, n in zip(g["pb"], x_shape[2:]))
    if include:   # the pads count, the ceil_mode overhang does not
        inner = tuple(slice(0, b + n + e) for b, n, e in zip(g["pb"], x_shape[2:], g["pe"]))
    mask[(slice(None), slice(None)) + inner] = 1
    count = sum(mask[t] for t in _taps(g))
    return np.maximum(count, 1).astype(np.float32)


def _pool(node, x, y, xp, kind, x_dtype=np.float32):
    """The run closure of a window pool writing y (xp: padded scratch or None)."""
    g = pool_geometry(node, x.shape)
    src = x
    if xp is not None:
        inner = xp[(slice(None), slice(None)) + tuple(
            slice(b, b + n) for b, n in zip(g["pb"], x.shape[2:]))]
        fill = (-np.inf if np.dtype(x_dtype).kind == "f" else np.iinfo(x_dtype).min) \
            if kind == "max" else 0
        src = xp
    taps = [src[t] for t in _taps(g)]
    first, rest = taps[0], taps[1:]
    combine = np.maximum if kind == "max" else np.add
    div = _divisor(node, x.shape, g) if kind == "avg" else None

    def run():
        if xp is not None:
            xp.fill(fill)
            np.copyto(inner, x)
        np.copyto(y, first)
        for t in rest:
            combine(y, t, out=y)
        if div is not None:
            np.divide(y, div, out=y)
    return run


def _build_native(node, x, y, kind):
    g = pool_geometry(node, x.shape)
    nb, c, h, w = x.shape
    args = (nb * c, h, w, *g["k"], *g["s"], *g["pb"], *g["d"], *g["out"])
    xf, yf = x.reshape(-1), y.reshape(-1)
    if x.size == 0:
        return lambda: None
    if kind == "max":
        return lambda: _kernels.maxpool(xf, *args, yf)
    count = _divisor(node, x.shape, g).reshape(-1)   # per output pixel, made once
    return lambda: _kernels.avgpool(xf, *args, count, yf)


def _window_builder(kind):
    def build(node, graph, shapes, view, scratch):
        x = view(node.inputs[0])
        if _native(x.shape):
            return _build_native(node, x, view(node.outputs[0]), kind)
        return _pool(node, view(node.inputs[0]), view(node.outputs[0]),
                     scratch[0] if scratch else None, kind)
    return build


def _window_reference(kind):
    def reference(node, inputs):
        x = inputs[0]
        work = x.astype(np.float64) if kind == "avg" else x
        g = pool_geometry(node, x.shape)
        y = np.empty(tuple(x.shape[:2]) + tuple(g["out"]), work.dtype)
        xp = np.empty(_padded_shape(x.shape, g), work.dtype) if _needs_padding(g) else None
        _pool(node, work, y, xp, kind, work.dtype)()
        return [y.astype(x.dtype)]
    return reference


# --- global pools --------------------------------------------------------------------------------

def _global_shapes(node, in_shapes, graph):
    x = in_shapes[0]
    if len(x) < 3:
        raise ValueError(f"input rank {len(x)}: needs (N, C, spatial...)")
    return [tuple(x[:2]) + (1,) * (len(x) - 2)]


def _global_builder(reduce):
    def build(node, graph, shapes, view, scratch):
        x, y = view(node.inputs[0]), view(node.outputs[0])
        axes = tuple(range(2, x.ndim))
        return lambda: reduce(x, axis=axes, keepdims=True, out=y)
    return build


def _global_reference(reduce):
    def reference(node, inputs):
        x = inputs[0]
        axes = tuple(range(2, x.ndim))
        return [reduce(x.astype(np.float64), axis=axes, keepdims=True).astype(x.dtype)]
    return reference


register(OpSpec("MaxPool", _window_shapes, _window_builder("max"), _window_reference("max"),
                _scratch))
register(OpSpec("AveragePool", _window_shapes, _window_builder("avg"), _window_reference("avg"),
                _scratch))
register(OpSpec("GlobalAveragePool", _global_shapes, _global_builder(np.mean),
                _global_reference(np.mean)))
register(OpSpec("GlobalMaxPool", _global_shapes, _global_builder(np.max),
                _global_reference(np.max)))
