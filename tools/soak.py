"""Soak run: a synthetic video through ``python -m a2r_edge.video`` (file in, file out) while the
process's RSS, open file descriptors and threads are sampled from /proc every 0.2 s.

    python tools/soak.py                       # 2,000 frames of 320x240, the bundled model
    python tools/soak.py --frames 200 --size 160x120 --model PATH

Prints the samples at a third of the run (after warm-up), at the peak and at the end; a leak shows
as RSS, fds or threads still rising after warm-up. Exit code 1 when RSS grew by more than
--max-growth-mb between a third of the run and the end, or fds/threads grew at all."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def sample(pid: int):
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return (int(fields["VmRSS"].split()[0]) / 1024, fds, int(fields["Threads"]))


def soak(args, tmp: Path) -> int:
    w, h = map(int, args.size.lower().split("x"))
    model = args.model
    src, dst = tmp / "in.avi", tmp / "out.avi"
    writer = cv2.VideoWriter(str(src), cv2.VideoWriter_fourcc(*"MJPG"), 25, (w, h))
    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    for i in range(args.frames):
        writer.write(np.roll(base, i, axis=1))
    writer.release()
    cmd = [sys.executable, "-m", "a2r_edge.video", "--input", str(src), "--output", str(dst), "-q"]
    if model:
        cmd += ["--model", model]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env)
    samples = []
    while proc.poll() is None:
        s = sample(proc.pid)
        if s:
            samples.append((time.monotonic() - t0, *s))
        time.sleep(0.2)
    wall = time.monotonic() - t0
    if proc.returncode != 0 or len(samples) < 3:
        print(f"video run failed (exit {proc.returncode}) or too short to sample")
        return 1
    out = cv2.VideoCapture(str(dst))
    frames_out = int(out.get(cv2.CAP_PROP_FRAME_COUNT))
    warm, last = samples[len(samples) // 3], samples[-1]  # a third in: imports, model load, first frames done
    peak = max(samples, key=lambda s: s[1])
    print(f"{args.frames} frames {w}x{h} in {wall:.1f} s ({args.frames / wall:.1f} fps), "
          f"{frames_out} frames written, model: {model or 'bundled a2r_lite'}")
    print(f"{'':8} {'t (s)':>7} {'RSS MiB':>8} {'fds':>4} {'threads':>7}")
    for name, s in (("warm", warm), ("peak", peak), ("end", last)):
        print(f"{name:8} {s[0]:7.1f} {s[1]:8.1f} {s[2]:4d} {s[3]:7d}")
    grew = last[1] - warm[1]
    ok = grew <= args.max_growth_mb and last[2] <= warm[2] and last[3] <= warm[3] \
        and frames_out == args.frames
    print(f"RSS growth after warm-up: {grew:+.1f} MiB -> {'OK' if ok else 'FAIL'}")
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--size", default="320x240", help="WxH of the synthetic video")
    ap.add_argument("--model", help="model package or ONNX file (default: the bundled a2r_lite)")
    ap.add_argument("--max-growth-mb", type=float, default=5.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="a2r_soak_") as tmp:
        return soak(args, Path(tmp))


if __name__ == "__main__":
    sys.exit(main())
