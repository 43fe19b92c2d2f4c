/* pixel_shuffle kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * Each output row gathers r input rows with stride r; reads and writes stay sequential per row. */
#include "a2r_isa.h"

void A2R_KERNEL(a2r_pixel_shuffle)(const float *restrict x, int64_t n, int64_t c, int64_t h,
                                   int64_t w, int64_t r, float *restrict y) {
    const int64_t rows = n * c * h * r; /* output rows: (b, k, i, p) */
    const int64_t ow = w * r;
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (rows * ow > A2R_PAR_GRAIN)
    for (int64_t row = 0; row < rows; row++) {
        const int64_t p = row % r, i = (row / r) % h, bk = row / (r * h);
        float *restrict dst = y + row * ow;
        const float *base = x + ((bk * r * r + p * r) * h + i) * w; /* channel (bk, p, q=0) */
        if (r == 2) {
            const float *restrict s0 = base, *restrict s1 = base + h * w;
            for (int64_t j = 0; j < w; j++) {
                dst[2 * j] = s0[j];
                dst[2 * j + 1] = s1[j];
            }
        } else {
            for (int64_t q = 0; q < r; q++) {
                const float *restrict s = base + q * h * w;
                for (int64_t j = 0; j < w; j++) dst[j * r + q] = s[j];
            }
        }
    }
}
