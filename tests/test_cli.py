"""python -m a2r_edge convert: files and folders, atomic outputs, one line per bad input."""
import os
import subprocess
import sys

from pathlib import Path

import cv2
import numpy as np
import pytest

import a2r_edge
from model_packages import make_package

# The subprocesses import the same a2r_edge as this test process, wherever it was built.
PACKAGE_ROOT = str(Path(a2r_edge.__file__).resolve().parent.parent)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(make_package(tmp_path_factory.mktemp("cli") / "tiny"))


def cli(*args, cwd=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2R_")}
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT, env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "a2r_edge", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300, env=env)


def save(path, shape, seed=0):
    img = np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)
    assert cv2.imwrite(str(path), img)
    return img


def test_one_file(tmp_path, model):
    src = tmp_path / "in.png"
    img = save(src, (20, 30, 3))
    p = cli("convert", src, "-o", tmp_path / "out" / "result.png", "--model", model)
    assert p.returncode == 0, p.stderr
    out = cv2.imread(str(tmp_path / "out" / "result.png"), cv2.IMREAD_UNCHANGED)
    assert out.shape == img.shape
    assert "result.png" in p.stdout
    assert not [f for f in os.listdir(tmp_path / "out") if f.endswith(".part")]


def test_folder_with_a_bad_file_continues_and_exits_2(tmp_path, model):
    folder = tmp_path / "in"
    folder.mkdir()
    save(folder / "a.png", (16, 16, 3))
    save(folder / "b.jpg", (17, 19, 3), seed=1)
    save(folder / "c.png", (9, 11, 4), seed=2)
    (folder / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    (folder / "empty.bmp").write_bytes(b"")
    p = cli("convert", folder, "-o", tmp_path / "out", "--model", model)
    assert p.returncode == 2
    assert sorted(os.listdir(tmp_path / "out")) == ["a.png", "b.jpg", "c.png"]
    errors = [line for line in p.stderr.splitlines() if "error" in line]
    assert len(errors) == 2 and any("broken.png" in e for e in errors) \
        and any("empty.bmp" in e for e in errors)
    assert "Traceback" not in p.stderr
    assert cv2.imread(str(tmp_path / "out" / "c.png"), cv2.IMREAD_UNCHANGED).shape == (9, 11, 4)


def test_side_by_side(tmp_path, model):
    src = tmp_path / "in.png"
    save(src, (12, 20, 3))
    p = cli("convert", src, "-o", tmp_path / "sbs.png", "--model", model, "--side-by-side")
    assert p.returncode == 0, p.stderr
    assert cv2.imread(str(tmp_path / "sbs.png")).shape == (12, 40, 3)


def test_refuses_to_overwrite_an_input(tmp_path, model):
    src = tmp_path / "in.png"
    img = save(src, (12, 12, 3))
    p = cli("convert", src, "-o", src, "--model", model)
    assert p.returncode == 2 and "overwrite" in p.stderr
    np.testing.assert_array_equal(cv2.imread(str(src)), img)
    assert cli("convert", src, "-o", src, "--model", model, "--overwrite").returncode == 0


@pytest.mark.parametrize("args,match", [
    (["missing.png", "-o", "x.png"], "no such file"),
    (["in.png", "-o", "out.txt"], "picture file name"),
    (["in.png", "-o", "x.png", "--device", "gpu"], "CUDA"),
    (["in.png", "-o", "x.png", "--model", "nowhere"], "model not found"),
])
def test_usage_errors_are_one_line_exit_2(tmp_path, model, args, match):
    save(tmp_path / "in.png", (8, 8, 3))
    if "--model" not in args:
        args = args + ["--model", model]
    p = cli("convert", *args, cwd=tmp_path)
    assert p.returncode == 2
    assert match in p.stderr and "Traceback" not in p.stderr


def test_help_documents_the_options():
    p = cli("convert", "--help")
    assert p.returncode == 0
    for option in ("--device", "--model", "--style", "--side-by-side", "--overwrite"):
        assert option in p.stdout
