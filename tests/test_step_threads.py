"""Per-step thread counts (model/step_threads.py): measured on a plan's first runs at N > 1
threads, alternating N and 1 after a warm-up run; the configured count is back after every run
(also when a step raises); the outputs do not change with the choice."""
import os
import time
import warnings

import numpy as np
import pytest

from a2r_edge import _kernels
from a2r_edge.model import NativeExecutor
from a2r_edge.model.step_threads import LATER_RECHECK, RECHECK, SAMPLES, StepThreads
from a2r_edge.runtime import cpu

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "generators")


@pytest.fixture
def two_threads():
    with cpu.using_threads(2) as n:
        if n != 2:
            pytest.skip("built without OpenMP or fewer than 2 threads allowed")
        yield n


def test_measures_alternately_then_keeps_the_choice(two_threads):
    seen = []
    runner = StepThreads([lambda: seen.append(("a", _kernels.num_threads())),
                          lambda: seen.append(("b", _kernels.num_threads()))])
    for _ in range(1 + 2 * SAMPLES):
        seen.clear()
        runner.run()
        assert _kernels.num_threads() == 2
    assert set(runner.choice) == {2} and len(runner.choice[2]) == 2
    assert set(runner.choice[2]) <= {1, 2}
    runner.choice[2] = [1, 2]          # a mixed choice runs each step at its count
    seen.clear()
    runner.run()
    assert seen == [("a", 1), ("b", 2)] and _kernels.num_threads() == 2
    with cpu.using_threads(1):         # one thread configured: nothing measured, nothing set
        seen.clear()
        runner.run()
        assert seen == [("a", 1), ("b", 1)] and set(runner.choice) == {2}


def test_the_choice_is_measured_again_after_recheck_then_every_later_recheck(two_threads):
    # a passing load while the plan is new: the step is slow at 2 threads in the first
    # measurement only; its second measurement (RECHECK runs later) gives 2 threads; a load
    # that then comes for good moves it back to 1 thread at the next measurement, LATER_RECHECK
    # runs on, not before
    disturbed = [True]

    def step():
        time.sleep(0.02 if _kernels.num_threads() == 1 or disturbed[0] else 0.0005)
    runner = StepThreads([step])
    for _ in range(1 + 2 * SAMPLES):
        runner.run()
    assert runner.choice[2] == [1]
    disturbed[0] = False
    for _ in range(RECHECK + 2 * SAMPLES):
        runner.run()
    assert runner.choice[2] == [2]
    disturbed[0] = True
    for _ in range(LATER_RECHECK):
        runner.run()
    assert runner.choice[2] == [2]     # kept until its recheck
    for _ in range(1 + 2 * SAMPLES):
        runner.run()
    assert runner.choice[2] == [1]


def test_measuring_runs_alternate_counts(two_threads):
    seen = []
    runner = StepThreads([lambda: seen.append(_kernels.num_threads())])
    for _ in range(1 + 2 * SAMPLES):
        runner.run()
    assert seen == [2] + [1, 2] * SAMPLES


def test_thread_count_restored_when_a_step_raises(two_threads):
    def boom():
        raise RuntimeError("step failed")
    runner = StepThreads([lambda: None, boom])
    runner.choice[2] = [1, 1]
    with pytest.raises(RuntimeError):
        runner.run()
    assert _kernels.num_threads() == 2

    def boom_on_one_thread():
        if _kernels.num_threads() == 1:
            boom()
    measuring = StepThreads([boom_on_one_thread])
    measuring.run()                    # warm-up at 2 threads
    with pytest.raises(RuntimeError):
        measuring.run()                # the first measuring run is at 1 thread
    assert _kernels.num_threads() == 2


@pytest.mark.parametrize("name", ["pix2pix_unet", "ugatit_light"])
def test_outputs_do_not_depend_on_the_choice(two_threads, name):
    x = np.random.default_rng(3).uniform(-1, 1, (1, 3, 64, 48)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ex = NativeExecutor(os.path.join(FIXTURES, name + ".onnx"))
        with cpu.using_threads(1):
            want = ex.run(x).copy()
        for _ in range(2 + 2 * SAMPLES):
            np.testing.assert_allclose(ex.run(x), want, rtol=1e-6, atol=1e-6)
    plan = ex.plan_for({ex.input_names[0]: x.shape})
    assert len(plan.runner.choice[2]) == len(plan.steps)
    assert "threads per step (measured)" in ex.describe()


def test_plan_products_run_numpys_blas_on_one_thread():
    """A MatMul step large enough for BLAS's threads runs with numpy's BLAS limited to one
    thread (whose spinning threads would hold the native kernels' cores after it), the limit
    undone after the step; a small product is not wrapped."""
    from threadpoolctl import threadpool_info
    from onnx import TensorProto, helper, numpy_helper
    from a2r_edge.runtime import threads

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    seen = []
    step = threads.blas_on_one_thread(lambda: seen.append(blas_threads()),
                                      threads.BLAS_THREADED_MACS)
    step()
    assert seen and all(n == 1 for n in seen[0]) and blas_threads() == before
    # two plans' steps overlapping in two threads (a enters, b enters, a leaves, b leaves):
    # the limit set by the first in and lifted by the last out (a stand-in controller: which
    # thread reads OpenBLAS's setting is OpenBLAS's business)
    import threading
    calls = []

    class Limit:
        def restore_original_limits(self):
            calls.append("lifted")

    class Controller:
        def limit(self, limits, user_api):
            calls.append(("limited", limits, user_api))
            return Limit()

    saved = dict(threads._blas)
    threads._blas.update(controller=Controller(), limit=None)
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def a():
        a_in.set()
        b_in.wait(5)

    def b():
        b_in.set()
        a_out.wait(5)
        calls.append("b, a gone")

    try:
        ta = threading.Thread(target=threads.blas_on_one_thread(a, threads.BLAS_THREADED_MACS))
        ta.start()
        a_in.wait(5)
        tb = threading.Thread(target=threads.blas_on_one_thread(b, threads.BLAS_THREADED_MACS))
        tb.start()
        ta.join(5)
        a_out.set()
        tb.join(5)
    finally:
        threads._blas.update(saved)
    assert calls == [("limited", 1, "blas"), "b, a gone", "lifted"], calls
    small = lambda: None  # noqa: E731
    assert threads.blas_on_one_thread(small, threads.BLAS_THREADED_MACS - 1) is small
    rng = np.random.default_rng(3)
    w = rng.standard_normal((256, 256)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 256])],
                          [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    x = rng.standard_normal((64, 256)).astype(np.float32)
    np.testing.assert_allclose(NativeExecutor(m).run(x), x @ w, rtol=1e-4, atol=1e-4)
    assert blas_threads() == before
