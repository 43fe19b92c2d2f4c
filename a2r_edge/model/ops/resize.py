"""Resize (and the old Upsample) of H, W of an NCHW tensor: nearest (each rounding mode),
linear and cubic (coefficient A, exclude_outside), antialiased linear/cubic downsampling,
every coordinate mode (half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners,
asymmetric, tf_crop_and_resize with its extrapolation value, tf2onnx's tf_half_pixel_for_nn),
scales or sizes (axes,
keep_aspect_ratio_policy).

Separable: per axis, a table of K source indices and weights per output position is made once
per plan (onnxruntime's float32 coordinate arithmetic); a run is the native a2r_resize: rows
blended along H, then taps gathered along W. align_corners with scales whose in * scale is fractional is refused: onnxruntime (and
PyTorch) divide by the rounded output length, the ONNX reference by the unrounded one.
"""
from __future__ import annotations

import math

import numpy as np

from ... import _kernels
from .base import OpSpec, UnsupportedOpError, register

_COORDS = ("half_pixel", "half_pixel_symmetric", "asymmetric", "align_corners",
           "pytorch_half_pixel", "tf_crop_and_resize", "tf_half_pixel_for_nn")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "legacy")


def resize_params(node, consts, x_shape, opset) -> dict:
    """Resize (or Upsample) on H, W of an NCHW tensor: output size, scales and modes, checked.

    Before opset 11 (and for Upsample) coordinates are asymmetric and nearest rounds like
    onnxruntime's: down when enlarging, up when shrinking."""
    a, ins, name = node.attrs, node.inputs, node.name
    mode = a.get("mode", "nearest")
    mode = "linear" if mode == "bilinear" else mode   # Upsample-7's name for it
    if mode not in ("nearest", "linear", "cubic"):
        raise UnsupportedOpError(node.op, name, f"mode {mode!r}")
    scales = sizes = roi = None
    if node.op == "Upsample" or opset < 11:
        coord, nearest = "asymmetric", "legacy"
        if "scales" in a:
            scales = np.asarray(a["scales"], np.float32)
        elif len(ins) > 1 and ins[1]:
            scales = _const(node, consts, ins[1])
    else:
        coord = a.get("coordinate_transformation_mode", "half_pixel")
        nearest = a.get("nearest_mode", "round_prefer_floor")
        if len(ins) > 1 and ins[1] and coord == "tf_crop_and_resize":
            roi = _const(node, consts, ins[1]).astype(np.float64)
        if len(ins) > 2 and ins[2]:
            scales = _const(node, consts, ins[2])
        if len(ins) > 3 and ins[3]:
            sizes = _const(node, consts, ins[3]).astype(np.int64)
    if coord not in _COORDS:
        raise UnsupportedOpError(node.op, name, f"coordinate_transformation_mode {coord!r}")
    if mode == "nearest" and nearest not in _NEAREST:
        raise UnsupportedOpError(node.op, name, f"nearest_mode {nearest!r}")
    if len(x_shape) != 4:
        raise UnsupportedOpError(node.op, name, f"input rank {len(x_shape)} (NCHW only)")
    axes = [int(v) % 4 for v in a.get("axes", [0, 1, 2, 3])]
    full_roi = np.array([0, 0, 0, 0, 1, 1, 1, 1], np.float64)
    if roi is not None:
        if roi.shape != (2 * len(axes),):
            raise UnsupportedOpError(node.op, name, f"roi of shape {roi.shape}")
        full_roi[axes] = roi[:len(axes)]
        full_roi[[ax + 4 for ax in axes]] = roi[len(axes):]
    extent = full_roi[4:] - full_roi[:4] if coord == "tf_crop_and_resize" else np.ones(4)
    if scales is not None and scales.size:
        if scales.shape != (len(axes),) or not np.all(scales > 0):
            raise UnsupportedOpError(node.op, name, f"scales {scales.tolist()}")
        full = np.ones(4, np.float32)
        full[axes] = scales
        scales = full
        out = [int(math.floor(x_shape[i] * extent[i] * float(scales[i]))) for i in range(4)]
        if coord == "align_corners" and any(out[i] != x_shape[i] * float(scales[i])
                                            for i in (2, 3)):
            raise UnsupportedOpError(node.op, name, "align_corners with scales that make a "
                                     f"fractional size ({x_shape} x {scales.tolist()}): "
                                     "onnxruntime and PyTorch use the rounded output length, "
                                     "the ONNX reference the unrounded one")
    elif sizes is not None:
        if sizes.shape != (len(axes),):
            raise UnsupportedOpError(node.op, name, f"sizes of shape {sizes.shape}")
        out = list(x_shape)
        for ax, v in zip(axes, sizes):
            out[ax] = int(v)
        policy = a.get("keep_aspect_ratio_policy", "stretch")
        if policy not in ("stretch", "not_larger", "not_smaller"):
            raise UnsupportedOpError(node.op, name, f"keep_aspect_ratio_policy {policy!r}")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            r = pick(out[ax] / x_shape[ax] for ax in axes)
            for ax in axes:
                out[ax] = int(math.floor(r * x_shape[ax] + 0.5))
            scales = np.array([r if i in axes else 1.0 for i in range(4)], np.float32)
        else:
            scales = np.array([out[i] / x_shape[i] for i in range(4)], np.float32)
    else:
        raise UnsupportedOpError(node.op, name, "neither scales nor sizes given")
    if out[0] != x_shape[0] or out[1] != x_shape[1]:
        raise UnsupportedOpError(node.op, name, "resizing N or C (H, W only)")
    if min(out) < 1 or max(out) > 1 << 24:
        raise ValueError(f"{node.op} node {name!r}: output size {out} for input {x_shape}")
    return dict(mode=mode, coord=coord, nearest=nearest, out_shape=tuple(out),
                scales=(float(scales[2]), float(scales[3])),
                roi=((full_roi[2], full_roi[6]), (full_roi[3], full_roi[7])),
                cubic_a=float(a.get("cubic_coeff_a", -0.75)),
                exclude_outside=int(a.get("exclude_outside", 0)),
                antialias=int(a.get("antialias", 0)) and mode != "nearest",
                extrapolation=float(a.get("extrapolation_value", 0.0)))


