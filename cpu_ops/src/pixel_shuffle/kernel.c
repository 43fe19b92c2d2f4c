/* pixel_shuffle kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * Output row (b, k, i, p) interleaves the r input rows x[b, k*r*r + p*r + q, i, :], q < r, which
 * lie one plane (h*w floats) apart: r sequential reads, one sequential write. */
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

/* One output row (b, k, i, p) from the r rows of its channels starting at src (element
 * offsets; T float or u8): R a constant where it can be. */
#define ROW_OF(ROW, T)                                                                          \
    switch (r) {                                                                                \
    case 2: ROW((T *)y + dst, (const T *)x + src, plane, w, 2); break;                          \
    case 3: ROW((T *)y + dst, (const T *)x + src, plane, w, 3); break;                          \
    case 4: ROW((T *)y + dst, (const T *)x + src, plane, w, 4); break;                          \
    default: ROW((T *)y + dst, (const T *)x + src, plane, w, r); break;                         \
    }

/* elem: 4 (float) or 1 (u8). */
static void shuffle(const void *restrict x, int64_t n, int64_t c, int64_t h, int64_t w,
                    int64_t r, int64_t elem, void *restrict y) {
    if (r == 1) { /* the identity: one copy */
        memcpy(y, x, (size_t)(n * c * h * w * elem));
        return;
    }
    const int64_t rows = n * c * h * r; /* output rows: (b, k, i, p) */
    const int64_t ow = w * r, plane = h * w;
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (rows * ow > A2R_PAR_GRAIN)
    for (int64_t row = 0; row < rows; row++) {
        const int64_t p = row % r, i = (row / r) % h, bk = row / (r * h);
        const int64_t dst = row * ow, src = (bk * r * r + p * r) * plane + i * w; /* (bk, p, 0) */
        if (elem == 1) {
            ROW_OF(interleave_u8, uint8_t)
        } else {
            ROW_OF(interleave_f32, float)
        }
    }
}
#undef ROW_OF

void A2R_KERNEL(a2r_pixel_shuffle)(const float *restrict x, int64_t n, int64_t c, int64_t h,
                                   int64_t w, int64_t r, float *restrict y) {
    shuffle(x, n, c, h, w, r, sizeof *x, y);
}

void A2R_KERNEL(a2r_pixel_shuffle_u8)(const uint8_t *restrict x, int64_t n, int64_t c,
                                      int64_t h, int64_t w, int64_t r, uint8_t *restrict y) {
    shuffle(x, n, c, h, w, r, sizeof *x, y);
}
