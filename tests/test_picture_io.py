"""Picture files within limits: headers that lie or hide (GIF named .png, a JPEG frame header
after 64 KiB of padding, TIFF), OpenCV's own decoder limit, the decoded size, file size before
reading, FIFOs and folders, OS/2 bitmaps; the EXIF orientation of JPEG, PNG and WebP."""
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest

from a2r_edge.picture import io as pio
from cli_run import PACKAGE_ROOT

SIDE = 100  # pictures of 100x100 against a limit of 1000 pixels


@pytest.fixture
def small_limit(monkeypatch):
    monkeypatch.setenv("A2R_MAX_PIXELS", "1000")


def gif(w, h):
    """A valid GIF89a: a w x h logical screen, one 1x1 image (the canvas is what decodes)."""
    lzw = bytes([2, 2, 0x4C, 0x01, 0])
    return (b"GIF89a" + struct.pack("<HHBBB", w, h, 0x80, 0, 0) + bytes(6) +
            b"\x2c" + struct.pack("<HHHHB", 0, 0, 1, 1, 0) + lzw + b"\x3b")


def jpeg_with_padding(side, pad=70_000):
    ok, buf = cv2.imencode(".jpg", np.full((side, side, 3), 90, np.uint8))
    data = buf.tobytes()
    app = b""
    while len(app) < pad:  # APP1 segments of the largest size, then fill bytes
        app += b"\xff\xe1" + struct.pack(">H", 65535) + bytes(65533)
    return data[:2] + app + b"\xff" * 100 + data[2:]


def tiff(side):
    ok, buf = cv2.imencode(".tiff", np.full((side, side, 3), 90, np.uint8),
                           [cv2.IMWRITE_TIFF_COMPRESSION, 8])  # deflate
    return buf.tobytes()


def ppm(side):
    return f"P6 {side} {side} 255\n".encode() + bytes(3 * side * side)


@pytest.mark.parametrize("make,name", [(lambda: gif(SIDE, SIDE), "gif-named.png"),
                                       (lambda: jpeg_with_padding(SIDE), "padded.jpg"),
                                       (lambda: tiff(SIDE), "deflate.tiff")])
def test_hidden_headers_are_refused_before_decoding(tmp_path, small_limit, make, name):
    data = make()
    (tmp_path / name).write_bytes(data)
    assert cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED).shape[:2] == \
        (SIDE, SIDE)  # a real picture of that size
    with pytest.raises(pio.InputError, match="declares 100x100 pixels.*A2R_MAX_PIXELS"):
        pio.read_picture(tmp_path / name)


def test_the_decoded_size_is_checked_too(tmp_path, small_limit):
    (tmp_path / "p.png").write_bytes(ppm(SIDE))  # a header declared_size does not parse
    assert pio.declared_size(ppm(SIDE)) is None
    with pytest.raises(pio.InputError, match="decodes to 100x100 pixels"):
        pio.read_picture(tmp_path / "p.png")


