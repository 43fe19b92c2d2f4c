#include "a2r_dispatch.h"

A2R_VARIANTS(void, a2r_channel_stats, (const float *x, int64_t nc, int64_t hw, float eps,
                                       float *mean, float *stdv))

void a2r_channel_stats(const float *x, int64_t nc, int64_t hw, float eps, float *mean,
                       float *stdv) {
    A2R_PICK(a2r_channel_stats)(x, nc, hw, eps, mean, stdv);
}
