"""Native executor: runs an ONNX image model of the supported op set on the a2r_edge CPU ops
(each op's shapes, scratch and run closure come from its OpSpec in ``ops/``).

Per input shape it builds a plan once (cached): static shapes, the fused node list, one float32
arena holding every intermediate at an offset chosen by liveness (``arena.py``), and one closure
per node with its views bound. A run then copies the input into the arena and calls the
closures, each at the thread count measured faster for it (``step_threads.py``): no numpy
allocation after the first run at a given shape (the prepacked convolutions size their
workspaces on that run). Not thread-safe: one executor runs one picture at a time.

>>> ex = NativeExecutor("model.onnx")              # doctest: +SKIP
>>> y = ex.run(x)   # x float32 (1, 3, H, W); y is owned by ex and overwritten by the next run
"""
from __future__ import annotations

import dataclasses
import functools
import warnings
from contextlib import contextmanager

import numpy as np

from .. import _kernels
from . import arena, ops
from . import fit as fitting
from . import precision as _precision
from .graph import Graph, Node, build_graph, check_float32_convolutions, fuse, load_model
from .ops import UnsupportedOpError
from .partition import REGION_OP, partition
from .rewrite import rewrite
from .specialise import MemoryLimitError, fold, memory_limit_elements, specialise
from .step_threads import StepThreads


def _reference_step(nd, graph: Graph, view):
    """The run closure of a node with non-float32 run-time tensors: its numpy reference, the
    results copied into the node's output buffers (allocates per run; such tensors are shape
    arithmetic or masks, small, and usually folded before the plan)."""
    reference = ops.spec(nd.op, nd.name).reference
    ins = [graph.consts[s] if s in graph.consts else (view(s) if s else None)
           for s in nd.inputs]
    outs = [view(t) if t else None for t in nd.outputs]

    def run():
        for y, v in zip(outs, reference(nd, ins)):
            if y is not None:
                np.copyto(y, v, casting="unsafe")
    return run


# --- the plan -----------------------------------------------------------------------------------

class _ConvMode:
    """How a plan's convolutions run: one precision for all but the nodes in ``fp32_nodes``
    (the per-layer fallback, precision.fallback_nodes) and ``faster_fp32`` (those "auto" found
    faster at fp32, precision.faster_at_fp32), the int8 activation range of each node
    (missing: ranged per call), and ``probe``, a dict collecting the fp32 ranges. Applied as
    attributes (ops/conv.py) of the nodes whose products can run at low precision: Conv, and
    ConvTranspose and MatMul/Gemm where their OpSpec.lowp says so (the "convolutions")."""

    def __init__(self, precision: str = "fp32", act_ranges: dict | None = None,
                 probe: dict | None = None, fp32_nodes=(), faster_fp32=()):
        self.precision, self.act_ranges, self.probe = precision, act_ranges or {}, probe
        self.fp32_nodes, self.faster_fp32 = frozenset(fp32_nodes), frozenset(faster_fp32)

    def annotate(self, node) -> str | None:
        """Set node's attributes; why it runs at fp32 in a reduced-precision plan, else None."""
        if self.probe is not None:
            node.attrs["probe"] = self.probe
        elif self.precision != "fp32":
            if node.name in self.fp32_nodes:
                return FALLBACK_WHY
            if node.name in self.faster_fp32:
                return FASTER_WHY
            node.attrs["precision"] = self.precision
            if self.precision == "int8":
                node.attrs["act_range"] = self.act_ranges.get(node.name)
        return None


# describe()'s tags of the convolutions a reduced-precision plan runs at fp32
FALLBACK_WHY = "per-layer fallback"
FASTER_WHY = "faster at fp32 here"


