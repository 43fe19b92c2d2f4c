"""Graph rewrites of exporter patterns, on a graph specialised to one input size (its constants
folded, every shape known), before partitioning: each turns a run of nodes into fewer nodes the
native side runs.

* BatchNormalization after a Conv/ConvTranspose it alone reads: folded into its weights and
  bias; elsewhere: one per-channel Mul and Add.
* Decomposed normalisation, as torch.onnx.export writes ``(x - x.mean(d)) / sqrt(x.var(d) +
  eps)`` (U-GAT-IT's ILN/AdaLIN, hand-written LayerNorms): ReduceMean, Sub, Mul or Pow, the
  unbiased variance's constant factor k, Add eps, Sqrt, Div. Over H, W it is one
  InstanceNormalization with scale 1/sqrt(k) and epsilon eps/k; over C, H, W the same on x
  seen as (N, 1, C*H, W) (two Reshapes).
* U-GAT-IT's AdaLIN/ILN: rho * IN(x) + (1 - rho) * LN(x) of two such decomposed norms of one
  x (over H, W and over C, H, W), rho and 1 - rho per-channel constants (any two), then
  optionally * gamma and + beta, per (sample, channel), constants or computed at run time: one
  AdaLIN node (ops/norm.py; fusion adds the Relu after it). Matched from the end of the graph
  first, so the longest chain wins; its norms are then not rewritten on their own. Where it does
  not match (rho computed at run time, other axes, a norm also read elsewhere), each norm is
  still one InstanceNormalization.
* GroupNorm as torch exports it (Reshape to (N, G, -1), InstanceNormalization, Reshape back,
  Mul, Add): the first Reshape gives (N, G, C/G*H, W) instead, so the InstanceNormalization is
  the native 4-D one (same statistics per group); where the Mul and Add are per-channel
  constants, the five nodes become one GroupNormalization with per-channel scale and bias
  (the InstanceNormalization's own folded in), which fusion can give an activation.
* GELU as torch.onnx.export writes it below opset 20, ``x * 0.5 * (1 + erf(x / sqrt 2))`` in
  either order of its products (Div by sqrt 2 or Mul by 1/sqrt 2, Erf, Add 1, Mul by x, Mul by
  0.5): one Gelu node (the vectorised gelu kernel, one pass instead of five); its tanh form,
  ``1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))`` in place of the erf part (torch's
  approximate="tanh", Keras's approximate=True through tf2onnx, x^3 as Pow or two Muls): one
  Gelu with approximate="tanh" (nine nodes).
* Min(Max(x, lo), hi) or Max(Min(x, hi), lo) by scalar constants (tf.clip_by_value): one
  Clip.
* DepthToSpace DCR (TensorFlow's) after a Conv it alone reads, maybe through a valuewise op:
  the Conv's output channels reordered, the node CRD (the native pixel-shuffle kernel).
* A constant zero Pad of H and W only, read by one Conv: the Conv's own pads.
* A Slice by constants, step 1, of the spatial axes of a ConvTranspose's output it alone reads
  (tf2onnx's crop after Keras's "same" Conv2DTranspose): the ConvTranspose's pads.
* A Pad of zeros or a Slice of everything at this size (exports that pad to a multiple and
  crop back, pix2pix's): removed, its readers read its input (a graph output: its input's
  producer writes it).
* A Transpose undoing the Transpose it reads (tf2onnx's NHWC <-> NCHW pairs, and those an NHWC
  network adapted by conventions.py starts and ends with): the second removed, its readers
  reading the first's input; the first too where nothing else reads its result. Then each
  Transpose read only by a valuewise op moves below it (two of an Add's inputs become one; a
  small broadcast operand, an SE block's scale, takes the inverse permutation), and those
  meeting their inverse go too.

Where a pattern does not match exactly, its nodes stay as they are (op by op). Each rewrite is
counted (``Rewrites``); nodes left without readers are dropped. Linear in the node count.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .graph import Node
from .ops.tensor import slice_index, transpose_perm
from .specialise import Placement, Specialised, place

_F32 = np.float32


@dataclasses.dataclass
class Rewrites:
    batchnorm_into_conv: int = 0
    batchnorm_as_affine: int = 0
    norm_pattern: int = 0
    adalin_pattern: int = 0
    groupnorm_pattern: int = 0
    groupnorm_affine: int = 0
    gelu_pattern: int = 0
    clip_pattern: int = 0
    depth_to_space_crd: int = 0
    pad_into_conv: int = 0
    crop_into_conv_transpose: int = 0
    identity_at_size: int = 0
    transpose_pair: int = 0
    transpose_sunk: int = 0

    def items(self):
        return dataclasses.asdict(self).items()


class _Ctx:
    def __init__(self, sp: Specialised):
        self.sp, self.g = sp, sp.graph
        self.consts, self.shapes = sp.graph.consts, sp.shapes
        self.producer = {t: n for n in self.g.nodes for t in n.outputs if t}
        self.readers = _reader_counts(self.g.nodes)
        self.outs = set(self.g.outputs)
        self.fused: dict[str, str] = {}   # source node -> what it became
        self.new: list[Node] = []         # nodes the rewrites made (placed at the end)
        self.replaced: dict = {}          # kept node -> its new Placement (inputs changed)
        self.claimed: set[str] = set()    # nodes a larger pattern took (the others skip them)
        self.k = 0

    def const(self, value, hint: str) -> str:
        self.k += 1
        name = f"{hint}::rewrite{self.k}"
        self.consts[name] = np.asarray(value)
        self.shapes[name] = tuple(np.shape(value))
        return name

    def sole(self, t: str) -> bool:
        return self.readers.get(t, 0) == 1 and t not in self.outs

    def made_by(self, t: str, op: str) -> Node | None:
        n = self.producer.get(t)
        return n if n is not None and n.op == op else None

    def scalar(self, t: str) -> float | None:
        return float(np.asarray(self.consts[t]).reshape(-1)[0]) \
            if _scalar_const(self.consts, t) else None


def rewrite(sp: Specialised) -> Rewrites:
    """Apply the rewrites to ``sp`` in place (nodes, constants, shapes, placements)."""
    # own copies: the nodes are shared with the executor's graph, which other sizes plan from
    sp.graph.nodes = [dataclasses.replace(n, inputs=list(n.inputs), outputs=list(n.outputs),
                                          attrs=dict(n.attrs)) for n in sp.graph.nodes]
    count, fused = Rewrites(), {}
    # pairs first (moving a Transpose could part one), then the moved ones meeting theirs
    sp.graph.nodes = _drop_identities(sp, fused, count)
    sp.graph.nodes, moved = _sink_transposes(sp, fused, count)
    if moved:
        sp.graph.nodes = _drop_identities(sp, fused, count)
    if fused:   # the Transposes left unread: their reads would keep the patterns below off
        sp.graph.nodes = _drop_unread(sp.graph.nodes, set(sp.graph.outputs))
    c = _Ctx(sp)
    c.fused.update(fused)
    c.new += moved
    nodes = sp.graph.nodes
    replaced: dict[int, list[Node]] = {}
    for i in range(len(nodes) - 1, -1, -1):   # from the end: the largest AdaLIN chain first
        if nodes[i].op in ("Add", "Mul") and nodes[i].name not in c.claimed:
            new = _adalin(c, nodes[i], count)
            if new is not None:
                replaced[i] = new
    for i, n in enumerate(nodes):
        new = None
        if i in replaced or n.name in c.claimed:
            continue
        if n.op == "BatchNormalization":
            new = _batchnorm(c, n, count)
        elif n.op == "Div":
            new = _norm_pattern(c, n, count)
        elif n.op == "Conv":
            new = _pad_into_conv(c, n, count)
        elif n.op == "InstanceNormalization":
            _groupnorm(c, n, count)
        elif n.op == "Add":
            new = _groupnorm_affine(c, n, count)
        elif n.op == "Mul":
            new = _gelu_pattern(c, n, count)
        elif n.op in ("Min", "Max"):
            new = _clip_pattern(c, n, count)
        elif n.op == "DepthToSpace":
            new = _depth_to_space_crd(c, n, count)
        elif n.op == "Slice":
            new = _crop_into_conv_transpose(c, n, count)
        if new is not None:
            replaced[i] = new
    if not replaced and not c.replaced and not fused:
        return count
    out: list[Node] = []
    for i, n in enumerate(nodes):
        out.extend(replaced.get(i, [n]))
    sp.graph.nodes = _drop_unread(out, c.outs)
    alive = {n.name for n in sp.graph.nodes}
    new_names = {n.name for n in c.new}
    placements = []
    for pl in sp.placements:
        if pl.where == "folded":
            placements.append(pl)
        elif pl.node in alive:
            placements.append(c.replaced.get(pl.node, pl))
        else:
            placements.append(Placement(pl.node, pl.op, "fused", c.fused.get(
                pl.node, "a rewritten pattern no longer reads it")))
    sp.placements = placements
    for n in sp.graph.nodes:
        if n.name in new_names:
            sp.placements.append(place(sp, n))
    return count


def _drop_identities(sp: Specialised, fused: dict, count: Rewrites) -> list[Node]:
    """The nodes without those whose output equals a value before them (``_same_as``): Pads
    and Slices that copy their input unchanged at this size, a Transpose undoing the Transpose
    it reads. Their readers read that value instead, or, when the node's output is a graph
    output, the value's producer writes the output itself (the value, and the node's input,
    having no other reader; a Transpose left unread is dropped after)."""
    alias: dict[str, str] = {}
    outs, consts, shapes = set(sp.graph.outputs), sp.graph.consts, sp.shapes
    readers = _reader_counts(sp.graph.nodes)
    producer: dict[str, Node] = {}
    kept = []
    for n in sp.graph.nodes:
        n.inputs = [alias.get(t, t) for t in n.inputs]
        src = _same_as(n, consts, shapes, producer)
        if src is not None:
            read, out, made = n.inputs[0], n.outputs[0], producer.get(src)
            if out not in outs:
                alias[out] = src
                readers[read] -= 1
                readers[src] = readers.get(src, 0) + readers.get(out, 0)
            elif made is not None and readers.get(src) == 1 and readers.get(read) == 1 \
                    and src not in outs and read not in outs:
                made.outputs[made.outputs.index(src)] = out
                producer[out] = made
            else:
                kept.append(n)
                continue
            if read == src:
                fused[n.name] = "the identity at this input size"
                count.identity_at_size += 1
            else:
                fused[n.name] = "undoes the Transpose it reads"
                count.transpose_pair += 1
            continue
        kept.append(n)
        producer.update((t, n) for t in n.outputs if t)
    return kept


# Ops acting on each value alone (their other inputs, if any, scalar constants): a Transpose
# before them may go after them instead.
_VALUEWISE = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Elu", "HardSigmoid", "HardSwish", "Clip",
              "Exp", "Log", "Neg", "Abs", "Sqrt", "Reciprocal", "Erf", "Gelu", "Softplus",
              "Floor", "Ceil", "Identity"}
_ELEMENTWISE_2 = {"Add", "Sub", "Mul", "Div", "Pow", "Min", "Max"}


# A broadcast operand of at most this many values may be transposed to let a big Transpose move
# past the op that reads both (_sink_transposes): an SE block's (1, 1, 1, C) scale.
_SMALL_OPERAND = 1 << 12


def _sink_transposes(sp: Specialised, fused: dict, count: Rewrites) -> tuple[list, list]:
    """(nodes, the Transposes made): each Transpose read only by an op acting on each value
    (``_VALUEWISE``; or ``_ELEMENTWISE_2`` whose other input is a scalar constant, the same
    Transpose of a tensor of the same shape, or a small operand broadcast to the output)
    moves below that op, which then reads the Transpose's input: one Transpose fewer for two
    inputs, none more otherwise (a small operand gets the inverse permutation: of at most
    _SMALL_OPERAND values, folded when constant), and one that reaches its inverse goes with it
    (``_drop_identities``). tf2onnx leaves such chains (NHWC Relu, Add, clip, an SE block's
    multiply between NCHW Convs) where its own optimiser gave up."""
    outs, consts, shapes = set(sp.graph.outputs), sp.graph.consts, sp.shapes
    readers = _reader_counts(sp.graph.nodes)
    producer: dict[str, Node] = {}
    kept, made = [], []   # made: the moved Transposes and the small operands' (placed anew)
    for n in sp.graph.nodes:
        firsts, small = _transposed_inputs(n, producer, readers, consts, shapes, outs)
        if not firsts:
            kept.append(n)
            producer.update((t, n) for t in n.outputs if t)
            continue
        perm = transpose_perm(firsts[0], len(shapes[firsts[0].outputs[0]]))
        source = {f.outputs[0]: f.inputs[0] for f in firsts}
        undo = [perm.index(i) for i in range(len(perm))]   # the inverse permutation
        for t in small:   # into the layout the moved Transposes' inputs have
            back = f"{n.name}::{t}::before_transpose"
            shapes[back] = tuple(shapes[t][p] for p in undo)
            sp.dtypes[back] = sp.dtypes.get(t, np.dtype(_F32))
            if t in consts:
                consts[back] = np.ascontiguousarray(np.transpose(consts[t], undo))
            else:
                small_t = Node("Transpose", f"{n.name}::{t}::untransposed", [t], [back],
                               {"perm": undo})
                kept.append(small_t)
                made.append(small_t)
            source[t] = back
        y = n.outputs[0]
        before = f"{y}::before_transpose"
        n.inputs = [source.get(t, t) for t in n.inputs]
        n.outputs = [before]
        shapes[before] = tuple(shapes[y][perm.index(i)] for i in range(len(perm)))
        sp.dtypes[before] = sp.dtypes.get(y, np.dtype(_F32))
        after = Node("Transpose", f"{n.name}::transposed", [before], [y], {"perm": perm})
        for f in firsts:
            fused[f.name] = f"moved below {n.op} {n.name!r}"
        kept += [n, after]
        made.append(after)
        producer[before], producer[y] = n, after
        count.transpose_sunk += 1
    return kept, made


def _scalar_const(consts: dict, t: str) -> bool:
    return t in consts and np.size(consts[t]) == 1


def _transposed_inputs(n: Node, producer, readers, consts, shapes, outs) -> tuple[list, list]:
    """(the Transposes (one perm) ``n`` may read past, the small broadcast operands that then
    take the inverse permutation), or ([], []): ``_sink_transposes``' rule."""
    none = [], []
    if len(n.outputs) != 1 or not n.outputs[0] or shapes.get(n.outputs[0]) is None:
        return none
    rank = len(shapes[n.outputs[0]])
    small = []
    if n.op in _VALUEWISE:
        data, rest = n.inputs[:1], n.inputs[1:]
    elif n.op in _ELEMENTWISE_2 and len(n.inputs) == 2:
        data = [t for t in n.inputs if not _scalar_const(consts, t)]
        rest = [t for t in n.inputs if t not in data]
        firsts = [producer.get(t) for t in data]
        if len(data) == 2 and sum(f is not None and f.op == "Transpose" for f in firsts) == 1:
            # one Transpose and one small operand broadcast to the output (same rank)
            small = [t for t, f in zip(data, firsts) if f is None or f.op != "Transpose"]
            s = shapes.get(small[0])
            if s is None or len(s) != rank or int(np.prod(s)) > _SMALL_OPERAND or \
                    s == shapes[n.outputs[0]]:
                return none
            data = [t for t in data if t not in small]
    else:
        return none
    if any(t and not _scalar_const(consts, t) for t in rest) or not data:
        return none
    firsts = [producer.get(t) for t in data]
    if any(f is None or f.op != "Transpose" or readers.get(t) != 1 or t in outs
           or shapes.get(t) != shapes[n.outputs[0]] for f, t in zip(firsts, data)):
        return none
    if len({tuple(transpose_perm(f, rank)) for f in firsts}) != 1 or len(set(data)) != len(data):
        return none
    return firsts, small


