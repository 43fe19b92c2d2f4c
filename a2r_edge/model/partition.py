"""Partitioning: the nodes the native side cannot run go to onnxruntime as sub-graphs of the
same plan, instead of the whole model falling back.

``partition`` replaces each run of consecutive (in topological order) onnxruntime-placed nodes
by one ``OnnxRuntimeRegion`` node: a sub-model of those nodes, its constant inputs as
initializers, its run-time inputs and outputs typed with this size's shapes. The region's step
feeds the arena views of its inputs to an onnxruntime session and copies the results into the
arena views of its outputs; float32 tensors live in the arena like any other. A non-float tensor
(an integer index computed at run time) that the plan has no buffer of its dtype for lives in a
store of the regions beside the arena (only onnxruntime regions read it then).

Cost: one session per region per plan (built once per input size, like the rest of the plan),
and one copy of each region output per run.
"""
from __future__ import annotations

import numpy as np

from .graph import Graph, Node
from .ops.base import INTERNAL, OpSpec, register
from .specialise import Specialised, node_proto

REGION_OP = "OnnxRuntimeRegion"


def partition(spec: Specialised, threads: int | None = None) -> tuple[list[Node], dict]:
    """The node list of ``spec`` with each onnxruntime run merged into one region node, and
    {region name: [member node names]}."""
    where = {p.node: p.where for p in spec.placements}
    nodes = spec.graph.nodes
    last_use: dict[str, int] = {}
    for i, n in enumerate(nodes):
        for s in n.inputs:
            if s:
                last_use[s] = i
    for t in spec.graph.outputs:
        last_use[t] = len(nodes)
    out, regions, run = [], {}, []
    side: dict[str, np.ndarray] = {}   # non-float tensors between regions (see module doc)

    def close(end: int):
        if not run:
            return
        region = _region(run, end, last_use, spec, len(regions), threads, side)
        regions[region.name] = [m.name for m in run]
        out.append(region)
        run.clear()

    for i, n in enumerate(nodes):
        if where.get(n.name) == "onnxruntime":
            run.append(n)
            continue
        close(i)
        out.append(n)
    close(len(nodes))
    return out, regions


def _region(members: list[Node], end: int, last_use, spec: Specialised, k: int, threads,
            side: dict):
    import onnx
    from onnx import helper, numpy_helper
    g, consts = spec.graph, spec.graph.consts
    made = {t for m in members for t in m.outputs if t}
    ins, init_names = [], []
    for m in members:
        for s in m.inputs:
            if not s or s in made:
                continue
            if s in consts:
                if s not in init_names:
                    init_names.append(s)
            elif s not in ins:
                ins.append(s)
    outs = [t for m in members for t in m.outputs if t and last_use.get(t, -1) >= end]
    info = lambda t: helper.make_tensor_value_info(  # noqa: E731
        t, helper.np_dtype_to_tensor_dtype(spec.dtypes[t]), spec.shapes[t])
    sub = helper.make_graph([node_proto(m) for m in members], f"region{k}",
                            [info(t) for t in ins], [info(t) for t in outs],
                            [numpy_helper.from_array(np.asarray(consts[t]), t)
                             for t in init_names])
    model = helper.make_model(sub, opset_imports=[helper.make_opsetid(d, v)
                                                  for d, v in g.opsets.items()],
                              ir_version=g.ir_version)
    return Node(REGION_OP, f"onnxruntime[{members[0].name}..{members[-1].name}]", ins, outs,
                dict(model=model.SerializeToString(), members=[m.name for m in members],
                     ops=[m.op for m in members], threads=threads, side=side,
                     in_dtypes=[spec.dtypes[t] for t in ins],
                     out_shapes=[spec.shapes[t] for t in outs],
                     out_dtypes=[spec.dtypes[t] for t in outs]), INTERNAL)


# A region writing fewer float32 values than this runs on one onnxruntime thread: a session's
# own thread pool costs ~6 ms to make (measured: 0.2 ms with one thread), more than such a
# region's whole run; larger regions get the executor's thread count.
SMALL_REGION = 1 << 18


def _session(n: Node):
    import onnxruntime as ort
    so = ort.SessionOptions()
    small = sum(int(np.prod(s)) for s in n.attrs["out_shapes"]) < SMALL_REGION
    threads = 1 if small else n.attrs.get("threads")
    if threads:
        so.intra_op_num_threads = int(threads)
        so.inter_op_num_threads = 1
    so.log_severity_level = 3
    # the native kernels run between regions: a spinning pool would steal their cores
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(n.attrs["model"], so, providers=["CPUExecutionProvider"])


def _out_shapes(n: Node, in_shapes, graph: Graph) -> list[tuple]:
    return [tuple(s) for s in n.attrs["out_shapes"]]


def _build(n: Node, graph: Graph, shapes, view, scratch):
    sess = _session(n)
    side = n.attrs["side"]

    def bound(t, dt):   # the plan's buffer of t when it holds that dtype, else the side store
        v = view(t)
        return v if v.dtype == np.dtype(dt) else None
    feeds = [(t, bound(t, dt)) for t, dt in zip(n.inputs, n.attrs["in_dtypes"])]
    dests = [bound(t, dt) for t, dt in zip(n.outputs, n.attrs["out_dtypes"])]

    def run_region():
        res = sess.run(n.outputs, {t: (v if v is not None else side[t]) for t, v in feeds})
        for t, dst, r in zip(n.outputs, dests, res):
            if dst is None:
                side[t] = r
            else:
                np.copyto(dst, r)
    return run_region


def _reference(n: Node, inputs):
    sess = _session(n)
    return sess.run(n.outputs, {t: np.asarray(v) for t, v in zip(n.inputs, inputs)})


register(OpSpec(REGION_OP, _out_shapes, _build, _reference, domain=INTERNAL))
