"""The op registry (a2r_edge.model.ops): every op found by name with all its parts, and the numpy
references, run node by node over the random executor graphs, agree with onnxruntime."""
import numpy as np
import pytest

from a2r_edge.runtime.ort import OrtSession
from a2r_edge.model import SUPPORTED, UnsupportedOpError, ops
from a2r_edge.model.graph import Node, build_graph, load_model
from onnx_graphs import random_graph, small_image_net
from tolerances import FILTER


def reference_run(model, feeds):
    """Every node of the loaded (unfused) graph through its OpSpec.reference."""
    graph = build_graph(load_model(model))
    values = dict(graph.consts, **feeds)
    for n in graph.nodes:
        outs = ops.spec(n.op, n.name).reference(n, [values[s] if s else None for s in n.inputs])
        values.update(zip(n.outputs, outs))
    return [values[t] for t in graph.outputs]


def test_every_supported_op_has_a_full_spec():
    assert SUPPORTED == ops.supported()
    for op in ops.supported() | {"AdaIN", "SiLU"}:
        s = ops.spec(op)
        assert s.op_type == op
        assert all(callable(f) for f in (s.out_shapes, s.build, s.reference, s.scratch_shapes))
    assert "SiLU" not in ops.supported()   # made by fusion only, never accepted from a file


def test_unknown_op_is_refused_by_name():
    with pytest.raises(UnsupportedOpError, match=r"NoSuchOp.*'node7'"):
        ops.spec("NoSuchOp", "node7")


def test_constant_and_concat_references_keep_onnx_dtypes():
    c = Node("Constant", "c", [], ["y"], {"value_ints": [1, 3, 8]})
    (v,) = ops.spec("Constant").reference(c, [])
    assert v.dtype == np.int64 and v.tolist() == [1, 3, 8]
    cat = Node("Concat", "cat", ["a", "b"], ["y"], {"axis": 0})
    (y,) = ops.spec("Concat").reference(cat, [v, np.array([5], np.int64)])
    assert y.dtype == np.int64 and y.tolist() == [1, 3, 8, 5]


@pytest.mark.parametrize("seed", range(12))
def test_references_match_onnxruntime(seed):
    m = random_graph(seed)
    c = m.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    x = np.random.default_rng(seed).standard_normal((1, c, 13, 18)).astype(np.float32)
    want = OrtSession(m.SerializeToString(), threads=1).run({"x": x})[0]
    (got,) = reference_run(m, {"x": x})
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, **FILTER)


def test_reference_of_the_small_image_net():
    m = small_image_net(c1=8, c2=16, blocks=1)
    x = np.random.default_rng(1).standard_normal((1, 3, 21, 30)).astype(np.float32)
    want = OrtSession(m.SerializeToString(), threads=1).run({"x": x})[0]
    np.testing.assert_allclose(reference_run(m, {"x": x})[0], want, **FILTER)


def test_resize_reference_reads_the_opset10_form():
    """Resize (X, scales) is opset 10's form: asymmetric coordinates."""
    n = Node("Resize", "r", ["x", "s"], ["y"], {"mode": "nearest"})
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    (y,) = ops.spec("Resize").reference(n, [x, np.array([1, 1, 2, 2], np.float32)])
    assert y[0, 0].tolist() == [[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 3, 3], [2, 2, 3, 3]]
