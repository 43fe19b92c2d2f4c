/* pixel_shuffle kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * Output row (b, k, i, p) interleaves the r input rows x[b, k*r*r + p*r + q, i, :], q < r, which
 * lie one plane (h*w floats) apart: r sequential reads, one sequential write. */
#include <string.h>

#include "a2r_isa.h"

/* dst[j*R + q] = src[q*plane + j] for j < w, q < R. Inlined with a constant R the q loop unrolls
 * into R loads and one interleaving store group. GCC 12 vectorises R = 2 and 4 at every level
 * (SSE2 unpcklps/unpckhps, AVX2 + vperm2f128, AVX-512 vpermt2ps) and R = 3 at AVX2/AVX-512
 * (SSE2 lacks the shuffles: partial SLP only); any other R is a scalar strided store. */
static inline void interleave_row(float *restrict dst, const float *restrict src, int64_t plane,
                                  int64_t w, const int64_t R) {
    for (int64_t j = 0; j < w; j++)
        for (int64_t q = 0; q < R; q++) dst[j * R + q] = src[q * plane + j];
}

void A2R_KERNEL(a2r_pixel_shuffle)(const float *restrict x, int64_t n, int64_t c, int64_t h,
                                   int64_t w, int64_t r, float *restrict y) {
    if (r == 1) { /* the identity: one copy */
        memcpy(y, x, (size_t)(n * c * h * w) * sizeof *y);
        return;
    }
    const int64_t rows = n * c * h * r; /* output rows: (b, k, i, p) */
    const int64_t ow = w * r, plane = h * w;
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (rows * ow > A2R_PAR_GRAIN)
    for (int64_t row = 0; row < rows; row++) {
        const int64_t p = row % r, i = (row / r) % h, bk = row / (r * h);
        float *dst = y + row * ow;
        const float *src = x + (bk * r * r + p * r) * plane + i * w; /* channel (bk, p, q=0) */
        switch (r) {
        case 2: interleave_row(dst, src, plane, w, 2); break;
        case 3: interleave_row(dst, src, plane, w, 3); break;
        case 4: interleave_row(dst, src, plane, w, 4); break;
        default: interleave_row(dst, src, plane, w, r); break;
        }
    }
}
