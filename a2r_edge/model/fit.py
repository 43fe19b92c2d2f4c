"""Pictures of any size through a model exported with a fixed H x W (U-GAT-IT's full generator
flattens its feature map into a Linear layer sized for one picture size).

``resize`` (the default) scales the input to the model's size and the output back to the
picture's size times the model's scale: the whole picture is seen at once, as the model was
trained, at the cost of detail. ``tile`` runs the picture in tiles of the model's size (edges
padded by reflection, then cropped): full detail, but each tile is normalised on its own, so
seams may show with models that use picture-wide statistics. Both allocate per call (the
native plan itself still runs only at the fixed size).

>>> fit.run_fitted(ex.run, x, (256, 256), "resize")     # doctest: +SKIP

A network of any size may still need sizes that are multiples of its downsampling (a U-Net's
skip connections meet its upsampled maps only there): ``size_multiple`` finds it for a plain
ONNX file, whose manifest cannot say it, and the picture is padded to it (the model's stride).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .conventions import layout_of

MODES = ("resize", "tile")

# size_multiple tries (k s)^2 pictures, k odd: an odd count of s-pixel blocks is what a network
# needing a multiple of 2s cannot plan (a halving rounds, and its skip connection no longer
# matches). k is 33 where (33 s) stays within _PROBE_SIDE (clear of a network's minimum size),
# else the largest odd k that does (the plan of a large picture may exceed A2R_MEMORY_MB).
_MULTIPLES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
_PROBE_SIDE = 528


def fixed_hw(inputs: list[tuple[str, tuple]]) -> tuple[int, int] | None:
    """(H, W) when the model's one input is NCHW with both declared as fixed sizes (an NHWC
    input, ``conventions.layout_of``, runs adapted to NCHW: conventions.py)."""
    if len(inputs) != 1 or len(inputs[0][1]) != 4 or layout_of(inputs[0][1]) == "NHWC":
        return None
    h, w = inputs[0][1][2:]
    return (h, w) if isinstance(h, int) and isinstance(w, int) and h > 0 and w > 0 else None


def describe(shape: tuple, fixed: tuple[int, int], mode: str) -> str:
    h, w = shape[2:]
    if mode == "resize":
        return (f"input {h}x{w} is resized to the model's fixed {fixed[0]}x{fixed[1]} and its "
                f"output back to {h}x{w} times the model's scale")
    rows, cols = -(-h // fixed[0]), -(-w // fixed[1])
    return (f"input {h}x{w} runs as {rows}x{cols} tiles of the model's fixed "
            f"{fixed[0]}x{fixed[1]} (edges padded by reflection, output cropped)")


def resize_planes(x: np.ndarray, h: int, w: int) -> np.ndarray:
    """(N, C, H, W) float32 -> (N, C, h, w): area when shrinking both sides, else bilinear."""
    import cv2
    shrink = h < x.shape[2] and w < x.shape[3]
    interp = cv2.INTER_AREA if shrink else cv2.INTER_LINEAR
    out = np.empty(x.shape[:2] + (h, w), np.float32)
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            out[n, c] = cv2.resize(x[n, c], (w, h), interpolation=interp)
    return out


def run_fitted(run: Callable[[np.ndarray], np.ndarray], x: np.ndarray,
               fixed: tuple[int, int], mode: str) -> np.ndarray:
    """``run`` (fixed-size NCHW -> NCHW) applied to ``x`` of another H, W (see the module)."""
    if mode not in MODES:
        raise ValueError(f"fit must be one of {MODES}, got {mode!r}")
    (h, w), (fh, fw) = x.shape[2:], fixed
    if mode == "resize":
        y = run(resize_planes(x, fh, fw))
        sy, sx = y.shape[2] / fh, y.shape[3] / fw
        return resize_planes(y, max(1, round(h * sy)), max(1, round(w * sx)))
    ph, pw = -h % fh, -w % fw
    pad = "reflect" if ph < h and pw < w else "symmetric"
    xp = np.pad(x, ((0, 0), (0, 0), (0, ph), (0, pw)), mode=pad) if ph or pw else x
    out = None
    for i in range(0, h + ph, fh):
        for j in range(0, w + pw, fw):
            y = run(np.ascontiguousarray(xp[:, :, i:i + fh, j:j + fw]))
            s = y.shape[2] // fh
            if out is None:
                if y.shape[2] != s * fh or y.shape[3] != s * fw:
                    raise ValueError(f"tile: the model's output {y.shape[2:]} is not a whole "
                                     f"multiple of its input {fixed}; use fit='resize'")
                out = np.empty(y.shape[:2] + ((h + ph) * s, (w + pw) * s), np.float32)
            out[:, :, i * s:(i + fh) * s, j * s:(j + fw) * s] = y
    return out[:, :, :h * s, :w * s]


def size_multiple(graph) -> int:
    """The smallest of 1, 2, 4, ..., 256 whose odd multiples ``graph`` (a one-input NCHW
    network of any H and W) plans at, tried on square pictures of at most 528 pixels; 1 when
    it plans at the first or at none (a size it cannot take then fails with its own error)."""
    from .specialise import MemoryLimitError, specialise
    if len(graph.inputs) != 1 or fixed_hw(graph.inputs) is not None:
        return 1
    name, dims = graph.inputs[0]
    if len(dims) != 4:
        return 1
    for s in _MULTIPLES:
        k = min(33, _PROBE_SIDE // s)
        side = s * max(1, k - (k % 2 == 0))
        try:
            specialise(graph, {name: (dims[0] or 1, dims[1] or 3, side, side)})
        except MemoryLimitError:
            return 1   # larger pictures need more: no answer
        except ValueError:
            continue
        return s
    return 1
