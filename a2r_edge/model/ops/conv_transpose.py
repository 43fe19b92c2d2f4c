"""ConvTranspose over 1-3 spatial axes: strides, dilations, pads, output_padding, output_shape,
auto_pad, groups.

2-D without dilation (the generators' upsampling): sub-pixel form on the native convolution.
Output rows (and columns) are taken in groups of stride consecutive positions aligned so that
every phase of a group reads the same ceil(k / stride) input rows, each phase with its own
taps; so one stride-1 convolution of x with stride^2 * C_out outputs (the flipped sub-kernels
stacked, zeros for the taps a phase lacks, the bias in its epilogue) computes every phase, and
depth-to-space (ops.pixel_shuffle) interleaves them; pads and output_padding become a crop,
made by the same pass (its window).
No zero-stuffed input, no col2im, the FLOPs of the direct form. That is for kernels that are
a multiple of the stride (k4 s2, k2 s2); other kernels (k3 s2) would get zero taps, so at fp32
each phase runs as its own stride-1 convolution with its sub-kernel and is copied into its
strided positions of y (at bf16 and int8 they are stacked all the same: ``_form``).

Both 2-D forms run on ops.Conv2d, the stacked one at the plan's bf16/int8 precision too (the
conv.py attributes: weights packed once per plan, per-output-channel int8 weight scales, the
activation range of x from calibration). Otherwise (1-D/3-D, dilations): per batch item and
group one matrix product of the (taps * C_out/g, C_in/g) weights with the input (C_in/g,
pixels), each tap's block added into the strided positions of an uncropped output buffer,
then the crop and the bias; always fp32.
"""
from __future__ import annotations

import functools
import itertools

import numpy as np

from ... import ops
from ...runtime.threads import blas_on_one_thread
from .base import OpSpec, UnsupportedOpError, plan_consts, register
from .conv import precision_args, probing


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
    return blas_on_one_thread(conv_transpose, len(work) * cols.size * xs.shape[2])


# --- stacked sub-pixel form (2-D, dilation 1, a kernel a multiple of the stride) ------------

