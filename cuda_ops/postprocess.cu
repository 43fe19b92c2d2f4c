/* postprocess: RGB float32 -> BGR uint8 HWC with PixelShuffle folded in (contract: a2r_cuda.h).
 * Bit-exact with the CPU op: __fmul_rn/__fadd_rn keep the two roundings (nvcc would otherwise
 * contract x*s + m into one FMA), NaN and v <= 0 -> 0, clamp to 255, rintf = round half to even.
 * One thread per output pixel; r == 1 reads the plain (3, h, w) tensor. */
#include "a2r_cuda_internal.cuh"

namespace a2r {

struct MeanStd3 {
    float mean[3], stdv[3];
};

__device__ __forceinline__ uint8_t to_u8(float x, float m, float s) {
    float v = __fmul_rn(__fadd_rn(__fmul_rn(x, s), m), 255.0f);
    v = v > 0.0f ? v : 0.0f;     /* NaN compares false: -> 0 */
    v = v < 255.0f ? v : 255.0f; /* +inf -> 255 */
    return (uint8_t)rintf(v);    /* exact integer in [0, 255] */
}

__global__ void postprocess_kernel(const float *__restrict__ x, int64_t h, int64_t w, int64_t r,
                                   MeanStd3 p, uint8_t *__restrict__ out) {
    const int64_t ow = w * r, total = h * r * ow, plane = h * w, rr = r * r;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t Y = i / ow, X = i - Y * ow;
        const int64_t y = Y / r, xx = X / r, sub = (Y - y * r) * r + (X - xx * r);
        const int64_t src = sub * plane + y * w + xx; /* channel 0 of the pre-shuffle tensor */
        const uint8_t R = to_u8(x[src], p.mean[0], p.stdv[0]);
        const uint8_t G = to_u8(x[src + rr * plane], p.mean[1], p.stdv[1]);
        const uint8_t B = to_u8(x[src + 2 * rr * plane], p.mean[2], p.stdv[2]);
        uint8_t *o = out + 3 * i;
        o[0] = B;
        o[1] = G;
        o[2] = R;
    }
}

cudaError_t launch_postprocess(const float *x, int64_t h, int64_t w, int64_t r,
                               const float mean[3], const float stdv[3], uint8_t *out,
                               cudaStream_t s) {
    MeanStd3 p;
    for (int c = 0; c < 3; c++) {
        p.mean[c] = mean[c];
        p.stdv[c] = stdv[c];
    }
    postprocess_kernel<<<grid_for(h * r * w * r), kThreads, 0, s>>>(x, h, w, r, p, out);
    A2R_LAUNCHED();
    return cudaSuccess;
}

}  // namespace a2r