def _same_as(n: Node, consts: dict, shapes: dict, producer: dict) -> str | None:
    """The value ``n``'s output equals, or None: its input for a Pad or Slice copying it whole
    (``_copies_whole``), the input of the Transpose it reads when its own perm undoes that
    one's (the NHWC -> NCHW -> NHWC pairs of tf2onnx exports and of conventions.py's layout
    adapter)."""
    if not n.inputs or not n.outputs:
        return None
    src = n.inputs[0]
    if n.op == "Transpose":
        first = producer.get(src)
        if first is None or first.op != "Transpose" or shapes.get(src) is None:
            return None
        rank = len(shapes[src])
        p, q = transpose_perm(first, rank), transpose_perm(n, rank)
        return first.inputs[0] if [p[i] for i in q] == list(range(rank)) else None
    if shapes.get(n.outputs[0]) is not None and shapes.get(n.outputs[0]) == shapes.get(src) \
            and _copies_whole(n, consts):
        return src
    return None


def _copies_whole(n: Node, consts: dict) -> bool:
    """A Pad of zeros, or a Slice with positive steps keeping the shape (hence everything)."""
    def const(k):
        t = n.inputs[k] if len(n.inputs) > k else ""
        return np.asarray(consts[t]) if t in consts else (None if t else "absent")
    if n.op == "Pad":
        pads = n.attrs.get("pads") if "pads" in n.attrs else const(1)
        return pads is not None and not isinstance(pads, str) and \
            not np.any(np.asarray(pads))
    if n.op == "Slice" and len(n.inputs) >= 3:
        steps = const(4)
        return isinstance(steps, str) or (steps is not None and bool(np.all(steps > 0)))
    return False


