"""Shared fixtures: every native test runs at each ISA level this CPU has x 1 and 2 threads."""
import os
import tempfile

import numpy as np
import pytest

# Calibrations and profiles the tests cause go to a throw-away folder, never the user's cache;
# it is removed when the test process exits (each xdist worker has its own).
if "A2R_CACHE_DIR" not in os.environ:
    _CACHE = tempfile.TemporaryDirectory(prefix="a2r_test_cache_")
    os.environ["A2R_CACHE_DIR"] = _CACHE.name

from a2r_edge.runtime import cpu

ISAS = cpu.available_isas()
THREADS = (1, 2)


@pytest.fixture(params=ISAS)
def isa(request):
    """Run the test body with the native kernels at one ISA level."""
    with cpu.using_isa(request.param) as level:
        assert level == request.param
        yield level


@pytest.fixture(params=THREADS, ids=lambda n: f"{n}thr")
def threads(request):
    with cpu.using_threads(request.param) as n:
        yield n


@pytest.fixture(params=[False, True], ids=["cached", "streamed"])
def stores(request):
    """Both ways a norm writes its output: plain stores, and the streaming stores it takes where
    its footprint reaches the last-level cache (forced here on small arrays)."""
    from a2r_edge import _kernels
    old = _kernels.set_stream_min_bytes(1 if request.param else 0)
    try:
        yield request.param
    finally:
        _kernels.set_stream_min_bytes(old)


@pytest.fixture
def native(isa, threads):
    """The option matrix in one fixture: (isa level, thread count)."""
    return isa, threads


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def pytest_report_header(config):
    return (f"a2r_edge native: ISA levels {', '.join(ISAS)}; "
            f"OpenMP {'on' if cpu.openmp_enabled() else 'off'}")
