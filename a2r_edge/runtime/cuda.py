"""CUDA backend: the ctypes loader of ``a2r_edge/_a2r_cuda.so`` (cuda_ops/, contract in
cuda_ops/a2r_cuda.h) and a small numpy-in, numpy-out API over its ops.

Loading fails late and explains itself: importing this module never touches the library, the
driver or a GPU. ``available()`` / ``why_unavailable()`` probe once (library file, loadable,
every symbol, ABI version, driver, device) and cache the answer; the first GPU call on a machine
that cannot run one raises ``CudaUnavailable`` (a ``RuntimeError``) naming what is missing.
Every symbol's ``argtypes``/``restype`` is set once, when the library is loaded.

Memory: a ``Context`` owns one stream, a ``DevicePool`` and a ``PinnedPool`` of named buffers
that grow to the largest request and are then reused (no cudaMalloc per frame). Uploads go
numpy -> pinned staging -> device (async on the stream); downloads the reverse, then one sync.
Not thread-safe: one Context per thread.

Over 500 lines on purpose: this file is the library's whole ctypes face (every symbol's
signature, the status codes, the pools and one wrapper per op), as cuda_ops/a2r_cuda_api.cu is its
whole C ABI; splitting it would split one contract across files.
"""
from __future__ import annotations

import ctypes
import threading
from pathlib import Path

import numpy as np

from .. import _settings
from ..ops import ACT_CODES

ABI_VERSION = 1  # must equal A2R_CUDA_ABI_VERSION in cuda_ops/a2r_cuda.h
LIBRARY_NAME = "_a2r_cuda.so"

# Status codes (a2r_cuda.h)
OK, EINVAL, ENOMEM, ENODRIVER, ENODEVICE, ERUNTIME = range(6)
_STATUS_NAMES = {EINVAL: "invalid argument", ENOMEM: "out of memory",
                 ENODRIVER: "no NVIDIA driver", ENODEVICE: "no CUDA device",
                 ERUNTIME: "CUDA runtime error"}
# The activations the CUDA kernels fuse, by ops.ACT_CODES (the codes a2r_cuda.h shares).
ACTIVATIONS = {name: ACT_CODES[name] for name in (None, "silu", "relu")}


class CudaError(RuntimeError):
    """A CUDA library call failed; ``status`` is its a2r_cuda.h code."""

    def __init__(self, message: str, status: int = ERUNTIME):
        super().__init__(message)
        self.status = status


class CudaOutOfMemory(CudaError, MemoryError):
    """Device or pinned host memory exhausted (or injected with A2R_CUDA_FAULT=oom)."""


class CudaUnavailable(CudaError):
    """No GPU path on this machine; the message says what is missing."""


# --- the ABI: every symbol's (restype, argtypes), set once at load ------------------------------

_c_int, _c_i64, _c_f, _vp = ctypes.c_int, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p
_pi, _pi64, _pf = ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int64), \
    ctypes.POINTER(ctypes.c_float)
_pvp = ctypes.POINTER(ctypes.c_void_p)

