/* guided_filter kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 *
 * He et al. guided filter as one streaming sweep per row band, two stages r rows apart:
 *   stage 1, row m: running column sums of the k1 quantities I_c, I_c*I_d, p_s, I_c*p_s
 *                   over the 2r+1 rows around m; horizontal window sums; a, b of row m into a ring;
 *   stage 2, row y: running column sums of a, b over the rows around y (read from the ring);
 *                   horizontal window sums; q = mean_a . I + mean_b; with detail != 0,
 *                   out = q + detail * (p - q) (base + detail layer) in the same row pass.
 * Every quantity is a planar row of w floats (inner loops run along x, unit stride). Borders
 * reflect "cba|abc" with period 2n for any r (OpenCV borderInterpolate, BORDER_REFLECT).
 * Numerics follow cv2.ximgproc.guidedFilter: eps on the diagonal of the guide covariance; a colour
 * guide inverts (Sigma + eps I) by cofactors, and when eps < 1e-2 a |det| < 1e-6 is taken as 1.
 * Two band algorithms, one file each:
 *   exact_band.h (gf_band, windows two or more periods wide): running sums in double (exact for
 *   float32 terms: no drift over long columns);
 *   float_band.h (gf_band_float, any guide, window narrower than two periods): float running
 *   sums, replaced by fresh sums every GF_RESUM_ROWS rows (bound there), in padded rows whose
 *   reflected margins make the horizontal pass copy-free; with a gray guide the (x, x*y)
 *   quantity pairs are updated in one pass; with a gray src too, the last horizontal pass is
 *   fused into the a, b and output passes (gf_t.fused).
 * This file: the shared row machinery (reflection, planar rows, window sums, the per-pixel linear
 * models), the scratch and the entry point.
 * The window sums and the per-pixel algebra are float32, as in OpenCV.
 * Threads: the rows are split into bands, one per thread; each band recomputes stage 1 on its r
 * halo rows. Scratch: one malloc per band, O((k1 + k2) * w + ring rows * k2 * w).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "a2r_isa.h"

/* Horizontal windows up to this length use vectorised block sums (about L/16 + 3 passes over the
 * row); longer ones a serial running sum in double (O(1) per pixel, but one dependency chain). */
#define GF_BLOCK_MAX 64

/* OpenCV ximgproc's colour-guide guard (guided_filter.cpp, ComputeCovGuideInv_ParBody): with
 * eps < 1e-2 a determinant below 1e-6 in magnitude is replaced by 1. Kept to match cv2. */
#define GF_GUARD_EPS 1e-2f
#define GF_GUARD_DET 1e-6f

/* Buffers are carved at multiples of 64 bytes (one cache line, one zmm). */
#define GF_ALIGN 64

typedef struct {
    const float *guide, *src;
    float *out;
    int64_t gc, sc, h, w, r;
    float eps, detail;
    int64_t k1, k2;   /* quantities per pixel in stage 1 and stage 2 (a: sc*gc, b: sc) */
    int64_t ring;     /* rows of a, b kept: min(2r + 2, h) */
    /* horizontal window, after removing whole periods: sum_k<hlen c[reflect(x + hstart + k)]
     * + hfull * (2 * sum of the row) */
    int64_t hlen, hstart, hfull;
    int64_t pad_len;  /* floats of one padded row: w + hlen - 1 */
    int64_t resum;    /* float band: running sums replaced by fresh ones every this many rows */
    int fast;         /* window narrower than two periods: gf_band_float */
    int fused;        /* fast, gray guide and src, at most 5 window terms: float_band.h fuses them */
} gf_t;

