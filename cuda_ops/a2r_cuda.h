/* a2r_cuda.h - the whole C contract of the CUDA library (a2r_edge/_a2r_cuda.so).
 *
 * Every entry point is in cuda_ops/a2r_cuda_api.cu and is loaded by a2r_edge/runtime/cuda.py with
 * ctypes (argtypes/restype set once per symbol there; keep the two in step and bump
 * A2R_CUDA_ABI_VERSION on any change of a signature, a status code or a layout).
 *
 * Rules shared by all functions:
 *   - each returns an int status: A2R_CUDA_OK (0) or an A2R_CUDA_E* code; on failure
 *     a2r_cuda_last_error() gives a message (thread-local: the message of this thread's last failure);
 *   - "stream" is a handle from a2r_cuda_stream_create (NULL = the legacy default stream);
 *   - op functions take DEVICE pointers (except small parameter arrays such as scale[3], which are
 *     host memory, copied into the launch); they only enqueue work: results are ready after
 *     a2r_cuda_stream_synchronize(stream). Errors of the work itself surface at the next sync;
 *   - arguments are checked (NULL pointers, sizes <= 0, sizes above the kernels' 32-bit grid limits)
 *     and answered with A2R_CUDA_EINVAL, never a crash; pointer validity is the caller's duty;
 *   - layouts are C-contiguous, as the CPU ops (cpu_ops/include/a2r_kernels.h);
 *   - all functions are thread-safe as the CUDA runtime is; none allocates device memory per call
 *     (scratch comes from the caller as a workspace of the size the *_workspace_bytes functions say).
 * Fault injection (tests): with the environment variable A2R_CUDA_FAULT=oom, a2r_cuda_malloc and
 * a2r_cuda_host_alloc return A2R_CUDA_ENOMEM without touching the device.
 */
#ifndef A2R_CUDA_H
#define A2R_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define A2R_CUDA_ABI_VERSION 1

#define A2R_CUDA_OK 0
#define A2R_CUDA_EINVAL 1     /* a bad argument (NULL, size <= 0, too large, unknown option) */
#define A2R_CUDA_ENOMEM 2     /* device or pinned host memory exhausted (or injected) */
#define A2R_CUDA_ENODRIVER 3  /* no NVIDIA driver, or one too old for this CUDA runtime */
#define A2R_CUDA_ENODEVICE 4  /* a driver but no usable CUDA device */
#define A2R_CUDA_ERUNTIME 5   /* any other CUDA error (launch failure, bad image for this GPU, ...) */

/* Activations fused into adain's apply (same codes as the CPU ops, a2r_kernels.h). */
#define A2R_CUDA_ACT_NONE 0
#define A2R_CUDA_ACT_SILU 1
#define A2R_CUDA_ACT_RELU 2

/* --- library and device ----------------------------------------------------------------------- */
int a2r_cuda_abi_version(void);                   /* A2R_CUDA_ABI_VERSION of the build */
const char *a2r_cuda_last_error(void);            /* "" when this thread had no failure */
int a2r_cuda_versions(int *runtime, int *driver); /* e.g. 13000; driver 0 when none installed */
int a2r_cuda_device_count(int *count);            /* ENODRIVER / ENODEVICE when none usable */
int a2r_cuda_device_name(int device, char *buf, int64_t len);      /* NUL-terminated, truncated */
int a2r_cuda_device_capability(int device, int *major, int *minor);
int a2r_cuda_set_device(int device);              /* for the calling thread */
int a2r_cuda_mem_info(int64_t *free_bytes, int64_t *total_bytes);  /* current device */

/* --- streams, events, memory ------------------------------------------------------------------ */
int a2r_cuda_stream_create(void **stream);        /* non-blocking w.r.t. the legacy stream */
int a2r_cuda_stream_destroy(void *stream);
int a2r_cuda_stream_synchronize(void *stream);
int a2r_cuda_device_synchronize(void);
int a2r_cuda_event_create(void **event);
int a2r_cuda_event_destroy(void *event);
int a2r_cuda_event_record(void *event, void *stream);
int a2r_cuda_event_elapsed_ms(void *start, void *end, float *ms); /* both recorded and complete */
int a2r_cuda_malloc(void **ptr, int64_t bytes);   /* device memory, 256-byte aligned */
int a2r_cuda_free(void *ptr);                     /* NULL is a no-op */
int a2r_cuda_host_alloc(void **ptr, int64_t bytes); /* pinned (page-locked) host memory */
int a2r_cuda_host_free(void *ptr);                /* NULL is a no-op */
/* Async copies on `stream`; with pageable host memory they are synchronous w.r.t. the host. */
int a2r_cuda_memcpy_h2d(void *dst, const void *src, int64_t bytes, void *stream);
int a2r_cuda_memcpy_d2h(void *dst, const void *src, int64_t bytes, void *stream);
int a2r_cuda_memcpy_d2d(void *dst, const void *src, int64_t bytes, void *stream);

