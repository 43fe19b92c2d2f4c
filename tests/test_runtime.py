"""The native layer's runtime: ISA dispatch, threads, settings, the setup report."""
import ctypes
import os
import subprocess
import sys

import pytest

import a2r_edge
from a2r_edge import _kernels, _settings
from a2r_edge.runtime import cpu, system, threads

OPS = ("preprocess", "postprocess", "channel_stats", "adain", "silu", "pixel_shuffle",
       "im2col", "conv2d", "conv2d_pack", "conv2d_packed_size", "conv2d_workspace_size",
       "fma_peak", "guided_filter")


def run_python(code, **env):
    """Run code in a fresh interpreter with extra environment variables; (rc, stdout, stderr)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("A2R_")}
    full_env.update(env)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=full_env, timeout=120)
    return p.returncode, p.stdout, p.stderr


def test_levels_are_ordered_and_best_is_default():
    levels = cpu.available_isas()
    assert levels[0] == "baseline"
    assert levels == _settings.ISA_LEVELS[: len(levels)]
    rc, out, _ = run_python("from a2r_edge.runtime import cpu; print(cpu.isa())")
    assert rc == 0 and out.strip() == levels[-1]


def test_every_op_has_a_variant_per_level():
    """Every op at every level this architecture's build has (_settings.ISA_LEVELS)."""
    lib = ctypes.CDLL(_kernels.__file__)
    for op in OPS:
        for level in _settings.ISA_LEVELS:
            assert hasattr(lib, f"a2r_{op}_{level}"), f"a2r_{op}_{level} missing from the build"


def test_set_isa_clamps_to_what_the_cpu_has():
    best = cpu.available_isas()[-1]
    for level in _settings.ISA_LEVELS:
        with cpu.using_isa(level) as got:
            want = min(level, best, key=_settings.ISA_LEVELS.index)
            assert got == want == cpu.isa()
    assert cpu.isa() == best
    with pytest.raises(ValueError, match="ISA level"):
        cpu.set_isa("sse9")


def test_max_isa_setting_caps_the_level():
    rc, out, _ = run_python("from a2r_edge.runtime import cpu; print(cpu.isa())",
                            A2R_MAX_ISA="baseline")
    assert rc == 0 and out.strip() == "baseline"


@pytest.mark.parametrize("module", ["a2r_edge.ops", "a2r_edge.model", "a2r_edge._kernels"])
@pytest.mark.parametrize("given,want", [
    ({}, ("PASSIVE", "10000")),                                      # a2r_edge's defaults
    ({"GOMP_SPINCOUNT": "0"}, ("PASSIVE", "0")),                     # the user's spin wins
    ({"OMP_WAIT_POLICY": "active"}, ("active", None)),               # no cap on a spinning pool
])
def test_openmp_wait_settings(given, want, module):
    """OpenMP threads sleep after a short spin unless the user set the policy or spin count.
    Both must be in the environment before libgomp loads (with the kernels), whichever module
    is imported first: read here at the moment the kernels' library is loaded."""
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    probe = ("import os, sys\n"
             "class Probe:\n"
             "    def find_spec(self, name, path=None, target=None):\n"
             "        if name == 'a2r_edge._kernels':\n"
             "            print(repr((os.environ.get('OMP_WAIT_POLICY'), "
             "os.environ.get('GOMP_SPINCOUNT'))))\n"
             "sys.meta_path.insert(0, Probe())\n"
             f"import {module}\n")
    p = subprocess.run([sys.executable, "-c", probe],
                       capture_output=True, text=True, env={**base, **given}, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == repr(want)


def test_threads_setting_and_default():
    rc, out, _ = run_python("from a2r_edge.runtime import cpu; print(cpu.num_threads())",
                            A2R_NUM_THREADS="1")
    assert rc == 0 and out.strip() == "1"
    rc, out, _ = run_python("from a2r_edge.runtime import cpu; print(cpu.num_threads())")
    expected = threads.default_threads() if cpu.openmp_enabled() else 1
    assert rc == 0 and int(out) == expected
    with cpu.using_threads(2) as n:
        assert n == (2 if cpu.openmp_enabled() else 1)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="thread count"):
            cpu.set_num_threads(bad)


def test_streaming_threshold_is_the_last_level_cache():
    """Set at import from sysfs: an op whose input and output fill the largest cache streams."""
    assert cpu.stream_min_bytes({"L1d": 32 << 10, "L2": 1 << 20, "L3": 32 << 20}) == 32 << 20
    assert cpu.stream_min_bytes({"L1d": 32 << 10, "L2": 4 << 20}) == 4 << 20
    assert cpu.stream_min_bytes(None) == 0
    now = _kernels.set_stream_min_bytes(0)              # 0: never, read back as INT64_MAX
    try:
        assert _kernels.set_stream_min_bytes(now) == 2 ** 63 - 1
    finally:
        _kernels.set_stream_min_bytes(now)
    assert now == (cpu.stream_min_bytes(threads.cache_sizes()) or 2 ** 63 - 1)


@pytest.mark.parametrize("name,value", [("A2R_MAX_ISA", "sse9"), ("A2R_NUM_THREADS", "0"),
                                        ("A2R_NUM_THREADS", "two")])
def test_bad_setting_is_one_line_and_exit_2(name, value):
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2R_")}
    env[name] = value
    p = subprocess.run([sys.executable, "-m", "a2r_edge", "info"], capture_output=True,
                       text=True, env=env, timeout=120)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and name in lines[0] and "Traceback" not in p.stderr


def test_info_reports_everything():
    p = subprocess.run([sys.executable, "-m", "a2r_edge", "info"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert a2r_edge.__version__ in p.stdout
    assert f"cpu kernels  {cpu.isa()}" in p.stdout
    assert "openmp" in p.stdout and "threads" in p.stdout
    for name in _settings.SETTINGS:
        assert name in p.stdout


def test_info_shows_the_precision_choice():
    p = subprocess.run([sys.executable, "-m", "a2r_edge", "info", "--precision", "auto"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    for stage in ("encode", "decode"):   # the bundled model's native stages
        assert f"{stage:<12} convolutions at " in p.stdout


def test_cli_usage_error_exits_2():
    p = subprocess.run([sys.executable, "-m", "a2r_edge", "frobnicate"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2


def test_cgroup_quota(tmp_path):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert threads.cgroup_cpu_quota(str(tmp_path)) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert threads.cgroup_cpu_quota(str(tmp_path)) is None
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("50000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert threads.cgroup_cpu_quota(str(v1)) == 0.5
    assert threads.cgroup_cpu_quota(str(tmp_path / "missing")) is None


def test_physical_cores_counts_smt_siblings_once(tmp_path):
    allowed = sorted(os.sched_getaffinity(0))
    lines = []
    for i, cpu_id in enumerate(allowed):  # two logical CPUs per core
        lines += [f"processor\t: {cpu_id}", "physical id\t: 0", f"core id\t\t: {i // 2}", ""]
    (tmp_path / "cpuinfo").write_text("\n".join(lines))
    assert threads.physical_cores(str(tmp_path / "cpuinfo")) == (len(allowed) + 1) // 2
    assert threads.physical_cores(str(tmp_path / "missing")) == len(allowed)
    assert threads.default_threads() >= 1
