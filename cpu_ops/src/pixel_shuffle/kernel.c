/* pixel_shuffle kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * Output row (b, k, i, p) interleaves the r input rows x[b, k*r*r + p*r + q, i, :], q < r, which
 * lie one plane (h*w floats) apart: r sequential reads, one sequential write. A window of the
 * shuffled picture (the crop of a ConvTranspose's sub-pixel form) takes whole groups of r the
 * same way and its partial first and last groups element by element. */
#include <string.h>

#include "a2r_isa.h"

/* dst[j*R + q] = src[q*plane + j] for j < w, q < R, for floats and for u8 levels (the int8
 * plan's tensors between two convolutions, model/executor.py _u8_links). Inlined with a constant
 * R the q loop unrolls into R loads and one interleaving store group. GCC 12 vectorises the
 * float rows at R = 2 and 4 at every level (SSE2 unpcklps/unpckhps, AVX2 + vperm2f128, AVX-512
 * vpermt2ps) and R = 3 at AVX2/AVX-512 (SSE2 lacks the shuffles: partial SLP only); any other R
 * is a scalar strided store. */
#define INTERLEAVE_ROW(NAME, T)                                                                 \
    static inline void NAME(T *restrict dst, const T *restrict src, int64_t plane, int64_t w,  \
                            const int64_t R) {                                                 \
        for (int64_t j = 0; j < w; j++)                                                         \
            for (int64_t q = 0; q < R; q++) dst[j * R + q] = src[q * plane + j];               \
    }
INTERLEAVE_ROW(interleave_f32, float)
INTERLEAVE_ROW(interleave_u8, uint8_t)
#undef INTERLEAVE_ROW

/* Whole groups of one output row from the r rows of their channels (element offsets dst, src;
 * T float or u8): R a constant where it can be. */
#define ROW_OF(ROW, T)                                                                          \
    switch (r) {                                                                                \
    case 2: ROW((T *)y + dst, (const T *)x + src, plane, groups, 2); break;                     \
    case 3: ROW((T *)y + dst, (const T *)x + src, plane, groups, 3); break;                     \
    case 4: ROW((T *)y + dst, (const T *)x + src, plane, groups, 4); break;                     \
    default: ROW((T *)y + dst, (const T *)x + src, plane, groups, r); break;                    \
    }

/* y (n, c, oh, ow) = the window from (top, left) of the shuffled x; elem: 4 (float) or 1 (u8). */
static void shuffle(const void *restrict x, int64_t n, int64_t c, int64_t h, int64_t w,
                    int64_t r, int64_t top, int64_t left, int64_t oh, int64_t ow, int64_t elem,
                    void *restrict y) {
    if (r == 1 && top == 0 && left == 0 && oh == h && ow == w) { /* the identity: one copy */
        memcpy(y, x, (size_t)(n * c * h * w * elem));
        return;
    }
    const int64_t rows = n * c * oh, plane = h * w;
    /* columns [x0, x0 + groups*r) of every output row are whole groups; the rest is edges */
    const int64_t x0 = A2R_MIN(ow, (r - left % r) % r), groups = (ow - x0) / r;
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (rows * ow > A2R_PAR_GRAIN)
    for (int64_t row = 0; row < rows; row++) {
        const int64_t gy = top + row % oh, bk = row / oh, i = gy / r, p = gy % r;
        const int64_t base = (bk * r * r + p * r) * plane + i * w; /* (bk, p, 0) at row i */
        for (int64_t xo = 0; xo < ow; xo++) { /* the edges, element by element */
            if (xo == x0 && groups > 0) {
                xo += groups * r - 1;
                continue;
            }
            const int64_t gx = left + xo, at = base + gx % r * plane + gx / r;
            memcpy((char *)y + (row * ow + xo) * elem, (const char *)x + at * elem,
                   (size_t)elem);
        }
        const int64_t dst = row * ow + x0, src = base + (left + x0) / r;
        if (elem == 1) {
            ROW_OF(interleave_u8, uint8_t)
        } else {
            ROW_OF(interleave_f32, float)
        }
    }
}
#undef ROW_OF

void A2R_KERNEL(a2r_pixel_shuffle)(const float *restrict x, int64_t n, int64_t c, int64_t h,
                                   int64_t w, int64_t r, int64_t top, int64_t left, int64_t oh,
                                   int64_t ow, float *restrict y) {
    shuffle(x, n, c, h, w, r, top, left, oh, ow, sizeof *x, y);
}

void A2R_KERNEL(a2r_pixel_shuffle_u8)(const uint8_t *restrict x, int64_t n, int64_t c,
                                      int64_t h, int64_t w, int64_t r, int64_t top, int64_t left,
                                      int64_t oh, int64_t ow, uint8_t *restrict y) {
    shuffle(x, n, c, h, w, r, top, left, oh, ow, sizeof *x, y);
}
