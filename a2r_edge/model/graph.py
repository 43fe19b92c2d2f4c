"""ONNX -> a small graph IR the native executor plans: load and check, then fuse (folding,
shapes and placement for one input size are ``specialise.py``'s).

The IR is a topologically ordered list of ``Node`` (op, name, inputs, outputs, attrs); tensor
values known at load time (initializers, Constant nodes, folded expressions) live in
``Graph.consts``. Nothing here touches the arena; see ``arena.py`` and ``executor.py``.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

from ..runtime import files
from . import ops
from .ops import ADAIN_DOMAIN, ADAIN_OP, DEFAULT_DOMAINS, UnsupportedOpError
from .ops.conv_transpose import takes_activation
from .ops.pad import crop_of

# ONNX op types the executor runs (default domain), besides the a2r AdaIN stage (ops/norm.py).
SUPPORTED = ops.supported()


class ModelLoadError(ValueError):
    """The bytes or file are not a valid ONNX model."""


@dataclasses.dataclass
class Node:
    op: str
    name: str
    inputs: list[str]        # "" = absent optional input
    outputs: list[str]
    attrs: dict
    domain: str = ""         # ONNX domain ("" default); AdaIN keeps the a2r one


@dataclasses.dataclass
class Graph:
    nodes: list[Node]
    consts: dict[str, np.ndarray]
    inputs: list[tuple[str, tuple]]    # (name, declared shape: int or None per dim)
    outputs: list[str]
    opset: int
    opsets: dict = dataclasses.field(default_factory=dict)  # domain -> version (sub-models)
    ir_version: int = 8
    # graph inputs that are not float32 (integer/bool tensors: run by the ops' references)
    input_dtypes: dict[str, np.dtype] = dataclasses.field(default_factory=dict)


# --- loading ------------------------------------------------------------------------------------

# The picture pipeline (Engine, convert) converts RGB pictures: the network it feeds the
# picture and the one whose output is the result take and give 3 channels.
PICTURE_CHANNELS = 3


def channels_problem(takes: int | None, gives: int | None) -> str | None:
    """Why the picture pipeline cannot use a network taking ``takes`` and giving ``gives``
    channels (None: unknown, not judged), or None when it can: a predicate for "the network"
    ("takes 1 channel; ..."). The one wording of this rule: the load-time check below, the late
    check of a network's result (picture/forward.py) and ``model check``."""
    if takes in (None, PICTURE_CHANNELS) and gives in (None, PICTURE_CHANNELS):
        return None
    has = " and ".join(f"{verb} {n} channel{'s' if n != 1 else ''}" for verb, n in
                       (("takes", takes), ("gives", gives)) if n is not None)
    return (f"{has}; the picture pipeline converts RGB pictures: the network's "
            f"input and output must have {PICTURE_CHANNELS} channels")


def check_picture_stage(model, stage: str, picture_in: bool = False,
                        picture_out: bool = False) -> None:
    """ModelLoadError unless ``model`` (a path or ModelProto) is a picture network as the Engine
    runs it: one float32 graph input (rank 4 where the rank is stated) and a float32 first
    output. An engine stage is fed float32 NCHW pictures whatever its backend. picture_in /
    picture_out: the stage reads the RGB picture / gives the result, so its declared channels
    there (where stated) must be 3 (``channels_problem``)."""
    import onnx
    proto = load_model(model)
    inits = {t.name for t in proto.graph.initializer}
    inputs = [vi for vi in proto.graph.input if vi.name not in inits]
    if len(inputs) != 1 or not proto.graph.output:
        raise ModelLoadError(f"stage {stage!r}: a picture network has one input and at least one "
                             f"output; this one has {len(inputs)} inputs and "
                             f"{len(proto.graph.output)} outputs")
    channels = []
    for what, vi, judged in (("input", inputs[0], picture_in),
                             ("output", proto.graph.output[0], picture_out)):
        tt = vi.type.tensor_type
        if tt.elem_type != onnx.TensorProto.FLOAT:
            raise ModelLoadError(
                f"stage {stage!r}: {what} {vi.name!r} is "
                f"{onnx.TensorProto.DataType.Name(tt.elem_type)}; a picture network takes and "
                f"returns float32 NCHW")
        if tt.HasField("shape") and len(tt.shape.dim) != 4:
            raise ModelLoadError(f"stage {stage!r}: {what} {vi.name!r} has a shape of rank "
                                 f"{len(tt.shape.dim)}; a picture network takes and returns "
                                 f"NCHW (rank 4)")
        stated = tt.HasField("shape") and tt.shape.dim[1].HasField("dim_value")
        channels.append(tt.shape.dim[1].dim_value if judged and stated else None)
    problem = channels_problem(*channels)
    if problem:
        raise ModelLoadError(f"stage {stage!r} {problem}")


