/* resize kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * Two passes over nc planes: the rows pass blends ky source rows per output row (unit stride
 * over the row: vectorised), the columns pass gathers kx taps per output pixel from that row. */
#include "a2r_isa.h"

void A2R_KERNEL(a2r_resize)(const float *restrict x, int64_t nc, int64_t h, int64_t w,
                            int64_t oh, int64_t ow, int64_t ky, const int64_t *restrict iy,
                            const float *restrict wy, int64_t kx, const int64_t *restrict ix,
                            const float *restrict wx, float *restrict rows, float *restrict y) {
    const int64_t nrows = nc * oh;
    #pragma omp parallel num_threads(a2r_num_threads()) if (nrows * (w + ow) > A2R_PAR_GRAIN)
    {
        #pragma omp for schedule(static)
        for (int64_t r = 0; r < nrows; r++) {
            const int64_t plane = r / oh, o = r % oh;
            const float *src = x + plane * h * w;
            float *restrict t = rows + r * w;
            const float *s0 = src + iy[o] * w;
            const float w0 = wy[o];
            for (int64_t j = 0; j < w; j++) t[j] = w0 * s0[j];
            for (int64_t k = 1; k < ky; k++) {
                const float *sk = src + iy[k * oh + o] * w;
                const float wk = wy[k * oh + o];
                for (int64_t j = 0; j < w; j++) t[j] = A2R_MADD(wk, sk[j], t[j]);
            }
        }
        #pragma omp for schedule(static)
        for (int64_t r = 0; r < nrows; r++) {
            const float *t = rows + r * w;
            float *restrict dst = y + r * ow;
            for (int64_t p = 0; p < ow; p++) dst[p] = wx[p] * t[ix[p]];
            for (int64_t k = 1; k < kx; k++) {
                const int64_t *ik = ix + k * ow;
                const float *wk = wx + k * ow;
                for (int64_t p = 0; p < ow; p++) dst[p] = A2R_MADD(wk[p], t[ik[p]], dst[p]);
            }
        }
    }
}
