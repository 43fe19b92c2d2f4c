"""The scheduler on synthetic profiles (CPU-only, strong GPU, weak GPU + strong CPU, Jetson-like
GPU, slow copies), its thread budget, its calibration cache, and on this machine: the plan it
picks is the fastest CPU placement when measured; the bench --quick profile fits the schema."""
import itertools
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from a2r_edge import Engine
from a2r_edge.runtime import measure, scheduler
from a2r_edge.model.package import Stage, load_package
from a2r_edge.runtime.scheduler import Backend, make_plan
from model_packages import make_package

ROOT = Path(__file__).resolve().parent.parent
STAGES = (Stage("encode", "onnx", {}), Stage("stylize", "adain", {}),
          Stage("decode", "onnx", {"add_input": True}), Stage("enhance", "guided_filter", {}))
CPU_BACKENDS = (Backend("native", "cpu", ("onnx", "adain", "guided_filter")),
                Backend("onnxruntime", "cpu", ("onnx",)),
                Backend("cuda", "gpu", ("adain", "guided_filter"), False, "no CUDA library"),
                Backend("onnxruntime-cuda", "gpu", ("onnx",), False, "no CUDA library"))
GPU_BACKENDS = CPU_BACKENDS[:2] + (Backend("cuda", "gpu", ("adain", "guided_filter")),
                                   Backend("onnxruntime-cuda", "gpu", ("onnx",)))
SIZE = 512
FEATURES_BYTES = 64 * 128 * 128 * 4   # encode / stylize output at 512^2
PICTURE_BYTES = 3 * SIZE * SIZE * 4   # decode / enhance output


def profile(cpu, gpu=None, link=(12.0, 12.0, 10.0)):
    """A synthetic profile at 512^2. cpu: {stage: (native ms, onnxruntime ms or None)};
    gpu: {stage: ms} (onnx stages on onnxruntime-cuda, the others on cuda);
    link: (h2d GB/s, d2h GB/s, latency us)."""
    out = {"encode": FEATURES_BYTES, "stylize": FEATURES_BYTES, "decode": PICTURE_BYTES,
           "enhance": PICTURE_BYTES}
    kinds = {s.name: s.kind for s in STAGES}
    entries = []

    def add(stage, backend, device, ms):
        entries.append({"stage": stage, "kind": kinds[stage], "backend": backend,
                        "device": device, "size": SIZE, "ms": ms, "out_bytes": out[stage]})

    for stage, (native, ort) in cpu.items():
        add(stage, "native", "cpu", native)
        if ort is not None:
            add(stage, "onnxruntime", "cpu", ort)
    for stage, ms in (gpu or {}).items():
        add(stage, "onnxruntime-cuda" if kinds[stage] == "onnx" else "cuda", "gpu", ms)
    host_device = None
    if gpu:
        host_device = {"h2d_gbps": link[0], "d2h_gbps": link[1], "latency_us": link[2]}
    return {"schema": "a2r_edge.profile/1", "source": "measured", "stages": entries,
            "host_device": host_device}


# A mini-PC CPU (figures shaped like a 4-core AVX2 box).
CPU = {"encode": (40.0, 48.0), "stylize": (2.0, None), "decode": (60.0, 45.0),
       "enhance": (6.0, None)}


def plan_for(prof, backends=GPU_BACKENDS, **kw):
    kw.setdefault("cores", 4)
    return make_plan(STAGES, profile=prof, backends=backends, size=SIZE, **kw)


def devices(plan):
    return [p.device for p in plan.placements]


def test_cpu_only_box_gets_a_cpu_plan():
    plan = plan_for(profile(CPU), backends=CPU_BACKENDS)
    assert plan.device == "cpu" and set(devices(plan)) == {"cpu"}
    # per stage the faster CPU backend: native encode, onnxruntime decode
    assert [p.backend for p in plan.placements] == ["native", "native", "onnxruntime", "native"]
    assert plan.est_latency_ms == pytest.approx(40 + 2 + 45 + 6)
    text = plan.describe()
    assert "cpu/native 40.00 ms vs cpu/onnxruntime 48.00 ms" in text
    assert "no CUDA library" in text
    with pytest.raises(ValueError, match="no CUDA library"):
        plan_for(profile(CPU), backends=CPU_BACKENDS, device="gpu")


