"""Small GPU benchmark of the CUDA library (run by tools/gpu_check.sh; needs a GPU).

Method: data stays on the device; each case runs 3 warm-up calls, then 7 batches of `reps`
calls between two CUDA events on the context's stream; the median batch gives the time per call.
GB/s = the bytes a kernel must move at least (inputs read once + outputs written once) / time,
shown against the device's own copy bandwidth measured the same way (cudaMemcpy D2D of the same
footprint, counted as read + write); "speedup" is against BASELINE_US. Host transfers: H2D and
D2H of a 1080p uint8 frame and of a float32 frame, pinned vs pageable. Prints a table and writes
JSON to the path given.
"""
from __future__ import annotations

import ctypes
import json
import statistics
import sys

import numpy as np

from a2r_edge.runtime import cuda

BATCHES, WARMUP = 7, 3
# Microseconds per call on the H200 before the kernels were rewritten for bandwidth (this script,
# 2026-12-04): the "speedup" column is measured against these.
BASELINE_US = {
    "pixel_shuffle 64x270x480 r=4": 91.6,
    "channel_stats 64x270x480": 34.4,
    "adain (own stats) 64x270x480": 94.0,
    "adain (given stats) 64x270x480": 57.0,
    "guided_filter 1080p gc=1 sc=3 r=8": 1577.7,
    "guided_filter 1080p gc=3 sc=3 r=8": 2262.1,
}


def timed(ctx, fn, reps):
    lib = ctx._lib
    start, end = ctypes.c_void_p(), ctypes.c_void_p()
    cuda.check(lib.a2r_cuda_event_create(ctypes.byref(start)), lib)
    cuda.check(lib.a2r_cuda_event_create(ctypes.byref(end)), lib)
    try:
        for _ in range(WARMUP):
            fn()
        ctx.synchronize()
        times = []
        for _ in range(BATCHES):
            cuda.check(lib.a2r_cuda_event_record(start, ctx.stream), lib)
            for _ in range(reps):
                fn()
            cuda.check(lib.a2r_cuda_event_record(end, ctx.stream), lib)
            ctx.synchronize()
            ms = ctypes.c_float()
            cuda.check(lib.a2r_cuda_event_elapsed_ms(start, end, ctypes.byref(ms)), lib)
            times.append(ms.value / 1e3 / reps)
        return statistics.median(times), (max(times) - min(times)) / statistics.median(times)
    finally:
        lib.a2r_cuda_event_destroy(start)
        lib.a2r_cuda_event_destroy(end)