SIGNATURES = {
    "a2r_cuda_abi_version": (_c_int, []),
    "a2r_cuda_last_error": (ctypes.c_char_p, []),
    "a2r_cuda_versions": (_c_int, [_pi, _pi]),
    "a2r_cuda_device_count": (_c_int, [_pi]),
    "a2r_cuda_device_name": (_c_int, [_c_int, ctypes.c_char_p, _c_i64]),
    "a2r_cuda_device_capability": (_c_int, [_c_int, _pi, _pi]),
    "a2r_cuda_set_device": (_c_int, [_c_int]),
    "a2r_cuda_mem_info": (_c_int, [_pi64, _pi64]),
    "a2r_cuda_stream_create": (_c_int, [_pvp]),
    "a2r_cuda_stream_destroy": (_c_int, [_vp]),
    "a2r_cuda_stream_synchronize": (_c_int, [_vp]),
    "a2r_cuda_device_synchronize": (_c_int, []),
    "a2r_cuda_event_create": (_c_int, [_pvp]),
    "a2r_cuda_event_destroy": (_c_int, [_vp]),
    "a2r_cuda_event_record": (_c_int, [_vp, _vp]),
    "a2r_cuda_event_elapsed_ms": (_c_int, [_vp, _vp, _pf]),
    "a2r_cuda_malloc": (_c_int, [_pvp, _c_i64]),
    "a2r_cuda_free": (_c_int, [_vp]),
    "a2r_cuda_host_alloc": (_c_int, [_pvp, _c_i64]),
    "a2r_cuda_host_free": (_c_int, [_vp]),
    "a2r_cuda_memcpy_h2d": (_c_int, [_vp, _vp, _c_i64, _vp]),
    "a2r_cuda_memcpy_d2h": (_c_int, [_vp, _vp, _c_i64, _vp]),
    "a2r_cuda_memcpy_d2d": (_c_int, [_vp, _vp, _c_i64, _vp]),
    "a2r_cuda_preprocess": (_c_int, [_vp, _c_i64, _c_i64, _pf, _pf, _vp, _vp]),
    "a2r_cuda_postprocess": (_c_int, [_vp, _c_i64, _c_i64, _c_i64, _pf, _pf, _vp, _vp]),
    "a2r_cuda_stats_workspace_bytes": (_c_i64, [_c_i64, _c_i64]),
    "a2r_cuda_channel_stats": (_c_int, [_vp, _c_i64, _c_i64, _c_f, _vp, _vp, _vp, _c_i64, _vp]),
    "a2r_cuda_adain": (_c_int, [_vp, _c_i64, _c_i64, _vp, _vp, _vp, _vp, _c_f, _c_int, _vp, _vp,
                                _c_i64, _vp]),
    "a2r_cuda_silu": (_c_int, [_vp, _vp, _c_i64, _vp]),
    "a2r_cuda_pixel_shuffle": (_c_int, [_vp, _c_i64, _c_i64, _c_i64, _c_i64, _c_i64, _vp, _vp]),
    "a2r_cuda_guided_filter_workspace_bytes": (_c_i64, [_c_i64, _c_i64, _c_i64, _c_i64]),
    "a2r_cuda_guided_filter": (_c_int, [_vp, _c_i64, _vp, _c_i64, _c_i64, _c_i64, _c_i64, _c_f,
                                        _vp, _vp, _c_i64, _vp]),
}


def library_path() -> Path:
    """Where setup.py puts the library (next to this package's __init__)."""
    return Path(__file__).resolve().parent.parent / LIBRARY_NAME


_lock = threading.Lock()
_lib_state: tuple | None = None     # (lib or None, reason)
_device_state: tuple | None = None  # (ok, reason)


def _load_library():
    path = library_path()
    if not path.exists():
        return None, (f"no CUDA library built: {path} does not exist (it is built with nvcc on "
                      "PATH or under CUDA_HOME when the NVIDIA driver shows a GPU; "
                      "A2R_WITH_CUDA=1 builds it regardless and makes a missing nvcc an error)")
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        text = str(exc)
        if "cudart" in text:
            return None, f"libcudart missing: {path} needs the CUDA runtime library ({text})"
        return None, f"the CUDA library {path} could not be loaded: {text}"
    for name, (restype, argtypes) in SIGNATURES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            return None, (f"stale CUDA library {path}: symbol {name} is missing; rebuild it "
                          "(python setup.py build_ext --inplace)")
        fn.restype, fn.argtypes = restype, argtypes
    found = lib.a2r_cuda_abi_version()
    if found != ABI_VERSION:
        return None, (f"stale CUDA library {path}: ABI version {found}, this package expects "
                      f"{ABI_VERSION}; rebuild it (python setup.py build_ext --inplace)")
    return lib, ""


def _lib_or_none():
    global _lib_state
    with _lock:
        if _lib_state is None:
            _lib_state = _load_library()
        return _lib_state


def library():
    """The loaded, ABI-checked library (no device needed); CudaUnavailable when it cannot be."""
    lib, reason = _lib_or_none()
    if lib is None:
        raise CudaUnavailable(f"a2r_edge CUDA backend unavailable: {reason}", ENODEVICE)
    return lib


