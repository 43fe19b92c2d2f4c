"""Model package: the native executor of an ONNX subset (see executor.py, graph.py, arena.py)."""
from .executor import NativeExecutor
from .graph import SUPPORTED, ModelLoadError, UnsupportedOpError

__all__ = ["NativeExecutor", "UnsupportedOpError", "ModelLoadError", "SUPPORTED"]
