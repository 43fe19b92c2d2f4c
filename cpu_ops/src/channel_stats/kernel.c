/* channel_stats kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * Threads split the flat nc*hw range (moments.h): whole planes are reduced by one thread; a plane
 * cut between threads is reduced in pieces whose moments are Chan-merged after a barrier. */
#include <math.h>

#include "a2r_isa.h"
#include "moments.h"

typedef struct {
    float eps, *mean, *stdv;
} stats_out;

static void store_stats(void *ctx, int64_t p, a2r_moments m) {
    const stats_out *o = ctx;
    o->mean[p] = (float)m.mean;
    o->stdv[p] = (float)sqrt(m.m2 / m.n + (double)o->eps);
}

void A2R_KERNEL(a2r_channel_stats)(const float *restrict x, int64_t nc, int64_t hw, float eps,
                                   float *restrict mean, float *restrict stdv) {
    const int nt = a2r_plane_threads(nc, hw);
    a2r_shared_piece pieces[2 * nt];
    stats_out out = {eps, mean, stdv};
    #pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const int t = A2R_THREAD_ID(), tn = A2R_THREAD_COUNT();
        a2r_span_plane_moments(x, hw, a2r_thread_span(nc, hw, t, tn), pieces, t, tn,
                               store_stats, &out);
    }
}
