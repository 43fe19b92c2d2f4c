/* adain: y = act((x - mu) * a + style_mean) per plane (contract: a2r_cuda.h).
 * Three launches: the moments pass (moments.cuh; skipped when content stats are given), one
 * thread per plane for (mu, a, sm) with a = style_std / sigma rounded once from double, as the CPU
 * op, then the apply over a 2-D grid (x: the plane's elements, y: planes). */
#include "moments.cuh"

namespace a2r {

__global__ void adain_coeffs_kernel(const Moments *__restrict__ part, int64_t chunks,
                                    const float *__restrict__ content_mean,
                                    const float *__restrict__ content_std,
                                    const float *__restrict__ style_mean,
                                    const float *__restrict__ style_std, int64_t nc, float eps,
                                    float *__restrict__ coef) {
    for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < nc;
         p += (int64_t)gridDim.x * blockDim.x) {
        float mu, a;
        if (content_mean) {
            mu = content_mean[p];
            a = (float)((double)style_std[p] / (double)content_std[p]);
        } else {
            const Moments m = plane_moments(part, p, chunks);
            mu = (float)m.mean;
            a = (float)((double)style_std[p] / sqrt(m.m2 / m.n + (double)eps));
        }
        coef[3 * p] = mu;
        coef[3 * p + 1] = a;
        coef[3 * p + 2] = style_mean[p];
    }
}

/* (x - mu) first: with a large common offset, x*a + (sm - mu*a) would cancel badly.
 * Each thread loads kApplyLoads elements (blockDim apart: coalesced) before computing any, so
 * that enough bytes are in flight (one load at a time left it latency-bound at 0.33 of copy).
 * x and y may alias: no __restrict__; a thread reads its elements before writing the same ones. */
constexpr int kApplyLoads = 4;

__global__ void adain_apply_kernel(const float *x, int64_t nc, int64_t hw,
                                   const float *__restrict__ coef, int activation, float *y) {
    const int64_t step = blockDim.x;
    for (int64_t p = blockIdx.y; p < nc; p += gridDim.y) {
        const float mu = coef[3 * p], a = coef[3 * p + 1], sm = coef[3 * p + 2];
        const float *xp = x + p * hw;
        float *yp = y + p * hw;
        for (int64_t i0 = blockIdx.x * kApplyLoads * step + threadIdx.x; i0 < hw;
             i0 += (int64_t)gridDim.x * kApplyLoads * step) {
            float v[kApplyLoads];
            load_ahead(xp, i0, step, hw, v);
#pragma unroll
            for (int u = 0; u < kApplyLoads; u++) {
                float t = fmaf(v[u] - mu, a, sm);
                if (activation == A2R_CUDA_ACT_SILU) t = t / (1.0f + expf(-t));
                else if (activation == A2R_CUDA_ACT_RELU) t = fmaxf(t, 0.0f);
                if (i0 + u * step < hw) yp[i0 + u * step] = t;
            }
        }
    }
}

cudaError_t launch_adain(const float *x, int64_t nc, int64_t hw, const float *style_mean,
                         const float *style_std, const float *content_mean,
                         const float *content_std, float eps, int activation, float *y, void *ws,
                         cudaStream_t s) {
    Moments *part = (Moments *)ws;
    float *coef = (float *)((char *)ws + partials_bytes(nc, hw));
    if (!content_mean) {
        cudaError_t e = launch_partial_moments(x, nc, hw, part, s);
        if (e != cudaSuccess) return e;
    }
    adain_coeffs_kernel<<<grid_for(nc), kThreads, 0, s>>>(part, stats_chunks(hw), content_mean,
                                                         content_std, style_mean, style_std, nc,
                                                         eps, coef);
    A2R_LAUNCHED();
    /* x: blocks over one plane (kApplyLoads elements per thread), capped at 4096 (grid-stride
     * beyond). */
    const unsigned per_plane = grid_for(hw, kThreads * kApplyLoads);
    const unsigned bx = per_plane < 4096u ? per_plane : 4096u;
    const dim3 grid(bx, (unsigned)(nc < kMaxBlocks ? nc : kMaxBlocks));
    adain_apply_kernel<<<grid, kThreads, 0, s>>>(x, nc, hw, coef, activation, y);
    A2R_LAUNCHED();
    return cudaSuccess;
}

}  // namespace a2r
