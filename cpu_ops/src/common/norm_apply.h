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

/* a2r_norm_apply into y, through cache-bypassing stores when stream is set (the op's footprint
 * reaches a2r_stream_min_bytes()) and the level has them: each block is computed into an L1
 * buffer first. The caller ends its streaming with a2r_stream_fence(). */
#define A2R_NORM_STREAM_BLOCK 1024
static inline void a2r_norm_apply_to(int stream, const float *x, const float *r, float *y,
                                     int64_t n, float mu, float a, float sm, int activation,
                                     float alpha) {
#ifndef A2R_VSTREAM
    stream = 0; /* the block and its copy would only cost */
#endif
    if (!stream) {
        a2r_norm_apply(x, r, y, n, mu, a, sm, activation, alpha);
        return;
    }
    float block[A2R_NORM_STREAM_BLOCK];
    for (int64_t i = 0, m; i < n; i += m) {
        m = A2R_MIN(n - i, A2R_NORM_STREAM_BLOCK - (i ? 0 : a2r_stream_skew(y)));
        a2r_norm_apply(x + i, r ? r + i : NULL, block, m, mu, a, sm, activation, alpha);
        a2r_stream_floats(y + i, block, m);
    }
}

#endif
