"""Build of a2r_edge's native layer.

One extension, ``a2r_edge._kernels``, made of:
  - cpu_ops/_kernels.pyx             thin Cython wrappers (GIL released around every call);
  - cpu_ops/src/runtime.c, dispatch.c   compiled once with baseline flags;
  - cpu_ops/src/<op>/kernel.c        compiled once per ISA level with that level's flags,
                                     -DA2R_ISA=<level> and -DA2R_OP=<op>.
The kernels and their levels are listed once, in cpu_ops/include/a2r_kernel_list.h.
The ISA levels are fixed by the target architecture, never by the CPU of the build machine: the
wheel must run on any x86-64 (or aarch64) CPU and picks the best variant at import.
OpenMP is used when a compile + link + run probe passes; otherwise every kernel runs serially.
The kernels compile in parallel (one job a CPU), and a library already built in the source tree
with the same inputs is reused (BuildNative._reuse_in_tree_build), so a second install is quick.

Optionally also the CUDA library ``a2r_edge/_a2r_cuda.so`` (cuda_ops/*.cu, loaded with ctypes by
a2r_edge/runtime/cuda.py), compiled by nvcc after the extension; A2R_WITH_CUDA=auto (default:
when nvcc is on PATH or under CUDA_HOME and the NVIDIA driver shows a GPU; a failure only warns),
1 (required: fail without it) or 0 (never). The GPU check decides only whether the optional GPU
library is worth its minutes of nvcc time; what it compiles does not depend on it. Fixed
architectures (never the build machine's GPU): SASS for sm_75 sm_80 sm_86 sm_89
sm_90 plus PTX compute_90, which newer GPUs JIT-compile.
"""
import glob
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy
import Cython
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

INCLUDE = os.path.join("cpu_ops", "include")
COMMON = os.path.join("cpu_ops", "src", "common")  # headers shared by several ops' kernels
KERNEL_LIST = os.path.join(INCLUDE, "a2r_kernel_list.h")
IS_X86_64 = platform.machine().lower() in ("x86_64", "amd64")
IS_AARCH64 = platform.machine().lower() in ("aarch64", "arm64")

COMMON_CFLAGS = [
    "-O3",
    "-std=gnu11",
    "-fno-math-errno",        # lets sqrtf and friends inline as vector instructions
    # no FP exception flags are read: a select between a product and another value (leaky
    # relu) may then compute both without masked stores, so the AVX2 epilogues vectorise (int8
    # 3 -> 16 conv at 512^2, avx2: 70% of its time in a scalar epilogue loop, perf)
    "-fno-trapping-math",
    "-ffp-contract=off",      # only A2R_MADD fuses: integer outputs stay bit-exact across ISAs
    "-Werror=implicit-function-declaration",
    "-Wall",
    "-Wno-unknown-pragmas",   # OpenMP pragmas are ignored when the probe fails
]

# Per-ISA flags. The 512-bit width is asked for explicitly: some GCC tunings prefer 256 bits.
ISA_FLAGS = {"baseline": []}
if IS_X86_64:
    ISA_FLAGS["avx2"] = ["-mavx2", "-mfma", "-mf16c"]
    ISA_FLAGS["avx512"] = ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq",
                           "-mavx2", "-mfma", "-mf16c", "-mprefer-vector-width=512"]
    # the dot products of conv2d_lowp (vdpbf16ps, vpdpbusd); the other ops' AVX-512 bodies
    ISA_FLAGS["avx512_bf16"] = ISA_FLAGS["avx512"] + ["-mavx512bf16", "-mavx512vnni"]
    # + the AMX tile unit (conv2d_lowp's tdpbsud / tdpbf16ps); the other ops' AVX-512 bodies
    ISA_FLAGS["avx512_amx"] = ISA_FLAGS["avx512_bf16"] + ["-mamx-tile", "-mamx-int8",
                                                          "-mamx-bf16"]
elif IS_AARCH64:
    # the dot products of conv2d_lowp (sdot); every aarch64 CPU that has them is Armv8.2 or later
    ISA_FLAGS["neon_dot"] = ["-march=armv8.2-a+dotprod"]


