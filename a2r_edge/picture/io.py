"""Picture files: reading within limits, decoding, encoding, and the per-file result a
converter reports. Shared by the commands (apps/convert.py, apps/distributed.py,
apps/video.py).

Reading refuses, before a byte is decoded: what is not a regular file (a FIFO would block the
read forever), a file larger than any picture within ``A2R_MAX_PIXELS`` can be
(``max_file_bytes``: a 4 GiB sparse file is not read), and a header declaring more pixels than
the limit (``declared_size``: PNG, JPEG, BMP, WebP, GIF, TIFF). Headers can lie or hide (a GIF
named .png, a JPEG's frame header after 64 KiB of padding, a TIFF's IFD at its end), so
OpenCV's own decoder limit is set from the setting too (``_settings.export_opencv_limit`` at
package import, before OpenCV loads: it reads the variable once) and the decoded size is
checked again.

Writing is runtime/files.py's (``write_atomic``).
"""
from __future__ import annotations

import os
import stat
import struct
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .. import _settings
from ..runtime.files import file_kind

# Bytes per pixel of the largest uncompressed picture this package reads (16-bit RGBA), and
# room for metadata (EXIF, ICC profiles, thumbnails): a file larger than
# pixels * 8 + 16 MiB holds no picture within the pixel limit.
MAX_BYTES_PER_PIXEL = 8
METADATA_BYTES = 16 << 20


class InputError(ValueError):
    """A picture that cannot be read: one line for the user."""


def max_file_bytes(max_pixels: int) -> int:
    return max_pixels * MAX_BYTES_PER_PIXEL + METADATA_BYTES


def _jpeg_segments(data: bytes):
    """(marker, offset of its 0xFF) of each JPEG segment with a length field, in order, walking
    padding 0xFF bytes and application segments of any length; stops at bytes that are not a
    segment."""
    i, n = 2, len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0x01, 0xD8) or 0xD0 <= marker <= 0xD7:  # no length field
            i += 2
            continue
        yield marker, i
        i += 2 + struct.unpack(">H", data[i + 2:i + 4])[0]


def _is_jpeg_frame(marker: int) -> bool:
    """SOFn: the frame header (0xC4, 0xC8, 0xCC are other segments in that range)."""
    return 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC)


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a JPEG's first frame header (SOFn)."""
    for marker, i in _jpeg_segments(data):
        if _is_jpeg_frame(marker):
            if i + 9 > len(data):
                return None
            h, w = struct.unpack(">HH", data[i + 5:i + 9])
            return w, h
    return None


def _tiff_tags(data: bytes, tags: tuple[int, ...]) -> dict[int, int]:
    """{tag: value} of the SHORT or LONG ``tags`` found in a TIFF structure's first IFD (a TIFF
    file, or the EXIF block of a JPEG, PNG or WebP: offsets count from its "II*"/"MM*" head)."""
    order = "<" if data[:2] == b"II" else ">"
    if len(data) < 8:
        return {}
    ifd = struct.unpack(order + "I", data[4:8])[0]
    if ifd + 2 > len(data):
        return {}
    count = struct.unpack(order + "H", data[ifd:ifd + 2])[0]
    found = {}
    for k in range(count):
        e = ifd + 2 + 12 * k
        if e + 12 > len(data):
            break
        tag, kind = struct.unpack(order + "HH", data[e:e + 4])
        if tag in tags:
            fmt = order + ("H" if kind == 3 else "I")
            found[tag] = struct.unpack(fmt, data[e + 8:e + 8 + struct.calcsize(fmt)])[0]
    return found


def _tiff_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a TIFF's first IFD (tags ImageWidth 256, ImageLength 257)."""
    found = _tiff_tags(data, (256, 257))
    return (found[256], found[257]) if len(found) == 2 else None


EXIF_ORIENTATION = 274  # the TIFF/EXIF tag: how the stored pixels are turned for display


def _exif_block(data: bytes):
    """The EXIF block (a TIFF structure) of a JPEG (APP1 "Exif"), PNG (eXIf chunk) or WebP
    (EXIF chunk), None when there is none. (TIFF files are left out: OpenCV's TIFF decoder
    applies their Orientation tag itself, also under IMREAD_UNCHANGED.)"""
    n = len(data)
    if data[:2] == b"\xff\xd8":
        for marker, i in _jpeg_segments(data):
            if _is_jpeg_frame(marker) or marker == 0xDA:  # EXIF comes before the picture
                return None
            if marker == 0xE1 and data[i + 4:i + 10] == b"Exif\x00\x00":
                return data[i + 10:i + 2 + struct.unpack(">H", data[i + 2:i + 4])[0]]
        return None
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        i = 8
        while i + 8 <= n:
            length, kind = struct.unpack(">I", data[i:i + 4])[0], data[i + 4:i + 8]
            if kind == b"eXIf":
                return data[i + 8:i + 8 + length]
            if kind == b"IEND":
                return None
            i += 12 + length
        return None
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        i = 12
        while i + 8 <= n:
            kind, length = data[i:i + 4], struct.unpack("<I", data[i + 4:i + 8])[0]
            if kind == b"EXIF":
                block = data[i + 8:i + 8 + length]
                # some writers keep JPEG's "Exif\0\0" prefix in the chunk
                return block[6:] if block[:6] == b"Exif\x00\x00" else block
            i += 8 + length + (length & 1)  # chunks are padded to an even size
    return None