def _const(node, consts, name):
    if name not in consts:
        raise UnsupportedOpError(node.op, node.name, f"scales/sizes/roi {name!r} not constant")
    return np.asarray(consts[name], np.float32 if consts[name].dtype.kind == "f" else np.int64)


def _source_coords(in_size, out_size, scale, p, roi):
    """Source coordinate of each output position (float32, onnxruntime's arithmetic)."""
    xr = np.arange(out_size, dtype=np.float32)
    s, coord = np.float32(scale), p["coord"]
    half = np.float32(0.5)
    if coord == "half_pixel":
        return (xr + half) / s - half
    if coord == "half_pixel_symmetric":
        adjustment = out_size / (scale * in_size)
        offset = np.float32(in_size / 2 * (1 - adjustment))
        return offset + (xr + half) / s - half
    if coord == "pytorch_half_pixel":
        return (xr + half) / s - half if out_size > 1 else np.full_like(xr, -0.5)
    if coord == "asymmetric":
        return xr / s
    if coord == "tf_half_pixel_for_nn":   # tf.image.resize(method="nearest") via tf2onnx
        # onnxruntime copies a same-size input as it is (the formula would shift a
        # round-up nearest mode by one pixel)
        return xr if out_size == in_size else (xr + half) / s
    if coord == "align_corners":   # out_size is exact (fractional in * scale is refused)
        return xr * np.float32(in_size - 1) / np.float32(out_size - 1) if out_size > 1 \
            else np.zeros_like(xr)
    start, end = roi              # tf_crop_and_resize
    if out_size == 1:
        return np.full_like(xr, (end - start) * (in_size - 1) / 2 + start * (in_size - 1))
    return (xr * np.float32((end - start) * (in_size - 1) / (out_size - 1))
            + np.float32(start * (in_size - 1)))