def _listed_kernels():
    """(ISA level names, op folder names) as cpu_ops/include/a2r_kernel_list.h lists them."""
    with open(KERNEL_LIST) as f:
        text = f.read()
    x86 = text.index("#ifdef A2R_X86_VARIANTS")
    arm = text.index("#elif defined(A2R_AARCH64_VARIANTS)", x86)
    other = text.index("#else", arm)
    block = (text[x86:arm] if IS_X86_64 else text[arm:other] if IS_AARCH64 else
             text[other:text.index("#endif", other)])
    levels = re.findall(r"L\(a, (\w+), A2R_ISA_\w+\)", block)
    kernel_list = text[text.index("#define A2R_KERNEL_LIST("):]
    ops = re.findall(r"A2R_OPS_(\w+)\(K, a\)", kernel_list.split("\n\n")[0])
    return levels, ops


def _check_kernel_list(kernel_files):
    """Refuse to build when the ISA levels or op folders differ from a2r_kernel_list.h: a level
    or op missing on either side would otherwise only show as an undefined symbol at import."""
    levels, ops = _listed_kernels()
    folders = [os.path.basename(os.path.dirname(k)) for k in kernel_files]
    if levels != list(ISA_FLAGS):
        raise SystemExit(f"a2r_edge: setup.py ISA levels {list(ISA_FLAGS)} differ from "
                         f"{KERNEL_LIST}'s A2R_ISA_LEVELS {levels}")
    if sorted(ops) != sorted(folders):
        raise SystemExit(f"a2r_edge: op folders with a kernel.c {sorted(folders)} differ from "
                         f"{KERNEL_LIST}'s A2R_KERNEL_LIST {sorted(ops)}")


