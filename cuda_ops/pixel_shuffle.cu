/* pixel_shuffle (torch PixelShuffle = ONNX DepthToSpace CRD; contract: a2r_cuda.h).
 * Grid: y walks the output rows (n*c*h*r of them, grid-stride), x the columns of one row. The
 * row's decomposition (b*c + k, i, p) is done once per row in 64 bits; per element only X / r
 * remains, a division by a compile-time constant for the usual r = 2, 3, 4 (the old kernel's six
 * 64-bit divisions per element made it compute-bound). Stores are coalesced; the loads of a warp
 * fall into r contiguous runs (one per input channel q), whole sectors each. */
#include "a2r_cuda_internal.cuh"

namespace a2r {

/* R > 0: the factor as a compile-time constant; R == 0: the runtime factor rr. */
template <int R>
__global__ void pixel_shuffle_kernel(const float *__restrict__ x, int64_t rows, int64_t h,
                                     int64_t w, int64_t rr, float *__restrict__ y) {
    const int64_t r = R > 0 ? R : rr, oh = h * r, ow = w * r, plane = h * w;
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
        const int64_t bk = row / oh, Y = row - bk * oh; /* bk = b*c + k */
        const int64_t i = Y / r, p = Y - i * r;
        /* input channel bk*r*r + p*r + q, row i; q is added per element */
        const float *in = x + (bk * r * r + p * r) * plane + i * w;
        float *out = y + row * ow;
        for (int64_t X = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; X < ow;
             X += (int64_t)gridDim.x * blockDim.x) {
            const int64_t j = X / r, q = X - j * r;
            out[X] = in[q * plane + j];
        }
    }
}

cudaError_t launch_pixel_shuffle(const float *x, int64_t n, int64_t c, int64_t h, int64_t w,
                                 int64_t r, float *y, cudaStream_t s) {
    const int64_t rows = n * c * h * r;
    const dim3 grid(grid_for(w * r), (unsigned)(rows < kMaxBlocks ? rows : kMaxBlocks));
    switch (r) {
    case 2: pixel_shuffle_kernel<2><<<grid, kThreads, 0, s>>>(x, rows, h, w, r, y); break;
    case 3: pixel_shuffle_kernel<3><<<grid, kThreads, 0, s>>>(x, rows, h, w, r, y); break;
    case 4: pixel_shuffle_kernel<4><<<grid, kThreads, 0, s>>>(x, rows, h, w, r, y); break;
    default: pixel_shuffle_kernel<0><<<grid, kThreads, 0, s>>>(x, rows, h, w, r, y); break;
    }
    A2R_LAUNCHED();
    return cudaSuccess;
}

}  // namespace a2r