typedef struct {
    double *cs1, *cs2;           /* running column sums: k1 * w, k2 * w */
    float *sum1, *sum2;          /* window sums of the current row: k1 * w, k2 * w */
    float *pad, *s4, *s16;       /* horizontal pass: pad_len each */
    float *ga, *gb, *sa, *sb;    /* planar input rows (new, old): gc * w, gc * w, sc * w, sc * w */
    float *inv;                  /* colour guide: 6 * w inverse covariance entries */
    float *oq;                   /* planar output row: sc * w */
    float *ringbuf;              /* ring * k2 * w */
    float *cf1, *cf2;            /* float band: running sums, k1 (k2) padded rows of pad_len */
    float *nf1, *nf2;            /* float band: the fresh sums that replace them, same shape */
    float *blocks, *zero;        /* fused: s4, s16 rows of each quantity ((k1 + k2) * 2 * pad_len);
                                  * a row of w zeros */
    float *srows;                /* float band: ring planar guide (gc > 1) and src (sc > 1) rows */
    int64_t *stag;               /* image row held by each srows slot (-1: none) */
    int64_t *cnt;                /* h row multiplicities of one window */
    void *block;
} gf_scratch;

static inline int64_t gf_reflect(int64_t p, int64_t n) {
    if (n == 1) return 0;
    const int64_t period = 2 * n;
    p %= period;
    if (p < 0) p += period;
    return p < n ? p : period - 1 - p;
}

/* cnt[j] = how many rows v of the window [c - r, c + r] reflect to row j. */
static void gf_window_counts(int64_t c, int64_t r, int64_t n, int64_t *cnt) {
    const int64_t len = 2 * r + 1, period = 2 * n;
    const int64_t full = len / period; /* each whole period holds every row twice */
    for (int64_t j = 0; j < n; j++) cnt[j] = 2 * full;
    for (int64_t i = 0, v = c - r; i < len % period; i++, v++) cnt[gf_reflect(v, n)]++;
}

/* --- planar rows ------------------------------------------------------------------------------ */

static void gf_deinterleave(const float *restrict in, int64_t n, int64_t w, float *restrict out) {
    if (n == 3) {
        float *restrict o0 = out, *restrict o1 = out + w, *restrict o2 = out + 2 * w;
        for (int64_t x = 0; x < w; x++) {
            o0[x] = in[3 * x];
            o1[x] = in[3 * x + 1];
            o2[x] = in[3 * x + 2];
        }
    } else if (n == 2) {
        float *restrict o0 = out, *restrict o1 = out + w;
        for (int64_t x = 0; x < w; x++) {
            o0[x] = in[2 * x];
            o1[x] = in[2 * x + 1];
        }
    } else {
        for (int64_t c = 0; c < n; c++)
            for (int64_t x = 0; x < w; x++) out[c * w + x] = in[x * n + c];
    }
}

static void gf_interleave(const float *restrict in, int64_t n, int64_t w, float *restrict out) {
    if (n == 3) {
        const float *restrict i0 = in, *restrict i1 = in + w, *restrict i2 = in + 2 * w;
        for (int64_t x = 0; x < w; x++) {
            out[3 * x] = i0[x];
            out[3 * x + 1] = i1[x];
            out[3 * x + 2] = i2[x];
        }
    } else if (n == 2) {
        const float *restrict i0 = in, *restrict i1 = in + w;
        for (int64_t x = 0; x < w; x++) {
            out[2 * x] = i0[x];
            out[2 * x + 1] = i1[x];
        }
    } else {
        for (int64_t c = 0; c < n; c++)
            for (int64_t x = 0; x < w; x++) out[x * n + c] = in[c * w + x];
    }
}

/* Planar guide and src rows of image row j: pointers into the input when one channel. */
static void gf_rows(const gf_t *g, int64_t j, float *gbuf, float *sbuf, const float **gp,
                    const float **sp) {
    const float *grow = g->guide + j * g->w * g->gc, *srow = g->src + j * g->w * g->sc;
    if (g->gc == 1) {
        *gp = grow;
    } else {
        gf_deinterleave(grow, g->gc, g->w, gbuf);
        *gp = gbuf;
    }
    if (g->sc == 1) {
        *sp = srow;
    } else {
        gf_deinterleave(srow, g->sc, g->w, sbuf);
        *sp = sbuf;
    }
}

/* Stage-1 quantity q of planar rows (gp, sp): *x times *y (y NULL for a linear quantity).
 * Order: I_c (gc), I_c*I_d for c <= d (gc*(gc+1)/2), p_s (sc), I_c*p_s (s major, sc*gc). */