def _probe_openmp(compiler_cmd):
    """Return the OpenMP flag if a test program compiles, links and runs with it, else None."""
    if os.environ.get("A2R_WITH_OPENMP", "auto").strip().lower() == "0":
        return None
    src = "#include <omp.h>\n#include <stdio.h>\nint main(void){int n=0;\n" \
          "#pragma omp parallel reduction(+:n)\nn+=1;\nprintf(\"%d\\n\", n>0);return 0;}\n"
    with tempfile.TemporaryDirectory() as tmp:
        c_file, exe = os.path.join(tmp, "probe.c"), os.path.join(tmp, "probe")
        with open(c_file, "w") as f:
            f.write(src)
        try:
            subprocess.run(compiler_cmd + ["-fopenmp", c_file, "-o", exe],
                           check=True, capture_output=True, timeout=120)
            out = subprocess.run([exe], check=True, capture_output=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            return None
    return "-fopenmp" if out.strip() == b"1" else None


CUDA_SOURCES = sorted(glob.glob(os.path.join("cuda_ops", "*.cu")))
CUDA_DEPENDS = CUDA_SOURCES + sorted(glob.glob(os.path.join("cuda_ops", "*.h")) +
                                     glob.glob(os.path.join("cuda_ops", "*.cuh")))
CUDA_ARCHS = ["75", "80", "86", "89", "90"]  # Turing .. Hopper; PTX of the last for newer GPUs
CUDA_FLAGS = [
    "-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-Xcompiler", "-Wall",
    "-fmad=false",        # no implicit FMA contraction, as the CPU build's -ffp-contract=off
    "-cudart", "static",  # the library then needs only the driver (libcuda) at run time
    "-Wno-deprecated-gpu-targets",
    "--threads", "0",     # compile the architectures in parallel
]


def _find_nvcc():
    """nvcc on PATH, else under CUDA_HOME / CUDA_PATH; None when absent."""
    found = shutil.which("nvcc")
    if found:
        return found
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and os.path.isfile(os.path.join(root, "bin", "nvcc")):
            return os.path.join(root, "bin", "nvcc")
    return None


def _driver_sees_a_gpu():
    """True when the NVIDIA driver lists at least one GPU (its /proc entries, else nvidia-smi)."""
    gpus = "/proc/driver/nvidia/gpus"
    if os.path.isdir(gpus) and os.listdir(gpus):
        return True
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def build_cuda_library(package_dir):
    """Compile cuda_ops/*.cu into package_dir/_a2r_cuda.so per A2R_WITH_CUDA (auto|0|1).

    Returns the library path or None. With auto, no GPU, a missing nvcc or a failed build prints
    one line and the package stays CPU-only; with 1 nvcc is required and a failed build is an
    error. Skipped when up to date."""
    mode = os.environ.get("A2R_WITH_CUDA", "auto").strip().lower() or "auto"
    if mode not in ("auto", "0", "1"):
        raise SystemExit(f"A2R_WITH_CUDA={mode!r} is invalid: must be one of auto, 0, 1")
    if mode == "0":
        print("a2r_edge: CUDA library off (A2R_WITH_CUDA=0)")
        return None
    if mode == "auto" and not _driver_sees_a_gpu():
        print("a2r_edge: CUDA library not built (no NVIDIA GPU seen by the driver; "
              "A2R_WITH_CUDA=1 builds it anyway); CPU only")
        return None
    nvcc = _find_nvcc()
    if nvcc is None:
        if mode == "1":
            raise SystemExit("a2r_edge: A2R_WITH_CUDA=1 but nvcc is not on PATH nor under "
                             "CUDA_HOME/CUDA_PATH")
        print("a2r_edge: CUDA library not built (no nvcc on PATH or under CUDA_HOME); CPU only")
        return None
    target = os.path.join(package_dir, "_a2r_cuda.so")
    if os.path.exists(target) and all(os.path.getmtime(target) >= os.path.getmtime(f)
                                      for f in CUDA_DEPENDS + [__file__]):
        print(f"a2r_edge: CUDA library up to date ({target})")
        return target
    gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in CUDA_ARCHS]
    gencode.append(f"-gencode=arch=compute_{CUDA_ARCHS[-1]},code=compute_{CUDA_ARCHS[-1]}")
    os.makedirs(package_dir, exist_ok=True)
    tmp = target + ".tmp"
    cmd = [nvcc] + CUDA_FLAGS + gencode + ["-Icuda_ops"] + CUDA_SOURCES + ["-o", tmp]
    print("a2r_edge: building the CUDA library: " + " ".join(cmd))
    try:
        subprocess.run(cmd, check=True)
        os.replace(tmp, target)  # atomic: a failed build never leaves a half-written library
    except (OSError, subprocess.CalledProcessError) as exc:
        if os.path.exists(tmp):
            os.remove(tmp)
        if mode == "1":
            raise SystemExit(f"a2r_edge: CUDA library build failed: {exc}")
        print(f"a2r_edge: WARNING: CUDA library build failed ({exc}); the package is CPU only")
        return None
    return target


# The key and the library digest of the last kernel build: pip builds an editable install in a fresh
# temporary folder each time, so without this the test command after the install command would
# compile everything again. Lives in build/ (not packaged, ignored by git).
BUILD_STAMP = os.path.join("build", "a2r_kernels.stamp.json")


def _build_key(compiler, extra, macros):
    """What the kernel build depends on besides its source files: the compiler command lines
    (CC, CFLAGS, LDFLAGS included), the flags of every level, OpenMP, numpy's and Cython's versions
    (not their paths: pip builds in a fresh isolated environment each time)."""
    parts = [compiler.compiler_so, compiler.linker_so, extra, ISA_FLAGS, macros, numpy.__version__,
             Cython.__version__]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _is_current(library, key, inputs):
    """True when BUILD_STAMP names this key and this library's bytes, and no input is newer."""
    try:
        with open(BUILD_STAMP) as f:
            stamp = json.load(f)
        newest_input = max(os.path.getmtime(p) for p in inputs)
        return (isinstance(stamp, dict) and stamp.get("key") == key
                and os.path.getmtime(library) >= newest_input
                and stamp.get("sha256") == _digest(library))
    except (OSError, ValueError):
        return False