def _reader_counts(nodes: list[Node]) -> dict[str, int]:
    """{tensor: how many node inputs read it}."""
    readers: dict[str, int] = {}
    for n in nodes:
        for t in n.inputs:
            if t:
                readers[t] = readers.get(t, 0) + 1
    return readers


def _drop_unread(nodes: list[Node], outs: set) -> list[Node]:
    readers = _reader_counts(nodes)
    keep = [True] * len(nodes)
    for i in range(len(nodes) - 1, -1, -1):
        n = nodes[i]
        if not any(t in outs or readers.get(t, 0) for t in n.outputs if t):
            keep[i] = False
            for t in n.inputs:
                if t:
                    readers[t] -= 1
    return [n for n, k in zip(nodes, keep) if k]


# --- BatchNormalization -------------------------------------------------------------------------

def _batchnorm(c: _Ctx, n: Node, count: Rewrites):
    x = n.inputs[0]
    params = [c.consts.get(t) for t in n.inputs[1:5]]
    if any(p is None for p in params) or len(c.shapes.get(x, ())) < 2 \
            or n.attrs.get("training_mode", 0) or (len(n.outputs) > 1 and any(n.outputs[1:])):
        return None
    scale, bias, mean, var = (np.asarray(p, np.float64).reshape(-1) for p in params)
    a = scale / np.sqrt(var + float(n.attrs.get("epsilon", 1e-5)))
    b = bias - mean * a
    conv = c.producer.get(x)
    if conv is not None and conv.op in ("Conv", "ConvTranspose") and c.sole(x) \
            and conv.inputs[1] in c.consts and (len(conv.inputs) < 3 or not conv.inputs[2]
                                                 or conv.inputs[2] in c.consts):
        w = np.asarray(c.consts[conv.inputs[1]], np.float64)
        cout = w.shape[0] if conv.op == "Conv" else w.shape[1] * conv.attrs.get("group", 1)
        if a.size == cout:
            if conv.op == "Conv":
                w = w * a[:, None, None, None]
            else:   # (Cin, Cout/g, kh, kw): output channel o = group * Cout/g + j
                g, per = conv.attrs.get("group", 1), w.shape[1]
                w = (w.reshape(g, -1, per, *w.shape[2:])
                     * a.reshape(g, 1, per, 1, 1)).reshape(w.shape)
            b0 = np.asarray(c.consts[conv.inputs[2]], np.float64) \
                if len(conv.inputs) > 2 and conv.inputs[2] else 0.0
            conv.inputs = [conv.inputs[0], c.const(w.astype(_F32), conv.name + "/w"),
                           c.const((b0 * a + b).astype(_F32), conv.name + "/b")]
            conv.outputs = list(n.outputs[:1])
            c.producer[n.outputs[0]] = conv
            c.fused[n.name] = f"folded into {conv.op} {conv.name!r}"
            count.batchnorm_into_conv += 1
            return []
    rank = len(c.shapes[x])
    shape = (a.size,) + (1,) * (rank - 2)
    mid = n.outputs[0] + "::scaled"
    mul = Node("Mul", n.name + "/scale", [x, c.const(a.astype(_F32).reshape(shape), n.name)],
               [mid], {})
    add = Node("Add", n.name + "/shift", [mid, c.const(b.astype(_F32).reshape(shape), n.name)],
               [n.outputs[0]], {})
    c.new += [mul, add]
    c.fused[n.name] = "as a per-channel Mul and Add"
    count.batchnorm_as_affine += 1
    return [mul, add]


