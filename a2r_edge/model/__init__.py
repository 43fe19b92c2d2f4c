"""Model package: the native executor of an ONNX subset (see executor.py, graph.py, arena.py),
the package reader (package.py) and the numpy oracle of each op (reference.py)."""
from .executor import NativeExecutor
from .graph import SUPPORTED, ModelLoadError, UnsupportedOpError

__all__ = ["NativeExecutor", "UnsupportedOpError", "ModelLoadError", "SUPPORTED"]
