/* moments.h - per-plane mean and biased variance, shared by channel_stats, adalin and adain (which
 * computes a plane's statistics and applies them while the plane is in cache).
 *
 * Accuracy without a float64 scalar loop (which does not vectorise without -ffast-math):
 *   - a range is cut into blocks of A2R_MOM_BLOCK floats (1024 on SSE2 .. 4096 on AVX-512);
 *   - each block sums d = x - pivot and d*d in A2R_MOM_LANES independent float lanes, 64 terms a
 *     lane (~64 ulp at worst, far below the 1e-4 contract); the pivot is the running mean of the
 *     blocks before it (the range's first block: its own mean, one extra pass over it in L1), so
 *     d is centred and there is no E[x^2] - E[x]^2 cancellation (bound: a2r_moments_add_block);
 *   - each block's lanes fold into float64 (n, mean, M2); blocks, thread pieces and planes merge
 *     with Chan et al.'s pairwise update, in float64.
 * The lanes are 4 vector registers per sum (a2r_vf), written out: as unrolled plain C, GCC 12's
 * vectoriser kept them in registers in channel_stats but spilled the sum lanes to scalar stack
 * slots once inlined into adain (64x256x256 on 1 thread: 2.9 ms, where channel_stats plus a
 * separate apply took 1.45 ms), and SSE2 needed an SLP-only attribute. channel_stats of 32
 * planes of 128x128 (L2) on Zen 4, 1 thread: 19 Gfloat/s (AVX-512), 16 (AVX2). A block whose
 * float lane sums overflow (finite values near FLT_MAX) is redone in float64
 * (a2r_block_moments_f64). NaN or inf anywhere in a plane gives a NaN result. */
#ifndef A2R_MOMENTS_H
#define A2R_MOMENTS_H

#include "a2r_isa.h"

/* 4 vectors per accumulator array: 4 independent add/FMA chains each hide the 4-cycle latency. */
#define A2R_MOM_VECS 4
#define A2R_MOM_LANES (A2R_MOM_VECS * A2R_VEC_FLOATS)
/* Terms per float lane in a block: its lane sums carry ~A2R_MOM_TERMS ulps of error at worst;
 * 64 amortises the per-block fold and merge (channel_stats of 32 planes of 128x128, AVX-512, 1
 * thread, Zen 4: 16: 17.0, 32: 18.5, 64: 19.0, 128: 16.4 Gfloat/s). */
#ifndef A2R_MOM_TERMS
#define A2R_MOM_TERMS 64
#endif
#define A2R_MOM_BLOCK (A2R_MOM_TERMS * A2R_MOM_LANES)

/* Count, mean and sum of squared deviations (M2; biased variance = m2 / n) of a range. */
typedef struct {
    double n, mean, m2;
} a2r_moments;

static const a2r_moments a2r_moments_empty = {0.0, 0.0, 0.0};

/* Chan, Golub & LeVeque pairwise merge: exact in exact arithmetic, stable in float64. */
static inline a2r_moments a2r_moments_merge(a2r_moments a, a2r_moments b) {
    if (a.n == 0.0) return b;
    if (b.n == 0.0) return a;
    const double n = a.n + b.n, d = b.mean - a.mean;
    a2r_moments r = {n, a.mean + d * (b.n / n), a.m2 + b.m2 + d * d * (a.n * (b.n / n))};
    return r;
}

/* Sum of float lanes v[0..A2R_MOM_LANES): halving (elementwise, so vectorised) down to 4 lanes,
 * then float64. The tree adds log2(LANES/4) roundings, ~4 ulp; a serial float64 sum of every lane
 * would be a latency chain longer than the block's two passes. Clobbers v. */
static inline double a2r_lanes_sum(float *restrict v) {
    #pragma GCC unroll 8
    for (int w = A2R_MOM_LANES / 2; w >= 4; w /= 2)
        #pragma GCC unroll 32
        for (int k = 0; k < w; k++) v[k] += v[k + w];
    return ((double)v[0] + (double)v[1]) + ((double)v[2] + (double)v[3]);
}

