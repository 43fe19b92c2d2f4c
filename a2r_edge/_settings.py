"""Every ``A2R_*`` environment setting, declared once, typed and documented.

Read a value with ``get("A2R_NUM_THREADS")``; ``describe()`` lists them all with their current
values (``python -m a2r_edge info`` prints it). Nothing else in the package reads ``os.environ``
for an ``A2R_*`` name. A malformed value raises ``ValueError`` naming the variable.
"""
from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass
from typing import Any, Callable

# The CPU kernel levels of this architecture, lowest first: the list the build compiles
# (cpu_ops/include/a2r_kernel_list.h, A2R_ISA_LEVELS), in the same order.
_X86_LEVELS = ("baseline", "avx2", "avx512", "avx512_bf16", "avx512_amx")
_AARCH64_LEVELS = ("baseline", "neon_dot")
ISA_LEVELS = {"x86_64": _X86_LEVELS, "amd64": _X86_LEVELS, "aarch64": _AARCH64_LEVELS,
              "arm64": _AARCH64_LEVELS}.get(platform.machine().lower(), ("baseline",))


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("must be >= 1")
    return value


def max_threads() -> int:
    """The most kernel threads accepted: 4x the CPUs this machine has. More only adds
    oversubscription, and a count like 100000 makes OpenMP fail to create its pool."""
    return 4 * (os.cpu_count() or 1)


def _thread_count(text: str) -> int:
    value = _positive_int(text)
    if value > max_threads():
        raise ValueError(f"must be at most {max_threads()} (4x the {os.cpu_count() or 1} CPUs "
                         f"of this machine)")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError("must be >= 0")
    return value


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return value
    return parse


class MemoryLimitError(ValueError, MemoryError):
    """Something needs more than A2R_MEMORY_MB (a plan's arena or tensor, a convolution's
    scratch): smaller pieces (tiles, a smaller calibration picture) may fit where this size
    does not. A MemoryError too, for callers that catch those; never the machine's own memory
    running out."""


@dataclass(frozen=True)
class Setting:
    name: str
    parse: Callable[[str], Any]
    default: Any
    doc: str
    when: str = "run time"  # or "build time": read by setup.py, listed here for the report


SETTINGS = {s.name: s for s in (
    Setting("A2R_MAX_ISA", _choice(*ISA_LEVELS), None,
            "Highest CPU kernel level to use (x86-64: baseline, avx2, avx512, avx512_bf16: "
            "AVX-512 with the BF16 and VNNI dot products, avx512_amx: and the AMX tile unit; "
            "aarch64: baseline (NEON), neon_dot: and the Armv8.2 dot products); default: the "
            "best this CPU and OS support."),
    Setting("A2R_NUM_THREADS", _thread_count, None,
            "Threads for the native CPU kernels (1 .. 4x the CPUs); default: physical cores "
            "within the affinity mask and the cgroup CPU quota."),
    Setting("A2R_CACHE_DIR", str, None,
            "Folder for per-machine measurements (bench --save-profile, the scheduler's "
            "calibration); default: $XDG_CACHE_HOME/a2r_edge or ~/.cache/a2r_edge."),
    Setting("A2R_PROFILE", str, None,
            "Hardware profile JSON (profiles/schema.json) the scheduler uses instead of the "
            "cached one for this machine."),
    Setting("A2R_CACHE_MB", _non_negative_int, 64,
            "Bytes (MiB) of converted pictures the Engine keeps for repeated inputs (LRU, "
            "convert and convert_batch); 0 turns the cache off. 64: a few dozen 1080p results."),
    Setting("A2R_MEMORY_MB", _positive_int, 1024,
            "Memory (MiB) one picture may use in the network before the Engine converts it in "
            "tiles; 1024 fits 4 GB edge boards beside the OS and the camera stack."),
    Setting("A2R_MAX_PIXELS", _positive_int, 1 << 28,
            "Largest picture (input pixels, H x W) the Engine accepts; larger ones raise "
            "ValueError before anything is allocated. 2^28 = 16384 x 16384, the same order as "
            "OpenCV's decoder limit CV_IO_MAX_IMAGE_PIXELS (2^30)."),
    Setting("A2R_WITH_OPENMP", _choice("auto", "0"), "auto",
            "Build with OpenMP when the compile+link+run probe passes (auto) or never (0).",
            when="build time"),
    Setting("A2R_WITH_CUDA", _choice("auto", "0", "1"), "auto",
            "Build the CUDA library a2r_edge/_a2r_cuda.so with nvcc: auto (when nvcc is on PATH "
            "or under CUDA_HOME and the NVIDIA driver shows a GPU; a failed build only warns), "
            "1 (required: fail without nvcc), 0 (never).", when="build time"),
    Setting("A2R_CUDA_FAULT", _choice("none", "oom"), "none",
            "Fault injection for tests: oom makes every device and pinned host allocation of the "
            "CUDA library fail with its out-of-memory status (read by the library itself)."),
)}


