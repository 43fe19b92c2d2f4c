"""Native executor: runs an ONNX image model of the supported op set on the a2r_edge CPU ops.

Per input shape it builds a plan once (cached): static shapes, the fused node list, one float32
arena holding every intermediate at an offset chosen by liveness (``arena.py``), and one closure
per node with its views bound. A run then copies the input into the arena and calls the
closures: no numpy allocation after the first run at a given shape (the prepacked convolutions
size their workspaces on that run). Not thread-safe: one executor runs one picture at a time.

>>> ex = NativeExecutor("model.onnx")              # doctest: +SKIP
>>> y = ex.run(x)   # x float32 (1, 3, H, W); y is owned by ex and overwritten by the next run
"""
from __future__ import annotations

import numpy as np

from .. import ops
from .. import _kernels
from . import arena
from .graph import (Graph, Node, UnsupportedOpError, build_graph, conv_pads, fuse,
                    infer_shapes, load_model, resize_params)

_HALF = np.array(0.5, np.float32)  # 0-d constants: a ufunc converts a Python scalar anew each call


# --- per-op step builders: each returns a closure over bound views (or None) -------------------

_INPLACE = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "SiLU", "AdaIN", "Add", "Mul"}


def _scratch_shapes(n: Node, shapes, graph: Graph) -> list[tuple]:
    if n.op == "LeakyRelu":
        return [shapes[n.outputs[0]]]
    if n.op == "Conv":
        x = shapes[n.inputs[0]]
        t, l, b, r = conv_pads(n, x, n.attrs["w"].shape)
        return [] if (t, l) == (b, r) else [(x[0], x[1], x[2] + t + b, x[3] + l + r)]
    if n.op == "Resize":
        nb, c, h, w = shapes[n.inputs[0]]
        oh, ow = shapes[n.outputs[0]][2:]
        if resize_params(n, graph.consts, (nb, c, h, w), graph.opset)["mode"] == "nearest":
            return [(nb, c, oh, w)]
        return [(nb, c, oh, w), (nb, c, oh, w), (nb, c, oh, ow)]
    return []


def _const_input(graph, n, k, what):
    name = n.inputs[k] if len(n.inputs) > k else ""
    if not name:
        return None
    if name not in graph.consts:
        raise UnsupportedOpError(n.op, n.name, f"{what} must be a constant")
    return np.asarray(graph.consts[name], np.float32)


def _resize_axis(in_size, out_size, scale, p, linear):
    """Source indices (and weights of the upper neighbour for linear) of one axis, with
    onnxruntime's float32 coordinate arithmetic."""
    xr = np.arange(out_size, dtype=np.float32)
    s = np.float32(scale)
    coord = p["coord"]
    if coord == "half_pixel":
        xo = (xr + np.float32(0.5)) / s - np.float32(0.5)
    elif coord == "pytorch_half_pixel":
        xo = (xr + np.float32(0.5)) / s - np.float32(0.5) if out_size > 1 else np.zeros_like(xr)
    elif coord == "asymmetric":
        xo = xr / s
    else:  # align_corners
        xo = xr * np.float32(in_size - 1) / np.float32(out_size - 1) if out_size > 1 \
            else np.zeros_like(xr)
    if not linear:
        mode = p["nearest"]
        if mode == "floor":
            i = np.floor(xo)
        elif mode == "ceil":
            i = np.ceil(xo)
        else:
            half = xo - np.floor(xo) == np.float32(0.5)
            prefer = np.floor(xo) if mode == "round_prefer_floor" else np.ceil(xo)
            i = np.where(half, prefer, np.floor(xo + np.float32(0.5)))
        return np.clip(i, 0, in_size - 1).astype(np.intp), None, None
    xo = np.clip(xo, np.float32(0), np.float32(in_size - 1))
    i0 = np.minimum(xo.astype(np.intp), in_size - 1)
    i1 = np.minimum(i0 + 1, in_size - 1)
    w1 = (xo - i0.astype(np.float32)).astype(np.float32)
    return i0, i1, w1


