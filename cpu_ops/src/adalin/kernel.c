/* adalin kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * Two passes over x, threads splitting the flat n*c*hw range as adain does (moments.h):
 *   1. every plane's moments (a plane cut between threads: its pieces Chan-merged after a
 *      barrier by the thread holding its first element), kept as (mean, M2) in `moments`;
 *   2. after a second barrier, each thread merges the c planes of each sample it touches into the
 *      sample's moments (in plane order: the same result on every thread), turns both statistics,
 *      the two weights, gamma and beta into one (mu, a, sm) per plane and applies its own range
 *      with the shared apply pass (norm_apply.h).
 * The layer statistics need the whole sample before any of it can be written, so unlike adain
 * there is no apply while a plane is still in cache from its statistics. */
#include <math.h>

#include "a2r_isa.h"
#include "moments.h"
#include "norm_apply.h"

static void keep(void *moments, int64_t p, a2r_moments m) {
    double *dst = (double *)moments + 2 * p;
    dst[0] = m.mean;
    dst[1] = m.m2;
}

static inline a2r_moments kept(const double *src, int64_t hw) {
    a2r_moments m = {(double)hw, src[0], src[1]};
    return m;
}

void A2R_KERNEL(a2r_adalin)(const float *x, int64_t n, int64_t c, int64_t hw,
                            const float *in_weight, const float *ln_weight, const float *gamma,
                            const float *beta, float in_eps, float ln_eps, int activation,
                            float alpha, double *moments, float *y) {
    const int64_t nc = n * c;
    const int nt = a2r_plane_threads(nc, hw);
    const int stream = a2r_norm_streams(x, NULL, y, nc * hw);
    a2r_shared_piece pieces[2 * nt];
    #pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const int t = A2R_THREAD_ID(), tn = A2R_THREAD_COUNT();
        const a2r_span s = a2r_thread_span(nc, hw, t, tn);
        a2r_span_plane_moments(x, hw, s, pieces, t, tn, keep, moments);
        #pragma omp barrier
        int64_t sample = -1;
        a2r_moments layer = a2r_moments_empty;
        for (int64_t p = s.p0; p <= s.p1; p++) {
            int64_t b, e;
            a2r_span_piece(s, p, hw, &b, &e);
            if (e <= b) continue;
            if (p / c != sample) {
                sample = p / c;
                layer = a2r_moments_empty;
                for (int64_t k = sample * c; k < (sample + 1) * c; k++)
                    layer = a2r_moments_merge(layer, kept(moments + 2 * k, hw));
            }
            /* gamma * (wi * (x - mu_p) + wl * (x - mu_s)) + beta
             *   = (x - mu) * a + beta + gamma * wl * (mu_p - mu_s) + a * (mu - mu_p),
             * a = gamma * (wi + wl), wi and wl the weights over each statistic's std, mu = mu_p
             * rounded to float (the last term undoes that rounding, which a sharp plane far
             * from 0 would otherwise magnify by a); float64, each coefficient rounded once. */
            const a2r_moments plane = kept(moments + 2 * p, hw);
            const int64_t ch = p % c;
            const double wi = in_weight[ch] / sqrt(plane.m2 / plane.n + (double)in_eps);
            const double wl = ln_weight[ch] / sqrt(layer.m2 / layer.n + (double)ln_eps);
            const double g = gamma[p], a = g * (wi + wl);
            const float mu = (float)plane.mean;
            const double sm = beta[p] + g * wl * (plane.mean - layer.mean) +
                              a * ((double)mu - plane.mean);
            a2r_norm_apply_to(stream, x + p * hw + b, NULL, y + p * hw + b, e - b, mu, (float)a,
                              (float)sm, activation, alpha);
        }
        if (stream) a2r_stream_fence();
    }
}