# --- decomposed normalisation -------------------------------------------------------------------

def _axes(c: _Ctx, r: Node, rank: int):
    axes = r.attrs.get("axes")
    if axes is None and len(r.inputs) > 1 and r.inputs[1] in c.consts:
        axes = np.asarray(c.consts[r.inputs[1]]).reshape(-1).tolist()
    if axes is None or not r.attrs.get("keepdims", 1):
        return None
    return tuple(sorted(int(a) % rank for a in axes))


def _mean_of(c: _Ctx, t: str, x: str | None, rank: int):
    """(x, axes) when tensor t is ReduceMean(x, axes, keepdims=1) (x given: that x)."""
    r = c.made_by(t, "ReduceMean")
    if r is None or (x is not None and r.inputs[0] != x):
        return None
    axes = _axes(c, r, rank)
    return (r.inputs[0], axes) if axes is not None else None


@dataclasses.dataclass
class _Norm:
    """A decomposed normalisation (x - mean) / sqrt(k * var + eps) over ``axes``, var biased:
    (x - mean) / sqrt(var + eps / k) / sqrt(k). ``nodes``: those it is made of up to its Div."""
    x: str
    axes: tuple
    k: float
    eps: float
    nodes: tuple

    @property
    def scale(self) -> float:
        return 1 / np.sqrt(self.k)

    @property
    def epsilon(self) -> float:
        return self.eps / self.k


