"""Time two builds of a2r_edge against each other on this machine, taking turns.

On a shared box the load drifts: each build runs in its own process, alternately, several rounds,
and the best time of each is kept (CPU time and wall time). Measured: Engine.convert of a
512x512 picture with the bundled model and every stage native, at 1 and 2 kernel threads.

    git worktree add /tmp/old <commit>
    (cd /tmp/old && A2R_WITH_CUDA=0 python setup.py build_ext --inplace)
    python tools/compare_builds.py /tmp/old .

Both trees must have their native extension built in place (``python setup.py build_ext
--inplace``). Nothing is asserted: the lines say what was measured.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, time
import numpy as np
tree = sys.argv[1]
sys.path.insert(0, tree)
import a2r_edge
assert a2r_edge.__file__.startswith(tree), a2r_edge.__file__
import cv2
from a2r_edge import Engine
from a2r_edge.backends.cpu import using_threads
noise = np.random.default_rng(0).integers(0, 256, (512, 512, 3), np.uint8)
img = cv2.GaussianBlur(noise, (0, 0), 2)
eng = Engine(None, cache_mb=0, backend="native")
out = {}
for threads in (1, 2):
    with using_threads(threads):
        eng.convert(img)
        cpu = wall = float("inf")
        for _ in range(int(sys.argv[2])):
            c0, w0 = time.process_time(), time.perf_counter()
            eng.convert(img)
            cpu, wall = min(cpu, time.process_time() - c0), min(wall, time.perf_counter() - w0)
    out[threads] = (cpu * 1e3, wall * 1e3)
print(json.dumps(out))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", help="a source tree with its extension built in place")
    ap.add_argument("new", help="the other tree")
    ap.add_argument("--rounds", type=int, default=3, help="processes per tree, alternating")
    ap.add_argument("--runs", type=int, default=7, help="timed conversions per process")
    args = ap.parse_args()
    trees = [os.path.abspath(args.old) + os.sep, os.path.abspath(args.new) + os.sep]
    best = {t: {} for t in trees}
    for _ in range(args.rounds):
        for tree in trees:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            done = subprocess.run([sys.executable, "-c", CHILD, tree, str(args.runs)], env=env,
                                  capture_output=True, text=True, check=True, cwd=tree)
            for threads, (cpu, wall) in json.loads(done.stdout.splitlines()[-1]).items():
                c, w = best[tree].get(threads, (float("inf"), float("inf")))
                best[tree][threads] = (min(c, cpu), min(w, wall))
    print("Engine.convert 512x512, bundled a2r_lite, every stage native; best of "
          f"{args.rounds} x {args.runs} runs per tree")
    for tree in trees:
        cells = [f"{t} thread(s): cpu {c:.1f} ms, wall {w:.1f} ms"
                 for t, (c, w) in sorted(best[tree].items())]
        print(f"  {tree}: " + " | ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
