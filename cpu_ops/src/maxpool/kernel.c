/* maxpool and avgpool kernel bodies (contract: a2r_kernels.h). Compiled once per ISA level.
 * One output row per iteration; each output pixel takes the max (the sum) over its window's taps
 * that fall inside the input: the padding never wins a max (the ONNX -inf padding) and adds 0
 * to a sum, which the caller's count per output pixel then divides. */
#include <math.h>
#include <stddef.h>

#include "a2r_isa.h"

/* Output columns j whose tap column j*sw + off lies in [0, w): [*j0, *j1). */
static inline void inside_columns(int64_t off, int64_t sw, int64_t w, int64_t ow, int64_t *j0,
                                  int64_t *j1) {
    *j0 = off >= 0 ? 0 : (-off + sw - 1) / sw;
    *j1 = w - 1 - off < 0 ? 0 : (w - 1 - off) / sw + 1;
    if (*j1 > ow) *j1 = ow;
}

/* dst[j] = max(dst[j], s[j * SW]) (a NaN tap never wins) or dst[j] += s[j * SW], j in
 * [j0, j1). Inlined with SW a constant for strides 1 and 2, whose loads the compiler then
 * vectorises with whole vectors and shuffles; with the stride a run-time value it did less
 * (1 thread, Zen 4, fastest of 30: MaxPool 3x3 s2 on 64 x 128^2 0.59 -> 0.48 ms, s1 1.52 ->
 * 1.16 ms; AveragePool 2x2 s2 on 32 x 256^2 0.56 -> 0.44 ms). */
static inline void tap_row(float *restrict dst, const float *restrict s, int64_t j0, int64_t j1,
                           const int64_t SW, int sum) {
    if (sum) {
        for (int64_t j = j0; j < j1; j++) dst[j] += s[j * SW];
    } else {
        for (int64_t j = j0; j < j1; j++) {
            const float v = s[j * SW];
            dst[j] = v > dst[j] ? v : dst[j];
        }
    }
}

/* Both pools: count NULL, the max of each window's taps inside the input; else their sum
 * divided by count[i*ow + j]. Inlined into each kernel with count a known NULL or not, so the
 * tap loop has no branch on the mode. */
static inline void pool(const float *restrict x, int64_t nc, int64_t h, int64_t w, int64_t kh,
                        int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh,
                        int64_t dw, int64_t oh, int64_t ow, const float *restrict count,
                        float *restrict y) {
    const int64_t nrows = nc * oh;
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (nrows * ow * kh * kw > A2R_PAR_GRAIN)
    for (int64_t r = 0; r < nrows; r++) {
        const int64_t plane = r / oh, i = r % oh;
        const float *src = x + plane * h * w;
        float *restrict dst = y + r * ow;
        for (int64_t j = 0; j < ow; j++) dst[j] = count ? 0.0f : -INFINITY;
        for (int64_t a = 0; a < kh; a++) {
            const int64_t row = i * sh - ph + a * dh;
            if (row < 0 || row >= h) continue;
            const float *s = src + row * w;
            for (int64_t b = 0; b < kw; b++) {
                const int64_t off = b * dw - pw;
                int64_t j0, j1;
                inside_columns(off, sw, w, ow, &j0, &j1);
                if (sw == 1)
                    tap_row(dst, s + off, j0, j1, 1, count != NULL);
                else if (sw == 2)
                    tap_row(dst, s + off, j0, j1, 2, count != NULL);
                else
                    tap_row(dst, s + off, j0, j1, sw, count != NULL);
            }
        }
        if (count) {
            const float *c = count + i * ow;
            for (int64_t j = 0; j < ow; j++) dst[j] /= c[j];
        }
    }
}

void A2R_KERNEL(a2r_maxpool)(const float *restrict x, int64_t nc, int64_t h, int64_t w,
                             int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                             int64_t pw, int64_t dh, int64_t dw, int64_t oh, int64_t ow,
                             float *restrict y) {
    pool(x, nc, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, NULL, y);
}

void A2R_KERNEL(a2r_avgpool)(const float *restrict x, int64_t nc, int64_t h, int64_t w,
                             int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                             int64_t pw, int64_t dh, int64_t dw, int64_t oh, int64_t ow,
                             const float *restrict count, float *restrict y) {
    pool(x, nc, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, count, y);
}
