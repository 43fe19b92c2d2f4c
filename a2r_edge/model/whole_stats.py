"""Graph variants for networks that hold statistics of their whole input: InstanceNormalization
normalises each channel by its mean and variance over the whole picture, so a network run on a
tile differs from the same network run on the whole picture everywhere, not only near the cut.
Tiled conversion (picture/tiling.py) gathers the statistics of the whole picture tile by tile
with ``truncated`` graphs and then runs graphs whose InstanceNormalization nodes use them
(``with_fixed_norms``: y = x * a + b, a = scale / sqrt(var + epsilon), b = B - mean * a).
"""
from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Norm:
    """An InstanceNormalization node of a graph: its position, input tensor and parameters."""
    index: int          # in the graph's node list (topological order)
    input: str
    scale: np.ndarray   # (C,)
    bias: np.ndarray    # (C,)
    epsilon: float


def load(path) -> object:
    """The onnx.ModelProto of ``path``."""
    import onnx
    return onnx.load(str(path))


def instance_norms(proto) -> list[Norm]:
    """The graph's InstanceNormalization nodes in topological order (scale and bias must be
    initializers: ValueError otherwise)."""
    from onnx import numpy_helper
    inits = {t.name: t for t in proto.graph.initializer}
    norms = []
    for i, node in enumerate(proto.graph.node):
        if node.op_type != "InstanceNormalization":
            continue
        if node.input[1] not in inits or node.input[2] not in inits:
            raise ValueError(f"InstanceNormalization node {node.name!r}: scale and B must be "
                             f"initializers to be fixed")
        eps = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-5)
        norms.append(Norm(i, node.input[0], numpy_helper.to_array(inits[node.input[1]]),
                          numpy_helper.to_array(inits[node.input[2]]), float(eps)))
    return norms


def with_fixed_norms(proto, fixed: dict[int, tuple[np.ndarray, np.ndarray]]):
    """A copy of ``proto`` whose InstanceNormalization nodes at the indices of ``fixed`` use the
    given per-channel (mean, variance) instead of their input's own: Mul and Add by constants."""
    import onnx
    from onnx import helper, numpy_helper
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    norms = {n.index: n for n in instance_norms(proto)}
    nodes = []
    for i, node in enumerate(proto.graph.node):
        if i not in fixed:
            nodes.append(node)
            continue
        n = norms[i]
        mean, var = (np.asarray(v, np.float64).reshape(-1) for v in fixed[i])
        a = n.scale.astype(np.float64) / np.sqrt(var + n.epsilon)
        b = n.bias.astype(np.float64) - mean * a
        names = [f"{node.output[0]}__fixed_{k}" for k in ("a", "b", "ax")]
        for name, v in zip(names[:2], (a, b)):
            out.graph.initializer.append(
                numpy_helper.from_array(v.astype(np.float32).reshape(1, -1, 1, 1), name))
        nodes.append(helper.make_node("Mul", [node.input[0], names[0]], [names[2]]))
        nodes.append(helper.make_node("Add", [names[2], names[1]], [node.output[0]]))
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


def truncated(proto, tensor: str):
    """A copy of ``proto`` that computes only ``tensor`` (its one output) from the graph input."""
    import onnx
    from onnx import TensorProto, helper
    needed, keep = {tensor}, []
    for node in reversed(proto.graph.node):
        if any(o in needed for o in node.output):
            keep.append(node)
            needed.update(i for i in node.input if i)
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    del out.graph.node[:]
    out.graph.node.extend(reversed(keep))
    used = needed | {t for n in keep for t in n.input}
    inits = [t for t in proto.graph.initializer if t.name in used]
    del out.graph.initializer[:]
    out.graph.initializer.extend(inits)
    del out.graph.output[:]
    out.graph.output.append(helper.make_tensor_value_info(tensor, TensorProto.FLOAT,
                                                          ["n", "c", "h", "w"]))
    del out.graph.value_info[:]
    return out