def last_error(lib=None) -> str:
    lib = lib or library()
    return (lib.a2r_cuda_last_error() or b"").decode(errors="replace")


def check(status: int, lib=None) -> None:
    """Raise the exception for a non-zero status, with the library's message."""
    if status == OK:
        return
    message = last_error(lib) or _STATUS_NAMES.get(status, f"status {status}")
    if status == ENOMEM:
        raise CudaOutOfMemory(message, status)
    if status in (ENODRIVER, ENODEVICE):
        raise CudaUnavailable(message, status)
    if status == EINVAL:
        raise CudaError(f"invalid argument: {message}", status)
    raise CudaError(message, status)


def _probe_device():
    lib, reason = _lib_or_none()
    if lib is None:
        return False, reason
    count = ctypes.c_int(0)
    status = lib.a2r_cuda_device_count(ctypes.byref(count))
    if status == OK and count.value > 0:
        return True, ""
    message = last_error(lib)
    runtime, driver = ctypes.c_int(0), ctypes.c_int(0)
    lib.a2r_cuda_versions(ctypes.byref(runtime), ctypes.byref(driver))
    rt = f"{runtime.value // 1000}.{runtime.value % 1000 // 10}"
    if status == ENODRIVER:
        if driver.value == 0:
            return False, (f"no NVIDIA driver: libcuda.so was not found (CUDA runtime {rt} needs "
                           f"a driver; {message})")
        return False, (f"NVIDIA driver too old: it supports CUDA {driver.value // 1000}."
                       f"{driver.value % 1000 // 10}, the library needs {rt} ({message})")
    if status in (ENODEVICE, OK):
        return False, f"no CUDA device: {message or 'the driver reports 0 devices'}"
    return False, f"CUDA device probe failed: {message}"


def _device_ok():
    global _device_state
    if _device_state is None:
        state = _probe_device()
        with _lock:
            _device_state = state
    return _device_state


def available() -> bool:
    """True when the library loads, its ABI matches and a CUDA device is usable."""
    return _device_ok()[0]


def why_unavailable() -> str:
    """'' when available(); otherwise what is missing (library, libcudart, driver, device)."""
    return _device_ok()[1]


def _reset_probe_for_tests() -> None:
    global _lib_state, _device_state
    with _lock:
        _lib_state = _device_state = None


def require():
    """The library, when a GPU call can run; else CudaUnavailable naming what is missing."""
    ok, reason = _device_ok()
    if not ok:
        raise CudaUnavailable(f"a2r_edge GPU backend unavailable: {reason}", ENODEVICE)
    return _lib_state[0]


def device_info(device: int = 0) -> dict:
    """name, compute capability, memory and versions of one device."""
    lib = require()
    name = ctypes.create_string_buffer(256)
    check(lib.a2r_cuda_device_name(device, name, len(name)), lib)
    major, minor = ctypes.c_int(), ctypes.c_int()
    check(lib.a2r_cuda_device_capability(device, ctypes.byref(major), ctypes.byref(minor)), lib)
    free, total = mem_info()
    runtime, driver = ctypes.c_int(), ctypes.c_int()
    check(lib.a2r_cuda_versions(ctypes.byref(runtime), ctypes.byref(driver)), lib)
    return {"name": name.value.decode(errors="replace"), "capability": (major.value, minor.value),
            "free_bytes": free, "total_bytes": total, "runtime": runtime.value,
            "driver": driver.value}


def mem_info() -> tuple[int, int]:
    """(free, total) device memory in bytes (cudaMemGetInfo)."""
    lib = require()
    free, total = ctypes.c_int64(), ctypes.c_int64()
    check(lib.a2r_cuda_mem_info(ctypes.byref(free), ctypes.byref(total)), lib)
    return free.value, total.value


# --- memory and streams ---------------------------------------------------------------------

class DeviceBuffer:
    """nbytes of device memory; free() (or the pool) releases it."""

    def __init__(self, nbytes: int):
        lib = require()
        ptr = ctypes.c_void_p()
        check(lib.a2r_cuda_malloc(ctypes.byref(ptr), int(nbytes)), lib)
        self.ptr, self.nbytes, self._lib = ptr.value, int(nbytes), lib

    def free(self) -> None:
        if self.ptr:
            ptr, self.ptr = self.ptr, None
            check(self._lib.a2r_cuda_free(ptr), self._lib)