static void gf_quantity(const gf_t *g, int64_t q, const float *gp, const float *sp,
                        const float **x, const float **y) {
    const int64_t w = g->w, gc = g->gc, npair = gc * (gc + 1) / 2;
    if (q < gc) {
        *x = gp + q * w;
        *y = NULL;
        return;
    }
    q -= gc;
    if (q < npair) {
        int64_t c = 0;
        while (q >= gc - c) q -= gc - c++;
        *x = gp + c * w;
        *y = gp + (c + q) * w;
        return;
    }
    q -= npair;
    if (q < g->sc) {
        *x = sp + q * w;
        *y = NULL;
        return;
    }
    q -= g->sc;
    *x = sp + (q / gc) * w;
    *y = gp + (q % gc) * w;
}


/* --- horizontal window sums ------------------------------------------------------------------- */

/* The horizontal pass reads its rows at every offset, and a 64-byte load at an offset not a
 * multiple of 16 floats always spans two cache lines (a 32-byte one half the time): at the AVX-512
 * level these loops run faster with 256-bit vectors (1024^2, r = 8, gray guide: the window sums
 * 0.26 -> 0.20 ns per pixel and quantity in isolation, the whole filter 5-10%). */
#if defined(__AVX512F__)
#define GF_HPASS __attribute__((target("prefer-vector-width=256")))
#else
#define GF_HPASS
#endif

/* out[x] = t0[x] + t1[x] + ... (nt <= 5 terms; nt = 5 only without acc), added to out when acc. */
GF_HPASS static void gf_add_terms(float *restrict out, const float *const *t, int nt, int acc,
                                  int64_t n) {
    const float *restrict a = t[0], *restrict b = t[nt > 1], *restrict c = t[nt > 2 ? 2 : 0],
                *restrict d = t[nt > 3 ? 3 : 0], *restrict e = t[nt > 4 ? 4 : 0];
    switch (nt * 2 + acc) {
    case 2: for (int64_t x = 0; x < n; x++) out[x] = a[x]; break;
    case 3: for (int64_t x = 0; x < n; x++) out[x] += a[x]; break;
    case 4: for (int64_t x = 0; x < n; x++) out[x] = a[x] + b[x]; break;
    case 5: for (int64_t x = 0; x < n; x++) out[x] += a[x] + b[x]; break;
    case 6: for (int64_t x = 0; x < n; x++) out[x] = (a[x] + b[x]) + c[x]; break;
    case 7: for (int64_t x = 0; x < n; x++) out[x] += (a[x] + b[x]) + c[x]; break;
    case 8: for (int64_t x = 0; x < n; x++) out[x] = (a[x] + b[x]) + (c[x] + d[x]); break;
    case 9: for (int64_t x = 0; x < n; x++) out[x] += (a[x] + b[x]) + (c[x] + d[x]); break;
    default: for (int64_t x = 0; x < n; x++) out[x] = ((a[x] + b[x]) + (c[x] + d[x])) + e[x]; break;
    }
}

/* Terms a window of len <= GF_BLOCK_MAX is summed from (block sums below): t[0..nt) with
 * out[x] = sum t[k][x]; returns nt (<= 10). The window is nq16 blocks of 16 (s16[j] =
 * s4[j] + s4[j+4] + s4[j+8] + s4[j+12]), nq4 blocks of 4 (s4[j] = pad[j..j+3]) and up to 3
 * single terms. Below 32 the s16 pass (4 loads per output) costs more than the s4 terms it
 * replaces. */
#define GF_NQ16(len) ((len) >= 32 ? (len) / 16 : 0)
#define GF_NQ4(len) (((len) - 16 * GF_NQ16(len)) / 4)
#define GF_NTERMS(len) (GF_NQ16(len) + GF_NQ4(len) + (len) % 4)

static int gf_window_terms(int64_t len, const float *pad, const float *s4, const float *s16,
                           const float **t) {
    const int64_t nq16 = GF_NQ16(len), nq4 = GF_NQ4(len), n1 = len % 4;
    int nt = 0;
    int64_t off = 0;
    for (int64_t i = 0; i < nq16; i++, off += 16) t[nt++] = s16 + off;
    for (int64_t i = 0; i < nq4; i++, off += 4) t[nt++] = s4 + off;
    for (int64_t i = 0; i < n1; i++, off += 1) t[nt++] = pad + off;
    return nt;
}

