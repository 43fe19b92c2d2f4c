"""Timing a plan's steps: how many threads each runs on, measured on the plan's first runs,
and ``step_times`` / ``profile``, where a model's time goes.

A kernel splits its work over the configured threads when the work passes a fixed grain; on a
small picture or a busy machine the fork/join (waiting for a core that another process holds)
can cost more than the step, and the model then runs slower on 2 threads than on 1 (measured:
the pix2pix fixture at 256^2 on a shared 2-core VM, 1.8 ms on 1 thread, 6-17 ms on 2). So with
N > 1 threads configured, a plan's first runs time every step alternately at N threads and at
1 (after one warm-up run), and from then on each step runs at N only where its slowest
sample at N beat its fastest at 1 by MARGIN (a second core that is there in one sample and
taken in the next makes N threads a gamble; 1 thread is the safe side). That first choice is
measured once more RECHECK runs later: a plan's first runs often meet a passing load (another
runtime's pool still spinning after its own run, a pipeline starting up; measured: the bundled
encoder at 512^2 right after an onnxruntime or OpenVINO run chose 1 thread for 8-10 of its 13
steps and ran at its 1-thread time, where each convolution is 1.6-1.9x faster on 2). Every
later choice is measured again LATER_RECHECK runs on, so that a load passing during a
measurement costs a stream that many runs, not its life (Zen 3, 2 threads, the encoder at
512^2: a plan made while a test run was ending kept its two largest convolutions at 1 thread,
26.1 ms a run against 14.3-15.8 ms for five plans made after it; one settled while another
process spun on the second core ran every step at 1 thread, 29.9 ms, and 14.9 ms after its
next measurement). The kernels split their work by output rows or planes, so the values do
not depend on the choice (tests/test_step_threads.py compares them).

The thread count is the kernels' process-wide setting: a step at 1 thread sets it and the run
puts it back to N before it returns (also on an error). Another thread's kernel that starts
while a step runs at 1 thread runs at 1 thread too (speed only); a run that starts then sees
1 thread configured and runs its steps as they are.
"""
from __future__ import annotations

import time

import numpy as np

from .. import _kernels

SAMPLES = 2   # timed runs at each count, after one warm-up run
MARGIN = 0.9  # N threads must take under this fraction of 1 thread's time
RECHECK = 16  # runs with the first choice before it is measured again
LATER_RECHECK = 512  # runs with each later choice before it is measured again (4 of them
#                      measured: about 1% of a stream's runs at most)
# runs after which a plan's choice is settled for its configured count until LATER_RECHECK
# runs on (a warm-up, 2 * SAMPLES measured, RECHECK with the first choice, 2 * SAMPLES
# measured again, one spare)
SETTLE_RUNS = RECHECK + 4 * SAMPLES + 2


class StepThreads:
    """Runs ``steps`` (the plan's closures) with a measured thread count per step."""

    def __init__(self, steps: list):
        self.steps = steps
        self.choice: dict[int, list[int]] = {}     # configured N -> threads per step
        self._runs: dict[int, int] = {}            # configured N -> runs measured so far
        self._time: dict[int, list] = {}   # N -> per step ([times at N], [times at 1])
        self._kept: dict[int, int] = {}    # N -> runs with its current choice
        self._recheck: dict[int, int] = {}  # N -> runs after which it is measured again

    def run(self) -> None:
        n = _kernels.num_threads()
        chosen = self.choice.get(n)
        if chosen is not None:   # (a choice given from outside counts as a first one)
            self._kept[n] = self._kept.get(n, 0) + 1
            if self._kept[n] > self._recheck.get(n, RECHECK):
                self._runs[n], chosen = 1, None   # measure again, no warm-up
                del self.choice[n]
        if n == 1 or (chosen is not None and min(chosen, default=n) == n):
            for step in self.steps:
                step()
        elif chosen is not None:
            self._run_chosen(n, chosen)
        else:
            self._measure(n)

    def _run_chosen(self, n: int, chosen: list[int]) -> None:
        current = n
        try:
            for step, k in zip(self.steps, chosen):
                if k != current:
                    current = _kernels.set_num_threads(k)
                step()
        finally:
            if current != n:
                _kernels.set_num_threads(n)

    def _measure(self, n: int) -> None:
        r = self._runs.get(n, 0)
        self._runs[n] = r + 1
        if r == 0:   # warm-up: workspaces grow, weights pack
            for step in self.steps:
                step()
            return
        times = self._time.setdefault(n, [([], []) for _ in self.steps])
        k = r % 2                      # odd runs at 1 thread (times[1]), even at N (times[0])
        if k:
            _kernels.set_num_threads(1)
        try:
            for step, t in zip(self.steps, times):
                start = time.perf_counter()
                step()
                t[k].append(time.perf_counter() - start)
        finally:
            if k:
                _kernels.set_num_threads(n)
        if r == 2 * SAMPLES:
            inf = float("inf")   # (a sample a failed run skipped: no evidence for N)
            self.choice[n] = [n if max(many, default=inf) < MARGIN * min(one, default=inf)
                              else 1 for many, one in times]
            del self._time[n]
            self._kept[n] = 0
            self._recheck[n] = LATER_RECHECK if n in self._recheck else RECHECK

    def describe(self) -> str:
        """One line: the measured choice per configured thread count."""
        if not self.choice:
            return "threads per step: one count for all (not measured: 1 thread, or too few runs)"
        return "threads per step (measured): " + "; ".join(
            f"{n} configured: {sum(k == 1 for k in c)} of {len(c)} steps at 1 thread"
            for n, c in sorted(self.choice.items()))


def step_times(plan, runs: int = 5) -> list[float]:
    """Median seconds per run of each of ``plan``'s steps (an executor plan: ``steps`` and the
    ``step_nodes`` they run), each timed on its own at the configured thread count, the plan's
    inputs as they are. An onnxruntime region is one step."""
    per_step = np.zeros((runs, len(plan.steps)))
    for r in range(runs + 1):
        for i, step in enumerate(plan.steps):
            t = time.perf_counter()
            step()
            if r:   # the first run warms up
                per_step[r - 1, i] = time.perf_counter() - t
    return [float(t) for t in np.median(per_step, axis=0)]


def profile(plan, runs: int = 5) -> dict[str, float]:
    """{op: median seconds per run} of ``plan``'s steps (step_times summed per op type): where
    a model's time goes."""
    out: dict[str, float] = {}
    for nd, t in zip(plan.step_nodes, step_times(plan, runs)):
        out[nd.op] = out.get(nd.op, 0.0) + t
    return out
