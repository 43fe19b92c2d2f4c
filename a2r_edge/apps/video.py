"""``python -m a2r_edge.video``: convert a camera feed or a video file, frame by frame.

    python -m a2r_edge.video --input in.mp4 --output out.webm     # VP8: plays in browsers
    python -m a2r_edge.video --camera 0 --output cam.webm --max-frames 300
    python -m a2r_edge.video --camera 0 --show   # needs an OpenCV with a GUI (not the headless
                                                 # wheel this package installs)

Outputs: .webm (VP8), .mp4 (H.264 where the installed OpenCV has an encoder, else MPEG-4 Part 2),
.avi (MJPG); the summary names the codec used. A progress line (frames, fps, ETA) runs on
stderr; --metrics-port serves Prometheus metrics during the run (runtime/metrics.py).

Camera: a grabber thread keeps only the newest frame (stale frames are dropped and counted, the
opencv #13145 problem); a lost camera is reopened a few times, then the run stops with a clear
message. File: every frame is converted, in order, none dropped; the output keeps the source's
fps and size and is written to a private temporary file (its folder created when missing),
checked to hold every frame and renamed into place at the end, so it is always finalised and
playable, also after Ctrl-C; a failed write (a full disk) is an error and leaves nothing under
the final name. The frames run through ``Engine.stream`` (preprocess, network and postprocess
pipelined over threads). Against flicker the AdaIN content statistics
(and the ROI box, when a detector is used, and with --style the frame's own colour statistics
that the colour step maps onto the reference's) are smoothed over time:
s = a * s_prev + (1 - a) * x with a = --smooth. At the end a summary: fps, per-stage latency
(median, p95), frames dropped.
Bad arguments or an unreadable input: one line, exit code 2; camera lost: exit code 1; a file
that ends before the frame count its header states: one warning line (the frames read are kept).
"""
from __future__ import annotations

import argparse
import itertools
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from .. import _settings
from ..picture import roi
from ..picture.io import read_picture
from ..runtime.files import make_folder, not_a_file
from . import OneLineParser, one_line_warnings, positive_int, slow_start_note
from .convert import (add_convention_options, add_placement_options, add_strength_option,
                      add_style_options, check_style_options, convention_flags, package_of)
from .video_files import (CODECS, AtomicVideoWriter, Progress, UsageError, codec_note,
                          quiet_stderr, read_frames, same_file)

# Reconnect attempts before a lost camera ends the run, and the pause between them: a USB
# camera that re-enumerates comes back within about a second.
RECONNECTS = 3
RETRY_DELAY_S = 0.5
# fps written for a camera that does not report one: the usual webcam rate.
DEFAULT_CAMERA_FPS = 30.0


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
            raise UsageError(f"cannot open {name} (no such device, busy, or no permission)")
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
        with quiet_stderr():  # OpenCV's backend-by-backend warnings: our one line says it
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


def _camera_index(text: str) -> int:
    try:
        index = int(text)
    except ValueError:
        index = -1
    if not 0 <= index < 1 << 16:  # OpenCV crashes on negative indices
        raise argparse.ArgumentTypeError(f"--camera must be a camera index >= 0, got {text!r}")
    return index


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"--metrics-port must be a port 0..65535, got {text!r}")
    return port


