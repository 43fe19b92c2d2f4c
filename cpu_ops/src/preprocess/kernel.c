/* preprocess kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * One pass: each row's BGR bytes are read once, the three planes written once. */
#include "a2r_isa.h"

void A2R_KERNEL(a2r_preprocess)(const uint8_t *restrict img, int64_t h, int64_t w,
                                const float scale[3], const float bias[3], float *restrict out) {
    const int64_t plane = h * w;
    const float sr = scale[0], sg = scale[1], sb = scale[2];
    const float br = bias[0], bg = bias[1], bb = bias[2];
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (plane > A2R_PAR_GRAIN)
    for (int64_t y = 0; y < h; y++) {
        const uint8_t *restrict src = img + y * w * 3;
        float *restrict r = out + y * w;
        float *restrict g = r + plane;
        float *restrict b = g + plane;
        for (int64_t x = 0; x < w; x++) {
            r[x] = A2R_MADD((float)src[3 * x + 2], sr, br);
            g[x] = A2R_MADD((float)src[3 * x + 1], sg, bg);
            b[x] = A2R_MADD((float)src[3 * x + 0], sb, bb);
        }
    }
}
