"""The native CPU backend: ISA level and thread count of the kernels in ``a2r_edge._kernels``.

At import the best ISA level this CPU and OS support is chosen (capped by ``A2R_MAX_ISA``) and the
thread count is set from ``A2R_NUM_THREADS`` (default: physical cores within the cgroup quota),
and ops whose input and output fill the last-level cache write with streaming stores (the
kernels' ``a2r_stream_min_bytes``). Tests and benchmarks switch the ISA level and the threads
with the ``using_isa`` / ``using_threads`` context managers.
"""
from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from typing import Iterator

from .. import _settings
from .. import _kernels  # libgomp's wait settings: _settings.export_openmp_waits
from . import threads

ISA_LEVELS = _settings.ISA_LEVELS


def build_id() -> str:
    """Identity of the installed native code (version, and the kernels library's size and time):
    what was timed with these kernels (calibrated stage times, the precisions "auto" chose) is
    kept per build, so a rebuilt or upgraded a2r_edge measures anew."""
    from .. import __version__
    st = os.stat(_kernels.__file__)
    return hashlib.blake2b(f"{__version__}:{st.st_size}:{st.st_mtime_ns}".encode(),
                           digest_size=4).hexdigest()


def available_isas() -> tuple[str, ...]:
    """Every level this build has code for and this CPU + OS can run, lowest first."""
    return ISA_LEVELS[: _kernels.best_isa() + 1]


def isa() -> str:
    """The level the kernels run at now."""
    return ISA_LEVELS[_kernels.get_isa()]


def set_isa(level: str) -> str:
    """Run the kernels at ``level`` or the best available below it; returns the level set."""
    if level not in ISA_LEVELS:
        raise ValueError(f"ISA level must be one of {', '.join(ISA_LEVELS)}, got {level!r}")
    return ISA_LEVELS[_kernels.set_isa(ISA_LEVELS.index(level))]


def num_threads() -> int:
    return _kernels.num_threads()


def set_num_threads(n: int) -> int:
    """Threads each kernel uses (1 when built without OpenMP), at most
    ``_settings.max_threads()``; returns the count set."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= _settings.max_threads():
        raise ValueError(f"thread count must be an int in [1, {_settings.max_threads()}], "
                         f"got {n!r}")
    return _kernels.set_num_threads(n)


def openmp_enabled() -> bool:
    return _kernels.openmp_enabled()


@contextmanager
def using_isa(level: str) -> Iterator[str]:
    previous = isa()
    try:
        yield set_isa(level)
    finally:
        set_isa(previous)


@contextmanager
def using_threads(n: int) -> Iterator[int]:
    previous = num_threads()
    try:
        yield set_num_threads(n)
    finally:
        set_num_threads(previous)


def stream_min_bytes(caches: dict | None) -> int:
    """The footprint (bytes read + written) from which an op's output bypasses the caches: the
    last-level cache's size, where its output could not stay cached for the next op anyway
    (0: never, sizes unknown)."""
    return max((caches or {}).values(), default=0)


set_isa(_settings.get("A2R_MAX_ISA") or ISA_LEVELS[-1])
_kernels.set_stream_min_bytes(stream_min_bytes(threads.cache_sizes()))
set_num_threads(_settings.get("A2R_NUM_THREADS") or threads.default_threads())