def _match_norm(c: _Ctx, div: Node) -> _Norm | None:
    num, den = div.inputs[:2]
    sub = c.made_by(num, "Sub")
    sqrt = c.made_by(den, "Sqrt")
    if sub is None or sqrt is None or not c.sole(den):
        return None
    x = sub.inputs[0]
    rank = len(c.shapes.get(x, ()))
    if rank != 4:
        return None
    mean = _mean_of(c, sub.inputs[1], x, rank)
    add = c.made_by(sqrt.inputs[0], "Add")
    if mean is None or add is None:
        return None
    axes = mean[1]
    eps_at = [k for k in (0, 1) if c.scalar(add.inputs[k]) is not None]
    if len(eps_at) != 1:
        return None
    eps, t = c.scalar(add.inputs[eps_at[0]]), add.inputs[1 - eps_at[0]]
    k = 1.0   # the variance's constant factor (n / (n - 1) for torch.var): Mul/Div by scalars
    while True:
        m = c.producer.get(t)
        if m is None or m.op not in ("Mul", "Div"):
            break
        s = c.scalar(m.inputs[1])
        if s is None and m.op == "Mul":
            s, first = c.scalar(m.inputs[0]), m.inputs[1]
        else:
            first = m.inputs[0]
        if s is None or s == 0:
            break
        k, t = (k * s if m.op == "Mul" else k / s), first
    var = _mean_of(c, t, None, rank)
    if var is None or var[1] != axes:
        return None
    sq = c.producer.get(var[0])
    if sq is None or not ((sq.op == "Mul" and sq.inputs[0] == sq.inputs[1])
                          or (sq.op == "Pow" and c.scalar(sq.inputs[1]) == 2.0)):
        return None
    d = c.made_by(sq.inputs[0], "Sub")
    if d is None or d.inputs[0] != x or _mean_of(c, d.inputs[1], x, rank) is None \
            or _mean_of(c, d.inputs[1], x, rank)[1] != axes or not 0 < k < np.inf \
            or not eps > 0:
        return None
    return _Norm(x, axes, k, eps, (div, sub, sqrt, add, d, sq))


def _norm_pattern(c: _Ctx, div: Node, count: Rewrites):
    norm = _match_norm(c, div)
    if norm is None or norm.axes not in ((2, 3), (1, 2, 3)):
        return None
    x = norm.x
    n, ch, h, w = c.shapes[x]
    groups = ch if norm.axes == (2, 3) else 1
    scale = c.const(np.full(groups, norm.scale, _F32), div.name + "/scale")
    bias = c.const(np.zeros(groups, _F32), div.name + "/bias")
    attrs = {"epsilon": float(norm.epsilon)}
    if groups == ch:
        new = [Node("InstanceNormalization", div.name + "/instnorm", [x, scale, bias],
                    list(div.outputs), attrs)]
    else:   # over C, H, W: x as (N, 1, C*H, W)
        flat, normed = div.outputs[0] + "::flat", div.outputs[0] + "::normed"
        new = [Node("Reshape", div.name + "/flat",
                    [x, c.const(np.array([n, 1, ch * h, w], np.int64), div.name)], [flat], {}),
               Node("InstanceNormalization", div.name + "/instnorm", [flat, scale, bias],
                    [normed], attrs),
               Node("Reshape", div.name + "/back",
                    [normed, c.const(np.array([n, ch, h, w], np.int64), div.name)],
                    list(div.outputs), {})]
    c.new += new
    for m in norm.nodes:
        c.fused.setdefault(m.name, f"into InstanceNormalization {div.name + '/instnorm'!r}")
    count.norm_pattern += 1
    return new


# --- AdaLIN -------------------------------------------------------------------------------------

def _mix(c: _Ctx, add: Node):
    """(x, in_weight, ln_weight, instance _Norm, layer _Norm, nodes) when ``add`` is
    Mul(IN(x), w_in) + Mul(LN(x), w_ln) (either order, either operand order), IN over H, W and
    LN over C, H, W of the same x, the weights per-channel constants, every tensor in between
    read only there; the weights carry the norms' 1/sqrt(k)."""
    if add.op != "Add":
        return None
    terms = []
    for t in add.inputs[:2]:
        mul = c.made_by(t, "Mul") if c.sole(t) else None
        if mul is None:
            return None
        for j in (0, 1):
            div = c.made_by(mul.inputs[j], "Div") if c.sole(mul.inputs[j]) else None
            norm = div and _match_norm(c, div)
            if norm:
                terms.append((norm, mul.inputs[1 - j], mul))
                break
        else:
            return None
    terms.sort(key=lambda term: len(term[0].axes))
    (inorm, wi, mi), (lnorm, wl, ml) = terms
    if inorm.x != lnorm.x or (inorm.axes, lnorm.axes) != ((2, 3), (1, 2, 3)):
        return None
    ch = c.shapes[inorm.x][1]
    wi, wl = _channel_vector(c, wi, ch), _channel_vector(c, wl, ch)
    if wi is None or wl is None:
        return None
    return (inorm.x, wi * inorm.scale, wl * lnorm.scale, inorm, lnorm,
            inorm.nodes + lnorm.nodes + (mi, ml, add))


def _per_plane_operand(c: _Ctx, t: str, x_shape: tuple) -> bool:
    """Tensor t (constant or float32 at run time) broadcasts to (N, C, 1, 1) of x (N, C, H, W)."""
    shape = np.shape(c.consts[t]) if t in c.consts else c.shapes.get(t)
    if shape is None or len(shape) > 4 or (t not in c.consts and
                                           c.sp.dtypes.get(t) != np.dtype(_F32)):
        return False
    target = (x_shape[0], x_shape[1], 1, 1)
    try:
        return tuple(np.broadcast_shapes(shape, target)) == target
    except ValueError:
        return False