def exif_orientation(data: bytes) -> int:
    """The EXIF Orientation (1..8) a JPEG, PNG or WebP file states; 1 (as stored) when it
    states none or another value."""
    block = _exif_block(data)
    value = _tiff_tags(block, (EXIF_ORIENTATION,)).get(EXIF_ORIENTATION) if block else None
    return value if value in range(1, 9) else 1


def orient(img: np.ndarray, orientation: int) -> np.ndarray:
    """``img`` turned as viewers show a picture of that EXIF ``orientation`` (the stored rows
    and columns of 2..8 mirrored and/or transposed; OpenCV's IMREAD_COLOR does the same, but
    IMREAD_UNCHANGED, which keeps alpha and 16 bits, does not). OpenCV's transpose and flip:
    numpy's strided copy of the same took 7-95 ms on a 4000x3000 BGR picture, they 4-21 ms."""
    import cv2
    out = img
    if orientation >= 5:
        out = cv2.transpose(out)
    rows, cols = orientation in (3, 4, 7, 8), orientation in (2, 3, 6, 7)
    if rows or cols:
        out = cv2.flip(out, -1 if rows and cols else 0 if rows else 1)
    # OpenCV returns an (H, W) array for an (H, W, 1) one: the channel axis put back
    return out.reshape(out.shape[:2] + img.shape[2:])


def declared_size(head: bytes) -> tuple[int, int] | None:
    """(width, height) a PNG, JPEG, BMP, WebP, GIF or TIFF header declares, None when not
    found. Read before decoding so that a decompression bomb is refused before OpenCV
    allocates for it. ``head``: the file's bytes (the JPEG walk may need all of them)."""
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR" and len(head) >= 24:
        return struct.unpack(">II", head[16:24])
    if _is_os2_bitmap(head):
        return struct.unpack("<HH", head[18:22])
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
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        return struct.unpack("<HH", head[6:10])  # the logical screen: the canvas decoded
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return _tiff_size(head)
    if head[:2] == b"\xff\xd8":
        return _jpeg_size(head)
    return None


def read_bytes(path: Path) -> np.ndarray:
    """The file's bytes (uint8); InputError when it is not a regular file, is larger than a
    picture within A2R_MAX_PIXELS can be, cannot be read, or is empty."""
    limit = max_file_bytes(_settings.get("A2R_MAX_PIXELS"))
    try:
        # O_NONBLOCK: opening a FIFO without a writer returns at once instead of blocking
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    st = os.fstat(fd)  # of what was opened (a folder opens too, and fdopen names the fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise InputError(f"{path}: {file_kind(st.st_mode)}, not a regular file")
    with os.fdopen(fd, "rb") as f:
        if st.st_size > limit:
            raise InputError(f"{path}: {st.st_size} bytes, more than any picture within "
                             f"A2R_MAX_PIXELS can take ({limit} bytes); not read")
        try:
            data = np.fromfile(f, dtype=np.uint8, count=limit + 1)
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if data.size == 0:
        raise InputError(f"{path}: empty file")
    if data.size > limit:  # grew while being read
        raise InputError(f"{path}: more than {limit} bytes; not read")
    return data


def _is_os2_bitmap(head) -> bool:
    """An OS/2 1.x BMP (12-byte core header, 16-bit sizes): OpenCV misreads these as gray."""
    return head[:2] == b"BM" and len(head) >= 26 and struct.unpack("<I", head[14:18])[0] == 12


def _decode_os2_bitmap(data: np.ndarray, path: Path) -> np.ndarray:
    """The 24-bit OS/2 1.x bitmaps (bottom-up BGR rows padded to 4 bytes); InputError with the
    reason for the palette ones."""
    w, h, _planes, bits = struct.unpack("<HHHH", data[18:26].tobytes())
    offset = struct.unpack("<I", data[10:14].tobytes())[0]
    if bits != 24:
        raise InputError(f"{path}: an OS/2 1.x bitmap of {bits} bits per pixel; only 24-bit "
                         f"ones are read (save it as PNG or a Windows BMP)")
    row = (3 * w + 3) // 4 * 4
    if w == 0 or h == 0 or offset + row * h > data.size:
        raise InputError(f"{path}: a truncated OS/2 1.x bitmap ({w}x{h})")
    rows = data[offset:offset + row * h].reshape(h, row)[::-1, :3 * w]
    return np.ascontiguousarray(rows).reshape(h, w, 3)


