"""How many threads the CPU kernels may use: physical cores within the process's affinity mask,
capped by the cgroup CPU quota (``default_threads``); the caches' sizes; and numpy's BLAS held
to one thread inside a plan's products (``blas_on_one_thread``). Pure Python, no native code:
the CPU kernels' loader (cpu.py) sizes its thread pool with it before the extension loads.
"""
from __future__ import annotations

import math
import os
import re
import threading


def allowed_cpus() -> set[int]:
    """The CPUs this process may run on (its affinity mask)."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def cgroup_cpu_quota(root: str = "/sys/fs/cgroup") -> float | None:
    """CPUs granted by the cgroup quota (v2 cpu.max or v1 cfs files); None when unlimited."""
    try:
        with open(os.path.join(root, "cpu.max")) as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            return int(quota) / int(period)
        return None
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(root, "cpu", "cpu.cfs_quota_us")) as f:
            quota = int(f.read())
        with open(os.path.join(root, "cpu", "cpu.cfs_period_us")) as f:
            period = int(f.read())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def physical_cores(cpuinfo: str = "/proc/cpuinfo") -> int:
    """Physical cores among the CPUs this process may run on (SMT siblings counted once)."""
    allowed = allowed_cpus()
    return physical_cores_of(cpuinfo, allowed) or len(allowed) or 1


def threads_for(cores: int, quota: float | None) -> int:
    """Cores capped by a cgroup CPU quota (rounded up: 1.5 CPUs still use 2 threads)."""
    if quota is not None:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)


def default_threads() -> int:
    """Physical cores within the affinity mask, capped by the cgroup quota."""
    return threads_for(physical_cores(), cgroup_cpu_quota())


def physical_cores_of(cpuinfo: str, allowed: set[int] | None) -> int | None:
    """Physical cores listed in the cpuinfo file at ``cpuinfo`` among the CPUs ``allowed`` (None:
    all); None when the file cannot be read or parsed."""
    try:
        with open(cpuinfo, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        text = ""
    cores, cpu, package, processors = set(), None, "0", 0
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        try:
            if key == "processor":
                cpu, package = int(value), "0"
                processors += 1
            elif key == "physical id":
                package = value
            elif key == "core id" and (allowed is None or cpu in allowed):
                cores.add((package, value))
        except ValueError:
            return None
    if cores:
        return len(cores)
    # no "core id" lines (many ARM kernels): count the processors, SMT unknown
    if allowed is not None and processors:
        return len(allowed)
    return processors or None


def read_text(path: str) -> str | None:
    """The text of a small system file (procfs, sysfs, device tree: NULs dropped), stripped;
    None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace").replace("\x00", "").strip()
    except OSError:
        return None


def size_bytes(text: str | None) -> int | None:
    """'32K', '1024K', '32M', '1048576' -> bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text or "", re.I)
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]


def cache_sizes(sys_root: str = "/sys") -> dict | None:
    """Sizes in bytes of cpu0's caches by name ("L1d", "L1i", "L2", "L3"), from Linux's sysfs;
    None where it cannot be read."""
    base = os.path.join(sys_root, "devices", "system", "cpu", "cpu0", "cache")

    def read(entry: str, name: str) -> str | None:
        return read_text(os.path.join(base, entry, name))

    try:
        entries = sorted(e for e in os.listdir(base) if e.startswith("index"))
    except OSError:
        return None
    caches = {}
    for e in entries:
        level, kind, size = read(e, "level"), read(e, "type"), size_bytes(read(e, "size"))
        if not level or size is None:
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind or "", "")
        caches[f"L{level}{suffix}"] = size
    return caches or None


# A product with at least this many multiply-adds may run on several of numpy's BLAS threads
# (OpenBLAS splits from a few 10^5); below it runs on the calling thread, and is left alone.
BLAS_THREADED_MACS = 1 << 18

# numpy's BLAS held at one thread while any plan step needs it (threads of the process share
# the setting): threadpoolctl's controller, the limit in force, and how many steps are inside
_blas = {"controller": None, "limit": None, "inside": 0}
_blas_lock = threading.Lock()


def blas_on_one_thread(fn, macs: int):
    """``fn`` (a numpy product of ``macs`` multiply-adds, a plan's step) run with numpy's BLAS
    limited to one thread, as it was once no step is inside. A BLAS call on its own threads
    leaves them spinning after it returns (OpenBLAS: for about 0.1 s), holding the cores the
    plan's native kernels run on next: a 2-thread plan with a fp32 MatMul between convolutions
    (64 channels at 128^2) timed its steps' 2-thread samples 2-5x slower and kept 4 of 6 steps
    at 1 thread; that plan with the limit, beside itself without (`python -m pytest -q -s -c
    benchmarks/pytest.ini benchmarks/bench_executor.py -k blas`, four runs): 1.09-1.42x on 2
    threads, 0.88-1.18x on 1 (noise: the second core is free there). The first step in sets
    the limit and the last one out lifts it (steps of plans in other threads overlap). Measured on plans run from the main thread: numpy's
    OpenBLAS 0.3.31 does not report a limit set from another thread as in force (whether it
    applies there was not measured). It costs about 11 us a call, so products below
    BLAS_THREADED_MACS, which BLAS runs on the calling thread anyway, are returned as they
    are."""
    if macs < BLAS_THREADED_MACS:
        return fn
    from threadpoolctl import ThreadpoolController   # (a dependency: fails here, not mid-run)

    def one_thread():
        with _blas_lock:
            if _blas["inside"] == 0:
                if _blas["controller"] is None:
                    _blas["controller"] = ThreadpoolController()
                _blas["limit"] = _blas["controller"].limit(limits=1, user_api="blas")
            _blas["inside"] += 1
        try:
            fn()
        finally:
            with _blas_lock:
                _blas["inside"] -= 1
                if _blas["inside"] == 0:
                    _blas["limit"].restore_original_limits()
    return one_thread