/* --- ops (device pointers, enqueued on stream) ------------------------------------------------ */

/* preprocess: BGR uint8 HWC (h*w*3 bytes) -> RGB float32 planar (3*h*w):
 *   out[c*h*w + y*w + x] = fmaf(img[(y*w + x)*3 + 2 - c], scale[c], bias[c])      c = R, G, B
 * scale = 1/(255*std), bias = -mean/std, as the CPU op folds them (host arrays of 3). */
int a2r_cuda_preprocess(const uint8_t *img, int64_t h, int64_t w, const float *scale,
                        const float *bias, float *out, void *stream);

/* postprocess: RGB float32 -> BGR uint8 HWC, bit-exact with the CPU op, PixelShuffle folded in.
 *   x: (3*r*r, h, w), the tensor BEFORE a PixelShuffle of factor r (r = 1: plain (3, h, w));
 *   out: (h*r, w*r, 3). Channel c of output pixel (Y, X) reads x[c*r*r + (Y%r)*r + X%r, Y/r, X/r].
 *   v = (x*std[c] + mean[c]) * 255 in float32 with two roundings (no FMA), NaN -> 0, clamp to
 *   [0, 255], round half to even. mean, stdv: host arrays of 3. */
int a2r_cuda_postprocess(const float *x, int64_t h, int64_t w, int64_t r, const float *mean,
                         const float *stdv, uint8_t *out, void *stream);

/* Scratch (bytes) that channel_stats and adain need for nc planes of hw floats. */
int64_t a2r_cuda_stats_workspace_bytes(int64_t nc, int64_t hw);

/* channel_stats: per-plane mean and std = sqrt(biased var + eps); mean, stdv: nc device floats.
 * Per thread: sums around a pivot in double (finite for any finite float input); Chan merges in
 * double across the warp, the block and the blocks. */
int a2r_cuda_channel_stats(const float *x, int64_t nc, int64_t hw, float eps, float *mean,
                           float *stdv, void *workspace, int64_t workspace_bytes, void *stream);

/* adain: y = act((x - mu) * a + style_mean) per plane, a = style_std / sigma (rounded once from
 * double). content_mean/content_std: device arrays of nc (sigma includes eps), or both NULL to
 * compute them here with the channel_stats rule. style_*: nc device floats. y may equal x. */
int a2r_cuda_adain(const float *x, int64_t nc, int64_t hw, const float *style_mean,
                   const float *style_std, const float *content_mean, const float *content_std,
                   float eps, int activation, float *y, void *workspace, int64_t workspace_bytes,
                   void *stream);

/* silu: y = x / (1 + exp(-x)), n floats; y may equal x. */
int a2r_cuda_silu(const float *x, float *y, int64_t n, void *stream);

/* pixel_shuffle (torch PixelShuffle = ONNX DepthToSpace CRD), x (n, c*r*r, h, w) -> y (n, c, h*r, w*r):
 *   y[b, k, i*r + p, j*r + q] = x[b, k*r*r + p*r + q, i, j]. */
int a2r_cuda_pixel_shuffle(const float *x, int64_t n, int64_t c, int64_t h, int64_t w, int64_t r,
                           float *y, void *stream);

/* guided_filter (He et al.), as the CPU op: guide h*w*gc floats (gc 1 or 3, HWC), src h*w*sc
 * (HWC), out like src. Box sums over (2r+1)^2 windows, reflect borders "cba|abc" at any r
 * (columns, then rows: each summed in double and rounded to float). A colour guide inverts
 * Sigma + eps I by cofactors, with OpenCV's guard (eps < 1e-2 and |det| < 1e-6: det = 1). */
int64_t a2r_cuda_guided_filter_workspace_bytes(int64_t gc, int64_t sc, int64_t h, int64_t w);
int a2r_cuda_guided_filter(const float *guide, int64_t gc, const float *src, int64_t sc, int64_t h,
                           int64_t w, int64_t r, float eps, float *out, void *workspace,
                           int64_t workspace_bytes, void *stream);

#ifdef __cplusplus
}
#endif
#endif
