"""a2r_edge: anime/illustration -> photo-realistic pictures, fast on edge CPUs and GPUs.

Public names: ``ops`` (the native image ops), ``__version__``. Submodules load on first use, so
``import a2r_edge`` is cheap and a bad ``A2R_*`` setting surfaces where it is used, as a
``ValueError`` naming the variable.
"""
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("a2r_edge")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"

__all__ = ["ops", "__version__"]
_LAZY = {"ops": "a2r_edge.ops"}


def __getattr__(name):
    if name in _LAZY:
        module = import_module(_LAZY[name])
        globals()[name] = module
        return module
    raise AttributeError(f"module 'a2r_edge' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
