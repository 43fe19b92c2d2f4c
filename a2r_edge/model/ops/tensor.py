"""Ops that move values without arithmetic: Constant, Concat, Split, Slice, Gather, Compress,
Expand, Tile, Transpose, DepthToSpace. (Pad is in pad.py; pure reshapes in shape.py.)"""
from __future__ import annotations

import numpy as np

from ... import _kernels
from .base import (OpSpec, UnsupportedOpError, attr_axis, copy_build, given, plan_consts,
                   register)


# --- Constant: folded into graph.consts at load, never planned -------------------------------

def _constant(n, inputs):
    from onnx import numpy_helper
    a = n.attrs
    if "value" in a:
        return [numpy_helper.to_array(a["value"])]
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in a:
            return [np.asarray(a[key], dtype)]
    raise UnsupportedOpError("Constant", n.name, f"attribute {sorted(a)} not supported")


def _constant_shapes(n, ins, graph):
    return [tuple(_constant(n, [])[0].shape)]


def _not_planned(n, graph, shapes, view, scratch):
    raise AssertionError(f"{n.op} node {n.name!r} reached the plan (load folds it)")


# --- Concat: producers may write straight into the output's slices ("aliased") ---------------

def _concat_shapes(n, ins, graph):
    axis = n.attrs["axis"] % len(ins[0])
    base = list(ins[0])
    base[axis] = sum(s[axis] for s in ins)
    for s in ins:
        if len(s) != len(base) or any(s[i] != base[i] for i in range(len(s)) if i != axis):
            raise ValueError(f"inputs {ins} differ off axis {axis}")
    return [tuple(base)]


def _build_concat(n, graph, shapes, view, scratch):
    out = view(n.outputs[0])
    axis = n.attrs["axis"] % out.ndim
    copies, k = [], 0
    for s in n.inputs:
        size = shapes[s][axis]
        if s not in n.attrs.get("aliased", ()):
            index = (slice(None),) * axis + (slice(k, k + size),)
            src = np.ascontiguousarray(graph.consts[s], np.float32) \
                if s in graph.consts else view(s)
            copies.append((out[index], src))
        k += size
    if not copies:
        return None

    def concat():
        for dst, src in copies:
            np.copyto(dst, src)
    return concat


def _concat(n, inputs):
    return [np.concatenate(inputs, axis=n.attrs["axis"])]


# --- DepthToSpace ------------------------------------------------------------------------------

