"""Malformed and hostile graphs get one readable line (ValueError at load or at the first plan),
never a crash, a hang or an allocation beyond the memory setting."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from a2r_edge.model import NativeExecutor

X = np.zeros((1, 3, 8, 8), np.float32)


def model(nodes, inits=(), out_shape=(1, 3, "h", "w"), opset=17, check=True):
    g = helper.make_graph(nodes, "hostile",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         [1, 3, "H", "W"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def i64(*v):
    return np.array(v, np.int64)


W = np.ones((3, 3, 3, 3), np.float32)
HOSTILE = {
    "conv pads 2^62": model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[2**62] * 4)],
                            [("w", W)]),
    "conv strides 0": model([helper.make_node("Conv", ["x", "w"], ["y"], strides=[0, 0])],
                            [("w", W)]),
    "conv dilations 2^40": model([helper.make_node("Conv", ["x", "w"], ["y"],
                                                   dilations=[2**40, 2**40])], [("w", W)]),
    "pad 2^62 (onnxruntime side)": model([helper.make_node("Pad", ["x", "p"], ["y"],
                                                           mode="reflect")],
                                         [("p", i64(0, 0, 2**62, 2**62, 0, 0, 2**62, 2**62))]),
    "resize scale 1e9": model([helper.make_node("Resize", ["x", "", "s"], ["y"])],
                              [("s", np.array([1, 1, 1e9, 1e9], np.float32))]),
    "constant of shape 2^40": model([
        helper.make_node("ConstantOfShape", ["s"], ["c"]),
        helper.make_node("Add", ["x", "c"], ["y"])], [("s", i64(2**20, 2**20))]),
    "range of 2^50": model([
        helper.make_node("Range", ["a", "b", "d"], ["r"]),
        helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "rf"], ["y"])],
        [("a", i64(0)), ("b", i64(2**50)), ("d", i64(1))]),
    "shape arithmetic overflows": model([
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Mul", ["s", "big"], ["t"]),
        helper.make_node("Reshape", ["x", "t"], ["y"])], [("big", i64(1, 1, 2**62, 2**62))]),
    "shape arithmetic goes negative": model([
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Sub", ["s", "k"], ["t"]),
        helper.make_node("Expand", ["x", "t"], ["y"])], [("k", i64(0, 0, 100, 100))]),
    "expand to 2^44": model([helper.make_node("Expand", ["x", "s"], ["y"])],
                            [("s", i64(1, 3, 2**22, 2**22))]),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_graph_is_one_line_value_error(name, monkeypatch):
    monkeypatch.setenv("A2R_MEMORY_MB", "256")
    with pytest.raises(ValueError) as info:
        NativeExecutor(HOSTILE[name]).run(X)
    text = str(info.value)
    assert "\n" not in text and len(text) < 600, text


def test_cycle_and_missing_initialiser_are_refused_at_load():
    cyc = model([helper.make_node("Relu", ["z"], ["y"]), helper.make_node("Relu", ["y"], ["z"])])
    missing = model([helper.make_node("Conv", ["x", "w_missing"], ["y"])])
    for m in (cyc, missing):
        with pytest.raises(ValueError) as info:
            NativeExecutor(m)
        assert "\n" not in str(info.value)


def test_huge_declared_input_size_is_refused_before_allocation(monkeypatch):
    monkeypatch.setenv("A2R_MEMORY_MB", "64")
    m = model([helper.make_node("Relu", ["x"], ["y"])])
    with pytest.raises(ValueError, match="A2R_MEMORY_MB"):
        NativeExecutor(m).plan_for({"x": (1, 3, 1 << 14, 1 << 14)})


def test_huge_declared_fixed_size_is_refused_before_fitting(monkeypatch):
    monkeypatch.setenv("A2R_MEMORY_MB", "64")
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "fixed",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         [1, 3, 1 << 30, 1 << 30])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         [1, 3, 1 << 30, 1 << 30])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    with pytest.raises(ValueError, match="A2R_MEMORY_MB"):
        NativeExecutor(m).run(X)


def test_cli_answers_a_400_byte_hostile_model_with_one_line_exit_2(tmp_path):
    path = tmp_path / "pads.onnx"
    onnx.save(model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[2**62] * 4)],
                    [("w", np.ones((3, 3, 1, 1), np.float32))]), str(path))
    assert os.path.getsize(path) < 400
    import cv2
    cv2.imwrite(str(tmp_path / "in.png"), np.full((16, 16, 3), 128, np.uint8))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-m", "a2r_edge", "convert", "--model", str(path),
                        "-o", str(tmp_path / "out.png"), str(tmp_path / "in.png")],
                       capture_output=True, text=True, timeout=120, cwd=root)
    assert r.returncode == 2, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if "2^31" in ln or "Conv" in ln]
    assert errors and "Traceback" not in r.stderr, r.stderr


def test_legitimate_constant_expand_and_resize_still_fold():
    """The size guard bounds the real output, not a product of sizes: a (64,) bias expanded to
    (1, 64, 1, 1) and a small constant resized fold as before."""
    from a2r_edge.model.specialise import specialise
    from a2r_edge.model.graph import build_graph, load_model
    m = model([helper.make_node("Expand", ["b", "s"], ["e"]),
               helper.make_node("Resize", ["e", "", "", "sz"], ["r"], mode="nearest"),
               helper.make_node("ReduceMean", ["r"], ["m"], axes=[2, 3], keepdims=1),
               helper.make_node("Slice", ["m", "st", "en", "ax"], ["c"]),
               helper.make_node("Add", ["x", "c"], ["y"])],
              [("b", np.arange(64, dtype=np.float32).reshape(1, 64, 1, 1)),
               ("s", i64(1, 64, 1, 1)), ("sz", i64(1, 64, 300, 300)),
               ("st", i64(0)), ("en", i64(3)), ("ax", i64(1))])
    sp = specialise(build_graph(load_model(m)), None)
    assert [n.op for n in sp.graph.nodes] == ["Add"]