/* The block sums s4 (and s16 when the window uses it) of pad, for outputs x < n. */
GF_HPASS static void gf_window_blocks(const float *restrict pad, int64_t n, int64_t len,
                                      float *restrict s4, float *restrict s16) {
    if (len >= 4)
        for (int64_t j = 0; j < n + len - 4; j++)
            s4[j] = (pad[j] + pad[j + 1]) + (pad[j + 2] + pad[j + 3]);
    if (len >= 32)
        for (int64_t j = 0; j < n + len - 16; j++)
            s16[j] = (s4[j] + s4[j + 4]) + (s4[j + 8] + s4[j + 12]);
}

/* Sum of 5 terms in gf_add_terms' order; fewer terms are padded with a row of zeros (x + 0 = x:
 * the same bits as the shorter sum). */
static inline float gf_sum5(const float *const *t, int64_t x) {
    return ((t[0][x] + t[1][x]) + (t[2][x] + t[3][x])) + t[4][x];
}

/* out[x] = sum_{k < len} pad[x + k], x < n; pad holds n + len - 1 floats. */
GF_HPASS static void gf_window_sums(const float *restrict pad, int64_t n, int64_t len,
                                    float *restrict out, float *restrict s4,
                                    float *restrict s16) {
    if (len > GF_BLOCK_MAX) {
        double s = 0.0;
        for (int64_t k = 0; k < len; k++) s += pad[k];
        for (int64_t x = 0; x < n; x++) {
            out[x] = (float)s;
            if (x + 1 < n) s += (double)pad[x + len] - (double)pad[x];
        }
        return;
    }
    gf_window_blocks(pad, n, len, s4, s16);
    const float *t[10];
    const int nt = gf_window_terms(len, pad, s4, s16, t);
    /* The first pass takes up to 5 terms (len 17: one pass), later ones add up to 4. */
    const int first = A2R_MIN(nt, 5);
    gf_add_terms(out, t, first, 0, n);
    for (int i = first; i < nt; i += 4) gf_add_terms(out, t + i, A2R_MIN(nt - i, 4), 1, n);
}

/* --- per-pixel linear models ------------------------------------------------------------------ */

/* c ? a : b as bit operations: a plain ?: before a division is turned into a branch (the
 * division may trap), which stops the vectoriser. */
static inline float gf_select(int c, float a, float b) {
    const uint32_t m = -(uint32_t)c;
    uint32_t ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    ua = (ua & m) | (ub & ~m);
    memcpy(&a, &ua, sizeof a);
    return a;
}

/* Gray guide, one channel: a, b from the window sums of I, I*I, p, I*p. */
static inline void gf_gray_ab(float SI, float SII, float Sp, float SIp, float ia, float eps,
                              float *a, float *b) {
    const float mI = SI * ia, mp = Sp * ia;
    const float var = SII * ia - mI * mI;
    const float cov = SIp * ia - mI * mp;
    const float ak = cov / (var + eps);
    *a = ak;
    *b = mp - ak * mI;
}