def test_placements_within_the_noise_are_a_tie_won_by_the_native_backend():
    # onnxruntime's decode makes the whole plan 3% faster: within scheduler.NOISE, so the
    # all-native plan; 14% faster: onnxruntime. A tie costs at most NOISE over the fastest.
    near = plan_for(profile({**CPU, "decode": (60.0, 57.0)}), backends=CPU_BACKENDS)
    assert [p.backend for p in near.placements] == ["native"] * 4
    assert near.est_latency_ms <= (40 + 2 + 57 + 6) * (1 + scheduler.NOISE)
    far = plan_for(profile({**CPU, "decode": (60.0, 45.0)}), backends=CPU_BACKENDS)
    assert far.backend_of("decode") == "onnxruntime"


def test_gpu_and_split_need_the_cuda_library_on_this_build():
    with pytest.raises(ValueError, match="CUDA library"):
        make_plan(STAGES, device="gpu", calibrate=False)
    with pytest.raises(ValueError, match="CUDA library"):
        make_plan(STAGES, device="split", calibrate=False)


def test_strong_gpu_gets_a_gpu_plan():
    gpu = {"encode": 3.0, "stylize": 0.2, "decode": 4.0, "enhance": 0.5}
    plan = plan_for(profile(CPU, gpu))
    assert plan.device == "gpu" and set(devices(plan)) == {"gpu"}
    assert plan.backend_of("encode") == "onnxruntime-cuda"
    assert plan.backend_of("enhance") == "cuda"
    assert "best cpu-only" in plan.why
    assert plan.gpu_host_threads == 1


def test_weak_gpu_with_a_strong_cpu_splits_with_the_reason():
    # The networks still run faster on the small GPU; the guided filter (memory-bound box
    # sums) runs faster on the wide CPU.
    gpu = {"encode": 15.0, "stylize": 1.5, "decode": 20.0, "enhance": 30.0}
    plan = plan_for(profile(CPU, gpu))
    assert plan.device == "split"
    assert devices(plan) == ["gpu", "gpu", "gpu", "cpu"]
    text = plan.describe()
    assert "split has the lowest estimated latency" in text
    assert "cpu/native 6.00 ms vs gpu/cuda 30.00 ms" in text
    assert "best gpu-only" in text and "best cpu-only" in text


def test_gpu_slower_than_the_cpu_gets_a_cpu_plan():
    # Jetson-like: the GPU is measured slower than the CPU at every stage.
    gpu = {"encode": 90.0, "stylize": 4.0, "decode": 120.0, "enhance": 15.0}
    plan = plan_for(profile(CPU, gpu))
    assert plan.device == "cpu"
    assert "the GPU is slower than the CPU here" in plan.describe()


def test_gpu_without_measured_figures_is_never_assumed_faster():
    prof = profile(CPU)  # GPU backends available, no GPU figures, no link figures
    plan = plan_for(prof)
    assert plan.device == "cpu"


def test_transfer_bound_stages_stay_on_one_device():
    # Each device is faster at alternate stages: with free copies the best plan ping-pongs;
    # with slow copies everything stays on one device.
    cpu = {"encode": (10.0, None), "stylize": (1.0, None), "decode": (10.0, None),
           "enhance": (3.0, None)}
    gpu = {"encode": 7.0, "stylize": 2.0, "decode": 7.0, "enhance": 4.0}
    fast = plan_for(profile(cpu, gpu, link=(1e6, 1e6, 0.0)))
    assert fast.device == "split"  # the case can fail: copies are what keeps it together
    slow = plan_for(profile(cpu, gpu, link=(0.5, 0.5, 20.0)))
    assert len(set(devices(slow))) == 1, slow.describe()


def test_throughput_overlaps_devices_latency_does_not():
    cpu = {"encode": (10.0, None), "stylize": (1.0, None), "decode": (10.0, None),
           "enhance": (1.0, None)}
    gpu = {"encode": 8.0, "stylize": 0.5, "decode": 8.0, "enhance": 0.5}
    prof = profile(cpu, gpu, link=(25.0, 25.0, 10.0))
    latency = plan_for(prof, objective="latency")
    assert latency.device == "gpu"
    stream = plan_for(prof, objective="throughput")
    assert stream.device == "split" and stream.overlap
    assert stream.est_frame_ms < latency.est_frame_ms
    assert stream.est_frame_ms < stream.est_latency_ms
    # one core is kept for the thread driving the GPU while the CPU pool runs
    assert stream.threads == 3 and stream.gpu_host_threads == 1
    assert stream.concurrent_threads == 4
    with pytest.raises(ValueError, match="objective"):
        plan_for(prof, objective="fast")