def _alpha(text: str) -> float:
    try:
        a = float(text)
    except ValueError:
        a = -1.0
    if not 0.0 <= a < 1.0:
        raise argparse.ArgumentTypeError(f"--smooth must be a number in [0, 1), got {text!r}")
    return a


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m a2r_edge.video",
                      description="Convert a camera feed or a video file frame by frame.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--camera", type=_camera_index, metavar="N",
                     help="camera index (0: the first)")
    src.add_argument("--input", metavar="FILE", help="video file: every frame, in order")
    p.add_argument("--output", metavar="FILE",
                   help="write the converted video: .webm (VP8, plays in browsers), .mp4 "
                        "(H.264 where this OpenCV has it, else MPEG-4 Part 2) or .avi (MJPG); "
                        "without it nothing is written")
    p.add_argument("--show", action="store_true",
                   help="show the frames with an fps overlay (needs an OpenCV with a GUI; the "
                        "headless wheel this package installs has none: use --output)")
    p.add_argument("--max-frames", type=positive_int, metavar="N", help="stop after N frames")
    add_placement_options(p)
    p.add_argument("--size", type=_size, metavar="WxH",
                   help="convert at this size (the camera is asked for it; output keeps the "
                        "source size, times the model's scale)")
    p.add_argument("--model", metavar="PATH", help="model package folder or plain ONNX file")
    add_convention_options(p)
    add_style_options(p, "frame")
    add_strength_option(p)
    p.add_argument("--smooth", type=_alpha, default=0.8, metavar="ALPHA",
                   help="weight of the past in the EMA of AdaIN statistics, ROI boxes and, "
                        "with --style, the frames' colour statistics (0: none; default 0.8, "
                        "~5 frames)")
    p.add_argument("--roi", choices=("face",),
                   help="convert only the character's face region (the animeface package; "
                        "the whole frame until a face is found)")
    p.add_argument("--metrics-port", type=_port, metavar="PORT",
                   help="serve Prometheus metrics (stage latency histograms, fps, dropped "
                        "frames, fallbacks, memory) at http://127.0.0.1:PORT/metrics during "
                        "the run (0: a free port, printed); needs the [metrics] extra")
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


def _serve_metrics(port: int | None):
    """A StreamMetrics served on 127.0.0.1:``port`` (its URL printed), None without a port."""
    if port is None:
        return None
    from ..runtime.metrics import StreamMetrics
    try:
        metrics = StreamMetrics()
        port = metrics.serve(port)
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    print(f"a2r_edge.video: metrics: http://127.0.0.1:{port}/metrics", file=sys.stderr,
          flush=True)
    return metrics


def check_output(args: argparse.Namespace) -> Path | None:
    """--output as a Path (None: none); UsageError for a container without a codec here, or an
    output that is the input (same path or inode)."""
    if args.output is None:
        return None
    out_path = Path(args.output)
    if out_path.suffix.lower() not in CODECS:
        raise UsageError(f"output {out_path}: use a {'/'.join(CODECS)} file name")
    if args.input is not None and same_file(out_path, Path(args.input)):
        raise UsageError(f"output {out_path} is the input: refusing to overwrite it")
    if out_path.is_dir():
        raise UsageError(f"output {out_path} is a folder: give a file name")
    return out_path


