"""The video output path: a private temporary file (no planted symlink followed, no file shared
by two runs), the input never overwritten, a failed write never reported as success, the codec
named; arguments the camera path crashed on; progress and the note when nothing is written."""
import os
import resource
import sys

import cv2
import numpy as np
import pytest

from a2r_edge.apps import video
from cli_run import cli
from model_packages import make_package


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    return str(make_package(tmp_path_factory.mktemp("vout") / "tiny"))


def write_video(path, n, w=64, h=48):
    wr = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 12.0, (w, h))
    rng = np.random.default_rng(0)
    for _ in range(n):
        wr.write(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    wr.release()


def frames_in(path):
    cap = cv2.VideoCapture(str(path))
    n = sum(1 for _ in video.read_frames(cap))
    cap.release()
    return n


def run_video(*args, **kw):
    return cli(*args, module="a2r_edge.video", **kw)


def test_planted_symlink_at_the_old_temporary_name_is_not_followed(tmp_path, package):
    src, victim = tmp_path / "in.avi", tmp_path / "victim.txt"
    write_video(src, 3)
    victim.write_text("precious")
    (tmp_path / ".out.partial.avi").symlink_to(victim)  # the name the writer used to take
    p = run_video("--input", src, "--output", tmp_path / "out.avi", "--model", package)
    assert p.returncode == 0, p.stderr
    assert victim.read_text() == "precious"
    assert frames_in(tmp_path / "out.avi") == 3


def test_two_writers_to_one_output_get_their_own_temporary_files(tmp_path):
    a = video.AtomicVideoWriter(tmp_path / "out.avi", 10.0, (16, 16))
    b = video.AtomicVideoWriter(tmp_path / "out.avi", 10.0, (16, 16))
    try:
        assert a.tmp != b.tmp and a.tmp.parent == b.tmp.parent == tmp_path
    finally:
        a.abort()
        b.abort()
    assert not list(tmp_path.iterdir())


def test_a_finished_video_gets_a_new_files_mode(tmp_path, monkeypatch):
    """Closing renames through files.publish: the 0600 temporary becomes a new file's mode
    (set to 0640 here, which no umask makes the temporary's)."""
    import stat

    from a2r_edge.runtime import files
    monkeypatch.setattr(files, "FILE_MODE", 0o640)
    w = video.AtomicVideoWriter(tmp_path / "out.avi", 10.0, (16, 16))
    for _ in range(3):
        w.write(np.zeros((16, 16, 3), np.uint8))
    w.close()
    assert [p.name for p in tmp_path.iterdir()] == ["out.avi"]
    assert stat.S_IMODE((tmp_path / "out.avi").stat().st_mode) == 0o640


@pytest.mark.parametrize("how", ["same path", "other spelling", "hard link"])
def test_output_that_is_the_input_is_refused(tmp_path, package, how):
    src = tmp_path / "in.avi"
    write_video(src, 3)
    before = src.read_bytes()
    out = {"same path": src, "other spelling": tmp_path / "sub" / ".." / "in.avi",
           "hard link": tmp_path / "link.avi"}[how]
    (tmp_path / "sub").mkdir()
    if how == "hard link":
        os.link(src, out)
    p = run_video("--input", src, "--output", out, "--model", package)
    assert p.returncode == 2 and "is the input" in p.stderr and "Traceback" not in p.stderr
    assert src.read_bytes() == before


def test_a_full_disk_is_an_error_and_leaves_no_output(tmp_path, package):
    """RLIMIT_FSIZE stands in for a full disk: writes past it fail (Python ignores SIGXFSZ)."""
    import subprocess
    src, dst = tmp_path / "in.avi", tmp_path / "out.avi"
    write_video(src, 40, 96, 96)
    limit = src.stat().st_size // 4

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2R_")}
    from cli_run import PACKAGE_ROOT
    env["PYTHONPATH"] = PACKAGE_ROOT
    p = subprocess.run([sys.executable, "-m", "a2r_edge.video", "--input", str(src), "--output",
                        str(dst), "--model", package], env=env, capture_output=True, text=True,
                       timeout=300, preexec_fn=small_files)
    assert p.returncode != 0, p.stdout
    assert "frames" in p.stderr and "Traceback" not in p.stderr
    assert not dst.exists()
    assert [f.name for f in tmp_path.iterdir()] == ["in.avi"]  # no temporary file left


def test_webm_output_is_vp8_and_named(tmp_path, package):
    src = tmp_path / "in.avi"
    write_video(src, 4)
    p = run_video("--input", src, "--output", tmp_path / "out.webm", "--model", package)
    assert p.returncode == 0, p.stderr
    assert "codec VP80" in p.stdout
    assert frames_in(tmp_path / "out.webm") == 4
    mode = (tmp_path / "out.webm").stat().st_mode & 0o777
    plain = tmp_path / "plain"
    plain.write_bytes(b"")
    assert mode == plain.stat().st_mode & 0o777  # not the temporary file's 0600


def test_progress_and_the_note_without_output(tmp_path, package):
    src = tmp_path / "in.avi"
    write_video(src, 5)
    p = run_video("--input", src, "--model", package)
    assert p.returncode == 0, p.stderr
    assert "no --output" in p.stderr
    assert "frame 1/5" in p.stderr and "fps" in p.stderr and "ETA" in p.stderr


def test_a_picture_as_input_shows_no_frame_total(tmp_path, package):
    """OpenCV reads a picture as a one-frame video whose frame count is -2^63: unknown."""
    cv2.imwrite(str(tmp_path / "in.png"), np.full((48, 64, 3), 90, np.uint8))
    p = run_video("--input", tmp_path / "in.png", "--model", package)
    assert p.returncode == 0, p.stderr
    progress = [line for line in p.stderr.splitlines() if line.startswith("frame ")]
    assert progress and all(line.startswith("frame 1  ") for line in progress), p.stderr


def test_missing_output_folders_are_created(tmp_path, package):
    src = tmp_path / "in.avi"
    write_video(src, 2)
    p = run_video("--input", src, "--output", tmp_path / "new" / "a" / "x.webm", "--model",
                  package)
    assert p.returncode == 0, p.stderr
    assert frames_in(tmp_path / "new" / "a" / "x.webm") == 2
    p = run_video("--input", src, "--output", src / "x.webm", "--model", package)
    assert p.returncode == 2 and "Errno" not in p.stderr
    assert p.stderr.splitlines() == [f"a2r_edge.video: error: cannot create the output folder "
                                     f"{src}: {src} is a file"]


@pytest.mark.parametrize("index", ["-1", "-2147483648", "x"])
def test_bad_camera_index_is_one_line(package, index):
    p = run_video("--camera", index, "--model", package, timeout=60)
    assert p.returncode == 2 and "--camera" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_missing_camera_is_one_line(package):
    p = run_video("--camera", "63", "--output", "x.avi", "--model", package, timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "a2r_edge.video: error: cannot open camera 63 (no such device, busy, or no permission)"]


def test_help_names_device_and_what_works_headless(capsys):
    with pytest.raises(SystemExit):
        video.parser().parse_args(["--help"])
    out = capsys.readouterr().out
    assert "--device" in out and "where to run" in out and "headless" in out


def test_a_255_byte_output_name(tmp_path, package):
    src, name = tmp_path / "in.avi", "v" * 251 + ".avi"
    write_video(src, 2)
    p = run_video("--input", src, "--output", tmp_path / name, "--model", package)
    assert p.returncode == 0, p.stderr
    assert frames_in(tmp_path / name) == 2


def test_an_upscaler_keeps_its_scale_and_takes_the_convention_flags(tmp_path):
    """A plain ONNX x2 upscaler (nearest) taking [0, 1] and giving [-1, 1] (--input-range 0,1
    --output-range -1,1, as convert takes them; without them the video was the source's
    colours): the video is twice the source's size (its frames were shrunk back to it), each
    frame what the Engine gives with the same conventions (MJPG: a few levels)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from a2r_edge import Engine
    from a2r_edge.model import conventions, package as pkg
    g = helper.make_graph(
        [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="nearest")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, "OH", "OW"])],
        [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "up.onnx"))
    src = tmp_path / "in.avi"   # smooth frames: MJPG keeps them within a few levels
    wr = cv2.VideoWriter(str(src), cv2.VideoWriter_fourcc(*"MJPG"), 12.0, (64, 48))
    ramp = np.add.outer(np.arange(48) * 2, np.arange(64) * 3)
    for k in range(3):
        wr.write(np.stack([ramp + 20 * k, 255 - ramp, ramp // 2], -1).astype(np.uint8))
    wr.release()
    p = run_video("--input", src, "--output", tmp_path / "out.avi", "--model",
                  tmp_path / "up.onnx", "--input-range", "0,1", "--output-range", "-1,1", "-q")
    assert p.returncode == 0, p.stderr
    cap = cv2.VideoCapture(str(tmp_path / "out.avi"))
    got = next(video.read_frames(cap))
    cap.release()
    first = next(video.read_frames(cv2.VideoCapture(str(src))))
    want = Engine(pkg.wrap_onnx(tmp_path / "up.onnx", conventions.from_fields(
        {"input_range": "0,1", "output_range": "-1,1"}, None, None)), cache_mb=0).convert(first)
    default = Engine(str(tmp_path / "up.onnx"), cache_mb=0).convert(first)   # [-1, 1]
    assert got.shape == (96, 128, 3)
    assert np.abs(got.astype(int) - want).mean() < 4 < np.abs(got.astype(int) - default).mean()
