"""detect_hardware() on fake /proc, /sys, cgroup and /etc trees (every unknown field None), on
this machine (never raises), and the profile cache/loading rules."""
import json
import os
import stat

import pytest

import a2r_edge
from a2r_edge.runtime import files, system, threads
from a2r_edge.runtime.system import GpuInfo, HardwareProfile, detect_hardware

CPUINFO = "".join(
    f"processor\t: {i}\nmodel name\t: Fake CPU 9000 @ 3.0GHz\nphysical id\t: 0\n"
    f"core id\t\t: {i // 2}\n\n" for i in range(8))  # 8 CPUs = 4 cores x 2 SMT siblings


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def fake_root(tmp_path):
    r = tmp_path
    write(r / "proc" / "cpuinfo", CPUINFO)
    write(r / "proc" / "meminfo", "MemTotal:       8000000 kB\nMemFree: 1 kB\n"
                                  "MemAvailable:   6000000 kB\n")
    cache = r / "sys" / "devices" / "system" / "cpu" / "cpu0" / "cache"
    for i, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"),
                                             (2, "Unified", "2048K"), (3, "Unified", "32M")]):
        write(cache / f"index{i}" / "level", f"{level}\n")
        write(cache / f"index{i}" / "type", f"{kind}\n")
        write(cache / f"index{i}" / "size", f"{size}\n")
    write(r / "cgroup" / "cpu.max", "150000 100000\n")
    write(r / "cgroup" / "memory.max", "2147483648\n")
    return r


def detect(root, **kw):
    kw.setdefault("nvidia_smi", None)
    return detect_hardware(proc_root=str(root / "proc"), sys_root=str(root / "sys"),
                           cgroup_root=str(root / "cgroup"), etc_root=str(root / "etc"),
                           isas=None, machine=None if "machine" not in kw else kw.pop("machine"),
                           **kw)


def test_fake_tree_is_read(fake_root):
    hw = detect(fake_root, allowed_cpus=set(range(8)))
    assert hw.cpu_model == "Fake CPU 9000 @ 3.0GHz"
    assert hw.physical_cores == 4 and hw.logical_cpus == 8
    assert hw.caches == {"L1d": 48 << 10, "L1i": 32 << 10, "L2": 2 << 20, "L3": 32 << 20}
    assert hw.memory_total_bytes == 8000000 * 1024
    assert hw.memory_available_bytes == 6000000 * 1024
    assert hw.cgroup_memory_limit_bytes == 2 << 30
    assert hw.cgroup_cpu_quota == 1.5
    assert hw.default_threads == 2  # 4 cores, quota 1.5 CPUs -> 2 threads
    assert hw.gpus == () and hw.jetson is None and hw.board is None


def test_affinity_limits_the_cores(fake_root):
    hw = detect(fake_root, allowed_cpus={0, 1, 2})  # CPUs 0,1 = core 0; CPU 2 = core 1
    assert hw.physical_cores == 2 and hw.logical_cpus == 3


def test_empty_tree_gives_none_for_everything_unknown(tmp_path):
    hw = detect(tmp_path)
    for field in ("cpu_model", "isas", "physical_cores", "caches", "memory_total_bytes",
                  "memory_available_bytes", "cgroup_memory_limit_bytes", "cgroup_cpu_quota",
                  "board", "jetson"):
        assert getattr(hw, field) is None, field
    assert hw.gpus == () and hw.default_threads == 1
    assert "unknown" in hw.describe()


def test_garbage_files_do_not_raise(fake_root):
    write(fake_root / "proc" / "cpuinfo", "processor : x\ncore id : ?\n\x00\xff")
    write(fake_root / "proc" / "meminfo", "MemTotal: lots\n")
    write(fake_root / "cgroup" / "cpu.max", "max 100000\n")
    write(fake_root / "cgroup" / "memory.max", "max\n")
    hw = detect(fake_root)
    assert hw.physical_cores is None and hw.memory_total_bytes is None
    assert hw.cgroup_cpu_quota is None and hw.cgroup_memory_limit_bytes is None


def test_cgroup_v1_files(tmp_path):
    write(tmp_path / "cg" / "cpu" / "cpu.cfs_quota_us", "200000\n")
    write(tmp_path / "cg" / "cpu" / "cpu.cfs_period_us", "100000\n")
    write(tmp_path / "cg" / "memory" / "memory.limit_in_bytes", str(2**63 - 4096))
    assert threads.cgroup_cpu_quota(str(tmp_path / "cg")) == 2.0
    assert system.cgroup_memory_limit(str(tmp_path / "cg")) is None  # v1 "no limit"


