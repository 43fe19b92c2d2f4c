"""Interference between onnxruntime's thread pool and our OpenMP kernels (DESIGN.md §4).

The model's stages alternate between the two pools: encode (onnxruntime) -> AdaIN (OpenMP) ->
decode (onnxruntime) -> guided filter (OpenMP). A pool that spins after its work keeps cores
busy while the other pool runs, so the chain can take longer than the sum of its stages run
alone. Measured here:

  ratio = median time of the whole chain / sum of the median times of each stage run alone

(each stage alone: its second back-to-back call, so it runs after itself, not after the other
pool) with the wait policies as a2r_edge configures them (OMP_WAIT_POLICY=PASSIVE, onnxruntime
session.intra_op.allow_spinning=0; target <= 1.05x) and with both pools spinning
(OMP_WAIT_POLICY=ACTIVE, allow_spinning=1) to show what the settings buy. libgomp reads
OMP_WAIT_POLICY once, when it loads: each configuration runs in its own process (this file,
run as a script, is that process). Model: the bundled a2r_lite when present, else the tiny
random-weight stand-in of a2r_edge.bench (the row says which), at 512x512.
"""
import json
import os
import subprocess
import sys

import pytest

from conftest import RESULTS

SIZE = 512
ROUNDS = 21  # medians of 21 interleaved rounds
_PASSIVE: dict = {}  # the passive run's figures, for the spinning row
CONFIGS = {  # name: (OMP_WAIT_POLICY, onnxruntime spinning)
    "passive waits (as configured)": ("PASSIVE", False),
    "spinning pools": ("ACTIVE", True),
}


def child(spinning: bool) -> dict:
    """Runs in the subprocess: the chain and its stages alone, medians in ms."""
    import tempfile

    from a2r_edge import bench
    from a2r_edge.backends import cpu
    from a2r_edge.backends.ort import OrtSession

    with tempfile.TemporaryDirectory() as tmp:
        model, which = bench.bench_model(tmp)
        threads = cpu.num_threads()
        chain = bench.StageChain(model.stages, threads)
        # the ONNX stages on onnxruntime, with or without spinning; the others on OpenMP
        assignment = {}
        for s in model.stages:
            if s.kind == "onnx":
                sess = OrtSession(str(s.params["file"]), threads=threads,
                                  shares_cpu=not spinning)
                run = (lambda x, sess=sess: sess.run({sess.input_names[0]: x})[0])
                add = bool(s.params.get("add_input"))
                chain.runners[(s.name, "onnxruntime")] = (
                    lambda x, picture, run=run, add=add: run(x) + picture if add else run(x))
                assignment[s.name] = "onnxruntime"
            else:
                assignment[s.name] = "native"
        picture = chain.picture(SIZE)
        inputs, x = {}, picture
        for s in model.stages:
            inputs[s.name] = x.copy()
            x = chain.runners[(s.name, assignment[s.name])](x, picture)
        # Stages alone and the whole chain take turns within each round, so a load that
        # drifts on a shared machine weighs on both sides alike; medians over the rounds.
        import statistics
        import time
        runs = {s.name: (lambda s=s: chain.runners[(s.name, assignment[s.name])](
            inputs[s.name], picture)) for s in model.stages}
        runs["chain"] = lambda: chain.run(picture, assignment)
        times = {k: [] for k in runs}
        for _ in range(2):  # warm-up
            for fn in runs.values():
                fn()
        for _ in range(ROUNDS):
            for k, fn in runs.items():
                for _ in range(2 if k != "chain" else 1):  # a stage twice: its pool settles
                    t0 = time.perf_counter()
                    fn()
                    t = time.perf_counter() - t0
                times[k].append(t)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        whole = med.pop("chain")
        alone = med
    return {"which": which, "threads": threads, "alone_ms": alone, "chain_ms": whole,
            "assignment": assignment}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_interference(config):
    omp, spinning = CONFIGS[config]
    env = {**os.environ, "OMP_WAIT_POLICY": omp,
           "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(
               os.path.abspath(__file__)))] + [os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                           "spin" if spinning else "passive"], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    total = sum(r["alone_ms"].values())
    ratio = r["chain_ms"] / total
    row = {"op": "interference", "case": f"{config}, {SIZE}^2", "threads": r["threads"],
           "isa": "-", "ours_ms": r["chain_ms"], "peer": "sum of stages alone",
           "peer_ms": total, "speedup": total / r["chain_ms"]}
    if not spinning:
        row["target"] = "chain <= 1.05x stages alone"
        row["met"] = ratio <= 1.05
        _PASSIVE["alone_ms"] = total
    RESULTS.append(row)
    if spinning and "alone_ms" in _PASSIVE:
        # A spinning OpenMP pool (ACTIVE) spins between every kernel, so even "alone" its
        # stages compete with it: compare the chain with the passive stages alone too.
        RESULTS.append({**row, "peer": "passive stages alone", "peer_ms": _PASSIVE["alone_ms"],
                        "speedup": _PASSIVE["alone_ms"] / r["chain_ms"]})
        print(f"spinning chain vs passive stages alone: "
              f"{r['chain_ms'] / _PASSIVE['alone_ms']:.3f}x")
    stages = ", ".join(f"{k} {r['assignment'][k]} {v:.2f} ms" for k, v in r["alone_ms"].items())
    print(f"\n[{config}] {r['which']}: chain {r['chain_ms']:.2f} ms vs stages alone "
          f"{total:.2f} ms ({stages}): ratio {ratio:.3f}x")


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    print(json.dumps(child(sys.argv[2] == "spin")))
