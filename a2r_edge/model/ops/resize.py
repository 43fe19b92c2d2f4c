"""Resize of H, W of an NCHW tensor: nearest (each rounding mode) and linear, separable, with
onnxruntime's float32 coordinate arithmetic; index tables computed once per plan."""
from __future__ import annotations

import math

import numpy as np

from .base import OpSpec, UnsupportedOpError, register


def resize_params(node, consts, x_shape, opset) -> dict:
    """Resize on H, W of an NCHW tensor: output size, scales and modes, checked."""
    a, ins = node.attrs, node.inputs
    mode = a.get("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise UnsupportedOpError("Resize", node.name, f"mode {mode!r} (nearest and linear only)")
    if opset < 11:
        coord, scales_name, sizes_name = "asymmetric", ins[1] if len(ins) > 1 else "", ""
    else:
        coord = a.get("coordinate_transformation_mode", "half_pixel")
        scales_name = ins[2] if len(ins) > 2 else ""
        sizes_name = ins[3] if len(ins) > 3 else ""
    nearest = a.get("nearest_mode", "round_prefer_floor")
    if coord not in ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"):
        raise UnsupportedOpError("Resize", node.name, f"coordinate_transformation_mode {coord!r}")
    if mode == "nearest" and nearest not in ("round_prefer_floor", "round_prefer_ceil", "floor",
                                             "ceil"):
        raise UnsupportedOpError("Resize", node.name, f"nearest_mode {nearest!r}")
    for key in ("axes", "antialias", "keep_aspect_ratio_policy"):
        if key in a and a[key] not in (0, "stretch", [0, 1, 2, 3]):
            raise UnsupportedOpError("Resize", node.name, f"attribute {key}={a[key]!r}")
    if len(x_shape) != 4:
        raise UnsupportedOpError("Resize", node.name, f"input rank {len(x_shape)} (NCHW only)")
    for nm in (scales_name, sizes_name):
        if nm and nm not in consts:
            raise UnsupportedOpError("Resize", node.name, f"scales/sizes {nm!r} not constant")
    scales = consts[scales_name].astype(np.float32) if scales_name else np.zeros(0, np.float32)
    if scales.size:
        if scales.shape != (4,):
            raise UnsupportedOpError("Resize", node.name, f"scales of shape {scales.shape}")
        out = [int(math.floor(x_shape[i] * float(scales[i]))) for i in range(4)]
    elif sizes_name:
        sizes = consts[sizes_name].astype(np.int64)
        if sizes.shape != (4,):
            raise UnsupportedOpError("Resize", node.name, f"sizes of shape {sizes.shape}")
        out = [int(v) for v in sizes]
        scales = np.array([out[i] / x_shape[i] for i in range(4)], np.float32)
    else:
        raise UnsupportedOpError("Resize", node.name, "neither scales nor sizes given")
    if out[0] != x_shape[0] or out[1] != x_shape[1]:
        raise UnsupportedOpError("Resize", node.name, "resizing N or C (H, W only)")
    if min(out) < 1:
        raise ValueError(f"Resize node {node.name!r}: output size {out} for input {x_shape}")
    return dict(mode=mode, coord=coord, nearest=nearest, out_shape=tuple(out),
                scales=(float(scales[2]), float(scales[3])))


def _resize_axis(in_size, out_size, scale, p, linear):
    """Source indices (and weights of the upper neighbour for linear) of one axis, with
    onnxruntime's float32 coordinate arithmetic."""
    xr = np.arange(out_size, dtype=np.float32)
    s = np.float32(scale)
    coord = p["coord"]
    if coord == "half_pixel":
        xo = (xr + np.float32(0.5)) / s - np.float32(0.5)
    elif coord == "pytorch_half_pixel":
        xo = (xr + np.float32(0.5)) / s - np.float32(0.5) if out_size > 1 else np.zeros_like(xr)
    elif coord == "asymmetric":
        xo = xr / s
    else:  # align_corners
        xo = xr * np.float32(in_size - 1) / np.float32(out_size - 1) if out_size > 1 \
            else np.zeros_like(xr)
    if not linear:
        mode = p["nearest"]
        if mode == "floor":
            i = np.floor(xo)
        elif mode == "ceil":
            i = np.ceil(xo)
        else:
            half = xo - np.floor(xo) == np.float32(0.5)
            prefer = np.floor(xo) if mode == "round_prefer_floor" else np.ceil(xo)
            i = np.where(half, prefer, np.floor(xo + np.float32(0.5)))
        return np.clip(i, 0, in_size - 1).astype(np.intp), None, None
    xo = np.clip(xo, np.float32(0), np.float32(in_size - 1))
    i0 = np.minimum(xo.astype(np.intp), in_size - 1)
    i1 = np.minimum(i0 + 1, in_size - 1)
    w1 = (xo - i0.astype(np.float32)).astype(np.float32)
    return i0, i1, w1


def _tables(n, graph, x_shape, y_shape):
    p = resize_params(n, graph.consts, x_shape, graph.opset)
    linear = p["mode"] == "linear"
    (h, w), (oh, ow) = x_shape[2:], y_shape[2:]
    return linear, _resize_axis(h, oh, p["scales"][0], p, linear), \
        _resize_axis(w, ow, p["scales"][1], p, linear)


def _out_shapes(n, ins, graph):
    return [resize_params(n, graph.consts, ins[0], graph.opset)["out_shape"]]


def _scratch_shapes(n, shapes, graph):
    nb, c, h, w = shapes[n.inputs[0]]
    oh, ow = shapes[n.outputs[0]][2:]
    if resize_params(n, graph.consts, (nb, c, h, w), graph.opset)["mode"] == "nearest":
        return [(nb, c, oh, w)]
    return [(nb, c, oh, w), (nb, c, oh, w), (nb, c, oh, ow)]


def _build(n, graph, shapes, view, scratch):
    x, y = view(n.inputs[0]), view(n.outputs[0])
    linear, (ry0, ry1, wy), (rx0, rx1, wx) = _tables(n, graph, x.shape, y.shape)
    if not linear:
        rows = scratch[0]

        def nearest():
            np.take(x, ry0, axis=2, out=rows, mode="clip")
            np.take(rows, rx0, axis=3, out=y, mode="clip")
        return nearest
    top, bottom, right = scratch
    wy1, wy0 = wy.reshape(-1, 1), (1 - wy).reshape(-1, 1)
    wx1, wx0 = wx, 1 - wx

    def bilinear():
        np.take(x, ry0, axis=2, out=top, mode="clip")
        np.take(x, ry1, axis=2, out=bottom, mode="clip")
        np.multiply(top, wy0, out=top)
        np.multiply(bottom, wy1, out=bottom)
        np.add(top, bottom, out=top)
        np.take(top, rx0, axis=3, out=y, mode="clip")
        np.take(top, rx1, axis=3, out=right, mode="clip")
        np.multiply(y, wx0, out=y)
        np.multiply(right, wx1, out=right)
        np.add(y, right, out=y)
    return bilinear


class _Consts:
    """A graph stand-in for resize_params: the node's constant inputs."""

    def __init__(self, n, inputs, opset):
        self.consts = {s: v for s, v in zip(n.inputs, inputs) if s and v is not None}
        self.opset = opset


def _reference(n, inputs):
    x = inputs[0]
    g = _Consts(n, inputs, 10 if len(n.inputs) == 2 else 11)   # (X, scales): the opset-10 form
    out = _out_shapes(n, [x.shape], g)[0]
    linear, (ry0, ry1, wy), (rx0, rx1, wx) = _tables(n, g, x.shape, out)
    if not linear:
        return [np.take(np.take(x, ry0, axis=2), rx0, axis=3)]
    wy = wy.reshape(-1, 1)
    rows = np.take(x, ry0, axis=2) * (1 - wy) + np.take(x, ry1, axis=2) * wy
    y = np.take(rows, rx0, axis=3) * (1 - wx) + np.take(rows, rx1, axis=3) * wx
    return [y.astype(x.dtype)]


register(OpSpec("Resize", _out_shapes, _build, _reference, _scratch_shapes))