@pytest.mark.parametrize("cores", [1, 2, 3, 4, 16])
@pytest.mark.parametrize("objective", ["latency", "throughput"])
@pytest.mark.parametrize("gpu", [None, {"encode": 8.0, "stylize": 0.5, "decode": 8.0,
                                        "enhance": 9.0}], ids=["cpu", "gpu"])
def test_thread_counts_never_exceed_the_cores(cores, objective, gpu):
    plan = plan_for(profile(CPU, gpu), cores=cores, objective=objective)
    assert plan.threads >= 1 and plan.concurrent_threads <= cores
    assert plan.ort_threads <= cores and plan.cores == cores
    if cores == 1:
        assert not plan.overlap  # no spare core to drive a GPU beside the CPU pool


def test_unsupported_stage_goes_to_onnxruntime_with_the_reason():
    plan = plan_for(profile(CPU), backends=CPU_BACKENDS,
                    unsupported={"encode": "unsupported op GridSample"})
    assert plan.backend_of("encode") == "onnxruntime"
    assert "cannot run it: unsupported op GridSample" in plan.describe()
    with pytest.raises(ValueError, match="GridSample"):
        plan_for(profile(CPU), backends=CPU_BACKENDS, backend="native",
                 unsupported={"encode": "unsupported op GridSample"})


def test_reduced_precision_keeps_cpu_onnx_stages_native_and_the_gpu_a_candidate():
    # onnxruntime's CPU runs fp32 only: at int8 the decode stays native although onnxruntime
    # measured faster at fp32 (45 vs 60 ms); a strong GPU still takes the network (its own
    # precision), and a stage the native executor cannot run still goes to onnxruntime.
    plan = plan_for(profile(CPU), backends=CPU_BACKENDS, precision="int8")
    assert [p.backend for p in plan.placements] == ["native"] * 4
    assert "precision int8, which onnxruntime's CPU backend does not run" in plan.describe()
    gpu = {"encode": 3.0, "stylize": 0.2, "decode": 4.0, "enhance": 0.5}
    assert plan_for(profile(CPU, gpu), precision="auto").backend_of("decode") == \
        "onnxruntime-cuda"
    odd = plan_for(profile(CPU), backends=CPU_BACKENDS, precision="bf16",
                   unsupported={"encode": "unsupported op GridSample"})
    assert odd.backend_of("encode") == "onnxruntime" and odd.backend_of("decode") == "native"


def test_forced_backend_and_bad_arguments():
    plan = plan_for(profile(CPU), backends=CPU_BACKENDS, backend="onnxruntime")
    assert plan.backend_of("encode") == plan.backend_of("decode") == "onnxruntime"
    assert "asked for" in plan.describe()
    with pytest.raises(ValueError, match="backend"):
        plan_for(profile(CPU), backend="tensorrt")
    with pytest.raises(ValueError, match="device"):
        plan_for(profile(CPU), device="tpu")


def test_no_figures_falls_back_to_native_by_rule():
    plan = make_plan(STAGES, backends=CPU_BACKENDS, calibrate=False, cores=2)
    assert [p.backend for p in plan.placements] == ["native"] * 4
    assert "by rule" in plan.describe()


@pytest.fixture
def tiny(tmp_path_factory):
    return load_package(make_package(tmp_path_factory.mktemp("pkg") / "tiny"))