def get(name: str) -> Any:
    """The parsed value of setting ``name`` (its default when unset or empty)."""
    setting = SETTINGS[name]
    text = os.environ.get(name, "").strip()
    if not text:
        return setting.default
    try:
        return setting.parse(text)
    except ValueError as exc:
        raise ValueError(f"{name}={text!r} is invalid: {exc}") from None


def export_opencv_limit() -> None:
    """Sets OpenCV's decoder limit (OPENCV_IO_MAX_IMAGE_PIXELS) to A2R_MAX_PIXELS unless the
    user set it, so that OpenCV refuses a picture whose header lies about its size before
    allocating for it. OpenCV reads the variable once, when cv2 loads: a2r_edge calls this at
    import, so it holds wherever a2r_edge is imported before cv2 (the command line always is)."""
    if "cv2" in sys.modules:
        return
    try:
        limit = get("A2R_MAX_PIXELS")
    except ValueError:  # reported where the setting is read
        return
    os.environ.setdefault("OPENCV_IO_MAX_IMAGE_PIXELS", str(limit))


def export_openmp_waits() -> None:
    """OpenMP threads sleep between kernels unless the user set the policy or the spin count:
    OMP_WAIT_POLICY=PASSIVE after GOMP_SPINCOUNT spins. A spinning pool doubles the time of
    stages that alternate with onnxruntime's pool; sleeping at once costs a futex wake-up per
    kernel (50-90 us on a 2-vCPU VM). So libgomp first spins about as long as a wake-up costs,
    then sleeps: kernels back to back find their threads awake, an idle pool sleeps soon.
    The count is PAUSE instructions, whose length differs by CPU: 2000 was ~50 us on Zen 4 but
    too short on a Sapphire Rapids core (the pix2pix fixture, 19 small steps, on 2 threads:
    1.36 / 4.70 ms at 256^2 / 512^2 with 2000, 1.22 / 3.80 with 10000; GOMP_SPINCOUNT=2000
    python -m pytest -s -c benchmarks/pytest.ini benchmarks/bench_generators.py -k "pix2pix
    and 2thr", and without it), and bench_interference's chain (onnxruntime and OpenMP taking
    turns) is the same at both: 10000.
    libgomp reads both once, when it loads (with the kernels): a2r_edge calls this at import,
    before any of its modules can load them."""
    if os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE").upper() == "PASSIVE":
        os.environ.setdefault("GOMP_SPINCOUNT", "10000")


def check_all() -> None:
    """Parse every run-time setting once: the command line calls this at start, so a
    malformed value is one line before any work, not one per picture. ValueError for the first
    malformed one."""
    for name, setting in SETTINGS.items():
        if setting.when == "run time":
            get(name)


def describe() -> list[tuple[str, str, str]]:
    """(name, current value or '<unset>', doc) for every setting."""
    rows = []
    for name, setting in SETTINGS.items():
        raw = os.environ.get(name)
        value = raw if raw not in (None, "") else "<unset>"
        rows.append((name, value, f"[{setting.when}] {setting.doc}"))
    return rows
