"""Backends: ``reference`` (numpy, the oracle), ``cpu`` (native kernels), ``cuda`` (GPU library,
loaded late with ctypes)."""
