"""Hostile settings and inputs on the command line: one line and exit code 2, never a crash,
a hang, or a silently wrong result."""
import os

import cv2
import numpy as np
import pytest

from cli_run import cli, save
from model_packages import make_package


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(make_package(tmp_path_factory.mktemp("hardening") / "tiny"))


def one_error_line(p):
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert "Traceback" not in p.stderr, p.stderr
    assert len(lines) == 1, p.stderr
    return lines[0]


@pytest.mark.parametrize("threads", ["100000", str(4 * (os.cpu_count() or 1) + 1)])
def test_thread_count_beyond_4x_the_cpus_is_one_line(tmp_path, model, threads):
    save(tmp_path / "a.png", (8, 8, 3))
    p = cli("convert", tmp_path / "a.png", "-o", tmp_path / "b.png", "--model", model,
            env={"A2R_NUM_THREADS": threads}, timeout=120)
    assert p.returncode == 2
    assert "A2R_NUM_THREADS" in one_error_line(p)
    assert not (tmp_path / "b.png").exists()


def test_malformed_setting_is_reported_once_at_start(tmp_path, model):
    for i in range(3):
        save(tmp_path / f"p{i}.png", (8, 8, 3), seed=i)
    p = cli("convert", tmp_path, "-o", tmp_path / "out", "--model", model,
            env={"A2R_MEMORY_MB": "abc"})
    assert p.returncode == 2
    assert "A2R_MEMORY_MB='abc'" in one_error_line(p)


def test_gif_named_png_over_the_limit_is_refused(tmp_path, model):
    from test_picture_io import gif
    (tmp_path / "in.png").write_bytes(gif(100, 100))
    p = cli("convert", tmp_path / "in.png", "-o", tmp_path / "out.png", "--model", model,
            env={"A2R_MAX_PIXELS": "1000"})
    assert p.returncode == 2 and "declares 100x100 pixels" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def test_style_fifo_is_refused_not_waited_on(tmp_path, model):
    save(tmp_path / "a.png", (8, 8, 3))
    os.mkfifo(tmp_path / "ref.png")
    p = cli("convert", tmp_path / "a.png", "-o", tmp_path / "b.png", "--model", model,
            "--style", tmp_path / "ref.png", timeout=60)
    assert p.returncode == 2
    assert "not a regular file" in one_error_line(p)


def test_style_folder_is_named(tmp_path, model):
    save(tmp_path / "a.png", (8, 8, 3))
    (tmp_path / "ref").mkdir()
    p = cli("convert", tmp_path / "a.png", "-o", tmp_path / "b.png", "--model", model,
            "--style", tmp_path / "ref")
    assert p.returncode == 2
    assert one_error_line(p) == f"a2r_edge: error: {tmp_path / 'ref'}: a folder, not a regular file"


def test_fifo_input_is_said_to_be_a_pipe(tmp_path, model):
    os.mkfifo(tmp_path / "pipe.png")
    p = cli("convert", tmp_path / "pipe.png", "-o", tmp_path / "b.png", "--model", model,
            timeout=60)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert f"{tmp_path / 'pipe.png'}: a pipe (FIFO), not a picture file or folder" in p.stderr
    assert "no such file" not in p.stderr


def test_one_missing_input_makes_no_folder_of_the_output_name(tmp_path, model):
    p = cli("convert", tmp_path / "bad.png", "-o", tmp_path / "outs" / "y.png", "--model", model)
    assert p.returncode == 2 and "no such file" in p.stderr
    assert not (tmp_path / "outs").exists()


def test_subfolders_are_counted_and_converted_with_recursive(tmp_path, model):
    src = tmp_path / "in"
    (src / "sub" / "deeper").mkdir(parents=True)
    save(src / "a.png", (8, 8, 3))
    save(src / "sub" / "b.png", (9, 8, 3), seed=1)
    save(src / "sub" / "deeper" / "c.jpg", (10, 8, 3), seed=2)
    (src / "notes.txt").write_text("x")
    p = cli("convert", src, "-o", tmp_path / "flat", "--model", model)
    assert p.returncode == 0, p.stderr
    assert "1 subfolder(s) (--recursive converts them), 1 file(s) not" in p.stderr
    assert os.listdir(tmp_path / "flat") == ["a.png"]
    p = cli("convert", src, "-o", tmp_path / "tree", "--model", model, "--recursive")
    assert p.returncode == 0, p.stderr
    assert "converted 3 of 3" in p.stdout
    assert cv2.imread(str(tmp_path / "tree" / "sub" / "deeper" / "c.jpg")).shape == (10, 8, 3)


