"""a2r_edge: anime/illustration -> photo-realistic pictures, fast on edge CPUs and GPUs.

Public names: ``ops`` (the native image ops), ``__version__``.
"""
from importlib.metadata import PackageNotFoundError, version as _version

from . import ops

try:
    __version__ = _version("a2r_edge")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"

__all__ = ["ops", "__version__"]
