"""ConvTranspose over 1-3 spatial axes: strides, dilations, pads, output_padding, output_shape,
auto_pad, groups.

2-D without dilation (the generators' upsampling): sub-pixel form on the native convolution.
Output rows and columns of one phase (q mod stride) take only the taps congruent to that
phase, so each of the stride^2 phases is an ordinary stride-1 convolution of x (padded once)
with a flipped sub-kernel; ops.Conv2d runs it with the bias in its epilogue and the phase is
copied into its strided positions of y. No zero-stuffed input, no col2im.

Otherwise (1-D/3-D, dilations): per batch item and group one matrix product of the
(taps * C_out/g, C_in/g) weights with the input (C_in/g, pixels), each tap's block added into
the strided positions of an uncropped output buffer, then the crop and the bias.
"""
from __future__ import annotations

import itertools

import numpy as np

from ... import ops
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


# --- the sub-pixel form (2-D, dilation 1) ---------------------------------------------------

def _phase_axis(n, k, s, pb, out):
    """Per phase r of one axis: (taps r, r+s, ... ; first output index o0 and count of the
    outputs it makes; first x index m0 it reads, minus the sub-kernel's reach)."""
    phases = []
    for r in range(s):
        taps = list(range(r, k, s))
        m0 = -(-(pb - r) // s)                 # first m with m*s + r >= pb
        m1 = (pb + out - 1 - r) // s           # last m with m*s + r < pb + out
        count = max(m1 - m0 + 1, 0)
        phases.append(dict(taps=taps, o0=m0 * s + r - pb, count=count, m0=m0, m1=m1))
    return phases


def _subpixel_plan(x_shape, w_shape, geo):
    """Pads of the shared padded x and each phase's (sub-kernel taps, conv window, y slice)."""
    axes = [_phase_axis(x_shape[2 + i], geo["k"][i], geo["s"][i], geo["pb"][i], geo["out"][i])
            for i in range(2)]
    pads = []
    for i, phases in enumerate(axes):
        n = x_shape[2 + i]
        lo = max([len(p["taps"]) - 1 - p["m0"] for p in phases if p["taps"] and p["count"]]
                 + [0])
        hi = max([p["m1"] - n + 1 for p in phases if p["taps"] and p["count"]] + [0])
        pads.append((lo, hi))
    return axes, pads


def _subpixel_ok(node, x_shape, geo):
    return len(x_shape) == 4 and geo["d"] == [1, 1]


def _build_subpixel(x, y, w, b, geo, padded, phase_out):
    """Closure: y = ConvTranspose(x) by stride^2 phase convolutions (see the module doc)."""
    group = geo["group"]
    cin, coutg = w.shape[:2]
    cing = cin // group
    axes, pads = _subpixel_plan(x.shape, w.shape, geo)
    (pt, pbm), (pl, pr) = pads
    inner = None
    if padded is not None:
        inner = padded[:, :, pt:pt + x.shape[2], pl:pl + x.shape[3]]
    src = x if padded is None else padded
    # (C_in, C_out/g, kh, kw) -> conv weights (C_out, C_in/g, kh, kw), groups kept
    wc = w.reshape(group, cing, coutg, *w.shape[2:]).transpose(0, 2, 1, 3, 4) \
        .reshape(group * coutg, cing, *w.shape[2:])
    bias = np.zeros(group * coutg, np.float32) if b is None else b.astype(np.float32)
    runs, fills = [], []
    for py in axes[0]:
        for px in axes[1]:
            if not py["count"] or not px["count"]:
                continue
            dst = y[:, :, py["o0"]::geo["s"][0], px["o0"]::geo["s"][1]]
            dst = dst[:, :, :py["count"], :px["count"]]
            if not py["taps"] or not px["taps"]:
                fills.append(dst)
                continue
            sub = wc[:, :, py["taps"][::-1]][:, :, :, px["taps"][::-1]]
            conv = ops.Conv2d(np.ascontiguousarray(sub), bias, groups=group)
            uy, ux = len(py["taps"]), len(px["taps"])
            oh, ow = src.shape[2] - uy + 1, src.shape[3] - ux + 1
            out = phase_out.reshape(-1)[:y.shape[0] * y.shape[1] * oh * ow] \
                .reshape(y.shape[0], y.shape[1], oh, ow)
            jy, jx = py["m0"] - (uy - 1) + pt, px["m0"] - (ux - 1) + pl
            runs.append((conv, out, dst, out[:, :, jy:jy + py["count"], jx:jx + px["count"]]))
    fill_value = bias.reshape(1, -1, 1, 1)

    def conv_transpose():
        if padded is not None:
            padded.fill(0)
            np.copyto(inner, x)
        for conv, out, dst, part in runs:
            conv(src, out=out)
            np.copyto(dst, part)
        for dst in fills:
            np.copyto(dst, fill_value)
    return conv_transpose


def _subpixel_scratch(x_shape, w_shape, geo):
    axes, ((pt, pbm), (pl, pr)) = _subpixel_plan(x_shape, w_shape, geo)
    h, w = x_shape[2] + pt + pbm, x_shape[3] + pl + pr
    shapes = [(x_shape[0], x_shape[1], h, w)] if pt or pbm or pl or pr else []
    biggest = max([(h - len(py["taps"]) + 1) * (w - len(px["taps"]) + 1)
                   for py in axes[0] for px in axes[1] if py["taps"] and px["taps"]] + [1])
    return shapes + [(x_shape[0] * w_shape[1] * geo["group"] * biggest,)]


def _scratch_shapes(node, shapes, graph):
    x, w = shapes[node.inputs[0]], shapes[node.inputs[1]]
    g = convt_geometry(node, x, w)
    if _subpixel_ok(node, x, g):
        return _subpixel_scratch(x, w, g)
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
    if _subpixel_ok(node, x.shape, geo):
        padded = scratch[0] if len(scratch) == 2 else None
        return _build_subpixel(x, y, w, b, geo, padded, scratch[-1])
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