class BuildNative(build_ext):
    """build_ext that first compiles every op's kernel.c once per ISA level (in parallel, one job a
    CPU), and afterwards the optional CUDA library (build_cuda_library). A kernel library already
    in the source tree is reused when it is newer than every input and was built with the same key
    (_build_key): then an editable install after a build, or a second install, compiles nothing."""

    def run(self):
        super().run()
        package_dir = "a2r_edge" if self.inplace else os.path.join(self.build_lib, "a2r_edge")
        build_cuda_library(package_dir)

    def build_extension(self, ext):
        cc = self.compiler.compiler_so[:1] or [sysconfig.get_config_var("CC") or "cc"]
        omp = _probe_openmp(cc)
        print(f"a2r_edge: OpenMP {'on' if omp else 'off (kernels run serially)'}; "
              f"ISA levels: {', '.join(ISA_FLAGS)}")
        extra = COMMON_CFLAGS + ([omp] if omp else [])
        macros = ([("A2R_X86_VARIANTS", "1")] if IS_X86_64 else
                  [("A2R_AARCH64_VARIANTS", "1")] if IS_AARCH64 else [])
        kernels = sorted(glob.glob(os.path.join("cpu_ops", "src", "*", "kernel.c")))
        _check_kernel_list(kernels)
        key = _build_key(self.compiler, extra, macros)
        # the .pyx, not the .c that cythonize makes from it: in pip's fresh build environment
        # Cython's own .pxd files are new, so it writes the .c again on every install
        inputs = KERNELS_SOURCES + list(ext.depends) + kernels + [__file__]
        if self._reuse_in_tree_build(ext, key, inputs):
            return

        def compile_kernel(job):
            isa, kernel = job  # one call per op: each gets its own -DA2R_OP
            op = os.path.basename(os.path.dirname(kernel))
            return self.compiler.compile(
                [kernel],
                output_dir=os.path.join(self.build_temp, "isa_" + isa),
                macros=macros + [("A2R_ISA", isa), ("A2R_OP", op)],
                include_dirs=[INCLUDE, COMMON],
                # a function named by A2R_KERNEL() that the list does not declare
                extra_postargs=extra + ISA_FLAGS[isa] + ["-Werror=missing-prototypes"],
                debug=self.debug,
            )

        jobs = [(isa, kernel) for isa in ISA_FLAGS for kernel in kernels]
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            objects = [obj for objs in pool.map(compile_kernel, jobs) for obj in objs]
        ext.extra_objects = objects + list(ext.extra_objects or [])
        ext.define_macros = list(ext.define_macros or []) + macros
        ext.extra_compile_args = list(ext.extra_compile_args or []) + extra
        ext.extra_link_args = list(ext.extra_link_args or []) + ([omp] if omp else [])
        super().build_extension(ext)
        os.makedirs(os.path.dirname(BUILD_STAMP), exist_ok=True)
        with open(BUILD_STAMP, "w") as f:
            json.dump({"key": key, "sha256": _digest(self.get_ext_fullpath(ext.name))}, f)

    def _reuse_in_tree_build(self, ext, key, inputs):
        """Copy the in-tree library to the build's target and return True when it is current."""
        in_tree = self.get_ext_filename(ext.name)  # relative to the source root, where pip runs us
        if self.force or not _is_current(in_tree, key, inputs):
            return False
        target = self.get_ext_fullpath(ext.name)
        if os.path.abspath(target) != os.path.abspath(in_tree):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(in_tree, target)
        print(f"a2r_edge: kernels up to date, reused {in_tree} (delete it or pass --force to rebuild)")
        return True


KERNELS_SOURCES = ["cpu_ops/_kernels.pyx", "cpu_ops/src/runtime.c", "cpu_ops/src/dispatch.c"]
kernels_ext = Extension(
    "a2r_edge._kernels",
    sources=KERNELS_SOURCES,
    include_dirs=[INCLUDE, numpy.get_include()],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    depends=glob.glob(os.path.join(INCLUDE, "*.h"))
    + glob.glob(os.path.join("cpu_ops", "src", "*", "*.[ch]"))
    + glob.glob(os.path.join("cpu_ops", "src", "*.c")),
)

setup(
    ext_modules=cythonize(
        [kernels_ext],
        compiler_directives={"language_level": "3", "boundscheck": False,
                             "wraparound": False, "initializedcheck": False,
                             "cdivision": True},
    ),
    cmdclass={"build_ext": BuildNative},
)