def decode_picture(data: np.ndarray, path: Path) -> np.ndarray:
    """A file's bytes (``read_bytes``) -> uint8 picture as OpenCV reads it (16-bit pictures are
    rounded to 8 bits: ``is_16_bit`` tells the caller to say so), turned as its EXIF
    orientation says (as viewers show it: the output carries no EXIF); ``path`` names the
    picture in errors. InputError for what cannot be decoded or is too large."""
    limit = _settings.get("A2R_MAX_PIXELS")
    view = memoryview(np.ascontiguousarray(data))  # no copy of the file
    size = declared_size(view)
    if size is not None and size[0] * size[1] > limit:
        raise InputError(f"{path}: declares {size[0]}x{size[1]} pixels, more than the limit "
                         f"A2R_MAX_PIXELS={limit} (refused before decoding)")
    with _opencv_quiet():  # its log lines would add to the one-line InputError
        img = _decode_checked(data, path, limit)
    return orient(img, exif_orientation(view))


@contextmanager
def _opencv_quiet():
    """OpenCV's own log off (process-wide, for the call): the InputError says what failed."""
    import cv2
    logging = cv2.utils.logging
    level = logging.getLogLevel()
    logging.setLogLevel(logging.LOG_LEVEL_SILENT)
    try:
        yield
    finally:
        logging.setLogLevel(level)


def _decode_checked(data: np.ndarray, path: Path, limit: int) -> np.ndarray:
    """decode_picture once the declared size passed: decode, then check what came out."""
    import cv2
    try:
        img = (_decode_os2_bitmap(data, path) if _is_os2_bitmap(data[:26].tobytes())
               else cv2.imdecode(data, cv2.IMREAD_UNCHANGED))
    except cv2.error as exc:  # e.g. OpenCV's own CV_IO_MAX_IMAGE_PIXELS check
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else "decoder error"
        raise InputError(f"{path}: OpenCV refused to decode it: {reason}") from None
    if img is None:
        raise InputError(f"{path}: not a picture OpenCV can decode (corrupt, truncated, or "
                         f"another format)")
    if img.shape[0] * img.shape[1] > limit:  # a header that lied, or one not parsed above
        raise InputError(f"{path}: decodes to {img.shape[1]}x{img.shape[0]} pixels, more than "
                         f"the limit A2R_MAX_PIXELS={limit}")
    if img.dtype == np.uint16:  # one pass, rounded: no wider temporary for a 16-bit picture
        img = cv2.convertScaleAbs(img, alpha=1 / 257)
    if img.dtype != np.uint8:
        raise InputError(f"{path}: {img.dtype} pictures are not supported (8-bit or 16-bit only)")
    return img


def is_16_bit(data: np.ndarray) -> bool:
    """True for a PNG of 16 bits per channel (the one 16-bit format the inputs take)."""
    head = data[:32].tobytes()
    return head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR" and head[24] == 16


def read_picture(path: Path) -> np.ndarray:
    """The picture at ``path`` (uint8, as OpenCV reads it); InputError for one line."""
    return decode_picture(read_bytes(path), path)


def encode_picture(path: Path, img: np.ndarray) -> bytes:
    """``img`` encoded in the format ``path``'s extension names (PNG without one)."""
    import cv2
    ext = path.suffix.lower() or ".png"
    ok, buf = cv2.imencode(ext, img)
    if not ok:
        raise OSError(f"{path}: OpenCV cannot encode {ext} pictures")
    return buf.tobytes()


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
    text = " ".join(str(exc).split())  # one line, whatever the library's message held
    return text if text.startswith(str(src_path)) else f"{src_path}: {type(exc).__name__}: {text}"


# Output formats without an alpha channel: a BGRA result is put on a background colour.
NO_ALPHA = (".jpg", ".jpeg")
WHITE = (255, 255, 255)


def loses_alpha(out: np.ndarray, dst_path: Path) -> bool:
    return out.ndim == 3 and out.shape[2] == 4 and dst_path.suffix.lower() in NO_ALPHA


def flatten(bgra: np.ndarray, background: tuple[int, int, int]) -> np.ndarray:
    """BGRA -> BGR: each pixel blended over ``background`` (b, g, r) by its alpha."""
    alpha = bgra[:, :, 3:].astype(np.float32) * np.float32(1 / 255)
    out = bgra[:, :, :3] * alpha + np.asarray(background, np.float32) * (1 - alpha)
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)


def finish(img: np.ndarray, out: np.ndarray, dst_path: Path, sbs: bool,
           background: tuple[int, int, int] | None = None) -> bytes:
    """Input ``img`` converted to ``out`` -> the bytes of its output file at ``dst_path``; a
    BGRA picture written as .jpg is put on ``background`` (b, g, r; default white)."""
    pic = side_by_side(img, out) if sbs else out
    if loses_alpha(pic, dst_path):
        pic = flatten(pic, background or WHITE)
    return encode_picture(dst_path, pic)
