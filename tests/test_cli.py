"""python -m a2r_edge convert: files and folders, atomic outputs, one line per bad input."""
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from cli_run import PACKAGE_ROOT, cli, save
from model_packages import make_package


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(make_package(tmp_path_factory.mktemp("cli") / "tiny"))


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
    (["in.png", "-o", "x.png", "--style-colour", "0.3"], "--style-colour needs --style"),
    (["in.png", "-o", "x.png", "--style", "in.png", "--style-colour", "1.5"], "in [0, 1]"),
    (["in.png", "-o", "x.png", "--precision", "fp16"],
     "a2r_edge convert: error: argument --precision: invalid choice: 'fp16'"),
    (["in.png"], "a2r_edge convert: error: the following arguments are required: -o"),
    (["in.png", "-o", ""], "-o/--output is empty"),   # not the current folder
    (["in.png", "-o", "in.png/x.png"], "cannot create the output folder in.png: in.png is a file"),
    (["in.png", "-o", "in.png/sub/x.png"], "in.png is a file"),
])
def test_usage_errors_are_one_line_exit_2(tmp_path, model, args, match):
    save(tmp_path / "in.png", (8, 8, 3))
    if "--model" not in args:
        args = args + ["--model", model]
    p = cli("convert", *args, cwd=tmp_path)
    assert p.returncode == 2
    assert match in p.stderr and "Traceback" not in p.stderr and "Errno" not in p.stderr
    assert p.stderr.count("\n") == 1, p.stderr   # no usage block
    assert os.listdir(tmp_path) == ["in.png"]     # nothing written


def test_every_command_reports_usage_errors_in_one_line():
    for module, args in (("a2r_edge", []), ("a2r_edge", ["model", "check"]),
                         ("a2r_edge.bench", ["--threads", "0"]), ("a2r_edge.video", [])):
        p = cli(*args, module=module, timeout=120)
        assert p.returncode == 2 and p.stderr.count("\n") == 1, (module, args, p.stderr)
        assert ": error: " in p.stderr and "(--help: usage)" in p.stderr


def test_help_documents_the_options():
    p = cli("convert", "--help")
    assert p.returncode == 0
    for option in ("--device", "--model", "--style", "--style-colour", "--strength", "--side-by-side",
                   "--overwrite", "--ray"):
        assert option in p.stdout


def png_declaring(width, height):
    """A PNG whose header declares width x height (a decompression bomb's header) and whose
    data is a few bytes."""
    import struct
    import zlib

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2,
                                                              0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))


def test_bad_files_one_line_each_nothing_half_written(tmp_path, model):
    folder = tmp_path / "in"
    folder.mkdir()
    good = save(folder / "good.png", (10, 12, 3))
    ok, jpg = cv2.imencode(".jpg", good)
    (folder / "renamed.bmp").write_bytes(jpg.tobytes())      # right content, wrong extension
    (folder / "text.png").write_text("not a picture\n")        # wrong content for the extension
    (folder / "cut.jpg").write_bytes(jpg.tobytes()[:40])       # truncated inside the header
    corrupt = bytearray(jpg.tobytes())
    corrupt[2:200] = bytes(198)
    (folder / "corrupt.jpg").write_bytes(bytes(corrupt))
    (folder / "bomb.png").write_bytes(png_declaring(100000, 100000))
    (folder / "wide.bmp").write_bytes(b"BM" + bytes(16) + (70000).to_bytes(4, "little") * 2 +
                                      bytes(30))
    p = cli("convert", folder, "-o", tmp_path / "out", "--model", model)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    errors = [line for line in p.stderr.splitlines() if "error" in line]
    bad = ["text.png", "cut.jpg", "corrupt.jpg", "bomb.png", "wide.bmp"]
    assert len(errors) == len(bad), p.stderr
    for name in bad:
        assert sum(name in e for e in errors) == 1
    assert "100000x100000" in p.stderr and "A2R_MAX_PIXELS" in p.stderr
    failed = [line for line in p.stdout.splitlines() if line.startswith("failed: ")]
    assert len(failed) == len(bad)  # the summary lists every failure at the end
    assert p.stdout.splitlines()[-len(bad):] == failed
    assert sorted(os.listdir(tmp_path / "out")) == ["good.png", "renamed.bmp"]  # no .part left


