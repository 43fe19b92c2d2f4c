"""The native executor's ops, found by name: ``spec(op_type)`` gives the ``OpSpec`` (output
shapes, plan-time builder of the run closure, scratch buffers, in-place flag, numpy reference).

Each op's whole story is in its family's module: elementwise.py (one-tensor math and
activations), binary.py (broadcast arithmetic, comparisons), conv.py, conv_transpose.py,
pool.py, norm.py, matmul.py, reduce.py (and Softmax), resize.py (and Upsample), pad.py,
tensor.py (data movement), shape.py (reshapes and shape arithmetic). Adding an op: write its
functions there and ``register`` an OpSpec.

>>> from a2r_edge.model import ops
>>> ops.spec("Relu").inplace
True
>>> "Conv" in ops.supported()
True
"""
from __future__ import annotations

from . import (binary, conv, conv_transpose, elementwise, matmul, norm, pad,  # noqa: F401
               pool, reduce, resize, shape, tensor)   # (each registers its ops)
from .base import (ADAIN_DOMAIN, ADAIN_OP, DEFAULT_DOMAINS, OpSpec, UnsupportedOpError, lookup,
                   onnx_ops)
from .conv import takes_u8

__all__ = ["OpSpec", "UnsupportedOpError", "spec", "supported", "takes_u8", "ADAIN_DOMAIN",
           "ADAIN_OP", "DEFAULT_DOMAINS"]


def spec(op_type: str, node_name: str = "?") -> OpSpec:
    """The OpSpec of ``op_type``; UnsupportedOpError (naming ``node_name``) when none."""
    s = lookup(op_type)
    if s is None:
        raise UnsupportedOpError(op_type, node_name)
    return s


def supported() -> frozenset:
    """The ONNX (default-domain) op types the native executor runs (besides the a2r AdaIN)."""
    return onnx_ops()