def test_calibration_is_cached_and_reused(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("A2R_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("A2R_PROFILE", raising=False)
    first = make_plan(tiny.stages)  # calibrates (its time is reported by the bench, not asserted)
    files = list(tmp_path.glob("calibration-*.json"))
    assert len(files) == 1
    size = measure.CALIBRATION_SIZE
    assert f"calibration at {size}x{size}" in first.describe() and str(files[0]) in first.describe()
    data = json.loads(files[0].read_text())
    assert {(e["stage"], e["backend"]) for e in data["stages"]} >= {
        ("encode", "native"), ("encode", "onnxruntime"), ("decode", "native"),
        ("decode", "onnxruntime"), ("stylize", "native"), ("enhance", "native")}

    def no_measuring(*a, **k):
        raise AssertionError("calibrated again instead of reusing the cache")

    monkeypatch.setattr(measure.StageChain, "time_stages", no_measuring)
    again = make_plan(tiny.stages)
    assert again.placements == first.placements
    # the same model copied elsewhere is the same model: same cache entry
    other = load_package(make_package(tmp_path / "elsewhere"))
    assert make_plan(other.stages).placements == first.placements


def calibrated_sizes(folder):
    return sorted(int(f.name.split("-")[-2][:-2]) for f in folder.glob("calibration-*.json"))


def test_calibration_measures_the_largest_size_within_the_memory_budget(tiny, tmp_path,
                                                                       monkeypatch):
    """The tiny package's 512x512 plans need 5 MiB: under A2R_MEMORY_MB=4 the calibration
    measures 256x256 (the build does not fail on the calibration's own size), cached, and
    later plans read that cache without measuring (nor trying 512x512 again)."""
    monkeypatch.setenv("A2R_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("A2R_PROFILE", raising=False)
    monkeypatch.setenv("A2R_MEMORY_MB", "4")
    first = make_plan(tiny.stages)
    assert "calibration at 256x256" in first.describe() and calibrated_sizes(tmp_path) == [256]
    timer = measure.StageChain.time_stages
    monkeypatch.setattr(measure.StageChain, "time_stages", lambda *a, **k: pytest.fail(
        "calibrated again instead of reusing the cache"))
    assert make_plan(tiny.stages).placements == first.placements
    # a raised limit measures 512x512 instead of reusing 256x256, whose cache names its limit
    monkeypatch.setattr(measure.StageChain, "time_stages", timer)
    monkeypatch.setenv("A2R_MEMORY_MB", "64")
    assert "calibration at 512x512" in make_plan(tiny.stages).describe()
    assert calibrated_sizes(tmp_path) == [256, 512]


def test_a_slow_model_is_calibrated_at_the_largest_size_within_the_call_budget(tiny, tmp_path,
                                                                              monkeypatch):
    """A model whose slowest call, timed once at the smallest size and scaled by the pixels,
    would take more than CALL_BUDGET_S at 512x512 is measured at 256x256 where it fits, and
    the figure of that probe is a real call's."""
    monkeypatch.setenv("A2R_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("A2R_PROFILE", raising=False)
    assert 0 < measure.StageChain(tiny.stages, 1).slowest_call(64) < measure.CALL_BUDGET_S
    probed = []

    def slowest_call(chain, size):   # x64 the pixels at 512x512: over; x16 at 256x256: within
        probed.append(size)
        return measure.CALL_BUDGET_S / 40

    monkeypatch.setattr(measure.StageChain, "slowest_call", slowest_call)
    assert "calibration at 256x256" in make_plan(tiny.stages).describe()
    assert probed == [measure.MIN_CALIBRATION_SIZE] and calibrated_sizes(tmp_path) == [256]


def test_engine_tile_bounds_the_calibration_and_the_pictures_convert(tiny, tmp_path,
                                                                    monkeypatch):
    """Engine(tile=) calibrates at most at its tile size (the largest halving of 512 that fits
    in it), so a budget the 512x512 and even 128x128 plans exceed (A2R_MEMORY_MB=1) builds,
    and a larger picture converts in tiles."""
    monkeypatch.setenv("A2R_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("A2R_PROFILE", raising=False)
    assert "calibration at 128x128" in make_plan(tiny.stages, tile=128).describe()
    assert "calibration at 64x64" in make_plan(tiny.stages, tile=100).describe()
    assert calibrated_sizes(tmp_path) == [64, 128]
    monkeypatch.setenv("A2R_CACHE_DIR", str(tmp_path / "fresh"))
    monkeypatch.setenv("A2R_MEMORY_MB", "1")
    folder = Path(tiny.stages[0].params["file"]).parent
    eng = Engine(str(folder), tile=64, cache_mb=0)
    assert "calibration at 64x64" in eng.plan.describe()
    out = eng.convert(np.random.default_rng(0).integers(0, 256, (150, 200, 3), np.uint8))
    assert out.shape == (150, 200, 3)


def test_a_model_fitting_no_calibration_size_is_planned_without_figures(tiny, tmp_path,
                                                                        monkeypatch):
    """No calibration size fits A2R_MEMORY_MB (here: the smallest made 256): the plan is made
    by rule, and says why without naming a size the user did not give."""
    monkeypatch.setenv("A2R_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("A2R_PROFILE", raising=False)
    monkeypatch.setenv("A2R_MEMORY_MB", "1")
    monkeypatch.setattr(measure, "MIN_CALIBRATION_SIZE", 256)
    plan = make_plan(tiny.stages)
    assert [p.backend for p in plan.placements] == ["native"] * 4
    figures = plan.describe().splitlines()[2]
    assert figures == ("  figures: no figures (MemoryLimitError: the model's stages do not fit "
                       "A2R_MEMORY_MB=1 MiB at any calibration size)"), figures
    assert not list(tmp_path.glob("calibration-*"))


def test_stored_profile_of_this_model_is_used(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("A2R_CACHE_DIR", str(tmp_path))
    digest = measure.model_digest(tiny.stages)
    prof = profile({"encode": (1.0, 9.0), "stylize": (1.0, None), "decode": (9.0, 1.0),
                    "enhance": (1.0, None)})
    prof.update(model={"name": "tiny", "digest": digest}, date="2026-01-01T00:00:00+00:00")
    path = tmp_path / "p.json"
    path.write_text(json.dumps(prof))
    monkeypatch.setenv("A2R_PROFILE", str(path))
    plan = make_plan(tiny.stages)
    assert [p.backend for p in plan.placements] == ["native", "native", "onnxruntime", "native"]
    assert "profile 2026-01-01" in plan.describe()
    assert not list(tmp_path.glob("calibration-*"))  # nothing left to calibrate
    eng = Engine(str(Path(tiny.stages[0].params["file"]).parent))  # the Engine's plan, too
    assert eng.plan.backend_of("decode") == "onnxruntime"


# Injected stage costs, seconds per pixel of the picture: each table makes another placement
# the fastest, every other one at least twice as slow (2 vs 4, 4, 6 units).
COSTS = {"encode native, decode onnxruntime": {("encode", "native"): 1e-8,
                                               ("encode", "onnxruntime"): 3e-8,
                                               ("decode", "native"): 3e-8,
                                               ("decode", "onnxruntime"): 1e-8},
         "encode onnxruntime, decode native": {("encode", "native"): 3e-8,
                                               ("encode", "onnxruntime"): 1e-8,
                                               ("decode", "native"): 1e-8,
                                               ("decode", "onnxruntime"): 3e-8}}


@pytest.mark.parametrize("costs", COSTS.values(), ids=COSTS.keys())
def test_chosen_plan_is_the_fastest_cpu_placement_when_measured(tiny, tmp_path, monkeypatch,
                                                                costs):
    """The plan the scheduler makes from its calibration is the placement that is fastest when
    the whole chain is timed, every combination, on the same runners. The stages run for real;
    their times are injected (a clock that advances by ``costs`` per pixel of the picture,
    read by measure's timing), so the ranking does not hang on a shared machine's load and the
    fastest can be asserted exactly."""
    from a2r_edge.runtime.measure import StageChain, interleaved_median_times
    from a2r_edge.runtime import cpu

    monkeypatch.setenv("A2R_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("A2R_PROFILE", raising=False)
    clock = [0.0]
    monkeypatch.setattr(measure, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    init = StageChain.__init__

    def timed(self, *args, **kwargs):   # calibration's chain and the one timed below alike
        init(self, *args, **kwargs)
        for key, run in list(self.runners.items()):
            def tick(x, picture, run=run, rate=costs.get(key, 1e-9)):
                clock[0] += rate * picture.shape[-2] * picture.shape[-1]
                return run(x, picture)
            self.runners[key] = tick
    monkeypatch.setattr(StageChain, "__init__", timed)
    size = 256
    plan = make_plan(tiny.stages, size=size)
    chain = StageChain(tiny.stages, cpu.num_threads())
    picture = chain.picture(size)
    names = [s.name for s in tiny.stages]
    candidates = {combo: (lambda a=dict(zip(names, combo)): chain.run(picture, a))
                  for combo in itertools.product(*(chain.backends_of(n) for n in names))}
    assert len(candidates) == 4  # native / onnxruntime for each of the two ONNX stages
    medians = dict(zip(candidates, interleaved_median_times(list(candidates.values()), rounds=15,
                                                            budget_s=float("inf"))))
    chosen = tuple(plan.backend_of(n) for n in names)
    fastest = min(medians, key=medians.get)
    assert sorted(medians.values())[1] >= 1.9 * medians[fastest]   # the tables' margin
    assert chosen == fastest, (plan.describe(), medians)


@pytest.mark.slow  # a subprocess run of the whole --quick bench: about 10 s (timeout: a hang)
def test_bench_quick_profile_validates(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    out = tmp_path / "profile.json"
    env = {**os.environ, "A2R_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "a2r_edge.bench", "--quick", "--json", str(out),
                           "--no-progress"], capture_output=True, text=True, env=env,
                          timeout=60, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(out.read_text())
    schema = json.loads((ROOT / "profiles" / "schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(data)
    assert data["source"] == "measured"
    assert "reference rates" in proc.stdout and "ratio" in proc.stdout
    assert any("tiny" in n or "bundled" in n for n in data["notes"])
    assert {e["backend"] for e in data["stages"]} == {"native", "onnxruntime"}
    # the profile drives the scheduler: its model figures are used
    assert scheduler.Costs.from_profile(data, "test").has("encode", "native")


def test_bench_bad_options_one_line_exit_2(tmp_path):
    env = {**os.environ, "A2R_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "a2r_edge.bench", "--threads", "0"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "--threads" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "a2r_edge.bench", "--frobnicate"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args,match", [
    (["--json", "."], "--json . is a folder: give a file name"),
    (["--json", "taken/profile.json"], "cannot create the output folder taken: taken is a file"),
    (["--json", ""], "--json is empty: give a file name"),
    (["--quick", "--sizes", "255", "256"],   # the decoder's output would be 256 x 256
     "stage size(s) 255: the model (bundled a2r_lite) takes multiples of its stride 4, e.g. 256"),
])
def test_bench_refuses_what_it_could_not_finish_before_the_run(tmp_path, args, match):
    """Refused in about a second (the run takes minutes), nothing left behind."""
    (tmp_path / "taken").write_text("a file")
    env = {**os.environ, "A2R_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "a2r_edge.bench", "--no-progress", *args],
                          capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"a2r_edge.bench: error: {match}"]
    assert sorted(f.name for f in tmp_path.iterdir()) == ["taken"]


def test_calibration_and_conversion_run_a_stage_through_the_same_runner(tmp_path, monkeypatch):
    """The scheduler's costs are measured on the path conversion takes: calibration
    (measure.StageChain) and the Engine both run every ONNX stage through the runner that
    runners.StageRunners makes for its backend (onnxruntime: IOBinding, not a plain allocating
    session.run per call)."""
    from a2r_edge.runtime import runners
    from a2r_edge.runtime.ort import OrtSession

    folder = make_package(tmp_path / "pkg")
    package = load_package(folder)
    calls, plain_runs = [], []
    real_get, real_run = runners.StageRunners.get, OrtSession.run

    def get(self, stage, backend, threads=None):
        run = real_get(self, stage, backend, threads)
        return lambda x: calls.append((stage.name, backend, run)) or run(x)

    monkeypatch.setattr(runners.StageRunners, "get", get)
    monkeypatch.setattr(OrtSession, "run", lambda self, feeds: plain_runs.append(1) or
                        real_run(self, feeds))
    chain = measure.StageChain(package.stages, 1)
    chain.time_stages(64, rounds=3, budget_s=0.01)
    onnx_stages = {s.name for s in package.stages if s.kind == "onnx"}
    timed = {(name, backend) for name, backend, _ in calls}
    assert timed == {(n, b) for n in onnx_stages for b in ("native", "onnxruntime")}
    # onnxruntime ran plainly only once per stage and shape: the runner's output-shape probe
    assert len(plain_runs) == len(onnx_stages)

    for backend in ("native", "onnxruntime"):
        calls.clear()
        Engine(str(folder), backend=backend, cache_mb=0).convert(
            np.zeros((64, 64, 3), np.uint8))
        assert {(name, b) for name, b, _ in calls} == {(n, backend) for n in onnx_stages}


def test_interleaved_median_times_reads_the_clock_it_is_given():
    """The benchmarks' CPU-time ratios (A2R_BENCH_CPU_TIME) time through ``clock=``: each call
    is measured on that clock, not on the wall."""
    from a2r_edge.runtime.measure import interleaved_median_times

    cpu_seconds = [0.0]

    def costs(seconds):
        def fn():
            cpu_seconds[0] += seconds
        return fn

    medians = interleaved_median_times([costs(3.0), costs(5.0)], rounds=5, warmup=1,
                                       budget_s=float("inf"), clock=lambda: cpu_seconds[0])
    assert medians == [3.0, 5.0]
