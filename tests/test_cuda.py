"""The CUDA library (cuda_ops/, a2r_edge/runtime/cuda.py).

Part 1 runs on any machine: the library is built where nvcc exists, exports exactly the header's
symbols, has the loader's ABI version, and the loader explains what is missing (no library, stale
library, no driver, no device) at the first GPU call; argument checks and fault injection work
without a device. Part 2 (``@pytest.mark.gpu``) needs a GPU and skips cleanly without one: every
kernel against the numpy reference (or the CPU op where the contract is bit-exact or cv2-exact).
"""
import ctypes
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from a2r_edge import _settings, ops
from a2r_edge.model import reference as ref
from a2r_edge.runtime import cuda
from tolerances import ELEMENTWISE, FILTER, REDUCTION

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "cuda_ops" / "a2r_cuda.h"
NVCC = shutil.which("nvcc") or next(
    (str(Path(os.environ[v]) / "bin" / "nvcc") for v in ("CUDA_HOME", "CUDA_PATH")
     if os.environ.get(v) and (Path(os.environ[v]) / "bin" / "nvcc").is_file()), None)

needs_library = pytest.mark.skipif(
    not cuda.library_path().exists(),
    reason=f"CUDA library not built ({cuda.library_path()} missing: no nvcc at build time)")


def gpu_test(fn):
    """A test that needs a usable GPU: marked `gpu`, skipped (with the reason) without one."""
    skip = pytest.mark.skipif(not cuda.available(), reason=f"no GPU: {cuda.why_unavailable()}")
    return pytest.mark.gpu(skip(fn))


def header_symbols():
    return set(re.findall(r"^\S[^(]*?\b(a2r_cuda_\w+)\(", HEADER.read_text(), re.M))


@pytest.fixture
def fresh_probe():
    """Run a test against a re-probed loader, and re-probe afterwards."""
    cuda._reset_probe_for_tests()
    yield
    cuda._reset_probe_for_tests()


# --- part 1: any machine --------------------------------------------------------------------------

def test_library_built_when_nvcc_exists():
    if NVCC is None:
        pytest.skip("no nvcc in this environment: the package is CPU-only by design")
    if _settings.get("A2R_WITH_CUDA") == "0":
        pytest.skip("A2R_WITH_CUDA=0: the CUDA library is off by request")
    gpus = "/proc/driver/nvidia/gpus"
    if _settings.get("A2R_WITH_CUDA") == "auto" and not (os.path.isdir(gpus) and os.listdir(gpus)):
        pytest.skip("no GPU seen by the NVIDIA driver: A2R_WITH_CUDA=auto builds no CUDA library")
    assert cuda.library_path().exists(), \
        f"nvcc is at {NVCC} but {cuda.library_path()} was not built (see setup.py output)"


@needs_library
def test_exports_exactly_the_header_symbols():
    declared = header_symbols()
    assert declared == set(cuda.SIGNATURES), "header and loader SIGNATURES differ"
    nm = shutil.which("nm")
    if nm:
        out = subprocess.run([nm, "-D", "--defined-only", str(cuda.library_path())],
                             capture_output=True, text=True, check=True).stdout
        exported = set(re.findall(r"\bT (a2r_cuda_\w+)$", out, re.M))
        assert exported == declared
    lib = cuda.library()
    for name in declared:
        assert getattr(lib, name).restype is cuda.SIGNATURES[name][0]


@needs_library
def test_abi_version_matches():
    declared = int(re.search(r"#define A2R_CUDA_ABI_VERSION (\d+)", HEADER.read_text()).group(1))
    assert cuda.ABI_VERSION == declared
    assert cuda.library().a2r_cuda_abi_version() == declared


def test_import_never_fails_without_gpu():
    code = "import a2r_edge, a2r_edge.runtime.cuda as c; print(c.available())"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # hides any GPU: a "no device" machine
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_unavailable_here_says_why():
    if cuda.available():
        pytest.skip("a GPU is usable here")
    reason = cuda.why_unavailable()
    assert re.search(r"no CUDA library built|libcudart|driver|no CUDA device|stale", reason), reason


