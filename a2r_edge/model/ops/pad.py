"""Pad: constant, reflect, edge and wrap modes on any axes; pads as attribute (opset < 11) or
input, negative pads crop. The generators' case (the two spatial axes of an NCHW tensor, pads
>= 0, constant/reflect/edge) is one native a2r_pad2d call; otherwise the build copies x into the
middle of y once, then fills each padded axis's borders from values already in y, axis after
axis (corners come out as np.pad's)."""
from __future__ import annotations

import functools

import numpy as np

from ... import _kernels
from .base import OpSpec, UnsupportedOpError, given, keeping, plan_consts, register

_MODES = ("constant", "reflect", "edge", "wrap")


def pad_params(node, x_shape, get):
    """(mode, value, [(before, after)] per axis) of a Pad, checked against x_shape."""
    a, r = node.attrs, len(x_shape)
    mode = a.get("mode", "constant")
    if mode not in _MODES:
        raise UnsupportedOpError("Pad", node.name, f"mode {mode!r} ({', '.join(_MODES)})")
    pads = a.get("pads")
    value = a.get("value", 0.0)
    if pads is None:
        v = get(1)
        if v is None:
            raise ValueError("Pad needs pads")
        pads = v.reshape(-1).tolist()
        cv = get(2)
        value = 0.0 if cv is None or cv.size == 0 else cv.reshape(-1)[0]
    axes = get(3)
    axes = list(range(r)) if axes is None else [int(v) for v in axes.reshape(-1)]
    if len(pads) != 2 * len(axes) or any(not -r <= ax < r for ax in axes):
        raise ValueError(f"pads {pads} do not fit axes {axes} of rank {r}")
    per_axis = [(0, 0)] * r
    for i, ax in enumerate(axes):
        per_axis[ax % r] = (int(pads[i]), int(pads[i + len(axes)]))
    for ax, (b, e) in enumerate(per_axis):
        d = x_shape[ax] + min(b, 0) + min(e, 0)
        if d + max(b, 0) + max(e, 0) < 0 or d < 0:
            raise ValueError(f"pads {(b, e)} crop axis {ax} of size {x_shape[ax]} below 0")
        limit = {"reflect": d - 1, "wrap": d, "edge": d if d else -1}.get(mode)
        if limit is not None and (max(b, 0) > limit or max(e, 0) > limit) and (b > 0 or e > 0):
            raise ValueError(f"{mode} pads {(b, e)} too large for axis {ax} of size {d}")
    return mode, value, per_axis


def _split(per_axis):
    """The crop of x (negative pads) and the remaining non-negative pads."""
    crop = tuple(slice(-min(b, 0), (e if e < 0 else None)) for b, e in per_axis)
    return crop, [(max(b, 0), max(e, 0)) for b, e in per_axis]


def crop_of(node, x_shape, consts) -> tuple[tuple[int, int], ...] | None:
    """(start, stop) per axis of the part of x a Pad keeps when it only crops (every pad <= 0,
    one < 0: the mode and value do not matter), else None (it pads, or its pads are not
    constants in ``consts``)."""
    def get(k):
        name = node.inputs[k] if len(node.inputs) > k else ""
        if name and name not in consts:
            raise UnsupportedOpError(node.op, node.name, "pads known at run time only")
        return np.asarray(consts[name]) if name else None
    try:
        _, _, per_axis = pad_params(node, x_shape, get)
    except (ValueError, UnsupportedOpError):
        return None
    if max(max(p) for p in per_axis) > 0 or min(min(p) for p in per_axis) == 0:
        return None
    return tuple((-b, d + e) for d, (b, e) in zip(x_shape, per_axis))


def _out_shapes(node, in_shapes, graph):
    _, _, per_axis = pad_params(node, in_shapes[0], plan_consts(node, graph))
    return [tuple(d + b + e for d, (b, e) in zip(in_shapes[0], per_axis))]


def _border_copies(y, inner_sizes, pads, mode):
    """[(dst view, src view)] filling y's borders axis by axis from its middle."""
    copies = []
    for ax, ((b, e), d) in enumerate(zip(pads, inner_sizes)):
        if not (b or e):
            continue

        def at(s, ax=ax):
            return y[(slice(None),) * ax + (s,)]
        if mode == "reflect":   # y[b - 1 - i] = y[b + 1 + i]
            lo = at(slice(b + b, b, -1)) if b else None
            hi = at(slice(b + d - 2, b + d - 2 - e, -1) if b + d - 2 - e >= 0
                    else slice(b + d - 2, None, -1)) if e else None
        elif mode == "edge":
            lo, hi = at(slice(b, b + 1)), at(slice(b + d - 1, b + d))
        else:                   # wrap
            lo, hi = at(slice(d, d + b)), at(slice(b, b + e))
        if b:
            copies.append((at(slice(0, b)), lo))
        if e:
            copies.append((at(slice(b + d, b + d + e)), hi))
    return copies


def _build(node, graph, shapes, view, scratch):
    x, y = view(node.inputs[0]), view(node.outputs[0])
    mode, value, per_axis = pad_params(node, x.shape, plan_consts(node, graph))
    if mode in _kernels.PAD2D_MODES and x.ndim == 4 and per_axis[:2] == [(0, 0), (0, 0)] \
            and min(min(p) for p in per_axis) >= 0:
        (top, bottom), (left, right) = per_axis[2:]
        nc, h, w = x.shape[0] * x.shape[1], x.shape[2], x.shape[3]
        args = (x.ctypes.data, nc, h, w, top, bottom, left, right, _kernels.PAD2D_MODES[mode],
                float(np.float32(value)), y.ctypes.data)
        return keeping(functools.partial(_kernels.pad2d_at, *args), x, y)
    crop, pads = _split(per_axis)
    src = x[crop]
    if not any(b or e for b, e in pads):   # only a crop: one copy, no fill first
        return lambda: np.copyto(y, src)
    inner = y[tuple(slice(b, b + d) for (b, _), d in zip(pads, src.shape))]
    if mode == "constant":
        fill = np.float32(value)

        def pad_constant():
            y.fill(fill)
            np.copyto(inner, src)
        return pad_constant
    copies = _border_copies(y, src.shape, pads, mode)

    def pad_copy():
        np.copyto(inner, src)
        for dst, s in copies:
            np.copyto(dst, s)
    return pad_copy


def _reference(node, inputs):
    x = inputs[0]
    mode, value, per_axis = pad_params(node, x.shape, given(inputs))
    crop, pads = _split(per_axis)
    kw = dict(constant_values=np.asarray(value).astype(x.dtype)) if mode == "constant" else {}
    return [np.pad(x[crop], pads, mode=mode, **kw)]


register(OpSpec("Pad", _out_shapes, _build, _reference))
