/* maxpool and avgpool kernel bodies (contract: a2r_kernels.h). Compiled once per ISA level.
 * One output row per iteration; each output pixel takes the max (the sum) over its window's taps
 * that fall inside the input: the padding never wins a max (the ONNX -inf padding) and adds 0
 * to a sum, which the caller's count per output pixel then divides. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "a2r_isa.h"

/* Output columns j whose tap column j*sw + off lies in [0, w): [*j0, *j1). */
static inline void inside_columns(int64_t off, int64_t sw, int64_t w, int64_t ow, int64_t *j0,
                                  int64_t *j1) {
    *j0 = off >= 0 ? 0 : (-off + sw - 1) / sw;
    *j1 = w - 1 - off < 0 ? 0 : (w - 1 - off) / sw + 1;
    if (*j1 > ow) *j1 = ow;
}

/* dst[j] = max(dst[j], s[j * SW]), j in [j0, j1) (a NaN tap never wins). max_pool_row calls it
 * with s = its row buffer + the tap's offset (the buffer's left margin keeps that inside the
 * allocation) and j from j0: 1.3x faster than with both pointers moved to j0 as tap_row does
 * (3x3 s2 on 64 x 128^2: 0.36 against 0.46 ms). */
static inline void max_taps(float *restrict dst, const float *restrict s, int64_t j0,
                            int64_t j1, const int64_t SW) {
    for (int64_t j = j0; j < j1; j++) {
        const float v = s[j * SW];
        dst[j] = v > dst[j] ? v : dst[j];
    }
}

/* dst[j] = max(dst[j], s[j * SW + off]) (a NaN tap never wins) or dst[j] += s[j * SW + off],
 * j in [j0, j1) (inside_columns keeps j * SW + off inside the row). Inlined with SW a constant
 * for strides 1 and 2, whose loads the compiler then vectorises with whole vectors and
 * shuffles; with the stride a run-time value it did less (1 thread, Zen 4, fastest of 30:
 * AveragePool 2x2 s2 on 32 x 256^2 0.56 -> 0.44 ms). */
static inline void tap_row(float *restrict dst, const float *restrict s, int64_t off,
                           int64_t j0, int64_t j1, const int64_t SW, int sum) {
    if (j1 <= j0)
        return;
    dst += j0; /* pointers inside the rows (s + off may lie before the input) */
    s += j0 * SW + off;
    if (sum)
        for (int64_t j = 0; j < j1 - j0; j++) dst[j] += s[j * SW];
    else
        max_taps(dst, s, 0, j1 - j0, SW);
}

/* Output row i of one plane by taps: dst (ow) = the max (count NULL) or the sum divided by
 * count[i*ow + j] of each window's taps inside the input. Inlined with count a known NULL or
 * not, so the tap loop has no branch on the mode. */
static inline void tap_pool_row(const float *restrict src, int64_t h, int64_t w, int64_t kh,
                                int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                                int64_t dh, int64_t dw, int64_t ow, int64_t i,
                                const float *restrict count, float *restrict dst) {
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
                tap_row(dst, s, off, j0, j1, 1, count != NULL);
            else if (sw == 2)
                tap_row(dst, s, off, j0, j1, 2, count != NULL);
            else
                tap_row(dst, s, off, j0, j1, sw, count != NULL);
        }
    }
    if (count) {
        const float *c = count + i * ow;
        for (int64_t j = 0; j < ow; j++) dst[j] /= c[j];
    }
}

/* Max output row i through a row buffer (cols: w floats after a margin of pw): the max of the
 * window's input rows first, one contiguous pass each, then each tap column over cols: kh + kw
 * passes instead of kh * kw (the max of any grouping of the taps is the same value: a NaN
 * never wins either way). 1 thread, Zen 4, fastest of 30: MaxPool 3x3 s2 on 64 x 128^2
 * 0.59 ms by taps at a run-time stride, 0.48 at a constant one, 0.34-0.36 this way; s1 1.52,
 * 1.16, 0.77-0.79 ms. The average keeps its taps' order (a sum's rounding depends on it). */
static inline void max_pool_row(const float *restrict src, int64_t h, int64_t w, int64_t kh,
                                int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                                int64_t dh, int64_t dw, int64_t ow, int64_t i,
                                float *restrict cols, float *restrict dst) {
    for (int64_t x = 0; x < w; x++) cols[x] = -INFINITY;
    for (int64_t a = 0; a < kh; a++) {
        const int64_t row = i * sh - ph + a * dh;
        if (row >= 0 && row < h) max_taps(cols, src + row * w, 0, w, 1);
    }
    for (int64_t j = 0; j < ow; j++) dst[j] = -INFINITY;
    for (int64_t b = 0; b < kw; b++) {
        const int64_t off = b * dw - pw;   /* >= -pw: cols + off lies in the margin or after */
        int64_t j0, j1;
        inside_columns(off, sw, w, ow, &j0, &j1);
        if (sw == 1)
            max_taps(dst, cols + off, j0, j1, 1);
        else if (sw == 2)
            max_taps(dst, cols + off, j0, j1, 2);
        else
            max_taps(dst, cols + off, j0, j1, sw);
    }
}

/* Both pools over nc planes, an output row per iteration; the max through a row buffer per
 * thread (by taps where it cannot be had). */
static inline void pool(const float *restrict x, int64_t nc, int64_t h, int64_t w, int64_t kh,
                        int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh,
                        int64_t dw, int64_t oh, int64_t ow, const float *restrict count,
                        float *restrict y) {
    const int64_t nrows = nc * oh;
    #pragma omp parallel num_threads(a2r_num_threads()) if (nrows * ow * kh * kw > A2R_PAR_GRAIN)
    {
        /* the row buffer on a 64-byte boundary after at least pw floats (4 bytes off the
         * boundary, the pool was 20% slower) */
        float *buf = count ? NULL : malloc((size_t)(pw + w + 16) * sizeof *buf);
        float *cols = buf ? (float *)(((uintptr_t)(buf + pw) + 63) & ~(uintptr_t)63) : NULL;
        #pragma omp for schedule(static)
        for (int64_t r = 0; r < nrows; r++) {
            const float *src = x + r / oh * h * w;
            if (cols)
                max_pool_row(src, h, w, kh, kw, sh, sw, ph, pw, dh, dw, ow, r % oh, cols,
                             y + r * ow);
            else
                tap_pool_row(src, h, w, kh, kw, sh, sw, ph, pw, dh, dw, ow, r % oh, count,
                             y + r * ow);
        }
        free(buf);
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