def _build_step(n: Node, graph: Graph, shapes, view, scratch):
    """The closure that runs fused node ``n`` (views from ``view(name)``) or None."""
    op, a = n.op, n.attrs
    y = view(n.outputs[0]) if op != "Concat" else None
    if op == "Conv":
        x = view(n.inputs[0])
        res = view(n.inputs[1]) if len(n.inputs) > 1 else None
        w = a["w"]
        t, l, b, r = conv_pads(n, x.shape, w.shape)
        conv = ops.Conv2d(w, a["b"], stride=tuple(a.get("strides") or (1, 1)),
                          pad=(t, l) if (t, l) == (b, r) else (0, 0),
                          dilation=tuple(a.get("dilations") or (1, 1)), groups=a.get("group", 1),
                          activation=a["activation"], alpha=a.get("alpha", 0.01))
        if (t, l) == (b, r):
            return lambda: conv(x, residual=res, out=y)
        padded = scratch[0]
        inner = padded[:, :, t:t + x.shape[2], l:l + x.shape[3]]

        def padded_conv():
            padded.fill(0)
            np.copyto(inner, x)
            conv(padded, residual=res, out=y)
        return padded_conv
    if op in ("Relu", "Sigmoid", "Tanh", "SiLU", "LeakyRelu", "Clip", "Identity"):
        x = view(n.inputs[0])
        if op == "Relu":
            zero = np.zeros((), np.float32)
            return lambda: np.maximum(x, zero, out=y)
        if op == "Tanh":
            return lambda: np.tanh(x, out=y)
        if op == "Identity":
            return lambda: np.copyto(y, x)
        if op == "SiLU":
            xf, yf = x.reshape(-1), y.reshape(-1)
            return lambda: _kernels.silu(xf, yf)
        if op == "Sigmoid":   # 0.5 * tanh(x / 2) + 0.5: exact sigmoid, no exp overflow warnings
            def sigmoid():
                np.multiply(x, _HALF, out=y)
                np.tanh(y, out=y)
                np.multiply(y, _HALF, out=y)
                np.add(y, _HALF, out=y)
            return sigmoid
        if op == "LeakyRelu":
            alpha = np.array(a.get("alpha", 0.01), np.float32)
            pick = np.maximum if alpha <= 1 else np.minimum
            tmp = scratch[0]

            def leaky():
                np.multiply(x, alpha, out=tmp)
                pick(x, tmp, out=y)
            return leaky
        # Clip: bounds are inputs from opset 11, attributes before
        if graph.opset >= 11:
            lo, hi = _const_input(graph, n, 1, "min"), _const_input(graph, n, 2, "max")
        else:
            lo = np.asarray(a["min"], np.float32) if "min" in a else None
            hi = np.asarray(a["max"], np.float32) if "max" in a else None
        lo = np.array(-np.inf if lo is None else lo, np.float32).reshape(())
        hi = np.array(np.inf if hi is None else hi, np.float32).reshape(())

        def clip():
            np.maximum(x, lo, out=y)
            np.minimum(y, hi, out=y)
        return clip
    if op in ("Add", "Mul"):
        p, q = (np.ascontiguousarray(graph.consts[s], np.float32) if s in graph.consts
                else view(s) for s in n.inputs[:2])
        ufunc = np.add if op == "Add" else np.multiply
        return lambda: ufunc(p, q, out=y)
    if op == "AdaIN":
        x = view(n.inputs[0])
        nb, c, h, w = x.shape
        eps = float(a.get("epsilon", 1e-5))
        if not eps > 0:
            raise ValueError(f"{op} node {n.name!r}: epsilon must be > 0, got {eps}")
        if a.get("activation") not in ops.ACT_CODES:
            raise AssertionError(f"fusion gave AdaIN activation {a.get('activation')!r}")
        act, alpha = ops.ACT_CODES[a.get("activation")], float(a.get("alpha", 0.01))
        stats, feeds = [], []
        for s in n.inputs[1:3]:
            shape = shapes[s]
            if shape not in ((c,), (nb, c)):
                raise ValueError(f"{op} node {n.name!r}: style statistics {s!r} must have shape "
                                 f"({c},) or ({nb}, {c}), got {shape}")
            if s in graph.consts:
                stats.append(np.ascontiguousarray(np.broadcast_to(
                    graph.consts[s].astype(np.float32), (nb, c))).reshape(-1))
            else:   # a graph input: broadcast into a plan-owned buffer each run
                buf = np.empty(nb * c, np.float32)
                feeds.append((buf.reshape(nb, c), view(s)))
                stats.append(buf)
        sm, ss = stats
        xf, yf = x.reshape(-1), y.reshape(-1)

        def adain():
            for dst, src in feeds:
                np.copyto(dst, src)
            _kernels.adain(xf, nb * c, h * w, sm, ss, None, None, eps, act, alpha, yf)
        return adain
    if op == "DepthToSpace":
        x = view(n.inputs[0])
        r = a["blocksize"]
        nb, c, h, w = y.shape
        if a.get("mode", "DCR") == "CRD":
            xf, yf = x.reshape(-1), y.reshape(-1)
            return lambda: _kernels.pixel_shuffle(xf, nb, c, h // r, w // r, r, yf)
        src = x.reshape(nb, r, r, c, h // r, w // r).transpose(0, 3, 4, 1, 5, 2)
        dst = y.reshape(nb, c, h // r, r, w // r, r)
        return lambda: np.copyto(dst, src)
    if op == "Resize":
        x = view(n.inputs[0])
        p = resize_params(n, graph.consts, x.shape, graph.opset)
        (h, w), (oh, ow) = x.shape[2:], y.shape[2:]
        linear = p["mode"] == "linear"
        ry0, ry1, wy = _resize_axis(h, oh, p["scales"][0], p, linear)
        rx0, rx1, wx = _resize_axis(w, ow, p["scales"][1], p, linear)
        if not linear:
            rows = scratch[0]

            def nearest():
                np.take(x, ry0, axis=2, out=rows, mode="clip")
                np.take(rows, rx0, axis=3, out=y, mode="clip")
            return nearest
        top, bottom, right = scratch
        wy1, wy0 = wy.reshape(-1, 1), (1 - wy).reshape(-1, 1)
        wx1, wx0 = wx, 1 - wx

        def bilinear():
            np.take(x, ry0, axis=2, out=top, mode="clip")
            np.take(x, ry1, axis=2, out=bottom, mode="clip")
            np.multiply(top, wy0, out=top)
            np.multiply(bottom, wy1, out=bottom)
            np.add(top, bottom, out=top)
            np.take(top, rx0, axis=3, out=y, mode="clip")
            np.take(top, rx1, axis=3, out=right, mode="clip")
            np.multiply(y, wx0, out=y)
            np.multiply(right, wx1, out=right)
            np.add(y, right, out=y)
        return bilinear
    if op == "Concat":
        out = view(n.outputs[0])
        axis = a["axis"] % out.ndim
        copies, k = [], 0
        for s in n.inputs:
            size = shapes[s][axis]
            if s not in a.get("aliased", ()):
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
    raise UnsupportedOpError(op, n.name)


# --- the plan -----------------------------------------------------------------------------------

class _Plan:
    """Everything one input shape needs: fused nodes, buffer offsets, arena, bound closures."""

    def __init__(self, graph: Graph, input_shapes: dict[str, tuple], memory: arena.SharedArena,
                 user):
        self.input_shapes = input_shapes
        shapes = infer_shapes(graph, input_shapes)
        nodes, self.fusions = fuse(graph, shapes)
        for nd in nodes:   # a fused node keeps the input-independent parts of its attributes
            nd.attrs.pop("aliased", None)
        consts, outs = graph.consts, set(graph.outputs)
        produced = {t: i for i, nd in enumerate(nodes) for t in nd.outputs}
        last = {t: i for i, nd in enumerate(nodes) for t in nd.inputs if t}
        size = lambda t: int(np.prod(shapes[t], dtype=np.int64))  # noqa: E731

        groups: list[dict] = []   # size, members [(tensor)], external array or None
        loc: dict[str, tuple[int, int]] = {}

        def new_group(t, external=None, first=None):
            groups.append(dict(size=size(t), members=[t], external=external,
                               first=produced.get(t, -1) if first is None else first))
            loc[t] = (len(groups) - 1, 0)

        for name in input_shapes:
            new_group(name, first=-1)
        self.outputs = {}
        for t in graph.outputs:
            if t in consts or t in input_shapes:
                raise ValueError(f"graph output {t!r} is a constant or an input; nothing to run")
            self.outputs[t] = np.empty(shapes[t], np.float32)
            new_group(t, external=self.outputs[t])
        # Concat: producers write straight into their slice of the output when it is contiguous
        self.aliased = 0
        cons = {}
        for nd in nodes:
            for t in nd.inputs:
                if t:
                    cons.setdefault(t, []).append(nd)
        for nd in reversed(nodes):
            if nd.op != "Concat":
                continue
            o = nd.outputs[0]
            if o not in loc:
                new_group(o)
            g, base = loc[o]
            shape = shapes[o]
            axis = nd.attrs["axis"] % len(shape)
            inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
            aliased, k = set(), 0
            for t in nd.inputs:
                if int(np.prod(shape[:axis])) == 1 and t in produced and t not in loc \
                        and t not in outs and len(cons.get(t, [])) == 1 \
                        and nd.inputs.count(t) == 1:
                    loc[t] = (g, base + k * inner)
                    groups[g]["members"].append(t)
                    aliased.add(t)
                k += shapes[t][axis]
            nd.attrs["aliased"] = aliased
            self.aliased += len(aliased)
        # Other tensors: in place over a dying input of the same shape, else a buffer of their own
        tensor_last = lambda t: max(last.get(t, -1), produced.get(t, -1))  # noqa: E731
        self.inplace = 0
        scratch_ids: list[list[int]] = []
        for i, nd in enumerate(nodes):
            for t in nd.outputs:
                if t in loc:
                    continue
                for x in (nd.inputs if nd.op in _INPLACE else ()):
                    if not x or x in consts or shapes[x] != shapes[t] or x not in loc:
                        continue
                    grp = groups[loc[x][0]]
                    if grp["external"] is None and all(
                            tensor_last(m) <= i for m in grp["members"]):
                        loc[t] = loc[x]
                        grp["members"].append(t)
                        self.inplace += 1
                        break
                else:
                    new_group(t)
            ids = []
            for shp in _scratch_shapes(nd, shapes, graph):
                groups.append(dict(size=int(np.prod(shp)), members=[], external=None, first=i,
                                   last=i, shape=shp))
                ids.append(len(groups) - 1)
            scratch_ids.append(ids)
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
            return flat[off:off + size(t)].reshape(shapes[t])

        self.inputs = {name: view(name) for name in input_shapes}
        self.steps = []
        for nd, ids in zip(nodes, scratch_ids):
            scratch = [self.arena[groups[j]["offset"]:groups[j]["offset"] + groups[j]["size"]]
                       .reshape(groups[j]["shape"]) for j in ids]
            step = _build_step(nd, graph, shapes, view, scratch)
            if step is not None:
                self.steps.append(step)
        self.nodes, self.shapes, self.loc, self.groups = nodes, shapes, loc, groups

    def describe(self) -> str:
        lines = [f"plan for inputs {self.input_shapes}: {len(self.nodes)} fused nodes, "
                 f"{len(self.steps)} steps; arena {self.arena_floats * 4 / 2**20:.2f} MiB "
                 f"(without reuse {self.naive_floats * 4 / 2**20:.2f} MiB); "
                 f"{self.inplace} in place, {self.aliased} written into concat slices",
                 "fusions: " + ", ".join(f"{k}={v}" for k, v in self.fusions.items())]
        for i, nd in enumerate(self.nodes):
            t = nd.outputs[0]
            g, off = self.loc[t]
            where = "output" if self.groups[g]["external"] is not None \
                else f"arena+{(self.groups[g]['offset'] + off) * 4}B"
            extra = []
            if nd.op == "Conv":
                w = nd.attrs["w"]
                extra.append(f"{w.shape[2]}x{w.shape[3]} s{(nd.attrs.get('strides') or [1])[0]}"
                             f" g{nd.attrs.get('group', 1)} +bias")
                if len(nd.inputs) > 1:
                    extra.append(f"+residual({nd.inputs[1]})")
            if nd.attrs.get("activation"):
                extra.append(f"+{nd.attrs['activation']}")
            lines.append(f"{i:3d} {nd.op:<13} {nd.name!r:<24} {' '.join(extra):<34} -> {t} "
                         f"{self.shapes[t]} @ {where}")
        return "\n".join(lines)


class NativeExecutor:
    """Run an ONNX model of the supported op set (graph.SUPPORTED + the AdaIN stage) natively.

    model: a path, bytes or onnx.ModelProto. Raises UnsupportedOpError (a ValueError naming the
    op and its node) for any other op, ModelLoadError for bytes that are not a valid model.
    memory: the arena.SharedArena its plans live in, shared with executors that never run at
    the same time as this one (default: its own).
    """

    def __init__(self, model, memory: arena.SharedArena | None = None):
        self.graph = build_graph(load_model(model))
        self.memory = arena.SharedArena() if memory is None else memory
        self.input_names = [name for name, _ in self.graph.inputs]
        self.output_names = list(self.graph.outputs)
        self._plans: dict[tuple, _Plan] = {}
        self._last: _Plan | None = None
        # the last plan's input shapes and (arena, outputs) sizes: they outlive drop_plans()
        self._last_shapes: dict | None = None
        self._last_floats = (0, 0)

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
            p = self._plans[key] = _Plan(self.graph, dict(shapes), self.memory, self)
        self._last, self._last_shapes = p, dict(shapes)
        self._last_floats = (p.arena_floats, sum(o.size for o in p.outputs.values()))
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
            v = feeds[name]
            if not isinstance(v, np.ndarray) or v.dtype != np.float32:
                raise TypeError(f"input {name!r} must be a float32 numpy.ndarray, got "
                                f"{getattr(v, 'dtype', type(v).__name__)}")
        p = self.plan_for({name: feeds[name].shape for name in self.input_names})
        for name, buf in p.inputs.items():
            np.copyto(buf, feeds[name])
        for step in p.steps:
            step()
        return p.outputs

    def run(self, x: np.ndarray) -> np.ndarray:
        """One float32 NCHW input -> the one output (owned, overwritten by the next run)."""
        if len(self.input_names) != 1 or len(self.output_names) != 1:
            raise ValueError(f"run() needs a single-input single-output model; this one has "
                             f"inputs {self.input_names} and outputs {self.output_names}: use "
                             f"run_many()")
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
            return self.plan_for({self.input_names[0]: tuple(x_shape)}).describe()
        if self._last_shapes is None:
            return "no plan yet: run() once or pass x_shape"
        return (self._last or self.plan_for(self._last_shapes)).describe()