def test_jetson_board_is_recognised(fake_root):
    write(fake_root / "proc" / "device-tree" / "model", "NVIDIA Jetson Orin Nano Developer Kit\0")
    write(fake_root / "etc" / "nv_tegra_release",
          "# R36 (release), REVISION: 3.0, GCID: 1, BOARD: generic, EABI: aarch64\n")
    hw = detect(fake_root)
    assert hw.board == "NVIDIA Jetson Orin Nano Developer Kit"
    assert hw.jetson.startswith("# R36")
    assert len(hw.gpus) == 1 and hw.gpus[0].source == "jetson"
    assert hw.gpus[0].memory_bytes is None and hw.gpus[0].compute_capability is None


def _script(path, body):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_nvidia_smi_output_is_parsed(fake_root, tmp_path):
    smi = _script(tmp_path / "nvidia-smi", 'echo "NVIDIA H200, 143771, 9.0"\n'
                                           'echo "NVIDIA L4, 23034, 8.9"\n')
    hw = detect(fake_root, nvidia_smi=smi)
    assert hw.gpus == (GpuInfo("NVIDIA H200", 143771 << 20, "9.0", "nvidia-smi"),
                       GpuInfo("NVIDIA L4", 23034 << 20, "8.9", "nvidia-smi"))


def test_old_nvidia_smi_without_compute_cap(fake_root, tmp_path):
    # Older drivers reject the compute_cap field: asked again without it.
    smi = _script(tmp_path / "nvidia-smi",
                  'case "$1" in *compute_cap*) exit 2;; esac\necho "Tesla T4, 15360"\n')
    hw = detect(fake_root, nvidia_smi=smi)
    assert hw.gpus == (GpuInfo("Tesla T4", 15360 << 20, None, "nvidia-smi"),)


def test_broken_nvidia_smi_is_no_gpu(fake_root, tmp_path):
    smi = _script(tmp_path / "nvidia-smi", "exit 9\n")
    assert detect(fake_root, nvidia_smi=smi).gpus == ()
    assert detect(fake_root, nvidia_smi=str(tmp_path / "missing")).gpus == ()


def test_this_machine():
    hw = a2r_edge.detect_hardware()  # the lazy public name
    assert isinstance(hw, HardwareProfile)
    assert hw.physical_cores is None or hw.physical_cores >= 1
    assert hw.default_threads >= 1
    assert hw.isas and hw.isas[0] == "baseline"
    from a2r_edge.runtime import cuda
    built = cuda.library_path()
    assert hw.cuda_library == (f"a2r_edge/{built.name}" if built.exists() else None)
    assert HardwareProfile.from_dict(json.loads(json.dumps(hw.to_dict()))) == hw
    assert hw.machine_key() == detect_hardware(nvidia_smi=None).machine_key()


def test_profile_loading(tmp_path, monkeypatch):
    monkeypatch.setenv("A2R_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("A2R_PROFILE", raising=False)
    assert system.load_profile() is None  # nothing cached: not an error
    path = system.profile_path()
    assert path.startswith(str(tmp_path / "cache"))
    files.write_json(path, {"source": "measured"})
    assert system.load_profile() == {"source": "measured"}
    monkeypatch.setenv("A2R_PROFILE", str(tmp_path / "nope.json"))
    with pytest.raises(ValueError, match="nope.json"):
        system.load_profile()
    (tmp_path / "bad.json").write_text("{not json")
    monkeypatch.setenv("A2R_PROFILE", str(tmp_path / "bad.json"))
    with pytest.raises(ValueError, match="bad.json"):
        system.load_profile()


def test_cache_dir_defaults(monkeypatch, tmp_path):
    monkeypatch.delenv("A2R_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert system.cache_dir() == os.path.join(str(tmp_path), "a2r_edge")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert system.cache_dir().endswith(os.path.join(".cache", "a2r_edge"))


def _strings(value):
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_profiles_name_no_folder_of_the_machine_that_wrote_them(tmp_path, monkeypatch):
    """Profiles are shared between machines and checked in (profiles/): the CUDA library is
    named within the package, and no profile holds an absolute path."""
    from a2r_edge.runtime import cuda
    lib = tmp_path / "a2r_edge" / cuda.LIBRARY_NAME
    lib.parent.mkdir()
    lib.write_bytes(b"")
    monkeypatch.setattr(cuda, "library_path", lambda: lib)
    hw = detect_hardware(nvidia_smi=None, onnxruntime=False)
    assert hw.cuda_library == f"a2r_edge/{cuda.LIBRARY_NAME}"
    assert str(tmp_path) not in json.dumps(hw.to_dict())
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    profiles = [os.path.join(root, "profiles", f)
                for f in os.listdir(os.path.join(root, "profiles")) if f.endswith(".json")]
    assert profiles
    for path in profiles:
        with open(path) as f:
            found = [s for s in _strings(json.load(f)) if os.path.isabs(s) or s.startswith("~/")]
        assert not found, (path, found)
