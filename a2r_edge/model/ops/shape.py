"""Ops that change a tensor's shape, not its values (Reshape, Flatten, Squeeze, Unsqueeze), and
the shape arithmetic exporters emit (Shape, ConstantOfShape, Range, Cast).

Axis lists, target shapes and ranges come from attributes (old opsets) or from inputs that must
be known when the graph is planned: ``plan_consts`` reads them at plan time, ``given`` in the
references. Integer tensors are never float32 arena tensors: the executor runs them through
the references (see OpSpec).
"""
from __future__ import annotations

import math

import numpy as np

from .base import (OpSpec, UnsupportedOpError, copy_build, given, never_built, plan_consts,
                   register, view_build)

_INT64 = np.dtype(np.int64)


def _reshaped(node, x, y):
    return x.reshape(y.shape)


# --- Reshape ----------------------------------------------------------------------------------

def reshape_target(node, x_shape, get) -> tuple:
    """The output shape of Reshape (0 copies the input dim unless allowzero, -1 is inferred)."""
    shape = node.attrs.get("shape")   # an attribute before opset 5
    if shape is None:
        v = get(1)
        if v is None:
            raise ValueError("Reshape needs a target shape")
        shape = v.reshape(-1).tolist()
    shape = [int(v) for v in shape]
    allowzero = int(node.attrs.get("allowzero", 0))
    out = [x_shape[i] if v == 0 and not allowzero and i < len(x_shape) else v
           for i, v in enumerate(shape)]
    if out.count(-1) > 1 or any(v < -1 for v in out):
        raise ValueError(f"target shape {shape}: at most one -1 and no other negative size")
    total = math.prod(x_shape)
    if -1 in out:
        known = math.prod(v for v in out if v != -1)
        if known == 0 or total % known:
            raise ValueError(f"cannot infer -1 in {shape} for {total} elements")
        out[out.index(-1)] = total // known
    if math.prod(out) != total:
        raise ValueError(f"target shape {shape} does not hold {total} elements of {x_shape}")
    return tuple(out)


def _reshape_shapes(node, in_shapes, graph):
    return [reshape_target(node, in_shapes[0], plan_consts(node, graph))]


def _reshape(node, inputs):
    return [inputs[0].reshape(reshape_target(node, inputs[0].shape, given(inputs)))]


# --- Flatten ----------------------------------------------------------------------------------

def _flatten_target(node, x_shape):
    r = len(x_shape)
    axis = int(node.attrs.get("axis", 1))
    if not -r <= axis <= r:
        raise ValueError(f"axis={axis} out of range for rank {r}")
    axis = axis + r if axis < 0 else axis
    return (math.prod(x_shape[:axis]), math.prod(x_shape[axis:]))


# --- Squeeze, Unsqueeze -----------------------------------------------------------------------

def _axes(node, get, k=1):
    axes = node.attrs.get("axes")
    if axes is None:
        v = get(k)
        axes = None if v is None else [int(a) for a in v.reshape(-1)]
    return axes


def _squeeze_target(node, x_shape, get):
    r = len(x_shape)
    axes = _axes(node, get)
    if axes is None:
        return tuple(d for d in x_shape if d != 1)
    if any(not -r <= a < r for a in axes):
        raise ValueError(f"axes {axes} out of range for rank {r}")
    axes = {a % r for a in axes}
    if any(x_shape[a] != 1 for a in axes):
        raise ValueError(f"axes {sorted(axes)} of shape {x_shape} are not all of size 1")
    return tuple(d for i, d in enumerate(x_shape) if i not in axes)


def _unsqueeze_target(node, x_shape, get):
    axes = _axes(node, get)
    if axes is None:
        raise ValueError("Unsqueeze needs axes")
    r = len(x_shape) + len(axes)
    if any(not -r <= a < r for a in axes) or len({a % r for a in axes}) != len(axes):
        raise ValueError(f"axes {axes} out of range or repeated for output rank {r}")
    axes = {a % r for a in axes}
    dims = iter(x_shape)
    return tuple(1 if i in axes else next(dims) for i in range(r))


def _target_op(target):
    """out_shapes and reference of an op whose output is x reshaped to target(node, shape, get)."""
    def out_shapes(node, in_shapes, graph):
        return [target(node, in_shapes[0], plan_consts(node, graph))]

    def reference(node, inputs):
        return [inputs[0].reshape(target(node, inputs[0].shape, given(inputs)))]
    return out_shapes, reference


# --- Shape, ConstantOfShape, Range, Cast ------------------------------------------------------

def _shape_bounds(node, r):
    start, end = int(node.attrs.get("start", 0)), node.attrs.get("end")
    end = r if end is None else int(end)
    start, end = (min(max(v + r if v < 0 else v, 0), r) for v in (start, end))
    return start, max(start, end)


