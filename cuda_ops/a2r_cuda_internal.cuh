/* Internal to the CUDA library: the launchers each op's .cu file defines for a2r_cuda_api.cu.
 * A launcher only enqueues its kernels on `stream` and returns cudaGetLastError() after each
 * launch (first failure wins); argument checks are done by the API file before it is called. */
#ifndef A2R_CUDA_INTERNAL_CUH
#define A2R_CUDA_INTERNAL_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "a2r_cuda.h"

namespace a2r {

/* 256 threads: a multiple of the warp, enough warps per block to hide latency on sm_75..sm_90. */
constexpr int kThreads = 256;
/* Grid-stride loops cap the grid: 65535 blocks x 256 threads is far more than any GPU keeps
 * resident, and stays inside every grid dimension limit. */
constexpr int64_t kMaxBlocks = 65535;

inline unsigned grid_for(int64_t n, int threads = kThreads) {
    int64_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    return (unsigned)(b < kMaxBlocks ? b : kMaxBlocks);
}

/* v[u] = p[i0 + u*step] for u < N, 0 where i0 + u*step >= end. All N loads are issued before
 * the caller uses any, so N are in flight at once (one dependent load at a time leaves a
 * streaming kernel latency-bound). p may alias the caller's output: no __restrict__. */
template <int N>
__device__ __forceinline__ void load_ahead(const float *p, int64_t i0, int64_t step, int64_t end,
                                           float (&v)[N]) {
#pragma unroll
    for (int u = 0; u < N; u++) v[u] = i0 + u * step < end ? p[i0 + u * step] : 0.0f;
}

/* Launch check: the launch's own error, then move on only while there is none. */
#define A2R_LAUNCHED()                                  \
    do {                                                \
        cudaError_t e_ = cudaGetLastError();            \
        if (e_ != cudaSuccess) return e_;               \
    } while (0)

cudaError_t launch_preprocess(const uint8_t *img, int64_t h, int64_t w, const float scale[3],
                              const float bias[3], float *out, cudaStream_t s);
cudaError_t launch_postprocess(const float *x, int64_t h, int64_t w, int64_t r,
                               const float mean[3], const float stdv[3], uint8_t *out,
                               cudaStream_t s);
int64_t stats_workspace_bytes(int64_t nc, int64_t hw);
cudaError_t launch_channel_stats(const float *x, int64_t nc, int64_t hw, float eps, float *mean,
                                 float *stdv, void *ws, cudaStream_t s);
cudaError_t launch_adain(const float *x, int64_t nc, int64_t hw, const float *style_mean,
                         const float *style_std, const float *content_mean,
                         const float *content_std, float eps, int activation, float *y, void *ws,
                         cudaStream_t s);
cudaError_t launch_silu(const float *x, float *y, int64_t n, cudaStream_t s);
cudaError_t launch_pixel_shuffle(const float *x, int64_t n, int64_t c, int64_t h, int64_t w,
                                 int64_t r, float *y, cudaStream_t s);
int64_t guided_filter_workspace_bytes(int64_t gc, int64_t sc, int64_t h, int64_t w);
cudaError_t launch_guided_filter(const float *guide, int64_t gc, const float *src, int64_t sc,
                                 int64_t h, int64_t w, int64_t r, float eps, float *out, void *ws,
                                 cudaStream_t s);

}  // namespace a2r

#endif
