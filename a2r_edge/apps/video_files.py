"""Video files for ``python -m a2r_edge.video``: reading frames, the atomic writer with its codec
choice, and the progress line."""
from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np

from ..runtime.files import private_temp, publish

# Codecs per output container, the first the installed OpenCV can write wins. H.264 (avc1) plays
# everywhere, but OpenCV's pip wheels carry no H.264 encoder (then MPEG-4 Part 2, mp4v, which
# desktop players play and most browsers do not); VP8 in WebM plays in every browser (the
# choice for the web); MJPG in AVI is the fastest to write and the largest.
CODECS = {".mp4": ("avc1", "mp4v"), ".webm": ("VP80",), ".avi": ("MJPG",)}
BROWSER_PLAYABLE = {"avc1", "VP80"}


class UsageError(ValueError):
    """A bad argument or input: one line, exit code 2."""


def read_frames(cap) -> Iterator[np.ndarray]:
    """Every frame of an opened capture, in order."""
    while True:
        ok, frame = cap.read()
        if not ok or frame is None:
            return
        yield frame


def same_file(a: Path, b: Path) -> bool:
    """True when ``a`` and ``b`` name one file: the same resolved path, or the same inode
    (a hard link, a bind mount)."""
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


@contextmanager
def quiet_stderr():
    """Silences fd 2 (FFmpeg's and OpenCV's C-level messages while codecs are probed)."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


class AtomicVideoWriter:
    """cv2.VideoWriter into a private temporary file beside ``path`` (``private_temp``);
    ``close()`` checks what was written (the file decodes to every frame written: a full disk or
    a truncated write is an OSError, never a success) and only then renames it into place, so
    the final name never holds half a video. ``abort()`` removes the temporary file.
    The codec is the first of ``CODECS[ext]`` the installed OpenCV can write (``codec``).
    Frames of another size are resized to ``size`` (W, H)."""

    def __init__(self, path: Path, fps: float, size: tuple[int, int]):
        import cv2
        ext = path.suffix.lower()
        if ext not in CODECS:
            raise UsageError(f"output {path}: use a {'/'.join(CODECS)} file name")
        self.path, self.size, self.frames = path, size, 0
        self.tmp = private_temp(path, f".part{ext}")  # same extension: same container
        self.codec, self._w = None, None
        with quiet_stderr():
            for codec in CODECS[ext]:
                w = cv2.VideoWriter(str(self.tmp), cv2.VideoWriter_fourcc(*codec), fps, size)
                if w.isOpened():
                    self.codec, self._w = codec, w
                    break
                w.release()
        if self._w is None:
            self.tmp.unlink(missing_ok=True)
            raise UsageError(f"output {path}: this OpenCV cannot write {ext} files "
                             f"({', '.join(CODECS[ext])})")

    def write(self, frame: np.ndarray) -> None:
        import cv2
        if frame.ndim == 2:
            frame = cv2.cvtColor(frame, cv2.COLOR_GRAY2BGR)
        if (frame.shape[1], frame.shape[0]) != self.size:
            frame = cv2.resize(frame, self.size, interpolation=cv2.INTER_AREA)
        self._w.write(np.ascontiguousarray(frame[:, :, :3]))
        self.frames += 1

    def _frames_on_disk(self) -> int:
        """Frames the finished temporary file decodes to (0 when it cannot be opened)."""
        import cv2
        if self.tmp.stat().st_size == 0:
            return 0
        cap = cv2.VideoCapture(str(self.tmp))
        n = 0
        while cap.isOpened() and cap.grab():
            n += 1
        cap.release()
        return n

    def close(self) -> None:
        """Finish the file, check it holds every frame, rename it into place; OSError (and the
        temporary file removed) when it does not."""
        self._w.release()
        try:
            found = self._frames_on_disk()
            # fewer frames: a failed write; one more: Ctrl-C landed between OpenCV's write and
            # the count (the frame is there)
            if found < self.frames:
                raise OSError(f"output {self.path}: the written video holds {found} of "
                              f"{self.frames} frames (disk full or a failed write?); "
                              f"nothing written")
            publish(self.tmp, self.path)
        except BaseException:
            self.tmp.unlink(missing_ok=True)
            raise

    def abort(self) -> None:
        self._w.release()
        self.tmp.unlink(missing_ok=True)


class Progress:
    """A progress line on stderr about once a second: frames (of the total, when known), fps,
    and the time left. On a terminal the line is rewritten in place; otherwise one line every
    ``period`` seconds (logs stay short)."""

    def __init__(self, total: int | None, stream=None):
        self.stream = stream or sys.stderr
        self.total, self.t0, self.last = total, time.perf_counter(), 0.0
        self.tty = self.stream.isatty()
        self.period = 1.0 if self.tty else 10.0

    def line(self, frames: int, now: float) -> str:
        elapsed = max(now - self.t0, 1e-9)
        fps = frames / elapsed
        text = f"frame {frames}" + (f"/{self.total}" if self.total else "") + f"  {fps:.1f} fps"
        if self.total and fps > 0:
            text += f"  ETA {max(self.total - frames, 0) / fps:.0f} s"
        return text

    def update(self, frames: int) -> None:
        now = time.perf_counter()
        if now - self.last >= self.period:
            self.last = now
            end = "\r" if self.tty else "\n"
            print(self.line(frames, now), end=end, file=self.stream, flush=True)

    def done(self) -> None:
        if self.tty and self.last:
            print(file=self.stream)


def codec_note(codec: str) -> str:
    if codec in BROWSER_PLAYABLE:
        return f"codec {codec}"
    return f"codec {codec}: desktop players play it, most browsers do not (write .webm for the web)"