def test_symbolic_links_to_folders_are_not_followed(tmp_path, model):
    """Two links up the tree (a loop): each picture once, the links counted in the note."""
    src = tmp_path / "in"
    (src / "a").mkdir(parents=True)
    save(src / "a" / "p.png", (8, 8, 3))
    (src / "a" / "up").symlink_to("..")
    (src / "a" / "up2").symlink_to("..")
    p = cli("convert", src, "-o", tmp_path / "out", "--model", model, "--recursive", timeout=120)
    assert p.returncode == 0, p.stderr
    assert "converted 1 of 1" in p.stdout
    assert "2 symbolic link(s) to folders (not followed" in p.stderr
    assert sorted(str(f.relative_to(tmp_path / "out")) for f in (tmp_path / "out").rglob("*")) \
        == ["a", "a/p.png"]


def test_bgra_to_jpg_is_put_on_a_background_and_said(tmp_path, model):
    img = np.zeros((8, 8, 4), np.uint8)
    img[:, :, 3] = 0  # fully transparent
    cv2.imwrite(str(tmp_path / "a.png"), img)
    p = cli("convert", tmp_path / "a.png", "-o", tmp_path / "white.jpg", "--model", model)
    assert p.returncode == 0, p.stderr
    assert "transparent parts are put on white" in p.stderr
    assert cv2.imread(str(tmp_path / "white.jpg")).min() >= 250
    p = cli("convert", tmp_path / "a.png", "-o", tmp_path / "red.jpg", "--model", model,
            "--background", "#ff0000")
    assert p.returncode == 0 and "transparent" not in p.stderr
    b, g, r = cv2.imread(str(tmp_path / "red.jpg")).reshape(-1, 3).mean(0)
    assert r > 240 and g < 15 and b < 15
    p = cli("convert", tmp_path / "a.png", "-o", tmp_path / "x.jpg", "--background", "red")
    assert p.returncode == 2 and "#rrggbb" in p.stderr


def test_16_bit_input_is_said(tmp_path, model):
    save(tmp_path / "deep.png", (8, 8, 3), dtype=np.uint16)
    p = cli("convert", tmp_path / "deep.png", "-o", tmp_path / "out.png", "--model", model)
    assert p.returncode == 0, p.stderr
    assert "16 bits per channel" in p.stderr and "output is 8-bit" in p.stderr


def test_resume_cleans_what_a_killed_run_left(tmp_path, model):
    save(tmp_path / "a.png", (8, 8, 3))
    out = tmp_path / "out"
    out.mkdir()
    left = out / ".a.png.k1ll3d_x.part"  # the name a killed run's temporary file has
    left.write_bytes(b"half")
    p = cli("convert", tmp_path / "a.png", "-o", out / "a.png", "--model", model, "--resume")
    assert p.returncode == 0, p.stderr
    assert os.listdir(out) == ["a.png"]


def test_255_byte_file_names(tmp_path, model):
    name = "n" * 251 + ".png"
    save(tmp_path / name, (8, 8, 3))
    (tmp_path / "out").mkdir()
    p = cli("convert", tmp_path / name, "-o", tmp_path / "out", "--model", model)
    assert p.returncode == 0, p.stderr
    assert os.listdir(tmp_path / "out") == [name]


def test_os2_bitmap_converts(tmp_path, model):
    from test_picture_io import os2_bitmap
    img = np.random.default_rng(1).integers(0, 256, (9, 7, 3), dtype=np.uint8)
    (tmp_path / "os2.bmp").write_bytes(os2_bitmap(img))
    p = cli("convert", tmp_path / "os2.bmp", "-o", tmp_path / "out.png", "--model", model)
    assert p.returncode == 0, p.stderr
    assert cv2.imread(str(tmp_path / "out.png")).shape == (9, 7, 3)