/* a, b of one row from stage-1 window sums (sum1), written as planes into slot. */
static void gf_coefficients(const gf_t *g, gf_scratch *s, float *slot) {
    const int64_t w = g->w, sc = g->sc;
    const float ia = (float)(1.0 / ((double)(2 * g->r + 1) * (double)(2 * g->r + 1))), eps = g->eps;
    const float *sum = s->sum1;
    if (g->gc == 1) {
        const float *restrict SI = sum, *restrict SII = sum + w;
        for (int64_t k = 0; k < sc; k++) {
            const float *restrict Sp = sum + (2 + k) * w, *restrict SIp = sum + (2 + sc + k) * w;
            float *restrict a = slot + k * w, *restrict b = slot + (sc + k) * w;
            for (int64_t x = 0; x < w; x++) gf_gray_ab(SI[x], SII[x], Sp[x], SIp[x], ia, eps, a + x, b + x);
        }
        return;
    }
    /* Colour guide: symmetric inverse of Sigma + eps I by cofactors (OpenCV's order). */
    const float *restrict S0 = sum, *restrict S1 = sum + w, *restrict S2 = sum + 2 * w;
    const float *restrict S00 = sum + 3 * w, *restrict S01 = sum + 4 * w, *restrict S02 = sum + 5 * w,
                *restrict S11 = sum + 6 * w, *restrict S12 = sum + 7 * w, *restrict S22 = sum + 8 * w;
    float *restrict i00 = s->inv, *restrict i01 = s->inv + w, *restrict i02 = s->inv + 2 * w,
          *restrict i11 = s->inv + 3 * w, *restrict i12 = s->inv + 4 * w, *restrict i22 = s->inv + 5 * w;
    const float det_min = eps < GF_GUARD_EPS ? GF_GUARD_DET : 0.0f; /* 0: guard off */
    /* ivdep: the planes are disjoint; 9 inputs x 6 outputs exceed GCC's run-time alias checks. */
    #pragma GCC ivdep
    for (int64_t x = 0; x < w; x++) {
        const float m0 = S0[x] * ia, m1 = S1[x] * ia, m2 = S2[x] * ia;
        const float s00 = S00[x] * ia - m0 * m0 + eps, s01 = S01[x] * ia - m0 * m1,
                    s02 = S02[x] * ia - m0 * m2, s11 = S11[x] * ia - m1 * m1 + eps,
                    s12 = S12[x] * ia - m1 * m2, s22 = S22[x] * ia - m2 * m2 + eps;
        const float c00 = s11 * s22 - s12 * s12, c01 = s12 * s02 - s22 * s01,
                    c02 = s01 * s12 - s02 * s11, c11 = s22 * s00 - s02 * s02,
                    c12 = s02 * s01 - s00 * s12, c22 = s00 * s11 - s01 * s01;
        const float det = s00 * c00 + s01 * c01 + s02 * c02;
        const float id = 1.0f / gf_select(fabsf(det) < det_min, 1.0f, det);
        i00[x] = c00 * id;
        i01[x] = c01 * id;
        i02[x] = c02 * id;
        i11[x] = c11 * id;
        i12[x] = c12 * id;
        i22[x] = c22 * id;
    }
    for (int64_t k = 0; k < sc; k++) {
        const float *restrict Sp = sum + (9 + k) * w, *restrict SIp = sum + (9 + sc + 3 * k) * w;
        float *restrict a0 = slot + 3 * k * w, *restrict a1 = a0 + w, *restrict a2 = a0 + 2 * w,
              *restrict b = slot + (3 * sc + k) * w;
        #pragma GCC ivdep
        for (int64_t x = 0; x < w; x++) {
            const float m0 = S0[x] * ia, m1 = S1[x] * ia, m2 = S2[x] * ia, mp = Sp[x] * ia;
            const float v0 = SIp[x] * ia - m0 * mp, v1 = SIp[w + x] * ia - m1 * mp,
                        v2 = SIp[2 * w + x] * ia - m2 * mp;
            const float x0 = i00[x] * v0 + i01[x] * v1 + i02[x] * v2;
            const float x1 = i01[x] * v0 + i11[x] * v1 + i12[x] * v2;
            const float x2 = i02[x] * v0 + i12[x] * v1 + i22[x] * v2;
            a0[x] = x0;
            a1[x] = x1;
            a2[x] = x2;
            b[x] = mp - x0 * m0 - x1 * m1 - x2 * m2;
        }
    }
}

/* q of row y from stage-2 window sums (sum2) and the guide row; with a detail gain, the row is
 * then blended with src while it is in L1: q + detail * (p - q). */