def check_float32_convolutions(graph: Graph) -> None:
    """ValueError when a Conv or ConvTranspose computes in another dtype than float32 (that of
    its constant weights; a float16 ``net.half()`` export). The native kernels are float32:
    such a node would run on its numpy reference, where fusion has moved a Conv's weights
    into its attributes, and a network of them would run entirely in numpy."""
    for n in graph.nodes:
        w = graph.consts.get(n.inputs[1]) if n.op in ("Conv", "ConvTranspose") \
            and len(n.inputs) > 1 else None
        if w is not None and w.dtype != np.float32:
            raise ValueError(f"{n.op} node {n.name!r} has {w.dtype} weights: the native "
                             f"executor runs float32 networks; export the model in float32 "
                             f"(no .half())")


def load_model(model):
    """An onnx.ModelProto from a path, bytes or a ModelProto; checked by onnx.checker."""
    import onnx
    what = "ONNX model"  # named in every error: the file when there is one
    if isinstance(model, onnx.ModelProto):
        proto = model
    elif isinstance(model, (bytes, bytearray, memoryview)):
        try:
            proto = onnx.load_model_from_string(bytes(model))
        except Exception as exc:  # protobuf DecodeError and friends
            raise ModelLoadError(f"model bytes are not a valid ONNX model ({len(model)} bytes): "
                                 f"{type(exc).__name__}: {exc}") from exc
    elif isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        what = f"ONNX model {path!r}"
        why = files.not_a_file(Path(path), "model file (.onnx)")
        if why is not None:   # FileNotFoundError when nothing is there; ModelLoadError for a
            error = ModelLoadError   # folder, a FIFO, a path this process may not read
            try:
                os.stat(path)
            except FileNotFoundError:
                error = FileNotFoundError
            except OSError:
                pass
            raise error(f"ONNX model {path!r}: {why}")
        try:
            proto = onnx.load_model(path)
        except Exception as exc:
            raise ModelLoadError(f"{path!r} is not a valid ONNX model: "
                                 f"{type(exc).__name__}: {exc}") from exc
    else:
        raise TypeError("model must be a path, bytes or onnx.ModelProto, "
                        f"got {type(model).__name__}")
    try:
        onnx.checker.check_model(proto)
    except Exception as exc:
        raise ModelLoadError(f"{what} does not pass onnx.checker: "
                             f"{' '.join(str(exc).split())}") from exc
    if not proto.graph.node:
        raise ModelLoadError(f"{what} has no nodes (empty or truncated graph)")
    return proto


def _attrs(node) -> dict:
    import onnx
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _decode(v):
    return v.decode() if isinstance(v, bytes) else v