def test_bomb_refused_before_decoding():
    from a2r_edge.picture.io import declared_size
    assert declared_size(png_declaring(100000, 3)) == (100000, 3)
    ok, buf = cv2.imencode(".jpg", np.zeros((21, 34, 3), np.uint8))
    assert declared_size(buf.tobytes()) == (34, 21)
    for ext in (".bmp", ".webp", ".png"):
        ok, buf = cv2.imencode(ext, np.zeros((21, 34, 3), np.uint8))
        assert declared_size(buf.tobytes()) == (34, 21), ext
    assert declared_size(b"GIF89a") is None


def test_resume_skips_complete_outputs(tmp_path, model):
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    for i in range(4):
        save(folder / f"p{i}.png", (12 + i, 10, 3), seed=i)
    out.mkdir()
    assert cli("convert", folder / "p0.png", "-o", out / "p0.png", "--model", model).returncode == 0
    before = (out / "p0.png").stat().st_mtime_ns
    (out / "p1.png").write_bytes(b"\x89PNG\r\n\x1a\n half")       # partial: converted again
    cv2.imwrite(str(out / "p2.png"), np.zeros((5, 5, 3), np.uint8))  # wrong size: again
    p = cli("convert", folder, "-o", out, "--model", model, "--resume")
    assert p.returncode == 0, p.stderr
    assert "converted 3 of 4 picture(s); skipped 1 already complete" in p.stdout
    assert (out / "p0.png").stat().st_mtime_ns == before
    for i in range(4):
        assert cv2.imread(str(out / f"p{i}.png")).shape == (12 + i, 10, 3)


def test_outputs_get_the_permissions_of_a_new_file(tmp_path, model):
    """The temporary file behind the atomic write is owner-only (mkstemp); the output must not
    be: it gets what the umask gives any new file (0644 under the usual 022)."""
    save(tmp_path / "a.png", (12, 10, 3))
    assert cli("convert", tmp_path / "a.png", "-o", tmp_path / "b.png", "--model", model
               ).returncode == 0
    plain = tmp_path / "plain"
    plain.write_bytes(b"")
    assert (tmp_path / "b.png").stat().st_mode & 0o777 == plain.stat().st_mode & 0o777


def test_sigkill_leaves_no_partial_output(tmp_path, model):
    """Kill the CLI while it converts a folder: every file under a final name is a complete
    picture; --resume then finishes the job."""
    import signal
    import time
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    n = 150
    for i in range(n):
        save(folder / f"p{i:03d}.png", (96, 96, 3), seed=i)
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2R_")}
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT, env.get("PYTHONPATH", "")])
    proc = subprocess.Popen([sys.executable, "-m", "a2r_edge", "convert", str(folder), "-o",
                             str(out), "--model", model, "-q"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.is_dir() and sum(1 for f in os.listdir(out) if f.endswith(".png")) >= 3:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "finished before it could be killed: use more pictures"
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    finals = sorted(f for f in os.listdir(out) if not f.startswith("."))
    assert 3 <= len(finals) < n
    for f in finals:
        data = (out / f).read_bytes()
        assert data.endswith(b"IEND\xaeB`\x82"), f  # the whole PNG, up to its last chunk
        assert cv2.imread(str(out / f)).shape == (96, 96, 3)
    p = cli("convert", folder, "-o", out, "--model", model, "--resume", "-q")
    assert p.returncode == 0 and f"skipped {len(finals)} already complete" in p.stdout
    assert len([f for f in os.listdir(out) if not f.startswith(".")]) == n


def test_a_slow_engine_start_says_why_once(monkeypatch, capsys):
    """Building the Engine measures a new model (up to tens of seconds at --precision auto):
    past SLOW_START_S the command says so on stderr, once; a quick start or -q says nothing."""
    import time

    from a2r_edge import apps
    monkeypatch.setattr(apps, "SLOW_START_S", 0.05)
    for wait, quiet, said in ((0.3, False, 1), (0.0, False, 0), (0.3, True, 0)):
        with apps.slow_start_note("a2r_edge convert", quiet):
            time.sleep(wait)
        time.sleep(0.1)   # a timer left running would print now
        assert capsys.readouterr().err.count("still starting") == said
