#include "a2r_dispatch.h"

A2R_VARIANTS(void, a2r_silu, (const float *x, float *y, int64_t n))

void a2r_silu(const float *x, float *y, int64_t n) { A2R_PICK(a2r_silu)(x, y, n); }
