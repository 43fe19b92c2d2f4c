/* channel_stats kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * Threads split the flat nc*hw range (moments.h): whole planes are reduced by one thread; a plane
 * cut between threads is reduced in pieces whose moments are Chan-merged after a barrier. */
#include <math.h>

#include "a2r_isa.h"
#include "moments.h"

static inline void store_stats(a2r_moments m, float eps, float *mean, float *stdv) {
    *mean = (float)m.mean;
    *stdv = (float)sqrt(m.m2 / m.n + (double)eps);
}

void A2R_KERNEL(a2r_channel_stats)(const float *restrict x, int64_t nc, int64_t hw, float eps,
                                   float *restrict mean, float *restrict stdv) {
    const int nt = a2r_plane_threads(nc, hw);
    a2r_shared_piece pieces[2 * nt];
    #pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const int t = A2R_THREAD_ID(), tn = A2R_THREAD_COUNT();
        const a2r_span s = a2r_thread_span(nc, hw, t, tn);
        a2r_publish_shared(x, hw, s, pieces, t);
        for (int64_t p = s.p0; p <= s.p1; p++) {
            int64_t b, e;
            a2r_span_piece(s, p, hw, &b, &e);
            if (b == 0 && e == hw)
                store_stats(a2r_range_moments(x + p * hw, hw), eps, mean + p, stdv + p);
        }
        #pragma omp barrier
        /* A shared plane is stored by the thread holding its first element. */
        for (int j = 0; j < 2; j++) {
            const int64_t p = pieces[2 * t + j].plane;
            if (p >= 0 && s.lo <= p * hw)
                store_stats(a2r_gather_shared(pieces, tn, p), eps, mean + p, stdv + p);
        }
    }
}
