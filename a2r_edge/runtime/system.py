"""What this machine offers (``detect_hardware() -> HardwareProfile``: CPU, the ISA levels this
build's kernels run, caches, memory, cgroup limits, GPUs, Jetson boards, onnxruntime's providers,
the CUDA library); where measured profiles are cached. The thread count alone is threads.py.

Every probe degrades to a safe answer on an unusual machine (missing /proc, /sys, containers)
instead of failing.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess

from .threads import (allowed_cpus as _affinity, cache_sizes, cgroup_cpu_quota, physical_cores_of,
                      read_text as _read, size_bytes, threads_for)


_NO_LIMIT = 1 << 60
_NVIDIA_SMI_TIMEOUT_S = 5  # a wedged driver must not hang detect_hardware()


@dataclasses.dataclass(frozen=True)
class GpuInfo:
    name: str | None
    memory_bytes: int | None
    compute_capability: str | None  # "9.0"; None when the source does not say
    source: str                     # "nvidia-smi", "jetson" or "onnxruntime"


@dataclasses.dataclass(frozen=True)
class HardwareProfile:
    """What this machine offers. Every field is None where the machine does not say."""
    cpu_model: str | None
    architecture: str | None
    isas: tuple[str, ...] | None          # CPU kernel levels this build + CPU + OS run
    physical_cores: int | None
    logical_cpus: int | None              # CPUs in the affinity mask
    caches: dict | None                   # {"L1d": bytes, "L1i": ..., "L2": ..., "L3": ...}
    memory_total_bytes: int | None        # /proc/meminfo MemTotal
    memory_available_bytes: int | None    # /proc/meminfo MemAvailable
    cgroup_memory_limit_bytes: int | None # None: no limit
    cgroup_cpu_quota: float | None        # CPUs; None: no quota
    default_threads: int                  # what the kernels use without A2R_NUM_THREADS
    gpus: tuple[GpuInfo, ...]
    onnxruntime_providers: tuple[str, ...] | None
    onnxruntime_cuda: bool                # onnxruntime offers the CUDA provider (not: it works)
    cuda_library: str | None              # a2r_edge's CUDA library, "a2r_edge/<file>"; None: not built
    board: str | None                     # /proc/device-tree/model (ARM boards)
    jetson: str | None                    # /etc/nv_tegra_release first line on Jetson boards

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["isas"] = list(self.isas) if self.isas is not None else None
        d["gpus"] = [dataclasses.asdict(g) for g in self.gpus]
        d["onnxruntime_providers"] = (list(self.onnxruntime_providers)
                                      if self.onnxruntime_providers is not None else None)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "HardwareProfile":
        fields = {f.name for f in dataclasses.fields(cls)}
        d = {k: v for k, v in d.items() if k in fields}
        d["gpus"] = tuple(GpuInfo(**g) for g in d.get("gpus") or ())
        for key in ("isas", "onnxruntime_providers"):
            if d.get(key) is not None:
                d[key] = tuple(d[key])
        for f in dataclasses.fields(cls):
            d.setdefault(f.name, False if f.name == "onnxruntime_cuda" else
                         (() if f.name == "gpus" else (1 if f.name == "default_threads"
                                                       else None)))
        return cls(**d)

    def machine_key(self) -> str:
        """A file-name-safe key of this machine's CPU side (model, architecture, kernel levels,
        cores, quota): caches are kept per key. GPUs are not in it, so the key can be computed
        without running nvidia-smi; a profile records its GPUs in "machine"."""
        ident = json.dumps([self.cpu_model, self.architecture, self.isas, self.physical_cores,
                            self.cgroup_cpu_quota], default=str)
        slug = re.sub(r"[^A-Za-z0-9]+", "-", (self.cpu_model or "unknown-cpu")).strip("-")
        return f"{slug[:40].lower()}-{hashlib.sha256(ident.encode()).hexdigest()[:10]}"

    def describe(self) -> str:
        caches = ", ".join(f"{k} {v // 1024} KiB" for k, v in (self.caches or {}).items())
        mem = (f"{self.memory_total_bytes / 2**30:.1f} GiB" if self.memory_total_bytes
               else "unknown")
        if self.cgroup_memory_limit_bytes:
            mem += f" (cgroup limit {self.cgroup_memory_limit_bytes / 2**30:.1f} GiB)"
        gpus = "; ".join(f"{g.name} ({g.memory_bytes // 2**20 if g.memory_bytes else '?'} MiB, "
                         f"cc {g.compute_capability or '?'}, via {g.source})"
                         for g in self.gpus) or "none found"
        lines = [f"cpu: {self.cpu_model or 'unknown'} ({self.architecture or '?'}), "
                 f"{self.physical_cores or '?'} physical cores, {self.logical_cpus or '?'} "
                 f"CPUs allowed, quota {self.cgroup_cpu_quota or 'none'}",
                 f"isa levels: {', '.join(self.isas) if self.isas else 'unknown'}",
                 f"caches: {caches or 'unknown'}", f"memory: {mem}", f"gpus: {gpus}",
                 f"onnxruntime CUDA provider offered: {'yes' if self.onnxruntime_cuda else 'no'};"
                 f" a2r_edge CUDA library: {self.cuda_library or 'not built'}"]
        if self.board or self.jetson:
            lines.append(f"board: {self.board or '?'}" +
                         (f" (Jetson: {self.jetson})" if self.jetson else ""))
        return "\n".join(lines)


def _cpuinfo_model(text: str | None) -> str | None:
    for key in ("model name", "Hardware", "Processor", "cpu model", "uarch"):
        for line in (text or "").splitlines():
            k, _, v = line.partition(":")
            if k.strip() == key and v.strip():
                return v.strip()
    return None


def _meminfo(proc_root: str) -> tuple[int | None, int | None]:
    values = {}
    for line in (_read(os.path.join(proc_root, "meminfo")) or "").splitlines():
        k, _, v = line.partition(":")
        size = size_bytes(v.replace("kB", "K"))
        if size is not None:
            values[k.strip()] = size
    return values.get("MemTotal"), values.get("MemAvailable")


def cgroup_memory_limit(root: str = "/sys/fs/cgroup") -> int | None:
    """Bytes the cgroup allows (v2 memory.max or v1 limit_in_bytes); None when unlimited."""
    for path in (os.path.join(root, "memory.max"),
                 os.path.join(root, "memory", "memory.limit_in_bytes")):
        text = _read(path)
        if text is None:
            continue
        if text == "max":
            return None
        try:
            value = int(text)
        except ValueError:
            return None
        return value if 0 < value < _NO_LIMIT else None
    return None


def _nvidia_smi(executable: str | None) -> list[GpuInfo]:
    """GPUs as nvidia-smi reports them; [] when it is missing, fails or times out."""
    if not executable:
        return []
    for fields in ("name,memory.total,compute_cap", "name,memory.total"):
        try:
            out = subprocess.run([executable, f"--query-gpu={fields}",
                                  "--format=csv,noheader,nounits"], capture_output=True,
                                 text=True, timeout=_NVIDIA_SMI_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError):
            return []
        if out.returncode != 0:
            continue  # older drivers do not know compute_cap: ask again without it
        gpus = []
        for line in out.stdout.strip().splitlines():
            parts = [p.strip() for p in line.split(",")]
            mem = parts[1] if len(parts) > 1 else ""
            gpus.append(GpuInfo(name=parts[0] or None,
                                memory_bytes=int(mem) << 20 if mem.isdigit() else None,
                                compute_capability=(parts[2] if len(parts) > 2 and
                                                    re.fullmatch(r"\d+\.\d+", parts[2])
                                                    else None),
                                source="nvidia-smi"))
        return gpus
    return []


def onnxruntime_providers() -> tuple[str, ...] | None:
    """The execution providers onnxruntime offers; None when it cannot be loaded."""
    try:
        from .ort import available_providers
        return tuple(available_providers())
    except Exception:  # a broken onnxruntime install must not break detection
        return None


def _isas() -> tuple[str, ...] | None:
    try:
        from . import cpu
        return tuple(cpu.available_isas())
    except Exception:  # extension not built: unknown, not an error here
        return None


def cuda_library() -> str | None:
    """a2r_edge's CUDA library as "a2r_edge/<file name>" when it is built (a profile names no
    folder of the machine that wrote it: profiles are shared); None otherwise."""
    from . import cuda
    path = cuda.library_path()
    return f"{path.parent.name}/{path.name}" if path.exists() else None


def detect_hardware(*, proc_root: str = "/proc", sys_root: str = "/sys",
                    cgroup_root: str = "/sys/fs/cgroup", etc_root: str = "/etc",
                    allowed_cpus: set[int] | None = None, nvidia_smi: str | None = "auto",
                    isas: tuple[str, ...] | None | str = "auto",
                    machine: str | None = None, onnxruntime: bool = True) -> HardwareProfile:
    """The ``HardwareProfile`` of this machine. Never raises on an unusual machine: what cannot
    be read is None. The roots, the allowed CPU set, the nvidia-smi path ("auto": search PATH;
    None: do not run it) and the ISA levels are parameters so tests can feed fake trees.
    onnxruntime=False: do not load onnxruntime (about 20 MiB) to ask for its providers
    (``onnxruntime_cuda`` is then False), for callers that need only the CPU side.

    >>> hw = detect_hardware()
    >>> hw.physical_cores, hw.caches.get("L2")
    """
    real = proc_root == "/proc"
    if allowed_cpus is None and real:
        allowed_cpus = _affinity()
    cpuinfo = _read(os.path.join(proc_root, "cpuinfo"))
    cores = physical_cores_of(os.path.join(proc_root, "cpuinfo"), allowed_cpus)
    quota = cgroup_cpu_quota(cgroup_root)
    threads = threads_for(cores or (len(allowed_cpus) if allowed_cpus else 1), quota)
    total, available = _meminfo(proc_root)
    board = _read(os.path.join(proc_root, "device-tree", "model")) or None
    tegra = _read(os.path.join(etc_root, "nv_tegra_release"))
    jetson = (tegra.splitlines()[0].strip() if tegra else None) or (
        board if board and "jetson" in board.lower() else None)
    if nvidia_smi == "auto":
        nvidia_smi = shutil.which("nvidia-smi") if real else None
    gpus = _nvidia_smi(nvidia_smi)
    if not gpus and jetson:
        # Jetson GPUs share the system memory and have no nvidia-smi query.
        gpus = [GpuInfo(name=board, memory_bytes=None, compute_capability=None,
                        source="jetson")]
    providers = onnxruntime_providers() if onnxruntime else None
    return HardwareProfile(
        cpu_model=_cpuinfo_model(cpuinfo) or board,
        architecture=machine if machine is not None else (platform.machine() or None),
        isas=_isas() if isas == "auto" else isas,
        physical_cores=cores,
        logical_cpus=len(allowed_cpus) if allowed_cpus else None,
        caches=cache_sizes(sys_root),
        memory_total_bytes=total,
        memory_available_bytes=available,
        cgroup_memory_limit_bytes=cgroup_memory_limit(cgroup_root),
        cgroup_cpu_quota=quota,
        default_threads=threads,
        gpus=tuple(gpus),
        onnxruntime_providers=providers,
        onnxruntime_cuda=bool(providers and "CUDAExecutionProvider" in providers),
        cuda_library=cuda_library(),
        board=board,
        jetson=jetson,
    )


# --- where measured figures are kept ----------------------------------------------------------------

def cache_dir() -> str:
    """A2R_CACHE_DIR, else $XDG_CACHE_HOME/a2r_edge, else ~/.cache/a2r_edge (not created here)."""
    from .. import _settings
    configured = _settings.get("A2R_CACHE_DIR")
    if configured:
        return configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "a2r_edge")


def machine_key() -> str:
    """This machine's ``HardwareProfile.machine_key()``, read without nvidia-smi or onnxruntime."""
    return detect_hardware(nvidia_smi=None, onnxruntime=False).machine_key()


