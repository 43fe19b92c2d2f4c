/* preprocess kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * One pass over memory, each row in blocks of BLOCK pixels: the BGR bytes are first split into
 * three byte planes on the stack (a stride-3 byte shuffle: vectorised from SSSE3 up, scalar at the
 * SSE2 baseline, which has no byte shuffle), then converted unit-stride into the float planes.
 * Two loops instead of one let the conversion vectorise at every level, whatever the split does. */
#include "a2r_isa.h"

/* 256 pixels: a multiple of the widest byte vector (64), and the three planes (768 B) stay in L1. */
#define BLOCK 256

void A2R_KERNEL(a2r_preprocess)(const uint8_t *restrict img, int64_t h, int64_t w,
                                const float scale[3], const float bias[3], float *restrict out) {
    const int64_t plane = h * w;
    const float sr = scale[0], sg = scale[1], sb = scale[2];
    const float br = bias[0], bg = bias[1], bb = bias[2];
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (plane > A2R_PAR_GRAIN)
    for (int64_t y = 0; y < h; y++) {
        uint8_t cr[BLOCK], cg[BLOCK], cb[BLOCK];
        const uint8_t *restrict src = img + y * w * 3;
        float *restrict r = out + y * w;
        float *restrict g = r + plane;
        float *restrict b = g + plane;
        for (int64_t x0 = 0; x0 < w; x0 += BLOCK) {
            const int64_t n = A2R_MIN(w - x0, BLOCK);
            const uint8_t *restrict s = src + 3 * x0;
            for (int64_t i = 0; i < n; i++) {
                cb[i] = s[3 * i + 0];
                cg[i] = s[3 * i + 1];
                cr[i] = s[3 * i + 2];
            }
            for (int64_t i = 0; i < n; i++) {
                r[x0 + i] = A2R_MADD((float)cr[i], sr, br);
                g[x0 + i] = A2R_MADD((float)cg[i], sg, bg);
                b[x0 + i] = A2R_MADD((float)cb[i], sb, bb);
            }
        }
    }
}
