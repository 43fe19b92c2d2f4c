/* preprocess: BGR uint8 HWC -> RGB float32 planar (contract: a2r_cuda.h). One thread per pixel:
 * three byte loads (stride 3, served by L1), one fmaf per channel, three coalesced plane stores. */
#include "a2r_cuda_internal.cuh"

namespace a2r {

struct Affine3 {
    float scale[3], bias[3];
};

__global__ void preprocess_kernel(const uint8_t *__restrict__ img, int64_t plane,
                                  Affine3 p, float *__restrict__ out) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < plane;
         i += (int64_t)gridDim.x * blockDim.x) {
        const uint8_t *px = img + 3 * i;
        const float b = px[0], g = px[1], r = px[2];
        out[i] = fmaf(r, p.scale[0], p.bias[0]);
        out[plane + i] = fmaf(g, p.scale[1], p.bias[1]);
        out[2 * plane + i] = fmaf(b, p.scale[2], p.bias[2]);
    }
}

cudaError_t launch_preprocess(const uint8_t *img, int64_t h, int64_t w, const float scale[3],
                              const float bias[3], float *out, cudaStream_t s) {
    Affine3 p;
    for (int c = 0; c < 3; c++) {
        p.scale[c] = scale[c];
        p.bias[c] = bias[c];
    }
    const int64_t plane = h * w;
    preprocess_kernel<<<grid_for(plane), kThreads, 0, s>>>(img, plane, p, out);
    A2R_LAUNCHED();
    return cudaSuccess;
}

}  // namespace a2r