def main(out_path: str) -> int:
    if not cuda.available():
        print(f"gpu_bench: no GPU: {cuda.why_unavailable()}")
        return 1
    info = cuda.device_info()
    ctx = cuda.Context()
    lib, s = ctx._lib, ctx.stream
    rng = np.random.default_rng(0)
    h, w = 1080, 1920
    dev = ctx.device.get
    rows = []

    def copy_bw(nbytes):
        a, b = dev("copy_a", nbytes), dev("copy_b", nbytes)
        t, _ = timed(ctx, lambda: cuda.check(lib.a2r_cuda_memcpy_d2d(b.ptr, a.ptr, nbytes, s),
                                             lib), 20)
        return 2 * nbytes / t

    def case(name, fn, bytes_moved, reps=20):
        t, spread = timed(ctx, fn, reps)
        ref = copy_bw(max(bytes_moved // 2, 1))
        base = BASELINE_US.get(name)
        rows.append({"kernel": name, "us": t * 1e6, "spread": spread,
                     "GBps": bytes_moved / t / 1e9, "copy_GBps": ref / 1e9,
                     "ratio": bytes_moved / t / ref,
                     "speedup": base / (t * 1e6) if base else None})

    f3 = cuda._f3((0.5, 0.5, 0.5))
    img = ctx.upload("img", rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    x = ctx.upload("x", rng.standard_normal((3, h, w)).astype(np.float32))
    y = dev("y", 64 << 20)
    u8 = dev("u8", h * w * 3 * 4)
    plane = h * w
    case("preprocess 1080p", lambda: cuda.check(lib.a2r_cuda_preprocess(
        img.ptr, h, w, f3, f3, y.ptr, s), lib), plane * 3 * (1 + 4))
    case("postprocess 1080p", lambda: cuda.check(lib.a2r_cuda_postprocess(
        x.ptr, h, w, 1, f3, f3, u8.ptr, s), lib), plane * 3 * (4 + 1))
    x2 = ctx.upload("x2", rng.standard_normal((12, h // 2, w // 2)).astype(np.float32))
    case("postprocess+shuffle r=2 ->1080p", lambda: cuda.check(lib.a2r_cuda_postprocess(
        x2.ptr, h // 2, w // 2, 2, f3, f3, u8.ptr, s), lib), plane * 3 * (4 + 1))
    case("silu 3x1080p", lambda: cuda.check(lib.a2r_cuda_silu(x.ptr, y.ptr, 3 * plane, s), lib),
         3 * plane * 8)
    feat = ctx.upload("feat", rng.standard_normal((1, 64, 270, 480)).astype(np.float32))
    nf = 64 * 270 * 480
    case("pixel_shuffle 64x270x480 r=4", lambda: cuda.check(lib.a2r_cuda_pixel_shuffle(
        feat.ptr, 1, 4, 270, 480, 4, y.ptr, s), lib), nf * 8)
    case("pixel_shuffle 64x270x480 r=2", lambda: cuda.check(lib.a2r_cuda_pixel_shuffle(
        feat.ptr, 1, 16, 270, 480, 2, y.ptr, s), lib), nf * 8)
    case("pixel_shuffle 50x270x480 r=5 (generic)", lambda: cuda.check(
        lib.a2r_cuda_pixel_shuffle(feat.ptr, 1, 2, 270, 480, 5, y.ptr, s), lib), 50 * 270 * 480 * 8)
    ws = dev("ws", lib.a2r_cuda_stats_workspace_bytes(64, 270 * 480))
    stats = dev("stats", 2 * 64 * 4)
    stats2 = dev("stats2", 2 * 64 * 4)
    case("channel_stats 64x270x480", lambda: cuda.check(lib.a2r_cuda_channel_stats(
        feat.ptr, 64, 270 * 480, 1e-5, stats.ptr, stats2.ptr, ws.ptr, ws.nbytes, s), lib), nf * 4)
    case("adain (own stats) 64x270x480", lambda: cuda.check(lib.a2r_cuda_adain(
        feat.ptr, 64, 270 * 480, stats.ptr, stats2.ptr, None, None, 1e-5, 1, y.ptr, ws.ptr,
        ws.nbytes, s), lib), nf * 8)
    case("adain (given stats) 64x270x480", lambda: cuda.check(lib.a2r_cuda_adain(
        feat.ptr, 64, 270 * 480, stats.ptr, stats2.ptr, stats.ptr, stats2.ptr, 1e-5, 1, y.ptr,
        ws.ptr, ws.nbytes, s), lib), nf * 8)
    for gc, radius in ((1, 8), (3, 8), (1, 2), (3, 32)):
        guide = ctx.upload(f"g{gc}", rng.random((h, w, gc)).astype(np.float32))
        gws = dev(f"gws{gc}", lib.a2r_cuda_guided_filter_workspace_bytes(gc, 3, h, w))
        case(f"guided_filter 1080p gc={gc} sc=3 r={radius}", lambda: cuda.check(
            lib.a2r_cuda_guided_filter(guide.ptr, gc, x.ptr, 3, h, w, radius, 1e-3, y.ptr,
                                       gws.ptr, gws.nbytes, s), lib),
             plane * 4 * (gc + 3 + 3), reps=5)

    transfers = []
    for label, nbytes in (("uint8 1080p frame", plane * 3), ("float32 1080p frame", plane * 12)):
        d = dev("xfer", nbytes)
        pinned = ctx.pinned.get("xfer", nbytes)
        pageable = np.empty(nbytes, np.uint8)
        pp = pageable.ctypes.data
        for kind, host in (("pinned", pinned.ptr), ("pageable", pp)):
            t_h2d, _ = timed(ctx, lambda: cuda.check(lib.a2r_cuda_memcpy_h2d(d.ptr, host, nbytes, s),
                                                     lib), 10)
            t_d2h, _ = timed(ctx, lambda: cuda.check(lib.a2r_cuda_memcpy_d2h(host, d.ptr, nbytes, s),
                                                     lib), 10)
            transfers.append({"what": label, "host": kind, "H2D_GBps": nbytes / t_h2d / 1e9,
                              "D2H_GBps": nbytes / t_d2h / 1e9})
    ctx.close()

    print(f"device: {info['name']} (sm_{info['capability'][0]}{info['capability'][1]}), "
          f"runtime {info['runtime']}, driver {info['driver']}")
    print(f"{'kernel':40s} {'us':>9s} {'spread':>7s} {'GB/s':>8s} {'copy GB/s':>10s} {'ratio':>6s} "
          f"{'speedup':>8s}")
    for r in rows:
        speedup = f"{r['speedup']:7.1f}x" if r["speedup"] else ""
        print(f"{r['kernel']:40s} {r['us']:9.1f} {r['spread']:7.2f} {r['GBps']:8.1f} "
              f"{r['copy_GBps']:10.1f} {r['ratio']:6.2f} {speedup:>8s}")
    print(f"\n{'transfer':22s} {'host':9s} {'H2D GB/s':>9s} {'D2H GB/s':>9s}")
    for t in transfers:
        print(f"{t['what']:22s} {t['host']:9s} {t['H2D_GBps']:9.1f} {t['D2H_GBps']:9.1f}")
    with open(out_path, "w") as f:
        json.dump({"device": info, "method": __doc__, "kernels": rows, "transfers": transfers},
                  f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "gpu_bench.json"))
