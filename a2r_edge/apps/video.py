"""``python -m a2r_edge.video``: convert a camera feed or a video file, frame by frame.

    python -m a2r_edge.video --camera 0 --show
    python -m a2r_edge.video --input in.mp4 --output out.mp4

Camera: a grabber thread keeps only the newest frame (stale frames are dropped and counted, the
opencv #13145 problem); a lost camera is reopened a few times, then the run stops with a clear
message. File: every frame is converted, in order, none dropped; the output keeps the source's
fps and size and is written to a temporary file renamed into place at the end, so it is always
finalised and playable, also after Ctrl-C. The frames run through ``Engine.stream`` (preprocess,
network and postprocess pipelined over threads). Against flicker the AdaIN content statistics
(and the ROI box, when a detector is used, and with --style the frame's own colour statistics
that the colour step maps onto the reference's) are smoothed over time:
s = a * s_prev + (1 - a) * x with a = --smooth. At the end a summary: fps, per-stage latency
(median, p95), frames dropped.
Bad arguments or an unreadable input: one line, exit code 2; camera lost: exit code 1.
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from ..picture import roi
from ..picture.io import read_picture
from .convert import check_style_options, style_colour

FOURCC = {".mp4": "mp4v", ".avi": "MJPG"}
# Reconnect attempts before a lost camera ends the run, and the pause between them: a USB
# camera that re-enumerates comes back within about a second.
RECONNECTS = 3
RETRY_DELAY_S = 0.5
# fps written for a camera that does not report one: the usual webcam rate.
DEFAULT_CAMERA_FPS = 30.0


class UsageError(ValueError):
    """A bad argument or input: one line, exit code 2."""


# --- camera ---------------------------------------------------------------------------------------

class LatestFrameGrabber:
    """Reads a capture in a thread and keeps only the newest frame.

    open_capture(): returns an opened capture (``read() -> (ok, frame)``, ``release()``) or None.
    A frame replaced before anyone took it counts in ``dropped``. A failed read reopens the
    capture up to ``reconnects`` times, ``retry_delay`` s apart; then ``error`` says why the
    frames ended. Iterating yields frames until the capture is lost or ``stop()`` is called.
    """

    def __init__(self, open_capture: Callable, reconnects: int = RECONNECTS,
                 retry_delay: float = RETRY_DELAY_S, name: str = "camera"):
        self._open, self.reconnects, self.retry_delay, self.name = \
            open_capture, reconnects, retry_delay, name
        self._cap = open_capture()
        if self._cap is None:
            raise UsageError(f"cannot open {name}")
        self._cond = threading.Condition()
        self._frame = None
        self._done = False
        self._stop = threading.Event()
        self.grabbed = self.dropped = self.taken = self.reconnected = 0
        self.error: str | None = None
        self._thread = threading.Thread(target=self._loop, name="a2r-grabber", daemon=True)
        self._thread.start()

    def _read(self):
        try:
            ok, frame = self._cap.read()
        except Exception:  # noqa: BLE001  (a driver error is a lost camera too)
            return None
        return frame if ok and frame is not None else None

    def _reopen(self) -> bool:
        try:
            self._cap.release()
        except Exception:  # noqa: BLE001
            pass
        for _ in range(self.reconnects):
            if self._stop.wait(self.retry_delay):
                return False
            cap = self._open()
            if cap is not None:
                self._cap = cap
                self.reconnected += 1
                return True
        self.error = (f"{self.name} lost after {self.grabbed} frame(s); "
                      f"{self.reconnects} reconnect attempt(s) failed")
        return False

    def _loop(self):
        try:
            while not self._stop.is_set():
                frame = self._read()
                if frame is None:
                    if self._stop.is_set() or not self._reopen():
                        break
                    continue
                with self._cond:
                    if self._frame is not None:
                        self.dropped += 1
                    self._frame = frame
                    self.grabbed += 1
                    self._cond.notify_all()
        finally:
            try:
                self._cap.release()
            except Exception:  # noqa: BLE001
                pass
            with self._cond:
                self._done = True
                self._cond.notify_all()

    def read(self, timeout: float | None = None):
        """The newest frame not yet taken (waits for one); None when the frames have ended."""
        with self._cond:
            self._cond.wait_for(lambda: self._frame is not None or self._done, timeout)
            frame, self._frame = self._frame, None
            if frame is not None:
                self.taken += 1
            return frame

    def __iter__(self) -> Iterator[np.ndarray]:
        while True:
            frame = self.read()
            if frame is None:
                return
            yield frame

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join()


def open_camera(index: int, size: tuple[int, int] | None):
    """A function opening camera ``index`` (None when it cannot), buffer of 1 frame."""
    import cv2

    def opener():
        cap = cv2.VideoCapture(index)
        if not cap.isOpened():
            cap.release()
            return None
        cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)  # honoured by V4L2 and DirectShow, ignored elsewhere
        if size:
            cap.set(cv2.CAP_PROP_FRAME_WIDTH, size[0])
            cap.set(cv2.CAP_PROP_FRAME_HEIGHT, size[1])
        return cap
    return opener


# --- files ----------------------------------------------------------------------------------------

def read_frames(cap) -> Iterator[np.ndarray]:
    """Every frame of an opened capture, in order."""
    while True:
        ok, frame = cap.read()
        if not ok or frame is None:
            return
        yield frame


class AtomicVideoWriter:
    """cv2.VideoWriter into a temporary file beside ``path``; ``close()`` renames it into place
    (the container is only playable once released, so the final name never holds half a file).
    Frames of another size are resized to ``size`` (W, H)."""

    def __init__(self, path: Path, fps: float, size: tuple[int, int]):
        import cv2
        ext = path.suffix.lower()
        if ext not in FOURCC:
            raise UsageError(f"output {path}: use a .mp4 or .avi file name")
        self.path, self.size = path, size
        self.tmp = path.with_name(f".{path.stem}.partial{ext}")  # same extension: same container
        self._w = cv2.VideoWriter(str(self.tmp), cv2.VideoWriter_fourcc(*FOURCC[ext]), fps, size)
        if not self._w.isOpened():
            self.tmp.unlink(missing_ok=True)
            raise UsageError(f"output {path}: OpenCV cannot write {FOURCC[ext]} {ext} files here")
        self.frames = 0

    def write(self, frame: np.ndarray) -> None:
        import cv2
        if frame.ndim == 2:
            frame = cv2.cvtColor(frame, cv2.COLOR_GRAY2BGR)
        if (frame.shape[1], frame.shape[0]) != self.size:
            frame = cv2.resize(frame, self.size, interpolation=cv2.INTER_AREA)
        self._w.write(np.ascontiguousarray(frame[:, :, :3]))
        self.frames += 1

    def close(self) -> None:
        self._w.release()
        os.replace(self.tmp, self.path)


# --- temporal smoothing ------------------------------------------------------------------------

class EmaStats:
    """EMA of per-channel statistics (mean, std), for ``Engine.stream(content_stats=)`` and
    ``colour_stats=``: s = alpha * s_prev + (1 - alpha) * x (the first frame, or the first after
    the channel count changed, starts it)."""

    def __init__(self, alpha: float):
        self.alpha, self.state = alpha, None

    def __call__(self, stats):
        mean, std = stats
        if self.state is None or self.state[0].shape != mean.shape:
            self.state = (mean.copy(), std.copy())
        else:
            a = np.float32(self.alpha)
            for s, x in zip(self.state, (mean, std)):
                s *= a
                s += (1 - a) * x
        return self.state


class BoxSmoother:
    """EMA of an ROI box (x0, y0, x1, y1) from a detector; None (no detection) keeps the last
    box, and the whole frame until the first detection."""

    def __init__(self, alpha: float):
        self.alpha, self.box = alpha, None

    def __call__(self, box, frame_shape) -> tuple[int, int, int, int]:
        h, w = frame_shape[:2]
        if box is not None:
            b = np.asarray(box, np.float64)
            self.box = b if self.box is None else self.alpha * self.box + (1 - self.alpha) * b
        if self.box is None:
            return 0, 0, w, h
        x0, y0, x1, y1 = np.rint(self.box).astype(int)
        x0, y0 = min(max(x0, 0), w - 1), min(max(y0, 0), h - 1)
        return x0, y0, max(x0 + 1, min(x1, w)), max(y0 + 1, min(y1, h))


# --- the loop -------------------------------------------------------------------------------------

def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--size must be WxH, e.g. 640x480, got {text!r}")
    if w < 1 or h < 1:
        raise argparse.ArgumentTypeError(f"--size must be positive, got {text!r}")
    return w, h


def _alpha(text: str) -> float:
    try:
        a = float(text)
    except ValueError:
        a = -1.0
    if not 0.0 <= a < 1.0:
        raise argparse.ArgumentTypeError(f"--smooth must be a number in [0, 1), got {text!r}")
    return a


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would add the usage block)
        print(f"a2r_edge.video: error: {message}", file=sys.stderr)
        sys.exit(2)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m a2r_edge.video",
                description="Convert a camera feed or a video file frame by frame.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--camera", type=int, metavar="N", help="camera index (0: the first)")
    src.add_argument("--input", metavar="FILE", help="video file: every frame, in order")
    p.add_argument("--output", metavar="FILE", help="write the converted video (.mp4 or .avi)")
    p.add_argument("--show", action="store_true", help="show the frames with an fps overlay")
    p.add_argument("--max-frames", type=int, metavar="N", help="stop after N frames")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu", "split"))
    p.add_argument("--size", type=_size, metavar="WxH",
                   help="convert at this size (the camera is asked for it; output keeps the "
                        "source size)")
    p.add_argument("--model", metavar="PATH", help="model package folder or plain ONNX file")
    p.add_argument("--style", metavar="REF_PHOTO",
                   help="a reference photo: each frame's colours move towards its colours "
                        "(--style-colour), and its statistics steer the AdaIN stage (as "
                        "convert --style)")
    p.add_argument("--style-colour", type=style_colour, metavar="S",
                   help="with --style: the share of the way each frame's colour mean and std "
                        "move to the reference's (0..1; default: half-way)")
    p.add_argument("--smooth", type=_alpha, default=0.8, metavar="ALPHA",
                   help="weight of the past in the EMA of AdaIN statistics, ROI boxes and, "
                        "with --style, the frames' colour statistics (0: none; default 0.8, "
                        "~5 frames)")
    p.add_argument("--roi", choices=("face",),
                   help="convert only the character's face region (the animeface package; "
                        "the whole frame until a face is found)")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary")
    return p


def _overlay(frame: np.ndarray, fps: float, latency: dict, dropped: int) -> np.ndarray:
    import cv2
    lines = [f"{fps:5.1f} fps  dropped {dropped}"] + [
        f"{k} {v['median'] * 1e3:6.1f} ms" for k, v in latency.items() if v["count"]]
    out = frame.copy()
    for i, text in enumerate(lines):
        cv2.putText(out, text, (8, 20 + 18 * i), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (0, 255, 0), 1,
                    cv2.LINE_AA)
    return out


def summary(frames: int, seconds: float, latency: dict, dropped: int, note: str = "") -> str:
    lines = [f"frames: {frames} in {seconds:.2f} s = {frames / max(seconds, 1e-9):.1f} fps; "
             f"dropped: {dropped}" + (f"; {note}" if note else "")]
    for name, v in latency.items():
        if v["count"]:
            lines.append(f"  {name:<12} median {v['median'] * 1e3:8.2f} ms   "
                         f"p95 {v['p95'] * 1e3:8.2f} ms")
    return "\n".join(lines)


def _smoothed(detector, alpha):
    """The detector with its boxes smoothed over frames (None: none); the whole frame -> None,
    so a frame without a face is converted whole, not pasted with a feathered border."""
    if detector is None:
        return None
    boxes = BoxSmoother(alpha)

    def detect(frame):
        box = boxes(detector(frame), frame.shape)
        return None if box == (0, 0, frame.shape[1], frame.shape[0]) else box

    return detect


def run(args: argparse.Namespace, detector: Callable | None = None,
        open_capture: Callable | None = None) -> int:
    """The loop. detector: frame -> box (x0, y0, x1, y1) or None; only that (smoothed) region
    is converted and pasted back. open_capture: replaces the camera opener (tests)."""
    import cv2
    from ..engine import Engine

    if args.max_frames is not None and args.max_frames < 1:
        raise UsageError(f"--max-frames must be >= 1, got {args.max_frames}")
    check_style_options(args)
    out_path = Path(args.output) if args.output else None
    if out_path is not None and out_path.suffix.lower() not in FOURCC:
        raise UsageError(f"output {out_path}: use a .mp4 or .avi file name")
    if args.show:
        try:
            cv2.namedWindow("a2r_edge", cv2.WINDOW_NORMAL)
        except cv2.error:
            raise UsageError("--show needs an OpenCV build with a GUI (this one is headless)")
    grabber = cap = None
    if args.camera is not None:
        grabber = LatestFrameGrabber(open_capture or open_camera(args.camera, args.size),
                                     name=f"camera {args.camera}")
        source, fps, size = iter(grabber), DEFAULT_CAMERA_FPS, None
    else:
        path = Path(args.input)
        if not path.is_file():
            raise UsageError(f"{path}: no such file")
        cap = cv2.VideoCapture(str(path))
        ok, first = cap.read() if cap.isOpened() else (False, None)
        if not ok:
            cap.release()
            raise UsageError(f"{path}: not a video OpenCV can read (corrupt, empty or another "
                             f"format)")
        fps = cap.get(cv2.CAP_PROP_FPS)
        fps = fps if fps and np.isfinite(fps) and fps > 0 else DEFAULT_CAMERA_FPS
        size = (first.shape[1], first.shape[0])
        source = itertools.chain([first], read_frames(cap))
    engine = Engine(args.model, device=args.device, roi=_smoothed(detector, args.smooth))
    ema = EmaStats(args.smooth) if args.smooth > 0 and engine.model.stage("adain") else None
    style = None
    if args.style:
        style = read_picture(Path(args.style))
        if engine.model.stage("adain") is None:
            raise UsageError(f"model {engine.model.name!r} has no AdaIN stage: --style does not "
                             f"apply")
    if args.max_frames is not None:
        source = itertools.islice(source, args.max_frames)

    def prepared():
        for frame in source:
            nonlocal size
            if size is None:
                size = (frame.shape[1], frame.shape[0])
            if args.size and (frame.shape[1], frame.shape[0]) != args.size:
                frame = cv2.resize(frame, args.size, interpolation=cv2.INTER_AREA)
            yield frame

    writer, frames, note, code = None, 0, "", 0
    colour_ema = EmaStats(args.smooth) if args.smooth > 0 and style is not None else None
    stream = engine.stream(prepared(), style, content_stats=ema, colour_stats=colour_ema,
                           style_colour=args.style_colour)
    t0 = time.perf_counter()
    try:
        for out in stream:
            frames += 1
            if out_path is not None:
                if writer is None:
                    writer = AtomicVideoWriter(out_path, fps, size)
                writer.write(out)
            if args.show:
                fps_now = frames / max(time.perf_counter() - t0, 1e-9)
                cv2.imshow("a2r_edge", _overlay(out, fps_now, engine.latency(),
                                                grabber.dropped if grabber else 0))
                if cv2.waitKey(1) & 0xFF in (ord("q"), 27):
                    note = "stopped by the user"
                    break
    except KeyboardInterrupt:
        note = "stopped by Ctrl-C"
    finally:
        stream.close()
        elapsed = time.perf_counter() - t0
        if grabber is not None:
            grabber.stop()
            if grabber.error:
                note, code = grabber.error, 1
        if cap is not None:
            cap.release()
        if writer is not None:
            writer.close()
        if args.show:
            cv2.destroyAllWindows()
    if code:
        print(f"a2r_edge.video: error: {note}", file=sys.stderr)
    if not args.quiet:
        print(summary(frames, elapsed, engine.latency(), grabber.dropped if grabber else 0,
                      note) + (f"\noutput: {out_path}" if writer is not None else ""))
    return code


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return run(args, detector=roi.resolve(args.roi))
    except (ValueError, OSError) as exc:  # bad input, model, settings: one line, exit 2
        print(f"a2r_edge.video: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
