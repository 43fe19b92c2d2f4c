"""Picture files within limits: headers that lie or hide (GIF named .png, a JPEG frame header
after 64 KiB of padding, TIFF), OpenCV's own decoder limit, the decoded size, file size before
reading, FIFOs, OS/2 bitmaps."""
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
    with pytest.raises(pio.InputError, match="not a regular file"):
        pio.read_bytes(tmp_path / "pipe.png")


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


def test_a_long_output_name_gets_a_valid_temporary_name(tmp_path):
    name = "x" * 251 + ".png"  # 255 bytes: the longest name most file systems take
    pio.write_bytes(tmp_path / name, b"data")
    assert (tmp_path / name).read_bytes() == b"data"
    assert os.listdir(tmp_path) == [name]


def test_stale_temporaries_are_found_by_name(tmp_path):
    out = tmp_path / ("y" * 200 + ".png")
    tmp = pio.private_temp(out)
    (tmp_path / "other.png").write_bytes(b"")
    assert pio.stale_temps(out) == [tmp]