def profile_path(hw: HardwareProfile | None = None) -> str:
    """Where ``python -m a2r_edge.bench --save-profile`` keeps this machine's profile."""
    key = hw.machine_key() if hw is not None else machine_key()
    return os.path.join(cache_dir(), f"profile-{key}.json")


def profile_is_explicit() -> bool:
    """True when A2R_PROFILE names the profile (an error in it is the user's to fix)."""
    from .. import _settings
    return bool(_settings.get("A2R_PROFILE"))


def profile_source() -> str:
    """The file ``load_profile()`` reads: A2R_PROFILE, else this machine's cached profile."""
    from .. import _settings
    return _settings.get("A2R_PROFILE") or profile_path()


def load_profile(path: str | None = None) -> dict | None:
    """The profile JSON at ``path``; else A2R_PROFILE; else this machine's cached profile; None
    when there is none. A file named explicitly (argument or A2R_PROFILE) that cannot be read is
    a ValueError naming it; a damaged cache file is ignored."""
    from .. import _settings
    explicit = path or _settings.get("A2R_PROFILE")
    candidate = explicit or profile_path()
    try:
        with open(candidate) as f:
            data = json.load(f)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return data
    except FileNotFoundError:
        if explicit:
            raise ValueError(f"hardware profile {candidate!r} does not exist") from None
        return None
    except (OSError, ValueError, RecursionError) as exc:
        if explicit:
            raise ValueError(f"hardware profile {candidate!r} cannot be read: {exc}") from None
        return None