class PinnedBuffer:
    """nbytes of page-locked host memory; view(dtype, shape) is a numpy array over it."""

    def __init__(self, nbytes: int):
        lib = require()
        ptr = ctypes.c_void_p()
        check(lib.a2r_cuda_host_alloc(ctypes.byref(ptr), int(nbytes)), lib)
        self.ptr, self.nbytes, self._lib = ptr.value, int(nbytes), lib

    def view(self, dtype, shape) -> np.ndarray:
        dtype = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if n > self.nbytes:
            raise ValueError(f"view of {n} bytes exceeds the pinned buffer ({self.nbytes})")
        raw = (ctypes.c_uint8 * n).from_address(self.ptr)
        return np.frombuffer(raw, dtype=dtype).reshape(shape)

    def free(self) -> None:
        if self.ptr:
            ptr, self.ptr = self.ptr, None
            check(self._lib.a2r_cuda_host_free(ptr), self._lib)


class _Pool:
    """Named buffers that grow to the largest request and are reused; `allocations` counts the
    real allocations (tests check it stays flat over repeated frames)."""

    kind = DeviceBuffer

    def __init__(self):
        self._buffers: dict[str, object] = {}
        self.allocations = 0

    def get(self, name: str, nbytes: int):
        nbytes = max(int(nbytes), 1)
        buf = self._buffers.get(name)
        if buf is None or buf.nbytes < nbytes:
            if buf is not None:
                del self._buffers[name]
                buf.free()
            buf = self.kind(nbytes)
            self.allocations += 1
            self._buffers[name] = buf
        return buf

    def close(self) -> None:
        buffers, self._buffers = list(self._buffers.values()), {}
        for buf in buffers:
            buf.free()


class DevicePool(_Pool):
    kind = DeviceBuffer


class PinnedPool(_Pool):
    kind = PinnedBuffer


