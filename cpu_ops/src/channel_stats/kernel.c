/* channel_stats kernel body (contract: a2r_kernels.h). Compiled once per ISA level. */
#include <math.h>

#include "a2r_isa.h"
#include "moments.h"

void A2R_KERNEL(a2r_channel_stats)(const float *restrict x, int64_t nc, int64_t hw, float eps,
                                   float *restrict mean, float *restrict stdv) {
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (nc * hw > A2R_PAR_GRAIN)
    for (int64_t p = 0; p < nc; p++) {
        double m, v;
        a2r_plane_moments(x + p * hw, hw, &m, &v);
        mean[p] = (float)m;
        stdv[p] = (float)sqrt(v + (double)eps);
    }
}