def _adalin_chain(c: _Ctx, node: Node, roles: tuple):
    """(mix, {role: (tensor, node)}) when ``node`` is the mix, or ``roles`` (outermost first:
    "beta" an Add, "gamma" a Mul, by per-(sample, channel) operands) wrap it."""
    mix = _mix(c, node)
    if mix is not None:
        return mix, {}
    for i, role in enumerate(roles):
        if node.op != ("Add" if role == "beta" else "Mul"):
            continue
        for k in (0, 1):
            inner = c.producer.get(node.inputs[k]) if c.sole(node.inputs[k]) else None
            got = inner and _adalin_chain(c, inner, roles[i + 1:])
            if got and _per_plane_operand(c, node.inputs[1 - k], c.shapes[got[0][0]]):
                got[1][role] = (node.inputs[1 - k], node)
                return got
    return None


def _adalin(c: _Ctx, end: Node, count: Rewrites):
    """U-GAT-IT's AdaLIN/ILN ending at ``end``: the mix of a decomposed instance norm and layer
    norm of one x by per-channel constants (rho, 1 - rho), optionally * gamma, + beta (constants
    or run-time, per sample and channel), as one AdaLIN node (ops/norm.py)."""
    got = _adalin_chain(c, end, ("beta", "gamma"))
    if got is None:
        return None
    (x, wi, wl, inorm, lnorm, nodes), roles = got
    name = end.name + "/adalin"
    node = Node("AdaLIN", name, [x, c.const(wi.astype(_F32), name + "/in_weight"),
                                 c.const(wl.astype(_F32), name + "/ln_weight"),
                                 roles.get("gamma", ("",))[0], roles.get("beta", ("",))[0]],
                list(end.outputs), {"in_epsilon": float(inorm.epsilon),
                                    "ln_epsilon": float(lnorm.epsilon)})
    c.new.append(node)
    for m in nodes + tuple(n for _, n in roles.values()):
        c.fused.setdefault(m.name, f"into AdaLIN {name!r}")
        c.claimed.add(m.name)
    count.adalin_pattern += 1
    return [node]


# --- GroupNorm ----------------------------------------------------------------------------------

