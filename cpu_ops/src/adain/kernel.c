/* adain kernel body (contract: a2r_kernels.h). Compiled once per ISA level.
 * Plane by plane: statistics (unless given), then y = (x - mu) * a + style_mean (+ activation) while the plane is
 * still in cache. */
#include <math.h>

#include "a2r_isa.h"
#include "a2r_math.h"
#include "../channel_stats/moments.h"

void A2R_KERNEL(a2r_adain)(const float *x, int64_t nc, int64_t hw, const float *style_mean,
                           const float *style_std, const float *content_mean,
                           const float *content_std, float eps, int activation, float *y) {
    #pragma omp parallel for schedule(static) num_threads(a2r_num_threads()) if (nc * hw > A2R_PAR_GRAIN)
    for (int64_t p = 0; p < nc; p++) {
        const float *src = x + p * hw;
        float *dst = y + p * hw;
        float mu, sigma;
        if (content_mean) {
            mu = content_mean[p];
            sigma = content_std[p];
        } else {
            double m, v;
            a2r_plane_moments(src, hw, &m, &v);
            mu = (float)m;
            sigma = (float)sqrt(v + (double)eps);
        }
        /* (x - mu) first: with a large common offset, x*a + (sm - mu*a) would cancel badly. */
        const float a = style_std[p] / sigma, sm = style_mean[p];
        if (activation == A2R_ACT_SILU) {
            for (int64_t i = 0; i < hw; i++) dst[i] = a2r_silu1(A2R_MADD(src[i] - mu, a, sm));
        } else {
            for (int64_t i = 0; i < hw; i++) dst[i] = A2R_MADD(src[i] - mu, a, sm);
        }
    }
}
