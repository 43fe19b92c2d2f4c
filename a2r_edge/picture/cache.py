"""The result cache: converted pictures by a hash of their bytes and of everything that changes a
result (the model, the plan's placements, the tile size, the style statistics)."""
from __future__ import annotations

import collections
import hashlib
import threading

import numpy as np

CacheInfo = collections.namedtuple("CacheInfo", "hits misses entries bytes max_bytes")


class ResultCache:
    """LRU of converted pictures, bounded in bytes. Stores and returns copies: a caller that
    edits a result in place never changes what the next hit returns. Thread-safe."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._items: collections.OrderedDict[bytes, np.ndarray] = collections.OrderedDict()
        self._bytes = self.hits = self.misses = 0
        self._lock = threading.Lock()

    def get(self, key: bytes) -> np.ndarray | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value.copy()

    def put(self, key: bytes, value: np.ndarray) -> None:
        if value.nbytes > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._items[key] = value.copy()
            self._bytes += value.nbytes
            while self._bytes > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= dropped.nbytes

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self.hits, self.misses, len(self._items), self._bytes,
                             self.max_bytes)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = self.hits = self.misses = 0


def model_key(digest: str, model, placements) -> bytes:
    """The part of every key that names the model (``digest``: its stages' identity) and the
    plan's placements."""
    h = hashlib.blake2b(digest.encode(), digest_size=16)
    h.update(repr((model.mean, model.std, model.stride, model.border_margin,
                   placements)).encode())
    return h.digest()


def picture_key(model_id: bytes, img: np.ndarray, stats, tile) -> bytes:
    """Hash of the picture bytes + shape, the model (``model_key``), and the settings that
    change results."""
    h = hashlib.blake2b(model_id, digest_size=20)
    h.update(repr((img.shape, img.dtype.str, tile)).encode())
    if stats is not None:
        h.update(np.ascontiguousarray(stats[0]).tobytes())
        h.update(np.ascontiguousarray(stats[1]).tobytes())
    if img.flags.c_contiguous:
        h.update(img.data)
    else:  # row by row: a crop's rows are contiguous, no whole-picture copy
        for row in img:
            h.update(np.ascontiguousarray(row).data)
    return h.digest()
