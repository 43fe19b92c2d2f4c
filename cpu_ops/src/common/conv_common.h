/* conv_common.h - the tiling geometry and activation helpers shared by the convolution kernels
 * (conv2d at fp32, conv2d_lowp at bf16/int8, im2col), so each rule is written once. All static
 * inline: each kernel's translation unit, compiled once per ISA level, gets its own copy. */
#ifndef A2R_CONV_COMMON_H
#define A2R_CONV_COMMON_H

#include <string.h>

#include "a2r_isa.h"
#include "a2r_math.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* v rounded up to a multiple of m (v >= 0, m > 0). */
static inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* First o >= 0 with o*stride + offset >= 0, i.e. ceil(-offset / stride) (stride > 0). */
static inline int64_t first_valid(int64_t offset, int64_t stride) {
    return offset >= 0 ? 0 : (-offset + stride - 1) / stride;
}

/* Implicit GEMM's polyphase strip: rows per phase plane one tile of nt output columns reads,
 * strip rows wq wide. The tile starts anywhere inside a row (wq - 1), spans nt - 1 more columns,
 * and a tap reaches (kw-1)*dil_w/sw phase columns right and (kh-1)*dil_h/sh phase rows down. */
static inline int64_t strip_rows(const a2r_conv2d_shape *s, int64_t wq, int64_t nt) {
    return (wq - 1 + nt - 1 + (s->kw - 1) * s->dil_w / s->stride_w) / wq + 1 +
           (s->kh - 1) * s->dil_h / s->stride_h;
}

/* 3x3, stride 1, dilation 1, one group, not 1 -> 1 channel: where Winograd can run (F(4,3) at
 * fp32, conv2d/winograd.h; F(2,3) at bf16, conv2d_lowp/winograd_bf16.h). */
static inline int wino_able(const a2r_conv2d_shape *s) {
    return s->kh == 3 && s->kw == 3 && s->stride_h == 1 && s->stride_w == 1 && s->dil_h == 1 &&
           s->dil_w == 1 && s->groups == 1 && !(s->c == 1 && s->o == 1);
}

/* ph[j*eb + k] = row[ix0 + m*k + j] for j < m, k <= len, m = 2 or 4 (Winograd F(2,3), F(4,3):
 * tiles of m outputs), where row is input row iy of plane (h x w) and values outside the image
 * are 0: the stride-m patch columns of a row segment of len tiles as unit-stride arrays, zero
 * padding included (no padded copy). One pass over the row (the compiler's deinterleave); only
 * the k where some column falls outside the image take the checked loop. */
static inline void wino_split_row(const float *plane, int64_t h, int64_t w, int64_t iy,
                                  int64_t ix0, int64_t len, const int m, float *restrict ph,
                                  int64_t eb) {
    const int64_t n = len + 1;
    if (iy < 0 || iy >= h) {
        for (int j = 0; j < m; j++)
            for (int64_t k = 0; k < n; k++) ph[j * eb + k] = 0.0f;
        return;
    }
    const float *restrict row = plane + iy * w;
    /* [a, e): all m columns inside, 0 <= ix0 + m*k and ix0 + m*k + m - 1 <= w - 1 */
    const int64_t a = A2R_MIN(n, ix0 >= 0 ? 0 : (m - 1 - ix0) / m);
    const int64_t e = w - m - ix0 < 0 ? a : A2R_MAX(a, A2R_MIN(n, (w - m - ix0) / m + 1));
    const float *restrict src = row + ix0 + m * a;
    float *restrict p0 = ph + a, *restrict p1 = ph + eb + a;
    if (m == 2) {
        for (int64_t k = 0; k < e - a; k++) {
            p0[k] = src[2 * k];
            p1[k] = src[2 * k + 1];
        }
    } else { /* m = 4: two more phase rows */
        float *restrict p2 = ph + 2 * eb + a, *restrict p3 = ph + 3 * eb + a;
        for (int64_t k = 0; k < e - a; k++) {
            p0[k] = src[4 * k];
            p1[k] = src[4 * k + 1];
            p2[k] = src[4 * k + 2];
            p3[k] = src[4 * k + 3];
        }
    }
    for (int64_t part = 0; part < 2; part++) /* the k outside [a, e): before, then after */
        for (int64_t k = part ? e : 0; k < (part ? n : a); k++)
            for (int j = 0; j < m; j++) {
                const int64_t x = ix0 + m * k + j;
                ph[j * eb + k] = x >= 0 && x < w ? row[x] : 0.0f;
            }
}

/* 1 when every phase 0..stride-1 is read by some tap t*dil % stride, t < taps; else the
 * polyphase strip would copy planes nobody reads (a 1x1 stride-2 conv reads one of four). */
static inline int every_phase_read(int64_t taps, int64_t dil, int64_t stride) {
    if (stride > taps) return 0;
    for (int64_t ph = 0; ph < stride; ph++) {
        int hit = 0;
        for (int64_t t = 0; t < taps && !hit; t++) hit = t * dil % stride == ph;
        if (!hit) return 0;
    }
    return 1;
}

