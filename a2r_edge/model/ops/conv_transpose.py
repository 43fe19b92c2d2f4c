"""ConvTranspose over 1-3 spatial axes: strides, dilations, pads, output_padding, output_shape,
auto_pad, groups.

Per batch item and group: one matrix product of the (taps * C_out/g, C_in/g) weights with the
input (C_in/g, pixels), then each tap's block is added into the strided positions of an
uncropped output buffer; the crop by the pads and the bias make y. Weights are repacked once
per plan.
"""
from __future__ import annotations

import itertools

import numpy as np

from .base import OpSpec, UnsupportedOpError, plan_consts, register


def convt_geometry(node, x_shape, w_shape) -> dict:
    """Kernel, strides, dilations, pads before, output size and full (uncropped) size."""
    a, sp = node.attrs, len(x_shape) - 2
    if sp < 1 or len(w_shape) != sp + 2:
        raise ValueError(f"x {x_shape} and w {w_shape} must be (N, C, spatial...) alike")
    group = int(a.get("group", 1))
    if group < 1 or x_shape[1] != w_shape[0] or w_shape[0] % group:
        raise ValueError(f"w {w_shape} with group {group} does not fit x {x_shape}")
    k = [int(v) for v in a.get("kernel_shape") or w_shape[2:]]
    s = [int(v) for v in a.get("strides") or [1] * sp]
    d = [int(v) for v in a.get("dilations") or [1] * sp]
    op = [int(v) for v in a.get("output_padding") or [0] * sp]
    p = [int(v) for v in a.get("pads") or [0] * 2 * sp]
    if list(k) != list(w_shape[2:]) or not len(s) == len(d) == len(op) == sp or len(p) != 2 * sp:
        raise ValueError(f"kernel {k}, strides {s}, dilations {d}, output_padding {op}, "
                         f"pads {p} do not fit {sp} spatial axes / w {w_shape}")
    if min(s + d) < 1 or min(p + op + [0]) < 0 or any(o >= max(ss, dd) for o, ss, dd in
                                                         zip(op, s, d)):
        raise ValueError(f"strides {s}, dilations {d} must be >= 1, pads {p} >= 0, "
                         f"output_padding {op} < stride or dilation")
    ins = list(x_shape[2:])
    reach = [(kk - 1) * dd + 1 for kk, dd in zip(k, d)]
    natural = [ss * (n - 1) + o + r for ss, n, o, r in zip(s, ins, op, reach)]
    auto = a.get("auto_pad", "NOTSET")
    out_shape = a.get("output_shape")
    if out_shape is not None:
        out_shape = [int(v) for v in out_shape][-sp:]
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = [n * ss for n, ss in zip(ins, s)]
    elif auto not in ("NOTSET", "", "VALID"):
        raise UnsupportedOpError(node.op, node.name, f"auto_pad {auto!r}")
    if out_shape is not None:
        # negative total: zeros (plus bias) beyond the natural output, at the end
        total = [nat - o for nat, o in zip(natural, out_shape)]
        pb = [t - t // 2 if auto != "SAME_UPPER" else t // 2 for t in total]
        if min(pb) < 0:
            raise UnsupportedOpError(node.op, node.name, f"output_shape {out_shape} needs "
                                     f"padding before the natural output {natural}")
        out = out_shape
    else:
        pb = p[:sp] if auto != "VALID" else [0] * sp
        pe = p[sp:] if auto != "VALID" else [0] * sp
        out = [nat - b - e for nat, b, e in zip(natural, pb, pe)]
    if min(out) < 1:
        raise ValueError(f"output size {out} < 1")
    full = [max(ss * (n - 1) + r, b + o) for ss, n, r, b, o in zip(s, ins, reach, pb, out)]
    return dict(k=k, s=s, d=d, pb=pb, out=out, full=full, group=group)


def _out_shapes(node, ins, graph):
    x, w = ins[0], ins[1]
    if node.inputs[1] not in graph.consts:
        raise UnsupportedOpError(node.op, node.name, "weights must be constant")
    g = convt_geometry(node, x, w)
    return [(x[0], w[1] * g["group"]) + tuple(g["out"])]


def _packed(w, group):
    """w (C_in, C_out/g, k...) -> per group (taps * C_out/g, C_in/g), tap-major rows."""
    cin, coutg = w.shape[:2]
    cing = cin // group
    taps = int(np.prod(w.shape[2:]))
    wg = w.reshape(group, cing, coutg, taps)
    return [np.ascontiguousarray(wg[i].transpose(2, 1, 0).reshape(taps * coutg, cing))
            for i in range(group)]


def _runner(x, packs, bias, geo, y, full, cols):
    """Closure computing y from x with scratch full (N, C_out, full...) and cols."""
    nb, cin = x.shape[:2]
    group, coutg = geo["group"], y.shape[1] // geo["group"]
    cing, ins = cin // group, x.shape[2:]
    xs = x.reshape(nb, group, cing, -1)
    tap_views = []
    for t, tap in enumerate(itertools.product(*(range(kk) for kk in geo["k"]))):
        idx = tuple(slice(i * dd, i * dd + ss * (n - 1) + 1, ss)
                    for i, dd, ss, n in zip(tap, geo["d"], geo["s"], ins))
        tap_views.append((t, idx))
    crop = (slice(None), slice(None)) + tuple(slice(b, b + o) for b, o in
                                              zip(geo["pb"], geo["out"]))
    blocks = cols.reshape((len(tap_views), coutg) + tuple(ins))
    work = []
    for n in range(nb):
        for gi in range(group):
            dst = full[n, gi * coutg:(gi + 1) * coutg]
            work.append((packs[gi], xs[n, gi],
                         [(dst[(slice(None),) + idx], blocks[t]) for t, idx in tap_views]))

    def conv_transpose():
        full.fill(0)
        for pack, xg, adds in work:
            np.matmul(pack, xg, out=cols)
            for dst, src in adds:
                np.add(dst, src, out=dst)
        np.copyto(y, full[crop])
        if bias is not None:
            np.add(y, bias, out=y)
    return conv_transpose


def _scratch_shapes(node, shapes, graph):
    x, w = shapes[node.inputs[0]], shapes[node.inputs[1]]
    g = convt_geometry(node, x, w)
    taps = int(np.prod(w[2:]))
    return [(x[0], w[1] * g["group"]) + tuple(g["full"]),
            (taps * w[1], int(np.prod(x[2:])))]


def _bias(b, cout, rank):
    return None if b is None else np.asarray(b).reshape((1, cout) + (1,) * (rank - 2))


def _build(node, graph, shapes, view, scratch):
    x, y = view(node.inputs[0]), view(node.outputs[0])
    get = plan_consts(node, graph)
    w = get(1).astype(np.float32)
    geo = convt_geometry(node, x.shape, w.shape)
    b = get(2)
    bias = None if b is None else _bias(b.astype(np.float32), y.shape[1], y.ndim)
    return _runner(x, _packed(w, geo["group"]), bias, geo, y, *scratch)


def _reference(node, inputs):
    x, w = inputs[0].astype(np.float64), inputs[1].astype(np.float64)
    b = inputs[2] if len(inputs) > 2 else None
    geo = convt_geometry(node, x.shape, w.shape)
    cout = w.shape[1] * geo["group"]
    y = np.empty((x.shape[0], cout) + tuple(geo["out"]))
    full = np.empty((x.shape[0], cout) + tuple(geo["full"]))
    cols = np.empty((int(np.prod(w.shape[2:])) * w.shape[1], int(np.prod(x.shape[2:]))))
    _runner(x, _packed(w, geo["group"]), _bias(b, cout, x.ndim), geo, y, full, cols)()
    return [y.astype(inputs[0].dtype)]


register(OpSpec("ConvTranspose", _out_shapes, _build, _reference, _scratch_shapes))
