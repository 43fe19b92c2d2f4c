/* maxpool kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * One output row per iteration; each output pixel takes the max over its window's taps that
 * fall inside the input (the padding never wins: the ONNX -inf padding). */
#include <math.h>

#include "a2r_isa.h"

void A2R_KERNEL(a2r_maxpool)(const float *restrict x, int64_t nc, int64_t h, int64_t w,
                             int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                             int64_t pw, int64_t dh, int64_t dw, int64_t oh, int64_t ow,
                             float *restrict y) {
    const int64_t nrows = nc * oh;
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (nrows * ow * kh * kw > A2R_PAR_GRAIN)
    for (int64_t r = 0; r < nrows; r++) {
        const int64_t plane = r / oh, i = r % oh;
        const float *src = x + plane * h * w;
        float *restrict dst = y + r * ow;
        for (int64_t j = 0; j < ow; j++) dst[j] = -INFINITY;
        for (int64_t a = 0; a < kh; a++) {
            const int64_t row = i * sh - ph + a * dh;
            if (row < 0 || row >= h) continue;
            const float *s = src + row * w;
            for (int64_t b = 0; b < kw; b++) {
                const int64_t off = b * dw - pw;
                /* output columns j whose tap column j*sw + off lies in [0, w) */
                int64_t j0 = off >= 0 ? 0 : (-off + sw - 1) / sw;
                int64_t j1 = w - 1 - off < 0 ? 0 : (w - 1 - off) / sw + 1;
                if (j1 > ow) j1 = ow;
                for (int64_t j = j0; j < j1; j++) {
                    const float v = s[j * sw + off];
                    dst[j] = v > dst[j] ? v : dst[j];
                }
            }
        }
    }
}