def run(args: argparse.Namespace, detector: Callable | None = None,
        open_capture: Callable | None = None) -> int:
    """The loop. detector: frame -> box (x0, y0, x1, y1) or None; only that (smoothed) region
    is converted and pasted back. open_capture: replaces the camera opener (tests)."""
    import cv2
    from ..engine import Engine

    limit = _settings.get("A2R_MAX_PIXELS")
    if args.size and args.size[0] * args.size[1] > limit:  # before a frame is resized to it
        w, h = args.size
        raise UsageError(f"--size {w}x{h} is {w * h} pixels, more than the limit "
                         f"A2R_MAX_PIXELS={limit}")
    check_style_options(args)
    model = package_of(args.model, convention_flags(args))   # flag errors before the source
    out_path = check_output(args)
    if args.input is not None and (why := not_a_file(Path(args.input), "video file")):
        raise UsageError(f"{args.input}: {why}")
    if out_path is not None:
        make_folder(out_path.parent)  # as convert does: the writer's temporary file goes there
    if args.show:
        try:
            cv2.namedWindow("a2r_edge", cv2.WINDOW_NORMAL)
        except cv2.error:
            raise UsageError("--show needs an OpenCV build with a GUI (this one is headless)")
    grabber = cap = None
    if args.camera is not None:
        grabber = LatestFrameGrabber(open_capture or open_camera(args.camera, args.size),
                                     name=f"camera {args.camera}")
        source, fps, size, total = iter(grabber), DEFAULT_CAMERA_FPS, None, None
    else:
        path = Path(args.input)
        cap = cv2.VideoCapture(str(path))
        ok, first = cap.read() if cap.isOpened() else (False, None)
        if not ok:
            cap.release()
            raise UsageError(f"{path}: not a video OpenCV can read (corrupt, empty or another "
                             f"format)")
        fps = cap.get(cv2.CAP_PROP_FPS)
        fps = fps if fps and np.isfinite(fps) and fps > 0 else DEFAULT_CAMERA_FPS
        count = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
        total = count if count > 0 else None  # a picture read as a video says -2^63: unknown
        size = (first.shape[1], first.shape[0])
        source = itertools.chain([first], read_frames(cap))
    with slow_start_note("a2r_edge.video", args.quiet):
        engine = Engine(model, device=args.device, roi=_smoothed(detector, args.smooth),
                        precision=args.precision)
    ema = EmaStats(args.smooth) if args.smooth > 0 and engine.model.stage("adain") else None
    style = None
    if args.style:
        style = read_picture(Path(args.style))
        if engine.model.stage("adain") is None:
            raise UsageError(f"model {engine.model.name!r} has no AdaIN stage: --style does not "
                             f"apply")
    announced = total  # the frame count the file's header states (None: camera, not stated)
    if args.max_frames is not None:
        source = itertools.islice(source, args.max_frames)
        total = min(total or args.max_frames, args.max_frames)
    progress = None if args.quiet else Progress(total)

    def prepared():
        for frame in source:
            nonlocal size
            if size is None:
                size = (frame.shape[1], frame.shape[0])
            if args.size and (frame.shape[1], frame.shape[0]) != args.size:
                frame = cv2.resize(frame, args.size, interpolation=cv2.INTER_AREA)
            yield frame

    writer, frames, note, code, failed = None, 0, "", 0, False
    colour_ema = EmaStats(args.smooth) if args.smooth > 0 and style is not None else None
    metrics = _serve_metrics(args.metrics_port)
    stream = engine.stream(prepared(), style, content_stats=ema, colour_stats=colour_ema,
                           style_colour=args.style_colour, metrics=metrics,
                           strength=args.strength)
    if out_path is None and not args.show:
        print("a2r_edge.video: note: no --output: the converted frames are not written "
              "(give --output FILE.webm/.mp4/.avi)", file=sys.stderr)
    t0 = time.perf_counter()
    try:
        for out in stream:
            frames += 1
            if out_path is not None:
                if writer is None:   # the source's size times the model's scale
                    scale = out.shape[1] / (args.size or size)[0]
                    writer = AtomicVideoWriter(out_path, fps, (round(size[0] * scale),
                                                               round(size[1] * scale)))
                writer.write(out)
            if progress is not None:
                progress.update(frames)
            if metrics is not None and grabber is not None:
                metrics.dropped_total(grabber.dropped)
            if args.show:
                fps_now = frames / max(time.perf_counter() - t0, 1e-9)
                cv2.imshow("a2r_edge", _overlay(out, fps_now, engine.latency(),
                                                grabber.dropped if grabber else 0))
                if cv2.waitKey(1) & 0xFF in (ord("q"), 27):
                    note = "stopped by the user"
                    break
    except KeyboardInterrupt:  # the frames so far are finalised into a playable output
        note = "stopped by Ctrl-C"
    except BaseException:
        failed = True  # an error mid-run: no output under the final name
        raise
    finally:
        stream.close()
        if progress is not None:
            progress.done()
        elapsed = time.perf_counter() - t0
        if grabber is not None:
            grabber.stop()
            if grabber.error:
                note, code = grabber.error, 1
        if cap is not None:
            cap.release()
        if writer is not None:
            writer.abort() if failed else writer.close()
        if args.show:
            cv2.destroyAllWindows()
        if metrics is not None:
            metrics.close()
    if code:
        print(f"a2r_edge.video: error: {note}", file=sys.stderr)
    elif announced and not note and frames < total:  # the file ended early, not the user
        print(f"a2r_edge.video: warning: {args.input} ended after {frames} of the {announced} "
              f"frames it announces (truncated or damaged?)", file=sys.stderr)
    if not args.quiet:
        print(summary(frames, elapsed, engine.latency(), grabber.dropped if grabber else 0,
                      note) + (f"\noutput: {out_path} ({codec_note(writer.codec)})"
                               if writer is not None else ""))
    return code


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        one_line_warnings("a2r_edge.video")
        _settings.check_all()  # a malformed A2R_* value: one line before the camera opens
        return run(args, detector=roi.resolve(args.roi))
    # bad input, model, settings; a model failing on a frame or too large for memory
    # (RuntimeError, MemoryError): one line, exit 2
    except (ValueError, OSError, RuntimeError, MemoryError) as exc:
        print(f"a2r_edge.video: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