def _d2s_shapes(n, ins, graph):
    r = n.attrs["blocksize"]
    if len(ins[0]) != 4 or ins[0][1] % (r * r):
        raise ValueError(f"channels not a multiple of blocksize^2 = {r * r}")
    nb, c, h, w = ins[0]
    return [(nb, c // (r * r), h * r, w * r)]


def _build_d2s(n, graph, shapes, view, scratch):
    x, y = view(n.inputs[0]), view(n.outputs[0])
    r = n.attrs["blocksize"]
    nb, c, h, w = y.shape
    if n.attrs.get("mode", "DCR") == "CRD":
        xf, yf = x.reshape(-1), y.reshape(-1)
        # uint8: u8 levels between two int8 convolutions (executor._Plan._u8_links)
        shuffle = _kernels.pixel_shuffle_u8 if x.dtype == np.uint8 else _kernels.pixel_shuffle
        return lambda: shuffle(xf, nb, c, h // r, w // r, r, 0, 0, h, w, yf)
    src = x.reshape(nb, r, r, c, h // r, w // r).transpose(0, 3, 4, 1, 5, 2)
    dst = y.reshape(nb, c, h // r, r, w // r, r)
    return lambda: np.copyto(dst, src)


def _d2s(n, inputs):
    x = inputs[0]
    r = n.attrs["blocksize"]
    nb, c, h, w = x.shape
    if n.attrs.get("mode", "DCR") == "CRD":
        t = x.reshape(nb, c // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        t = x.reshape(nb, r, r, c // (r * r), h, w).transpose(0, 3, 4, 1, 5, 2)
    return [np.ascontiguousarray(t).reshape(nb, c // (r * r), h * r, w * r)]


# --- Transpose, Expand ------------------------------------------------------------------------

def transpose_perm(node, rank: int) -> list[int]:
    """A Transpose node's checked permutation of ``rank`` axes (reversed when it has none),
    negative entries counted from the end."""
    perm = node.attrs.get("perm")
    perm = list(range(rank))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(p % rank if rank else p for p in perm) != list(range(rank)):
        raise ValueError(f"perm {perm} is not a permutation of {rank} axes")
    return [p % rank for p in perm]


def swapped_blocks(shape, perm) -> tuple[int, int, int] | None:
    """(batch, rows, cols) when transposing an array of ``shape`` by ``perm`` is a batch of 2-D
    transposes, y[b, j, i] = x[b, i, j] on the C-contiguous arrays (NCHW <-> NHWC: C and H*W
    swap); None otherwise (the last axis kept, as attention's head splits; three blocks moved)."""
    groups: list[list[int]] = []   # runs of x's axes that stay together, in y's order
    for a in (a for a in perm if shape[a] != 1):
        if groups and groups[-1][-1] + 1 == a:
            groups[-1].append(a)
        else:
            groups.append([a])
    size = [int(np.prod([shape[a] for a in g])) for g in groups]
    first = [g[0] for g in groups]
    if len(groups) == 2 and first[0] > first[1]:
        return 1, size[1], size[0]
    if len(groups) == 3 and first[0] < first[2] < first[1]:
        return size[0], size[2], size[1]
    return None


# The numpy path: a Transpose moving the last axis, of at least this many elements, is copied in
# slices of at least _SLICE values (_transpose_build).
_SLICED_TRANSPOSE = 1 << 18
_SLICE = 1 << 12


def _transpose_build(node, graph, shapes, view, scratch):
    """y <- x transposed. A batch of 2-D transposes of float32 (swapped_blocks: NCHW <-> NHWC)
    by the native kernel, in cache-sized tiles (numpy's strided copy ran the one-op graph of a
    (1, 64, 256, 256) map to NHWC at 0.29x onnxruntime, the kernel at 0.81-0.89x, the input
    copy included: benchmarks/bench_generator_ops.py -k Transpose, 1 thread). Otherwise numpy:
    a large one that moves x's last axis to where y's rows read it a few values apart slice by
    slice along an axis of y that is neither its last nor x's last (each slice a small 2-D
    transpose that stays in cache: an NHWC (1, 516, 516, 64) map to NCHW took 97-104 ms in one
    strided copy, 19-24 ms in slices, before the kernel took that case); the rest (the last axis
    kept, as attention's head splits) in one copy, whose inner loop then runs along contiguous
    rows."""
    x, y = view(node.inputs[0]), view(node.outputs[0])
    perm = transpose_perm(node, x.ndim)
    blocks = swapped_blocks(x.shape, perm)
    if blocks is not None and x.dtype == np.float32:
        xf, yf = x.reshape(-1), y.reshape(-1)
        return lambda: _kernels.transpose(xf, *blocks, yf)
    src = x.transpose(perm)
    free = [k for k in range(y.ndim - 1) if perm[k] != x.ndim - 1 and y.shape[k] > 1
            and y.size // y.shape[k] >= _SLICE]
    # sliced where y's rows read x with a short stride; a long one measured slower in slices
    # (NCHW -> NHWC, H*W apart: 18.9 against 14.1 ms at 64x256^2)
    if y.size < _SLICED_TRANSPOSE or perm[-1] == x.ndim - 1 or not free \
            or src.strides[-1] // src.itemsize > _SLICE:
        return lambda: np.copyto(y, src)
    k = max(free, key=lambda a: y.shape[a])
    pairs = [(y[(slice(None),) * k + (i,)], src[(slice(None),) * k + (i,)])
             for i in range(y.shape[k])]

    def run():
        for dst, part in pairs:
            np.copyto(dst, part)
    return run


def _expand_target(node, x_shape, get):
    shape = get(1)
    if shape is None or shape.ndim != 1:
        raise ValueError("Expand needs a 1-D shape")
    return tuple(np.broadcast_shapes(tuple(x_shape), tuple(int(v) for v in shape)))


def _expanded(node, x, y):
    return x   # np.copyto broadcasts


def _compress_index(node, x_shape, get) -> tuple[int | None, np.ndarray]:
    """(axis or None: x flattened, the kept positions) of a Compress whose condition is known
    when the graph is planned (tf2onnx's SYMMETRIC padding: a mask built from the shape)."""
    cond = get(1)
    if cond is None or cond.ndim != 1:
        raise ValueError("Compress needs a 1-D condition")
    axis = attr_axis(node, len(x_shape)) if "axis" in node.attrs else None
    size = x_shape[axis] if axis is not None else int(np.prod(x_shape))
    return axis, np.flatnonzero(cond[:size].astype(bool))


def _compress_shape(node, x_shape, get):
    axis, keep = _compress_index(node, x_shape, get)
    if axis is None:
        return (keep.size,)
    return tuple(keep.size if i == axis else d for i, d in enumerate(x_shape))


def _compress_build(node, graph, shapes, view, scratch):
    x, y = view(node.inputs[0]), view(node.outputs[0])
    axis, keep = _compress_index(node, x.shape, plan_consts(node, graph))
    # mode="clip": the indices are in range by construction, and the default "raise" makes
    # np.take buffer the whole result before writing out= (16.6 MB a run at 1x64x256x256)
    if axis is None:
        return lambda: np.take(x.reshape(-1), keep, out=y, mode="clip")
    return lambda: np.take(x, keep, axis=axis, out=y, mode="clip")


def _tile_reps(node, x_shape, get) -> list[int]:
    reps = get(1)
    if reps is None or reps.ndim != 1 or len(reps) != len(x_shape) or np.any(reps < 0):
        raise ValueError(f"Tile needs one repeat count >= 0 per axis of x {tuple(x_shape)}, "
                         f"got {None if reps is None else reps.tolist()}")
    return [int(r) for r in reps]


def _tile_build(node, graph, shapes, view, scratch):
    """y seen as (r0, s0, r1, s1, ...) takes x seen as (1, s0, 1, s1, ...): one broadcast
    copy (Keras UpSampling2D at a fixed size, tf2onnx's Tile)."""
    x, y = view(node.inputs[0]), view(node.outputs[0])
    reps = _tile_reps(node, x.shape, plan_consts(node, graph))
    if not y.flags.c_contiguous:   # no plan makes one: a reshape would copy, the run be lost
        raise UnsupportedOpError(node.op, node.name, "an output that is not contiguous")
    yv = y.reshape([v for r, s in zip(reps, x.shape) for v in (r, s)])
    xv = x.reshape([v for s in x.shape for v in (1, s)])
    return lambda: np.copyto(yv, xv)


# --- Split ---------------------------------------------------------------------------------------

def _split_sizes(node, x_shape, get) -> tuple[int, list[int]]:
    axis = int(node.attrs.get("axis", 0))
    r = len(x_shape)
    if not -r <= axis < r:
        raise ValueError(f"axis={axis} out of range for rank {r}")
    axis %= r
    dim, k = x_shape[axis], len(node.outputs)
    split = node.attrs.get("split")     # an attribute before opset 13
    if split is None and get(1) is not None:
        split = get(1).reshape(-1).tolist()
    if split is None:
        n = int(node.attrs.get("num_outputs", k))
        part = -(-dim // n)              # ceil: the last part may be smaller
        split = [min(part, max(dim - i * part, 0)) for i in range(n)]
    split = [int(v) for v in split]
    if len(split) != k or sum(split) != dim or min(split) < 0:
        raise ValueError(f"split {split} does not cut axis {axis} of size {dim} into {k} parts")
    return axis, split


def _split_shapes(node, in_shapes, graph):
    axis, split = _split_sizes(node, in_shapes[0], plan_consts(node, graph))
    return [in_shapes[0][:axis] + (n,) + in_shapes[0][axis + 1:] for n in split]


def _split_parts(x, axis, split):
    k = 0
    for n in split:
        yield x[(slice(None),) * axis + (slice(k, k + n),)]
        k += n


def _split_build(node, graph, shapes, view, scratch):
    x = view(node.inputs[0])
    axis, split = _split_sizes(node, x.shape, plan_consts(node, graph))
    pairs = [(view(o), part) for o, part in zip(node.outputs, _split_parts(x, axis, split)) if o]

    def split_run():
        for dst, src in pairs:
            np.copyto(dst, src)
    return split_run


def _split(node, inputs):
    axis, split = _split_sizes(node, inputs[0].shape, given(inputs))
    return [p.copy() for p in _split_parts(inputs[0], axis, split)]


# --- Slice ---------------------------------------------------------------------------------------

def slice_index(node, x_shape, get) -> tuple:
    """The numpy index of a Slice (starts/ends/axes/steps clamped as ONNX says)."""
    a = node.attrs
    if "starts" in a:                    # attributes before opset 10
        starts, ends, axes, steps = a["starts"], a["ends"], a.get("axes"), None
    else:
        starts, ends, axes, steps = (None if get(k) is None else get(k).reshape(-1).tolist()
                                     for k in (1, 2, 3, 4))
    r = len(x_shape)
    axes = list(range(len(starts))) if axes is None else [int(v) for v in axes]
    steps = [1] * len(starts) if steps is None else [int(v) for v in steps]
    if not len(starts) == len(ends) == len(axes) == len(steps) or \
            any(not -r <= ax < r for ax in axes) or len({ax % r for ax in axes}) != len(axes):
        raise ValueError(f"starts {starts}, ends {ends}, axes {axes}, steps {steps} do not fit "
                         f"rank {r}")
    index = [slice(None)] * r
    for st, en, ax, sp in zip(starts, ends, axes, steps):
        ax %= r
        dim = x_shape[ax]
        if sp == 0:
            raise ValueError("slice step 0")
        st, en = int(st), int(en)
        st = st + dim if st < 0 else st
        en = en + dim if en < 0 else en
        if sp > 0:
            st, en = min(max(st, 0), dim), min(max(en, 0), dim)
        else:
            st, en = min(max(st, -1), dim - 1), min(max(en, -1), dim - 1)
        index[ax] = slice(st, None if en < 0 else en, sp)
    return tuple(index)


def _sliced_shape(node, in_shapes, graph):
    x = in_shapes[0]
    index = slice_index(node, x, plan_consts(node, graph))
    return [tuple(len(range(*s.indices(d))) for s, d in zip(index, x))]


def _slice_build(node, graph, shapes, view, scratch):
    x, y = view(node.inputs[0]), view(node.outputs[0])
    src = x[slice_index(node, x.shape, plan_consts(node, graph))]
    return lambda: np.copyto(y, src)


def _slice(node, inputs):
    return [inputs[0][slice_index(node, inputs[0].shape, given(inputs))].copy()]


# --- Gather ---------------------------------------------------------------------------------------

def _gather_indices(node, x_shape, indices):
    axis = int(node.attrs.get("axis", 0))
    r = len(x_shape)
    if not -r <= axis < r:
        raise ValueError(f"axis={axis} out of range for rank {r}")
    axis %= r
    idx = np.asarray(indices, np.int64)
    dim = x_shape[axis]
    if np.any((idx < -dim) | (idx >= dim)):
        raise ValueError(f"indices out of range for axis {axis} of size {dim}")
    return axis, np.where(idx < 0, idx + dim, idx).astype(np.intp)


def _gather_shapes(node, in_shapes, graph):
    x, ind = in_shapes[0], in_shapes[1]
    axis = int(node.attrs.get("axis", 0)) % len(x)
    return [tuple(x[:axis]) + tuple(ind) + tuple(x[axis + 1:])]


def _gather_build(node, graph, shapes, view, scratch):
    x, y = view(node.inputs[0]), view(node.outputs[0])
    axis, idx = _gather_indices(node, x.shape, plan_consts(node, graph)(1))
    return lambda: np.take(x, idx, axis=axis, out=y, mode="clip")


def _gather(node, inputs):
    axis, idx = _gather_indices(node, inputs[0].shape, inputs[1])
    return [np.take(inputs[0], idx, axis=axis)]


register(OpSpec("Constant", _constant_shapes, _not_planned, _constant))
register(OpSpec("Concat", _concat_shapes, _build_concat, _concat))
register(OpSpec("DepthToSpace", _d2s_shapes, _build_d2s, _d2s))
register(OpSpec("Transpose", lambda n, s, g: [tuple(s[0][p] for p in transpose_perm(n, len(s[0])))],
                _transpose_build,
                lambda n, i: [np.ascontiguousarray(i[0].transpose(transpose_perm(n, i[0].ndim)))]))
register(OpSpec("Expand", lambda n, s, g: [_expand_target(n, s[0], plan_consts(n, g))],
                copy_build(_expanded),
                lambda n, i: [np.broadcast_to(i[0], _expand_target(n, i[0].shape, given(i)))
                              .copy()]))
register(OpSpec("Tile", lambda n, s, g: [tuple(r * d for r, d in
                                                zip(_tile_reps(n, s[0], plan_consts(n, g)), s[0]))],
                _tile_build, lambda n, i: [np.tile(i[0], _tile_reps(n, i[0].shape, given(i)))]))
register(OpSpec("Compress", lambda n, s, g: [_compress_shape(n, s[0], plan_consts(n, g))],
                _compress_build,
                lambda n, i: [np.compress(i[1].astype(bool), i[0], axis=n.attrs.get("axis"))]))
register(OpSpec("Split", _split_shapes, _split_build, _split))
register(OpSpec("Slice", _sliced_shape, _slice_build, _slice))
register(OpSpec("Gather", _gather_shapes, _gather_build, _gather))