def build_graph(proto, strict: bool = False) -> Graph:
    """The IR of a checked ModelProto: constants gathered, Identity and inference Dropout
    removed (``specialise.fold`` folds what the constants determine). strict: every op must
    have a native kernel (UnsupportedOpError naming the first that has none); otherwise such
    nodes are run by onnxruntime (``partition.py``)."""
    import onnx
    from onnx import numpy_helper
    opset = next((o.version for o in proto.opset_import if o.domain in DEFAULT_DOMAINS), 0)
    g = proto.graph
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:   # every op checked before any other error, so the message names it
        if n.domain == ADAIN_DOMAIN and n.op_type == ADAIN_OP:
            continue
        if strict and (n.domain not in DEFAULT_DOMAINS or n.op_type not in SUPPORTED):
            raise UnsupportedOpError(n.op_type, n.name, "strict: no onnxruntime fallback",
                                     domain=n.domain)
    inits = set(consts)
    inputs, input_dtypes = [], {}
    for vi in g.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        if tt.elem_type != onnx.TensorProto.FLOAT:
            try:
                input_dtypes[vi.name] = np.dtype(
                    onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
            except (KeyError, ValueError, TypeError) as exc:
                raise ValueError(f"graph input {vi.name!r} has element type "
                                 f"{onnx.TensorProto.DataType.Name(tt.elem_type)}, which the "
                                 f"native executor cannot hold") from exc
            if input_dtypes[vi.name].kind not in "biufV":   # V: float8, int4 ... (ml_dtypes)
                raise ValueError(f"graph input {vi.name!r}: element type "
                                 f"{onnx.TensorProto.DataType.Name(tt.elem_type)} (numbers and "
                                 f"bools only)")
        dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
        inputs.append((vi.name, dims))
    outputs = [o.name for o in g.output]
    rename: dict[str, str] = {}
    nodes: list[Node] = []
    for i, n in enumerate(g.node):
        name = node_name(n, i)
        attrs = {k: _decode(v) for k, v in _attrs(n).items()}
        ins = [rename.get(s, s) for s in n.input]
        op = "AdaIN" if n.domain == ADAIN_DOMAIN else n.op_type
        if op == "Constant":
            consts[n.output[0]] = ops.spec(op).reference(Node(op, name, [], [], attrs), [])[0]
            continue
        if _is_identity(n, op, attrs, ins, consts) and n.output[0] not in outputs:
            rename[n.output[0]] = ins[0]
            continue
        domain = "" if n.domain in DEFAULT_DOMAINS else n.domain
        nodes.append(Node(op, name, ins, list(n.output), attrs, domain))
    return Graph(nodes, consts, inputs, outputs, opset,
                 {o.domain: o.version for o in proto.opset_import}, proto.ir_version,
                 input_dtypes)


def node_name(node, index: int) -> str:
    """The name of ONNX node ``node``, the ``index``-th of its graph: its own, or for an unnamed
    one its op and index (plans, int8 ranges and fallback lists key convolutions by it)."""
    return node.name or f"{node.op_type}_{index}"


def _is_identity(n, op, attrs, ins, consts) -> bool:
    """Identity, or Dropout at inference (no training_mode, or a constant false one; its mask
    output unused): the output is the input."""
    if n.domain not in DEFAULT_DOMAINS:
        return False
    if op == "Identity":
        return True
    if op != "Dropout" or (len(n.output) > 1 and n.output[1]):
        return False
    mode = ins[2] if len(ins) > 2 else ""
    return not mode or (mode in consts and not bool(np.asarray(consts[mode]).reshape(-1)[0]))


# --- fusion -------------------------------------------------------------------------------------

def consumers_of(nodes: list[Node]) -> dict[str, list[Node]]:
    cons: dict[str, list[Node]] = {}
    for n in nodes:
        for s in n.inputs:
            if s:
                cons.setdefault(s, []).append(n)
    return cons


def _per_channel(c: np.ndarray, channels: int) -> np.ndarray | None:
    """c as a (channels,) vector when it broadcasts over NCHW along C only, else None."""
    if c.ndim > 4 or c.size not in (1, channels):
        return None
    shape = (1,) * (4 - c.ndim) + c.shape
    if shape[0] != 1 or shape[2] != 1 or shape[3] != 1:
        return None
    return np.broadcast_to(c.reshape(-1).astype(np.float32), (channels,)).copy()


# activations a convolution's epilogue applies: op -> ops.Conv2d's name
_ACTIVATIONS = {"Relu": "relu", "LeakyRelu": "leaky_relu", "SiLU": "silu"}


def fuse(graph: Graph, shapes: dict[str, tuple]) -> tuple[list[Node], dict[str, int]]:
    """Fused node list (new Node objects; graph untouched) and counters of each fusion.

    x*Sigmoid(x) -> SiLU; DepthToSpace + activation -> activation + DepthToSpace (the activation
    is elementwise, the shuffle only moves values: so the activation can join the Conv before);
    Conv + per-channel Mul/Add constants -> weights/bias; Conv + Add of a same-shape tensor ->
    residual (InstanceNorm/AdaIN + Add likewise); Conv/InstanceNorm/AdaIN/AdaLIN/
    GroupNormalization + activation and ConvTranspose
    (stacked form) + activation -> one node; Add of a crop (Pad of negative pads) -> one Add
    reading the crop's input (crop_add). A node is
    absorbed only when its input has no other reader and is not a graph output; the fused node
    runs at the position of the last node it absorbed (all its inputs exist by then).
    """
    consts, outs = graph.consts, set(graph.outputs)
    nodes = [dataclasses.replace(n, inputs=list(n.inputs), outputs=list(n.outputs),
                                 attrs=dict(n.attrs)) for n in graph.nodes]
    count = dict(silu=0, activation_before_shuffle=0, conv_bias=0, conv_scale=0,
                 conv_residual=0, conv_activation=0, norm_activation=0, norm_residual=0,
                 instance_norm_to_adain=0, add_of_crop=0)
    pos = {id(n): i for i, n in enumerate(nodes)}
    dead: set[int] = set()
    # live readers of each tensor, kept up to date by every rewrite below (linear fusion: no
    # rescans of the node list)
    cons = consumers_of(nodes)
    producer = {t: n for n in nodes for t in n.outputs if t}

    def unlink(n):
        for t in set(n.inputs):
            if t:
                cons[t] = [m for m in cons.get(t, []) if m is not n]

    def link(n):
        for t in set(n.inputs):
            if t:
                cons.setdefault(t, []).append(n)

    def sole_consumer(t):
        c = cons.get(t, [])
        return c[0] if len(c) == 1 and t not in outs and c[0].inputs.count(t) == 1 else None

    # x * Sigmoid(x) -> SiLU(x)
    for n in nodes:
        if n.op != "Mul" or id(n) in dead:
            continue
        for k in (0, 1):
            s = producer.get(n.inputs[k])
            if s is not None and id(s) not in dead and s.op == "Sigmoid" \
                    and n.inputs[1 - k] == s.inputs[0] and sole_consumer(s.outputs[0]) is n:
                dead.add(id(s))
                unlink(s)
                unlink(n)
                n.op, n.inputs, n.attrs = "SiLU", [s.inputs[0]], {}
                link(n)
                count["silu"] += 1
                break
    for d in nodes:
        a = sole_consumer(d.outputs[0]) if d.op == "DepthToSpace" else None
        if a is None or a.op not in ("Relu", "LeakyRelu", "SiLU"):
            continue
        pre = f"{d.outputs[0]}:{a.op}"  # new tensor: the activation, before the shuffle
        shapes[pre] = shapes[d.inputs[0]]
        unlink(a)
        unlink(d)
        a.inputs, a.outputs, d.inputs, d.outputs = [d.inputs[0]], [pre], [pre], a.outputs
        link(a)
        link(d)
        producer.update([(pre, a)] + [(t, d) for t in d.outputs])
        pos[id(a)], pos[id(d)] = pos[id(d)], pos[id(a)]
        count["activation_before_shuffle"] += 1
    for n in nodes:
        if n.op == "InstanceNormalization":
            n.op = "AdaIN"   # same arithmetic: style_std = scale, style_mean = B
            n.inputs = [n.inputs[0], n.inputs[2], n.inputs[1]]
            count["instance_norm_to_adain"] += 1
    # Conv epilogues and norm activations
    for n in nodes:
        if id(n) in dead or n.op not in ("Conv", "AdaIN", "AdaLIN", "ConvTranspose",
                                         "GroupNormalization"):
            continue
        if n.op == "ConvTranspose":
            m = sole_consumer(n.outputs[0])
            if m is not None and m.op in _ACTIVATIONS and takes_activation(
                    n, shapes[n.inputs[0]], np.shape(consts[n.inputs[1]])):
                n.attrs.update(activation=_ACTIVATIONS[m.op],
                               alpha=float(m.attrs.get("alpha", 0.01)))
                count["conv_activation"] += 1
                dead.add(id(m))
                unlink(m)
                n.outputs = list(m.outputs)
                producer.update((t, n) for t in n.outputs)
                pos[id(n)] = pos[id(m)]
            continue
        if n.op == "Conv":
            n.attrs.setdefault("activation", None)
            n.attrs["residual"] = ""
            w = consts[n.inputs[1]].astype(np.float32)
            b = consts[n.inputs[2]].astype(np.float32) if len(n.inputs) > 2 and n.inputs[2] \
                else np.zeros(w.shape[0], np.float32)
            n.attrs["w"], n.attrs["b"] = w, b
        else:
            n.attrs.setdefault("activation", None)
        n.attrs.setdefault("residual", "")
        while True:
            m = sole_consumer(n.outputs[0])
            if m is None:
                break
            act, out = n.attrs["activation"], n.outputs[0]
            other = m.inputs[1] if len(m.inputs) > 1 and m.inputs[0] == out else \
                (m.inputs[0] if len(m.inputs) > 1 else "")
            done = False
            if act is None and m.op in _ACTIVATIONS:
                n.attrs["activation"] = _ACTIVATIONS[m.op]
                n.attrs["alpha"] = float(m.attrs.get("alpha", 0.01))
                count["conv_activation" if n.op == "Conv" else "norm_activation"] += 1
                done = True
            elif n.op == "Conv" and act is None and m.op in ("Add", "Mul") and other in consts:
                v = _per_channel(consts[other], n.attrs["w"].shape[0])
                if v is not None and shapes[m.outputs[0]] == shapes[out] and (
                        m.op == "Add" or not n.attrs["residual"]):
                    if m.op == "Add":
                        n.attrs["b"] = n.attrs["b"] + v
                        count["conv_bias"] += 1
                    else:
                        n.attrs["w"] = n.attrs["w"] * v[:, None, None, None]
                        n.attrs["b"] = n.attrs["b"] * v
                        count["conv_scale"] += 1
                    done = True
            elif n.op in ("Conv", "AdaIN") and act is None and m.op == "Add" \
                    and not n.attrs["residual"] and other and other not in consts \
                    and other != out and shapes[other] == shapes[out]:
                n.attrs["residual"] = other
                unlink(n)   # Conv: (x, residual), its weights in attrs; AdaIN: 4th input
                n.inputs = n.inputs[:1 if n.op == "Conv" else 3] + [other]
                link(n)
                count["conv_residual" if n.op == "Conv" else "norm_residual"] += 1
                done = True
            if not done:
                break
            dead.add(id(m))
            unlink(m)
            n.outputs = list(m.outputs)
            producer.update((t, n) for t in n.outputs)
            pos[id(n)] = pos[id(m)]
        if n.op == "Conv":
            unlink(n)
            n.inputs = [n.inputs[0]] + ([n.attrs["residual"]] if n.attrs["residual"] else [])
            link(n)
    # Add of a crop of H and W (a Pad of negative pads only) that it alone reads and a tensor
    # of the crop's shape, left after the Conv residuals: one crop_add pass, no copy
    for n in nodes:
        if id(n) in dead or n.op != "Add" or len(n.inputs) != 2 or "" in n.inputs:
            continue
        for k in (0, 1):
            t, other = n.inputs[k], n.inputs[1 - k]
            p = producer.get(t)
            if p is None or id(p) in dead or p.op != "Pad" or sole_consumer(t) is not n \
                    or other in consts or len(shapes[t]) != 4 \
                    or shapes[other] != shapes[t] or shapes[n.outputs[0]] != shapes[t]:
                continue
            crop = crop_of(p, shapes[p.inputs[0]], consts)
            if crop is None or crop[:2] != ((0, shapes[t][0]), (0, shapes[t][1])):
                continue
            dead.add(id(p))
            unlink(p)
            unlink(n)
            n.inputs = [p.inputs[0], other]
            n.attrs["crop"] = crop[2:]
            link(n)
            count["add_of_crop"] += 1
            break
    fused = sorted((n for n in nodes if id(n) not in dead), key=lambda n: pos[id(n)])
    return fused, count