class _Plan:
    """Everything one input shape needs: fused nodes, buffer offsets, arena, bound closures."""

    def __init__(self, graph: Graph, input_shapes: dict[str, tuple], memory: arena.SharedArena,
                 user, strict: bool = False, foreign: dict | None = None,
                 conv_mode: _ConvMode | None = None):
        self.input_shapes = input_shapes
        conv_mode = conv_mode or _ConvMode()
        self.precision = conv_mode.precision
        self.convs = 0   # convolution steps
        self.fp32_convs: dict[str, int] = {}   # why -> how many of them a lowp plan runs at fp32
        self.node_precision: dict[str, str] = {}   # fused node -> what its products run at
        # this size's constants folded, shapes known, unsupported nodes in onnxruntime regions
        self.specialised = sp = specialise(graph, input_shapes, strict=strict, foreign=foreign)
        self.rewrites = rewrite(sp)
        shapes = sp.shapes
        spliced, self.regions = partition(sp, threads=_kernels.num_threads())
        graph = dataclasses.replace(sp.graph, nodes=spliced)
        dtypes = sp.dtypes
        nodes, self.fusions = fuse(graph, shapes)
        for nd in nodes:   # a fused node keeps the input-independent parts of its attributes
            nd.attrs.pop("aliased", None)
        consts, outs = graph.consts, set(graph.outputs)
        produced = {t: i for i, nd in enumerate(nodes) for t in nd.outputs}
        last = {t: i for i, nd in enumerate(nodes) for t in nd.inputs if t}
        size = lambda t: int(np.prod(shapes[t], dtype=np.int64))  # noqa: E731
        tensor_last = lambda t: max(last.get(t, -1), produced.get(t, -1))  # noqa: E731

        groups: list[dict] = []   # size, members [(tensor)], external array or None
        loc: dict[str, tuple[int, int]] = {}

        def new_group(t, external=None, first=None):
            groups.append(dict(size=size(t), members=[t], external=external,
                               first=produced.get(t, -1) if first is None else first,
                               last_use=tensor_last(t)))   # max over members: no rescans
            loc[t] = (len(groups) - 1, 0)

        f32 = np.dtype(np.float32)
        dtype = lambda t: dtypes.get(t, f32)  # noqa: E731  (tensors fusion made are float32)
        for name in input_shapes:
            new_group(name, first=-1, external=None if dtype(name) == f32 else
                      np.empty(shapes[name], dtype(name)))
        self.outputs = {}
        const_outputs = []   # (name, value) of graph outputs that are constants
        for t in graph.outputs:
            if t in input_shapes:
                raise ValueError(f"graph output {t!r} is a graph input; nothing to run")
            self.outputs[t] = np.empty(shapes[t], dtype(t))
            if t in consts:
                const_outputs.append((t, consts[t]))
            else:
                new_group(t, external=self.outputs[t])
        # Tensors of other dtypes (integer, bool, float16/64) live outside the float32 arena,
        # and the native nodes reading or writing them at run time run their numpy reference
        # (onnxruntime regions read and write them in those buffers themselves).
        by_reference = set()
        for i, nd in enumerate(nodes):
            runtime = [t for t in nd.inputs + nd.outputs if t and t not in consts]
            if any(dtype(t) != f32 for t in runtime):
                if nd.op != REGION_OP:
                    by_reference.add(i)
                for t in nd.outputs:
                    if t and t not in loc:
                        new_group(t, external=np.empty(shapes[t], dtype(t)))
        # Concat: producers write straight into their slice of the output when it is contiguous
        # (one image before the axis). A concat whose inputs begin another's (the dense blocks
        # of RRDB / ESRGAN: [x, x1], [x, x1, x2], ... [x, x1, .., x4]) is a view of that one's
        # first channels, so each x_i is written once, in the last concat, and read in place.
        self.aliased = 0
        cons = {}
        for nd in nodes:
            for t in nd.inputs:
                if t:
                    cons.setdefault(t, []).append(nd)

        def place(t, g, at):
            loc[t] = (g, at)
            groups[g]["members"].append(t)
            groups[g]["last_use"] = max(groups[g]["last_use"], tensor_last(t))

        concats = [nd for nd in nodes if nd.op == "Concat"]
        for nd in reversed(concats):
            o = nd.outputs[0]
            if o not in loc:
                new_group(o)
            g, base = loc[o]
            shape = shapes[o]
            axis = nd.attrs["axis"] % len(shape)
            inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
            flat = int(np.prod(shape[:axis])) == 1
            for c in concats if flat else ():
                oc = c.outputs[0]
                if c is not nd and oc not in loc and oc not in outs \
                        and c.attrs["axis"] % len(shape) == axis and len(shapes[oc]) == len(shape) \
                        and c.inputs == nd.inputs[:len(c.inputs)] \
                        and all(shapes[oc][i] == shape[i] for i in range(len(shape)) if i != axis):
                    place(oc, g, base)
            aliased, k = set(), 0
            for t in nd.inputs:
                if loc.get(t) == (g, base + k * inner):   # placed by the concat this one begins
                    aliased.add(t)
                elif flat and t in produced and t not in loc and t not in outs \
                        and nd.inputs.count(t) == 1:
                    place(t, g, base + k * inner)
                    aliased.add(t)
                k += shapes[t][axis]
            nd.attrs["aliased"] = aliased
            self.aliased += len(aliased)
        # Other tensors: a reshape on its input's memory (its step then vanishes), in place over
        # a dying input of the same shape, else a buffer of their own
        self.inplace = self.views = 0
        scratch_ids: list[list[int]] = []
        for i, nd in enumerate(nodes):
            spec = ops.spec(nd.op, nd.name)
            for t in nd.outputs:
                if not t or t in loc:
                    continue
                x = nd.inputs[0] if spec.view and i not in by_reference else ""
                if x in loc and x not in consts and groups[loc[x][0]]["external"] is None:
                    grp = groups[loc[x][0]]
                    loc[t] = loc[x]
                    grp["members"].append(t)
                    grp["last_use"] = max(grp["last_use"], tensor_last(t))
                    self.views += 1
                    continue
                for x in (nd.inputs if spec.inplace else ()):
                    if not x or x in consts or shapes[x] != shapes[t] or x not in loc:
                        continue
                    grp = groups[loc[x][0]]
                    if grp["external"] is None and grp["last_use"] <= i:
                        loc[t] = loc[x]
                        grp["members"].append(t)
                        grp["last_use"] = max(grp["last_use"], tensor_last(t))
                        self.inplace += 1
                        break
                else:
                    new_group(t)
            if spec.lowp is not None and i not in by_reference:   # before its scratch shapes
                self.node_precision[nd.name] = self._annotate(nd, spec, conv_mode, shapes, graph)
            ids = []
            for shp in ([] if i in by_reference else spec.scratch_shapes(nd, shapes, graph)):
                groups.append(dict(size=int(np.prod(shp)), members=[], external=None, first=i,
                                   last=i, shape=shp))
                ids.append(len(groups) - 1)
            scratch_ids.append(ids)
        self.u8 = self._u8_links(nodes, shapes, outs, cons, loc, groups)
        # Lifetimes and offsets
        buffers, arena_groups = [], []
        for gi, grp in enumerate(groups):
            if grp["external"] is not None:
                continue
            first = min([grp["first"]] + [produced.get(m, -1) if m not in input_shapes else -1
                                          for m in grp["members"]])
            lst = max([grp.get("last", first)] + [tensor_last(m) for m in grp["members"]])
            buffers.append((grp["size"], first, lst))
            arena_groups.append(gi)
        offsets, total = arena.plan(buffers)
        if total > memory_limit_elements():
            raise MemoryLimitError(f"the plan for inputs {input_shapes} needs a "
                                   f"{total * 4 >> 20} MiB arena, more than A2R_MEMORY_MB="
                                   f"{memory_limit_elements() >> 18}: convert in tiles or raise "
                                   f"A2R_MEMORY_MB")
        self.arena = memory.take(max(total, 1), user)
        self.arena_floats = total
        self.naive_floats = sum(b[0] for b in buffers)
        for gi, off in zip(arena_groups, offsets):
            groups[gi]["offset"] = off

        def view(t):
            if t in consts:
                return np.ascontiguousarray(consts[t], np.float32)
            g, off = loc[t]
            grp = groups[g]
            flat = grp["external"].reshape(-1) if grp["external"] is not None else \
                self.arena[grp["offset"]:grp["offset"] + grp["size"]]
            if t in self.u8:
                return flat.view(np.uint8)[:size(t)].reshape(shapes[t])
            return flat[off:off + size(t)].reshape(shapes[t])

        self.inputs = {name: view(name) for name in input_shapes}
        self.steps, self.step_nodes = [], []   # step_nodes[i]: the fused node steps[i] runs
        for t, value in const_outputs:   # a constant graph output is copied in on every run
            self.steps.append(functools.partial(np.copyto, self.outputs[t], value))
            self.step_nodes.append(Node("Constant", f"output {t}", [], [t], {}))
        for i, (nd, ids) in enumerate(zip(nodes, scratch_ids)):
            scratch = [self.arena[groups[j]["offset"]:groups[j]["offset"] + groups[j]["size"]]
                       .reshape(groups[j]["shape"]) for j in ids]
            if i in by_reference:
                step = _reference_step(nd, graph, view)
            else:
                step = ops.spec(nd.op, nd.name).build(nd, graph, shapes, view, scratch)
            if step is not None:
                self.steps.append(step)
                self.step_nodes.append(nd)
        self.nodes, self.shapes, self.loc, self.groups = nodes, shapes, loc, groups
        self.runner = StepThreads(self.steps)

    @staticmethod
    def _u8_links(nodes, shapes, outs, cons, loc, groups) -> set[str]:
        """The tensors kept as u8 levels between two int8 Convs (ops.Conv2d out_range), on the
        second's grid: the first's output, read only by the second as its input or by a
        DepthToSpace (CRD: the pixel shuffle, which moves u8 as it moves floats) on the way to
        it. Such a tensor takes a quarter of its arena buffer and is never read as float32."""
        def sole_reader(t):
            readers = cons.get(t, [])
            grp = groups[loc[t][0]]
            if t in outs or len(readers) != 1 or readers[0].inputs[0] != t \
                    or readers[0].inputs.count(t) != 1 or grp["members"] != [t] \
                    or grp["external"] is not None:
                return None
            return readers[0]

        kept = set()
        for nd in nodes:
            if nd.op != "Conv" or nd.attrs.get("precision") != "int8":
                continue
            path = [nd.outputs[0]]
            reader = sole_reader(path[-1])
            while reader is not None and reader.op == "DepthToSpace" \
                    and reader.attrs.get("mode", "DCR") == "CRD":
                path.append(reader.outputs[0])
                reader = sole_reader(path[-1])
            if reader is None or reader.attrs.get("precision") != "int8" \
                    or reader.attrs.get("act_range") is None \
                    or not ops.takes_u8(reader, shapes[path[-1]]):
                continue
            nd.attrs["out_range"] = reader.attrs["act_range"]
            for t in path:
                grp = groups[loc[t][0]]
                grp["size"] = -(-grp["size"] // 4)
                kept.add(t)
        return kept

    def _annotate(self, nd, spec, conv_mode: _ConvMode, shapes, graph) -> str:
        """Set a convolution-like node's precision attributes; its describe() tag."""
        why = spec.lowp(nd, shapes, graph)
        if why:
            return f"fp32: {why}"
        self.convs += 1
        kept = conv_mode.annotate(nd)
        if kept:
            self.fp32_convs[kept] = self.fp32_convs.get(kept, 0) + 1
            return f"fp32: {kept}"
        return "fp32" if conv_mode.probe is not None else conv_mode.precision

    def describe(self) -> str:
        kept = [f"{n} of {self.convs} at fp32: " + ("below the per-layer check"
                                                    if why == FALLBACK_WHY else why)
                for why, n in self.fp32_convs.items()]
        fallback = f" ({'; '.join(kept)})" if kept else ""
        lines = [f"plan for inputs {self.input_shapes}, convolutions at {self.precision}"
                 f"{fallback}: "
                 f"{len(self.nodes)} fused nodes, "
                 f"{len(self.steps)} steps; arena {self.arena_floats * 4 / 2**20:.2f} MiB "
                 f"(without reuse {self.naive_floats * 4 / 2**20:.2f} MiB); "
                 f"{self.inplace} in place, {self.aliased} written into concat slices, "
                 f"{self.views} reshapes on their input's memory, "
                 f"{len(self.u8)} kept as u8 between int8 convolutions",
                 "fusions: " + ", ".join(f"{k}={v}" for k, v in self.fusions.items()),
                 "rewrites: " + ", ".join(f"{k}={v}" for k, v in self.rewrites.items())]
        lines += placement_lines(self.specialised, self.regions) + [self.runner.describe()]
        for i, nd in enumerate(self.nodes):
            t = nd.outputs[0]
            g, off = self.loc[t]
            external = self.groups[g]["external"]
            where = f"arena+{(self.groups[g]['offset'] + off) * 4}B" if external is None else \
                "output" if t in self.outputs else f"own {external.dtype} buffer, by reference"
            extra = []
            if nd.op == "Conv":
                w = nd.attrs["w"]
                extra.append(f"{w.shape[2]}x{w.shape[3]} s{(nd.attrs.get('strides') or [1])[0]}"
                             f" g{nd.attrs.get('group', 1)} +bias")
            if nd.attrs.get("residual"):
                extra.append(f"+residual({nd.attrs['residual']})")
            if nd.attrs.get("activation"):
                extra.append(f"+{nd.attrs['activation']}")
            if nd.name in self.node_precision:
                extra.append(f"@{self.node_precision[nd.name]}")
            if t in self.u8:
                extra.append("->u8")
            lines.append(f"{i:3d} {nd.op:<13} {nd.name!r:<24} {' '.join(extra):<34} -> {t} "
                         f"{self.shapes[t]} @ {where}")
        return "\n".join(lines)


def placement_lines(sp, regions: dict) -> list[str]:
    """Where the source nodes run for this size: counts, then each onnxruntime region with its
    nodes and the reason each could not run natively."""
    count: dict[str, int] = {}
    for pl in sp.placements:
        count[pl.where] = count.get(pl.where, 0) + 1
    lines = [f"placement: {count.get('native', 0)} nodes native, "
             f"{count.get('onnxruntime', 0)} on onnxruntime in {len(regions)} regions, "
             f"{count.get('folded', 0)} folded at plan time (constants for this input size), "
             f"{count.get('fused', 0)} rewritten into other nodes"]
    why = {pl.node: (pl.op, pl.why) for pl in sp.placements}
    for name, members in regions.items():
        lines.append(f"  {name}: " + "; ".join(
            f"{why[m][0]} {m!r} ({why[m][1]})" for m in members))
    return lines


class NativeExecutor:
    """Run an ONNX model of the supported op set (graph.SUPPORTED + the AdaIN stage) natively.

    model: a path, bytes or onnx.ModelProto. Raises UnsupportedOpError (a ValueError naming the
    op and its node) for any other op, ModelLoadError for bytes that are not a valid model.
    memory: the arena.SharedArena its plans live in, shared with executors that never run at
    the same time as this one (default: its own). strict: refuse (UnsupportedOpError) a node
    the native side cannot run instead of running it on onnxruntime inside the plan. fit: how
    run() takes a picture of another size than a model exported with a fixed H x W declares,
    "resize" or "tile" (``fit.py``).
    precision: of the convolutions (Conv, 2-D ConvTranspose, large MatMul/Gemm by a constant),
    "fp32" (default), "bf16", "int8" or "auto" (precision.py): "auto" chooses on the first
    run's input (or in ``calibrate(inputs)``) the fastest precision whose output passes the
    quality guard against fp32; ``choice`` then says what it chose and why. act_ranges:
    {convolution node: (lo, hi)} for int8 (precision.calibrate_ranges; nodes missing are
    ranged per call). A precision this CPU cannot run falls back to fp32 with one warning
    (strict=True: ValueError instead). An unknown precision is a ValueError.
    """

    def __init__(self, model, memory: arena.SharedArena | None = None, *,
                 strict: bool = False, fit: str = "resize", precision: str = "fp32",
                 act_ranges: dict | None = None):
        if not isinstance(strict, bool):
            raise TypeError(f"strict must be a bool, got {type(strict).__name__}")
        precision = _precision.resolve(precision, strict)
        if fit not in fitting.MODES:
            raise ValueError(f"fit must be one of {fitting.MODES}, got {fit!r}")
        self.strict, self.fit = strict, fit
        self.graph = fold(build_graph(load_model(model), strict=strict))
        check_float32_convolutions(self.graph)
        self.fixed = fitting.fixed_hw(self.graph.inputs)   # (H, W) of a fixed-size model
        self._warned = False
        self.memory = arena.SharedArena() if memory is None else memory
        self.input_names = [name for name, _ in self.graph.inputs]
        self.output_names = list(self.graph.outputs)
        self._plans: dict[tuple, _Plan] = {}
        self._last: _Plan | None = None
        # the last plan's input shapes and (arena, outputs) sizes: they outlive drop_plans()
        self._last_shapes: dict | None = None
        self._last_floats = (0, 0)
        self._mode = _ConvMode("fp32" if precision == "auto" else precision, act_ranges)
        self._auto = precision == "auto"
        self.choice: dict | None = None  # what "auto" / calibrate() chose and why

    @property
    def precision(self) -> str:
        """The precision the convolutions run at ("auto" until the first run chooses)."""
        return "auto" if self._auto else self._mode.precision

    @property
    def act_ranges(self) -> dict:
        """{convolution node: (lo, hi)}: the int8 activation ranges in use."""
        return dict(self._mode.act_ranges)

    @property
    def input_readers(self) -> frozenset:
        """The nodes that read a graph input itself (as their first input): the convolutions
        among them see the caller's value domain, which calibration pictures may not span."""
        names = set(self.input_names)
        return frozenset(n.name for n in self.graph.nodes if n.inputs and n.inputs[0] in names)

    @property
    def fp32_nodes(self) -> frozenset:
        """The convolutions kept at fp32 whatever the precision (the per-layer fallback and
        those faster at fp32)."""
        return self._mode.fp32_nodes | self._mode.faster_fp32

    def set_precision(self, precision: str, act_ranges: dict | None = None,
                      fp32_nodes=(), faster_fp32=()) -> None:
        """Run the convolutions at ``precision`` (fp32, bf16, int8) from the next run on;
        act_ranges: as at construction (None: keep the current ones); fp32_nodes and
        faster_fp32: convolution node names that stay at fp32, for the output's quality
        (precision.fallback_nodes) and for speed (precision.faster_at_fp32)."""
        if _precision.check(precision) == "auto":
            raise ValueError("set_precision takes fp32, bf16 or int8; 'auto' chooses with "
                             "calibrate(inputs)")
        self._auto = False
        self._mode = _ConvMode(precision, self._mode.act_ranges if act_ranges is None
                               else act_ranges, fp32_nodes=fp32_nodes, faster_fp32=faster_fp32)
        self.drop_plans()

    def sibling(self, model) -> "NativeExecutor":
        """An executor of ``model``, a graph cut from this one's whose nodes keep their names
        (model/whole_stats.py's pieces, which tiles run), sharing this one's arena and
        strictness, its convolutions at this one's precision, int8 ranges and fp32 nodes (as
        set now): a picture run in pieces is converted as a whole one is. ValueError while
        "auto" has not chosen yet."""
        if self._auto:
            raise ValueError("precision 'auto' is chosen on the first run (or calibrate()); "
                             "run this executor before making pieces of its graph")
        ex = NativeExecutor(model, self.memory, strict=self.strict, fit=self.fit)
        ex._mode = self._mode
        return ex

    def calibrate(self, inputs) -> dict:
        """Choose the precision on ``inputs`` (float32 arrays of the model's one input) as
        "auto" does, and keep it; returns the choice (precision.choose)."""
        self._auto = False
        self.choice = _precision.choose(self, inputs)
        return self.choice

    @contextmanager
    def probing(self, ranges: dict):
        """Runs inside are at fp32 and record each convolution's input range into ``ranges``."""
        saved = self._mode
        self._mode = _ConvMode(probe=ranges)
        self.drop_plans()
        try:
            yield self
        finally:
            self._mode = saved
            self.drop_plans()

    def plan_for(self, shapes: dict[str, tuple]) -> _Plan:
        key = tuple(shapes[name] for name in self.input_names)
        p = self._plans.get(key)
        if p is None:
            for name, dims in self.graph.inputs:
                s = shapes[name]
                if len(s) != len(dims) or any(d is not None and d > 0 and d != v
                                              for d, v in zip(dims, s)):
                    raise ValueError(f"input {name!r} must have shape {dims} (None: any), "
                                     f"got {s}")
            p = self._plans[key] = self._new_plan(dict(shapes))
        self._last, self._last_shapes = p, dict(shapes)
        self._last_floats = (p.arena_floats, sum(o.size for o in p.outputs.values()))
        return p

    def _new_plan(self, shapes: dict) -> _Plan:
        """A plan; a node whose native step refuses this size (UnsupportedOpError from its
        builder) is planned again on onnxruntime, unless strict."""
        foreign: dict[str, str] = {}
        while True:
            try:
                p = _Plan(self.graph, shapes, self.memory, self, self.strict, foreign,
                          self._mode)
                break
            except UnsupportedOpError as exc:
                if self.strict or exc.node_name in foreign or not any(
                        n.name == exc.node_name for n in self.graph.nodes):
                    raise
                foreign[exc.node_name] = str(exc).split("; the native executor runs")[0]
        moved = p.specialised.foreign()
        if moved and not self._warned:
            self._warned = True
            kinds = sorted({f.op for f in moved})
            warnings.warn(f"{len(moved)} of {len(self.graph.nodes)} nodes run on onnxruntime "
                          f"inside the native plan ({', '.join(kinds)}); describe() says why, "
                          f"strict=True refuses instead", RuntimeWarning, stacklevel=4)
        return p

    def drop_plans(self) -> None:
        """Forget every plan (the shared arena they view is being replaced)."""
        self._plans.clear()
        self._last = None

    def run_many(self, feeds: dict) -> dict[str, np.ndarray]:
        """{input name: float32 array} -> {output name: array}. The arrays are owned by the
        executor and overwritten by the next run at the same shape (copy to keep them)."""
        missing = set(self.input_names) - set(feeds)
        if missing:
            raise ValueError(f"missing inputs {sorted(missing)}; the model takes "
                             f"{self.input_names}")
        for name in self.input_names:
            v, want = feeds[name], self.graph.input_dtypes.get(name, np.dtype(np.float32))
            if not isinstance(v, np.ndarray) or v.dtype != want:
                raise TypeError(f"input {name!r} must be a {want} numpy.ndarray, got "
                                f"{getattr(v, 'dtype', type(v).__name__)}")
        if self._auto:
            if len(self.input_names) != 1:
                raise ValueError("precision='auto' chooses on the run of a single-input model; "
                                 "use set_precision() for this one")
            self.calibrate([np.array(feeds[self.input_names[0]], copy=True)])
        p = self.plan_for({name: feeds[name].shape for name in self.input_names})
        for name, buf in p.inputs.items():
            np.copyto(buf, feeds[name])
        p.runner.run()
        return p.outputs

    def run(self, x: np.ndarray) -> np.ndarray:
        """One float32 NCHW input -> the first output, the picture (owned, overwritten by the
        next run); a generator's other outputs (U-GAT-IT's attention maps) are in run_many."""
        if len(self.input_names) != 1:
            raise ValueError(f"run() needs a single-input model; this one has inputs "
                             f"{self.input_names}: use run_many()")
        if self.fixed and isinstance(x, np.ndarray) and x.ndim == 4 \
                and x.shape[2:] != self.fixed:
            # planned first: a hostile declared size fails here, before the resize allocates
            self.plan_for({self.input_names[0]: x.shape[:2] + self.fixed})
            return fitting.run_fitted(self._run_one, x, self.fixed, self.fit)
        return self._run_one(x)

    def _run_one(self, x):
        return self.run_many({self.input_names[0]: x})[self.output_names[0]]

    def arena_bytes(self) -> int:
        """Bytes of the arena the last run's plan uses (0 before a run; may be shared)."""
        return 4 * self._last_floats[0]

    def output_bytes(self) -> int:
        """Bytes of the last run's output buffers (0 before a run; never shared)."""
        return 4 * self._last_floats[1]

    def describe(self, x_shape: tuple | None = None) -> str:
        """The fused node list and arena of the plan for ``x_shape`` (default: the last run)."""
        if x_shape is not None:
            shape = tuple(x_shape)
            if self.fixed and len(shape) == 4 and shape[2:] != self.fixed:
                return fitting.describe(shape, self.fixed, self.fit) + "\n" + self.plan_for(
                    {self.input_names[0]: shape[:2] + self.fixed}).describe()
            return self.plan_for({self.input_names[0]: shape}).describe()
        if self._last_shapes is None:
            return "no plan yet: run() once or pass x_shape"
        text = (self._last or self.plan_for(self._last_shapes)).describe()
        if self.choice is not None:
            text += f"\nprecision {self.choice['precision']} (auto): {self.choice['reason']}"
        return text
