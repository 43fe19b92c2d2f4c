"""Transpose on the native a2r_transpose kernel (a batch of 2-D transposes of 4-byte elements:
NCHW <-> NHWC, the Transposes tf2onnx leaves in Keras graphs) against numpy, at each ISA level x
thread count: sides below, at and past the 8 x 8 blocks and 64 x 64 tiles, thin matrices (below
8 rows or columns), batches; which permutations reduce to it (swapped_blocks), and that the
others and other dtypes keep numpy's copies."""
import itertools

import numpy as np
import pytest
from onnx import TensorProto, helper

from a2r_edge import _kernels
from a2r_edge.model import NativeExecutor
from a2r_edge.model.ops.tensor import swapped_blocks

SIDES = [1, 3, 7, 8, 9, 63, 64, 65, 130]


@pytest.mark.parametrize("rows", SIDES)
def test_kernel_matches_numpy(native, rng, rows):
    for cols in SIDES:
        for batch in (1, 3):
            x = rng.standard_normal((batch, rows, cols)).astype(np.float32)
            y = np.full((batch, cols, rows), np.nan, np.float32)
            _kernels.transpose(x.reshape(-1), batch, rows, cols, y.reshape(-1))
            np.testing.assert_array_equal(y, x.transpose(0, 2, 1), err_msg=f"{x.shape}")


def test_kernel_on_a_map_large_enough_for_threads(native, rng):
    """A (1, 64, 96, 100) map to NHWC and back: tiles shared between threads, values moved bit
    for bit (NaN payloads and signed zeros included)."""
    x = rng.standard_normal((64, 96 * 100)).astype(np.float32)
    x.reshape(-1)[:5] = [np.nan, -0.0, np.inf, -np.inf, 1e-45]
    y = np.empty((96 * 100, 64), np.float32)
    _kernels.transpose(x.reshape(-1), 1, 64, 96 * 100, y.reshape(-1))
    assert y.tobytes() == np.ascontiguousarray(x.T).tobytes()
    back = np.empty_like(x)
    _kernels.transpose(y.reshape(-1), 1, 96 * 100, 64, back.reshape(-1))
    assert back.tobytes() == x.tobytes()


@pytest.mark.parametrize("rank", [2, 3, 4, 5])
def test_swapped_blocks_is_the_transpose_whenever_it_answers(rank):
    """For every permutation of shapes with and without axes of 1: where swapped_blocks gives
    (batch, rows, cols), x as (batch, rows, cols) transposed is x.transpose(perm) value for
    value; it answers for NCHW <-> NHWC and the 2-D transpose."""
    rng = np.random.default_rng(rank)
    answered = set()
    for shape in [(2, 3, 4, 5, 6)[:rank], (1, 3, 1, 5, 2)[:rank], (3, 1, 4, 1, 2)[:rank]]:
        x = rng.standard_normal(shape).astype(np.float32)
        for perm in itertools.permutations(range(rank)):
            blocks = swapped_blocks(shape, perm)
            if blocks is None:
                continue
            b, r, c = blocks
            got = x.reshape(b, r, c).transpose(0, 2, 1).reshape(-1)
            np.testing.assert_array_equal(got, x.transpose(perm).reshape(-1), err_msg=str(perm))
            answered.add((shape, perm))
    if rank == 2:
        assert ((2, 3), (1, 0)) in answered
    if rank == 4:
        assert ((2, 3, 4, 5), (0, 2, 3, 1)) in answered and ((2, 3, 4, 5), (0, 3, 1, 2)) in answered
        assert swapped_blocks((2, 3, 4, 5), (0, 2, 1, 3)) is None    # the last axis kept
        assert swapped_blocks((2, 3, 4, 5), (3, 2, 1, 0)) is None    # reversed: no 2-D swap


def _model(shape, perm, dtype=TensorProto.FLOAT):
    g = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], perm=list(perm))], "g",
                          [helper.make_tensor_value_info("x", dtype, shape)],
                          [helper.make_tensor_value_info("y", dtype, [shape[p] for p in perm])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("shape,perm,native_step", [
    ((1, 19, 23, 40), (0, 2, 3, 1), True),     # NCHW -> NHWC
    ((2, 23, 19, 40), (0, 3, 1, 2), True),     # NHWC -> NCHW, a batch
    ((1, 70, 66, 64), (0, 3, 2, 1), False),    # NHWC -> NCWH: numpy's slices
    ((2, 5, 6, 7), (0, 2, 1, 3), False),       # the last axis kept: numpy's one copy
])
def test_executor_transposes(rng, shape, perm, native_step):
    """The plan's Transpose step calls the kernel exactly for the block swaps; every path gives
    numpy's values."""
    x = rng.standard_normal(shape).astype(np.float32)
    ex = NativeExecutor(_model(shape, perm), strict=True)
    calls = []
    real = _kernels.transpose
    _kernels.transpose = lambda *a: calls.append(a[1:4]) or real(*a)
    try:
        got = ex.run(x)
    finally:
        _kernels.transpose = real
    np.testing.assert_array_equal(got, x.transpose(perm))
    assert bool(calls) == native_step, calls


def test_executor_integer_transpose_keeps_numpy(rng):
    """A 4-byte integer tensor is moved by numpy (the kernel's Python entry takes float32)."""
    x = rng.integers(-1000, 1000, (1, 9, 10, 11)).astype(np.int32)
    ex = NativeExecutor(_model(x.shape, (0, 2, 3, 1), TensorProto.INT32), strict=True)
    np.testing.assert_array_equal(ex.run(x), x.transpose(0, 2, 3, 1))