class Context:
    """One stream, a device pool and a pinned staging pool; the ops below run on them.

    Each op uploads its inputs (numpy -> pinned -> device, async), enqueues its kernels, then
    downloads the result and synchronises once. Buffers are reused across calls: frames of the
    largest size seen so far cause no allocation."""

    def __init__(self):
        self._lib = require()
        _settings.get("A2R_CUDA_FAULT")  # a malformed value is a ValueError naming it, here
        handle = ctypes.c_void_p()
        check(self._lib.a2r_cuda_stream_create(ctypes.byref(handle)), self._lib)
        self.stream = handle.value
        self.device = DevicePool()
        self.pinned = PinnedPool()

    def close(self) -> None:
        if self.stream is not None:
            self.synchronize()
            self.device.close()
            self.pinned.close()
            stream, self.stream = self.stream, None
            check(self._lib.a2r_cuda_stream_destroy(stream), self._lib)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def synchronize(self) -> None:
        check(self._lib.a2r_cuda_stream_synchronize(self.stream), self._lib)

    # staging
    def upload(self, name: str, array: np.ndarray) -> DeviceBuffer:
        """Copy array to the device buffer `name` (through the pinned buffer `name`)."""
        array = np.ascontiguousarray(array)
        stage = self.pinned.get(name, array.nbytes)
        np.copyto(stage.view(array.dtype, array.shape), array)
        dev = self.device.get(name, array.nbytes)
        check(self._lib.a2r_cuda_memcpy_h2d(dev.ptr, stage.ptr, array.nbytes, self.stream),
              self._lib)
        return dev

    def download(self, name: str, dev: DeviceBuffer, dtype, shape) -> np.ndarray:
        """Copy device memory back into a new numpy array (waits for the stream)."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        stage = self.pinned.get(name, nbytes)
        check(self._lib.a2r_cuda_memcpy_d2h(stage.ptr, dev.ptr, nbytes, self.stream), self._lib)
        self.synchronize()
        return stage.view(dtype, shape).copy()

    def _out(self, name: str, dtype, shape) -> DeviceBuffer:
        return self.device.get(name, int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize)

    # ops (numpy in, numpy out)
    def preprocess(self, img, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5)) -> np.ndarray:
        img = _typed(img, "img", np.uint8)
        if img.ndim != 3 or img.shape[2] != 3:
            raise ValueError(f"img must have shape (H, W, 3), got {img.shape}")
        m, s = np.asarray(mean, np.float32), np.asarray(std, np.float32)
        scale = (1.0 / (255.0 * s.astype(np.float64))).astype(np.float32)  # as ops.preprocess
        bias = (-m.astype(np.float64) / s).astype(np.float32)
        h, w = img.shape[:2]
        src, dst = self.upload("in0", img), self._out("out0", np.float32, (3, h, w))
        check(self._lib.a2r_cuda_preprocess(src.ptr, h, w, _f3(scale), _f3(bias), dst.ptr,
                                            self.stream), self._lib)
        return self.download("out0", dst, np.float32, (1, 3, h, w))

    def postprocess(self, x, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), r: int = 1) -> np.ndarray:
        """x: (1, 3*r*r, H, W) or (3*r*r, H, W), the tensor before a PixelShuffle of factor r."""
        x = _typed(x, "x", np.float32)
        if int(r) != r or r < 1:
            raise ValueError(f"r must be an integer >= 1, got {r!r}")
        r = int(r)
        if x.ndim == 4 and x.shape[0] == 1:
            x = x[0]
        if x.ndim != 3 or x.shape[0] != 3 * r * r:
            raise ValueError(f"x must have shape (1, {3 * r * r}, H, W) or ({3 * r * r}, H, W), "
                             f"got {x.shape}")
        h, w = x.shape[1:]
        src, dst = self.upload("in0", x), self._out("out0", np.uint8, (h * r, w * r, 3))
        check(self._lib.a2r_cuda_postprocess(src.ptr, h, w, r, _f3(mean), _f3(std), dst.ptr,
                                             self.stream), self._lib)
        return self.download("out0", dst, np.uint8, (h * r, w * r, 3))

    def channel_stats(self, x, eps=1e-5):
        x = _typed(x, "x", np.float32)
        if x.ndim != 4:
            raise ValueError(f"x must have shape (N, C, H, W), got {x.shape}")
        n, c, h, w = x.shape
        nc, hw = n * c, h * w
        src = self.upload("in0", x)
        ws = self.device.get("ws", self._lib.a2r_cuda_stats_workspace_bytes(nc, hw))
        mean, std = self._out("out0", np.float32, (nc,)), self._out("out1", np.float32, (nc,))
        check(self._lib.a2r_cuda_channel_stats(src.ptr, nc, hw, float(eps), mean.ptr, std.ptr,
                                               ws.ptr, ws.nbytes, self.stream), self._lib)
        return (self.download("out0", mean, np.float32, (n, c)),
                self.download("out1", std, np.float32, (n, c)))

    def adain(self, x, style_mean, style_std, eps=1e-5, content_stats=None, activation=None):
        x = _typed(x, "x", np.float32)
        if x.ndim != 4:
            raise ValueError(f"x must have shape (N, C, H, W), got {x.shape}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {list(ACTIVATIONS)}, got {activation!r}")
        n, c, h, w = x.shape
        nc, hw = n * c, h * w
        per_plane = [np.ascontiguousarray(np.broadcast_to(np.asarray(a, np.float32), (n, c)))
                     for a in (style_mean, style_std)]
        src = self.upload("in0", x)
        sm, ss = self.upload("in1", per_plane[0]), self.upload("in2", per_plane[1])
        cm = cs = None
        if content_stats is not None:
            cm = self.upload("in3", np.asarray(content_stats[0], np.float32).reshape(nc))
            cs = self.upload("in4", np.asarray(content_stats[1], np.float32).reshape(nc))
        ws = self.device.get("ws", self._lib.a2r_cuda_stats_workspace_bytes(nc, hw))
        dst = self._out("out0", np.float32, x.shape)
        check(self._lib.a2r_cuda_adain(src.ptr, nc, hw, sm.ptr, ss.ptr, cm and cm.ptr,
                                       cs and cs.ptr, float(eps), ACTIVATIONS[activation],
                                       dst.ptr, ws.ptr, ws.nbytes, self.stream), self._lib)
        return self.download("out0", dst, np.float32, x.shape)

    def silu(self, x) -> np.ndarray:
        x = _typed(x, "x", np.float32)
        if x.size == 0:
            raise ValueError("x must not be empty")
        src, dst = self.upload("in0", x), self._out("out0", np.float32, x.shape)
        check(self._lib.a2r_cuda_silu(src.ptr, dst.ptr, x.size, self.stream), self._lib)
        return self.download("out0", dst, np.float32, x.shape)

    def pixel_shuffle(self, x, r: int) -> np.ndarray:
        x = _typed(x, "x", np.float32)
        if x.ndim != 4 or r < 1 or x.shape[1] % (r * r):
            raise ValueError(f"x must be (N, C*r*r, H, W) with r >= 1, got {x.shape}, r={r}")
        n, crr, h, w = x.shape
        shape = (n, crr // (r * r), h * r, w * r)
        src, dst = self.upload("in0", x), self._out("out0", np.float32, shape)
        check(self._lib.a2r_cuda_pixel_shuffle(src.ptr, n, crr // (r * r), h, w, r, dst.ptr,
                                               self.stream), self._lib)
        return self.download("out0", dst, np.float32, shape)

    def guided_filter(self, guide, src, radius: int, eps: float) -> np.ndarray:
        guide, src = _typed(guide, "guide", np.float32), _typed(src, "src", np.float32)
        if guide.ndim not in (2, 3) or (guide.ndim == 3 and guide.shape[2] != 3):
            raise ValueError(f"guide must be (H, W) or (H, W, 3), got {guide.shape}")
        if src.ndim not in (2, 3) or src.shape[:2] != guide.shape[:2]:
            raise ValueError(f"src must be (H, W) or (H, W, C) like guide, got {src.shape}")
        h, w = guide.shape[:2]
        gc = 1 if guide.ndim == 2 else 3
        sc = 1 if src.ndim == 2 else src.shape[2]
        g, s = self.upload("in0", guide), self.upload("in1", src)
        ws = self.device.get("ws", self._lib.a2r_cuda_guided_filter_workspace_bytes(gc, sc, h, w))
        dst = self._out("out0", np.float32, src.shape)
        check(self._lib.a2r_cuda_guided_filter(g.ptr, gc, s.ptr, sc, h, w, int(radius),
                                               float(eps), dst.ptr, ws.ptr, ws.nbytes,
                                               self.stream), self._lib)
        return self.download("out0", dst, np.float32, src.shape)


def _typed(a, name: str, dtype) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype != dtype:
        raise TypeError(f"{name} must be {np.dtype(dtype).name}, got {a.dtype}")
    return np.ascontiguousarray(a)


def _f3(values) -> ctypes.Array:
    v = np.asarray(values, np.float32).reshape(3)
    return (ctypes.c_float * 3)(*(float(t) for t in v))


_default: Context | None = None


def default_context() -> Context:
    """A process-wide Context, made on first use (raises CudaUnavailable without a GPU)."""
    global _default
    if _default is None:
        _default = Context()
    return _default


def _op(name):
    def call(*args, **kwargs):
        return getattr(default_context(), name)(*args, **kwargs)
    call.__name__ = name
    call.__doc__ = f"Context.{name} on the default context (see Context)."
    return call


preprocess = _op("preprocess")
postprocess = _op("postprocess")
channel_stats = _op("channel_stats")
adain = _op("adain")
silu = _op("silu")
pixel_shuffle = _op("pixel_shuffle")
guided_filter = _op("guided_filter")

__all__ = ["available", "why_unavailable", "require", "library", "library_path", "check",
           "device_info", "mem_info", "Context", "DeviceBuffer", "PinnedBuffer", "DevicePool",
           "PinnedPool", "CudaError", "CudaOutOfMemory", "CudaUnavailable", "default_context",
           "preprocess", "postprocess", "channel_stats", "adain", "silu", "pixel_shuffle",
           "guided_filter", "ABI_VERSION", "SIGNATURES"]
