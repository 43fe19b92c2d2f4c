/* Per-plane moments shared by channel_stats.cu and adain.cu (internal).
 * Pass 1 (partial_moments_kernel): grid (chunks, planes); each thread sums its strided share of
 * its block's chunk around a pivot in double, then the block merges (Chan's formula, in double)
 * through warp shuffles and one shared-memory step; one (n, mean, M2) partial per (plane, chunk).
 * Pass 2 (the callers' finalize kernels): one thread per plane merges its chunks in double.
 * Pivoted sums and Chan's merge keep large offsets (mean 1000, std 1) accurate: no plain
 * E[x^2] - E[x]^2. */
#ifndef A2R_CUDA_MOMENTS_CUH
#define A2R_CUDA_MOMENTS_CUH

#include "a2r_cuda_internal.cuh"

namespace a2r {

struct Moments {
    double n, mean, m2;
};

/* A chunk is about 32 elements per thread of a 256-thread block (enough work per thread to hide
 * the merge); at most 1024 chunks per plane (the partials stay small: 24 KB per plane). */
constexpr int64_t kChunkElems = 32 * kThreads;
constexpr int64_t kMaxChunks = 1024;

inline int64_t stats_chunks(int64_t hw) {
    int64_t c = (hw + kChunkElems - 1) / kChunkElems;
    return c < 1 ? 1 : (c > kMaxChunks ? kMaxChunks : c);
}

/* Workspace: partials (planes * chunks Moments), then 3 floats per plane (adain's mu, a, sm),
 * each part rounded up to 256 bytes (cudaMalloc's alignment). */
inline int64_t round256(int64_t b) { return (b + 255) / 256 * 256; }
inline int64_t partials_bytes(int64_t nc, int64_t hw) {
    return round256(nc * stats_chunks(hw) * (int64_t)sizeof(Moments));
}

__device__ __forceinline__ Moments merge(Moments a, Moments b) {
    if (b.n == 0.0) return a;
    if (a.n == 0.0) return b;
    const double n = a.n + b.n, d = b.mean - a.mean;
    Moments m;
    m.n = n;
    m.mean = a.mean + d * (b.n / n);
    m.m2 = a.m2 + b.m2 + d * d * (a.n * b.n / n);
    return m;
}

/* Merge the chunks of plane p (one thread). */
__device__ __forceinline__ Moments plane_moments(const Moments *part, int64_t p, int64_t chunks) {
    Moments m = {0.0, 0.0, 0.0};
    for (int64_t c = 0; c < chunks; c++) m = merge(m, part[p * chunks + c]);
    return m;
}

cudaError_t launch_partial_moments(const float *x, int64_t nc, int64_t hw, Moments *part,
                                   cudaStream_t s);

}  // namespace a2r

#endif