/* Mean of a block by pass 1 (float lanes): the pivot of a range's first block. */
static inline float a2r_block_mean(const float *restrict x, int64_t n) {
    const int64_t nv = n - n % A2R_MOM_LANES;
    a2r_vf acc[A2R_MOM_VECS] = {{0.0f}};
    for (int64_t i = 0; i < nv; i += A2R_MOM_LANES)
        for (int j = 0; j < A2R_MOM_VECS; j++) acc[j] += a2r_vload(x + i + j * A2R_VEC_FLOATS);
    float lanes[A2R_MOM_LANES];
    __builtin_memcpy(lanes, acc, sizeof lanes);
    double t = a2r_lanes_sum(lanes);
    for (int64_t i = nv; i < n; i++) t += x[i];
    return (float)(t / (double)n);
}

/* Two-pass float64 moments of a block: the fallback where the float lanes overflow (finite
 * values near FLT_MAX: d = x - pivot or d*d beyond 3.4e38). Non-finite input gives NaN. */
static a2r_moments a2r_block_moments_f64(const float *x, int64_t n) {
    double s = 0.0, q = 0.0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    const double mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) q += ((double)x[i] - mean) * ((double)x[i] - mean);
    a2r_moments r = {(double)n, mean, q};
    if (!__builtin_isfinite(mean) || !__builtin_isfinite(q)) r.mean = r.m2 = __builtin_nan("");
    return r;
}

/* Moments of one block, 1 <= n <= A2R_MOM_BLOCK, from sums of d = x - pivot in float lanes. */
static inline a2r_moments a2r_block_moments(const float *restrict x, int64_t n, float pivot) {
    const int64_t nv = n - n % A2R_MOM_LANES;
    const double inv_n = 1.0 / (double)n;
    a2r_vf sv[A2R_MOM_VECS] = {{0.0f}}, qv[A2R_MOM_VECS] = {{0.0f}};
    for (int64_t i = 0; i < nv; i += A2R_MOM_LANES)
        for (int j = 0; j < A2R_MOM_VECS; j++) {
            const a2r_vf d = a2r_vload(x + i + j * A2R_VEC_FLOATS) - pivot;
            sv[j] += d;
            qv[j] = A2R_VMADD(d, d, qv[j]);
        }
    float s[A2R_MOM_LANES], q[A2R_MOM_LANES];
    __builtin_memcpy(s, sv, sizeof s);
    __builtin_memcpy(q, qv, sizeof q);
    double sd = a2r_lanes_sum(s), qd = a2r_lanes_sum(q);
    if (!__builtin_isfinite(sd) || !__builtin_isfinite(qd)) /* overflow, or NaN/inf input */
        return a2r_block_moments_f64(x, n);
    for (int64_t i = nv; i < n; i++) {
        const double d = (double)x[i] - pivot;
        sd += d;
        qd += d * d;
    }
    /* M2 = sum (x - mean)^2 = sum d^2 - (sum d)^2 / n: the subtraction loses about
     * (mean - pivot)^2 * n / M2 ulps of the lane sums' precision. */
    const double m2 = qd - sd * (sd * inv_n);
    a2r_moments r = {(double)n, (double)pivot + sd * inv_n, m2 < 0.0 ? 0.0 : m2}; /* NaN stays */
    return r;
}

/* Running moments m of a range extended by its next nb floats (1 <= nb <= A2R_MOM_BLOCK). The
 * range's first block is pivoted on its own mean (pass 1); every later block on the running mean
 * of the blocks before it, so it is read once. Error bound: a block pivoted delta away from its
 * mean loses ~n_b * delta^2 * (lane error), and the Chan merge adds
 * n_a * n_b / (n_a + n_b) * delta^2 >= n_b * delta^2 / 2 to M2 (n_a >= n_b), so each block's
 * error stays within 2 * (lane error) of what it adds to M2: no catastrophic cancellation
 * whatever the data (a dark top half and a bright bottom half included). */
static inline a2r_moments a2r_moments_add_block(a2r_moments m, const float *restrict x,
                                                int64_t nb) {
    if (m.n == 0.0) return a2r_block_moments(x, nb, a2r_block_mean(x, nb));
    return a2r_moments_merge(m, a2r_block_moments(x, nb, (float)m.mean));
}

/* Moments of n >= 0 consecutive floats. */
static inline a2r_moments a2r_range_moments(const float *restrict x, int64_t n) {
    a2r_moments m = a2r_moments_empty;
    for (int64_t i = 0; i < n; i += A2R_MOM_BLOCK)
        m = a2r_moments_add_block(m, x + i, A2R_MIN(A2R_MOM_BLOCK, n - i));
    return m;
}

