/* resize kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * Two passes over nc planes: the rows pass blends ky source rows per output row (unit stride
 * over the row: vectorised), the columns pass gathers kx taps per output pixel from that row.
 * Nearest (one tap of weight 1 on each axis) skips the rows pass: each output row comes
 * straight from its source row (each pixel doubled where ix is p / 2), or is a copy of the
 * row before it when both read the same source row: one write of y and one read of x, where
 * the two passes wrote and read the rows scratch too (the RRDB fixture's two nearest x2
 * upsamplings at 256^2, 1 thread, on a Sapphire Rapids core: 13% of 61 ms of steps -> 5% of
 * 57: bench_generators.py -k "rrdb and 256 and 1thr and onnxruntime" -s). */
#include <string.h>

#include "a2r_isa.h"

static int unit_weights(const float *wt, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (wt[i] != 1.0f) return 0;
    return 1;
}

/* 1 when output column p reads input column p / 2 for every p < ow (= 2 * w). */
static int doubles_columns(const int64_t *ix, int64_t w, int64_t ow) {
    if (ow != 2 * w) return 0;
    for (int64_t p = 0; p < ow; p++)
        if (ix[p] != p / 2) return 0;
    return 1;
}

/* Output rows [r0, r1) of the nearest resize. */
static void nearest_rows(const float *restrict x, int64_t h, int64_t w, int64_t oh, int64_t ow,
                         const int64_t *restrict iy, const int64_t *restrict ix, int twice,
                         int64_t r0, int64_t r1, float *restrict y) {
    for (int64_t r = r0; r < r1; r++) {
        const int64_t plane = r / oh, o = r % oh;
        float *restrict dst = y + r * ow;
        if (r > r0 && o > 0 && iy[o] == iy[o - 1]) {
            memcpy(dst, dst - ow, (size_t)ow * sizeof(float));
            continue;
        }
        const float *restrict src = x + (plane * h + iy[o]) * w;
        if (twice)
            for (int64_t j = 0; j < w; j++) dst[2 * j] = dst[2 * j + 1] = src[j];
        else
            for (int64_t p = 0; p < ow; p++) dst[p] = src[ix[p]];
    }
}

void A2R_KERNEL(a2r_resize)(const float *restrict x, int64_t nc, int64_t h, int64_t w,
                            int64_t oh, int64_t ow, int64_t ky, const int64_t *restrict iy,
                            const float *restrict wy, int64_t kx, const int64_t *restrict ix,
                            const float *restrict wx, float *restrict rows, float *restrict y) {
    const int64_t nrows = nc * oh;
    const int nearest = ky == 1 && kx == 1 && unit_weights(wy, oh) && unit_weights(wx, ow);
    if (nearest) {
        const int twice = doubles_columns(ix, w, ow);
        #pragma omp parallel num_threads(a2r_num_threads()) if (nrows * ow > A2R_PAR_GRAIN)
        {
            /* contiguous row ranges: a row may copy the one before it in its own range */
            const int64_t t = A2R_THREAD_ID(), tn = A2R_THREAD_COUNT();
            nearest_rows(x, h, w, oh, ow, iy, ix, twice, nrows * t / tn, nrows * (t + 1) / tn,
                         y);
        }
        return;
    }
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