def _groupnorm(c: _Ctx, inorm: Node, count: Rewrites) -> None:
    r1 = c.made_by(inorm.inputs[0], "Reshape")
    if r1 is None or not c.sole(inorm.inputs[0]) or r1.inputs[1] not in c.consts:
        return
    x = r1.inputs[0]
    xs, ys = c.shapes.get(x, ()), c.shapes.get(inorm.inputs[0], ())
    if len(xs) != 4 or len(ys) != 3 or ys[0] != xs[0] or xs[1] % ys[1]:
        return
    n, ch, h, w = xs
    g = ys[1]
    target = (n, g, ch // g * h, w)
    r1.inputs = [x, c.const(np.array(target, np.int64), r1.name)]
    c.shapes[inorm.inputs[0]] = c.shapes[inorm.outputs[0]] = target
    for node in (r1, inorm):
        c.replaced[node.name] = place(c.sp, node)
    count.groupnorm_pattern += 1


def _channel_vector(c: _Ctx, t: str, channels: int):
    """A constant broadcasting along C only of an NCHW tensor, as (channels,) float64."""
    v = c.consts.get(t)
    if v is None or np.ndim(v) > 4 or np.size(v) not in (1, channels):
        return None
    shape = (1,) * (4 - np.ndim(v)) + np.shape(v)
    if shape[0] != 1 or shape[2:] != (1, 1):
        return None
    return np.broadcast_to(np.asarray(v, np.float64).reshape(-1), (channels,))


def _groupnorm_affine(c: _Ctx, add: Node, count: Rewrites):
    """Reshape -> InstanceNormalization -> Reshape back -> Mul -> Add (after _groupnorm made the
    first Reshape 4-D) as one GroupNormalization with per-channel scale and bias."""
    mul = c.made_by(add.inputs[0], "Mul")
    r2 = mul and c.made_by(mul.inputs[0], "Reshape")
    inorm = r2 and c.made_by(r2.inputs[0], "InstanceNormalization")
    r1 = inorm and c.made_by(inorm.inputs[0], "Reshape")
    if r1 is None or not all(c.sole(t) for t in (add.inputs[0], mul.inputs[0], r2.inputs[0],
                                                 inorm.inputs[0])):
        return None
    x = r1.inputs[0]
    xs, gs = c.shapes.get(x, ()), c.shapes.get(inorm.inputs[0], ())
    if len(xs) != 4 or len(gs) != 4 or c.shapes.get(add.outputs[0]) != xs \
            or gs != (xs[0], gs[1], xs[1] // gs[1] * xs[2], xs[3]):
        return None
    ch, g = xs[1], gs[1]
    gamma, beta = _channel_vector(c, mul.inputs[1], ch), _channel_vector(c, add.inputs[1], ch)
    sc, b = (c.consts.get(t) for t in inorm.inputs[1:3])
    if gamma is None or beta is None or sc is None or b is None or np.size(sc) != g \
            or np.size(b) != g:
        return None
    sc = np.repeat(np.asarray(sc, np.float64).reshape(-1), ch // g)
    b = np.repeat(np.asarray(b, np.float64).reshape(-1), ch // g)
    node = Node("GroupNormalization", add.name + "/groupnorm",
                [x, c.const((sc * gamma).astype(_F32), add.name + "/scale"),
                 c.const((b * gamma + beta).astype(_F32), add.name + "/bias")],
                list(add.outputs), {"num_groups": g,
                                    "epsilon": float(inorm.attrs.get("epsilon", 1e-5))})
    c.new.append(node)
    for m in (r1, inorm, r2, mul, add):
        c.fused.setdefault(m.name, f"into GroupNormalization {node.name!r}")
    count.groupnorm_affine += 1
    return [node]


# --- GELU ----------------------------------------------------------------------------------------

def _is(value: float | None, want: float) -> bool:
    return value is not None and abs(value - want) <= 1e-6 * abs(want)


def _other(c: _Ctx, n: Node, want: float) -> str | None:
    """The input of binary node n beside its scalar constant ``want`` (either side)."""
    for k in (0, 1):
        if _is(c.scalar(n.inputs[k]), want):
            return n.inputs[1 - k]
    return None


def _erf_part(c: _Ctx, t: str):
    """t = 1 + erf(x / sqrt 2) (or x * sqrt(1/2)), each inner tensor read once: (x, its
    nodes), or None."""
    add = c.made_by(t, "Add")
    e = add and c.sole(t) and _other(c, add, 1.0)
    erf = e and c.sole(e) and c.made_by(e, "Erf")
    d = erf and c.sole(erf.inputs[0]) and c.producer.get(erf.inputs[0])
    if not d:
        return None
    if d.op == "Div" and _is(c.scalar(d.inputs[1]), np.sqrt(2)):
        x = d.inputs[0]
    elif d.op == "Mul":
        x = _other(c, d, np.sqrt(0.5))
    else:
        x = None
    return (x, (d, erf, add)) if x else None


def _cube_of(c: _Ctx, t: str, x: str):
    """The nodes making t = x^3 (Pow(x, 3), x * (x * x) or (x * x) * x, each inner tensor read
    once), or None."""
    n = c.producer.get(t)
    if n is None:
        return None
    if n.op == "Pow":
        return (n,) if n.inputs[0] == x and _is(c.scalar(n.inputs[1]), 3.0) else None
    if n.op != "Mul":
        return None
    for k in (0, 1):
        sq = c.made_by(n.inputs[k], "Mul")
        if n.inputs[1 - k] == x and sq and c.sole(n.inputs[k]) and sq.inputs == [x, x]:
            return sq, n
    return None


def _tanh_part(c: _Ctx, t: str):
    """t = 1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)) (tanh-GELU as torch writes it for
    approximate="tanh" and tf2onnx for Keras's approximate=True), each inner tensor read once:
    (x, its nodes), or None."""
    add = c.made_by(t, "Add")
    th = add and c.sole(t) and _other(c, add, 1.0)
    tanh = th and c.sole(th) and c.made_by(th, "Tanh")
    scaled = tanh and c.sole(tanh.inputs[0]) and c.made_by(tanh.inputs[0], "Mul")
    s = scaled and _other(c, scaled, np.sqrt(2 / np.pi))
    poly = s and c.sole(s) and c.made_by(s, "Add")
    if not poly:
        return None
    for k in (0, 1):
        x, term = poly.inputs[k], poly.inputs[1 - k]
        m = c.made_by(term, "Mul") if c.sole(term) else None
        cube = m and _other(c, m, 0.044715)
        nodes = cube and c.sole(cube) and _cube_of(c, cube, x)
        if nodes:
            return x, nodes + (m, poly, scaled, tanh, add)
    return None


def _gelu_pattern(c: _Ctx, end: Node, count: Rewrites):
    """end = (x * (1 + f)) * 0.5 or (x * 0.5) * (1 + f), each product in either order, with
    1 + f = 1 + erf(x / sqrt 2) (_erf_part) or 1 + tanh(...) (_tanh_part): one Gelu, its
    approximate attribute "none" or "tanh"."""
    found = None
    half_of = _other(c, end, 0.5)
    inner = half_of and c.sole(half_of) and c.made_by(half_of, "Mul")
    for part, form in ((_erf_part, "none"), (_tanh_part, "tanh")):
        for k in (0, 1):
            if found is None and inner:   # (x * (1 + f)) * 0.5
                e = part(c, inner.inputs[k])
                if e and e[0] == inner.inputs[1 - k]:
                    found = e[0], e[1] + (inner,), form
            half = c.made_by(end.inputs[1 - k], "Mul")
            if found is None and half and c.sole(end.inputs[1 - k]):   # (x * 0.5) * (1 + f)
                e = part(c, end.inputs[k])
                if e and _other(c, half, 0.5) == e[0]:
                    found = e[0], e[1] + (half,), form
    if found is None or c.shapes.get(found[0]) != c.shapes.get(end.outputs[0]):
        return None
    x, nodes, form = found
    node = Node("Gelu", end.name + "/gelu", [x], list(end.outputs), {"approximate": form})
    c.new.append(node)
    for m in nodes + (end,):
        c.fused.setdefault(m.name, f"into Gelu {node.name!r}")
    count.gelu_pattern += 1
    return [node]


# --- Min and Max by constants: Clip ------------------------------------------------------------

def _clip_pattern(c: _Ctx, outer: Node, count: Rewrites):
    """Min(Max(x, lo), hi) or Max(Min(x, hi), lo), lo <= hi scalar constants, the inner result
    read once (tf.clip_by_value through tf2onnx): one Clip, one pass instead of two (it is not
    fused into a Conv's epilogue, which takes Relu, LeakyRelu and SiLU only)."""
    inner_op = "Max" if outer.op == "Min" else "Min"
    if len(outer.inputs) != 2:   # Min and Max take 1 to n inputs
        return None
    for k in (0, 1):
        bound, inner = c.scalar(outer.inputs[1 - k]), c.made_by(outer.inputs[k], inner_op)
        if bound is None or inner is None or not c.sole(outer.inputs[k]) \
                or len(inner.inputs) != 2:
            continue
        for j in (0, 1):
            other, x = c.scalar(inner.inputs[1 - j]), inner.inputs[j]
            if other is None or c.shapes.get(x) != c.shapes.get(outer.outputs[0]) \
                    or c.sp.dtypes.get(x, np.dtype(_F32)) != np.dtype(_F32):
                continue
            lo, hi = (other, bound) if outer.op == "Min" else (bound, other)
            if lo > hi:
                continue
            node = Node("Clip", outer.name + "/clip", [x, c.const(np.float32(lo), "clip_lo"),
                                                        c.const(np.float32(hi), "clip_hi")],
                        list(outer.outputs), {})
            c.new.append(node)
            for m in (inner, outer):
                c.fused.setdefault(m.name, f"into Clip {node.name!r}")
            count.clip_pattern += 1
            return [node]
    return None


# --- DepthToSpace DCR after a Conv: CRD ------------------------------------------------------


def _depth_to_space_crd(c: _Ctx, n: Node, count: Rewrites):
    """DepthToSpace in DCR mode (TensorFlow's depth_to_space) of what a Conv (group 1, constant
    weights and bias) alone makes, maybe through one op acting on each value (``_VALUEWISE``): the
    Conv's output channels reordered so that the node is CRD, PixelShuffle's order, run by the
    native pixel_shuffle kernel (DCR was a strided numpy copy)."""
    if n.attrs.get("mode", "DCR") != "DCR" or not c.sole(n.inputs[0]):
        return None
    t = n.inputs[0]
    act = c.producer.get(t)
    if act is not None and act.op in _VALUEWISE and \
            all(_scalar_const(c.consts, s) for s in act.inputs[1:] if s):   # commutes with it
        t = act.inputs[0]
        if not c.sole(t):
            return None
    conv = c.made_by(t, "Conv")
    if conv is None or conv.attrs.get("group", 1) != 1 or conv.inputs[1] not in c.consts \
            or (len(conv.inputs) > 2 and conv.inputs[2] and conv.inputs[2] not in c.consts):
        return None
    r = int(n.attrs["blocksize"])
    w = np.asarray(c.consts[conv.inputs[1]])
    if w.shape[0] % (r * r):
        return None
    # CRD channel ch * r * r + s (s = i * r + j) takes DCR channel s * C + ch
    order = np.arange(w.shape[0]).reshape(r * r, -1).T.reshape(-1)
    conv.inputs = [conv.inputs[0], c.const(w[order], conv.name + "/w_crd")] + (
        [c.const(np.asarray(c.consts[conv.inputs[2]])[order], conv.name + "/b_crd")]
        if len(conv.inputs) > 2 and conv.inputs[2] else [])
    n.attrs = dict(n.attrs, mode="CRD")
    count.depth_to_space_crd += 1
    return [n]


# --- Pad into Conv ------------------------------------------------------------------------------

def _crop_into_conv_transpose(c: _Ctx, sl: Node, count: Rewrites):
    """A Slice by constants, step 1, of the spatial axes of a ConvTranspose's output it alone
    reads (tf2onnx's crop after a Keras "same" Conv2DTranspose: 258 -> 256) into the
    ConvTranspose's pads, grown by what it cuts on each side: one pass (its output written
    cropped) instead of two. [] (the Slice goes) or None."""
    ct = c.made_by(sl.inputs[0], "ConvTranspose")
    shape = c.shapes.get(sl.inputs[0])
    if ct is None or not c.sole(sl.inputs[0]) or shape is None or "output_shape" in ct.attrs \
            or ct.attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "") \
            or any(t not in c.consts for t in sl.inputs[1:] if t):
        return None
    given = {k: np.asarray(c.consts[t]) for k, t in enumerate(sl.inputs) if k and t}
    try:
        index = slice_index(sl, shape, given.get)
    except ValueError:
        return None
    spans = [s.indices(d) for s, d in zip(index, shape)]
    if any(step != 1 or b <= a for a, b, step in spans) or \
            any((a, b) != (0, d) for (a, b, _), d in zip(spans[:2], shape[:2])):
        return None
    sp = len(shape) - 2
    pads = [int(v) for v in ct.attrs.get("pads") or [0] * 2 * sp]
    ct.attrs = dict(ct.attrs, pads=[p + a for p, (a, _, _) in zip(pads[:sp], spans[2:])]
                    + [p + d - b for p, (_, b, _), d in zip(pads[sp:], spans[2:], shape[2:])])
    ct.outputs = list(sl.outputs)
    c.producer[sl.outputs[0]] = ct
    c.fused[sl.name] = f"into ConvTranspose {ct.name!r}'s pads"
    count.crop_into_conv_transpose += 1
    return []


def _pad_into_conv(c: _Ctx, conv: Node, count: Rewrites):
    pad = c.made_by(conv.inputs[0], "Pad")
    if pad is None or not c.sole(conv.inputs[0]) or pad.attrs.get("mode", "constant") \
            != "constant" or conv.attrs.get("auto_pad", "NOTSET") not in ("NOTSET", ""):
        return None
    if len(pad.inputs) > 1 and pad.inputs[1]:
        pads = c.consts.get(pad.inputs[1])
    else:
        pads = pad.attrs.get("pads")
    value = c.scalar(pad.inputs[2]) if len(pad.inputs) > 2 and pad.inputs[2] else \
        float(pad.attrs.get("value", 0.0))
    if pads is None or value != 0.0 or (len(pad.inputs) > 3 and pad.inputs[3]):
        return None
    p = [int(v) for v in np.asarray(pads).reshape(-1)]
    if len(p) != 8 or any(p[i] for i in (0, 1, 4, 5)) or min(p) < 0:
        return None
    own = list(conv.attrs.get("pads") or [0, 0, 0, 0])
    conv.attrs = dict(conv.attrs, pads=[own[0] + p[2], own[1] + p[3], own[2] + p[6],
                                        own[3] + p[7]])
    conv.inputs = [pad.inputs[0]] + conv.inputs[1:]
    c.fused[pad.name] = f"into Conv {conv.name!r}'s pads"
    count.pad_into_conv += 1
    return [conv]