def test_opencv_decoder_limit_follows_the_setting():
    """In a fresh process: importing a2r_edge before cv2 sets OpenCV's own limit."""
    code = ("import a2r_edge, cv2, numpy as np\n"
            f"data = np.frombuffer({ppm(SIDE)!r}, np.uint8)\n"
            "try:\n    cv2.imdecode(data, cv2.IMREAD_UNCHANGED)\nexcept cv2.error:\n"
            "    print('refused')\nelse:\n    print('decoded')\n")
    env = dict(os.environ, A2R_MAX_PIXELS="1000", PYTHONPATH=PACKAGE_ROOT)
    env.pop("OPENCV_IO_MAX_IMAGE_PIXELS", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "refused", out.stderr


def test_a_file_larger_than_any_picture_is_not_read(tmp_path):
    big = tmp_path / "sparse.png"
    with open(big, "wb") as f:
        f.truncate(4 << 30)  # 4 GiB, sparse: no disk used
    with pytest.raises(pio.InputError, match="bytes, more than any picture"):
        pio.read_bytes(big)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe.png")
    with pytest.raises(pio.InputError, match=r"pipe.png: a pipe \(FIFO\), not a regular file"):
        pio.read_bytes(tmp_path / "pipe.png")


def test_a_folder_is_refused_by_its_name(tmp_path):
    (tmp_path / "ref.png").mkdir()
    with pytest.raises(pio.InputError) as info:
        pio.read_bytes(tmp_path / "ref.png")
    assert str(info.value) == f"{tmp_path / 'ref.png'}: a folder, not a regular file"


def os2_bitmap(img):
    h, w, _ = img.shape
    row = (3 * w + 3) // 4 * 4
    pix = b"".join(img[h - 1 - y].tobytes().ljust(row, b"\0") for y in range(h))
    return (b"BM" + struct.pack("<IHHI", 26 + len(pix), 0, 0, 26) +
            struct.pack("<IHHHH", 12, w, h, 1, 24) + pix)


def test_os2_bitmaps_are_read_right(tmp_path):
    img = np.random.default_rng(1).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    (tmp_path / "os2.bmp").write_bytes(os2_bitmap(img))
    assert pio.declared_size(os2_bitmap(img)) == (7, 5)
    np.testing.assert_array_equal(pio.read_picture(tmp_path / "os2.bmp"), img)


def test_os2_palette_bitmaps_are_refused_with_the_reason(tmp_path):
    data = bytearray(os2_bitmap(np.zeros((4, 4, 3), np.uint8)))
    data[24:26] = struct.pack("<H", 8)
    (tmp_path / "pal.bmp").write_bytes(bytes(data))
    with pytest.raises(pio.InputError, match="OS/2 1.x bitmap of 8 bits"):
        pio.read_picture(tmp_path / "pal.bmp")


def test_a_16_bit_picture_is_rounded_in_one_pass(tmp_path):
    img = np.array([[[0, 128, 65535], [257, 32896, 384]]], np.uint16)
    assert cv2.imwrite(str(tmp_path / "deep.png"), img)
    data = pio.read_bytes(tmp_path / "deep.png")
    assert pio.is_16_bit(data)
    np.testing.assert_array_equal(pio.decode_picture(data, Path("deep.png")),
                                  [[[0, 0, 255], [1, 128, 1]]])


# --- EXIF orientation: pictures are turned as viewers show them --------------------------------

def exif(orientation, order=">"):
    """An EXIF block (a TIFF structure, big- or little-endian) holding one tag: Orientation."""
    head = b"MM\x00*" if order == ">" else b"II*\x00"
    return (head + struct.pack(order + "IHHHI", 8, 1, 274, 3, 1) +
            struct.pack(order + "HH", orientation, 0) + struct.pack(order + "I", 0))


def jpeg_with_exif(img, block):
    data = cv2.imencode(".jpg", img)[1].tobytes()
    app1 = b"Exif\x00\x00" + block
    return data[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1 + data[2:]


def png_with_exif(img, block):
    data = cv2.imencode(".png", img)[1].tobytes()
    chunk = (struct.pack(">I", len(block)) + b"eXIf" + block +
             struct.pack(">I", zlib.crc32(b"eXIf" + block)))
    return data[:33] + chunk + data[33:]  # after the 33 bytes of signature and IHDR


def webp_with_exif(img, block):
    """A lossless WebP in the extended (VP8X) layout with an EXIF chunk after the picture."""
    data = cv2.imencode(".webp", img, [cv2.IMWRITE_WEBP_QUALITY, 101])[1].tobytes()
    h, w = img.shape[:2]
    flags = 0x08 | (0x10 if img.shape[2] == 4 else 0)  # EXIF, alpha
    vp8x = (b"VP8X" + struct.pack("<I", 10) + bytes([flags, 0, 0, 0]) +
            (w - 1).to_bytes(3, "little") + (h - 1).to_bytes(3, "little"))
    body = b"WEBP" + vp8x + data[12:] + b"EXIF" + struct.pack("<I", len(block)) + block + \
        b"\x00" * (len(block) & 1)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def decode(data):
    return pio.decode_picture(np.frombuffer(data, np.uint8), Path("x"))


def test_jpeg_exif_orientations_are_applied_as_opencv_shows_them():
    """OpenCV's IMREAD_COLOR applies the EXIF orientation (as viewers do); IMREAD_UNCHANGED,
    which keeps alpha and 16 bits, does not: decode_picture must match the former."""
    rng = np.random.default_rng(2)
    img = cv2.resize(rng.integers(0, 256, (4, 6, 3), dtype=np.uint8), (60, 40),
                     interpolation=cv2.INTER_NEAREST)
    for orientation in range(1, 9):
        for order in "<>":
            data = jpeg_with_exif(img, exif(orientation, order))
            shown = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
            got = decode(data)
            assert got.shape == ((40, 60, 3) if orientation < 5 else (60, 40, 3))
            np.testing.assert_array_equal(got, shown, err_msg=f"orientation {orientation}")


@pytest.mark.parametrize("make", [png_with_exif, webp_with_exif])
def test_png_and_webp_exif_orientation_keeps_alpha_and_16_bits(make):
    rng = np.random.default_rng(3)
    bgra = rng.integers(0, 256, (5, 7, 4), dtype=np.uint8)
    bgra[..., 3] = rng.integers(1, 255, (5, 7))  # alpha to keep
    for img in (bgra, bgra[..., :3]):
        np.testing.assert_array_equal(decode(make(img, exif(6))), np.rot90(img, -1))  # 90 cw
        np.testing.assert_array_equal(decode(make(img, exif(3, "<"))), np.rot90(img, 2))
    if make is png_with_exif:
        deep = rng.integers(0, 65536, (5, 7, 4), dtype=np.uint16)
        data = make(deep, exif(8))
        assert pio.is_16_bit(np.frombuffer(data, np.uint8))
        rounded = cv2.convertScaleAbs(deep, alpha=1 / 257)
        np.testing.assert_array_equal(decode(data), np.rot90(rounded, 1))  # 90 ccw


def test_damaged_exif_blocks_leave_the_picture_as_stored():
    img = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    good = exif(6)
    for block in (good[:10], good[:8] + b"\xff" * 6, good[:4] + struct.pack(">I", 1 << 30),
                  exif(9), exif(0), b""):
        for make in (jpeg_with_exif, png_with_exif, webp_with_exif):
            data = make(img, block)
            assert pio.exif_orientation(memoryview(data)) == 1
            stored = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
            np.testing.assert_array_equal(decode(data), stored)


@pytest.mark.parametrize("channels", [(), (1,), (3,), (4,)])
def test_orient_matches_numpy_and_keeps_the_channel_axis(channels):
    """io.orient against numpy's flips and transpose for every EXIF orientation, a one-channel
    (H, W, 1) picture included (OpenCV alone returns it as (H, W))."""
    from a2r_edge.picture.io import orient
    img = np.arange(6 * (channels[0] if channels else 1), dtype=np.uint8).reshape((2, 3) + channels)
    for o in range(1, 9):
        want = np.swapaxes(img, 0, 1) if o >= 5 else img
        want = want[::-1] if o in (3, 4, 7, 8) else want
        want = want[:, ::-1] if o in (2, 3, 6, 7) else want
        got = orient(img, o)
        assert got.shape == want.shape and got.flags.c_contiguous, o
        np.testing.assert_array_equal(got, want)