def _stacked_axis(n, k, s, pb, out):
    """One axis of the sub-pixel form. Outputs are taken in groups of s, o = s*j + c0 + t
    (t < s), with c0 chosen so that every phase t of group j reads the same x window
    x[j + q - u_max .. j + q]: tap k = s*u + t goes with x[j + q - u]. So one stride-1 conv
    with U = ceil(k/s) taps per axis gives all s phases of a group (phases with fewer taps get
    zero taps). Returns U, the conv's output length J (groups j = jmin .. jmin + J - 1), the
    zeros before/after x it reads (negative: x cropped) and the crop of the shuffled result."""
    c0 = (-pb) % s
    q = (c0 + pb) // s
    taps = -(-k // s)
    jmin = 0 if c0 == 0 else -1
    groups = (out - 1 - c0) // s - jmin + 1
    lo = taps - 1 - q - jmin
    return dict(taps=taps, groups=groups, lo=lo, hi=groups + taps - 1 - n - lo,
                crop=-(s * jmin + c0))


def _stacked_weights(w, b, geo):
    """w (C_in, C_out/g, kh, kw) -> conv weights (g * C_out/g * sh * sw, C_in/g, Uh, Uw),
    output channel (c, phase_h, phase_w) in depth-to-space (CRD) order, and the bias to match."""
    group, (sh, sw) = geo["group"], geo["s"]
    cin, coutg, kh, kw = w.shape
    uh, uw = -(-kh // sh), -(-kw // sw)
    wide = np.zeros((cin, coutg, uh * sh, uw * sw), np.float32)
    wide[:, :, :kh, :kw] = w            # tap k = s*u + t; taps past k stay zero
    wide = wide.reshape(group, cin // group, coutg, uh, sh, uw, sw)[:, :, :, ::-1, :, ::-1, :]
    stacked = wide.transpose(0, 2, 4, 6, 1, 3, 5).reshape(group * coutg * sh * sw,
                                                          cin // group, uh, uw)
    bias = np.zeros(group * coutg, np.float32) if b is None else b.astype(np.float32)
    return np.ascontiguousarray(stacked), np.repeat(bias, sh * sw)


def _stacked_plan(x_shape, geo):
    return [_stacked_axis(x_shape[2 + i], geo["k"][i], geo["s"][i], geo["pb"][i],
                          geo["out"][i]) for i in range(2)]


def _form(x_shape, geo, precision: str = "fp32") -> str:
    """"stacked" (kernel a multiple of the stride: no zero taps), "phases" (other 2-D kernels
    without dilation at fp32: stacking would add zero taps, up to 1.8x the FLOPs at k3 s2,
    measured 1.1-1.3x slower than the phases run one by one) or "generic". At bf16 and int8
    other kernels are stacked too: a phase's few taps make a short lane loop per register tile,
    which costs the low-precision kernel more than the zero taps (CycleGAN's 16 -> 8 k3 s2
    layer at 128^2, int8, 1 thread: 0.72 ms in phases, 0.44 ms stacked)."""
    if len(x_shape) != 4 or geo["d"] != [1, 1]:
        return "generic"
    return "stacked" if precision != "fp32" or \
        all(k % s == 0 for k, s in zip(geo["k"], geo["s"])) else "phases"


def takes_activation(node, x_shape, w_shape) -> bool:
    """Whether this ConvTranspose runs in the stacked form at every precision (fp32 included),
    whose convolution can apply a following Relu/LeakyRelu/SiLU in its epilogue (depth-to-space
    and the crop only move values). graph.fuse asks before fusing one; the node then carries
    ``activation``/``alpha``."""
    try:
        return _form(x_shape, convt_geometry(node, x_shape, w_shape)) == "stacked"
    except (ValueError, UnsupportedOpError):
        return False


def _native_pad(ay, ax):
    """The conv's own zero padding gives the window (same zeros before and after x)."""
    return ay["lo"] == ay["hi"] >= 0 and ax["lo"] == ax["hi"] >= 0


def _crop_needed(ay, ax, geo, y_shape):
    return (ay["crop"], ax["crop"]) != (0, 0) or \
        (geo["s"][0] * ay["groups"], geo["s"][1] * ax["groups"]) != tuple(y_shape[2:])


def _window_copy(ay, ax, geo, y_shape) -> bool:
    """Whether the crop is a copy of its own. Not with equal strides: ops.pixel_shuffle writes
    the window itself; with unequal strides (a numpy depth-to-space) or none, when cropped."""
    s = geo["s"]
    return _crop_needed(ay, ax, geo, y_shape) and (s[0] != s[1] or s == [1, 1])


def _stacked_scratch(x_shape, y_shape, geo):
    """[padded x] (when the conv's zero padding cannot make the window), [the conv output]
    (unless it is y), [the depth-to-space result before its crop] (unequal strides, cropped)."""
    (ay, ax), strided = _stacked_plan(x_shape, geo), geo["s"] != [1, 1]
    shapes = []
    if not _native_pad(ay, ax):
        shapes.append((x_shape[0], x_shape[1], ay["groups"] + ay["taps"] - 1,
                       ax["groups"] + ax["taps"] - 1))
    if strided or _crop_needed(ay, ax, geo, y_shape):
        shapes.append((y_shape[0], y_shape[1] * geo["s"][0] * geo["s"][1], ay["groups"],
                       ax["groups"]))
    if strided and _window_copy(ay, ax, geo, y_shape):
        shapes.append((y_shape[0], y_shape[1], geo["s"][0] * ay["groups"],
                       geo["s"][1] * ax["groups"]))
    return shapes


def _build_stacked(x, y, w, b, geo, scratch, activation=None, alpha=0.01, precision=None):
    """Closure: y = activation(ConvTranspose(x)) as one stride-1 conv with sh*sw*C_out outputs
    (ops.Conv2d, bias and activation in its epilogue), then depth-to-space and the crop
    (ops.pixel_shuffle's window: one pass). precision: ops.Conv2d's precision/act_range."""
    ay, ax = _stacked_plan(x.shape, geo)
    sh, sw = geo["s"]
    wst, bst = _stacked_weights(w, b, geo)
    scratch = list(scratch)
    src, pad, copy_in = x, (max(ay["lo"], 0), max(ax["lo"], 0)), None
    if not _native_pad(ay, ax):
        src, pad = scratch.pop(0), (0, 0)
        rows = [(max(a["lo"], 0), max(-a["lo"], 0),
                 max(min(n + a["lo"], size) - max(a["lo"], 0), 0))
                for a, n, size in ((ay, x.shape[2], src.shape[2]),
                                   (ax, x.shape[3], src.shape[3]))]
        dst = src[:, :, rows[0][0]:rows[0][0] + rows[0][2], rows[1][0]:rows[1][0] + rows[1][2]]
        part = x[:, :, rows[0][1]:rows[0][1] + rows[0][2], rows[1][1]:rows[1][1] + rows[1][2]]
        copy_in = (src, dst, part)
    strided, copy = (sh, sw) != (1, 1), _window_copy(ay, ax, geo, y.shape)
    z = scratch.pop(0) if strided or _crop_needed(ay, ax, geo, y.shape) else y
    shuffled = (scratch.pop(0) if copy else y) if strided else z
    window = shuffled[:, :, ay["crop"]:ay["crop"] + y.shape[2],
                      ax["crop"]:ax["crop"] + y.shape[3]]
    shuffle = None
    if strided and sh == sw:   # depth-to-space and the crop in one pass, into y
        shuffle = functools.partial(ops.pixel_shuffle, z, sh, out=y,
                                    offset=(ay["crop"], ax["crop"]))
    elif strided:   # depth-to-space with unequal strides: one numpy copy
        nb, c = y.shape[:2]
        shuffle = functools.partial(
            np.copyto, shuffled.reshape(nb, c, ay["groups"], sh, ax["groups"], sw),
            z.reshape(nb, c, sh, sw, ay["groups"], ax["groups"]).transpose(0, 1, 4, 2, 5, 3))
    conv = ops.Conv2d(wst, bst, pad=pad, groups=geo["group"], activation=activation,
                      alpha=alpha, **(precision or {})).bind(src, out=z)

    def conv_transpose():
        if copy_in is not None:
            copy_in[0].fill(0)
            np.copyto(copy_in[1], copy_in[2])
        conv()
        if shuffle is not None:
            shuffle()
        if copy:
            np.copyto(y, window)
    return conv_transpose


# --- per phase (2-D, dilation 1, a kernel not a multiple of the stride) ---------------------

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


def _phase_plan(x_shape, w_shape, geo):
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


def _build_phases(x, y, w, b, geo, padded, phase_out):
    """Closure: y = ConvTranspose(x) by stride^2 phase convolutions at fp32 (see the module
    doc)."""
    group = geo["group"]
    cin, coutg = w.shape[:2]
    cing = cin // group
    axes, pads = _phase_plan(x.shape, w.shape, geo)
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
            runs.append((conv.bind(src, out=out), dst,
                         out[:, :, jy:jy + py["count"], jx:jx + px["count"]]))
    fill_value = bias.reshape(1, -1, 1, 1)

    def conv_transpose():
        if padded is not None:
            padded.fill(0)
            np.copyto(inner, x)
        for conv, dst, part in runs:
            conv()
            np.copyto(dst, part)
        for dst in fills:
            np.copyto(dst, fill_value)
    return conv_transpose


def _phase_scratch(x_shape, w_shape, geo):
    axes, ((pt, pbm), (pl, pr)) = _phase_plan(x_shape, w_shape, geo)
    h, w = x_shape[2] + pt + pbm, x_shape[3] + pl + pr
    shapes = [(x_shape[0], x_shape[1], h, w)] if pt or pbm or pl or pr else []
    biggest = max([(h - len(py["taps"]) + 1) * (w - len(px["taps"]) + 1)
                   for py in axes[0] for px in axes[1] if py["taps"] and px["taps"]] + [1])
    return shapes + [(x_shape[0] * w_shape[1] * geo["group"] * biggest,)]


def _scratch_shapes(node, shapes, graph):
    x, w = shapes[node.inputs[0]], shapes[node.inputs[1]]
    g = convt_geometry(node, x, w)
    form = _form(x, g, precision_args(node)["precision"])
    if form == "stacked":
        return _stacked_scratch(x, shapes[node.outputs[0]], g)
    if form == "phases":
        return _phase_scratch(x, w, g)
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
    precision = precision_args(node)
    form = _form(x.shape, geo, precision["precision"])
    if form == "stacked":
        return probing(node, x, _build_stacked(
            x, y, w, b, geo, scratch, node.attrs.get("activation"),
            node.attrs.get("alpha", 0.01), precision))
    if node.attrs.get("activation"):
        raise AssertionError(f"ConvTranspose {node.name!r}: an activation fused into the "
                             f"{form} form (takes_activation said no)")
    if form == "phases":
        return probing(node, x, _build_phases(
            x, y, w, b, geo, scratch[0] if len(scratch) == 2 else None, scratch[-1]))
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


def _lowp(node, shapes, graph) -> str:
    """"" for the 2-D forms (convolutions, at the plan's precision), else why it is fp32."""
    x = shapes[node.inputs[0]]
    if _form(x, convt_geometry(node, x, shapes[node.inputs[1]])) != "generic":
        return ""
    return "generic form (not 2-D, or dilated): a matrix product and col2im at fp32"


register(OpSpec("ConvTranspose", _out_shapes, _build, _reference, _scratch_shapes, lowp=_lowp))
