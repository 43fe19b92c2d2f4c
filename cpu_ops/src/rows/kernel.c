/* rows kernel bodies (contract: a2r_kernels.h). Compiled once per ISA level. Softmax and
 * LayerNormalization over the last axis of a contiguous (rows, n) array, the attention and
 * token layers of transformer generators: their rows are short (16-64 in window attention), so
 * one call per row whose passes (max, e^, scale; mean, variance, write) find it in L1, rows
 * shared between threads. Sums are kept in vector lanes (a2r_vf), then folded (a2r_vhsum): the
 * order is fixed for a given n and level, so the result does not depend on the thread count. */
#include <math.h>

#include "a2r_isa.h"
#include "a2r_math.h"

/* sum of (x[i] - shift), and with square=1 of its squares, over n floats */
static inline float row_sum(const float *x, int64_t n, float shift, int square) {
    a2r_vf acc = a2r_vsplat(0.0f);
    const a2r_vf vs = a2r_vsplat(shift);
    int64_t i = 0;
    for (; i + A2R_VEC_FLOATS <= n; i += A2R_VEC_FLOATS) {
        const a2r_vf d = a2r_vload(x + i) - vs;
        acc += square ? d * d : d;
    }
    float s = a2r_vhsum(acc);
    for (; i < n; i++) s += square ? (x[i] - shift) * (x[i] - shift) : x[i] - shift;
    return s;
}

/* The largest of n floats (a NaN may be passed over or returned: either way the row's softmax
 * is NaN, through its sum). */
static inline float row_max(const float *x, int64_t n) {
    float m = x[0];
    int64_t i = 0;
    if (n >= A2R_VEC_FLOATS) {
        a2r_vf vmax = a2r_vload(x);
        for (i = A2R_VEC_FLOATS; i + A2R_VEC_FLOATS <= n; i += A2R_VEC_FLOATS) {
            const a2r_vf v = a2r_vload(x + i);
            vmax = a2r_vselect((a2r_vu)(v > vmax), v, vmax);
        }
        m = a2r_vhmax(vmax);
    }
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* y = e^(x - m) over n floats, returning their sum: e^-(m - x) by a2r_expneg0, so a -inf score
 * (a mask) weighs exactly 0. */
static inline float row_exp(const float *x, float *y, int64_t n, float m) {
    const a2r_vf vm = a2r_vsplat(m);
    a2r_vf acc = a2r_vsplat(0.0f);
    int64_t i = 0;
    for (; i + A2R_VEC_FLOATS <= n; i += A2R_VEC_FLOATS) {
        const a2r_vf e = a2r_vexpneg0(vm - a2r_vload(x + i));
        a2r_vstore(y + i, e);
        acc += e;
    }
    float s = a2r_vhsum(acc);
    for (; i < n; i++) {
        y[i] = a2r_expneg0(m - x[i]);
        s += y[i];
    }
    return s;
}

/* Rows per block of softmax_rows: a short row is a chain of dependent steps (max, exp, sum,
 * scale); the block's rows go through each step side by side, independent chains that keep
 * more of the core busy (131072 rows of 16 values, Zen 4, 1 thread: 4.2 ms one row at a time,
 * 2.1 ms in pairs, 2.0 ms in fours). */
#define SOFTMAX_BLOCK 4

void A2R_KERNEL(a2r_softmax_rows)(const float *x, float *y, int64_t rows, int64_t n) {
    /* y may equal x: each row is read before it is written. */
    const int64_t blocks = (rows + SOFTMAX_BLOCK - 1) / SOFTMAX_BLOCK;
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (rows * n > A2R_PAR_GRAIN)
    for (int64_t b = 0; b < blocks; b++) {
        const int64_t r0 = b * SOFTMAX_BLOCK, k = A2R_MIN(SOFTMAX_BLOCK, rows - r0);
        const float *xb = x + r0 * n;
        float *yb = y + r0 * n;
        float m[SOFTMAX_BLOCK], inv[SOFTMAX_BLOCK];
        for (int j = 0; j < k; j++) m[j] = row_max(xb + j * n, n);
        for (int j = 0; j < k; j++) inv[j] = 1.0f / row_exp(xb + j * n, yb + j * n, n, m[j]);
        for (int j = 0; j < k; j++)
            for (int64_t i = 0; i < n; i++) yb[j * n + i] *= inv[j];
    }
}

void A2R_KERNEL(a2r_layernorm_rows)(const float *x, int64_t rows, int64_t n, const float *scale,
                                    const float *bias, float eps, float *y) {
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (rows * n > A2R_PAR_GRAIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        /* sums of x - x[0]: a large common offset does not cost the mean its digits */
        const float mean = xr[0] + row_sum(xr, n, xr[0], 0) / (float)n;
        const float var = row_sum(xr, n, mean, 1) / (float)n;
        const float inv = (float)(1.0 / sqrt((double)var + (double)eps));
        if (bias)
            for (int64_t i = 0; i < n; i++) yr[i] = A2R_MADD(xr[i] - mean, inv * scale[i], bias[i]);
        else
            for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - mean) * (inv * scale[i]);
    }
}
