/* moments.h - per-plane mean and biased variance, shared by channel_stats and adain (which
 * computes a plane's statistics and applies them while the plane is in cache). */
#ifndef A2R_MOMENTS_H
#define A2R_MOMENTS_H

#include "a2r_isa.h"

/* Mean and biased variance of n floats: sums of (x - pivot) in double, pivot = x[0], so a large
 * common offset (mean 1000, std 1) cancels before it can swamp the variance. */
static inline void a2r_plane_moments(const float *restrict x, int64_t n, double *mean,
                                     double *var) {
    const double pivot = x[0];
    double s = 0.0, s2 = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)x[i] - pivot;
        s += d;
        s2 += d * d;
    }
    double m = s / (double)n;
    double v = s2 / (double)n - m * m;
    *mean = pivot + m;
    *var = v > 0.0 ? v : 0.0;
}

#endif
