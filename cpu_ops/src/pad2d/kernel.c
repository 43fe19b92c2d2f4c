/* pad2d and crop_add kernel bodies (contract: a2r_kernels.h). Compiled once per ISA level.
 * pad2d: one output row per iteration: its source row (reflected, clamped, or none: the constant),
 * then the left border, the middle as one memcpy, the right border. Border columns are few
 * (a generator's reflect pad is 1-3 wide), so they are scalar. */
#include <string.h>

#include "a2r_isa.h"

/* Source index of padded position i - before along an axis of n, or -1 (the constant). */
static inline int64_t source(int64_t i, int64_t n, int mode) {
    if (i >= 0 && i < n) return i;
    if (mode == A2R_PAD_REFLECT) return i < 0 ? -i : 2 * (n - 1) - i;
    if (mode == A2R_PAD_EDGE) return i < 0 ? 0 : n - 1;
    return -1;
}

void A2R_KERNEL(a2r_pad2d)(const float *restrict x, int64_t nc, int64_t h, int64_t w,
                           int64_t top, int64_t bottom, int64_t left, int64_t right, int mode,
                           float value, float *restrict y) {
    const int64_t oh = h + top + bottom, ow = w + left + right, rows = nc * oh;
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (rows * ow > A2R_PAR_GRAIN)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t plane = r / oh, sr = source(r % oh - top, h, mode);
        float *restrict dst = y + r * ow;
        if (sr < 0) {
            for (int64_t j = 0; j < ow; j++) dst[j] = value;
            continue;
        }
        const float *src = x + (plane * h + sr) * w;
        for (int64_t j = 0; j < left; j++) {
            const int64_t sc = source(j - left, w, mode);
            dst[j] = sc < 0 ? value : src[sc];
        }
        memcpy(dst + left, src, (size_t)w * sizeof *src);
        for (int64_t j = left + w; j < ow; j++) {
            const int64_t sc = source(j - left, w, mode);
            dst[j] = sc < 0 ? value : src[sc];
        }
    }
}

/* One output row per iteration: the kept part of x's row plus b's row (the vectoriser's
 * run-time overlap check covers y == b). */
void A2R_KERNEL(a2r_crop_add)(const float *restrict x, int64_t nc, int64_t xh, int64_t xw,
                              int64_t top, int64_t left, const float *b, int64_t h, int64_t w,
                              float *y) {
    const int64_t rows = nc * h;
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (rows * w > A2R_PAR_GRAIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *src = x + ((r / h) * xh + top + r % h) * xw + left;
        const float *br = b + r * w;
        float *yr = y + r * w;
        for (int64_t j = 0; j < w; j++) yr[j] = src[j] + br[j];
    }
}