def test_first_gpu_call_raises_naming_what_is_missing():
    if cuda.available():
        pytest.skip("a GPU is usable here")
    x = np.ones(4, np.float32)
    for call in (lambda: cuda.silu(x), cuda.Context, lambda: cuda.DeviceBuffer(16),
                 cuda.mem_info):
        with pytest.raises(RuntimeError, match="GPU backend unavailable") as info:
            call()
        assert cuda.why_unavailable() in str(info.value)
        assert isinstance(info.value, cuda.CudaUnavailable)


def test_missing_library_reason(fresh_probe, monkeypatch, tmp_path):
    monkeypatch.setattr(cuda, "library_path", lambda: tmp_path / "_a2r_cuda.so")
    assert not cuda.available()
    assert cuda.why_unavailable().startswith("no CUDA library built")
    with pytest.raises(RuntimeError, match="no CUDA library built"):
        cuda.library()


def test_unloadable_library_reason(fresh_probe, monkeypatch, tmp_path):
    bad = tmp_path / "_a2r_cuda.so"
    bad.write_text("not a shared library")
    monkeypatch.setattr(cuda, "library_path", lambda: bad)
    assert not cuda.available()
    assert "could not be loaded" in cuda.why_unavailable()


@needs_library
def test_stale_library_is_refused(fresh_probe, monkeypatch):
    monkeypatch.setattr(cuda, "ABI_VERSION", cuda.ABI_VERSION + 1)
    assert not cuda.available()
    assert re.search(r"stale CUDA library .*ABI version \d+, this package expects \d+; rebuild",
                     cuda.why_unavailable())
    with pytest.raises(RuntimeError, match="stale CUDA library"):
        cuda.silu(np.ones(3, np.float32))


@needs_library
def test_missing_symbol_is_refused(fresh_probe, monkeypatch):
    sigs = dict(cuda.SIGNATURES, a2r_cuda_not_there=(ctypes.c_int, []))
    monkeypatch.setattr(cuda, "SIGNATURES", sigs)
    assert "symbol a2r_cuda_not_there is missing" in cuda.why_unavailable()


@needs_library
def test_fault_injection_oom_without_device(monkeypatch):
    lib = cuda.library()
    monkeypatch.setenv("A2R_CUDA_FAULT", "oom")
    for alloc in (lib.a2r_cuda_malloc, lib.a2r_cuda_host_alloc):
        ptr = ctypes.c_void_p(1234)
        status = alloc(ctypes.byref(ptr), 1 << 20)
        assert status == cuda.ENOMEM
        assert ptr.value is None
        with pytest.raises(cuda.CudaOutOfMemory, match="injected by A2R_CUDA_FAULT=oom") as info:
            cuda.check(status, lib)
        assert isinstance(info.value, MemoryError) and isinstance(info.value, RuntimeError)


@needs_library
def test_no_driver_maps_to_unavailable(monkeypatch):
    if cuda.available():
        pytest.skip("a GPU is usable here")
    monkeypatch.delenv("A2R_CUDA_FAULT", raising=False)
    lib = cuda.library()
    ptr = ctypes.c_void_p()
    status = lib.a2r_cuda_malloc(ctypes.byref(ptr), 16)
    assert status in (cuda.ENODRIVER, cuda.ENODEVICE)
    with pytest.raises(cuda.CudaUnavailable, match="cudaMalloc"):
        cuda.check(status, lib)


