"""python -m a2r_edge.video: file mode end to end (count, order, size, fps), the camera grabber
with fake captures (latest frame, drops, loss + reconnect), Ctrl-C, bad inputs; smoothing."""
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest

from a2r_edge import Engine
from a2r_edge.apps import video
from model_packages import make_package, upscaler_2x

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    return make_package(tmp_path_factory.mktemp("vpkg") / "tiny")


def frame_for(i, n, w=64, h=48):
    """Frame i: a bright vertical bar whose position encodes i (AdaIN normalises grey levels
    away, positions survive), over a two-tone background."""
    f = np.full((h, w, 3), 40, np.uint8)
    f[h // 2:, :, 1] = 160
    x = 4 + 4 * (i % ((w - 8) // 4))
    f[:, x:x + 4] = 230
    return f


def write_video(path, n, fps=12.0, w=64, h=48):
    wr = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (w, h))
    assert wr.isOpened()
    for i in range(n):
        wr.write(frame_for(i, n, w, h))
    wr.release()


def read_video(path):
    cap = cv2.VideoCapture(str(path))
    fps = cap.get(cv2.CAP_PROP_FPS)
    frames = list(video.read_frames(cap))
    cap.release()
    return frames, fps


def test_file_mode_keeps_every_frame_in_order_size_and_fps(package, tmp_path, capsys):
    n = 12
    src, dst = tmp_path / "in.avi", tmp_path / "out.avi"
    write_video(src, n, fps=12.0)
    code = video.main(["--input", str(src), "--output", str(dst), "--model", str(package),
                       "--smooth", "0"])  # no EMA: each output is its own frame's conversion
    assert code == 0
    assert "frames: 12" in capsys.readouterr().out
    got, fps = read_video(dst)
    assert len(got) == n and fps == pytest.approx(12.0)
    assert got[0].shape == (48, 64, 3)
    assert not list(tmp_path.glob(".*partial*"))
    # order: each output is closest to the conversion of its own input frame
    inputs, _ = read_video(src)
    eng = Engine(str(package))
    want = [eng.convert(f).astype(np.float32) for f in inputs]
    for k, g in enumerate(got):
        err = [np.mean((g.astype(np.float32) - w) ** 2) for w in want]
        assert int(np.argmin(err)) == k


def test_file_mode_strength_zero_gives_the_frames_back(package, tmp_path):
    """--strength reaches Engine.stream: at 0 each output is its input frame (up to MJPG's
    loss), where the conversion moves it far (the tiny test model's output is noise-like)."""
    src = tmp_path / "in.avi"
    write_video(src, 4)
    inputs, _ = read_video(src)
    for strength, near in (("0", True), ("1", False)):
        dst = tmp_path / f"out{strength}.avi"
        assert video.main(["--input", str(src), "--output", str(dst), "--model", str(package),
                           "--smooth", "0", "--strength", strength, "-q"]) == 0
        got, _ = read_video(dst)
        assert len(got) == 4
        err = max(np.abs(g.astype(np.float32) - f).mean() for g, f in zip(got, inputs))
        assert (err < 3) if near else (err > 10), (strength, err)


@pytest.mark.parametrize("strength", [None, 0.9])
def test_file_mode_style_moves_every_frame_towards_the_reference(package, tmp_path, strength):
    src, dst, ref_path = tmp_path / "in.avi", tmp_path / "out.avi", tmp_path / "ref.png"
    write_video(src, 4)
    ref_photo = np.zeros((20, 20, 3), np.uint8)
    ref_photo[..., 0] = 200                                  # blue
    cv2.imwrite(str(ref_path), ref_photo)
    option = [] if strength is None else ["--style-colour", str(strength)]
    assert video.main(["--input", str(src), "--output", str(dst), "--model", str(package),
                       "--style", str(ref_path), "--smooth", "0", "-q"] + option) == 0
    got, _ = read_video(dst)
    inputs, _ = read_video(src)
    eng = Engine(str(package))
    kw = {} if strength is None else {"style_colour": strength}
    assert len(got) == 4
    for g, f in zip(got, inputs):   # MJPG is lossy: compared by mean colour
        styled = eng.convert(f, style=ref_photo, **kw).reshape(-1, 3).mean(0)
        plain = eng.convert(f).reshape(-1, 3).mean(0)
        mean = g.reshape(-1, 3).mean(0)
        assert np.abs(mean - styled).max() < 4 < np.abs(mean - plain).max()


def test_style_needs_an_adain_stage(tmp_path, capsys):
    model = tmp_path / "up2.onnx"
    onnx.save(upscaler_2x(np.random.default_rng(0)), model)
    src, ref_path = tmp_path / "in.avi", tmp_path / "ref.png"
    write_video(src, 2)
    cv2.imwrite(str(ref_path), np.zeros((8, 8, 3), np.uint8))
    assert video.main(["--input", str(src), "--model", str(model), "--style", str(ref_path),
                       "-q"]) == 2
    assert "no AdaIN stage" in capsys.readouterr().err


def test_file_mode_max_frames_and_resize(package, tmp_path):
    src, dst = tmp_path / "in.avi", tmp_path / "out.mp4"
    write_video(src, 10)
    assert video.main(["--input", str(src), "--output", str(dst), "--model", str(package),
                       "--max-frames", "4", "--size", "32x24", "-q"]) == 0
    got, _ = read_video(dst)
    assert len(got) == 4 and got[0].shape == (48, 64, 3)  # the writer keeps the source size


@pytest.mark.parametrize("argv,match", [
    (["--input", "/nonexistent/x.avi"], "no such file"),
    (["--input", "__NOTVIDEO__"], "not a video"),
    (["--input", "__DIR__"], "a folder, not a video file"),
    (["--input", "__VIDEO__", "--size", "100000x100000"],   # refused before a resize to it
     "--size 100000x100000 is 10000000000 pixels, more than the limit A2R_MAX_PIXELS="),
    (["--input", "__VIDEO__", "--output", "x.gif"], "use a .mp4/.webm/.avi file name"),
    (["--input", "__VIDEO__", "--size", "12"], "WxH"),
    (["--input", "__VIDEO__", "--smooth", "1.5"], "smooth"),
    (["--camera", "0", "--input", "__VIDEO__"], "not allowed"),
    (["--input", "__VIDEO__", "--style", "/nonexistent/ref.png"], "cannot read"),
    (["--input", "__VIDEO__", "--style-colour", "0.2"], "--style-colour needs --style"),
    (["--input", "__VIDEO__", "--style-colour", "-1"], "in [0, 1]"),
])
def test_bad_arguments_one_line_exit_2(package, tmp_path, capsys, argv, match):
    bad = tmp_path / "bad.avi"
    bad.write_bytes(b"not a video at all")
    good = tmp_path / "ok.avi"
    write_video(good, 2)
    argv = [{"__NOTVIDEO__": str(bad), "__VIDEO__": str(good), "__DIR__": str(tmp_path)}.get(a, a)
            for a in argv]
    argv = [str(tmp_path / a) if a == "x.gif" else a for a in argv]
    with pytest.raises(SystemExit) as exc_info:
        sys.exit(video.main(argv + ["--model", str(package)]))
    assert exc_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert match in err and len(err.splitlines()) == 1


def test_a_file_ending_before_its_frame_count_is_warned_about(package, tmp_path, capsys):
    """The first 70 % of a 20-frame AVI: its header still announces 20 frames."""
    full, cut, dst = tmp_path / "full.avi", tmp_path / "cut.avi", tmp_path / "out.avi"
    write_video(full, 20)
    cut.write_bytes(full.read_bytes()[:full.stat().st_size * 7 // 10])
    assert video.main(["--input", str(cut), "--output", str(dst), "--model", str(package)]) == 0
    got, _ = read_video(dst)
    assert 0 < len(got) < 20
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == [f"a2r_edge.video: warning: {cut} ended after {len(got)} of the 20 frames "
                        f"it announces (truncated or damaged?)"]
    assert video.main(["--input", str(full), "--output", str(dst), "--model", str(package),
                       "--max-frames", "5"]) == 0   # stopped by --max-frames: no warning
    assert "warning" not in capsys.readouterr().err


def test_ctrl_c_finalises_the_output(package, tmp_path):
    src, dst = tmp_path / "long.avi", tmp_path / "out.avi"
    write_video(src, 3000, w=96, h=96)
    env = dict(os.environ, PYTHONPATH=str(ROOT), A2R_NUM_THREADS="1")
    # SIGINT back to its default in the child: a test run started in the background by a
    # non-interactive shell inherits SIGINT ignored, and Python then installs no
    # KeyboardInterrupt handler (the video would run to its end)
    proc = subprocess.Popen([sys.executable, "-m", "a2r_edge.video", "--input", str(src),
                             "--output", str(dst), "--model", str(package)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    def partial():
        return list(tmp_path.glob(".out.avi.*.part.avi"))
    deadline = time.monotonic() + 60
    while not partial() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert partial(), proc.communicate()
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "stopped by Ctrl-C" in out
    got, _ = read_video(dst)
    assert 0 < len(got) < 3000 and not partial()


# --- the grabber with fake captures ---------------------------------------------------------------

class FakeCapture:
    """read() returns frames 0..n-1 (then fails: a lost camera); ``gate``: reads wait on it."""

    def __init__(self, n, start=0, gate=None):
        self.i, self.end, self.gate, self.released = start, start + n, gate, False

    def read(self):
        if self.gate is not None:
            self.gate.acquire()
        if self.i >= self.end:
            return False, None
        frame = np.full((4, 4, 3), self.i % 256, np.uint8)
        frame[0, 0, 0] = self.i // 256
        self.i += 1
        return True, frame

    def release(self):
        self.released = True


def index(frame):
    return int(frame[0, 0, 0]) * 256 + int(frame[1, 1, 0])


def test_grabber_keeps_only_the_latest_frame_and_counts_drops():
    gate = threading.Semaphore(0)
    g = video.LatestFrameGrabber(lambda: FakeCapture(100, gate=gate), reconnects=0)
    for _ in range(10):
        gate.release()
    deadline = time.monotonic() + 5
    while g.grabbed < 10 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert index(g.read()) == 9 and g.dropped == 9  # 0..8 were stale
    gate.release()
    assert index(g.read()) == 10 and g.dropped == 9
    for _ in range(200):
        gate.release()
    seen = [index(f) for f in g]
    assert seen == sorted(seen) and seen[-1] == 99  # newest last, never out of order
    assert g.taken + g.dropped == g.grabbed == 100
    assert "lost after 100 frame(s)" in g.error


def test_grabber_reconnects_after_a_loss():
    caps = iter([FakeCapture(5), None, FakeCapture(5, start=5)])
    g = video.LatestFrameGrabber(lambda: next(caps, None), reconnects=3, retry_delay=0.01)
    seen = []
    for f in g:
        seen.append(index(f))
        time.sleep(0.002)
    assert g.reconnected == 1 and seen[-1] == 9
    assert g.grabbed == 10 and "3 reconnect attempt(s) failed" in g.error


def test_camera_loss_ends_the_run_with_a_clear_message(package, tmp_path, capsys):
    caps = iter([FakeCapture(6)])
    args = video.parser().parse_args(["--camera", "0", "--model", str(package),
                                      "--output", str(tmp_path / "cam.avi")])

    def opener():
        cap = next(caps, None)
        if cap is not None:  # 16 x 16 frames (the grabber only sees what read() gives)
            cap.read = (lambda c=cap: (lambda ok, f: (ok, None if f is None else
                                                      cv2.resize(f, (16, 16))))(*FakeCapture.read(c)))
        return cap
    assert video.run(args, open_capture=opener) == 1  # returns: the reconnect attempts end
    captured = capsys.readouterr()
    assert "camera 0 lost after 6 frame(s)" in captured.err
    got, _ = read_video(tmp_path / "cam.avi")
    assert 1 <= len(got) <= 6


def test_camera_that_never_opens_is_exit_2(package, capsys):
    args = video.parser().parse_args(["--camera", "7", "--model", str(package)])
    with pytest.raises(video.UsageError, match="cannot open camera 7"):
        video.run(args, open_capture=lambda: None)


# --- smoothing ---------------------------------------------------------------------------------

def test_ema_of_content_stats_and_boxes():
    ema = video.EmaStats(0.5)
    m, s = ema((np.array([[0.0, 2.0]], np.float32), np.array([[1.0, 1.0]], np.float32)))
    np.testing.assert_allclose(m, [[0, 2]])
    m, s = ema((np.array([[4.0, 2.0]], np.float32), np.array([[3.0, 1.0]], np.float32)))
    np.testing.assert_allclose(m, [[2, 2]])
    np.testing.assert_allclose(s, [[2, 1]])
    boxes = video.BoxSmoother(0.5)
    assert boxes(None, (100, 200)) == (0, 0, 200, 100)  # whole frame before a detection
    assert boxes((10, 10, 50, 50), (100, 200)) == (10, 10, 50, 50)
    assert boxes((30, 10, 70, 50), (100, 200)) == (20, 10, 60, 50)
    assert boxes(None, (100, 200)) == (20, 10, 60, 50)


def test_smoothing_reduces_flicker_in_the_stream(package):
    """Alternating bright/dark noise: the AdaIN-normalised output flickers less with the EMA."""
    eng = Engine(str(package))
    rng = np.random.default_rng(0)
    frames = [np.clip(rng.normal(128, 20 if i % 2 else 60, (32, 32, 3)), 0, 255).astype(np.uint8)
              for i in range(8)]
    plain = list(eng.stream(frames))
    smooth = list(eng.stream(frames, content_stats=video.EmaStats(0.9)))
    flick = lambda outs: np.mean([np.abs(a.astype(float) - b).mean()  # noqa: E731
                                  for a, b in zip(outs[1:], outs[:-1])])
    assert flick(smooth) < flick(plain)


def test_smoothed_statistics_feed_the_content_map(tmp_path):
    """A package whose AdaIN targets are predicted from the content statistics predicts them
    from the smoothed ones: the first frame (EMA = its own statistics) matches convert(), a
    later frame differs from converting it alone."""
    eng = Engine(str(make_package(tmp_path / "map", content_map=True)))
    rng = np.random.default_rng(1)
    frames = [np.clip(rng.normal(128, 15 + 40 * i, (32, 32, 3)), 0, 255).astype(np.uint8)
              for i in range(3)]
    outs = list(eng.stream(frames, content_stats=video.EmaStats(0.9)))
    assert np.abs(outs[0].astype(int) - eng.convert(frames[0])).max() <= 1
    assert np.abs(outs[2].astype(int) - eng.convert(frames[2])).mean() > 1


def test_smoothed_colour_statistics_steady_the_style_colour_step(package):
    """A dark patch comes and goes at the bottom: the colour step maps each frame from its own
    colour statistics, so the rows the patch never covers change colour with it; with those
    statistics smoothed (colour_stats=EmaStats) they change less. The first frame (the EMA
    starts at its own statistics) is convert(style=)'s."""
    eng = Engine(str(package))
    rng = np.random.default_rng(2)
    base = np.clip(rng.normal(120, 30, (32, 32, 3)), 0, 255).astype(np.uint8)
    frames = []
    for i in range(8):
        f = base.copy()
        if i % 2:
            f[16:] = 10
        frames.append(f)
    ref_photo = np.clip(rng.normal(90, 20, (20, 20, 3)) + [60, 0, -40], 0, 255).astype(np.uint8)

    def top_change(**smoothing):
        outs = list(eng.stream(frames, ref_photo, content_stats=video.EmaStats(0.9),
                               **smoothing))
        means = np.array([o[:12].reshape(-1, 3).mean(0) for o in outs])
        return outs[0], np.abs(np.diff(means, axis=0)).mean()

    first, plain = top_change()
    first_smoothed, smoothed = top_change(colour_stats=video.EmaStats(0.9))
    assert smoothed < 0.5 * plain
    np.testing.assert_array_equal(first_smoothed, first)
    assert np.abs(first.astype(int) - eng.convert(frames[0], style=ref_photo)).max() <= 1


def test_detector_region_is_converted_and_pasted(package, tmp_path):
    src, dst = tmp_path / "in.avi", tmp_path / "out.avi"
    write_video(src, 4)
    args = video.parser().parse_args(["--input", str(src), "--output", str(dst), "--model",
                                      str(package), "-q"])
    assert video.run(args, detector=lambda f: (8, 8, 40, 40)) == 0
    got, _ = read_video(dst)
    inputs, _ = read_video(src)
    outside = np.abs(got[0].astype(int) - inputs[0])[:, 48:].mean()
    inside = np.abs(got[0].astype(int) - inputs[0])[12:36, 12:36].mean()
    assert len(got) == 4 and inside > 3 * outside + 1
