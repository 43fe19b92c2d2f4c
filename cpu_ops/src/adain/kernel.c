/* adain kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * Each thread owns an equal share of the flat nc*hw range (moments.h).
 *   - A plane it owns whole: its statistics (one read from memory), then the apply while it is
 *     still in L2 (one write). Interleaving the apply of plane p with the statistics of p+1, to
 *     overlap the two streams, measured no faster (Zen 4, 64 KB-8 MB planes): kept simple.
 *   - A plane cut between threads: each thread computes its piece's moments, a barrier, each
 *     merges all pieces (Chan) and applies its own piece, still in its cache.
 *   - Given statistics: a plain apply of the thread's range.
 * The apply pass (norm_apply.h) is shared with adalin. Out of place, where x and y together fill
 * the last-level cache (a2r_norm_streams), y is written with streaming stores: 64 planes of
 * 256^2 (2 x 16.8 MB against Zen 4's 32 MB) after a numpy pass, medians of 15, 1.16-1.26x on 1
 * thread and 1.16x on 2. */
#include <math.h>

#include "a2r_isa.h"
#include "moments.h"
#include "norm_apply.h"

/* The residual from offset i on (NULL: none). */
#define R(i) (residual ? residual + (i) : NULL)

/* Per-plane apply coefficients: y = (x - mu) * a + sm. a in float64 before rounding once. */
typedef struct {
    float mu, a, sm;
} coeffs;

static inline coeffs from_moments(a2r_moments m, float style_mean, float style_std, float eps) {
    coeffs c = {(float)m.mean, (float)((double)style_std / sqrt(m.m2 / m.n + (double)eps)),
                style_mean};
    return c;
}

void A2R_KERNEL(a2r_adain)(const float *x, int64_t nc, int64_t hw, const float *style_mean,
                           const float *style_std, const float *content_mean,
                           const float *content_std, float eps, int activation, float alpha,
                           const float *residual, float *y) {
    const int nt = a2r_plane_threads(nc, hw);
    const int stream = a2r_norm_streams(x, residual, y, nc * hw);
    a2r_shared_piece pieces[2 * nt];
    #pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const int t = A2R_THREAD_ID(), tn = A2R_THREAD_COUNT();
        const a2r_span s = a2r_thread_span(nc, hw, t, tn);
        if (content_mean) {
            for (int64_t p = s.p0; p <= s.p1; p++) {
                int64_t b, e;
                a2r_span_piece(s, p, hw, &b, &e);
                const float a = (float)((double)style_std[p] / (double)content_std[p]);
                a2r_norm_apply_to(stream, x + p * hw + b, R(p * hw + b), y + p * hw + b, e - b,
                                  content_mean[p], a, style_mean[p], activation, alpha);
            }
        } else {
            a2r_publish_shared(x, hw, s, pieces, t);
            #pragma omp barrier
            for (int j = 0; j < 2; j++) {
                const int64_t p = pieces[2 * t + j].plane;
                if (p < 0) continue;
                const coeffs c = from_moments(a2r_gather_shared(pieces, tn, p), style_mean[p],
                                              style_std[p], eps);
                int64_t b, e;
                a2r_span_piece(s, p, hw, &b, &e);
                a2r_norm_apply_to(stream, x + p * hw + b, R(p * hw + b), y + p * hw + b, e - b,
                                  c.mu, c.a, c.sm, activation, alpha);
            }
            /* Planes owned whole: statistics, then the apply while the plane is in L2. */
            for (int64_t p = s.p0; p <= s.p1; p++) {
                int64_t b, e;
                a2r_span_piece(s, p, hw, &b, &e);
                if (b != 0 || e != hw) continue;
                const coeffs c = from_moments(a2r_range_moments(x + p * hw, hw),
                                              style_mean[p], style_std[p], eps);
                a2r_norm_apply_to(stream, x + p * hw, R(p * hw), y + p * hw, hw, c.mu, c.a, c.sm,
                                  activation, alpha);
            }
        }
        if (stream) a2r_stream_fence();
    }
}