static void gf_output(const gf_t *g, gf_scratch *s, int64_t y) {
    const int64_t w = g->w, sc = g->sc, gc = g->gc;
    const float ia = (float)(1.0 / ((double)(2 * g->r + 1) * (double)(2 * g->r + 1)));
    const float *gp = g->guide + y * w * gc;
    if (gc > 1) {
        gf_deinterleave(gp, gc, w, s->ga);
        gp = s->ga;
    }
    float *orow = g->out + y * w * sc;
    if (gc == 1 && sc == 3) { /* interleaved in the same pass: no planar row, no extra pass */
        const float *restrict I = gp, *restrict S = s->sum2;
        float *restrict o = orow;
        for (int64_t x = 0; x < w; x++) {
            o[3 * x] = (S[x] * I[x] + S[3 * w + x]) * ia;
            o[3 * x + 1] = (S[w + x] * I[x] + S[4 * w + x]) * ia;
            o[3 * x + 2] = (S[2 * w + x] * I[x] + S[5 * w + x]) * ia;
        }
    } else {
        float *planar = sc == 1 ? orow : s->oq;
        for (int64_t k = 0; k < sc; k++) {
            const float *restrict Sb = s->sum2 + (gc * sc + k) * w;
            float *restrict o = planar + k * w;
            if (gc == 1) {
                const float *restrict Sa = s->sum2 + k * w, *restrict I = gp;
                for (int64_t x = 0; x < w; x++) o[x] = (Sa[x] * I[x] + Sb[x]) * ia;
            } else {
                const float *restrict Sa0 = s->sum2 + 3 * k * w, *restrict Sa1 = Sa0 + w,
                            *restrict Sa2 = Sa0 + 2 * w;
                const float *restrict I0 = gp, *restrict I1 = gp + w, *restrict I2 = gp + 2 * w;
                for (int64_t x = 0; x < w; x++)
                    o[x] = ((Sa0[x] * I0[x] + Sa1[x] * I1[x]) + (Sa2[x] * I2[x] + Sb[x])) * ia;
            }
        }
        if (sc > 1) gf_interleave(planar, sc, w, orow);
    }
    if (g->detail != 0.0f) {
        const float d = g->detail, *restrict p = g->src + y * w * sc;
        float *restrict o = orow;
        for (int64_t i = 0; i < w * sc; i++) o[i] += d * (p[i] - o[i]);
    }
}

#include "exact_band.h"
#include "float_band.h"

/* --- scratch ---------------------------------------------------------------------------------- */

static size_t gf_round(size_t bytes) { return (bytes + GF_ALIGN - 1) / GF_ALIGN * GF_ALIGN; }

static int gf_scratch_alloc(const gf_t *g, gf_scratch *s) {
    const size_t w = (size_t)g->w, k1 = (size_t)g->k1, k2 = (size_t)g->k2, fs = sizeof(float),
                 ds = sizeof(double), plen = (size_t)g->pad_len;
    const size_t sizes[] = {
        gf_round(k1 * w * ds), gf_round(k2 * w * ds),                        /* cs1, cs2 */
        gf_round(k1 * w * fs), gf_round(k2 * w * fs),                        /* sum1, sum2 */
        gf_round(plen * fs), gf_round(plen * fs), gf_round(plen * fs),       /* pad, s4, s16 */
        gf_round((size_t)g->gc * w * fs), gf_round((size_t)g->gc * w * fs),  /* ga, gb */
        gf_round((size_t)g->sc * w * fs), gf_round((size_t)g->sc * w * fs),  /* sa, sb */
        gf_round(6 * w * fs), gf_round((size_t)g->sc * w * fs),              /* inv, oq */
        gf_round((size_t)g->ring * k2 * w * fs),                             /* ring */
        gf_round((size_t)g->h * sizeof(int64_t)),                            /* cnt */
        gf_round(g->fast ? k1 * plen * fs : 0), gf_round(g->fast ? k2 * plen * fs : 0), /* cf1, cf2 */
        gf_round(g->fast ? k1 * plen * fs : 0), gf_round(g->fast ? k2 * plen * fs : 0), /* nf1, nf2 */
        gf_round(g->fused ? (k1 + k2) * 2 * plen * fs : 0), gf_round(g->fused ? w * fs : 0),
                                                                         /* blocks, zero */
        gf_round(g->fast ? (size_t)(g->ring * ((g->gc > 1 ? g->gc : 0) + (g->sc > 1 ? g->sc : 0)))
                               * w * fs : 0),                                           /* srows */
        gf_round((size_t)g->ring * sizeof(int64_t)),                             /* stag */
    };
    size_t total = GF_ALIGN;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) total += sizes[i];
    s->block = malloc(total);
    if (!s->block) return A2R_ENOMEM;
    char *p = (char *)(((uintptr_t)s->block + GF_ALIGN - 1) / GF_ALIGN * GF_ALIGN);
    void **dst[] = {(void **)&s->cs1, (void **)&s->cs2, (void **)&s->sum1, (void **)&s->sum2,
                    (void **)&s->pad, (void **)&s->s4, (void **)&s->s16, (void **)&s->ga,
                    (void **)&s->gb, (void **)&s->sa, (void **)&s->sb, (void **)&s->inv,
                    (void **)&s->oq, (void **)&s->ringbuf, (void **)&s->cnt,
                    (void **)&s->cf1, (void **)&s->cf2, (void **)&s->nf1, (void **)&s->nf2,
                    (void **)&s->blocks, (void **)&s->zero,
                    (void **)&s->srows, (void **)&s->stag};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        *dst[i] = p;
        p += sizes[i];
    }
    if (g->fused) memset(s->zero, 0, (size_t)g->w * sizeof(float));
    return A2R_OK;
}

