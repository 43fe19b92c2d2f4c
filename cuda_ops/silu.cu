/* silu: y = x / (1 + exp(-x)) (contract: a2r_cuda.h). Accurate expf (the build has no
 * --use_fast_math); x -> -inf gives -0, NaN stays NaN. y may equal x: each element is read once
 * before its own write. */
#include "a2r_cuda_internal.cuh"

namespace a2r {

__global__ void silu_kernel(const float *x, float *y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float v = x[i];
        y[i] = v / (1.0f + expf(-v));
    }
}

cudaError_t launch_silu(const float *x, float *y, int64_t n, cudaStream_t s) {
    silu_kernel<<<grid_for(n), kThreads, 0, s>>>(x, y, n);
    A2R_LAUNCHED();
    return cudaSuccess;
}

}  // namespace a2r
