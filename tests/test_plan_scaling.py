"""Loading and planning are linear in the node count: a generated chain of 4x the nodes costs
about 4x the Python work (line events counted under sys.settrace, not wall-clock time)."""
from __future__ import annotations

import sys

import numpy as np

from a2r_edge.model import NativeExecutor
from onnx_graphs import Builder


def chain(nodes: int):
    """Conv -> Relu -> residual Add -> LeakyRelu, repeated: every fusion and in-place path."""
    b = Builder(np.random.default_rng(0), 4)
    x = b.x.name
    while len(b.nodes) < nodes:
        y = b.node("Relu", [b.conv(x, 4, 4)])
        x = b.node("LeakyRelu", [b.node("Add", [y, x])], alpha=0.1)
    return b.model(x)


def traced_lines(fn) -> int:
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        count += 1
        return tracer
    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


def test_load_and_plan_work_grows_linearly():
    work = {}
    for n in (400, 1600):
        m = chain(n)
        work[n] = traced_lines(lambda: NativeExecutor(m).plan_for({"x": (1, 4, 6, 6)}))
    # linear: 4.0x measured; the quadratic fusion and arena planner before measured 12.3x
    assert work[1600] / work[400] < 5, work