int A2R_KERNEL(a2r_guided_filter)(const float *guide, int64_t gc, const float *src, int64_t sc,
                                  int64_t h, int64_t w, int64_t r, float eps, float detail,
                                  float *out) {
    gf_t g = {guide, src, out, gc, sc, h, w, r, eps, detail};
    g.k1 = gc + gc * (gc + 1) / 2 + sc + sc * gc;
    g.k2 = sc * (gc + 1);
    g.ring = A2R_MIN(2 * r + 2, h);
    const int64_t len = 2 * r + 1, period = 2 * w;
    if (len < period) {
        g.hlen = len;
        g.hstart = -r;
    } else { /* drop whole periods: they add 2 * (row sum) each */
        g.hfull = len / period;
        g.hlen = len % period;
        g.hstart = ((-r) % period + period) % period;
    }
    g.pad_len = w + A2R_MAX(g.hlen, 1) - 1;
    g.fast = g.hfull == 0;
    g.resum = A2R_MAX(GF_RESUM_ROWS, 2 * r + 1);
    g.fused = g.fast && gc == 1 && sc == 1 && g.hlen <= GF_BLOCK_MAX && GF_NTERMS(g.hlen) <= 5;

    /* Bands: one per thread, when the image is worth it; each band costs r extra stage-1 rows
     * per side, so a band is never thinner than that. */
    int64_t nb = a2r_num_threads();
    if (h * w * (g.k1 + g.k2) < 4 * A2R_PAR_GRAIN) nb = 1;
    nb = A2R_MAX(1, A2R_MIN(nb, h / A2R_MAX(r, 1)));
    gf_scratch stack_one, *sc_all = &stack_one;
    if (nb > 1) {
        sc_all = malloc((size_t)nb * sizeof(gf_scratch));
        if (!sc_all) return A2R_ENOMEM;
    }
    for (int64_t b = 0; b < nb; b++) {
        if (gf_scratch_alloc(&g, &sc_all[b]) != A2R_OK) {
            for (int64_t i = 0; i < b; i++) free(sc_all[i].block);
            if (sc_all != &stack_one) free(sc_all);
            return A2R_ENOMEM;
        }
    }
    #pragma omp parallel for schedule(static, 1) num_threads((int)nb) if (nb > 1)
    for (int64_t b = 0; b < nb; b++) {
        if (g.fast)
            gf_band_float(&g, &sc_all[b], h * b / nb, h * (b + 1) / nb);
        else
            gf_band(&g, &sc_all[b], h * b / nb, h * (b + 1) / nb);
    }
    for (int64_t b = 0; b < nb; b++) free(sc_all[b].block);
    if (sc_all != &stack_one) free(sc_all);
    return A2R_OK;
}
