/* im2col kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * For each (channel, kernel tap) row and each output row, the valid x range is computed once, so
 * the inner loop has no bounds checks: zeros left, a unit-stride (or strided) copy, zeros right. */
#include <string.h>

#include "a2r_isa.h"
#include "conv_common.h"

/* dst[o] = src[o*S] for o < n. Inlined with a constant S the loads become one vector load group
 * (S = 2: even lanes via a shuffle); the generic S is scalar. */
static inline void gather_row(float *restrict dst, const float *restrict src, int64_t n,
                              const int64_t S) {
    for (int64_t o = 0; o < n; o++) dst[o] = src[o * S];
}

void A2R_KERNEL(a2r_im2col)(const float *restrict x, int64_t c, int64_t h, int64_t w,
                            int64_t kh, int64_t kw, int64_t stride_h, int64_t stride_w,
                            int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,
                            float *restrict out) {
    const int64_t oh = (h + 2 * pad_h - dil_h * (kh - 1) - 1) / stride_h + 1;
    const int64_t ow = (w + 2 * pad_w - dil_w * (kw - 1) - 1) / stride_w + 1;
    const int64_t rows = c * kh * kw;
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (rows * oh * ow > A2R_PAR_GRAIN)
    for (int64_t row = 0; row < rows; row++) {
        const int64_t j = row % kw, i = (row / kw) % kh, ci = row / (kw * kh);
        const float *plane = x + ci * h * w;
        float *restrict dst = out + row * oh * ow;
        const int64_t off_x = j * dil_w - pad_w; /* input x = ox*stride_w + off_x */
        const int64_t x0 = A2R_MIN(first_valid(off_x, stride_w), ow);
        const int64_t x1 = A2R_MAX(x0, A2R_MIN(ow, first_valid(off_x - w, stride_w)));
        for (int64_t oy = 0; oy < oh; oy++, dst += ow) {
            const int64_t iy = oy * stride_h - pad_h + i * dil_h;
            if (iy < 0 || iy >= h) {
                memset(dst, 0, (size_t)ow * sizeof *dst);
                continue;
            }
            const float *restrict src = plane + iy * w;
            memset(dst, 0, (size_t)x0 * sizeof *dst);
            const float *first = src + x0 * stride_w + off_x;
            switch (stride_w) {
            case 1: memcpy(dst + x0, first, (size_t)(x1 - x0) * sizeof *dst); break;
            case 2: gather_row(dst + x0, first, x1 - x0, 2); break;
            default: gather_row(dst + x0, first, x1 - x0, stride_w); break;
            }
            memset(dst + x1, 0, (size_t)(ow - x1) * sizeof *dst);
        }
    }
}
