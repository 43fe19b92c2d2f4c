/* channel_stats: per-plane mean and std = sqrt(biased var + eps) (contract: a2r_cuda.h); the
 * moments pass is shared with adain (moments.cuh). */
#include "moments.cuh"

namespace a2r {

constexpr int kLoadsAhead = 8;

__global__ void partial_moments_kernel(const float *__restrict__ x, int64_t nc, int64_t hw,
                                       int64_t chunks, Moments *__restrict__ part) {
    __shared__ Moments warp_m[kThreads / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int64_t p = blockIdx.y; p < nc; p += gridDim.y) {
        for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
            const int64_t b = hw * c / chunks, e = hw * (c + 1) / chunks;
            const float *xp = x + p * hw;
            /* This thread's elements (about 32), in the order b + tid, b + tid + blockDim, ...:
             * sums of d = x - pivot and d^2 in double, the pivot being its first element. Double
             * keeps finite values near FLT_MAX finite (d or d^2 overflow float) and large offsets
             * accurate (mean 1000, std 1); no division per element. kLoadsAhead loads are issued
             * before their updates so that enough bytes are in flight to reach memory bandwidth
             * (one dependent load at a time left the kernel latency-bound at 0.2 of copy). */
            const int64_t step = blockDim.x;
            const double pivot = b + threadIdx.x < e ? (double)xp[b + threadIdx.x] : 0.0;
            double n = 0.0, s1 = 0.0, s2 = 0.0;
            for (int64_t i0 = b + threadIdx.x; i0 < e; i0 += kLoadsAhead * step) {
                float v[kLoadsAhead];
                load_ahead(xp, i0, step, e, v);
#pragma unroll
                for (int u = 0; u < kLoadsAhead; u++) {
                    if (i0 + u * step >= e) break;
                    const double d = (double)v[u] - pivot;
                    n += 1.0;
                    s1 += d;
                    s2 += d * d;
                }
            }
            Moments m = {n, n > 0.0 ? pivot + s1 / n : 0.0,
                         n > 0.0 ? fmax(s2 - s1 * (s1 / n), 0.0) : 0.0};
            for (int off = 16; off > 0; off >>= 1) {
                Moments o;
                o.n = __shfl_down_sync(0xffffffffu, m.n, off);
                o.mean = __shfl_down_sync(0xffffffffu, m.mean, off);
                o.m2 = __shfl_down_sync(0xffffffffu, m.m2, off);
                m = merge(m, o);
            }
            if (lane == 0) warp_m[warp] = m;
            __syncthreads();
            if (threadIdx.x == 0) {
                Moments t = warp_m[0];
                for (int k = 1; k < (int)(blockDim.x >> 5); k++) t = merge(t, warp_m[k]);
                part[p * chunks + c] = t;
            }
            __syncthreads(); /* warp_m is reused by the next (p, c) */
        }
    }
}

cudaError_t launch_partial_moments(const float *x, int64_t nc, int64_t hw, Moments *part,
                                   cudaStream_t s) {
    const int64_t chunks = stats_chunks(hw);
    const dim3 grid((unsigned)chunks, (unsigned)(nc < kMaxBlocks ? nc : kMaxBlocks));
    partial_moments_kernel<<<grid, kThreads, 0, s>>>(x, nc, hw, chunks, part);
    A2R_LAUNCHED();
    return cudaSuccess;
}

__global__ void stats_finalize_kernel(const Moments *__restrict__ part, int64_t nc,
                                      int64_t chunks, float eps, float *__restrict__ mean,
                                      float *__restrict__ stdv) {
    for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < nc;
         p += (int64_t)gridDim.x * blockDim.x) {
        const Moments m = plane_moments(part, p, chunks);
        mean[p] = (float)m.mean;
        stdv[p] = (float)sqrt(m.m2 / m.n + (double)eps);
    }
}

int64_t stats_workspace_bytes(int64_t nc, int64_t hw) {
    return partials_bytes(nc, hw) + round256(nc * 3 * (int64_t)sizeof(float));
}

cudaError_t launch_channel_stats(const float *x, int64_t nc, int64_t hw, float eps, float *mean,
                                 float *stdv, void *ws, cudaStream_t s) {
    Moments *part = (Moments *)ws;
    cudaError_t e = launch_partial_moments(x, nc, hw, part, s);
    if (e != cudaSuccess) return e;
    stats_finalize_kernel<<<grid_for(nc), kThreads, 0, s>>>(part, nc, stats_chunks(hw), eps, mean,
                                                           stdv);
    A2R_LAUNCHED();
    return cudaSuccess;
}

}  // namespace a2r