@needs_library
def test_argument_checks_without_device():
    lib = cuda.library()
    x = ctypes.c_void_p(0x1000)  # never dereferenced: the checks fail before any launch
    assert lib.a2r_cuda_silu(None, x, 4, None) == cuda.EINVAL
    assert "NULL" in cuda.last_error(lib)
    assert lib.a2r_cuda_silu(x, x, 0, None) == cuda.EINVAL
    assert lib.a2r_cuda_pixel_shuffle(x, 1, 1, 2, 2, 0, x, None) == cuda.EINVAL
    f3 = (ctypes.c_float * 3)(0.5, 0.5, 0.5)
    assert lib.a2r_cuda_postprocess(x, 4, -1, 1, f3, f3, x, None) == cuda.EINVAL
    need = lib.a2r_cuda_stats_workspace_bytes(6, 1000)
    assert need > 0
    assert lib.a2r_cuda_channel_stats(x, 6, 1000, 1e-5, x, x, x, need - 1, None) == cuda.EINVAL
    assert "workspace" in cuda.last_error(lib)
    assert lib.a2r_cuda_adain(x, 6, 1000, x, x, x, None, 1e-5, 0, x, x, need, None) == cuda.EINVAL
    assert lib.a2r_cuda_adain(x, 6, 1000, x, x, None, None, 1e-5, 7, x, x, need, None) \
        == cuda.EINVAL
    assert lib.a2r_cuda_guided_filter_workspace_bytes(3, 3, 10, 20) == 2 * 21 * 10 * 20 * 4
    assert lib.a2r_cuda_guided_filter_workspace_bytes(1, 2, 10, 20) == 2 * 6 * 10 * 20 * 4
    assert lib.a2r_cuda_guided_filter_workspace_bytes(2, 1, 10, 20) == -1
    assert lib.a2r_cuda_guided_filter(x, 2, x, 1, 4, 4, 1, 0.01, x, x, 1 << 20, None) \
        == cuda.EINVAL
    with pytest.raises(cuda.CudaError, match="invalid argument"):
        cuda.check(cuda.EINVAL, lib)


def test_fault_setting_is_validated(monkeypatch):
    monkeypatch.setenv("A2R_CUDA_FAULT", "sometimes")
    with pytest.raises(ValueError, match="A2R_CUDA_FAULT"):
        _settings.get("A2R_CUDA_FAULT")
    monkeypatch.setenv("A2R_WITH_CUDA", "yes")
    with pytest.raises(ValueError, match="A2R_WITH_CUDA"):
        _settings.get("A2R_WITH_CUDA")


# --- part 2: on a GPU -----------------------------------------------------------------------------

SIZES = [(1, 1), (1, 7), (7, 13), (17, 127), (13, 237), (1080, 1920)]


@pytest.fixture(scope="module")
def ctx():
    with cuda.Context() as c:
        yield c


@gpu_test
@pytest.mark.parametrize("h,w", SIZES)
def test_gpu_preprocess(ctx, rng, h, w):
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    np.testing.assert_allclose(ctx.preprocess(img, mean, std), ref.preprocess(img, mean, std),
                               **ELEMENTWISE)


def _special_floats(rng, shape):
    x = (rng.standard_normal(shape) * 1.2).astype(np.float32)
    flat = x.reshape(-1)
    specials = np.array([np.nan, np.inf, -np.inf, -1.0, 1.0, 0.0, -0.0,
                         # exact halves after (x*0.5+0.5)*255: 0.5/127.5 steps
                         (2 * 3 + 1) / 255 - 1, (2 * 100 + 1) / 255 - 1], np.float32)
    k = min(flat.size, specials.size)
    flat[:k] = specials[:k]
    return x


@gpu_test
@pytest.mark.parametrize("h,w", SIZES)
def test_gpu_postprocess_bit_exact(ctx, rng, h, w):
    x = _special_floats(rng, (1, 3, h, w))
    np.testing.assert_array_equal(ctx.postprocess(x), ops.postprocess(x))
    mean, std = (0.1, 0.2, 0.3), (0.9, 1.1, 0.7)
    np.testing.assert_array_equal(ctx.postprocess(x[0], mean, std), ops.postprocess(x, mean, std))


@gpu_test
@pytest.mark.parametrize("r", [2, 3])
@pytest.mark.parametrize("h,w", [(1, 1), (7, 13), (17, 127), (540, 960)])
def test_gpu_postprocess_folds_pixel_shuffle(ctx, rng, h, w, r):
    x = _special_floats(rng, (1, 3 * r * r, h, w))
    np.testing.assert_array_equal(ctx.postprocess(x, r=r), ops.postprocess(ref.pixel_shuffle(x, r)))


@gpu_test
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (1, 3, 7, 13), (2, 5, 17, 127), (1, 4, 237, 13),
                                   (1, 3, 1080, 1920),
                                   # ragged chunks and ragged 8-load batches; more planes than
                                   # one grid dimension holds
                                   (2, 3, 1, 24581), (1, 70000, 1, 3)])
def test_gpu_channel_stats(ctx, rng, shape):
    x = rng.standard_normal(shape).astype(np.float32) * 3 + 2
    for got, want in zip(ctx.channel_stats(x, 1e-5), ref.channel_stats(x, 1e-5)):
        np.testing.assert_allclose(got, want, **REDUCTION)