/* Implicit GEMM's tap offsets: off[(c*kh + i)*kw + j] for c < channels (input channels, or
 * channel lanes) is where tap (c, i, j) of column q reads, at strip[off + q], in a strip of
 * (channels, sh, sw, srows, wq): dy = i*dil_h, dx = j*dil_w lie in phase plane
 * (dy % sh, dx % sw) at row dy / sh, column dx / sw. */
static inline void strip_tap_offsets(const a2r_conv2d_shape *s, int64_t channels, int64_t srows,
                                     int64_t wq, int32_t *off) {
    for (int64_t c = 0, kk = 0; c < channels; c++)
        for (int64_t i = 0; i < s->kh; i++)
            for (int64_t j = 0; j < s->kw; j++, kk++) {
                const int64_t dy = i * s->dil_h, dx = j * s->dil_w;
                const int64_t plane = (c * s->stride_h + dy % s->stride_h) * s->stride_w +
                                      dx % s->stride_w;
                off[kk] = (int32_t)((plane * srows + dy / s->stride_h) * wq + dx / s->stride_w);
            }
}

/* act(v) (A2R_ACT_*; alpha: leaky relu's slope) for an activation known where it is inlined,
 * so each epilogue loop gets its own branch-free body. */
static inline float activate(float v, const int act, float alpha) {
    switch (act) {
    case A2R_ACT_RELU: return v > 0.0f ? v : 0.0f;
    case A2R_ACT_LEAKY_RELU: return v >= 0.0f ? v : alpha * v;
    case A2R_ACT_SILU: return a2r_silu1(v);
    default: return v;
    }
}

#if defined(__AVX2__) && !defined(__AVX512F__)
/* q[0..15] as two vectors of 128-bit halves, 0-3 | 8-11 and 4-7 | 12-15: one in-lane shuffle of
 * the pair puts the eight even (or the eight odd) elements in order. */
static inline void halves16(const float *q, __m256 *lo, __m256 *hi) {
    *lo = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(q)), _mm_loadu_ps(q + 8), 1);
    *hi = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(q + 4)), _mm_loadu_ps(q + 12),
                               1);
}
#endif

/* dst[t] = src[2t], t < n, of 32-bit elements (floats or int8/bf16 lanes), reading src[0 ..
 * 2n-2] only: stride-2 columns where one phase is wanted (im2col panels). At AVX2 halves16 and
 * one in-lane shuffle: the compiler's cross-lane vpermd pair costs about 4 cycles per 8 on Zen 2
 * (perf record of a loop over ops.Conv2d: with the loads it waits on, a third of a 16 -> 24
 * stride-2 conv at 512^2, when the strips were filled this way). */
