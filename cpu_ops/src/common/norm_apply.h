/* norm_apply.h - the apply pass of the per-plane normalisations (adain, adalin): once a plane's
 * coefficients are known, y = act((x - mu) * a + sm [+ residual]) over a range of it, with the
 * fused activation (A2R_ACT_*; alpha is the leaky slope). */
#ifndef A2R_NORM_APPLY_H
#define A2R_NORM_APPLY_H

#include "a2r_isa.h"
#include "a2r_kernels.h"
#include "a2r_math.h"

/* The loops of a2r_norm_apply, the residual term R(i) as a parameter (nothing or + r[i]). */
#define A2R_NORM_APPLY_LOOPS(R, VR)                                                             \
    switch (activation) {                                                                       \
    case A2R_ACT_SILU: { /* whole vectors through a2r_vsilu (same result as the tail's) */     \
        const a2r_vf vmu = a2r_vsplat(mu), va = a2r_vsplat(a), vsm = a2r_vsplat(sm);            \
        int64_t i = 0;                                                                          \
        for (; i + A2R_VEC_FLOATS <= n; i += A2R_VEC_FLOATS)                                    \
            a2r_vstore(y + i, a2r_vsilu(A2R_VMADD(a2r_vload(x + i) - vmu, va, vsm) VR(i)));     \
        for (; i < n; i++) y[i] = a2r_silu1(A2R_MADD(x[i] - mu, a, sm) R(i));                   \
        break;                                                                                  \
    }                                                                                           \
    case A2R_ACT_RELU:                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                       \
            const float v = A2R_MADD(x[i] - mu, a, sm) R(i);                                    \
            y[i] = v > 0.0f ? v : 0.0f;                                                         \
        }                                                                                       \
        break;                                                                                  \
    case A2R_ACT_LEAKY_RELU:                                                                    \
        for (int64_t i = 0; i < n; i++) {                                                       \
            const float v = A2R_MADD(x[i] - mu, a, sm) R(i);                                    \
            y[i] = v >= 0.0f ? v : alpha * v;                                                   \
        }                                                                                       \
        break;                                                                                  \
    default:                                                                                    \
        for (int64_t i = 0; i < n; i++) y[i] = A2R_MADD(x[i] - mu, a, sm) R(i);                 \
    }
#define A2R_NO_RESIDUAL(i)
#define A2R_PLUS_RESIDUAL(i) +r[i]
#define A2R_PLUS_VRESIDUAL(i) +a2r_vload(r + i)

/* y = act((x - mu) * a + sm + r) over n values; r may be NULL (no residual). y may equal x or r
 * (in place), so no restrict: each element is read before it is written. (x - mu) first: with a
 * large common offset, x*a + (sm - mu*a) would cancel badly. */
static inline void a2r_norm_apply(const float *x, const float *r, float *y, int64_t n, float mu,
                                  float a, float sm, int activation, float alpha) {
    if (r) {
        A2R_NORM_APPLY_LOOPS(A2R_PLUS_RESIDUAL, A2R_PLUS_VRESIDUAL)
    } else {
        A2R_NORM_APPLY_LOOPS(A2R_NO_RESIDUAL, A2R_NO_RESIDUAL)
    }
}

/* Whether the apply of n values from x (and r) into y streams y: out of place only (in place,
 * each line of y was just read as x or r and is cached: streaming it out measured 1.5x slower,
 * adain 64 x 256^2, 1 and 2 threads), where the op's footprint (bytes read and written) reaches
 * a2r_stream_min_bytes(), and the level has streaming stores. */
static inline int a2r_norm_streams(const float *x, const float *r, const float *y, int64_t n) {
#ifdef A2R_VSTREAM
    return y != x && y != r &&
           (2 + (r != NULL)) * n * (int64_t)sizeof(float) >= a2r_stream_min_bytes();
#else
    (void)x, (void)r, (void)y, (void)n;
    return 0;
#endif
}

/* a2r_norm_apply; with stream (a2r_norm_streams), y's whole cache lines streamed from blocks
 * computed in L1 and the partial lines at its two ends by plain stores. The caller ends its
 * streaming with a2r_stream_fence(). */
#define A2R_NORM_STREAM_BLOCK 1024
static inline void a2r_norm_apply_to(int stream, const float *x, const float *r, float *y,
                                     int64_t n, float mu, float a, float sm, int activation,
                                     float alpha) {
#ifdef A2R_VSTREAM
    if (stream) {
        const int64_t head = A2R_MIN(n, (int64_t)((-(uintptr_t)y & 63) / sizeof(float)));
        const int64_t end = head + (n - head) / A2R_LINE_FLOATS * A2R_LINE_FLOATS;
        float block[A2R_NORM_STREAM_BLOCK] __attribute__((aligned(64)));
        a2r_norm_apply(x, r, y, head, mu, a, sm, activation, alpha);
        for (int64_t i = head, m; i < end; i += m) {
            m = A2R_MIN(end - i, A2R_NORM_STREAM_BLOCK);
            a2r_norm_apply(x + i, r ? r + i : NULL, block, m, mu, a, sm, activation, alpha);
            a2r_stream_lines(y + i, block, m);
        }
        a2r_norm_apply(x + end, r ? r + end : NULL, y + end, n - end, mu, a, sm, activation,
                       alpha);
        return;
    }
#endif
    (void)stream;
    a2r_norm_apply(x, r, y, n, mu, a, sm, activation, alpha);
}

#endif