@gpu_test
def test_gpu_channel_stats_large_offset(ctx, rng):
    x = (1000 + rng.standard_normal((1, 2, 517, 733))).astype(np.float32)
    mean, std = ctx.channel_stats(x, 0.0)
    want_mean, want_std = ref.channel_stats(x, 0.0)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-6)
    np.testing.assert_allclose(std, want_std, rtol=1e-4)


@gpu_test
@pytest.mark.parametrize("scale", [1e19, 1e38, 3.4e38])
def test_gpu_channel_stats_near_float_max(ctx, rng, scale):
    """Finite values whose float Welford overflows (d or d*d beyond 3.4e38): redone in double."""
    x = ((rng.random((2, 3, 37, 129)) * 2 - 1) * scale).astype(np.float32)
    x[0, 0] = np.abs(x[0, 0])
    mean, std = ctx.channel_stats(x, 1e-5)
    want_mean, want_std = ref.channel_stats(x, 1e-5)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-5, atol=1e-6 * scale)
    np.testing.assert_allclose(std, want_std, rtol=1e-5)


@gpu_test
@pytest.mark.parametrize("activation", [None, "silu", "relu"])
@pytest.mark.parametrize("shape", [(1, 1, 1, 7), (1, 3, 13, 17), (2, 4, 127, 237),
                                   (1, 8, 270, 480),
                                   # a ragged 4-load batch; more planes than a grid dimension
                                   (1, 3, 1, 1029), (1, 70000, 1, 2)])
def test_gpu_adain(ctx, rng, shape, activation):
    n, c = shape[:2]
    x = (rng.standard_normal(shape) * 2 + 5).astype(np.float32)
    sm = rng.standard_normal(c).astype(np.float32)
    ss = (rng.random((n, c)) + 0.5).astype(np.float32)
    want = ref.activation(ref.adain(x, sm, ss, 1e-5).astype(np.float64), activation)
    np.testing.assert_allclose(ctx.adain(x, sm, ss, 1e-5, activation=activation), want,
                               **REDUCTION)
    stats = ref.channel_stats(x, 1e-5)
    want = ref.activation(ref.adain(x, sm, ss, 1e-5, stats).astype(np.float64), activation)
    np.testing.assert_allclose(ctx.adain(x, sm, ss, 1e-5, stats, activation), want, **ELEMENTWISE)


@gpu_test
@pytest.mark.parametrize("n", [1, 7, 13, 17, 127, 237, 1080 * 1920])
def test_gpu_silu(ctx, rng, n):
    x = (rng.standard_normal(n) * 8).astype(np.float32)
    np.testing.assert_allclose(ctx.silu(x), ref.silu(x), **ELEMENTWISE)


@gpu_test
def test_gpu_silu_special_values(ctx):
    x = np.array([np.inf, -np.inf, np.nan, -120.0, 120.0, 0.0, -0.0, 88.7, -88.7, 1e-30],
                 np.float32)
    np.testing.assert_allclose(ctx.silu(x), ref.silu(x), equal_nan=True, **ELEMENTWISE)


@gpu_test
@pytest.mark.parametrize("shape,r", [((1, 4, 1, 1), 2), ((2, 18, 7, 13), 3), ((1, 12, 17, 127), 2),
                                     ((1, 3, 5, 5), 1), ((1, 64, 135, 240), 4),
                                     # the runtime-r path, w = 1, and more output rows (66,000)
                                     # than one grid dimension holds (grid-stride over rows)
                                     ((2, 50, 3, 7), 5), ((1, 16, 9, 1), 4), ((1, 4, 33000, 1), 2)])
def test_gpu_pixel_shuffle(ctx, rng, shape, r):
    x = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(ctx.pixel_shuffle(x, r), ref.pixel_shuffle(x, r))


@gpu_test
@pytest.mark.parametrize("colour", [False, True])
@pytest.mark.parametrize("sc", [1, 3])
@pytest.mark.parametrize("h,w,r", [(1, 1, 1), (7, 13, 2), (7, 13, 20), (17, 127, 4),
                                   (237, 13, 8), (270, 480, 8)])
