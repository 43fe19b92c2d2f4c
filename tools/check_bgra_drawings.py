"""The alpha drawings of the evaluation art converted as their BGRA files are (Engine.convert on
the file, as a user does), judged by the artefact measures as tools/evaluate_a2r_lite.py judges
them composited over white: the output composited over white against the input so.

    python tools/fetch_eval_art.py          # once: the pictures into the cache
    python tools/check_bgra_drawings.py [--model PACKAGE]

Prints the failing pictures and, per role (eval, check), how many pass; exit code 1 when any
fails. The colour a file keeps under its fully transparent pixels must not reach the visible
ones (forward.visible_bgr puts white there)."""
import argparse
import os
import sys

import cv2

import fetch_eval_art
from a2r_edge import Engine
from a2r_edge.picture.io import WHITE, flatten
from a2r_edge.quality import artefacts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None, help="model package (default: the bundled one)")
    engine = Engine(ap.parse_args().model, cache_mb=0)
    failed = 0
    for role in ("eval", "check"):
        n = bad = 0
        for c in fetch_eval_art.credits_list():
            path = os.path.join(fetch_eval_art.CACHE, "pictures", c["file"])
            img = cv2.imread(path, cv2.IMREAD_UNCHANGED)
            if c["role"] != role or img is None or img.ndim != 3 or img.shape[2] != 4:
                continue
            flat, out = flatten(img, WHITE), flatten(engine.convert(img), WHITE)
            fails = artefacts.failures(artefacts.measure(flat, out, img[..., 3]))
            n, bad = n + 1, bad + bool(fails)
            if fails:
                print(f"{role} {c['name']}: {', '.join(fails)}")
        print(f"{role}: {n - bad} of {n} BGRA files pass every artefact measure")
        failed += bad
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