def _cubic(t, a):
    """The cubic convolution kernel of |t| with coefficient a."""
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def axis_taps(in_size, out_size, scale, p, roi=(0.0, 1.0)):
    """(indices (K, out) clipped to the input, weights (K, out) float32, extrapolated mask or
    None) of one axis."""
    x = _source_coords(in_size, out_size, scale, p, roi)
    mask = None
    if p["coord"] == "tf_crop_and_resize":
        mask = (x < 0) | (x > in_size - 1)
        mask = mask if mask.any() else None
    if p["mode"] == "nearest":
        mode = p["nearest"]
        if mode == "legacy":
            mode = "floor" if out_size >= in_size else "ceil"
        fl = np.floor(x)
        if mode in ("floor", "ceil"):
            i = fl if mode == "floor" else np.ceil(x)
        else:
            tie = x - fl == np.float32(0.5)
            i = np.where(tie, fl if mode == "round_prefer_floor" else np.ceil(x),
                         np.floor(x + np.float32(0.5)))
        idx = np.clip(i, 0, in_size - 1).astype(np.intp)[None]
        return idx, np.ones(idx.shape, np.float32), mask
    x64 = x.astype(np.float64)
    base = np.floor(x64)
    ratio = np.where(x64 == base, 1.0, x64 - base)      # in (0, 1]: prefer the left pixel
    base = base - (x64 == base)
    shrink = min(scale, 1.0) if p["antialias"] else 1.0
    if p["mode"] == "linear":
        start = int(math.floor(-1 / shrink)) + 1
        offsets = np.arange(start, 2 - start)
        w = np.clip(1 - np.abs((offsets[:, None] - ratio[None]) * shrink), 0, 1)
    else:
        start = int(math.floor(-2 / shrink)) + 1
        offsets = np.arange(start, 2 - start)
        w = _cubic((offsets[:, None] - ratio[None]) * shrink, p["cubic_a"])
    idx = base[None].astype(np.int64) + offsets[:, None]
    if p["exclude_outside"]:
        w = np.where((idx < 0) | (idx >= in_size), 0.0, w)
    if p["antialias"] or p["exclude_outside"]:
        total = w.sum(axis=0, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, in_size - 1).astype(np.intp), w.astype(np.float32), mask


def _tables(n, graph, x_shape):
    p = resize_params(n, graph.consts, x_shape, graph.opset)
    (h, w), (oh, ow) = x_shape[2:], p["out_shape"][2:]
    return p, axis_taps(h, oh, p["scales"][0], p, p["roi"][0]), \
        axis_taps(w, ow, p["scales"][1], p, p["roi"][1])


def _out_shapes(n, ins, graph):
    return [resize_params(n, graph.consts, ins[0], graph.opset)["out_shape"]]


def _scratch_shapes(n, shapes, graph):
    nb, c, h, w = shapes[n.inputs[0]]
    oh = resize_params(n, graph.consts, (nb, c, h, w), graph.opset)["out_shape"][2]
    return [(nb, c, oh, w)]


def _build(n, graph, shapes, view, scratch):
    """The native two-pass resampler (a2r_resize) over the tap tables."""
    x, y = view(n.inputs[0]), view(n.outputs[0])
    p, (iy, wy, my), (ix, wx, mx) = _tables(n, graph, x.shape)
    nb, c, h, w = x.shape
    oh, ow = y.shape[2:]
    iy, ix = (np.ascontiguousarray(i, np.int64).reshape(-1) for i in (iy, ix))
    wy, wx = (np.ascontiguousarray(v, np.float32).reshape(-1) for v in (wy, wx))
    ky, kx = iy.size // oh, ix.size // ow
    xf, yf, rows = x.reshape(-1), y.reshape(-1), scratch[0].reshape(-1)
    fill = np.float32(p["extrapolation"])
    masks = [m.reshape(shape) for m, shape in ((my, (-1, 1)), (mx, (1, -1))) if m is not None]

    def resize():
        _kernels.resize(xf, nb * c, h, w, oh, ow, ky, iy, wy, kx, ix, wx, rows, yf)
        for m in masks:   # tf_crop_and_resize: outside the input -> extrapolation_value
            np.copyto(y, fill, where=m)
    return resize


class _Consts:
    """A graph stand-in for resize_params: the node's constant inputs."""

    def __init__(self, n, inputs, opset):
        self.consts = {s: np.asarray(v) for s, v in zip(n.inputs, inputs)
                       if s and v is not None}
        self.opset = opset


def _reference(n, inputs):
    x = inputs[0]
    opset = 10 if len(n.inputs) == 2 and n.op == "Resize" else 11   # (X, scales): opset 10
    p, (iy, wy, my), (ix, wx, mx) = _tables(n, _Consts(n, inputs, opset), x.shape)
    y = x.astype(np.float64)
    for axis, idx, w, mask in ((2, iy, wy, my), (3, ix, wx, mx)):
        shape = [1] * 4
        shape[axis] = -1
        y = sum(np.take(y, idx[k], axis=axis) * w[k].reshape(shape) for k in range(len(idx)))
        if mask is not None:
            y = np.where(mask.reshape(shape), p["extrapolation"], y)
    return [y.astype(x.dtype)]


register(OpSpec("Resize", _out_shapes, _build, _reference, _scratch_shapes))
register(OpSpec("Upsample", _out_shapes, _build, _reference, _scratch_shapes))