static inline void evens32(void *restrict dst, const void *restrict src, int64_t n) {
    char *d = (char *)dst;
    const char *p = (const char *)src;
    int64_t t = 0;
#if defined(__AVX2__) && !defined(__AVX512F__)
    for (; t + 8 < n; t += 8) {
        __m256 lo, hi;
        halves16((const float *)(p + 8 * t), &lo, &hi);
        _mm256_storeu_ps((float *)(d + 4 * t), _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
    }
#endif
    for (; t < n; t++) memcpy(d + 4 * t, p + 8 * t, 4);
}

/* Phase px of a stride-sw strip row of wq columns: columns u in [*a, *e) read row[u*sw + px -
 * pad_w], inside the w of the row; the others are padding. */
static inline void phase_span(int64_t px, int64_t sw, int64_t pad_w, int64_t w, int64_t wq,
                              int64_t *a, int64_t *e) {
    *a = A2R_MIN(wq, first_valid(px - pad_w, sw));
    *e = A2R_MAX(*a, A2R_MIN(wq, first_valid(px - pad_w - w, sw)));
}

/* The two column phases of a stride-2 strip row: d[px][u] = row[2u + px - pad_w] where that
 * lies in [0, w), else the 32-bit pattern zero; u < wq. row: w 32-bit elements (floats, or
 * int8/bf16 channel lanes). One pass over the row, each element dealt once, instead of the row
 * read once per phase with evens32 (tools/compare_builds.py --conv 16,24,512,2, three runs on
 * Zen 2, 1 thread: 8.6-9.3 -> 8.4-8.5 ms). Below AVX2 the plain loop is the compiler's
 * deinterleave (vpermt2d at AVX-512, shufps at SSE2; not timed on those levels). */
static inline void deal_phases2(void *restrict d0, void *restrict d1, const void *restrict row,
                                int64_t w, int64_t pad_w, int64_t wq, uint32_t zero) {
    char *d[2] = {(char *)d0, (char *)d1};
    const char *src = (const char *)row;
    int64_t a[2], e[2], c[2];
    for (int px = 0; px < 2; px++) { /* phase px: u in [a, e), first read at column c */
        phase_span(px, 2, pad_w, w, wq, &a[px], &e[px]);
        c[px] = a[px] * 2 + px - pad_w;
    }
    /* c[0] and c[1] are neighbours: deal from the lower one */
    const int lo = c[0] <= c[1] ? 0 : 1, hi = 1 - lo;
    const int64_t n = A2R_MIN(e[lo] - a[lo], e[hi] - a[hi]);
    char *el = d[lo] + 4 * a[lo], *oh = d[hi] + 4 * a[hi];
    const char *p = src + 4 * c[lo];
    int64_t t = 0;
#if defined(__AVX2__) && !defined(__AVX512F__)
    for (; t + 8 <= n; t += 8) { /* evens32's half-loaded vectors, shuffled twice */
        __m256 v0, v1;
        halves16((const float *)(p + 8 * t), &v0, &v1);
        _mm256_storeu_ps((float *)(el + 4 * t), _mm256_shuffle_ps(v0, v1, _MM_SHUFFLE(2, 0, 2, 0)));
        _mm256_storeu_ps((float *)(oh + 4 * t), _mm256_shuffle_ps(v0, v1, _MM_SHUFFLE(3, 1, 3, 1)));
    }
#endif
    for (; t < n; t++) {
        memcpy(el + 4 * t, p + 8 * t, 4);
        memcpy(oh + 4 * t, p + 8 * t + 4, 4);
    }
    for (int px = 0; px < 2; px++) {
        for (int64_t u = 0; u < a[px]; u++) memcpy(d[px] + 4 * u, &zero, 4);
        for (int64_t u = a[px] + n; u < e[px]; u++) /* a phase one longer than the other */
            memcpy(d[px] + 4 * u, src + 4 * (2 * u + px - pad_w), 4);
        for (int64_t u = e[px]; u < wq; u++) memcpy(d[px] + 4 * u, &zero, 4);
    }
}

/* dst[t] = src[t*stride], t < n, of 32-bit elements (stride > 1): a strip's phase columns,
 * stride 2 through evens32. */
static inline void every_nth32(void *restrict dst, const void *restrict src, int64_t n,
                               int64_t stride) {
    if (stride == 2) {
        evens32(dst, src, n);
        return;
    }
    char *d = (char *)dst;
    const char *p = (const char *)src;
    for (int64_t t = 0; t < n; t++) memcpy(d + 4 * t, p + 4 * t * stride, 4);
}

/* The sw column phases of one strip row (the strip fills of conv2d and conv2d_lowp): phase px,
 * at d + px*pstride elements, gets d[u] = row[u*sw + px - pad_w] where that lies in [0, w),
 * else the 32-bit pattern zero, u < wq. row: w 32-bit elements (floats, or channel lanes), or
 * NULL for a padding row (every phase zero). Stride 2 deals both phases in one pass
 * (deal_phases2); other strides copy phase by phase. */
static inline void deal_phases(void *restrict d, int64_t pstride, const void *restrict row,
                               int64_t w, int64_t pad_w, int64_t wq, int64_t sw, uint32_t zero) {
    char *dst = (char *)d;
    const char *src = (const char *)row;
    if (row && sw == 2) {
        deal_phases2(dst, dst + 4 * pstride, row, w, pad_w, wq, zero);
        return;
    }
    for (int64_t px = 0; px < sw; px++, dst += 4 * pstride) {
        int64_t a = wq, e = wq; /* phase columns [a, e) fall inside the image */
        if (row) phase_span(px, sw, pad_w, w, wq, &a, &e);
        for (int64_t u = 0; u < a; u++) memcpy(dst + 4 * u, &zero, 4);
        if (e > a && sw == 1)
            memcpy(dst + 4 * a, src + 4 * (a - pad_w), (size_t)(4 * (e - a)));
        else if (e > a)
            every_nth32(dst + 4 * a, src + 4 * (a * sw + px - pad_w), e - a, sw);
        for (int64_t u = e; u < wq; u++) memcpy(dst + 4 * u, &zero, 4);
    }
}

/* How many rows ahead of the one being copied a strip fill prefetches: tried 2, 4 and 8 on
 * Zen 2 (a scratch loop over ops.Conv2d), alike within the noise; the fill's gain as a whole is
 * measured by tools/compare_builds.py (docs/architecture.md, the AVX2 level on Zen 2). */
#define PREFETCH_ROWS 4

/* Prefetch the k-th row a strip fill reads, in its order (channel step, strip row r, phase row
 * py): row (r0 + r)*sh + py - pad_h of the d channels of step k / (srows*sh) of x (the group's
 * cg planes of h x w elements of elem bytes), if it lies in x. A fill copies rows from several
 * planes a plane apart, which the hardware prefetcher picks up only after a few misses each. */
static inline void prefetch_row(const a2r_conv2d_shape *s, const void *x, int64_t srows,
                                int64_t r0, int64_t k, int64_t d, int64_t elem) {
    const int64_t per_step = srows * s->stride_h, c0 = k / per_step * d, at = k % per_step;
    const int64_t iy = (r0 + at / s->stride_h) * s->stride_h + at % s->stride_h - s->pad_h;
    const int64_t c1 = A2R_MIN(c0 + d, s->c / s->groups);
    if (iy < 0 || iy >= s->h) return;
    for (int64_t c = c0; c < c1; c++) {
        const char *row = (const char *)x + ((c * s->h + iy) * s->w) * elem;
        for (int64_t o = 0; o < s->w * elem; o += 64) __builtin_prefetch(row + o);
    }
}

#endif
