"""Graph pieces for networks that hold statistics of their whole input: InstanceNormalization
normalises each channel by its mean and variance over the whole picture, and a ReduceMean over
H and W (a gate's or a squeeze-excite's global pooling, a decomposed norm's mean) averages it,
so a network run on a tile differs from the same network run on the whole picture everywhere,
not only near the cut.

Tiled conversion (picture/tiling.py) cuts such a graph before each of those nodes (``pieces``):
piece k runs the nodes from the k-th up to the next, taking the values live at its first cut
and giving those live at its last. Between two pieces the tiles' values at the cut give the
next node's whole-picture mean and variance, and piece k+1 then runs with them fixed
(``piece_graph``: a norm becomes y = x * a + b, a = scale / sqrt(var + epsilon), b = B - mean
* a; a mean becomes that constant). Each node runs once per tile, whatever the number of cuts.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .graph import node_name


@dataclasses.dataclass(frozen=True)
class Norm:
    """A node of a graph whose result is a statistic of its whole NCHW input: an
    InstanceNormalization (scale, bias, epsilon) or a mean over H and W keeping its dimensions
    (ReduceMean, GlobalAveragePool: none of them). Its position, input tensor and op."""
    index: int          # in the graph's node list (topological order)
    input: str
    op: str             # the node's op_type
    scale: np.ndarray | None = None   # (C,), InstanceNormalization's
    bias: np.ndarray | None = None    # (C,), InstanceNormalization's
    epsilon: float = 0.0


@dataclasses.dataclass(frozen=True)
class Piece:
    """Nodes [start, stop) of a graph. inputs: the values they read that come from before
    ``start`` (graph inputs or earlier nodes' outputs); outputs: those they make that are read
    at or after ``stop`` or are graph outputs; live: every value live at ``stop`` (the outputs
    and the live values passed through from before ``start``), in graph order. norm: the
    statistic node at ``start`` (``statistic_nodes``; fixed in ``piece_graph``).
    types: {input or output: (ONNX element type, rank)}."""
    start: int
    stop: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    live: tuple[str, ...]
    norm: Norm | None
    types: dict = dataclasses.field(repr=False, compare=False)


def load(path) -> object:
    """The onnx.ModelProto of ``path``."""
    import onnx
    return onnx.load(str(path))


def statistic_nodes(proto, types: dict | None = None,
                    sized: dict | None = None) -> tuple[list[Norm], dict[str, str]]:
    """The graph's nodes whose whole-picture statistics can be fixed, in topological order:
    InstanceNormalization with scale and B constant (initializers or Constant nodes) and
    ReduceMean over H and W (``_spatial_mean``), of an NCHW input (rank 4, so a tile's core
    can be cut out of it), in a graph of any input size. And {node name: why not} for the
    InstanceNormalization nodes that cannot be (e.g. a GroupNorm exported as a reshape to
    (N, G, C/G*H*W) around the norm). types: ``value_types(proto)``, sized:
    ``picture_sized(proto)`` (each computed when not given)."""
    from onnx import numpy_helper
    types = value_types(proto) if types is None else types
    consts = constants(proto)
    sized = picture_sized(proto) if sized is None else sized
    sizes = [[d.dim_value for d in vi.type.tensor_type.shape.dim]
             for vi in proto.graph.input if vi.name not in consts]
    fixed = any(len(dims) == 4 and dims[2] > 0 and dims[3] > 0 for dims in sizes)
    norms, skipped = [], {}
    for i, node in enumerate(proto.graph.node):
        mean = _spatial_mean(node, sized, consts)
        if not mean and node.op_type != "InstanceNormalization":
            continue
        rank = types.get(node.input[0], (None, None))[1]
        name = node_name(node, i)
        if fixed:   # model/fit.py resizes or tiles a picture to it around the whole graph
            skipped[name] = "the graph takes a fixed H x W"
        elif mean:
            norms.append(Norm(i, node.input[0], node.op_type))
        elif node.input[1] not in consts or node.input[2] not in consts:
            skipped[name] = "its scale or B is computed, not a constant"
        elif rank != 4:
            skipped[name] = (f"it normalises a tensor of rank {rank}, not an NCHW picture"
                             if rank is not None else "its input's rank is unknown")
        else:
            eps = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-5)
            norms.append(Norm(i, node.input[0], node.op_type,
                              numpy_helper.to_array(consts[node.input[1]]),
                              numpy_helper.to_array(consts[node.input[2]]), float(eps)))
    return norms, skipped


# Ops whose result at a pixel depends on values at other pixels along the axes they reduce or
# normalise over: (op, the axes of their first input, given its rank and the node).
def _reduced_axes(node, rank: int, consts: dict) -> list[int] | None:
    """The axes ``node`` reduces or normalises over (None: not such a node, or axes computed at
    run time); consts: ``constants`` (a Reduce's axes input from opset 18, read alone)."""
    from onnx import numpy_helper
    attrs = {a.name: a for a in node.attribute}

    def ints(name, default):
        return list(attrs[name].ints) if name in attrs else default

    def one(name, default):
        return int(attrs[name].i) if name in attrs else default

    op = node.op_type
    if op.startswith("Reduce"):
        axes = ints("axes", None)
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = consts.get(node.input[1])
            if axes is None:
                return None   # computed at run time: cannot tell
            axes = [int(v) for v in numpy_helper.to_array(axes).reshape(-1)]
        if not axes:
            return [] if one("noop_with_empty_axes", 0) else list(range(rank))
        return axes
    if op in ("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "GroupNormalization"):
        return list(range(2, rank))
    if op == "MeanVarianceNormalization":
        return ints("axes", [0, 2, 3])
    if op == "LayerNormalization":
        return list(range(one("axis", -1) % rank, rank))
    if op in ("Softmax", "LogSoftmax", "Hardmax"):
        return [one("axis", -1)]
    return None


def constants(proto) -> dict:
    """{name: TensorProto} of the graph's initializers and Constant nodes' values."""
    consts = {t.name: t for t in proto.graph.initializer}
    consts.update((node.output[0], a.t) for node in proto.graph.node
                  if node.op_type == "Constant" for a in node.attribute if a.name == "value")
    return consts


def picture_sized(proto) -> dict[str, list[bool]]:
    """{value: per axis, whether its length follows the picture's} of every value whose shape
    ONNX shape inference tells at two input sizes (64 x 80 and 96 x 112) of the graph's one
    NCHW input; {} when it cannot."""
    import onnx
    g = proto.graph
    consts = constants(proto)
    inputs = [vi for vi in g.input if vi.name not in consts]
    if len(inputs) != 1 or len(inputs[0].type.tensor_type.shape.dim) != 4:
        return {}
    shapes = []
    for h, w in ((64, 80), (96, 112)):
        m = onnx.ModelProto()
        m.CopyFrom(proto)
        dims = next(vi for vi in m.graph.input if vi.name == inputs[0].name)
        dims = dims.type.tensor_type.shape.dim
        for d, v in zip(dims, (1, dims[1].dim_value or 3, h, w)):
            d.Clear()
            d.dim_value = v
        try:
            inferred = onnx.shape_inference.infer_shapes(m, data_prop=True).graph
        except Exception:  # noqa: BLE001  (inference is a hint: nothing known)
            return {}
        shapes.append({vi.name: [d.dim_value if d.HasField("dim_value") else None
                                 for d in vi.type.tensor_type.shape.dim]
                       for vi in (*inferred.input, *inferred.value_info, *inferred.output)})
    return {t: [x != y for x, y in zip(a, shapes[1][t])] for t, a in shapes[0].items()
            if t in shapes[1] and len(a) == len(shapes[1][t]) and None not in a
            and None not in shapes[1][t]}


def picture_wide_nodes(proto, fixable=(), sized: dict | None = None) -> dict[str, str]:
    """{node name: why} of the nodes that reduce or normalise over an axis whose length
    follows the picture's size (``picture_sized``), other than InstanceNormalization
    (``statistic_nodes``' to judge) and those at the indices ``fixable`` (``statistic_nodes``'
    Norm.index): statistics of the whole picture that a tile computes over itself alone
    (tf2onnx's GroupNorm and LayerNorm as NHWC ReduceMean chains, attention over pixels). A
    node whose input's shape inference cannot tell is not listed. sized: ``picture_sized``
    (computed when not given)."""
    consts = constants(proto)
    sized = picture_sized(proto) if sized is None else sized
    found = {}
    for i, node in enumerate(proto.graph.node):
        if node.op_type == "InstanceNormalization" or not node.input or i in fixable:
            continue
        follows = sized.get(node.input[0])
        axes = _reduced_axes(node, len(follows), consts) if follows else None
        if axes and any(follows[k % len(follows)] for k in axes):
            found[node_name(node, i)] = f"{node.op_type} over picture-sized axes"
    return found


def _spatial_mean(node, sized: dict, consts: dict) -> bool:
    """A GlobalAveragePool, or a ReduceMean over axes 2 and 3 exactly keeping dimensions, of a
    rank-4 tensor whose axes 2 and 3 follow the picture's size and 0 and 1 do not (an NCHW
    map, ``picture_sized``; not an NHWC one or attention's (N, heads, pixels, d)): its result
    is the per-channel mean (N, C, 1, 1) that tiles can be given. consts: ``constants`` (the
    axes input from opset 18)."""
    if node.op_type not in ("ReduceMean", "GlobalAveragePool") \
            or sized.get(node.input[0]) != [False, False, True, True]:
        return False
    if any(a.name == "keepdims" and a.i == 0 for a in node.attribute):
        return False
    # a GlobalAveragePool (torch's AdaptiveAvgPool2d(1)) reduces axes 2 and 3 too
    axes = _reduced_axes(node, 4, consts)
    return axes is not None and sorted(a % 4 for a in axes) == [2, 3]


def pieces(proto, norms: list[Norm] | None = None, types: dict | None = None) -> list[Piece]:
    """``proto``'s nodes cut before each node whose statistics can be fixed (``norms``,
    default ``statistic_nodes``): [0, n1), [n1, n2), ..., [nk, end) (no empty first piece
    when n1 = 0). The last piece's ``live`` are the graph's outputs. Constants (initializers,
    Constant nodes' values) never cross a cut: each piece holds those it reads. types:
    ``value_types(proto)`` (computed when not given)."""
    g = proto.graph
    inits = set(constants(proto))
    nodes = list(g.node)
    types = value_types(proto) if types is None else types
    norms = {n.index: n for n in (statistic_nodes(proto, types)[0] if norms is None
                                  else norms)}
    outputs = [o.name for o in g.output]
    producer = {vi.name: -1 for vi in g.input if vi.name not in inits}   # -1: a graph input
    last_read: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for t in node.input:
            if t in producer:
                last_read[t] = i
        producer.update((t, i) for t in node.output if t and t not in inits)
    for t in outputs:
        last_read[t] = len(nodes)

    def live_at(cut):   # made before node ``cut``, read at or after it, in graph order
        return tuple(t for t, p in producer.items() if p < cut and last_read.get(t, -1) >= cut)

    cuts = sorted({0, *norms, len(nodes)})
    out = []
    for start, stop in zip(cuts, cuts[1:]):
        before = set(live_at(start))
        read = tuple(dict.fromkeys(t for node in nodes[start:stop] for t in node.input
                                   if t in before))
        live = live_at(stop)
        made = tuple(t for t in live if t not in before)
        out.append(Piece(start, stop, read, made, live, norms.get(start),
                         {t: types.get(t, _PICTURE) for t in read + made}))
    return out


def piece_graph(proto, piece: Piece, stats=None):
    """``piece`` of ``proto`` as a model of its own: graph inputs ``piece.inputs``, outputs
    ``piece.outputs``, each node named as in the whole graph (``graph.node_name``: the int8
    ranges and fp32 lists of the stage's executor find its convolutions). stats: (mean,
    variance) per channel of the input of the node it starts with (``piece.norm``): an
    InstanceNormalization then becomes Mul and Add by constants, a ReduceMean the mean; None:
    the node takes its input's own statistics."""
    import onnx
    from onnx import helper, numpy_helper
    if stats is not None and piece.norm is None:
        raise ValueError(f"piece [{piece.start}, {piece.stop}) starts with no statistic node "
                         f"to fix")
    out = onnx.ModelProto(ir_version=proto.ir_version)   # not a copy of every weight first
    out.opset_import.extend(proto.opset_import)
    out.functions.extend(proto.functions)
    g = out.graph
    g.name = proto.graph.name
    nodes = list(proto.graph.node[piece.start:piece.stop])
    names = [node_name(node, i) for i, node in enumerate(nodes, piece.start)]
    added = []
    if stats is not None and piece.norm.op != "InstanceNormalization":   # a mean: its value
        node, mean = nodes[0], np.asarray(stats[0], np.float32).reshape(1, -1, 1, 1)
        added = [numpy_helper.from_array(mean, f"{node.output[0]}__fixed_mean")]
        nodes[:1] = [helper.make_node("Identity", [added[0].name], [node.output[0]])]
        names[:1] = [f"{names[0]}__fixed"]
    elif stats is not None:
        n, node = piece.norm, nodes[0]
        mean, var = (np.asarray(v, np.float64).reshape(-1) for v in stats)
        a = n.scale.astype(np.float64) / np.sqrt(var + n.epsilon)
        b = n.bias.astype(np.float64) - mean * a
        fixed = [f"{node.output[0]}__fixed_{k}" for k in ("a", "b", "ax")]
        added = [numpy_helper.from_array(v.astype(np.float32).reshape(1, -1, 1, 1), name)
                 for name, v in zip(fixed[:2], (a, b))]
        nodes[:1] = [helper.make_node("Mul", [node.input[0], fixed[0]], [fixed[2]]),
                     helper.make_node("Add", [fixed[2], fixed[1]], [node.output[0]])]
        names[:1] = [f"{names[0]}__fixed_mul", f"{names[0]}__fixed_add"]
    used = {t for node in nodes for t in node.input}
    g.node.extend(nodes)   # copies: named here, the source graph's nodes left as they are
    for node, name in zip(g.node, names):
        node.name = name
    made = {t for node in nodes for t in node.output}
    for name, t in constants(proto).items():   # a Constant node's value: named as its output
        if name in used and name not in made:
            g.initializer.append(t)
            g.initializer[-1].name = name
    g.initializer.extend(added)
    for field, names in ((g.input, piece.inputs), (g.output, piece.outputs)):
        field.extend(helper.make_tensor_value_info(
            t, piece.types[t][0], [f"{t}_{i}" for i in range(piece.types[t][1])]) for t in names)
    return out


# A value whose type shape inference cannot tell: the float32 NCHW a picture network carries.
_PICTURE = (1, 4)   # (onnx.TensorProto.FLOAT, rank)


def value_types(proto) -> dict[str, tuple]:
    """{value: (element type, rank)} of every value whose type is known (graph inputs and
    outputs, ONNX shape inference)."""
    import onnx
    try:
        inferred = onnx.shape_inference.infer_shapes(proto).graph
    except Exception:  # noqa: BLE001  (inference is a hint: the declared types remain)
        inferred = proto.graph
    types = {}
    for vi in (*inferred.input, *inferred.value_info, *inferred.output):
        tt = vi.type.tensor_type
        if tt.elem_type and tt.HasField("shape"):
            types[vi.name] = (tt.elem_type, len(tt.shape.dim))
    return types
