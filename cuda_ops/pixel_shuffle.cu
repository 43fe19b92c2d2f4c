/* pixel_shuffle (torch PixelShuffle = ONNX DepthToSpace CRD; contract: a2r_cuda.h).
 * One thread per output element: coalesced stores, reads strided by r within a warp. */
#include "a2r_cuda_internal.cuh"

namespace a2r {

__global__ void pixel_shuffle_kernel(const float *__restrict__ x, int64_t n, int64_t c, int64_t h,
                                     int64_t w, int64_t r, float *__restrict__ y) {
    const int64_t oh = h * r, ow = w * r, total = n * c * oh * ow;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t X = i % ow, Y = (i / ow) % oh, bk = i / (oh * ow); /* bk = b*c + k */
        const int64_t yi = Y / r, p = Y - yi * r, xj = X / r, q = X - xj * r;
        /* input channel b*c*r*r + k*r*r + p*r + q = bk*r*r + p*r + q */
        y[i] = x[((bk * r * r + p * r + q) * h + yi) * w + xj];
    }
}

cudaError_t launch_pixel_shuffle(const float *x, int64_t n, int64_t c, int64_t h, int64_t w,
                                 int64_t r, float *y, cudaStream_t s) {
    pixel_shuffle_kernel<<<grid_for(n * c * h * r * w * r), kThreads, 0, s>>>(x, n, c, h, w, r, y);
    A2R_LAUNCHED();
    return cudaSuccess;
}

}  // namespace a2r
