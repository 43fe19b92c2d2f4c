"""Liveness planner: place buffers with known lifetimes in one arena, reusing freed ranges.

A buffer is (size in floats, first step, last step), both steps inclusive: a buffer written at
step s and one read at step s never share memory (an op's inputs and outputs stay apart unless
the caller merged them on purpose, e.g. in place). Greedy by size, largest first (the TFLite
"greedy by size" offset planner): each buffer takes the lowest offset that does not overlap a
buffer already placed whose lifetime intersects its own. Offsets are multiples of ``ALIGN``.
"""
from __future__ import annotations

import weakref

import numpy as np

ALIGN = 16   # floats: 64 bytes, one cache line and one AVX-512 register, for every view


def _round_up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def plan(buffers: list[tuple[int, int, int]]) -> tuple[list[int], int]:
    """Offsets (in floats) of ``buffers`` [(size, first, last)] and the arena size in floats.

    The buffers placed so far are indexed by the steps they live in, so finding those that
    overlap a new buffer in time costs min(its lifetime, buffers placed) rather than a scan of
    every placed buffer: planning a chain is linear in its length."""
    order = sorted(range(len(buffers)), key=lambda i: (-buffers[i][0], buffers[i][1]))
    offsets = [0] * len(buffers)
    placed: list[int] = []
    alive: dict[int, list[int]] = {}   # step -> placed buffers living in it
    total = 0
    for i in order:
        size, first, last = buffers[i]
        size = _round_up(max(size, 1))
        if last - first + 1 <= len(placed):
            near = {j for step in range(first, last + 1) for j in alive.get(step, ())}
        else:
            near = [j for j in placed if buffers[j][1] <= last and first <= buffers[j][2]]
        busy = sorted((offsets[j], offsets[j] + _round_up(max(buffers[j][0], 1))) for j in near)
        offset = 0
        for lo, hi in busy:
            if offset + size <= lo:
                break
            offset = max(offset, hi)
        offsets[i] = offset
        placed.append(i)
        for step in range(first, last + 1):
            alive.setdefault(step, []).append(i)
        total = max(total, offset + size)
    return offsets, total


class SharedArena:
    """The float32 memory behind the plans of executors that never run at the same time (an
    Engine runs its network stages one after another, under its lock): one buffer as large as
    the largest plan instead of one per plan. Growing it drops every plan bound to the old
    buffer (their users re-plan on their next run), so the old buffer is freed before the new
    one is made rather than lingering beside it."""

    def __init__(self):
        self._buf = np.empty(0, np.float32)
        self._users = weakref.WeakSet()  # objects with drop_plans(): their plans view _buf

    @property
    def nbytes(self) -> int:
        return self._buf.nbytes

    def take(self, floats: int, user) -> np.ndarray:
        """A view of at least ``floats`` floats, valid until the arena grows; ``user`` gets
        ``drop_plans()`` called when it does."""
        if floats > self._buf.size:
            users, self._users = list(self._users), weakref.WeakSet()
            for u in users:
                u.drop_plans()
            self._buf = np.empty(0, np.float32)
            self._buf = np.empty(floats, np.float32)
        self._users.add(user)
        return self._buf[:floats]
