"""Normalisations on the native AdaIN kernel: the a2r AdaIN stage and InstanceNormalization
(the same arithmetic with style_std = scale, style_mean = B; fusion turns one into the other).

AdaIN node: inputs (x, style_mean, style_std), style_* of shape (C,) or (N, C), constants or
graph inputs; attribute ``epsilon`` (default 1e-5); after fusion ``activation``/``alpha``.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ... import _kernels, ops
from .. import reference as ref
from .base import ADAIN_DOMAIN, ADAIN_OP, OpSpec, UnsupportedOpError, register


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
    xf, yf = x.reshape(-1), y.reshape(-1)

    def adain():
        for dst, src in feeds:
            np.copyto(dst, src)
        _kernels.adain(xf, nb * c, h * w, sm, ss, None, None, eps, act, alpha, yf)
    return adain


def _as_adain(n):
    """InstanceNormalization (x, scale, B) as the AdaIN node (x, B, scale)."""
    return dataclasses.replace(n, op=ADAIN_OP, inputs=[n.inputs[0], n.inputs[2], n.inputs[1]])


def _build_instance_norm(n, graph, shapes, view, scratch):
    return _build_adain(_as_adain(n), graph, shapes, view, scratch)


def _adain_reference(n, inputs):
    x, sm, ss = inputs
    return [ref.adain(x, sm, ss, float(n.attrs.get("epsilon", 1e-5))).astype(x.dtype)]


def _instance_norm_reference(n, inputs):
    x, scale, b = inputs
    return _adain_reference(n, [x, b, scale])


register(OpSpec(ADAIN_OP, _nchw, _build_adain, _adain_reference, inplace=True,
                domain=ADAIN_DOMAIN))
register(OpSpec("InstanceNormalization", _nchw, _build_instance_norm, _instance_norm_reference,
                inplace=True))
