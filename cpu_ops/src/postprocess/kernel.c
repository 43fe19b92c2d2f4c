/* postprocess kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * Bit-exact on every level: two roundings per step (no contraction), NaN -> 0 through the
 * comparison order, round-half-even by the magic-number add, which is exact on [0, 255]. */
#include "a2r_isa.h"
#include "a2r_math.h"

static inline uint8_t to_u8(float x, float m, float s) {
    float v = (x * s + m) * 255.0f;
    v = v > 0.0f ? v : 0.0f; /* NaN and negatives -> 0 */
    v = v < 255.0f ? v : 255.0f;
    return (uint8_t)((v + A2R_ROUND_MAGIC) - A2R_ROUND_MAGIC);
}

void A2R_KERNEL(a2r_postprocess)(const float *restrict x, int64_t h, int64_t w,
                                 const float mean[3], const float stdv[3], uint8_t *restrict out) {
    const int64_t plane = h * w;
    const float mr = mean[0], mg = mean[1], mb = mean[2];
    const float sr = stdv[0], sg = stdv[1], sb = stdv[2];
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (plane > A2R_PAR_GRAIN)
    for (int64_t y = 0; y < h; y++) {
        const float *restrict r = x + y * w;
        const float *restrict g = r + plane;
        const float *restrict b = g + plane;
        uint8_t *restrict dst = out + y * w * 3;
        for (int64_t i = 0; i < w; i++) {
            dst[3 * i + 0] = to_u8(b[i], mb, sb);
            dst[3 * i + 1] = to_u8(g[i], mg, sg);
            dst[3 * i + 2] = to_u8(r[i], mr, sr);
        }
    }
}