@pytest.mark.parametrize("eps", [1e-2, 1e-4])
def test_gpu_guided_filter_matches_cpu(ctx, rng, h, w, r, sc, colour, eps):
    guide = rng.random((h, w, 3) if colour else (h, w)).astype(np.float32)
    src = rng.random((h, w, sc) if sc > 1 else (h, w)).astype(np.float32)
    np.testing.assert_allclose(ctx.guided_filter(guide, src, r, eps),
                               ops.guided_filter(guide, src, r, eps), **FILTER)


@gpu_test
@pytest.mark.parametrize("colour", [False, True])
@pytest.mark.parametrize("h,w,r,sc", [
    (17, 127, 0, 3),     # r = 0: 1x1 windows
    (1, 1100, 3, 1),     # one row: three row tiles, the last one partial
    (1100, 1, 3, 1),     # one column: 35 column strips, the last one partial
    (45, 1030, 5, 3),    # neither side a multiple of the tiles or strips
    (5, 3, 9, 3),        # r larger than both sides: the windows wrap the reflection
    (3, 600, 700, 1),    # ... and larger than a row tile
    (29, 61, 2, 5),      # five src channels: 29 planes for a colour guide
    (300000, 1, 1, 3),   # more (strip, plane) jobs and rows than one grid dimension holds
])
def test_gpu_guided_filter_tiling_edges(ctx, rng, h, w, r, sc, colour):
    guide = rng.random((h, w, 3) if colour else (h, w)).astype(np.float32)
    src = rng.random((h, w, sc) if sc > 1 else (h, w)).astype(np.float32)
    np.testing.assert_allclose(ctx.guided_filter(guide, src, r, 1e-3),
                               ops.guided_filter(guide, src, r, 1e-3), **FILTER)


@gpu_test
def test_gpu_guided_filter_smooth_colour_guide_guard(ctx):
    # A nearly constant colour guide: det(Sigma + eps I) < 1e-6 with eps < 1e-2 (OpenCV's guard).
    y, x = np.mgrid[0:64, 0:96].astype(np.float32)
    guide = np.stack([0.5 + 1e-4 * x, 0.5 + 1e-4 * y, 0.5 + 1e-4 * (x + y)], axis=-1)
    src = (np.sin(x / 7) * np.cos(y / 5)).astype(np.float32)
    np.testing.assert_allclose(ctx.guided_filter(guide, src, 4, 1e-4),
                               ops.guided_filter(guide, src, 4, 1e-4), **FILTER)


@gpu_test
def test_gpu_no_device_memory_leak(rng):
    with cuda.Context() as c:
        img = rng.integers(0, 256, (270, 480, 3), dtype=np.uint8)
        x = rng.standard_normal((1, 12, 135, 240)).astype(np.float32)
        c.postprocess(c.preprocess(img))  # warm: the pools reach their size
        c.postprocess(x, r=2)
        c.synchronize()
        before, allocations = cuda.mem_info()[0], c.device.allocations + c.pinned.allocations
        for _ in range(500):
            c.postprocess(c.preprocess(img))  # 2 op calls per iteration: 1,000 calls
        c.synchronize()
        assert c.device.allocations + c.pinned.allocations == allocations
        # 2 MiB: the driver's allocation granularity; a per-call leak would be >= 1.5 GB here
        assert before - cuda.mem_info()[0] < 2 << 20
    # closing the context returns everything it held
    after_close = cuda.mem_info()[0]
    assert after_close >= before


@gpu_test
def test_gpu_oom_injection_is_a_clean_error(monkeypatch, rng):
    x = rng.standard_normal(1000).astype(np.float32)
    with cuda.Context() as c:
        monkeypatch.setenv("A2R_CUDA_FAULT", "oom")
        with pytest.raises(cuda.CudaOutOfMemory, match="A2R_CUDA_FAULT=oom"):
            c.silu(x)
        monkeypatch.delenv("A2R_CUDA_FAULT")
        np.testing.assert_allclose(c.silu(x), ref.silu(x), **ELEMENTWISE)  # still usable


@gpu_test
def test_gpu_device_info():
    info = cuda.device_info()
    assert info["name"] and info["capability"][0] >= 7 and info["total_bytes"] > 0
