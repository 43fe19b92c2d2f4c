"""Ops that move values without arithmetic: Constant, Concat, DepthToSpace."""
from __future__ import annotations

import numpy as np

from ... import _kernels
from .base import OpSpec, UnsupportedOpError, register


# --- Constant: folded into graph.consts at load, never planned -------------------------------

def _constant(n, inputs):
    from onnx import numpy_helper
    a = n.attrs
    if "value" in a:
        return [numpy_helper.to_array(a["value"])]
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in a:
            return [np.asarray(a[key], dtype)]
    raise UnsupportedOpError("Constant", n.name, f"attribute {sorted(a)} not supported")


def _constant_shapes(n, ins, graph):
    return [tuple(_constant(n, [])[0].shape)]


def _not_planned(n, graph, shapes, view, scratch):
    raise AssertionError(f"{n.op} node {n.name!r} reached the plan (load folds it)")


# --- Concat: producers may write straight into the output's slices ("aliased") ---------------

def _concat_shapes(n, ins, graph):
    axis = n.attrs["axis"] % len(ins[0])
    base = list(ins[0])
    base[axis] = sum(s[axis] for s in ins)
    for s in ins:
        if len(s) != len(base) or any(s[i] != base[i] for i in range(len(s)) if i != axis):
            raise ValueError(f"inputs {ins} differ off axis {axis}")
    return [tuple(base)]


def _build_concat(n, graph, shapes, view, scratch):
    out = view(n.outputs[0])
    axis = n.attrs["axis"] % out.ndim
    copies, k = [], 0
    for s in n.inputs:
        size = shapes[s][axis]
        if s not in n.attrs.get("aliased", ()):
            index = (slice(None),) * axis + (slice(k, k + size),)
            src = np.ascontiguousarray(graph.consts[s], np.float32) \
                if s in graph.consts else view(s)
            copies.append((out[index], src))
        k += size
    if not copies:
        return None

    def concat():
        for dst, src in copies:
            np.copyto(dst, src)
    return concat


def _concat(n, inputs):
    return [np.concatenate(inputs, axis=n.attrs["axis"])]


# --- DepthToSpace ------------------------------------------------------------------------------

def _d2s_shapes(n, ins, graph):
    r = n.attrs["blocksize"]
    if len(ins[0]) != 4 or ins[0][1] % (r * r):
        raise ValueError(f"channels not a multiple of blocksize^2 = {r * r}")
    nb, c, h, w = ins[0]
    return [(nb, c // (r * r), h * r, w * r)]


def _build_d2s(n, graph, shapes, view, scratch):
    x, y = view(n.inputs[0]), view(n.outputs[0])
    r = n.attrs["blocksize"]
    nb, c, h, w = y.shape
    if n.attrs.get("mode", "DCR") == "CRD":
        xf, yf = x.reshape(-1), y.reshape(-1)
        return lambda: _kernels.pixel_shuffle(xf, nb, c, h // r, w // r, r, yf)
    src = x.reshape(nb, r, r, c, h // r, w // r).transpose(0, 3, 4, 1, 5, 2)
    dst = y.reshape(nb, c, h // r, r, w // r, r)
    return lambda: np.copyto(dst, src)


def _d2s(n, inputs):
    x = inputs[0]
    r = n.attrs["blocksize"]
    nb, c, h, w = x.shape
    if n.attrs.get("mode", "DCR") == "CRD":
        t = x.reshape(nb, c // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        t = x.reshape(nb, r, r, c // (r * r), h, w).transpose(0, 3, 4, 1, 5, 2)
    return [np.ascontiguousarray(t).reshape(nb, c // (r * r), h * r, w * r)]


register(OpSpec("Constant", _constant_shapes, _not_planned, _constant))
register(OpSpec("Concat", _concat_shapes, _build_concat, _concat))
register(OpSpec("DepthToSpace", _d2s_shapes, _build_d2s, _d2s))
