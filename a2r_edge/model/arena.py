"""Liveness planner: place buffers with known lifetimes in one arena, reusing freed ranges.

A buffer is (size in floats, first step, last step), both steps inclusive: a buffer written at
step s and one read at step s never share memory (an op's inputs and outputs stay apart unless
the caller merged them on purpose, e.g. in place). Greedy by size, largest first (the TFLite
"greedy by size" offset planner): each buffer takes the lowest offset that does not overlap a
buffer already placed whose lifetime intersects its own. Offsets are multiples of ``ALIGN``.
"""
from __future__ import annotations

ALIGN = 16   # floats: 64 bytes, one cache line and one AVX-512 register, for every view


def _round_up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def plan(buffers: list[tuple[int, int, int]]) -> tuple[list[int], int]:
    """Offsets (in floats) of ``buffers`` [(size, first, last)] and the arena size in floats."""
    order = sorted(range(len(buffers)), key=lambda i: (-buffers[i][0], buffers[i][1]))
    offsets = [0] * len(buffers)
    placed: list[int] = []
    total = 0
    for i in order:
        size, first, last = buffers[i]
        size = _round_up(max(size, 1))
        busy = sorted((offsets[j], offsets[j] + _round_up(max(buffers[j][0], 1)))
                      for j in placed if buffers[j][1] <= last and first <= buffers[j][2])
        offset = 0
        for lo, hi in busy:
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        offsets[i] = offset
        placed.append(i)
        total = max(total, offset + size)
    return offsets, total
