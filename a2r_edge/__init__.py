"""a2r_edge: anime/illustration -> photo-realistic pictures, fast on edge CPUs and GPUs.

Public names: ``Engine`` (convert pictures), ``ops`` (the native image ops), ``load_model``
(read and check a model package or plain ONNX file), ``detect_hardware`` (this machine's
``HardwareProfile``), ``__version__``. They load on first use, so
``import a2r_edge`` is cheap and a bad ``A2R_*`` setting surfaces where it is used, as a
``ValueError`` naming the variable.
"""
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version as _version

from . import _settings

_settings.export_opencv_limit()  # before anything loads cv2: OpenCV reads its limit once
_settings.export_openmp_waits()  # before anything loads the kernels (and libgomp with them)

try:
    __version__ = _version("a2r_edge")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"

__all__ = ["Engine", "ops", "load_model", "detect_hardware", "__version__"]
# public name -> (module, attribute or None for the module itself)
_LAZY = {"ops": ("a2r_edge.ops", None), "Engine": ("a2r_edge.engine", "Engine"),
         "load_model": ("a2r_edge.model.package", "resolve"),
         "detect_hardware": ("a2r_edge.runtime.system", "detect_hardware")}


def __getattr__(name):
    if name in _LAZY:
        module_name, attr = _LAZY[name]
        value = import_module(module_name)
        if attr is not None:
            value = getattr(value, attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'a2r_edge' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
