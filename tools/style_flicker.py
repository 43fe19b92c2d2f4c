"""Colour flicker of a styled video: how much the colours of a region that never changes move from
frame to frame when the rest of the frame does.

    python tools/style_flicker.py               # bundled model and sample, coffee as reference
    python tools/style_flicker.py --smooth 0.9 --frames 96

Needs scikit-image (the [train] extra) for its coffee photo.

A dark block sweeps in and out over the lower part of the bundled sample; the frames run through
Engine.stream as python -m a2r_edge.video runs them (AdaIN statistics smoothed with --smooth), with
no reference photo, with one whose colour step maps each frame's own colour statistics, and with
those statistics smoothed too. Printed per case: the mean absolute change of the untouched rows'
mean colour between consecutive frames, and its range over the clip (gray levels)."""
from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np

from a2r_edge import Engine
from a2r_edge.apps.video import EmaStats

ROOT = Path(__file__).resolve().parent.parent
STILL_ROWS = 200   # rows above the block: the same content in every frame


def clip(frames: int) -> list[np.ndarray]:
    toon = cv2.imread(str(ROOT / "examples" / "astronaut_toon.png"))
    out = []
    for i in range(frames):
        f = toon.copy()
        x = int(f.shape[1] * abs(np.sin(i / frames * 2 * np.pi)))   # in and out, twice
        f[STILL_ROWS + 56:, max(0, x - 200):x] = (20, 20, 30)
        out.append(f)
    return out


def flicker(outs: list[np.ndarray]) -> tuple[float, float]:
    means = np.array([o[:STILL_ROWS].reshape(-1, 3).mean(0) for o in outs])
    return float(np.abs(np.diff(means, axis=0)).mean()), float(np.ptp(means, axis=0).max())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--frames", type=int, default=48)
    p.add_argument("--smooth", type=float, default=0.8, help="as python -m a2r_edge.video")
    p.add_argument("--model", help="model package (default: the bundled a2r_lite)")
    args = p.parse_args()
    import skimage.data
    ref = np.ascontiguousarray(skimage.data.coffee()[..., ::-1])
    frames, eng = clip(args.frames), Engine(args.model)
    cases = [("no reference photo", None, False),
             ("reference, each frame's colour statistics", ref, False),
             ("reference, colour statistics smoothed", ref, True)]
    for label, style, smooth_colour in cases:
        outs = list(eng.stream(frames, style, content_stats=EmaStats(args.smooth),
                               colour_stats=EmaStats(args.smooth) if smooth_colour else None))
        step, span = flicker(outs)
        print(f"{label:42s} frame-to-frame {step:.2f}, range {span:.2f} gray levels")


if __name__ == "__main__":
    main()
