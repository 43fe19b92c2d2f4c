"""Elementwise ops of one tensor: activations (Relu, LeakyRelu, Sigmoid, Tanh, Clip, Elu,
HardSigmoid, HardSwish, Gelu, Softplus, the fused SiLU), Identity, and math (Sqrt, Exp, Log,
Reciprocal, Erf, Neg, Abs, Floor, Ceil). Binary ops are in binary.py."""
from __future__ import annotations

import numpy as np

from ... import _kernels, ops
from .base import INTERNAL, OpSpec, UnsupportedOpError, const_input, register, same_shape

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
    xf, yf = x.reshape(-1), y.reshape(-1)
    return lambda: _kernels.tanh(xf, yf)   # numpy's float32 tanh is scalar libm below AVX-512


def _build_identity(node, graph, shapes, view, scratch):
    x, y = _unary(node, view)
    return lambda: np.copyto(y, x)


def _build_silu(node, graph, shapes, view, scratch):
    x, y = _unary(node, view)
    xf, yf = x.reshape(-1), y.reshape(-1)
    return lambda: _kernels.silu(xf, yf)


def _build_sigmoid(node, graph, shapes, view, scratch):
    x, y = _unary(node, view)

    xf, yf = x.reshape(-1), y.reshape(-1)
    return lambda: _kernels.tanh(xf, yf, 0.5, 0.5, 0.5)   # 0.5 tanh(x / 2) + 0.5, one pass


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


# --- math ufuncs, Erf, Gelu ------------------------------------------------------------------

def _ufunc(f):
    def build(node, graph, shapes, view, scratch):
        x, y = _unary(node, view)
        return lambda: f(x, out=y)
    return build


_ERFC_COEF = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
              -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def erf(x: np.ndarray) -> np.ndarray:
    """erf in float64, returned in x's dtype: the Taylor series below |x| = 0.5 (terms to x^15,
    error < 1e-12) and Numerical Recipes' erfc Chebyshev fit above (relative error < 1.2e-7)."""
    z = np.abs(x.astype(np.float64))
    t = 1.0 / (1.0 + 0.5 * z)
    poly = np.zeros_like(t)
    for c in reversed(_ERFC_COEF[1:]):
        poly = (poly + c) * t
    erfc = t * np.exp(-z * z + _ERFC_COEF[0] + poly)
    big = np.copysign(1.0 - erfc, x)
    x64, x2 = x.astype(np.float64), z * z
    term, small = x64.copy(), x64.copy()
    for k in range(1, 8):   # sum (-1)^k x^(2k+1) / (k! (2k+1))
        term = term * -x2 / k
        small += term / (2 * k + 1)
    return np.where(z < 0.5, small * (2 / np.sqrt(np.pi)), big).astype(x.dtype)


def _gelu(node, x):
    """The float64 oracle of Gelu (the reference executor's)."""
    x64 = x.astype(np.float64)
    if node.attrs.get("approximate", "none") == "tanh":
        inner = np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3)
        return (0.5 * x64 * (1 + np.tanh(inner))).astype(x.dtype)
    return (0.5 * x64 * (1 + erf(x64 / np.sqrt(2)))).astype(x.dtype)


def _gelu_kernel(form):
    """Build Erf or Gelu on the gelu kernel (one vectorised pass; ops.gelu states its error)."""
    def build(node, graph, shapes, view, scratch):
        x, y = _unary(node, view)
        xf, yf = x.reshape(-1), y.reshape(-1)
        code = ops.GELU_CODES[form or node.attrs.get("approximate", "none")]
        return lambda: _kernels.gelu(xf, yf, code)
    return build


def _check_gelu(node):
    if node.attrs.get("approximate", "none") not in ("none", "tanh"):
        raise UnsupportedOpError("Gelu", node.name,
                                 f"approximate={node.attrs['approximate']!r} (none or tanh)")


def _gelu_shapes(node, in_shapes, graph):
    _check_gelu(node)
    return [in_shapes[0]]


# --- Elu, HardSigmoid, HardSwish --------------------------------------------------------------

def _out_scratch(node, shapes, graph):
    return [shapes[node.outputs[0]]]


def _build_elu(node, graph, shapes, view, scratch):
    x, y = _unary(node, view)
    alpha = np.array(node.attrs.get("alpha", 1.0), np.float32)
    tmp = scratch[0]

    def elu():   # max(x, 0) + alpha * expm1(min(x, 0))
        np.minimum(x, _ZERO, out=tmp)
        np.expm1(tmp, out=tmp)
        np.multiply(tmp, alpha, out=tmp)
        np.maximum(x, _ZERO, out=y)
        np.add(y, tmp, out=y)
    return elu


def _elu(node, x):
    alpha = float(node.attrs.get("alpha", 1.0))
    x64 = x.astype(np.float64)
    return np.where(x64 > 0, x64, alpha * np.expm1(np.minimum(x64, 0))).astype(x.dtype)


_ONE = np.ones((), np.float32)


def _hard_sigmoid_into(x, y, alpha, beta):
    np.multiply(x, alpha, out=y)
    np.add(y, beta, out=y)
    np.clip(y, _ZERO, _ONE, out=y)


def _build_hard_sigmoid(node, graph, shapes, view, scratch):
    x, y = _unary(node, view)
    alpha = np.array(node.attrs.get("alpha", 0.2), np.float32)
    beta = np.array(node.attrs.get("beta", 0.5), np.float32)
    return lambda: _hard_sigmoid_into(x, y, alpha, beta)


def _hard_sigmoid(node, x, alpha=None, beta=None):
    a = node.attrs.get("alpha", 0.2) if alpha is None else alpha
    b = node.attrs.get("beta", 0.5) if beta is None else beta
    return np.clip(x * np.asarray(a, x.dtype) + np.asarray(b, x.dtype), 0, 1).astype(x.dtype)


_SIXTH = np.array(1 / 6, np.float32)


def _build_hard_swish(node, graph, shapes, view, scratch):
    x, y = _unary(node, view)
    tmp = scratch[0]

    def hard_swish():
        _hard_sigmoid_into(x, tmp, _SIXTH, _HALF)
        np.multiply(x, tmp, out=y)
    return hard_swish


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
register(OpSpec("Elu", same_shape, _build_elu, lambda n, i: [_elu(n, i[0])], _out_scratch,
                inplace=True))
register(OpSpec("HardSigmoid", same_shape, _build_hard_sigmoid,
                lambda n, i: [_hard_sigmoid(n, i[0])], inplace=True))
register(OpSpec("HardSwish", same_shape, _build_hard_swish,
                lambda n, i: [(i[0] * _hard_sigmoid(n, i[0], 1 / 6, 0.5)).astype(i[0].dtype)],
                _out_scratch, inplace=True))
register(OpSpec("Gelu", _gelu_shapes, _gelu_kernel(None), lambda n, i: [_gelu(n, i[0])],
                inplace=True))
register(OpSpec("Erf", same_shape, _gelu_kernel("erf"), lambda n, i: [erf(i[0])], inplace=True))
for _op, _f in (("Sqrt", np.sqrt), ("Exp", np.exp), ("Neg", np.negative), ("Abs", np.absolute),
                ("Floor", np.floor), ("Ceil", np.ceil), ("Reciprocal", np.reciprocal),
                ("Log", np.log)):
    _unary_spec(_op, _ufunc(_f), _f, inplace=True)


def _softplus(x, out=None):
    """log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|)."""
    return np.logaddexp(x, np.zeros((), x.dtype), out=out)


_unary_spec("Softplus", _ufunc(_softplus), _softplus, inplace=True)
