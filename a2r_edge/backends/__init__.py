"""Backends: ``reference`` (numpy, the oracle) and ``cpu`` (native kernels)."""
