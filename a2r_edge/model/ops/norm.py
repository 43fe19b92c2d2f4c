"""Normalisations: the a2r AdaIN stage and InstanceNormalization (the same arithmetic with
style_std = scale, style_mean = B; fusion turns one into the other), AdaLIN (U-GAT-IT's
instance/layer norm mix, made by model/rewrite.py from the decomposed pattern), LayerNormalization
(planes normalised by the native AdaIN kernel with style (0, 1), then the affine),
GroupNormalization (the groups' statistics, then one AdaIN pass with them as each channel's
and the per-channel affine as the style; fusion may add an activation), and BatchNormalization
in inference form (one multiply-add per channel, folded from its constant statistics at plan
time).

AdaIN node: inputs (x, style_mean, style_std), style_* of shape (C,) or (N, C), constants or
graph inputs; attribute ``epsilon`` (default 1e-5); after fusion ``activation``/``alpha`` and
an optional fourth input, a residual of x's shape added before the activation (a following Add).

AdaLIN node (internal: only the rewrite makes it): inputs (x, in_weight, ln_weight, gamma,
beta), y = act((in_weight * IN(x) + ln_weight * LN(x)) * gamma + beta) with IN over H, W with
``in_epsilon`` and LN over C, H, W with ``ln_epsilon`` (biased variances); in_weight, ln_weight
constants of shape (C,); gamma, beta (optional: 1 and 0) constants or run-time tensors that
broadcast to (N, C, 1, 1); after fusion ``activation``/``alpha``. One native kernel call.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from ... import _kernels, ops
from .. import reference as ref
from .base import (ADAIN_DOMAIN, ADAIN_OP, INTERNAL, OpSpec, UnsupportedOpError, attr_axis,
                   float_dtypes, given, keeping, operand, plan_consts, register)


def _nchw(n, ins, graph):
    if len(ins[0]) != 4:
        raise UnsupportedOpError(n.op, n.name, f"input rank {len(ins[0])} (NCHW only)")
    return [ins[0]]


def _build_adain(n, graph, shapes, view, scratch):
    a = n.attrs
    x, y = view(n.inputs[0]), view(n.outputs[0])
    nb, c, h, w = x.shape
    eps = float(a.get("epsilon", 1e-5))
    if not eps > 0:
        raise ValueError(f"{n.op} node {n.name!r}: epsilon must be > 0, got {eps}")
    if a.get("activation") not in ops.ACT_CODES:
        raise AssertionError(f"fusion gave AdaIN activation {a.get('activation')!r}")
    act, alpha = ops.ACT_CODES[a.get("activation")], float(a.get("alpha", 0.01))
    stats, feeds = [], []
    for s in n.inputs[1:3]:
        shape = shapes[s]
        if shape not in ((c,), (nb, c)):
            raise ValueError(f"{n.op} node {n.name!r}: style statistics {s!r} must have shape "
                             f"({c},) or ({nb}, {c}), got {shape}")
        if s in graph.consts:
            stats.append(np.ascontiguousarray(np.broadcast_to(
                graph.consts[s].astype(np.float32), (nb, c))).reshape(-1))
        else:   # a graph input: broadcast into a plan-owned buffer each run
            buf = np.empty(nb * c, np.float32)
            feeds.append((buf.reshape(nb, c), view(s)))
            stats.append(buf)
    sm, ss = stats
    r = view(n.inputs[3]) if len(n.inputs) > 3 and n.inputs[3] else None   # a fused Add
    run = keeping(functools.partial(_kernels.adain_at, x.ctypes.data, nb * c, h * w,
                                    sm.ctypes.data, ss.ctypes.data, 0, 0, eps, act, alpha,
                                    0 if r is None else r.ctypes.data, y.ctypes.data),
                  x, y, sm, ss, *([] if r is None else [r]))
    return _fed(run, feeds)


def _fed(run, feeds):
    """``run``, each call first copying the run-time inputs (graph-input statistics or affine
    parameters) into the plan-owned buffers it reads: feeds, (buffer, input view) pairs."""
    if not feeds:
        return run

    def step():
        for dst, src in feeds:
            np.copyto(dst, src)
        run()
    return step


def _as_adain(n):
    """InstanceNormalization (x, scale, B) as the AdaIN node (x, B, scale)."""
    return dataclasses.replace(n, op=ADAIN_OP, inputs=[n.inputs[0], n.inputs[2], n.inputs[1]])


def _build_instance_norm(n, graph, shapes, view, scratch):
    return _build_adain(_as_adain(n), graph, shapes, view, scratch)


def _adain_reference(n, inputs):
    x, sm, ss, *residual = inputs
    y = ref.adain(x, sm, ss, float(n.attrs.get("epsilon", 1e-5)))
    return [(y + residual[0] if residual and residual[0] is not None else y).astype(x.dtype)]


def _instance_norm_reference(n, inputs):
    x, scale, b = inputs
    return _adain_reference(n, [x, b, scale])


# --- AdaLIN ---------------------------------------------------------------------------------

def _adalin_epsilons(n):
    return tuple(_epsilon(n, attr=k) for k in ("in_epsilon", "ln_epsilon"))


def _adalin_shapes(n, ins, graph):
    x = _nchw(n, ins, graph)[0]
    get = plan_consts(n, graph)
    for k in (1, 2):
        if np.shape(get(k)) != (x[1],):
            raise ValueError(f"input {k} of shape {np.shape(get(k))}: ({x[1]},) expected")
    per_plane = (x[0], x[1], 1, 1)
    for k in (3, 4):
        if len(ins) > k and ins[k] is not None and (
                len(ins[k]) > 4 or tuple(np.broadcast_shapes(ins[k], per_plane)) != per_plane):
            raise ValueError(f"input {k} of shape {ins[k]} does not broadcast to {per_plane}")
    return [x]


def _adalin_build(n, graph, shapes, view, scratch):
    x, y = view(n.inputs[0]), view(n.outputs[0])
    nb, c, h, w = x.shape
    if x.size == 0:
        return lambda: None
    in_eps, ln_eps = _adalin_epsilons(n)
    act, alpha = ops.ACT_CODES[n.attrs.get("activation")], float(n.attrs.get("alpha", 0.01))
    get = plan_consts(n, graph)
    wi, wl = (np.ascontiguousarray(get(k), np.float32) for k in (1, 2))
    planes, feeds = [], []
    for k, default in ((3, 1.0), (4, 0.0)):
        name = n.inputs[k] if len(n.inputs) > k else ""
        src = view(name) if name and name not in graph.consts else None
        if src is not None and src.size == nb * c and src.flags.c_contiguous:
            planes.append(src)   # computed at run time, one value per plane: read in place
            continue
        buf = np.full(nb * c, default, np.float32)
        if name in graph.consts:
            np.copyto(buf.reshape(nb, c, 1, 1), graph.consts[name].astype(np.float32))
        elif src is not None:   # computed at run time, broadcast over the batch each run
            feeds.append((buf.reshape(nb, c, 1, 1), src))
        planes.append(buf)
    gamma, beta = planes
    moments = np.empty(2 * nb * c, np.float64)
    run = keeping(functools.partial(_kernels.adalin_at, x.ctypes.data, nb, c, h * w,
                                    wi.ctypes.data, wl.ctypes.data, gamma.ctypes.data,
                                    beta.ctypes.data, in_eps, ln_eps, act, alpha,
                                    moments.ctypes.data, y.ctypes.data),
                  x, y, wi, wl, gamma, beta, moments)
    return _fed(run, feeds)


def _adalin_reference(n, inputs):
    x = inputs[0]
    nb, c = x.shape[:2]
    get = given(inputs)
    gamma, beta = ((np.broadcast_to(get(k), (nb, c, 1, 1)).reshape(nb, c) if get(k) is not None
                    else d) for k, d in ((3, 1.0), (4, 0.0)))
    y = ref.adalin(x, get(1), get(2), gamma, beta, *_adalin_epsilons(n))
    return [ref.activation(y, n.attrs.get("activation"), float(n.attrs.get("alpha", 0.01)))
            .astype(x.dtype)]


# --- plane normalisation shared by LayerNormalization and GroupNormalization -----------------

def _normalise_planes(x, y, planes, size, eps):
    """Closure: y = (x - mean) / sqrt(var + eps) over each of ``planes`` rows of ``size``."""
    if x.size == 0:
        return lambda: None
    zeros, ones = np.zeros(planes, np.float32), np.ones(planes, np.float32)
    xf, yf = x.reshape(-1), y.reshape(-1)
    return lambda: _kernels.adain(xf, planes, size, zeros, ones, None, None, eps, 0, 0.0, yf)


def _affine(y, scale, bias):
    """Closure: y = y * scale + bias (broadcast; either may be None)."""
    def affine():
        if scale is not None:
            np.multiply(y, scale, out=y)
        if bias is not None:
            np.add(y, bias, out=y)
    return affine


def _epsilon(n, default=1e-5, attr="epsilon"):
    eps = float(n.attrs.get(attr, default))
    if not eps > 0:
        raise ValueError(f"{n.op} node {n.name!r}: {attr} must be > 0, got {eps}")
    return eps


# --- LayerNormalization ---------------------------------------------------------------------

def _ln_axis(n, rank):
    return attr_axis(n, rank, default=-1)


def _ln_shapes(n, ins, graph):
    x = ins[0]
    axis = _ln_axis(n, len(x))
    stat = tuple(x[:axis]) + (1,) * (len(x) - axis)
    for k in (1, 2):
        if len(ins) > k and ins[k] is not None and \
                tuple(np.broadcast_shapes(ins[k], x[axis:])) != tuple(x[axis:]):
            raise ValueError(f"input {k} of shape {ins[k]} does not broadcast to {x[axis:]}")
    return [tuple(x)] + [stat] * (len(n.outputs) - 1)


def _ln_build(n, graph, shapes, view, scratch):
    x, y = view(n.inputs[0]), view(n.outputs[0])
    axis, eps = _ln_axis(n, x.ndim), _epsilon(n)
    planes, size = int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:]))
    scale = operand(graph, view, n.inputs[1])
    bias = operand(graph, view, n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
    stats = [view(o) if o else None for o in (list(n.outputs[1:3]) + ["", ""])[:2]]
    if x.size == 0:
        return lambda: None
    if not any(s is not None for s in stats):   # the rows kernel (transformers' token norm)
        return _ln_rows(x, y, x.shape[axis:], scale, bias, eps)
    norm, affine = _normalise_planes(x, y, planes, size, eps), _affine(y, scale, bias)
    mean, inv = scratch
    xf = x.reshape(-1)

    def layer_norm_with_stats():
        _kernels.channel_stats(xf, planes, size, eps, mean, inv)
        np.reciprocal(inv, out=inv)
        norm()
        affine()
        for out, v in zip(stats, (mean, inv)):
            if out is not None:
                np.copyto(out.reshape(-1), v)
    return layer_norm_with_stats


def _ln_rows(x, y, row, scale, bias, eps):
    """Closure: the layernorm_rows kernel over x's rows of shape ``row`` (the normalised axes).
    scale and bias (constants or arena views, fixed for the plan's life): read in place when
    they hold a row's values (a row's shape with leading 1s: (1, C) for (C,)), else broadcast
    into a row buffer made once, on each run (a view's values change between runs)."""
    size = int(np.prod(row))
    xf, yf = x.reshape(-1), y.reshape(-1)

    def as_row(v):   # (the flat row, or None; a copy to make before each run, or None)
        if v is None or (v.size == size and v.shape[v.ndim - len(row):] == tuple(row)
                         and v.flags.c_contiguous):
            return (None if v is None else v.reshape(-1)), None
        buf = np.empty(row, np.float32)
        return buf.reshape(-1), lambda: np.copyto(buf, v)
    (s, fill_s), (b, fill_b) = as_row(scale), as_row(bias)
    fills = [f for f in (fill_s, fill_b) if f is not None]

    def layer_norm():
        for f in fills:
            f()
        _kernels.layernorm_rows(xf, x.size // size, size, s, b, eps, yf)
    return layer_norm


def _ln_scratch(n, shapes, graph):
    x = shapes[n.inputs[0]]
    planes = int(np.prod(x[:_ln_axis(n, len(x))]))
    return [(planes,), (planes,)] if any(n.outputs[1:]) else []


def _ln_reference(n, inputs):
    x = inputs[0]
    axis, eps = _ln_axis(n, x.ndim), _epsilon(n)
    axes = tuple(range(axis, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(((x64 - mean) ** 2).mean(axis=axes, keepdims=True) + eps)
    y = (x64 - mean) * inv * inputs[1]
    if len(inputs) > 2 and inputs[2] is not None:
        y = y + inputs[2]
    return [y.astype(x.dtype), mean.astype(np.float32), inv.astype(np.float32)][:len(n.outputs)]


# --- GroupNormalization ---------------------------------------------------------------------

def _gn_params(n, x_shape, scale_shape):
    g = int(n.attrs["num_groups"])
    c = x_shape[1]
    if len(x_shape) < 3 or g < 1 or c % g:
        raise ValueError(f"num_groups={g} must divide the channels of {x_shape}")
    if scale_shape not in ((c,), (g,)):
        raise ValueError(f"scale/bias of shape {scale_shape}: ({c},) or ({g},) expected")
    return g


def _per_channel(v, c, g, rank):
    """scale or bias (per channel, or per group before opset 21) as (1, C, 1, ...)."""
    v = np.asarray(v, np.float32).reshape(-1)
    if v.size == g and g != c:
        v = np.repeat(v, c // g)
    return np.ascontiguousarray(v.reshape((1, c) + (1,) * (rank - 2)))


def _gn_shapes(n, ins, graph):
    _gn_params(n, ins[0], tuple(ins[1]))
    plan_consts(n, graph)(1), plan_consts(n, graph)(2)
    return [ins[0]]


def _gn_build(n, graph, shapes, view, scratch):
    """Each group's statistics (a2r_channel_stats over the group's channels as one plane),
    spread to its channels, then one a2r_adain pass with the per-channel scale and bias as the
    style and the fused activation."""
    x, y = view(n.inputs[0]), view(n.outputs[0])
    get = plan_consts(n, graph)
    g = _gn_params(n, x.shape, get(1).shape)
    nb, c = x.shape[:2]
    if x.size == 0:
        return lambda: None
    act, alpha = ops.ACT_CODES[n.attrs.get("activation")], float(n.attrs.get("alpha", 0.01))
    scale = np.ascontiguousarray(np.broadcast_to(
        _per_channel(get(1), c, g, 2).reshape(-1), (nb, c))).reshape(-1)
    bias = np.ascontiguousarray(np.broadcast_to(
        _per_channel(get(2), c, g, 2).reshape(-1), (nb, c))).reshape(-1)
    group_mean, group_std = scratch[0].reshape(-1), scratch[1].reshape(-1)
    mean, std = scratch[2].reshape(nb, g, c // g), scratch[3].reshape(nb, g, c // g)
    per_group = (group_mean.reshape(nb, g, 1), group_std.reshape(nb, g, 1))
    xf, eps = x.reshape(-1), _epsilon(n)
    size = x.size // (nb * g)
    hw = x.size // (nb * c)

    apply = keeping(functools.partial(_kernels.adain_at, x.ctypes.data, nb * c, hw,
                                      bias.ctypes.data, scale.ctypes.data, mean.ctypes.data,
                                      std.ctypes.data, eps, act, alpha, 0, y.ctypes.data),
                    x, y, bias, scale, mean, std)

    def group_norm():
        _kernels.channel_stats(xf, nb * g, size, eps, group_mean, group_std)
        np.copyto(mean, per_group[0])
        np.copyto(std, per_group[1])
        apply()
    return group_norm


def _gn_scratch(n, shapes, graph):
    x = shapes[n.inputs[0]]
    g, planes = int(n.attrs["num_groups"]), x[0] * x[1]
    return [(x[0] * g,), (x[0] * g,), (planes,), (planes,)]


def _gn_reference(n, inputs):
    x, scale, bias = inputs
    g = _gn_params(n, x.shape, scale.shape)
    nb, c = x.shape[:2]
    xg = x.astype(np.float64).reshape(nb, g, -1)
    mean = xg.mean(axis=2, keepdims=True)
    xg = (xg - mean) / np.sqrt(((xg - mean) ** 2).mean(axis=2, keepdims=True) + _epsilon(n))
    y = xg.reshape(x.shape) * _per_channel(scale, c, g, x.ndim) + _per_channel(bias, c, g,
                                                                                x.ndim)
    return [y.astype(x.dtype)]


# --- BatchNormalization (inference) ---------------------------------------------------------

def _bn_affine(n, get, rank):
    if int(n.attrs.get("training_mode", 0)) or len([o for o in n.outputs if o]) > 1:
        raise UnsupportedOpError(n.op, n.name, "training mode (running statistics outputs)")
    scale, bias, mean, var = (np.asarray(get(k), np.float64) for k in range(1, 5))
    a = scale / np.sqrt(var + _epsilon(n))
    shape = (1, -1) + (1,) * (rank - 2)
    return (a.reshape(shape).astype(np.float32),
            (bias - mean * a).reshape(shape).astype(np.float32))


def _bn_shapes(n, ins, graph):
    if len(ins[0]) < 2:
        raise ValueError(f"input rank {len(ins[0])}: needs (N, C, ...)")
    a, _ = _bn_affine(n, plan_consts(n, graph), len(ins[0]))
    if a.size != ins[0][1]:
        raise ValueError(f"{a.size} statistics for {ins[0][1]} channels")
    return [ins[0]]


def plane_affine(x, y, a, b):
    """Closure: y = x * a + b per (N, C) plane of contiguous x, y (a, b: (C,)), one pass of the
    native AdaIN kernel given mu = 0, sigma = 1 as the planes' statistics."""
    nb, c = x.shape[:2]
    hw = int(np.prod(x.shape[2:]))
    if x.size == 0:
        return lambda: None
    scale = np.ascontiguousarray(np.broadcast_to(a.reshape(-1), (nb, c))).reshape(-1)
    shift = np.ascontiguousarray(np.broadcast_to(b.reshape(-1), (nb, c))).reshape(-1)
    zeros, ones = np.zeros(nb * c, np.float32), np.ones(nb * c, np.float32)
    xf, yf = x.reshape(-1), y.reshape(-1)
    return lambda: _kernels.adain(xf, nb * c, hw, shift, scale, zeros, ones, 1.0, 0, 0.0, yf)


def _bn_build(n, graph, shapes, view, scratch):
    x, y = view(n.inputs[0]), view(n.outputs[0])
    a, b = _bn_affine(n, plan_consts(n, graph), x.ndim)
    return plane_affine(x, y, a, b)


def _bn_reference(n, inputs):
    x = inputs[0]
    a, b = _bn_affine(n, lambda k: inputs[k], x.ndim)
    return [(x.astype(np.float64) * a + b).astype(x.dtype)]


register(OpSpec(ADAIN_OP, _nchw, _build_adain, _adain_reference, inplace=True,
                domain=ADAIN_DOMAIN))
register(OpSpec("InstanceNormalization", _nchw, _build_instance_norm, _instance_norm_reference,
                inplace=True))
register(OpSpec("AdaLIN", _adalin_shapes, _adalin_build, _adalin_reference, inplace=True,
                domain=INTERNAL))
register(OpSpec("LayerNormalization", _ln_shapes, _ln_build, _ln_reference, _ln_scratch,
                out_dtypes=float_dtypes))
register(OpSpec("GroupNormalization", _gn_shapes, _gn_build, _gn_reference, _gn_scratch,
                inplace=True))
register(OpSpec("BatchNormalization", _bn_shapes, _bn_build, _bn_reference, inplace=True))
