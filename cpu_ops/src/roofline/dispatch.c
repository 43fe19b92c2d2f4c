#include "a2r_dispatch.h"

A2R_VARIANTS(double, a2r_fma_peak, (int64_t iters, float *sink))

double a2r_fma_peak(int64_t iters, float *sink) { return A2R_PICK(a2r_fma_peak)(iters, sink); }
