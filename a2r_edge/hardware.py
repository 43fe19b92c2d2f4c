"""What this machine offers: CPU cores within the limits the process runs under.

Every probe degrades to a safe answer on an unusual machine (missing /proc, /sys, containers)
instead of failing.
"""
from __future__ import annotations

import math
import os


def _allowed_cpus() -> set[int]:
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
    allowed = _allowed_cpus()
    cores, cpu, package = set(), None, "0"
    try:
        with open(cpuinfo) as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "processor":
                    cpu = int(value)
                elif key == "physical id":
                    package = value
                elif key == "core id" and cpu in allowed:
                    cores.add((package, value))
    except (OSError, ValueError):
        cores = set()
    return len(cores) or len(allowed) or 1


def default_threads() -> int:
    """Physical cores, capped by the cgroup quota (rounded up: 1.5 CPUs still use 2 threads)."""
    n = physical_cores()
    quota = cgroup_cpu_quota()
    if quota is not None:
        n = min(n, max(1, math.ceil(quota)))
    return max(1, n)
