"""Elementwise ops: activations (Relu, LeakyRelu, Sigmoid, Tanh, Clip, the fused SiLU), Identity
and the binary Add and Mul (numpy broadcasting)."""
from __future__ import annotations

import numpy as np

from ... import _kernels
from .base import INTERNAL, OpSpec, const_input, register, same_shape

_HALF = np.array(0.5, np.float32)  # 0-d constants: a ufunc converts a Python scalar anew each call
_ZERO = np.zeros((), np.float32)


def _unary(node, view):
    return view(node.inputs[0]), view(node.outputs[0])


# --- Relu, Tanh, Identity, SiLU, Sigmoid -----------------------------------------------------

def _build_relu(node, graph, shapes, view, scratch):
    x, y = _unary(node, view)
    return lambda: np.maximum(x, _ZERO, out=y)


def _build_tanh(node, graph, shapes, view, scratch):
    x, y = _unary(node, view)
    return lambda: np.tanh(x, out=y)


def _build_identity(node, graph, shapes, view, scratch):
    x, y = _unary(node, view)
    return lambda: np.copyto(y, x)


def _build_silu(node, graph, shapes, view, scratch):
    x, y = _unary(node, view)
    xf, yf = x.reshape(-1), y.reshape(-1)
    return lambda: _kernels.silu(xf, yf)


def _build_sigmoid(node, graph, shapes, view, scratch):
    x, y = _unary(node, view)

    def sigmoid():   # 0.5 * tanh(x / 2) + 0.5: exact sigmoid, no exp overflow warnings
        np.multiply(x, _HALF, out=y)
        np.tanh(y, out=y)
        np.multiply(y, _HALF, out=y)
        np.add(y, _HALF, out=y)
    return sigmoid


def _sigmoid(x):
    return (_HALF * np.tanh(x * _HALF) + _HALF).astype(x.dtype)


# --- LeakyRelu -------------------------------------------------------------------------------

def _leaky_scratch(node, shapes, graph):
    return [shapes[node.outputs[0]]]


def _build_leaky(node, graph, shapes, view, scratch):
    x, y = _unary(node, view)
    alpha = np.array(node.attrs.get("alpha", 0.01), np.float32)
    pick = np.maximum if alpha <= 1 else np.minimum
    tmp = scratch[0]

    def leaky():
        np.multiply(x, alpha, out=tmp)
        pick(x, tmp, out=y)
    return leaky


def _leaky(node, x):
    alpha = np.asarray(node.attrs.get("alpha", 0.01), x.dtype)
    return np.where(x >= 0, x, x * alpha)


# --- Clip: bounds are inputs from opset 11, attributes before --------------------------------

def _clip_bounds(node, graph):
    a = node.attrs
    if graph.opset >= 11:
        lo, hi = const_input(graph, node, 1, "min"), const_input(graph, node, 2, "max")
    else:
        lo = np.asarray(a["min"], np.float32) if "min" in a else None
        hi = np.asarray(a["max"], np.float32) if "max" in a else None
    lo = np.array(-np.inf if lo is None else lo, np.float32).reshape(())
    hi = np.array(np.inf if hi is None else hi, np.float32).reshape(())
    return lo, hi


def _build_clip(node, graph, shapes, view, scratch):
    x, y = _unary(node, view)
    lo, hi = _clip_bounds(node, graph)

    def clip():
        np.maximum(x, lo, out=y)
        np.minimum(y, hi, out=y)
    return clip


def _clip(node, inputs):
    x = inputs[0]
    lo = inputs[1] if len(inputs) > 1 and inputs[1] is not None else node.attrs.get("min")
    hi = inputs[2] if len(inputs) > 2 and inputs[2] is not None else node.attrs.get("max")
    y = x if lo is None else np.maximum(x, np.asarray(lo, x.dtype))
    return [(y if hi is None else np.minimum(y, np.asarray(hi, x.dtype))).astype(x.dtype)]


# --- Add, Mul --------------------------------------------------------------------------------

def _broadcast(node, in_shapes, graph):
    return [tuple(np.broadcast_shapes(in_shapes[0], in_shapes[1]))]


def _binary_builder(ufunc):
    def build(node, graph, shapes, view, scratch):
        y = view(node.outputs[0])
        p, q = (np.ascontiguousarray(graph.consts[s], np.float32) if s in graph.consts
                else view(s) for s in node.inputs[:2])
        return lambda: ufunc(p, q, out=y)
    return build


def _unary_spec(op, build, fn, **kw):
    register(OpSpec(op, same_shape, build, lambda node, inputs: [fn(inputs[0])], **kw))


_unary_spec("Relu", _build_relu, lambda x: np.maximum(x, np.zeros((), x.dtype)), inplace=True)
_unary_spec("Tanh", _build_tanh, np.tanh, inplace=True)
_unary_spec("Sigmoid", _build_sigmoid, _sigmoid, inplace=True)
_unary_spec("Identity", _build_identity, np.copy)
_unary_spec("SiLU", _build_silu, lambda x: (x * _sigmoid(x)).astype(x.dtype), inplace=True,
            domain=INTERNAL)
register(OpSpec("LeakyRelu", same_shape, _build_leaky, lambda n, i: [_leaky(n, i[0])],
                _leaky_scratch, inplace=True))
register(OpSpec("Clip", same_shape, _build_clip, _clip, inplace=True))
register(OpSpec("Add", _broadcast, _binary_builder(np.add),
                lambda n, i: [np.add(i[0], i[1])], inplace=True))
register(OpSpec("Mul", _broadcast, _binary_builder(np.multiply),
                lambda n, i: [np.multiply(i[0], i[1])], inplace=True))
