"""Picture files: reading with the size limit checked before decoding (A2R_MAX_PIXELS), atomic
writing, and the per-file result a converter reports. Shared by the commands (apps/convert.py,
apps/distributed.py, apps/video.py)."""
from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

import numpy as np


class InputError(ValueError):
    """A picture that cannot be read: one line for the user."""


def declared_size(head: bytes) -> tuple[int, int] | None:
    """(width, height) a PNG, JPEG, BMP or WebP header declares, None when not found. Read
    before decoding so that a decompression bomb is refused before OpenCV allocates for it."""
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
        return struct.unpack(">II", head[16:24])
    if head[:2] == b"BM" and len(head) >= 26:
        w, h = struct.unpack("<ii", head[18:26])
        return abs(w), abs(h)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        kind, body = head[12:16], head[20:]
        if kind == b"VP8X" and len(body) >= 10:
            return (int.from_bytes(body[4:7], "little") + 1,
                    int.from_bytes(body[7:10], "little") + 1)
        if kind == b"VP8L" and len(body) >= 5:
            bits = int.from_bytes(body[1:5], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        if kind == b"VP8 " and len(body) >= 10:
            w, h = struct.unpack("<HH", body[6:10])
            return w & 0x3FFF, h & 0x3FFF
        return None
    if head[:2] == b"\xff\xd8":  # JPEG: walk the segments to the first SOFn
        i = 2
        while i + 9 <= len(head) and head[i] == 0xFF:
            marker = head[i + 1]
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                h, w = struct.unpack(">HH", head[i + 5:i + 9])
                return w, h
            i += 2 + struct.unpack(">H", head[i + 2:i + 4])[0]
    return None


def read_bytes(path: Path) -> np.ndarray:
    """The file's bytes (uint8); InputError when it cannot be read or is empty."""
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if data.size == 0:
        raise InputError(f"{path}: empty file")
    return data


def decode_picture(data: np.ndarray, path: Path) -> np.ndarray:
    """A file's bytes (``read_bytes``) -> uint8 picture as OpenCV reads it; ``path`` names the
    picture in errors. InputError for what cannot be decoded or is too large."""
    import cv2

    from .. import _settings
    size, limit = declared_size(data[:1 << 16].tobytes()), _settings.get("A2R_MAX_PIXELS")
    if size is not None and size[0] * size[1] > limit:
        raise InputError(f"{path}: declares {size[0]}x{size[1]} pixels, more than the limit "
                         f"A2R_MAX_PIXELS={limit} (refused before decoding)")
    try:
        img = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
    except cv2.error as exc:  # e.g. OpenCV's own CV_IO_MAX_IMAGE_PIXELS check
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else "decoder error"
        raise InputError(f"{path}: OpenCV refused to decode it: {reason}") from None
    if img is None:
        raise InputError(f"{path}: not a picture OpenCV can decode (corrupt, truncated, or "
                         f"another format)")
    if img.dtype == np.uint16:  # 16-bit PNG: keep the top 8 bits' worth, rounded
        img = ((img.astype(np.uint32) + 128) // 257).astype(np.uint8)
    if img.dtype != np.uint8:
        raise InputError(f"{path}: {img.dtype} pictures are not supported (8-bit or 16-bit only)")
    return img


def read_picture(path: Path) -> np.ndarray:
    return decode_picture(read_bytes(path), path)


def encode_picture(path: Path, img: np.ndarray) -> bytes:
    """``img`` encoded in the format ``path``'s extension names (PNG without one)."""
    import cv2
    ext = path.suffix.lower() or ".png"
    ok, buf = cv2.imencode(ext, img)
    if not ok:
        raise OSError(f"{path}: OpenCV cannot encode {ext} pictures")
    return buf.tobytes()


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: put it straight back
    os.umask(mask)
    return mask


# The mode open() would give a new file; mkstemp's temporary file is 0600 (owner only).
FILE_MODE = 0o666 & ~_umask()


def write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file beside ``path``, then rename into place (never half a file
    under the final name), with the permissions a newly created file gets."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def output_complete(path: Path, src_shape: tuple, scale, sbs: bool) -> bool:
    """True when ``path`` holds a decodable picture of the size converting a picture of
    ``src_shape`` gives (any size when the model's scale is not declared)."""
    import cv2
    if not path.is_file():
        return False
    try:
        out = cv2.imdecode(np.fromfile(path, dtype=np.uint8), cv2.IMREAD_UNCHANGED)
    except (OSError, ValueError, cv2.error):
        return False
    if out is None:
        return False
    if scale is None:
        return True
    h, w = round(src_shape[0] * scale), round(src_shape[1] * scale)
    return out.shape[:2] == (h, 2 * w if sbs else w)


def side_by_side(src: np.ndarray, out: np.ndarray) -> np.ndarray:
    import cv2
    if src.shape[:2] != out.shape[:2]:
        src = cv2.resize(src, (out.shape[1], out.shape[0]), interpolation=cv2.INTER_CUBIC)
    return np.hstack([src.reshape(out.shape), out])


# A picture failing with one of these is reported and skipped (InputError is a ValueError;
# RuntimeError/MemoryError: a conversion refused for its size); anything else is a bug.
CONVERT_ERRORS = (ValueError, OSError, MemoryError, RuntimeError)


# What a converter yields per input: (index into the inputs, the output file's bytes, the
# failure line). (i, bytes, None): converted; (i, None, line): failed; (i, None, None): skipped
# by --resume, its output already complete. Any order; each index once.
Result = tuple[int, "bytes | None", "str | None"]


def failure(src_path: Path, exc: BaseException) -> str:
    """The one line reporting ``exc`` for input ``src_path``; it always names the input."""
    text = str(exc)
    return text if text.startswith(str(src_path)) else f"{src_path}: {type(exc).__name__}: {text}"


def finish(img: np.ndarray, out: np.ndarray, dst_path: Path, sbs: bool) -> bytes:
    """Input ``img`` converted to ``out`` -> the bytes of its output file at ``dst_path``."""
    return encode_picture(dst_path, side_by_side(img, out) if sbs else out)