def _shape_shapes(node, in_shapes, graph):
    start, end = _shape_bounds(node, len(in_shapes[0]))
    return [(end - start,)]


def _shape(node, inputs):
    start, end = _shape_bounds(node, inputs[0].ndim)
    return [np.array(inputs[0].shape[start:end], np.int64)]


def _fill_value(node):
    from onnx import numpy_helper
    v = node.attrs.get("value")
    return np.zeros(1, np.float32) if v is None else numpy_helper.to_array(v).reshape(-1)


def _cos_target(node, get):
    shape = get(0)
    if shape is None or shape.ndim != 1 or np.any(shape < 0):
        raise ValueError(f"shape must be a 1-D tensor of sizes >= 0, got {shape}")
    return tuple(int(v) for v in shape)


def _cos_shapes(node, in_shapes, graph):
    return [_cos_target(node, plan_consts(node, graph))]


def _cos_build(node, graph, shapes, view, scratch):
    y = view(node.outputs[0])
    v = _fill_value(node).astype(np.float32)[0]
    return lambda: y.fill(v)


def _cos(node, inputs):
    v = _fill_value(node)
    return [np.full(_cos_target(node, given(inputs)), v[0], v.dtype)]


def _range_values(node, get):
    start, limit, delta = (get(k) for k in range(3))
    if any(v is None or v.size != 1 for v in (start, limit, delta)):
        raise ValueError("start, limit and delta must be scalars")
    if delta.reshape(()) == 0:
        raise ValueError("delta must not be 0")
    n = max(int(math.ceil((float(limit) - float(start)) / float(delta))), 0)
    # ONNX: start + i * delta in the inputs' type
    return (start.reshape(()) + np.arange(n).astype(start.dtype) * delta.reshape(())) \
        .astype(start.dtype)


def _range_shapes(node, in_shapes, graph):
    return [_range_values(node, plan_consts(node, graph)).shape]


def _range_build(node, graph, shapes, view, scratch):
    y = view(node.outputs[0])
    v = _range_values(node, plan_consts(node, graph)).astype(np.float32)
    return lambda: np.copyto(y, v)


def cast_dtype(node) -> np.dtype:
    """The numpy dtype of Cast's ``to`` (ml_dtypes types for float8/int4...); strings refused."""
    from onnx import TensorProto, helper
    to = int(node.attrs["to"])
    if to == TensorProto.STRING:
        raise UnsupportedOpError("Cast", node.name, "casting to or from strings")
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(to))
    except (KeyError, ValueError, TypeError) as exc:
        raise UnsupportedOpError("Cast", node.name, f"to={to}: {exc}") from exc


def _cast(node, inputs):
    """ONNX Cast: float8 targets saturate unless saturate=0 (onnx.numpy_helper's saturating
    cast), float8e8m0 rounds as round_mode says, every other target is numpy's astype."""
    from onnx import TensorProto, numpy_helper
    x, to, code = inputs[0], cast_dtype(node), int(node.attrs["to"])
    if x.dtype.kind in "OSU":
        raise UnsupportedOpError("Cast", node.name, "casting to or from strings")
    saturate = int(node.attrs.get("saturate", 1))
    if code in (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2,
                TensorProto.FLOAT8E5M2FNUZ) and saturate:
        return [numpy_helper.saturate_cast(x, to)]
    if code == TensorProto.FLOAT8E8M0:
        return [numpy_helper.to_float8e8m0(x, bool(saturate),
                                           node.attrs.get("round_mode", "up")).astype(to)]
    return [x.astype(to)]


def _cast_shapes(node, in_shapes, graph):
    cast_dtype(node)
    return [in_shapes[0]]


_squeeze_shapes, _squeeze = _target_op(_squeeze_target)
_unsqueeze_shapes, _unsqueeze = _target_op(_unsqueeze_target)
register(OpSpec("Reshape", _reshape_shapes, view_build, _reshape, view=True))
register(OpSpec("Flatten", lambda n, s, g: [_flatten_target(n, s[0])], view_build,
                lambda n, i: [i[0].reshape(_flatten_target(n, i[0].shape))], view=True))
register(OpSpec("Squeeze", _squeeze_shapes, view_build, _squeeze, view=True))
register(OpSpec("Unsqueeze", _unsqueeze_shapes, view_build, _unsqueeze, view=True))
register(OpSpec("Shape", _shape_shapes, never_built, _shape,
                out_dtypes=lambda n, d: [_INT64]))
register(OpSpec("ConstantOfShape", _cos_shapes, _cos_build, _cos,
                out_dtypes=lambda n, d: [_fill_value(n).dtype]))
register(OpSpec("Range", _range_shapes, _range_build,
                lambda n, i: [_range_values(n, given(i))]))
register(OpSpec("Cast", _cast_shapes, copy_build(_reshaped), _cast,
                out_dtypes=lambda n, d: [cast_dtype(n)]))