/* Threads for nc planes of hw floats: each gets >= A2R_PAR_GRAIN elements. */
static inline int a2r_plane_threads(int64_t nc, int64_t hw) {
    const int64_t by_work = nc * hw / A2R_PAR_GRAIN;
    const int nt = a2r_num_threads();
    return by_work < 1 ? 1 : (by_work < nt ? (int)by_work : nt);
}

/* Thread t of nt owns the flat element range [lo, hi) of nc*hw: equal shares, so 1-3 large
 * planes still split across threads. Inner cuts are rounded down to 16 floats (a 64-byte line)
 * so that no cache line of the output is written by two threads. Planes p0..p1 intersect it. */
typedef struct {
    int64_t lo, hi, p0, p1;
} a2r_span;

static inline a2r_span a2r_thread_span(int64_t nc, int64_t hw, int t, int nt) {
    const int64_t total = nc * hw;
    a2r_span s;
    s.lo = t == 0 ? 0 : (int64_t)((double)total * t / nt) & ~(int64_t)15;
    s.hi = t == nt - 1 ? total : (int64_t)((double)total * (t + 1) / nt) & ~(int64_t)15;
    s.p0 = s.lo / hw;
    s.p1 = s.hi > s.lo ? (s.hi - 1) / hw : s.p0;
    return s;
}

/* The part [b, e) of plane p inside span s, as plane-relative offsets (e <= b: none). */
static inline void a2r_span_piece(a2r_span s, int64_t p, int64_t hw, int64_t *b, int64_t *e) {
    const int64_t lo = s.lo > p * hw ? s.lo : p * hw;
    const int64_t hi = s.hi < (p + 1) * hw ? s.hi : (p + 1) * hw;
    *b = lo - p * hw;
    *e = hi - p * hw;
}

/* Pieces of planes shared between threads: their partial moments, published before a barrier.
 * Each thread has at most two (its first and its last plane); plane = -1 when unused. */
typedef struct {
    int64_t plane;
    a2r_moments m;
} a2r_shared_piece;

/* Thread t computes the moments of its shared pieces into pieces[2t], pieces[2t+1]. */
static inline void a2r_publish_shared(const float *x, int64_t hw, a2r_span s,
                                      a2r_shared_piece *pieces, int t) {
    for (int j = 0; j < 2; j++) {
        const int64_t p = j == 0 ? s.p0 : s.p1;
        int64_t b, e;
        a2r_span_piece(s, p, hw, &b, &e);
        pieces[2 * t + j].plane = -1;
        if ((j == 1 && s.p1 == s.p0) || e <= b || (b == 0 && e == hw)) continue;
        pieces[2 * t + j].plane = p;
        pieces[2 * t + j].m = a2r_range_moments(x + p * hw + b, e - b);
    }
}

/* Whole-plane moments of shared plane p, merged in thread order (deterministic per nt). */
static inline a2r_moments a2r_gather_shared(const a2r_shared_piece *pieces, int nt, int64_t p) {
    a2r_moments m = a2r_moments_empty;
    for (int i = 0; i < 2 * nt; i++)
        if (pieces[i].plane == p) m = a2r_moments_merge(m, pieces[i].m);
    return m;
}

/* Thread t of tn, inside a parallel region that every thread of it enters (it holds a barrier):
 * the whole-plane moments of each plane that span s touches, handed to store(ctx, p, m) by exactly
 * one thread: a plane within the span at once, a plane cut between threads (its pieces merged
 * by a2r_gather_shared) after the barrier, by the thread holding its first element. pieces:
 * 2 * tn, shared by the threads. */
static inline void a2r_span_plane_moments(const float *x, int64_t hw, a2r_span s,
                                          a2r_shared_piece *pieces, int t, int tn,
                                          void (*store)(void *ctx, int64_t p, a2r_moments m),
                                          void *ctx) {
    a2r_publish_shared(x, hw, s, pieces, t);
    for (int64_t p = s.p0; p <= s.p1; p++) {
        int64_t b, e;
        a2r_span_piece(s, p, hw, &b, &e);
        if (b == 0 && e == hw) store(ctx, p, a2r_range_moments(x + p * hw, hw));
    }
    #pragma omp barrier
    for (int j = 0; j < 2; j++) {
        const int64_t p = pieces[2 * t + j].plane;
        if (p >= 0 && s.lo <= p * hw) store(ctx, p, a2r_gather_shared(pieces, tn, p));
    }
}

#endif
