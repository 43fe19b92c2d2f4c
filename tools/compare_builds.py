"""Time two builds of a2r_edge against each other on this machine, taking turns.

On a shared box the load drifts: each build runs in its own process, alternately, several rounds,
and the best time of each is kept (CPU time and wall time). Measured: Engine.convert of a
512x512 picture with the bundled model and every stage native (at ``--precision``, default
fp32), at 1 and 2 kernel threads, and
each ``--conv C,O,SIDE[,STRIDE[,GROUPS[,PRECISION]]]`` (3x3, pad 1, 1 thread: a single kernel's
change; precision fp32, bf16 or int8, the int8 input range that of its standard normal input).

    git worktree add /tmp/old <commit>
    (cd /tmp/old && A2R_WITH_CUDA=0 python setup.py build_ext --inplace)
    python tools/compare_builds.py /tmp/old .
    python tools/compare_builds.py /tmp/old . --conv 16,24,512,2 --conv 64,64,128,1,64
    python tools/compare_builds.py /tmp/old . --conv 32,32,128,1,1,int8
    python tools/compare_builds.py /tmp/old . --precision int8

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
from a2r_edge.runtime.cpu import using_threads
noise = np.random.default_rng(0).integers(0, 256, (512, 512, 3), np.uint8)
img = cv2.GaussianBlur(noise, (0, 0), 2)
from a2r_edge import ops


def best(fn, runs):
    fn()
    cpu = wall = float("inf")
    for _ in range(runs):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        cpu, wall = min(cpu, time.process_time() - c0), min(wall, time.perf_counter() - w0)
    return cpu * 1e3, wall * 1e3


runs, precision = int(sys.argv[2]), sys.argv[3]
eng = Engine(None, cache_mb=0, backend="native", precision=precision)
out = {}
from a2r_edge.model import step_threads
for threads in (1, 2):
    with using_threads(threads):
        # the plans' per-step thread choice settled first (benchmarks/conftest.settle): while
        # it is measured, every other run goes at 1 thread (a tree older than SETTLE_RUNS:
        # its definition from the constants it had)
        for _ in range(getattr(step_threads, "SETTLE_RUNS",
                               step_threads.RECHECK + 4 * step_threads.SAMPLES + 2)):
            eng.convert(img)
        out[f"convert 512x512, {threads} thread(s)"] = best(lambda: eng.convert(img), runs)
rng = np.random.default_rng(0)
for spec in sys.argv[4:]:
    fields = spec.split(",")
    precision = fields.pop() if not fields[-1].isdigit() else "fp32"
    c, o, side, stride, groups = (list(map(int, fields)) + [1, 1])[:5]
    x = rng.standard_normal((1, c, side, side)).astype(np.float32)
    conv = ops.Conv2d(rng.standard_normal((o, c // groups, 3, 3)).astype(np.float32),
                      stride=stride, pad=1, groups=groups, precision=precision,
                      act_range=(float(x.min()), float(x.max())) if precision == "int8" else None)
    y = np.empty(conv.output_shape(x.shape), np.float32)
    with using_threads(1):
        out[f"conv {c}->{o} {side}^2 stride {stride} groups {groups} {precision}, 1 thread"] = \
            best(lambda: conv(x, out=y), 3 * runs)
print(json.dumps(out))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", help="a source tree with its extension built in place")
    ap.add_argument("new", help="the other tree")
    ap.add_argument("--rounds", type=int, default=3, help="processes per tree, alternating")
    ap.add_argument("--runs", type=int, default=7, help="timed conversions per process")
    ap.add_argument("--precision", default="fp32",
                    help="Engine precision of the timed conversion (fp32, bf16, int8, auto)")
    ap.add_argument("--conv", action="append", default=[],
                    metavar="C,O,SIDE[,STRIDE[,GROUPS[,PRECISION]]]",
                    help="also time this 3x3 convolution (repeatable)")
    args = ap.parse_args()
    trees = [os.path.abspath(args.old) + os.sep, os.path.abspath(args.new) + os.sep]
    best = {t: {} for t in trees}
    for _ in range(args.rounds):
        for tree in trees:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            done = subprocess.run([sys.executable, "-c", CHILD, tree, str(args.runs),
                                   args.precision, *args.conv], env=env, capture_output=True,
                                  text=True, check=True, cwd=tree)
            for case, (cpu, wall) in json.loads(done.stdout.splitlines()[-1]).items():
                c, w = best[tree].get(case, (float("inf"), float("inf")))
                best[tree][case] = (min(c, cpu), min(w, wall))
    print(f"bundled a2r_lite, every stage native at {args.precision}; best of {args.rounds} "
          f"processes per tree")
    for case in best[trees[0]]:
        print(f"  {case}:")
        for tree in trees:
            c, w = best[tree][case]
            print(f"    {tree}: cpu {c:.2f} ms, wall {w:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
