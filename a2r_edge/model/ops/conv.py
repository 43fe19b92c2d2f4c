"""Conv: 2-D convolution on the prepacked native kernel (``ops.Conv2d``).

The executor builds Conv nodes after fusion: their attributes then carry the packed inputs
``w``, ``b`` (bias with folded per-channel constants), ``activation``/``alpha`` and ``residual``
(the name of a tensor added before the activation, also the node's input 1), and from the plan's
precision (executor._ConvMode) ``precision``/``act_range`` (ops.Conv2d's), or ``probe``: a dict
that calibration runs collect each Conv input's {node: (lo, hi)} range into. ConvTranspose and
MatMul/Gemm nodes that run on ops.Conv2d read the same attributes (precision_args, probing).
"""
from __future__ import annotations

import numpy as np

from ... import ops
from .. import reference as ref
from .base import OpSpec, UnsupportedOpError, register


def conv_pads(node, x_shape, w_shape) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) padding of a Conv for this input shape (auto_pad resolved)."""
    a = node.attrs
    k = a.get("kernel_shape") or w_shape[2:]
    s = a.get("strides") or [1, 1]
    d = a.get("dilations") or [1, 1]
    auto = a.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        p = a.get("pads") or [0, 0, 0, 0]
        return p[0], p[1], p[2], p[3]
    if auto == "VALID":
        return 0, 0, 0, 0
    pads = []
    for i in range(2):
        size = x_shape[2 + i]
        out = -(-size // s[i])
        total = max(0, (out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - size)
        small = total // 2
        pads.append((small, total - small) if auto == "SAME_UPPER" else (total - small, small))
    return pads[0][0], pads[1][0], pads[0][1], pads[1][1]


def _out_shapes(n, ins, graph):
    a = n.attrs
    x, w = ins[0], ins[1]
    if len(x) != 4:
        raise UnsupportedOpError("Conv", n.name, f"input rank {len(x)} (2-D conv only)")
    if n.inputs[1] not in graph.consts:
        raise UnsupportedOpError("Conv", n.name, "weights must be constant")
    s = a.get("strides") or [1, 1]
    d = a.get("dilations") or [1, 1]
    t, l, b, r = conv_pads(n, x, w)
    oh = (x[2] + t + b - d[0] * (w[2] - 1) - 1) // s[0] + 1
    ow = (x[3] + l + r - d[1] * (w[3] - 1) - 1) // s[1] + 1
    if x[1] != w[1] * a.get("group", 1) or oh < 1 or ow < 1:
        raise ValueError(f"weights {w} with group {a.get('group', 1)} do not fit input {x}")
    return [(x[0], w[0], oh, ow)]


def _scratch_shapes(n, shapes, graph):
    x = shapes[n.inputs[0]]
    t, l, b, r = conv_pads(n, x, n.attrs["w"].shape)
    return [] if (t, l) == (b, r) else [(x[0], x[1], x[2] + t + b, x[3] + l + r)]


def _conv2d(n, x_shape) -> tuple[ops.Conv2d, tuple[int, int] | None]:
    """The node's ops.Conv2d for inputs of x_shape, and the (top, left) padding when it is not
    symmetric (None when it is): the input is then copied into a zero-padded scratch at that
    offset and the Conv2d pads nothing."""
    a = n.attrs
    t, l, b, r = conv_pads(n, x_shape, a["w"].shape)
    symmetric = (t, l) == (b, r)
    conv = ops.Conv2d(a["w"], a["b"], stride=tuple(a.get("strides") or (1, 1)),
                      pad=(t, l) if symmetric else (0, 0),
                      dilation=tuple(a.get("dilations") or (1, 1)), groups=a.get("group", 1),
                      activation=a["activation"], alpha=a.get("alpha", 0.01),
                      **precision_args(n))
    return conv, None if symmetric else (t, l)


def takes_u8(n, x_shape) -> bool:
    """Whether the (fused, annotated) Conv node can read its input as u8 levels on its own
    act_range grid (ops.Conv2d.takes_u8), written so by an int8 producer (``out_range``)."""
    if n.op != "Conv" or n.attrs.get("probe") is not None:
        return False
    conv, offset = _conv2d(n, x_shape)
    return offset is None and conv.takes_u8(x_shape)


def _build(n, graph, shapes, view, scratch):
    a = n.attrs
    y = view(n.outputs[0])
    x = view(n.inputs[0])
    res = view(n.inputs[1]) if len(n.inputs) > 1 else None
    conv, offset = _conv2d(n, x.shape)
    if offset is None:
        # out_range: the executor keeps this output as u8 levels for the next int8 Conv
        step = conv.bind(x, residual=res, out=y, out_range=a.get("out_range"))
    else:
        padded, (t, l) = scratch[0], offset
        inner = padded[:, :, t:t + x.shape[2], l:l + x.shape[3]]
        run = conv.bind(padded, residual=res, out=y, out_range=a.get("out_range"))

        def step():
            padded.fill(0)
            np.copyto(inner, x)
            run()
    return probing(n, x, step)


def precision_args(node) -> dict:
    """ops.Conv2d's precision and act_range from a node's plan attributes."""
    return dict(precision=node.attrs.get("precision", "fp32"),
                act_range=node.attrs.get("act_range"))


def probing(node, x, step):
    """step, or when the node carries a ``probe`` (calibration) a closure recording the range of
    x (with 0, the value of any zero padding) under the node's name before running step."""
    probe = node.attrs.get("probe")
    if probe is None:
        return step
    name = node.name

    def probed():
        lo, hi = probe.get(name, (0.0, 0.0))
        probe[name] = (min(lo, float(x.min())), max(hi, float(x.max())))
        step()
    return probed


def _reference(n, inputs):
    """ONNX Conv (x, w, b) before fusion, float64 sums."""
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    a = n.attrs
    t, l, bo, r = conv_pads(n, x.shape, w.shape)
    xp = np.pad(x, ((0, 0), (0, 0), (t, bo), (l, r)))
    y = ref.conv2d(xp, w, b, stride=tuple(a.get("strides") or (1, 1)),
                   dilation=tuple(a.get("dilations") or (1, 1)), groups=a.get("group", 1))
    return [y.astype(x.dtype)]


register(OpSpec("Conv", _out_shapes, _build, _reference, _scratch_shapes,
                 lowp=lambda n, shapes, graph: ""))
